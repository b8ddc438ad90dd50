"""Memory layouts of the compiled kernels, by name: the packed model (``mi``, ``mf``, see model.py),
the per-call work array (algorithms/_common.work_views) and the batch kernel's blocks
(algorithms/rnea_batch).

Each layout is one table of fields (name, size, meaning) below, followed by its constants written out:
``<PREFIX>_<NAME>`` is the field's offset (the running sum of the sizes before it), ``<PREFIX>_<NAME>_N`` its
size where code needs it, and the table's total size is named too. test/test_core_layout.py checks that the
constants are the tables' running sums. numba reads module-level integers as compile-time constants, so a
kernel written as ``mf[bo + B_M]`` compiles to the same machine code as ``mf[bo + 12]``. The C shims read
the same constants from ``_layout.h``, which tools/gen_layout_header.py writes from these tables (a test
checks that the committed header is what the tables give). Code reads the packed model through the
accessors of ``packed.py`` (test/test_repo_rules.py checks that no other module sums these offsets).

Packed model (one int array, one float array; a numba call costs per argument):

    mi = [H_* header (HEADER_I) | per body i: J_* (BODY_I ints)]
    mf = [HF_* header (HEADER_F) | per body i: B_* (BODY_F floats) | per dof: D_* (DOF_F floats)]
    body i's ints at HEADER_I + BODY_I i, its floats at HEADER_F + BODY_F i, dof k's floats at
    HEADER_F + BODY_F nb + DOF_F k.

Work array of one call (struct of arrays: each per-body field is one block of nb entries):

    per body, W_*: field X of body i at  W_X nb + W_X_N i          (WORK_BODY floats per body)
    per dof,  V_*: field X of dof k at   WORK_BODY nb + V_X nvt + V_X_N k   (WORK_DOF per dof)
    scratch,  T_*: at                    WORK_BODY nb + WORK_DOF nvt + T_X  (WORK_EXTRA floats)

_fastcall.c sizes its per-thread work array with _layout.h's DN_WORK_SIZE (the same rule).
"""
from __future__ import annotations

# ---- the tables: (name, size, meaning) --------------------------------------------------------

MODEL_HEADER_I = (  # mi[0:HEADER_I]; the C shims read them through _layout.h
    ("NB", 1, "number of bodies nb (= moving kernel joints)"),
    ("NVT", 1, "tree velocity coordinates nvt"),
    ("NQT", 1, "tree position coordinates nqt"),
    ("NVU", 1, "user velocity coordinates nv (NVT less the mimic followers; the derivatives' C fronts size "
                "their results by it)"),
)
H_NB = 0
H_NVT = 1
H_NQT = 2
H_NVU = 3
HEADER_I = 4

MODEL_BODY_I = (  # per body: the joint model and the tree (Featherstone Table 4.3)
    ("PARENT", 1, "λ(i), -1 for the fixed base"),
    ("TYPE", 1, "joint kernel: joints.REVOLUTE, PRISMATIC or FREE"),
    ("QI", 1, "first coordinate of the joint in q"),
    ("VI", 1, "first coordinate of the joint in qd (and first dof)"),
    ("NV", 1, "degrees of freedom of the joint"),
    ("DEND", 1, "end (exclusive) of the dofs of the subtree of i: its joint's and its descendants', which "
                "follow them (depth-first order, Featherstone §6.5), so the subtree's dofs are VI .. DEND - 1"),
)
J_PARENT = 0
J_TYPE = 1
J_QI = 2
J_VI = 3
J_NV = 4
J_DEND = 5
BODY_I = 6

MODEL_HEADER_F = (
    ("GRAVITY", 3, "a_g, the acceleration of gravity in the base frame (§5.3)"),
    ("TOL", 1, "pivots of H or D_i at or below this are singular"),
)
HF_GRAVITY = 0
HF_GRAVITY_N = 3
HF_TOL = 3
HEADER_F = 4

MODEL_BODY_F = (  # per body: X_T(i) = plx(E_T, r_T) and I_i = rbi(m, h, Ibar) (Table A.3)
    ("ET", 9, "E of the tree transform X_T(i), row-major"),
    ("RT", 3, "r of X_T(i)"),
    ("M", 1, "mass m"),
    ("H", 3, "first moment h = m c"),
    ("IBAR", 9, "rotational inertia about the body origin, row-major (Eq. 2.63)"),
)
B_ET = 0
B_ET_N = 9
B_RT = 9
B_RT_N = 3
B_M = 12
B_H = 13
B_H_N = 3
B_IBAR = 16
B_IBAR_N = 9
BODY_F = 25

# A model with mimic joints (Featherstone §9.6, Eq. 3.19: q_t = G q + offset) has a last section in mf, after
# the dofs, at MIMIC_AT = HEADER_F + BODY_F nb + DOF_F nvt: MIMIC_HEAD, then per tree position coordinate k
# (MQ_*, at MIMIC_AT + MIMIC_HEAD + MIMIC_Q k), then per tree dof k (MV_*, after the nqt coordinates'). The
# kernels that take user coordinates map them with it (algorithms/tree/mimic.py). A model without has none.
MODEL_MIMIC_HEAD = (("NQ", 1, "user position coordinates nq"), ("NV", 1, "user velocity coordinates nv"))
MH_NQ = 0
MH_NV = 1
MIMIC_HEAD = 2

MODEL_MIMIC_Q = (
    ("SRC", 1, "the user coordinate tree coordinate k follows (an integer, as a float)"),
    ("MUL", 1, "its multiplier: q_t[k] = MUL q[SRC] + OFF"),
    ("OFF", 1, "its offset"),
)
MQ_SRC = 0
MQ_MUL = 1
MQ_OFF = 2
MIMIC_Q = 3

MODEL_MIMIC_V = (("SRC", 1, "the user velocity tree dof k follows"), ("MUL", 1, "qd_t[k] = MUL qd[SRC]"))
MV_SRC = 0
MV_MUL = 1
MIMIC_V = 2

MODEL_DOF_F = (  # per degree of freedom; LAW_COLUMNS below names the joint law's columns
    ("S", 6, "column of the motion subspace S_i, angular-first (Table 4.1)"),
    ("ARMATURE", 1, "rotor inertia (Example 9.5)"),
    ("DAMPING", 1, "viscous friction coefficient"),
    ("COULOMB", 1, "Coulomb friction force fc"),
    ("COULOMB_VELOCITY", 1, "velocity scale vc of smooth Coulomb friction tanh(qd / vc); 0: sign(qd)"),
    ("STRIBECK", 1, "Stribeck torque fs (joint_law.py)"),
    ("STRIBECK_VELOCITY", 1, "Stribeck velocity vs; 0: no Stribeck term"),
    ("OFFSET", 1, "constant joint torque offset o"),
)
D_S = 0
D_S_N = 6
D_ARMATURE = 6
D_DAMPING = 7
D_COULOMB = 8
D_COULOMB_VELOCITY = 9
D_STRIBECK = 10
D_STRIBECK_VELOCITY = 11
D_OFFSET = 12
DOF_F = 13
# the joint law's coefficients (joint_law.py) by their names there, and their columns
LAW_COLUMNS = (("viscous", D_DAMPING), ("coulomb", D_COULOMB), ("coulomb_velocity", D_COULOMB_VELOCITY),
               ("stribeck", D_STRIBECK), ("stribeck_velocity", D_STRIBECK_VELOCITY), ("offset", D_OFFSET))

WORK_PER_BODY = (  # Tables 5.1, 6.2, 7.1 in body coordinates
    ("E", 9, "E of ^iX_λ(i) = X_J X_T(i), row-major"),
    ("R", 3, "r of ^iX_λ(i)"),
    ("V", 6, "v_i (Eq. 5.14)"),
    ("A", 6, "a_i (Eq. 5.15)"),
    ("F", 6, "f_i (Eq. 5.16)"),
    ("SIN", 1, "sin q_i of the joint's first coordinate (joints.sincos_all), next to X_i: read with it"),
    ("COS", 1, "cos q_i"),
    ("C", 6, "c_i = v_i x S_i qd_i (Eq. 7.35)"),
    ("IA", 36, "I_i^A dense (Table 7.1); the composite rbi I_i^c in the CRBA (Table 6.2)"),
    ("PA", 6, "p_i^A (Table 7.1)"),
    ("RW", 9, "world axes R_i of body i, row-major (kinematics)"),
    ("PW", 3, "world origin p_i of body i (kinematics)"),
    ("DINV", 36, "D_i^-1, nv_i x nv_i at stride 6 (Eq. 7.44)"),
)
W_E = 0
W_E_N = 9
W_R = 9
W_R_N = 3
W_V = 12
W_V_N = 6
W_A = 18
W_A_N = 6
W_F = 24
W_F_N = 6
W_SIN = 30
W_COS = 31
W_C = 32
W_C_N = 6
W_IA = 38
W_IA_N = 36
W_PA = 74
W_PA_N = 6
W_RW = 80
W_RW_N = 9
W_PW = 89
W_PW_N = 3
W_DINV = 92
W_DINV_N = 36
WORK_BODY = 128

WORK_PER_DOF = (
    ("U", 6, "U_i = I_i^A S_i, one column per dof (Eq. 7.43)"),
    ("UU", 1, "u_i = tau_i - S_i^T p_i^A (Eq. 7.45)"),
)
V_U = 0
V_U_N = 6
V_UU = 6
WORK_DOF = 7

WORK_SCRATCH = (  # of the ABA's multi-dof joints (Table 7.1 with a free joint)
    ("IA", 36, "I^a of the body being folded into its parent (Eq. 7.39)"),
    ("PA", 6, "p^a (Eq. 7.40); Table 9.3's p^a at an inverse-dynamics joint"),
    ("D", 36, "D_i = S_i^T U_i before inversion (Eq. 7.44)"),
    ("UA", 6, "u_i - U_i^T a' (Eq. 7.49)"),
)
T_IA = 0
T_PA = 36
T_D = 42
T_D_N = 36
T_UA = 78
WORK_EXTRA = 84

FEXT_N = 6  # the kernels' external forces: one spatial force f_i^x per body, at fx[FEXT_N i]

# The batch inverse dynamics (algorithms/rnea_batch): LANES states side by side, one block of rows per
# body; row r of body i's block holds one number of each state: w[(BATCH_BLOCK i + L_r) LANES + k].
LANES = 32  # states side by side (measured among 8 .. 128 on TALOS and arm7; see rnea_batch)
BATCH_ROWS = (
    ("E", 9, "E of ^iX_λ(i)"),
    ("R", 3, "r of ^iX_λ(i)"),
    ("V", 6, "v_i"),
    ("A", 6, "a_i"),
    ("F", 6, "f_i"),
    ("VJ", 6, "v_J = S_i qd_i; X_i^T f_i in the inward pass"),
    ("SQ", 6, "S_i qdd_i"),
    ("PV", 6, "the parent's v (copied in)"),
    ("PAC", 6, "the parent's a (copied in, right after PV)"),
    ("Q", 1, "q_i"),
    ("QD", 1, "qd_i"),
    ("QDD", 1, "qdd_i"),
    ("SIN", 1, "sin q_i"),
    ("COS", 1, "cos q_i"),
    ("TAU", 1, "tau_i"),
)
L_E = 0
L_E_N = 9
L_R = 9
L_R_N = 3
L_V = 12
L_V_N = 6
L_A = 18
L_A_N = 6
L_F = 24
L_VJ = 30
L_SQ = 36
L_PV = 42
L_PV_N = 6
L_PAC = 48
L_Q = 54
L_QD = 55
L_QDD = 56
L_SIN = 57
L_COS = 58
L_TAU = 59
BATCH_BLOCK = 60

BATCH_SCRATCH = (("X", 12, "E and r of a free joint, one state at a time"),)
LT_X = 0
BATCH_EXTRA = 12

# The derivatives' scratch (algorithms/derivatives/rnea_derivatives.py, read again by aba_derivatives.py), laid
# out as the work array: field X of body i at RB_X nb + RB_X_N i, of dof k at DERIV_BODY nb + RD_X nvt + RD_X_N k, the
# constants at DERIV_BODY nb + DERIV_DOF nvt + RC_X. World frame (Carpentier & Mansard 2018).
DERIV_PER_BODY = (
    ("RW", 9, "world axes of body i (body -> world rotation), row-major"),
    ("PW", 3, "world origin p_i"),
    ("V", 6, "v_i"),
    ("A", 6, "a_i; a^q_i in aba_derivatives' sweep (the part of a_i that qdd carries)"),
    ("F", 6, "f_i, then the subtree's F_i; F^q_i in aba_derivatives' sweep"),
    ("YC", 36, "Y_i, then the composite Y^C_i, 6 x 6 row-major"),
    ("BC", 36, "B_i (the inertia's variation), then the composite B^C_i"),
    ("SC", 2, "sin of every joint's first coordinate, then (nb later) their cos (joints.sincos_all)"),
)
RB_RW = 0
RB_PW = 9
RB_V = 12
RB_A = 18
RB_F = 24
RB_YC = 30
RB_BC = 66
RB_SC = 102
DERIV_BODY = 104

DERIV_PER_DOF = (
    ("J", 6, "J_k = ^0X_i S_k, the dof's world motion axis"),
    ("DV", 6, "dV/dq_k; dA^q_k in aba_derivatives' sweep"),
    ("DA", 6, "dA/dq_k; Y^C dA^q_k in aba_derivatives' sweep"),
    ("DAV", 6, "dA/dqd_k; Y^C dA^q_k + J_k x* F^q in aba_derivatives' sweep"),
    ("DFQ", 6, "column k's force derivative d/dq, kept for the ancestors' rows"),
    ("DFV", 6, "column k's force derivative d/dqd"),
    ("DFA", 6, "Y^C J_k (the column's force per unit qdd_k: H)"),
)
RD_J = 0
RD_DV = 6
RD_DA = 12
RD_DAV = 18
RD_DFQ = 24
RD_DFV = 30
RD_DFA = 36
DERIV_DOF = 42

DERIV_SCRATCH = (
    ("X", 12, "E and r of ^iX_λ(i) (jcalc)"),
    ("TMP", 6, "a spatial vector"),
    ("TMP2", 6, "a spatial vector"),
    ("VJ", 6, "v_J = J_i qd_i"),
    ("ZERO", 6, "zeros: the base's velocity"),
    ("A0", 6, "-a_g: the base's acceleration (gravity as a fictitious acceleration, §5.3)"),
)
RC_X = 0
RC_TMP = 12
RC_TMP2 = 18
RC_VJ = 24
RC_ZERO = 30
RC_A0 = 36
DERIV_EXTRA = 42

# gravity_derivatives.py's scratch, laid out likewise (GB_, GD_, GC_)
GRAV_PER_BODY = (
    ("RW", 9, "world axes of body i, row-major"),
    ("PW", 3, "world origin p_i"),
    ("HC", 3, "h^C_i, the subtree's first moment about the world origin"),
    ("MC", 1, "m^C_i, the subtree's mass"),
    ("SC", 2, "sin, then (nb later) cos of every joint's first coordinate"),
)
GB_RW = 0
GB_PW = 9
GB_HC = 12
GB_MC = 15
GB_SC = 16
GRAV_BODY = 18

GRAV_PER_DOF = (
    ("J", 6, "J_k, the dof's world motion axis"),
    ("D", 3, "d_k = a_g x w_k"),
    ("DF", 6, "column k's force derivative, for the rows of k's ancestors"),
)
GD_J = 0
GD_D = 6
GD_DF = 9
GRAV_DOF = 15

GRAV_SCRATCH = (("X", 12, "E and r of ^iX_λ(i)"), ("AG", 3, "-a_g"))
GC_X = 0
GC_AG = 12
GRAV_EXTRA = 15

# The simulation step's environment (sim/step.py): one int and one float array, as the packed model.
#   envi = [SE_* header (SIM_HEADER_I) | per point: SP_* | per sphere: SS_*]
#   envf = [SF_* header (SIM_HEADER_F) | per point: SC_* (explicit contacts) or SQ_* (world points)
#           | per sphere: SR_* | per box: SB_*]
# EXPLICIT: each point is a dn.Contact against its own plane (dn.simulate_step's list), always in contact
# problem; WORLD: fixed points and spheres against the floor plane and the boxes, the pairs selected at each
# step (the simulated robot, sim/env.py). The surface state of a pair: slot (object, surface) of a
# state array, object = point, then sphere; surface 0 = the floor, 1 + SIM_FACES b + face = box b's face.
SIM_EXPLICIT, SIM_WORLD = 0, 1
SIM_FACES = 6  # a box's faces, face = 2 axis + (0 for the + side, 1 for the - side)
SIM_HEADER_I = (
    ("MODE", 1, "SIM_EXPLICIT or SIM_WORLD"),
    ("NPT", 1, "points (explicit: contacts)"),
    ("NSPH", 1, "spheres (world only)"),
    ("NBOX", 1, "boxes (world only)"),
    ("FLOOR", 1, "1 when the world has a floor plane"),
)
SE_MODE = 0
SE_NPT = 1
SE_NSPH = 2
SE_NBOX = 3
SE_FLOOR = 4
SIM_HEAD_I = 5

SIM_POINT_I = (("BODY", 1, "the body the point (or the sphere's centre) is fixed in"),)
SP_BODY = 0
SIM_PT_I = 1

SIM_HEADER_F = (
    ("K", 1, "stiffness of the world's contacts, N/m"),
    ("D", 1, "damping of the world's contacts, N s/m"),
    ("MU", 1, "friction coefficient of the world's contacts"),
    ("MARGIN", 1, "a pair is in the step's problem when the point is within this of its surface, m"),
    ("FLOOR_S", 3, "a point of the floor plane"),
    ("FLOOR_R", 9, "the floor's local axes [t1 t2 n] as columns, row-major (n: its normal)"),
)
SF_K = 0
SF_D = 1
SF_MU = 2
SF_MARGIN = 3
SF_FLOOR_S = 4
SF_FLOOR_R = 7
SIM_HEAD_F = 16

SIM_CONTACT_F = (  # an explicit contact (dn.Contact packed for its body)
    ("P", 3, "the point in body coordinates"),
    ("R", 9, "its local axes [t1 t2 n] as columns, row-major (n: the surface's normal)"),
    ("S", 3, "a point of its surface plane"),
    ("K", 1, "stiffness"),
    ("D", 1, "damping"),
    ("MU", 1, "friction coefficient"),
)
SC_P = 0
SC_R = 3
SC_S = 12
SC_K = 15
SC_D = 16
SC_MU = 17
SIM_CONTACT = 18

SIM_WPOINT_F = (("P", 3, "the point in body coordinates"),
                ("C", 3, "the centre (body coordinates) of the sphere bounding its run: it and the points after it "
                         "of the same body"),
                ("R", 1, "that sphere's radius"),
                ("RUN", 1, "the points of its run, it included (select.py skips a run whose sphere is far)"))
SQ_P = 0
SQ_C = 3
SQ_R = 6
SQ_RUN = 7
SIM_WPOINT = 8

SIM_SPHERE_F = (("P", 3, "the centre in body coordinates"), ("RADIUS", 1, "the radius"))
SR_P = 0
SR_RADIUS = 3
SIM_SPHERE = 4

SIM_BOX_F = (
    ("C", 3, "the centre"),
    ("H", 3, "the half sizes"),
    ("FACE_S", 3 * SIM_FACES, "a point of each face's plane"),
    ("FACE_R", 9 * SIM_FACES, "each face's local axes [t1 t2 n] as columns, row-major"),
)
SB_C = 0
SB_H = 3
SB_FACE_S = 6
SB_FACE_R = 24
SIM_BOX = 78

SIM_INFO = (  # the step's int output before its per-contact slots
    ("NSEL", 1, "contacts in this step's problem (explicit: all)"),
    ("NF", 1, "floats of scratch the step needed, when it returned its SCRATCH status"),
)
SI_NSEL = 0
SI_NF = 1
SIM_INFO_N = 2

B_RBI = B_M  # m, h, Ibar: the 13 numbers of rbi(m, h, Ibar), in this order (spatial.rbi_mul_t)
RBI_N = 13
assert L_A == L_V + L_V_N and L_PAC == L_PV + L_PV_N  # rnea_batch copies v and a as one run

# every table, its constants' prefix and the name of its total size: what the test and the C header read
TABLES = (
    (MODEL_HEADER_I, "H", "HEADER_I"), (MODEL_BODY_I, "J", "BODY_I"), (MODEL_HEADER_F, "HF", "HEADER_F"),
    (MODEL_BODY_F, "B", "BODY_F"), (MODEL_DOF_F, "D", "DOF_F"), (MODEL_MIMIC_HEAD, "MH", "MIMIC_HEAD"),
    (MODEL_MIMIC_Q, "MQ", "MIMIC_Q"), (MODEL_MIMIC_V, "MV", "MIMIC_V"), (WORK_PER_BODY, "W", "WORK_BODY"),
    (WORK_PER_DOF, "V", "WORK_DOF"), (WORK_SCRATCH, "T", "WORK_EXTRA"), (BATCH_ROWS, "L", "BATCH_BLOCK"),
    (BATCH_SCRATCH, "LT", "BATCH_EXTRA"), (DERIV_PER_BODY, "RB", "DERIV_BODY"), (DERIV_PER_DOF, "RD", "DERIV_DOF"),
    (DERIV_SCRATCH, "RC", "DERIV_EXTRA"), (GRAV_PER_BODY, "GB", "GRAV_BODY"), (GRAV_PER_DOF, "GD", "GRAV_DOF"),
    (GRAV_SCRATCH, "GC", "GRAV_EXTRA"), (SIM_HEADER_I, "SE", "SIM_HEAD_I"), (SIM_POINT_I, "SP", "SIM_PT_I"),
    (SIM_HEADER_F, "SF", "SIM_HEAD_F"), (SIM_CONTACT_F, "SC", "SIM_CONTACT"), (SIM_WPOINT_F, "SQ", "SIM_WPOINT"),
    (SIM_SPHERE_F, "SR", "SIM_SPHERE"), (SIM_BOX_F, "SB", "SIM_BOX"), (SIM_INFO, "SI", "SIM_INFO_N"),
)
