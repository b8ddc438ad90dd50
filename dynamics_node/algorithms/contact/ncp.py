"""The contact problem with Coulomb friction on the exact circular cone (Featherstone §11.2-11.5 with
friction): find the contact forces f (local coordinates per contact: tangents t1, t2, normal n) of

    a = A f + b        A = T^T H^-1 T (Eq. 11.35), b = the contact points' free accelerations (Eq. 11.36)

such that each contact is in one of four modes:

    SEP    f = 0,                        a_n >= 0                         (contact breaks, Eq. 11.14)
    STICK  a = 0,                        f_n >= 0, |f_t| <= mu f_n        (rolls without slipping)
    SLIDE  f_t = -mu f_n d, a_n = 0,     f_n >= 0                         (d = v_t/|v_t|: already sliding)
    SLIP   a_t = -gamma f_t, a_n = 0,    f_n >= 0, |f_t| = mu f_n, gamma >= 0   (at rest, starts to slide:
                                         maximum dissipation, the friction opposes the slip acceleration)

For mu = 0 a contact is SEP or SLIDE with f_t = 0 (Eqs. 11.14-11.18 exactly: an LCP); for mu = inf it
is SEP or STICK. The same problem on velocities is Moreau's impact law (impact.py): a = v+ + e v-,
f the impulse, every contact "at rest" (SEP, STICK, SLIP).

Method (one place, three steps):
1. projected block Gauss-Seidel: each contact in turn solved exactly against the others' forces
   (single.single: §11.1's single contact with friction), a few sweeps;
2. the modes that sweep settled on are solved exactly (``mode_solve``: Newton on the mode's
   equations, least-squares steps of minimum norm (dense.lstsq_minnorm), so with a singular A, as for a box on four
   corners, the solution nearest the sweep's, or the minimum-norm one when that is valid, is taken)
   and every condition is verified to TOL relative (``valid``); modes whose equations are linear and
   symmetric (SEP, STICK, and SLIDE without friction, as the simulation step's joint limits) are tried first
   as one positive semidefinite system of minimum norm (``_stick_minnorm``, a pivoted Cholesky: the same
   solution as Newton's from zero, at half the cost);
3. if the sweeps never give a verified solution, the mode combinations nearest theirs are
   enumerated (all of them up to ENUM_MAX). None valid: the problem has no solution that this
   search finds, NO_SOLUTION (with friction it may have none: Painlevé's paradox).
With friction the problem is not convex and may have several solutions; the one returned is the
first verified. With a singular A the forces are not unique (their effect T f is, for mu = 0).

Nothing here allocates (the contact forward dynamics runs as one C callback, contact.contact_fd_c):
``solve_in`` takes scratch arrays of ``scratch_size(k)``, and each function cuts what it needs from
the front of the scratch it is given and passes the rest on; the small dense solves are dense.py's.
``solve`` is solve_in with scratch of its own.
"""
from __future__ import annotations

import math

import numpy as np

from ..._kernel_io import NO_SOLUTION_KIND, OVERFLOW_STATUS, status
from ..._jit import njit
from .single import SEP, SLIDE, SLIP, STICK, single
from ..tree.dense import lstsq_minnorm, lstsq_scratch, psd_minnorm, psd_scratch

TOL = 1e-10  # acceptance of a solution, relative to the force and acceleration scales
NO_SOLUTION = status.py_func(NO_SOLUTION_KIND, 0, 0)  # solve found no contact forces
SWEEPS = (1, 3, 8, 20, 50, 100)  # Gauss-Seidel sweeps after which the settled modes are solved exactly
ENUM_MAX = 729  # mode combinations tried at most in step 3 (3^6)
NEWTON_ITER = 40
STALL_AFTER = 4  # Newton iterations after which a residual that no longer halves means: give up
SOLVE_FLOATS = 15  # solve_in's own scratch: the rest r, the contact's force, its 3 x 3 block


@njit(cache=True, inline="always")
def _copy(dst, src):
    """dst[:] = src entry by entry (an array assignment brings numba's shape-mismatch error, whose
    message allocates, into the C callback)."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@njit(cache=True)
def _residual(A, b, mu, d, modes, x, F, Jm, k, a):
    """The mode equations F(x) = 0 (x = [f (3k), gamma (k)]) and their Jacobian Jm (4k x 4k); a (3k):
    the accelerations A f + b."""
    n3 = 3 * k
    _accel(A, b, x, a, n3)
    Jm[:, :] = 0.0
    for i in range(k):
        o = 3 * i
        g = n3 + i
        md = modes[i]
        if md == SEP:
            for c in range(3):
                F[o + c] = x[o + c]
                Jm[o + c, o + c] = 1.0
        elif md == STICK:
            for c in range(3):
                F[o + c] = a[o + c]
                _copy(Jm[o + c], A[o + c])
        elif md == SLIDE:
            for c in range(2):
                F[o + c] = x[o + c] + mu[i] * x[o + 2] * d[i, c]
                Jm[o + c, o + c] = 1.0
                Jm[o + c, o + 2] = mu[i] * d[i, c]
            F[o + 2] = a[o + 2]
            _copy(Jm[o + 2], A[o + 2])
        else:  # SLIP
            gam = x[g]
            for c in range(2):
                F[o + c] = a[o + c] + gam * x[o + c]
                _copy(Jm[o + c], A[o + c])
                Jm[o + c, o + c] += gam
                Jm[o + c, g] = x[o + c]
            F[o + 2] = a[o + 2]
            _copy(Jm[o + 2], A[o + 2])
            ft = math.hypot(x[o], x[o + 1])
            F[g] = ft - mu[i] * x[o + 2]
            if ft > 0.0:
                Jm[g, o] = x[o] / ft
                Jm[g, o + 1] = x[o + 1] / ft
            Jm[g, o + 2] = -mu[i]
        if md != SLIP:
            F[g] = x[g]
            Jm[g, g] = 1.0


@njit(cache=True, inline="always")
def _accel(A, b, x, a, n3):
    """a = A x[:n3] + b."""
    for r in range(n3):
        t = b[r]
        for c in range(n3):
            t += A[r, c] * x[c]
        a[r] = t


@njit(cache=True)
def _scales(A, b, x, k):
    """(max |f|, max over rows of |b| and |A f|): the force and acceleration scales of x."""
    n3 = 3 * k
    sf = 0.0
    sa = 0.0
    for r in range(n3):
        sf = max(sf, abs(x[r]))
        t = 0.0
        for c in range(n3):
            t += A[r, c] * x[c]
        sa = max(sa, abs(b[r]), abs(t))
    return sf, sa


@njit(cache=True)
def valid(A, b, mu, d, modes, x, k, tol):
    """Every condition of the modes (module docstring) holds to tol relative to the scales."""
    n3 = 3 * k
    sf = 0.0
    sa = 0.0
    for j in range(x.shape[0]):
        if not (x[j] - x[j] == 0.0):
            return False
    for r in range(n3):
        t = 0.0
        for c in range(n3):
            t += A[r, c] * x[c]
        sa = max(sa, abs(b[r]), abs(t))
        sf = max(sf, abs(x[r]))
    tf = tol * sf + 1e-300
    ta = tol * sa + 1e-300
    for i in range(k):
        o = 3 * i
        a0 = b[o]
        a1 = b[o + 1]
        a2 = b[o + 2]
        for c in range(n3):
            a0 += A[o, c] * x[c]
            a1 += A[o + 1, c] * x[c]
            a2 += A[o + 2, c] * x[c]
        md = modes[i]
        if md == SEP:
            if not (a2 >= -ta and abs(x[o]) <= tf and abs(x[o + 1]) <= tf and abs(x[o + 2]) <= tf):
                return False
            continue
        fn = x[o + 2]
        ft = math.hypot(x[o], x[o + 1])
        if not (fn >= -tf and abs(a2) <= ta):
            return False
        if md == STICK:
            if not (abs(a0) <= ta and abs(a1) <= ta):
                return False
            if mu[i] != np.inf and not ft <= mu[i] * fn + tf:
                return False
        elif md == SLIDE:
            if not (abs(x[o] + mu[i] * fn * d[i, 0]) <= tf and abs(x[o + 1] + mu[i] * fn * d[i, 1]) <= tf):
                return False
        else:
            gam = x[n3 + i]
            if not (abs(ft - mu[i] * fn) <= tf and gam * sf >= -ta):
                return False
            if not (abs(a0 + gam * x[o]) <= ta and abs(a1 + gam * x[o + 1]) <= ta):
                return False
    return True


@njit(cache=True)
def mode_solve(A, b, mu, d, modes, x0, k, x, s, si):
    """Newton on the mode equations from x0 with minimum-norm least-squares steps (the solution
    nearest x0 when they are linear and A singular). x: the result. Returns True when it converged."""
    m = 4 * k
    F = s[:m]
    step = s[m:2 * m]
    a = s[2 * m:2 * m + 3 * k]
    o = 2 * m + 3 * k
    Jm = s[o:o + m * m].reshape((m, m))
    s2 = s[o + m * m:]
    _copy(x, x0)
    for i in range(k):  # a SLIP start needs a friction direction and a gamma
        if modes[i] == SLIP:
            o = 3 * i
            if math.hypot(x[o], x[o + 1]) == 0.0:
                x[o] = mu[i] * max(x[o + 2], 0.0) + 1e-300
            if not x[3 * k + i] > 0.0:
                x[3 * k + i] = 0.0
    prev = np.inf
    for it in range(NEWTON_ITER):
        _residual(A, b, mu, d, modes, x, F, Jm, k, a)
        sf, sa = _scales(A, b, x, k)
        nrm = 0.0
        for j in range(m):
            nrm = max(nrm, abs(F[j]))
        if nrm <= 1e-15 * (sf + sa) or not (nrm < np.inf):
            return nrm < np.inf
        if nrm >= prev and nrm <= 1e-12 * (sf + sa):
            return True  # rounding level
        if it >= STALL_AFTER and nrm > 0.5 * prev:
            return False  # not converging (Newton near a solution at least halves it): a wrong mode
        for j in range(m):
            F[j] = -F[j]
        lstsq_minnorm(Jm, F, step, 1e-13, s2, si)
        for j in range(m):
            x[j] += step[j]
        prev = nrm
    return True


@njit(cache=True)
def _stick_minnorm(A, b, mu, d, modes, k, x, tol, s, si):
    """Modes of SEP, STICK and frictionless SLIDE (mu = 0) only: f = 0 on SEP, f_t = 0 on SLIDE, A_SS f_S = -b_S
    of minimum norm (psd_minnorm) over the STICK rows and the SLIDE contacts' normal rows (a_n = 0); True when
    that is valid. (The joint limits' rows of the simulation step are such SLIDE contacts.)"""
    n = 0
    idx = si[:3 * k]
    for i in range(k):
        if modes[i] == STICK:
            for c in range(3):
                idx[n] = 3 * i + c
                n += 1
        elif modes[i] == SLIDE:
            idx[n] = 3 * i + 2
            n += 1
    M = s[:n * n].reshape((n, n))
    r = s[n * n:n * n + n]
    fs = s[n * n + n:n * n + 2 * n]
    for a in range(n):
        r[a] = -b[idx[a]]
        for c in range(n):
            M[a, c] = A[idx[a], idx[c]]
    if not psd_minnorm(M, r, fs, s[n * n + 2 * n:], si[3 * k:]):
        return False
    x[:] = 0.0
    for a in range(n):
        x[idx[a]] = fs[a]
    return valid(A, b, mu, d, modes, x, k, tol)


@njit(cache=True)
def _try(A, b, mu, d, modes, x0, k, x, tol, s, si):
    """mode_solve from x0, and from zero (the minimum-norm solution, preferred when valid)."""
    m = 4 * k
    z = s[:m]
    y = s[m:2 * m]
    s2 = s[2 * m:]
    z[:] = 0.0
    linear = True
    symmetric = True
    frictionless = True  # symmetric, with SLIDE contacts of mu = 0 (f_t = 0 whatever d: their normal rows only)
    for i in range(k):
        if modes[i] == SLIP:
            linear = False
        if modes[i] != SEP and modes[i] != STICK:
            symmetric = False
            if not (modes[i] == SLIDE and mu[i] == 0.0):
                frictionless = False
    if frictionless:  # the solution of minimum norm, as Newton's from zero below, by a pivoted Cholesky
        if _stick_minnorm(A, b, mu, d, modes, k, y, tol, s2, si):
            _copy(x, y)
            return True
    if linear and not symmetric:
        mode_solve(A, b, mu, d, modes, z, k, y, s2, si)
        if valid(A, b, mu, d, modes, y, k, tol):
            _copy(x, y)
            return True
    mode_solve(A, b, mu, d, modes, x0, k, y, s2, si)
    if valid(A, b, mu, d, modes, y, k, tol):
        _copy(x, y)
        return True
    return False


@njit(cache=True, pure=True)
def scratch_size(k):
    """(floats, ints) of solve_in's scratch for k contacts (each function below cuts its arrays from
    the front of what it is given and passes the rest to the functions it calls)."""
    n3 = 3 * k
    m = 4 * k
    pf, pi = psd_scratch(n3)
    lf, li = lstsq_scratch(m)
    stick = (n3 * n3 + 2 * n3 + pf, n3 + pi)  # _stick_minnorm
    newton = (2 * m + n3 + m * m + lf, li)  # mode_solve
    tf = 2 * m + max(stick[0], newton[0])  # _try
    ti = max(stick[1], newton[1])
    return SOLVE_FLOATS + m + 2 * m + tf, 6 * k + ti  # solve_in's own, then _enumerate's (> _settle's)


@njit(cache=True)
def solve(A, b, mu, dyn, d, x, modes):
    """solve_in with scratch of its own."""
    nf, ni = scratch_size(mu.shape[0])
    return solve_in(A, b, mu, dyn, d, x, modes, np.empty(nf), np.empty(ni, dtype=np.int64))


@njit(cache=True)
def solve_in(A, b, mu, dyn, d, x, modes, s, si):
    """The contact problem of the module docstring. A (3k x 3k), b (3k) local per contact [t1 t2 n];
    mu (k, inf allowed); dyn (k, 1 = sliding with direction d[i] (k x 2)). On return x[:3k] = f,
    x[3k:] = gamma, modes (k). Returns 0, or NO_SOLUTION. s, si: scratch (scratch_size(k))."""
    k = mu.shape[0]
    n3 = 3 * k
    x[:] = 0.0
    if k == 0:
        return 0
    for r in range(n3):
        if not (b[r] - b[r] == 0.0):
            return OVERFLOW_STATUS
        for c in range(n3):
            if not (A[r, c] - A[r, c] == 0.0):
                return OVERFLOW_STATUS
    f = x[:n3]
    r = s[0:3]
    fi = s[3:6]
    Ai = s[6:SOLVE_FLOATS].reshape((3, 3))
    y = s[SOLVE_FLOATS:SOLVE_FLOATS + 4 * k]
    s2 = s[SOLVE_FLOATS + 4 * k:]
    sweep = 0
    for target in SWEEPS:
        while sweep < target:
            sweep += 1
            for i in range(k):
                o = 3 * i
                for c in range(3):
                    t = b[o + c]
                    for j in range(n3):
                        if j < o or j >= o + 3:
                            t += A[o + c, j] * f[j]
                    r[c] = t
                    for c2 in range(3):
                        Ai[c, c2] = A[o + c, o + c2]
                fi[0], fi[1], fi[2] = f[o], f[o + 1], f[o + 2]
                modes[i] = single(Ai, r, mu[i], dyn[i] != 0, d[i, 0], d[i, 1], fi)
                f[o], f[o + 1], f[o + 2] = fi[0], fi[1], fi[2]
        _gammas(A, b, x, modes, k)
        if valid(A, b, mu, d, modes, x, k, TOL):  # the sweep is exact already (one contact, say)
            _settle(A, b, mu, d, modes, x, k, s2, si)
            return 0
        if _try(A, b, mu, d, modes, x, k, y, TOL, s2, si):
            _copy(x, y)
            _settle(A, b, mu, d, modes, x, k, s2, si)
            return 0
    st = _enumerate(A, b, mu, dyn, d, x, modes, k, s2, si)
    if st == 0:
        _settle(A, b, mu, d, modes, x, k, s2, si)
    return st


@njit(cache=True)
def _exact_zeros(modes, x, k):
    """SEP contacts carry exactly no force (Newton's least-squares steps leave rounding there)."""
    for i in range(k):
        if modes[i] == SEP:
            x[3 * i] = 0.0
            x[3 * i + 1] = 0.0
            x[3 * i + 2] = 0.0
        if modes[i] != SLIP:
            x[3 * k + i] = 0.0


@njit(cache=True)
def _settle(A, b, mu, d, modes, x, k, s, si):
    """A SLIP contact whose gamma is zero does not slip (a_t = 0): it sticks at the cone's edge. Such
    contacts are made STICK and the mode's minimum-norm (or nearest) solution taken when it is valid:
    with a singular A the sweeps can leave internal forces that only this removes."""
    slip = False
    for i in range(k):
        slip = slip or modes[i] == SLIP
    if not slip:
        _exact_zeros(modes, x, k)
        return
    sf, sa = _scales(A, b, x, k)
    m2 = si[:k]
    changed = False
    for i in range(k):
        m2[i] = modes[i]
        if modes[i] == SLIP and x[3 * k + i] * sf <= TOL * sa:
            m2[i] = STICK
            x[3 * k + i] = 0.0
            changed = True
    if changed:
        y = s[:4 * k]
        if _try(A, b, mu, d, m2, x, k, y, TOL, s[4 * k:], si[k:]):
            _copy(x, y)
            _copy(modes, m2)
    _exact_zeros(modes, x, k)


@njit(cache=True)
def _gammas(A, b, x, modes, k):
    """gamma of the SLIP contacts from the sweep's forces: a_t = -gamma f_t in least squares."""
    n3 = 3 * k
    for i in range(k):
        o = 3 * i
        g = 0.0
        if modes[i] == SLIP:
            ff = x[o] * x[o] + x[o + 1] * x[o + 1]
            if ff > 0.0:
                a0 = b[o]
                a1 = b[o + 1]
                for c in range(n3):
                    a0 += A[o, c] * x[c]
                    a1 += A[o + 1, c] * x[c]
                g = max(0.0, -(a0 * x[o] + a1 * x[o + 1]) / ff)
        x[n3 + i] = g


@njit(cache=True)
def _candidates(mu, dyn, k, cand, nc):
    """The modes contact i may take: cand[3 i:3 i + nc[i]]."""
    for i in range(k):
        cand[3 * i] = SEP
        if mu[i] == 0.0 or dyn[i] != 0:
            cand[3 * i + 1] = SLIDE
            nc[i] = 2
        elif mu[i] == np.inf:
            cand[3 * i + 1] = STICK
            nc[i] = 2
        else:
            cand[3 * i + 1] = STICK
            cand[3 * i + 2] = SLIP
            nc[i] = 3


@njit(cache=True)
def _enumerate(A, b, mu, dyn, d, x, modes, k, s, si):
    """Step 3: mode combinations by increasing number of contacts whose mode differs from the
    sweeps' (x, modes on entry), each solved and verified; the first valid one is returned."""
    cand = si[:3 * k]
    nc = si[3 * k:4 * k]
    _candidates(mu, dyn, k, cand, nc)
    total = 1
    for i in range(k):
        total *= nc[i]
        if total > ENUM_MAX:
            break
    start = si[4 * k:5 * k]
    trial = si[5 * k:6 * k]
    x0 = s[:4 * k]
    y = s[4 * k:8 * k]
    _copy(x0, x)
    _copy(start, modes)
    tried = 0
    for dist in range(1, k + 1):
        for code in range(min(total, ENUM_MAX) if total <= ENUM_MAX else ENUM_MAX):
            c = code
            diff = 0
            for i in range(k):
                trial[i] = cand[3 * i + c % nc[i]]
                c //= nc[i]
                if trial[i] != start[i]:
                    diff += 1
            if diff != dist:
                continue
            tried += 1
            if _try(A, b, mu, d, trial, x0, k, y, TOL, s[8 * k:], si[6 * k:]):
                _copy(x, y)
                _copy(modes, trial)
                return 0
    return NO_SOLUTION
