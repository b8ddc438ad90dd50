/* _layout.h: the packed model's, the work arrays' and the status codes' layout for the C shims, written
 * by tools/gen_layout_header.py from dynamics_node/layout.py and _kernel_io.py: do not edit by hand
 * (test/test_core_layout.py checks it is what they give). DN_<name> is layout.<name>. */
#ifndef DYNAMICS_LAYOUT_H
#define DYNAMICS_LAYOUT_H

#define DN_H_NB 0 /* 1: number of bodies nb (= moving kernel joints) */
#define DN_H_NVT 1 /* 1: tree velocity coordinates nvt */
#define DN_H_NQT 2 /* 1: tree position coordinates nqt */
#define DN_H_NVU 3 /* 1: user velocity coordinates nv (NVT less the mimic followers; the derivatives' C fronts size their results by it) */
#define DN_HEADER_I 4

#define DN_J_PARENT 0 /* 1: λ(i), -1 for the fixed base */
#define DN_J_TYPE 1 /* 1: joint kernel: joints.REVOLUTE, PRISMATIC or FREE */
#define DN_J_QI 2 /* 1: first coordinate of the joint in q */
#define DN_J_VI 3 /* 1: first coordinate of the joint in qd (and first dof) */
#define DN_J_NV 4 /* 1: degrees of freedom of the joint */
#define DN_J_DEND 5 /* 1: end (exclusive) of the dofs of the subtree of i: its joint's and its descendants', which follow them (depth-first order, Featherstone §6.5), so the subtree's dofs are VI .. DEND - 1 */
#define DN_BODY_I 6

#define DN_HF_GRAVITY 0 /* 3: a_g, the acceleration of gravity in the base frame (§5.3) */
#define DN_HF_TOL 3 /* 1: pivots of H or D_i at or below this are singular */
#define DN_HEADER_F 4

#define DN_B_ET 0 /* 9: E of the tree transform X_T(i), row-major */
#define DN_B_RT 9 /* 3: r of X_T(i) */
#define DN_B_M 12 /* 1: mass m */
#define DN_B_H 13 /* 3: first moment h = m c */
#define DN_B_IBAR 16 /* 9: rotational inertia about the body origin, row-major (Eq. 2.63) */
#define DN_BODY_F 25

#define DN_D_S 0 /* 6: column of the motion subspace S_i, angular-first (Table 4.1) */
#define DN_D_ARMATURE 6 /* 1: rotor inertia (Example 9.5) */
#define DN_D_DAMPING 7 /* 1: viscous friction coefficient */
#define DN_D_COULOMB 8 /* 1: Coulomb friction force fc */
#define DN_D_COULOMB_VELOCITY 9 /* 1: velocity scale vc of smooth Coulomb friction tanh(qd / vc); 0: sign(qd) */
#define DN_D_STRIBECK 10 /* 1: Stribeck torque fs (joint_law.py) */
#define DN_D_STRIBECK_VELOCITY 11 /* 1: Stribeck velocity vs; 0: no Stribeck term */
#define DN_D_OFFSET 12 /* 1: constant joint torque offset o */
#define DN_DOF_F 13

#define DN_MH_NQ 0 /* 1: user position coordinates nq */
#define DN_MH_NV 1 /* 1: user velocity coordinates nv */
#define DN_MIMIC_HEAD 2

#define DN_MQ_SRC 0 /* 1: the user coordinate tree coordinate k follows (an integer, as a float) */
#define DN_MQ_MUL 1 /* 1: its multiplier: q_t[k] = MUL q[SRC] + OFF */
#define DN_MQ_OFF 2 /* 1: its offset */
#define DN_MIMIC_Q 3

#define DN_MV_SRC 0 /* 1: the user velocity tree dof k follows */
#define DN_MV_MUL 1 /* 1: qd_t[k] = MUL qd[SRC] */
#define DN_MIMIC_V 2

#define DN_W_E 0 /* 9: E of ^iX_λ(i) = X_J X_T(i), row-major */
#define DN_W_R 9 /* 3: r of ^iX_λ(i) */
#define DN_W_V 12 /* 6: v_i (Eq. 5.14) */
#define DN_W_A 18 /* 6: a_i (Eq. 5.15) */
#define DN_W_F 24 /* 6: f_i (Eq. 5.16) */
#define DN_W_SIN 30 /* 1: sin q_i of the joint's first coordinate (joints.sincos_all), next to X_i: read with it */
#define DN_W_COS 31 /* 1: cos q_i */
#define DN_W_C 32 /* 6: c_i = v_i x S_i qd_i (Eq. 7.35) */
#define DN_W_IA 38 /* 36: I_i^A dense (Table 7.1); the composite rbi I_i^c in the CRBA (Table 6.2) */
#define DN_W_PA 74 /* 6: p_i^A (Table 7.1) */
#define DN_W_RW 80 /* 9: world axes R_i of body i, row-major (kinematics) */
#define DN_W_PW 89 /* 3: world origin p_i of body i (kinematics) */
#define DN_W_DINV 92 /* 36: D_i^-1, nv_i x nv_i at stride 6 (Eq. 7.44) */
#define DN_WORK_BODY 128

#define DN_V_U 0 /* 6: U_i = I_i^A S_i, one column per dof (Eq. 7.43) */
#define DN_V_UU 6 /* 1: u_i = tau_i - S_i^T p_i^A (Eq. 7.45) */
#define DN_WORK_DOF 7

#define DN_T_IA 0 /* 36: I^a of the body being folded into its parent (Eq. 7.39) */
#define DN_T_PA 36 /* 6: p^a (Eq. 7.40); Table 9.3's p^a at an inverse-dynamics joint */
#define DN_T_D 42 /* 36: D_i = S_i^T U_i before inversion (Eq. 7.44) */
#define DN_T_UA 78 /* 6: u_i - U_i^T a' (Eq. 7.49) */
#define DN_WORK_EXTRA 84

#define DN_L_E 0 /* 9: E of ^iX_λ(i) */
#define DN_L_R 9 /* 3: r of ^iX_λ(i) */
#define DN_L_V 12 /* 6: v_i */
#define DN_L_A 18 /* 6: a_i */
#define DN_L_F 24 /* 6: f_i */
#define DN_L_VJ 30 /* 6: v_J = S_i qd_i; X_i^T f_i in the inward pass */
#define DN_L_SQ 36 /* 6: S_i qdd_i */
#define DN_L_PV 42 /* 6: the parent's v (copied in) */
#define DN_L_PAC 48 /* 6: the parent's a (copied in, right after PV) */
#define DN_L_Q 54 /* 1: q_i */
#define DN_L_QD 55 /* 1: qd_i */
#define DN_L_QDD 56 /* 1: qdd_i */
#define DN_L_SIN 57 /* 1: sin q_i */
#define DN_L_COS 58 /* 1: cos q_i */
#define DN_L_TAU 59 /* 1: tau_i */
#define DN_BATCH_BLOCK 60

#define DN_LT_X 0 /* 12: E and r of a free joint, one state at a time */
#define DN_BATCH_EXTRA 12

#define DN_RB_RW 0 /* 9: world axes of body i (body -> world rotation), row-major */
#define DN_RB_PW 9 /* 3: world origin p_i */
#define DN_RB_V 12 /* 6: v_i */
#define DN_RB_A 18 /* 6: a_i; a^q_i in aba_derivatives' sweep (the part of a_i that qdd carries) */
#define DN_RB_F 24 /* 6: f_i, then the subtree's F_i; F^q_i in aba_derivatives' sweep */
#define DN_RB_YC 30 /* 36: Y_i, then the composite Y^C_i, 6 x 6 row-major */
#define DN_RB_BC 66 /* 36: B_i (the inertia's variation), then the composite B^C_i */
#define DN_RB_SC 102 /* 2: sin of every joint's first coordinate, then (nb later) their cos (joints.sincos_all) */
#define DN_DERIV_BODY 104

#define DN_RD_J 0 /* 6: J_k = ^0X_i S_k, the dof's world motion axis */
#define DN_RD_DV 6 /* 6: dV/dq_k; dA^q_k in aba_derivatives' sweep */
#define DN_RD_DA 12 /* 6: dA/dq_k; Y^C dA^q_k in aba_derivatives' sweep */
#define DN_RD_DAV 18 /* 6: dA/dqd_k; Y^C dA^q_k + J_k x* F^q in aba_derivatives' sweep */
#define DN_RD_DFQ 24 /* 6: column k's force derivative d/dq, kept for the ancestors' rows */
#define DN_RD_DFV 30 /* 6: column k's force derivative d/dqd */
#define DN_RD_DFA 36 /* 6: Y^C J_k (the column's force per unit qdd_k: H) */
#define DN_DERIV_DOF 42

#define DN_RC_X 0 /* 12: E and r of ^iX_λ(i) (jcalc) */
#define DN_RC_TMP 12 /* 6: a spatial vector */
#define DN_RC_TMP2 18 /* 6: a spatial vector */
#define DN_RC_VJ 24 /* 6: v_J = J_i qd_i */
#define DN_RC_ZERO 30 /* 6: zeros: the base's velocity */
#define DN_RC_A0 36 /* 6: -a_g: the base's acceleration (gravity as a fictitious acceleration, §5.3) */
#define DN_DERIV_EXTRA 42

#define DN_GB_RW 0 /* 9: world axes of body i, row-major */
#define DN_GB_PW 9 /* 3: world origin p_i */
#define DN_GB_HC 12 /* 3: h^C_i, the subtree's first moment about the world origin */
#define DN_GB_MC 15 /* 1: m^C_i, the subtree's mass */
#define DN_GB_SC 16 /* 2: sin, then (nb later) cos of every joint's first coordinate */
#define DN_GRAV_BODY 18

#define DN_GD_J 0 /* 6: J_k, the dof's world motion axis */
#define DN_GD_D 6 /* 3: d_k = a_g x w_k */
#define DN_GD_DF 9 /* 6: column k's force derivative, for the rows of k's ancestors */
#define DN_GRAV_DOF 15

#define DN_GC_X 0 /* 12: E and r of ^iX_λ(i) */
#define DN_GC_AG 12 /* 3: -a_g */
#define DN_GRAV_EXTRA 15

#define DN_SE_MODE 0 /* 1: SIM_EXPLICIT or SIM_WORLD */
#define DN_SE_NPT 1 /* 1: points (explicit: contacts) */
#define DN_SE_NSPH 2 /* 1: spheres (world only) */
#define DN_SE_NBOX 3 /* 1: boxes (world only) */
#define DN_SE_FLOOR 4 /* 1: 1 when the world has a floor plane */
#define DN_SIM_HEAD_I 5

#define DN_SP_BODY 0 /* 1: the body the point (or the sphere's centre) is fixed in */
#define DN_SIM_PT_I 1

#define DN_SF_K 0 /* 1: stiffness of the world's contacts, N/m */
#define DN_SF_D 1 /* 1: damping of the world's contacts, N s/m */
#define DN_SF_MU 2 /* 1: friction coefficient of the world's contacts */
#define DN_SF_MARGIN 3 /* 1: a pair is in the step's problem when the point is within this of its surface, m */
#define DN_SF_FLOOR_S 4 /* 3: a point of the floor plane */
#define DN_SF_FLOOR_R 7 /* 9: the floor's local axes [t1 t2 n] as columns, row-major (n: its normal) */
#define DN_SIM_HEAD_F 16

#define DN_SC_P 0 /* 3: the point in body coordinates */
#define DN_SC_R 3 /* 9: its local axes [t1 t2 n] as columns, row-major (n: the surface's normal) */
#define DN_SC_S 12 /* 3: a point of its surface plane */
#define DN_SC_K 15 /* 1: stiffness */
#define DN_SC_D 16 /* 1: damping */
#define DN_SC_MU 17 /* 1: friction coefficient */
#define DN_SIM_CONTACT 18

#define DN_SQ_P 0 /* 3: the point in body coordinates */
#define DN_SQ_C 3 /* 3: the centre (body coordinates) of the sphere bounding its run: it and the points after it of the same body */
#define DN_SQ_R 6 /* 1: that sphere's radius */
#define DN_SQ_RUN 7 /* 1: the points of its run, it included (select.py skips a run whose sphere is far) */
#define DN_SIM_WPOINT 8

#define DN_SR_P 0 /* 3: the centre in body coordinates */
#define DN_SR_RADIUS 3 /* 1: the radius */
#define DN_SIM_SPHERE 4

#define DN_SB_C 0 /* 3: the centre */
#define DN_SB_H 3 /* 3: the half sizes */
#define DN_SB_FACE_S 6 /* 18: a point of each face's plane */
#define DN_SB_FACE_R 24 /* 54: each face's local axes [t1 t2 n] as columns, row-major */
#define DN_SIM_BOX 78

#define DN_SI_NSEL 0 /* 1: contacts in this step's problem (explicit: all) */
#define DN_SI_NF 1 /* 1: floats of scratch the step needed, when it returned its SCRATCH status */
#define DN_SIM_INFO_N 2

/* the floats of one call's work array for the model whose int header is h (layout.py's docstring) */
#define DN_WORK_SIZE(h) (DN_WORK_BODY * (Py_ssize_t)(h)[DN_H_NB] + DN_WORK_DOF * (Py_ssize_t)(h)[DN_H_NVT] \
                         + DN_WORK_EXTRA)
/* the floats of a kernel's scratch, extra = {per body, per dof, per dof squared, constant} */
#define DN_SCRATCH_SIZE(extra, h) ((extra)[0] * (Py_ssize_t)(h)[DN_H_NB] \
                                   + (extra)[1] * (Py_ssize_t)(h)[DN_H_NVT] \
                                   + (extra)[2] * (Py_ssize_t)(h)[DN_H_NVT] * (Py_ssize_t)(h)[DN_H_NVT] \
                                   + (extra)[3])

/* status codes (_kernel_io.py): KIND * DN_KIND_UNIT + ARG * DN_ARG_UNIT + INDEX */
#define DN_KIND_UNIT 100000000LL
#define DN_ARG_UNIT 100000LL
#define DN_BAD_LENGTH 1
#define DN_NOT_FINITE 2
#define DN_SINGULAR 3
#define DN_BAD_QUAT 4
#define DN_OVERFLOW 5
#define DN_STATUS(kind, arg, index) \
    ((long long)(kind) * DN_KIND_UNIT + (long long)(arg) * DN_ARG_UNIT + (long long)(index))

#endif
