"""Layout of the packed model and of the per-call work array (see model.py and
algorithms/_common.work_views): shared by the model builder and every compiled kernel."""

HEADER_I = 4
HEADER_F = 4
BODY_STRIDE = 25
DOF_STRIDE = 9
# work array per body (see algorithms/_common.work_views): E 9, r 3, v 6, a 6, f 6, c 6, IA 36, pA 6,
# R 9, p 3, Dinv 36; per dof: U 6, u 1, d 1; plus 172 scratch
WORK_BODY = 126
WORK_DOF = 8
WORK_EXTRA = 172
