"""Dynamic equivalence (Featherstone §9.7): inertia parameters moved across joints without changing
the equation of motion, and ``simplify_inertias``, the book's procedure that uses them to zero as
many parameters as it can.

Two bodies B_1 (predecessor) and B_2 (successor) joined by a joint of motion subspace S: adding a
spatial inertia I_Delta to I_1 and subtracting it from I_2 leaves every coefficient of Eq. 9.29
unchanged when (Eq. 9.30)

    I_Delta S = 0,    I_Delta = X_J^T I_Delta X_J,    S^T (v_1 x* I_Delta v_1) = 0   (every q, v_1).

Table 9.7 gives the solutions per joint type (joint about / along z there; here about / along the
body-frame unit axis a of the kernel joint, whose line passes through the body origin):

* revolute: two particles on the axis, three numbers (m, mu, J):
  rbi(m, mu a, J (1 - a a^T)), m = total mass, mu = m c_a (first moment along a), J their moment
  about any line through the origin perpendicular to a;
* prismatic: a disembodied rotational inertia rbi(0, 0, Ibar), Ibar any symmetric 3x3;
* spherical: a particle at the centre, rbi(m, 0, 0) (not a URDF tree joint: no body here has one);
* planar (normal n; not in Table 9.7, solved here from Eq. 9.30): I_Delta S = 0 for the two
  translations forces m = 0 and h = 0, invariance under rotation about n leaves rbi(0, 0, J (1 - n n^T));
* 6-DoF (the floating base, floating joints): I_Delta S = 0 with S = 1 forces I_Delta = 0.

On the fixed base (B_1 = the world: v_1 = 0 and a_1 = -a_g, pure linear) Eq. 9.29 is reduced to the
joint's own row, and I_Delta only has to leave S^T I_2 S, S^T I_2 [0; g] (any g) and
S^T (S x* I_2 S) unchanged: a revolute root body keeps its moment about the axis a^T Ibar a and the part
of h perpendicular to a (h x a enters with gravity), a prismatic root body keeps its mass only
(``_root_keep``). That is the joint-1 rule of the base-parameter literature (Khalil and Dombre, 2002);
it holds for any gravity vector, so ``with_gravity`` on the result stays exact. Whatever the axis, the
revolute root body is written with three nonzero numbers: a^T Ibar a as one diagonal moment, and h
with its component along a chosen to zero one entry.
"""
from __future__ import annotations

import numpy as np

from ..estimation.regressor import frame_to_body
from ...errors import InputError
from ...joints import FREE, PRISMATIC, REVOLUTE

__all__ = ["simplify_inertias", "nonzero_parameters"]

_PARAM_IBAR = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))  # pi[4:10] (regressor.PARAM_NAMES order)
# the Ibar entry a revolute I_Delta zeroes, tried in this order (ties: the first; for a = z that is
# Iyy, Khalil's XXR = XX - YY grouping)
_J_CANDIDATES = ((1, 1), (2, 2), (0, 0), (0, 1), (0, 2), (1, 2))


def _rbi(m, h, Ib) -> np.ndarray:
    """The ten parameters [m, h, Ixx Ixy Iyy Ixz Iyz Izz] of rbi(m, h, Ibar)."""
    return np.array([m, *h, *(Ib[r, c] for r, c in _PARAM_IBAR)], dtype=float)


def _unpack(p):
    Ib = np.empty((3, 3))
    for k, (r, c) in enumerate(_PARAM_IBAR):
        Ib[r, c] = Ib[c, r] = p[4 + k]
    return float(p[0]), np.array(p[1:4], dtype=float), Ib


def _zeros(x) -> int:
    return int(np.count_nonzero(np.asarray(x) == 0.0))


def _revolute_candidates(p, a, with_mass=True):
    """The I_Delta of Table 9.7 for a revolute joint of unit axis a (body frame), rbi(m, mu a,
    J (1 - a a^T)), that best_match of §9.7 chooses from: m = 0 or the child's mass; mu = 0 or the value
    zeroing one component of h; J = 0 or the value zeroing one entry of Ibar (each zeroed entry is set
    to exactly 0).  Yields (I_Delta, child - I_Delta).  ``with_mass`` False: J only (the planar
    joint's I_Delta)."""
    m, h, Ib = _unpack(p)
    P = np.eye(3) - np.outer(a, a)  # 1 - a a^T
    hs = [(0.0, h)]
    if with_mass:
        for k in np.argsort(-np.abs(a), kind="stable"):
            if abs(a[k]) >= 1e-12:
                rest = h - (h[k] / a[k]) * a
                rest[k] = 0.0
                hs.append((h[k] / a[k], rest))
    Is = [(0.0, Ib)]
    for r, c in _J_CANDIDATES:
        if abs(P[r, c]) >= 1e-12:
            rest = Ib - (Ib[r, c] / P[r, c]) * P
            rest[r, c] = rest[c, r] = 0.0
            Is.append((Ib[r, c] / P[r, c], rest))
    for dm in ((0.0, m) if with_mass else (0.0,)):
        for mu, hr in hs:
            for J, Ir in Is:
                yield _rbi(dm, mu * a, J * P), _rbi(m - dm, hr, Ir)


def _root_keep(p, jtype, a) -> np.ndarray:
    """What a body on the fixed base must keep (module docstring), written with as few nonzero
    entries as any axis allows: revolute rbi(0, h + lambda a, (a^T Ibar a / a_k^2) e_k e_k^T) with k the
    axis's largest component and lambda = -h_k / a_k (the part of h along a is free, so its k-th entry
    is zeroed; a single diagonal moment e_k e_k^T carries a^T Ibar a, since a^T (e_k e_k^T) a = a_k^2):
    three numbers, as for a coordinate axis; prismatic rbi(m, 0, 0)."""
    m, h, Ib = _unpack(p)
    if jtype == PRISMATIC:
        return _rbi(m, np.zeros(3), np.zeros((3, 3)))
    k = int(np.argmax(np.abs(a)))
    hk = h - (h[k] / a[k]) * a
    hk[k] = 0.0  # exactly
    Ik = np.zeros((3, 3))
    Ik[k, k] = float(a @ Ib @ a) / (a[k] * a[k])
    return _rbi(0.0, hk, Ik)


def nonzero_parameters(model) -> int:
    """How many of the model's 10 nb inertial parameters (``inertial_parameters``) are not zero."""
    from ..estimation.regressor import inertial_parameters

    return int(np.count_nonzero(inertial_parameters(model)))


def simplify_inertias(model):
    """A dynamically equivalent model with as many inertial parameters zero as §9.7 can make.

    Featherstone §9.7 (Eqs. 9.29-9.30, Table 9.7), from the leaves to the root: at each body i, in
    reverse model order, ``I_Delta = best_match(jtype(i), I_i)``; ``I_i -= I_Delta``;
    ``I_parent(i) += I_Delta`` (carried to the parent's frame by X_T(i); Eq. 9.30's
    I_Delta = X_J^T I_Delta X_J makes that exact at every q).  best_match picks, among the I_Delta of
    the joint's type that zero entries of the child (each entry or none), the one leaving the most
    zeros in the child and the parent together (the book counts the child's only; counting both
    never lets a move put more nonzeros into the parent than it removes from the child, so the
    count never grows).  Per joint (module docstring for the I_Delta of each type), for a child and
    parent with no zeros of their own:

    * revolute and continuous: the child's mass, its first moment along the axis and one rotational
      entry (for an axis along z: m, m c_z and Iyy, leaving Ixx - Iyy) move to the parent: 3 zeros;
    * prismatic: the child's whole rotational inertia Ibar moves: 6 zeros;
    * planar (three kernel joints, prismatic, prismatic, revolute about the normal n): J (1 - n n^T)
      moves from the child straight to the planar joint's parent (a pure rotational inertia, which
      the two translations carry unchanged); the massless intermediate bodies stay empty: 1 zero;
    * floating base and floating joints (6-DoF): nothing moves (I_Delta = 0);
    * a joint on the fixed base: the body keeps only what its joint can feel, three numbers for a
      revolute about any axis a (a^T Ibar a and the first moment across a; about z: Izz, m c_x, m c_y)
      and the mass for a prismatic; the rest goes into the world, where it does nothing;
    * fixed joints: nothing to do, their links are merged into bodies when the model is loaded;
      mimic joints: each follower is a kernel joint of the tree and is treated as its type (the tree's
      H_t and C_t are unchanged, so G^T H_t G is);
    * spherical and helical joints exist only as loop joints, which carry no inertia; a model with
      loop joints keeps its K and k (kinematics), so its closed-loop dynamics are unchanged too.

    The result has the same H, C and gravity terms, inverse and forward dynamics to rounding (the
    tests check 1e-12 relative on every file of example-robot-data, fixed and floating base, and the
    closed-loop forward dynamics of the four-bar; what else depends only on H, C, g and kinematics,
    hybrid, contact and impact dynamics, follows but is not tested separately) and fewer nonzero
    inertial parameters (``nonzero_parameters``): on the demo arm urdf/arm7.urdf 63 of 70 nonzero
    before, 40 after. Its regressor has rank 43; the structural count after §9.7 is 1 + 2 + 6 x 7 = 45,
    the two more being m c_x, m c_y of link 1, which gravity along joint 1's axis cannot see, and some
    of the 45 are zero in the URDF already. On a generic revolute chain (no two consecutive axes
    parallel, gravity not along joint 1, any axis directions) the parameters left are exactly a set of
    base parameters: as many as the regressor's rank (3 + 7 (n - 1), 45 for seven joints), and
    independent. With parallel axes (Eq. 9.30 assumes any parent
    motion, a parallel-axis parent's is restricted) or gravity along the first axis the
    base-parameter analysis of identification finds more dependencies than §9.7 removes.

    The bodies are generally not physical any more (negative masses, indefinite inertias, as the book
    warns): the result is for computing, not a description of the robot. Do not load or check it with
    ``strict=True`` semantics, and do not read masses or centres of mass from it: ``center_of_mass``,
    ``total_mass`` and body forces (Data.f) describe the equivalent bodies, not the robot. Armature,
    damping and friction are per-dof, not inertial, and are kept. Payloads stay attached (each is
    folded into the simplified body and kept by name, so ``with_payload`` replacing one stays exact).
    The model is immutable: a new Model is returned."""
    from ...model import Model, _copy_spec

    if type(model) is not Model:
        raise InputError(f"simplify_inertias(model) needs a dn.Model, got {type(model).__name__}")
    spec = model._spec
    nb = model.nb
    P = [_rbi(*model.body_inertia(i)) for i in range(nb)]  # payloads included
    planar_top = {i for i in range(nb) if model.joint_kinds.get(spec.body_joint[i]) == "planar"
                  and (i + 1 >= nb or spec.body_joint[i + 1] != spec.body_joint[i])}
    for i in range(nb - 1, -1, -1):
        jt, a, parent = int(spec.jtype[i]), np.asarray(spec.axis[i], dtype=float), int(spec.parent[i])
        if jt == FREE:
            continue
        src = i
        if i in planar_top:  # planar joint = bodies i-2, i-1, i: J (1 - n n^T) is a pure rotational inertia,
            src = i - 2      # which the two translations carry unchanged: it goes straight to the joint's parent
            parent = int(spec.parent[src])
        if parent < 0:  # on the fixed world (a floating base's root is the FREE body, skipped above)
            if src != i:
                _, P[i] = max(_revolute_candidates(P[i], a, with_mass=False), key=lambda c: _zeros(c[1]))
                continue
            P[i] = _root_keep(P[i], jt, a)  # I_Delta = P[i] - keep goes into the fixed world
            continue
        if jt == REVOLUTE:
            cands = _revolute_candidates(P[i], a, with_mass=i not in planar_top)
        else:  # PRISMATIC: I_Delta = rbi(0, 0, Ibar), all of it or nothing
            cands = ((np.zeros(10), P[i]), (np.r_[np.zeros(4), P[i][4:]], np.r_[P[i][:4], np.zeros(6)]))
        # X_T(i) = rot(E) xlt(r): body i's frame sits at (E^T, r) in the parent's frame
        T = frame_to_body(np.asarray(spec.ET[src]).T, np.asarray(spec.rT[src]))
        best = None
        for delta, rest in cands:  # best_match: the most zeros in the child and the parent together
            to = P[parent] + T @ delta
            score = (_zeros(rest) + _zeros(to), _zeros(rest))
            if best is None or score > best[0]:
                best = (score, rest, to)
        _, P[i], P[parent] = best
    # the spec's body inertias exclude the payloads (Model adds them): subtract them again
    mass = np.array([p[0] for p in P])
    h = np.array([p[1:4] for p in P]).reshape(nb, 3)
    Ib = np.array([_unpack(p)[2] for p in P]).reshape(nb, 9)
    pm, ph, pI = np.zeros(nb), np.zeros((nb, 3)), np.zeros((nb, 9))
    for pl in spec.payloads.values():
        model._add_payload_inertia(pl, pm, ph, pI)
    mass, h, Ib = mass - pm, h - ph, Ib - pI
    new = _copy_spec(spec, mass=list(mass), h=[v.copy() for v in h], Ibar=[v.reshape(3, 3).copy() for v in Ib])
    return Model(new)
