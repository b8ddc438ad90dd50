"""The simulation step as one compiled kernel: dn.simulate_step and the simulated robot's step.

The law is algorithms/contact/soft.py's (Featherstone §11.8 made implicit in the springs and dampers, semi-implicit
Euler; its docstring) with joint_limits.py's rows, computed here in the same order with the same
arithmetic as contact.soft.reference_step, the Python form the tests hold this kernel to, and without
allocation: step_core runs on the work array and scratch arrays of step_scratch's sizes (the contact
problem's part, problem_floats, known once the contacts are), so that its C callback (sim_step_c) serves
the C front of dn.simulate_step (_fastcall.StepRoute, _step_route.c) and the simulated robot
(_fastcall.step_into) on the calling thread's buffer.

The contacts come from an environment (select.py): dn.simulate_step's list, or the simulated robot's
points and spheres against its floor and boxes, selected at each step. Then, as algorithms/contact/soft.py says:
the rigid terms (contact.rigid_terms: H = L^T D L, qdd0) and the contacts' rows (contact.contact_rows);
which contacts touch (p <= z, or speculatively p + dt (v_n + dt b_n) <= 0); the rows of the joints near a
limit (joint_limits.limit_rows' rule); the contact problem with the springs taken at the end of the step
(A + 1/(dt (D + dt K)) on the contacts' diagonal, the limits as 3-row blocks with mu = 0) solved by
contact.ncp.solve_in; qdd = qdd0 + H^-1 (T f + E lam); qd and q by semi-implicit Euler (a free joint by
the exponential map of its body angular velocity); the surface states; the forces in world axes. A
result that is not finite returns OVERFLOW_STATUS and writes no state.
"""
from __future__ import annotations

import math

import numpy as np

from .._jit import carray, cfunc, njit, types
from ..joints import FREE
from ..packed import first_dof, first_q, joint_type
from ..layout import (H_NB, H_NQT, H_NVT, SE_MODE, SE_NBOX, SE_NPT, SE_NSPH,
                      SI_NF, SI_NSEL, SIM_HEAD_I, SIM_INFO_N)
from .._kernel_io import OVERFLOW_STATUS, SCRATCH_KIND, status
from .._kernel_io import P_F, P_I, model_from_pointers
from ..algorithms.contact.forward_dynamics import TERMS_SCRATCH, contact_rows, rigid_terms
from ..algorithms.contact.ncp import STICK, scratch_size, solve_in
from ..algorithms.tree.joint_limits import NEAR, REST_SPEED
from ..algorithms.tree.kinematics import _pose
from ..algorithms.tree.ltdl import dl_solve, lt_solve
from .select import BAD_ARG, _env_ok, _finite, _select, _world_point, env_kmax

SCRATCH = status.py_func(SCRATCH_KIND, 0, 0)  # the scratch too small: info[SI_NF] floats needed (the caller grows it)
CAND_F = 25               # floats per candidate contact (step_scratch)
SIDES = 2                 # limit rows per coordinate at most: its lower and its upper limit


@njit(cache=True, pure=True)
def step_scratch(nvt, kmax):
    """(floats, ints) of step_core's scratch before the contact problem, whose own floats
    (problem_floats) come after: H, the RNEA's, y, the candidates', Y^T and the contacts' b v f v+, the
    limits' rows; and lam, the coordinates' q index, the candidates' bodies, slots, touching and order,
    the limits' coordinates, the problem's modes and sliding flags and solve_in's ints."""
    nl = SIDES * nvt
    nf = nvt * nvt + (TERMS_SCRATCH + 1) * nvt + CAND_F * kmax + 3 * kmax * (nvt + 4) + 2 * nl + 2 * nl * nvt
    return nf, nvt + nvt + 4 * kmax + nl + 2 * (kmax + nl) + scratch_size(kmax + nl)[1]


@njit(cache=True, pure=True)
def problem_floats(nc, nl):
    """Floats of the contact problem of nc contacts and nl limit rows: the contacts' A, the coupling and
    the limits' block, the problem's matrix, right side, friction, solution, directions, solve_in's."""
    nk = nc + nl
    n = 3 * nk
    return 9 * nc * nc + 3 * nc * nl + nl * nl + n * n + n + nk + 4 * nk + 2 * nk + scratch_size(nk)[0]


@njit(cache=True)
def _limit_rows(mi, q, qd, qdd0, lim, qi, dt, e, lidx, lsg, ltg):
    """joint_limits.limit_rows: the rows of this step, lower limits first. Returns their number, or -1 when
    the limits are not lower <= upper or limit a coordinate that is not a revolute or prismatic joint's."""
    nvt = mi[H_NVT]
    if lim.shape[0] == 0:
        return 0
    for v in range(nvt):
        lo, hi = lim[2 * v], lim[2 * v + 1]
        if not lo <= hi or ((abs(lo) < math.inf or abs(hi) < math.inf) and qi[v] < 0):
            return -1
    nl = 0
    for side in range(2):
        s = 1.0 if side == 0 else -1.0
        for v in range(nvt):
            bound = lim[2 * v + side]
            if not abs(bound) < math.inf:
                continue
            gap = s * (q[qi[v]] - bound)
            vn, an = s * qd[v], s * qdd0[v]
            if not gap <= NEAR + 2.0 * dt * (abs(vn) + dt * abs(an)):
                continue
            t = -gap / dt
            if e > 0.0 and gap + dt * (vn + dt * an) < 0.0 and vn < -REST_SPEED:
                t = max(t, -e * vn)
            lidx[nl], lsg[nl], ltg[nl] = v, s, t
            nl += 1
    return nl


@njit(cache=True)
def _integrate(mi, q, v, dt, out):
    """contact.soft.integrate: joints linearly, a free joint on SE(3) (p += R v dt, the quaternion times
    exp(omega dt / 2))."""
    for i in range(mi[H_NB]):
        a, b = first_q(mi, i), first_dof(mi, i)
        if joint_type(mi, i) != FREE:
            out[a] = q[a] + v[b] * dt
            continue
        nq = math.sqrt(q[a + 3] * q[a + 3] + q[a + 4] * q[a + 4] + q[a + 5] * q[a + 5] + q[a + 6] * q[a + 6])
        x, y, z, ww = q[a + 3] / nq, q[a + 4] / nq, q[a + 5] / nq, q[a + 6] / nq
        R0 = (1 - 2 * (y * y + z * z), 2 * (x * y - z * ww), 2 * (x * z + y * ww))
        R1 = (2 * (x * y + z * ww), 1 - 2 * (x * x + z * z), 2 * (y * z - x * ww))
        R2 = (2 * (x * z - y * ww), 2 * (y * z + x * ww), 1 - 2 * (x * x + y * y))
        out[a] = q[a] + (R0[0] * v[b] + R0[1] * v[b + 1] + R0[2] * v[b + 2]) * dt
        out[a + 1] = q[a + 1] + (R1[0] * v[b] + R1[1] * v[b + 1] + R1[2] * v[b + 2]) * dt
        out[a + 2] = q[a + 2] + (R2[0] * v[b] + R2[1] * v[b + 1] + R2[2] * v[b + 2]) * dt
        o0, o1, o2 = v[b + 3] * dt, v[b + 4] * dt, v[b + 5] * dt
        an = math.sqrt(o0 * o0 + o1 * o1 + o2 * o2)
        s = math.sin(an / 2) / an if an > 1e-12 else 0.5 - an * an / 48.0
        dx, dy, dz, dw = o0 * s, o1 * s, o2 * s, math.cos(an / 2)
        q0 = ww * dx + x * dw + y * dz - z * dy
        q1 = ww * dy - x * dz + y * dw + z * dx
        q2 = ww * dz + x * dy - y * dx + z * dw
        q3 = ww * dw - x * dx - y * dy - z * dz
        nn = math.sqrt(q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3)
        out[a + 3], out[a + 4], out[a + 5], out[a + 6] = q0 / nn, q1 / nn, q2 / nn, q3 / nn


@njit(cache=True)
def step_core(mi, mf, q, qd, tau, fx, dt, envi, envf, sin, lim, e, spec, q1, qd1, qdd, ltau, sout, F, P, info, w,
              s, si):
    """One step (module docstring) of the tree model (mi, mf) from q, qd under tau (and f_ext fx, per body,
    or empty) for dt, in the environment (envi, envf) whose surface states are sin (3 per slot; empty:
    undeformed), with the limits lim ([lower upper] per velocity coordinate, +-inf for none; empty: no
    limits) of restitution e, the contacts speculative when spec. Out: q1, qd1, qdd, ltau (the limits'
    generalized force), sout (the surface states after it), and per contact of the step's problem F (its
    force, world), P (its point's world position at q) and info[SIM_INFO_N + j] its slot; info[SI_NSEL]
    how many. Returns 0, a kernel status, SCRATCH (info[SI_NF]: the floats needed), BAD_ARG, or
    OVERFLOW (a result not finite: nothing written)."""
    nb, nvt, nqt = mi[H_NB], mi[H_NVT], mi[H_NQT]
    km = env_kmax(envi[SE_NPT], envi[SE_NSPH], envi[SE_NBOX], envi[SE_MODE]) if envi.shape[0] >= SIM_HEAD_I else 0
    if _env_ok(mi, envi, envf, sin.shape[0], sout.shape[0], km) != 0 or F.shape[0] < 3 * km or \
            P.shape[0] < 3 * km or info.shape[0] < SIM_INFO_N + km or not (0.0 < dt < math.inf) or \
            not (0.0 <= e <= 1.0) or (lim.shape[0] != 0 and lim.shape[0] != SIDES * nvt) or q1.shape[0] != nqt or \
            qd1.shape[0] != nvt or qdd.shape[0] != nvt or ltau.shape[0] != nvt or not _finite(sin, sin.shape[0]):
        return BAD_ARG
    nf0, ni0 = step_scratch(nvt, km)
    if si.shape[0] < ni0:
        return BAD_ARG
    if s.shape[0] < nf0:
        info[SI_NF] = nf0 + problem_floats(0, 0)
        return SCRATCH
    nl2 = SIDES * nvt
    o = 0
    H = s[o:o + nvt * nvt]
    o += nvt * nvt
    ts = s[o:o + TERMS_SCRATCH * nvt]
    o += TERMS_SCRATCH * nvt
    y = s[o:o + nvt]
    o += nvt
    cp, cR, csp = s[o:o + 3 * km], s[o + 3 * km:o + 12 * km], s[o + 12 * km:o + 15 * km]
    cK, cD, cmu = s[o + 15 * km:o + 16 * km], s[o + 16 * km:o + 17 * km], s[o + 17 * km:o + 18 * km]
    sg, pos1, dist = s[o + 18 * km:o + 21 * km], s[o + 21 * km:o + 24 * km], s[o + 24 * km:o + CAND_F * km]
    o += CAND_F * km
    Ytf = s[o:o + 3 * km * nvt]
    o += 3 * km * nvt
    b, v, f, vp = s[o:o + 3 * km], s[o + 3 * km:o + 6 * km], s[o + 6 * km:o + 9 * km], s[o + 9 * km:o + 12 * km]
    o += 12 * km
    lsg, ltg = s[o:o + nl2], s[o + nl2:o + 2 * nl2]
    o += 2 * nl2
    YE = s[o:o + nl2 * nvt]
    M = s[o + nl2 * nvt:o + 2 * nl2 * nvt]
    o += 2 * nl2 * nvt
    lam, qi = si[:nvt], si[nvt:nvt + nvt]
    oi = nvt + nvt
    cb, slot = si[oi:oi + km], si[oi + km:oi + 2 * km]
    touch, idx = si[oi + 2 * km:oi + 3 * km], si[oi + 3 * km:oi + 4 * km]
    oi += 4 * km
    lidx = si[oi:oi + nl2]
    oi += nl2
    ms, dyn = si[oi:oi + km + nl2], si[oi + km + nl2:oi + 2 * (km + nl2)]
    si2 = si[oi + 2 * (km + nl2):]
    for d in range(nvt):
        qi[d] = -1
    for i in range(nb):
        if joint_type(mi, i) != FREE:
            qi[first_dof(mi, i)] = first_q(mi, i)
    st = rigid_terms(mi, mf, q, qd, tau, fx, H, lam, qdd, w, ts)  # qdd0 in qdd until the contacts' forces
    if st != 0:
        return st
    Hm = H.reshape((nvt, nvt))
    for i in range(nb):  # the world poses by the kinematics' own route (jcalc), the one that gives the points at
        _pose(mi, mf, q, w, i)  # q1 below: a pressed contact's z = p then compares equal with the next step's p
    k = _select(mi, envi, envf, w, cb, cp, cR, csp, cK, cD, cmu, slot, P)
    info[SI_NSEL] = k
    Yt = Ytf[:3 * k * nvt].reshape((3 * k, nvt))
    contact_rows(mi, mf, qd, cb[:k], cp, cR, Hm, lam, Yt, b, v, qdd, w)
    nc = 0
    for j in range(k):
        dist[j] = (cR[9 * j + 2] * (P[3 * j] - csp[3 * j]) + cR[9 * j + 5] * (P[3 * j + 1] - csp[3 * j + 1])
                   + cR[9 * j + 8] * (P[3 * j + 2] - csp[3 * j + 2]))
        for c in range(3):
            sg[3 * j + c] = sin[3 * slot[j] + c] if sin.shape[0] else 0.0
        t = dist[j] <= sg[3 * j + 2] or (spec and dist[j] + dt * (v[3 * j + 2] + dt * b[3 * j + 2]) <= 0.0)
        touch[j] = 1 if t else 0
        if t:
            idx[nc] = j
            nc += 1
    nl = _limit_rows(mi, q, qd, qdd, lim, qi, dt, e, lidx, lsg, ltg)
    if nl < 0:
        return BAD_ARG
    need = nf0 + problem_floats(nc, nl)
    if s.shape[0] < need:
        info[SI_NF] = need
        return SCRATCH
    nk = nc + nl
    n = 3 * nk
    n3 = 3 * nc
    Ab = s[o:o + n3 * n3].reshape((n3, n3))
    o += n3 * n3
    Acl = s[o:o + n3 * nl].reshape((n3, nl))
    o += n3 * nl
    All = s[o:o + nl * nl].reshape((nl, nl))
    o += nl * nl
    As = s[o:o + n * n].reshape((n, n))
    o += n * n
    bs, mus, x = s[o:o + n], s[o + n:o + n + nk], s[o + n + nk:o + n + 5 * nk]
    dd = s[o + n + 5 * nk:o + n + 7 * nk].reshape((nk, 2))
    s2 = s[o + n + 7 * nk:]
    for a in range(n3):  # A of the touching contacts (contact.contact_A's entries)
        ra = 3 * idx[a // 3] + a % 3
        for c in range(a, n3):
            rc = 3 * idx[c // 3] + c % 3
            t = 0.0
            for d in range(nvt):
                t += Yt[ra, d] * Yt[rc, d] / Hm[d, d]
            Ab[a, c] = t
            Ab[c, a] = t
    if nl:
        _coupling(Hm, lam, Yt, idx, n3, lidx, lsg, nl, YE, Acl, All, M)
    for r in range(n):
        bs[r] = 0.0
        for c in range(n):
            As[r, c] = 0.0
    for a in range(nc):  # f = -K (y + dt v+) - D v+ (algorithms/contact/soft.py)
        j = idx[a]
        Kj = cK[j]
        Dp = cD[j] + dt * Kj
        mus[a] = cmu[j]
        for c in range(3):
            r = 3 * a + c
            rr = 3 * j + c
            for c2 in range(n3):
                As[r, c2] = Ab[r, c2]
            As[r, r] = Ab[r, r] + 1.0 / (dt * Dp)
            yv = sg[rr] if c < 2 else dist[j]
            bs[r] = v[rr] / dt + b[rr] + Kj * yv / (dt * Dp)
    if nl:  # the limits' rows (joint_limits.py): the normal of a 3-row block with mu = 0
        tr = 0.0
        for a in range(nl):
            tr += All[a, a]
        reg = 1e-12 * tr / nl
        for a in range(nl):
            la = n3 + 3 * a + 2
            mus[nc + a] = 0.0
            for c in range(nl):
                As[la, n3 + 3 * c + 2] = All[a, c] + reg if a == c else All[a, c]
            As[la - 1, la - 1] = 1.0
            As[la - 2, la - 2] = 1.0
            for r in range(n3):
                As[r, la] = Acl[r, a]
                As[la, r] = Acl[r, a]
            i = lidx[a]
            bs[la] = (lsg[a] * qd[i] - ltg[a]) / dt + lsg[a] * qdd[i]
    for a in range(nk):
        dyn[a] = 0
        dd[a, 0] = 0.0
        dd[a, 1] = 0.0
    for r in range(3 * k):
        f[r] = 0.0
    if nk:
        st = solve_in(As, bs, mus, dyn[:nk], dd, x, ms[:nk], s2, si2)
        if st != 0:
            return st
    for a in range(nc):
        for c in range(3):
            f[3 * idx[a] + c] = x[3 * a + c]
    if nc:  # qdd = qdd0 + L^-1 D^-1 Y f
        for d in range(nvt):
            y[d] = 0.0
        for a in range(nc):
            for c in range(3):
                r = 3 * idx[a] + c
                for d in range(nvt):
                    y[d] += Yt[r, d] * f[r]
        dl_solve(Hm, lam, y)
        for d in range(nvt):
            qdd[d] += y[d]
    for d in range(nvt):
        ltau[d] = 0.0
    if nl:
        for d in range(nvt):
            t = 0.0
            for a in range(nl):
                t += M[a * nvt + d] * x[n3 + 3 * a + 2]  # M is _coupling's (nl x nvt, flat)
            qdd[d] += t
        for a in range(nl):
            ltau[lidx[a]] += lsg[a] * x[n3 + 3 * a + 2]
    for d in range(nvt):
        qd1[d] = qd[d] + dt * qdd[d]
    _integrate(mi, q, qd1, dt, q1)
    if nc:
        for a in range(nc):  # the points' velocities after the step (local): v + dt (b + A f + A_cl lam)
            for c in range(3):
                r = 3 * a + c
                af = 0.0
                for c2 in range(n3):
                    af += Ab[r, c2] * x[c2]
                al = 0.0
                for c2 in range(nl):
                    al += Acl[r, c2] * x[n3 + 3 * c2 + 2]
                rr = 3 * idx[a] + c
                vp[rr] = v[rr] + dt * (b[rr] + af + al)
        top = 0
        for j in range(k):
            top = max(top, cb[j])
        for i in range(top + 1):
            _pose(mi, mf, q1, w, i)
        for j in range(k):
            _world_point(w, nb, cb[j], cp[3 * j], cp[3 * j + 1], cp[3 * j + 2], pos1, 3 * j)
    a = 0
    for j in range(k):  # the surface states (algorithms/contact/soft.py), in sg
        Kj, Dj = cK[j], cD[j]
        decay = math.exp(-Kj / Dj * dt)
        if touch[j] == 0:
            for c in range(3):
                sg[3 * j + c] = sg[3 * j + c] * decay
            continue
        z = (cR[9 * j + 2] * (pos1[3 * j] - csp[3 * j]) + cR[9 * j + 5] * (pos1[3 * j + 1] - csp[3 * j + 1])
             + cR[9 * j + 8] * (pos1[3 * j + 2] - csp[3 * j + 2]))
        zz = dist[j] * decay
        if zz < z:
            z = zz
        if 0.0 < z:
            z = 0.0
        sg[3 * j + 2] = z
        for c in range(2):
            if ms[a] == STICK:  # x follows the point (Eq. 11.77 at f_t = f_stick)
                sg[3 * j + c] = sg[3 * j + c] + dt * vp[3 * j + c]
            else:  # slipping, Eq. 11.77 by backward Euler
                sg[3 * j + c] = (sg[3 * j + c] - dt * f[3 * j + c] / Dj) / (1.0 + dt * Kj / Dj)
        a += 1
    for j in range(k):
        for i in range(3):
            F[3 * j + i] = cR[9 * j + 3 * i] * f[3 * j] + cR[9 * j + 3 * i + 1] * f[3 * j + 1] + \
                cR[9 * j + 3 * i + 2] * f[3 * j + 2]
        info[SIM_INFO_N + j] = slot[j]
    if not (_finite(q1, nqt) and _finite(qd1, nvt) and _finite(qdd, nvt) and _finite(ltau, nvt) and
            _finite(sg, 3 * k) and _finite(F, 3 * k)):
        return OVERFLOW_STATUS
    for r in range(sout.shape[0]):
        sout[r] = 0.0
    for j in range(k):
        for c in range(3):
            sout[3 * slot[j] + c] = sg[3 * j + c]
    return 0


@njit(cache=True)
def _coupling(Hm, lam, Yt, idx, n3, lidx, lsg, nl, YEf, Acl, All, Mf):
    """joint_limits.coupling_kernel for the touching contacts' rows: Y_E = L^-T E, Acl = Y D^-1 Y_E^T,
    All = Y_E D^-1 Y_E^T, the rows of M = (H^-1 E)^T."""
    nvt = Hm.shape[0]
    YE = YEf[:nl * nvt].reshape((nl, nvt))
    M = Mf[:nl * nvt].reshape((nl, nvt))
    for a in range(nl):
        for d in range(nvt):
            YE[a, d] = 0.0
        YE[a, lidx[a]] = lsg[a]
        lt_solve(Hm, lam, YE[a])
    for r in range(n3):
        ra = 3 * idx[r // 3] + r % 3
        for a in range(nl):
            t = 0.0
            for d in range(nvt):
                t += Yt[ra, d] * YE[a, d] / Hm[d, d]
            Acl[r, a] = t
    for a in range(nl):
        for c in range(a, nl):
            t = 0.0
            for d in range(nvt):
                t += YE[a, d] * YE[c, d] / Hm[d, d]
            All[a, c] = t
            All[c, a] = t
        for d in range(nvt):
            M[a, d] = YE[a, d]
        dl_solve(Hm, lam, M[a])


# the C callback (_fastcall.StepRoute and step_into): the model; q, qd, tau, fx with their lengths; dt;
# envi, envf, the state in, the limits with their lengths; e, spec; q1, qd1, qdd, ltau; the state out, F,
# P, info with their lengths; the work array and the scratch, each with its length
SIG_STEP = types.int64(P_I, P_F, P_F, types.int64, P_F, types.int64, P_F, types.int64, P_F, types.int64,
                       types.float64, P_I, types.int64, P_F, types.int64, P_F, types.int64, P_F, types.int64,
                       types.float64, types.int64, P_F, P_F, P_F, P_F, P_F, types.int64, P_F, P_F, types.int64,
                       P_I, types.int64, P_F, types.int64, P_F, types.int64, P_I, types.int64)


@cfunc(SIG_STEP, cache=True)
def sim_step_c(mip, mfp, qp, nq, qdp, nqd, taup, ntau, fxp, nfx, dt, envip, nei, envfp, nef, sinp, nsin, limp, nlim,
               e, spec, q1p, qd1p, qddp, ltaup, soutp, nsout, Fp, Pp, nFP, infop, ninfo, wp, nw, sp, ns, sip, nsi):
    mi, mf, nvt = model_from_pointers(mip, mfp)
    return step_core(mi, mf, carray(qp, (nq,)), carray(qdp, (nqd,)), carray(taup, (ntau,)), carray(fxp, (nfx,)), dt,
                     carray(envip, (nei,)), carray(envfp, (nef,)), carray(sinp, (nsin,)), carray(limp, (nlim,)), e,
                     spec != 0, carray(q1p, (mi[H_NQT],)), carray(qd1p, (nvt,)), carray(qddp, (nvt,)),
                     carray(ltaup, (nvt,)), carray(soutp, (nsout,)), carray(Fp, (nFP,)), carray(Pp, (nFP,)),
                     carray(infop, (ninfo,)), carray(wp, (nw,)), carray(sp, (ns,)), carray(sip, (nsi,)))


@njit(cache=True)
def step_kernel(mi, mf, q, qd, tau, fx, dt, envi, envf, sin, lim, e, spec, q1, qd1, qdd, ltau, sout, F, P, info, w):
    """step_core with scratch of its own (the route without the C shim)."""
    nf, ni = step_scratch(mi[H_NVT], F.shape[0] // 3)
    more = 0
    st = SCRATCH
    for _ in range(3):
        st = step_core(mi, mf, q, qd, tau, fx, dt, envi, envf, sin, lim, e, spec, q1, qd1, qdd, ltau, sout, F, P,
                       info, w, np.empty(nf + more), np.empty(ni, dtype=np.int64))
        if st != SCRATCH:
            break
        more = info[SI_NF] - nf
    return st
