"""The contacts of a simulation step (step.py): which points meet which surfaces, from an environment
packed as the model is (layout.SIM_*).

- EXPLICIT: dn.simulate_step's list of dn.Contact, each a point of a body against its own plane, every one
  in the step's problem, its surface state in row j;
- WORLD: the simulated robot's (sim/env.py, whose select() is the Python form of _select): fixed points
  and spheres of the links against the floor plane and axis-aligned boxes. A point is paired with the
  floor when it lies less than MARGIN above it, with a box when it is less than MARGIN outside the face
  it is nearest to leaving through (the axis where it is farthest out) and within that face's extent
  along the other two axes; a sphere by its lowest point toward that surface (its centre MARGIN + radius
  away). The pairs are taken in env.select's order (points against the floor, then against each box,
  then each sphere against the floor and the boxes); each pair's surface state lives in a slot of the
  state array (layout.py). The points of one body that follow each other are a run with a bounding sphere
  (layout.SQ_C, SQ_R, SQ_RUN, packed by sim/env.py): a run whose sphere lies beyond the margin of a surface
  is not tested point by point against it (_far), which leaves the same pairs in the same order (arm7's 128
  points resting on a table: 32 point tests instead of 256).
"""
from __future__ import annotations

import math

from .._jit import njit
from .._kernel_io import BAD_ARG_KIND, status
from ..layout import (H_NB, SB_C, SB_FACE_R, SB_FACE_S, SB_H, SC_D, SC_K, SC_MU, SC_P, SC_R, SC_S, SE_FLOOR,
                      SE_MODE, SE_NBOX, SE_NPT, SE_NSPH, SF_D, SF_FLOOR_R, SF_FLOOR_S, SF_K, SF_MARGIN, SF_MU,
                      SIM_BOX, SIM_CONTACT, SIM_EXPLICIT, SIM_FACES, SIM_HEAD_F, SIM_HEAD_I, SIM_PT_I, SIM_SPHERE,
                      SIM_WORLD, SIM_WPOINT, SP_BODY, SQ_C, SQ_P, SQ_R, SQ_RUN, SR_P, SR_RADIUS, W_PW, W_PW_N,
                      W_RW, W_RW_N)

# dt, restitution, the state, the limits or the environment are not what they must be (the Python side checks
# them and names what is wrong)
BAD_ARG = status.py_func(BAD_ARG_KIND, 0, 0)


@njit(cache=True, pure=True)
def env_kmax(npt, nsph, nbox, mode):
    """The most contacts one step can select."""
    return npt if mode == SIM_EXPLICIT else (npt + nsph) * (1 + nbox)


@njit(cache=True, pure=True)
def env_slots(npt, nsph, nbox, mode):
    """The rows of the state array (3 floats each)."""
    return npt if mode == SIM_EXPLICIT else (npt + nsph) * (1 + SIM_FACES * nbox)


@njit(cache=True, inline="always")
def _world_point(w, nb, b, x0, x1, x2, out, o):
    """out[o:o + 3] = R_b x + p_b (the body's world pose in the work array)."""
    R = W_RW * nb + W_RW_N * b
    p = W_PW * nb + W_PW_N * b
    out[o] = w[p] + w[R] * x0 + w[R + 1] * x1 + w[R + 2] * x2
    out[o + 1] = w[p + 1] + w[R + 3] * x0 + w[R + 4] * x1 + w[R + 5] * x2
    out[o + 2] = w[p + 2] + w[R + 6] * x0 + w[R + 7] * x1 + w[R + 8] * x2


@njit(cache=True)
def _face(envf, o, x0, x1, x2, pad, margin):
    """The face of the box at envf[o] that the point x (pad: a sphere's radius) pairs with (module
    docstring): 2 axis + (0 on the + side, 1 on the - side), or -1."""
    u0 = abs(x0 - envf[o + SB_C]) - envf[o + SB_H]
    u1 = abs(x1 - envf[o + SB_C + 1]) - envf[o + SB_H + 1]
    u2 = abs(x2 - envf[o + SB_C + 2]) - envf[o + SB_H + 2]
    a = 0
    um = u0
    if u1 > um:
        a, um = 1, u1
    if u2 > um:
        a, um = 2, u2
    rest = -math.inf  # the largest u of the other two axes
    for c, uc in ((0, u0), (1, u1), (2, u2)):
        if c != a and uc > rest:
            rest = uc
    if not (um - pad < margin and rest <= 0.0):
        return -1
    x = x0 if a == 0 else (x1 if a == 1 else x2)
    return 2 * a + (0 if x - envf[o + SB_C + a] >= 0.0 else 1)


@njit(cache=True)
def _add(k, envf, so, ro, body, px, py, pz, cb, cp, cR, csp, cK, cD, cmu, slot, sl, pos, Px, Py, Pz, K, D, mu):
    """Candidate k: body, its point in body coordinates, the surface (point at envf[so], axes at envf[ro]),
    the constants and the state slot; pos its world position."""
    cb[k] = body
    slot[k] = sl
    cp[3 * k], cp[3 * k + 1], cp[3 * k + 2] = px, py, pz
    pos[3 * k], pos[3 * k + 1], pos[3 * k + 2] = Px, Py, Pz
    for c in range(3):
        csp[3 * k + c] = envf[so + c]
    for c in range(9):
        cR[9 * k + c] = envf[ro + c]
    cK[k], cD[k], cmu[k] = K, D, mu


FAR_EPS = 1e-9  # m: a run is skipped only when its sphere is this much farther than the margin (rounding)


@njit(cache=True, inline="always")
def _far(w, nb, envi, envf, o, b, rnd, floor, fs, n0, n1, n2, bo, margin):
    """The sphere bounding the run of points starting at envf[o] (layout.SQ_C, SQ_R; body b) lies beyond the
    margin of round rnd's surface (0: the floor, else box rnd - 1), so that no point of the run can pair with
    it: above the floor by margin + radius, or outside the box along one axis by margin + radius (a point
    pairs with a box only when it is less than margin outside along every axis, _face)."""
    R = W_RW * nb + W_RW_N * b
    p = W_PW * nb + W_PW_N * b
    x0, x1, x2 = envf[o + SQ_C], envf[o + SQ_C + 1], envf[o + SQ_C + 2]
    C0 = w[p] + w[R] * x0 + w[R + 1] * x1 + w[R + 2] * x2
    C1 = w[p + 1] + w[R + 3] * x0 + w[R + 4] * x1 + w[R + 5] * x2
    C2 = w[p + 2] + w[R + 6] * x0 + w[R + 7] * x1 + w[R + 8] * x2
    lim = margin + envf[o + SQ_R] + FAR_EPS
    if rnd == 0:
        return not floor or (C0 - envf[fs]) * n0 + (C1 - envf[fs + 1]) * n1 + (C2 - envf[fs + 2]) * n2 >= lim
    fo = bo + (rnd - 1) * SIM_BOX
    return (abs(C0 - envf[fo + SB_C]) - envf[fo + SB_H] >= lim
            or abs(C1 - envf[fo + SB_C + 1]) - envf[fo + SB_H + 1] >= lim
            or abs(C2 - envf[fo + SB_C + 2]) - envf[fo + SB_H + 2] >= lim)


@njit(cache=True)
def _select(mi, envi, envf, w, cb, cp, cR, csp, cK, cD, cmu, slot, pos):
    """The contacts of this step (module docstring), with the bodies' world poses in w. Returns their
    number."""
    nb = mi[H_NB]
    npt, nsph, nbox = envi[SE_NPT], envi[SE_NSPH], envi[SE_NBOX]
    if envi[SE_MODE] == SIM_EXPLICIT:
        for j in range(npt):
            o = SIM_HEAD_F + SIM_CONTACT * j
            b = envi[SIM_HEAD_I + SIM_PT_I * j + SP_BODY]
            _world_point(w, nb, b, envf[o + SC_P], envf[o + SC_P + 1], envf[o + SC_P + 2], pos, 3 * j)
            _add(j, envf, o + SC_S, o + SC_R, b, envf[o + SC_P], envf[o + SC_P + 1], envf[o + SC_P + 2], cb, cp, cR,
                 csp, cK, cD, cmu, slot, j, pos, pos[3 * j], pos[3 * j + 1], pos[3 * j + 2], envf[o + SC_K],
                 envf[o + SC_D], envf[o + SC_MU])
        return npt
    K, D, mu, margin = envf[SF_K], envf[SF_D], envf[SF_MU], envf[SF_MARGIN]
    fs, fr = SF_FLOOR_S, SF_FLOOR_R
    n0, n1, n2 = envf[fr + 2], envf[fr + 5], envf[fr + 8]  # the floor's normal: the axes' third column
    floor = envi[SE_FLOOR] != 0
    nslot = 1 + SIM_FACES * nbox
    po = SIM_HEAD_F  # the points' block, then the spheres', then the boxes'
    so = po + SIM_WPOINT * npt
    bo = so + SIM_SPHERE * nsph
    k = 0
    X = pos  # the candidates' positions double as the points' world positions until they are taken
    for rnd in range(1 + nbox if npt else 0):
        end = 0  # the end of the current run (layout.SQ_RUN)
        skip = 0  # the points before it belong to a run whose sphere is beyond the margin of this round's surface
        for j in range(npt):
            if j < skip:
                continue
            if j >= end:
                end = j + int(envf[po + SIM_WPOINT * j + SQ_RUN])
                if _far(w, nb, envi, envf, po + SIM_WPOINT * j, envi[SIM_HEAD_I + SIM_PT_I * j + SP_BODY], rnd,
                        floor, fs, n0, n1, n2, bo, margin):
                    skip = end
                    continue
            b = envi[SIM_HEAD_I + SIM_PT_I * j + SP_BODY]
            o = po + SIM_WPOINT * j + SQ_P
            _world_point(w, nb, b, envf[o], envf[o + 1], envf[o + 2], X, 3 * k)
            P0, P1, P2 = X[3 * k], X[3 * k + 1], X[3 * k + 2]
            if rnd == 0:
                if floor and (P0 - envf[fs]) * n0 + (P1 - envf[fs + 1]) * n1 + (P2 - envf[fs + 2]) * n2 < margin:
                    _add(k, envf, fs, fr, b, envf[o], envf[o + 1], envf[o + 2], cb, cp, cR, csp, cK, cD, cmu, slot,
                         nslot * j, pos, P0, P1, P2, K, D, mu)
                    k += 1
                continue
            bx = rnd - 1
            fo = bo + bx * SIM_BOX
            f = _face(envf, fo, P0, P1, P2, 0.0, margin)
            if f >= 0:
                _add(k, envf, fo + SB_FACE_S + 3 * f, fo + SB_FACE_R + 9 * f, b, envf[o], envf[o + 1], envf[o + 2],
                     cb, cp, cR, csp, cK, cD, cmu, slot, nslot * j + 1 + SIM_FACES * bx + f, pos, P0, P1, P2, K, D, mu)
                k += 1
    for i in range(nsph):
        b = envi[SIM_HEAD_I + SIM_PT_I * (npt + i) + SP_BODY]
        o = so + SIM_SPHERE * i
        r = envf[o + SR_RADIUS]
        _world_point(w, nb, b, envf[o + SR_P], envf[o + SR_P + 1], envf[o + SR_P + 2], X, 3 * k)
        C0, C1, C2 = X[3 * k], X[3 * k + 1], X[3 * k + 2]
        R = W_RW * nb + W_RW_N * b
        p = W_PW * nb + W_PW_N * b
        for sf in range(1 + nbox):
            if sf == 0:
                if not (floor and (C0 - envf[fs]) * n0 + (C1 - envf[fs + 1]) * n1 + (C2 - envf[fs + 2]) * n2 - r
                        < margin):
                    continue
                sp, ro, sl, m0, m1, m2 = fs, fr, 0, n0, n1, n2
            else:
                fo = bo + (sf - 1) * SIM_BOX
                f = _face(envf, fo, C0, C1, C2, r, margin)
                if f < 0:
                    continue
                sp, ro, sl = fo + SB_FACE_S + 3 * f, fo + SB_FACE_R + 9 * f, 1 + SIM_FACES * (sf - 1) + f
                m0, m1, m2 = envf[ro + 2], envf[ro + 5], envf[ro + 8]
            P0, P1, P2 = C0 - r * m0, C1 - r * m1, C2 - r * m2  # the lowest point toward the surface
            d0, d1, d2 = P0 - w[p], P1 - w[p + 1], P2 - w[p + 2]
            x0 = w[R] * d0 + w[R + 3] * d1 + w[R + 6] * d2  # R_b^T (P - p_b): in body coordinates
            x1 = w[R + 1] * d0 + w[R + 4] * d1 + w[R + 7] * d2
            x2 = w[R + 2] * d0 + w[R + 5] * d1 + w[R + 8] * d2
            _add(k, envf, sp, ro, b, x0, x1, x2, cb, cp, cR, csp, cK, cD, cmu, slot, nslot * (npt + i) + sl, pos,
                 P0, P1, P2, K, D, mu)
            k += 1
    return k


@njit(cache=True)
def _env_ok(mi, envi, envf, nsin, nsout, kmax):
    """0 when the environment's arrays hold what their header says and fit the outputs, else BAD_ARG."""
    if envi.shape[0] < SIM_HEAD_I:
        return BAD_ARG
    mode, npt, nsph, nbox = envi[SE_MODE], envi[SE_NPT], envi[SE_NSPH], envi[SE_NBOX]
    world = mode == SIM_WORLD
    if not (mode == SIM_EXPLICIT or world) or npt < 0 or nsph < 0 or nbox < 0 or (not world and (nsph or nbox)):
        return BAD_ARG
    nf = SIM_HEAD_F + (SIM_WPOINT * npt + SIM_SPHERE * nsph + SIM_BOX * nbox if world else SIM_CONTACT * npt)
    if envi.shape[0] != SIM_HEAD_I + SIM_PT_I * (npt + nsph) or envf.shape[0] != nf:
        return BAD_ARG
    for j in range(npt + nsph):
        b = envi[SIM_HEAD_I + SIM_PT_I * j + SP_BODY]
        if b < 0 or b >= mi[H_NB]:
            return BAD_ARG
    ns = 3 * env_slots(npt, nsph, nbox, mode)
    if (nsin != 0 and nsin != ns) or nsout != ns or env_kmax(npt, nsph, nbox, mode) > kmax:
        return BAD_ARG
    return 0


@njit(cache=True)
def _finite(x, n):
    """Every one of x[:n] finite. Without an early exit, so that the loop is vectorised (a surface state array
    of 128 points against a floor and a box is 2688 floats: 1.3 us with one, 0.17 us without)."""
    bad = False
    for i in range(n):
        bad |= not x[i] - x[i] == 0.0
    return not bad
