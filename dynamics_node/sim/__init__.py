"""The simulator's physics, without ROS: dn.simulate_step's route (route) and compiled step (step), the
contacts a step selects (select), the simulated robot's environment (env) and collision points (shapes).
The ROS side (the sim world, its commands and publishing) is in dynamics_node/ros/.
"""
