"""dynamics_identify: a robot's inertial parameters and joint friction from a rosbag2 recording of its
joint states, offline and without ROS. ``python -m dynamics_node.identify`` or the console
script ``dynamics_identify`` (fit, evaluate, excite; see __main__). Nothing here imports rclpy or
dynamics_node.ros.

The method, each choice with its source:

- Reading (bag.py): rosbags (PyPI) reads sqlite3 and MCAP, folders and bare files; JointState
  messages of several publishers are merged per joint name, as the node merges them.
- Resampling, filtering, differentiation (signals.py): a uniform grid at the recording's rate (linear
  interpolation per joint: irregular stamps, split publishers); a zero-phase 4th-order Butterworth
  low-pass (forward-backward, so torque and state keep their phase) on positions and efforts alike,
  its cutoff 5 x the motion's bandwidth within [1, 20] Hz and at most 0.2 x the sample rate; the
  derivatives of a quintic interpolating spline of the filtered positions (the recorded velocity is
  not needed); parallel filtering and decimation as in Gautier, "Dynamic identification of robots
  with power model" (ICRA 1997): the only non-smooth regressor column, sign(qd), goes through the
  same filter as the efforts.
- Regressor (stack.py, algorithms/estimation/regressor_batch.py): tau = Y(q, qd, qdd) pi + the joint law, pi the
  ten inertial parameters per body (Atkeson, An & Hollerbach 1986) and per joint the law's linear
  coefficients of the fit's class (joint_law.py: b qd + fc s(qd) [+ o + Ia qdd
  [+ fs exp(-(qd/vs)^2) s(qd)]], s = sign or tanh(qd / vc)). Stacked per joint as Gram matrices.
- The class and the law's nonlinear velocity scales vc, vs (classes.py): per joint from grids, by
  cross-validation in contiguous time blocks of the training window, each held-out block scored on
  its recorded (unfiltered) efforts; ``auto`` keeps the simplest class no richer one beats by more
  than 1 %.
- Base parameters (fit_params.py): numerical reduction of the regressor's columns by QR with column
  pivoting at random states (Gautier, "Numerical calculation of the base inertial parameters of
  robots", ICRA 1990; Gautier & Khalil 1990).
- Weighted least squares (fit.py): OLS, per-joint residual variance, weights 1/sigma_j^2, WLS
  (Gautier & Poignet, "Extended Kalman filtering and weighted least squares dynamic identification
  of robot", Control Eng. Practice 2001); standard deviations from (W^T W)^-1 sigma^2; a base
  parameter is "determined" when its standard deviation is below 10 % of its typical size.
- Physical consistency (fit.py): each body's 4 x 4 pseudo-inertia J(pi) >= eps J_ref (Wensing, Kim &
  Slotine, "Linear matrix inequalities for physically consistent inertial parameter
  identification", IEEE RA-L 2017), friction >= 0, solved as a semidefinite program with cvxpy and
  Clarabel (SCS as fallback); a weak, scale-equivariant pull toward the URDF's values acts only where
  the data say little, and what the data cannot tell from those values is held there (fit.py).
- Two fits when the class is richer than a URDF holds (solve.py): the law's (OUT.law.urdf with
  OUT.yaml) and the URDF class's own (OUT.urdf), since inertias fitted together with offsets and
  armature are not the best a URDF alone can carry.
- Output (urdf_out.py): the input URDF's XML with new <inertial> and <dynamics>, reloaded with
  strict=True before it replaces OUT.urdf; law_out.py: OUT.yaml beside it, the whole law as the
  node's parameter file; report.py: JSON and PNG (torques over time, friction curves).
- evaluate: the recording's joint states merged by joint name as the node merges them (signals.
  joint_states), each joint's recorded effort against the prediction at its own stamp (the filtered
  grid's states interpolated there), the law from OUT.yaml with the URDF its urdf_path names;
  nothing dropped at the filter's edges (signals.lowpass pads the recording's ends with a cubic
  trend).
- Excitation (excite.py): finite Fourier series optimised for the condition number of the base
  regressor (Swevers et al., IEEE T-RA 1997).
"""
