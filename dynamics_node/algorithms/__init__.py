"""The algorithms, one package per chapter of Featherstone's book: tree/ (Ch. 5-7, §9.1-9.7), loops/
(Ch. 8), contact/ (Ch. 11), derivatives/ (analytic derivatives, linearisation) and estimation/
(regressor, payload identification, momentum observer). They read the packed model of the core
(dynamics_node/model.py, layout.py) and never import the simulator (dynamics_node/sim/) or ROS.
"""
