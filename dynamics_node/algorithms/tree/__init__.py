"""The tree algorithms (Featherstone Ch. 5-7, §9.1-9.7): inverse dynamics (rnea, rnea_batch), the mass
matrix (crba) and its factorisations (ltdl, dense), forward dynamics (aba) and hybrid dynamics (hybrid),
kinematics and Jacobians (kinematics, jacobians, coriolis, operational_space), mimic joints (mimic, §9.6),
joint limits (joint_limits), configuration-space integration (lie_group) and dynamic equivalence
(equivalence, §9.7).
"""
