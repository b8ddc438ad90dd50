"""Every public function of ``dynamics_node`` called once on small models written here, so that
``python -m dynamics_node._jit_build build`` leaves numba's cache complete: afterwards no call of the
library, of the node's services or of its stream compiles anything (``_jit_build.part``).

Most ``njit`` kernels have no explicit signature: numba compiles them at their first call, for the
types of that call. Those types do not depend on the model: the public functions hand the kernels
the model's packed arrays and their own C-contiguous float64 (and int64) arrays, Python floats,
ints and bools, whatever the robot and whatever the caller passed (dispatch.py's contract). What
depends on the model is WHICH kernels run: a mimic joint (§9.6), a floating base, friction and
armature, loop joints (one cluster, many, with and without mimic joints), the routes of ``data=``
and of f_ext. So each entry of ``CALLS`` calls its function on the models below that take different
routes, with the options that pick other kernels. ``CALLS`` and ``NO_KERNEL`` together name every
entry of ``dn.__all__``: test/test_core_warm.py checks it, and that in a fresh process every public
function on arm7, the Panda and a floating robot then compiles nothing.

The models (their URDF text in ``robots.py``): ``tree`` (revolute, prismatic, continuous and
planar joints, a branch, a fixed joint and a mimic joint), ``plain`` (no mimic joint: the C
callbacks' direct route), ``law`` (friction with every term of the joint law, armature), ``free``
(the tree on a floating base), ``box`` (one floating body), ``four`` and ``four_mimic`` (a four-bar
closed by a revolute ``<loop_joint>``, without and with a mimic joint), ``chain`` (ten four-bars:
enough loop constraints for the per-cluster solution, §8.9) and ``dual`` (two six-joint arms holding
an object through a spherical loop joint, Unseren's model).
"""
from __future__ import annotations

import zlib

import numpy as np

from .robots import BOX_URDF, DUAL_Q, dual_urdf, fourbar_urdf, tree_urdf


class Models:
    """The models of the module docstring and a state of each (seeded, so every run is the same)."""

    def __init__(self):
        import dynamics_node as dn

        self.dn = dn
        law = dn.JointFriction(viscous=0.2, coulomb=0.3, coulomb_velocity=0.05, stribeck=0.1,
                               stribeck_velocity=0.2, offset=0.01)
        self.tree = dn.load_model(tree_urdf())
        self.plain = dn.load_model(tree_urdf(mimic=False))
        self.law = dn.load_model(tree_urdf(), friction=law, armature=0.01)
        self.law_plain = dn.load_model(tree_urdf(mimic=False), friction=True, armature={"j1": 0.02})
        self.free = dn.load_model(tree_urdf(), floating_base=True)
        self.free_plain = dn.load_model(tree_urdf(mimic=False), floating_base=True, friction=law)
        self.box = dn.load_model(BOX_URDF, floating_base=True)
        self.four = dn.load_model(fourbar_urdf())
        self.four_mimic = dn.load_model(fourbar_urdf(mimic=True))
        self.chain = dn.load_model(fourbar_urdf(10))
        self.dual = dn.load_model(dual_urdf(dn))
        self.reseed("models")

    def reseed(self, name):
        """The states that follow depend on ``name`` only, not on what ran before: ``run`` reseeds
        before each entry, so an entry meets the same states whichever entries ran before it, in
        whichever process."""
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))

    def trees(self):
        """The tree models (no loop joints), fixed and floating, with and without mimic joints."""
        return (self.tree, self.plain, self.law, self.law_plain, self.free, self.free_plain)

    def state(self, m, n=None):
        """(q, qd, qdd, tau) of m, or N x ... arrays of n states; q a valid configuration."""
        rows = []
        for _ in range(1 if n is None else n):
            v = self.rng.uniform(-0.5, 0.5, m.nv)
            q = self.dn.integrate(m, np.asarray(m.neutral(), dtype=float), v)
            rows.append((q, self.rng.uniform(-1, 1, m.nv), self.rng.uniform(-1, 1, m.nv),
                         self.rng.uniform(-1, 1, m.nv)))
        if n is None:
            return rows[0]
        return tuple(np.array([r[i] for r in rows]) for i in range(4))

    def closed(self, m):
        """(q, qd, qdd) of a loop model on its constraints: q closed from a guess, qd by K qd = 0."""
        dn = self.dn
        if m is self.dual:
            q = np.array(DUAL_Q)
            indep = [n for n in m.joint_names if n.startswith("a1_") or n[-1] in "456"]  # 9 freedoms
        else:
            q = np.array([0.3 if n.startswith("crank") else (1.2 if n.startswith("rocker") else -0.8)
                          for n in m.joint_names])
            indep = [n for n in m.joint_names if n.startswith("crank")]
            q = dn.close_loops(m, q, indep)
        qd = dn.close_loop_velocities(m, q, np.where([n in indep for n in m.joint_names], 0.5, 0.0), indep)
        return q, qd, np.zeros(m.nv), indep


# ---------------------------------------------------------------------------------------------
# one entry per public function: what it runs on, with every option that reaches other kernels
def _fext(m):
    return {"l4": (1.0, -2.0, 3.0, 0.1, 0.2, -0.3), "tool": (0.0, 0.0, -20.0, 0.0, 0.0, 0.0)}


def _tree_call(name):
    """An entry for a function of (model, state..., [f_ext]) on every tree model and route."""
    def run(M):
        dn = M.dn
        fn = getattr(dn, name)
        kinds, takes_fext = _TREE_ARGS[name]
        for m in M.trees():
            q, qd, qdd, tau = M.state(m)
            pick = {"q": q, "v": qd, "a": qdd, "t": tau}
            args = [pick[k] for k in kinds]
            fn(m, *args)
            if name not in _NO_DATA:
                fn(m, *[list(a) for a in args], data=dn.Data(m))
            if takes_fext:
                fn(m, *args, _fext(m))
                fn(m, *args, f_ext=_fext(m), **({} if name in _NO_DATA else {"data": dn.Data(m)}))
    return run


_TREE_ARGS = {  # name -> (arrays after the model: q, v (qd), a (qdd), t (tau)), takes f_ext
    "inverse_dynamics": ("qva", True), "gravity": ("q", False), "bias_forces": ("qv", False),
    "mass_matrix": ("q", False), "center_of_mass": ("q", False), "link_poses": ("q", False),
    "coriolis_matrix": ("qv", False), "regressor": ("qva", False), "gravity_derivatives": ("q", False),
    "inverse_dynamics_derivatives": ("qva", True), "forward_dynamics_derivatives": ("qvt", True),
}
_NO_DATA = {"gravity_derivatives", "inverse_dynamics_derivatives", "forward_dynamics_derivatives"}


def _with_link(name, links=("l4", "tool", "base")):
    """An entry for a function of (model, q, [qd, qdd], link, ...) on every tree model and route,
    for a link of a moving body, a link welded to one and the root."""
    def run(M):
        dn = M.dn
        fn = getattr(dn, name)
        kinds, options = _LINK_ARGS[name]
        for m in M.trees():
            q, qd, qdd, _ = M.state(m)
            pick = {"q": q, "v": qd, "a": qdd}
            args = [pick[k] for k in kinds]
            for link in links:
                for kw in options:
                    try:
                        fn(m, *args, link, **kw)
                        fn(m, *[list(a) for a in args], link, data=dn.Data(m), **kw)
                    except dn.InputError:  # the root, or an analytic Jacobian at a singular angle
                        if link != "base" and "euler" not in kw and name != "operational_space_inertia":
                            raise
    return run


_LINK_ARGS = {  # name -> (arrays before the link), the keyword options tried
    "link_pose": ("q", ({},)), "link_velocity": ("qv", ({},)), "bias_acceleration": ("qv", ({},)),
    "jacobian": ("q", ({}, {"point": (0.1, 0.0, 0.2), "axes": "link"})),
    "jacobian_derivative": ("qv", ({}, {"point": (0.1, 0.0, 0.2), "axes": "link"})),
    "analytic_jacobian": ("q", ({"euler": "zyx"}, {"euler": "zyz"})),
    "manipulability": ("q", ({},)), "jacobian_singular_values": ("q", ({},)),
    "operational_space_inertia": ("q", ({}, {"point": (0.0, 0.1, 0.0), "rows": ("x", "z", "rx")})),
    "link_regressor": ("qva", ({},)),
}


def _batch(name, kinds, *extra):
    def run(M):
        fn = getattr(M.dn, name)
        for m in M.trees():
            Q, QD, QDD, TAU = M.state(m, 4)
            pick = {"Q": Q, "V": QD, "A": QDD, "T": TAU}
            fn(m, *[pick[k] for k in kinds], *extra)
            fn(m, *[pick[k][:1].tolist() for k in kinds], *extra)
    return run


def _forward_dynamics(M):
    dn = M.dn
    for m in M.trees():
        q, qd, _, tau = M.state(m)
        simple = not m.has_mimic and m is not M.law and m is not M.law_plain   # sparse: no mimic, no armature
        for method in ("aba", "crba") + (("sparse",) if simple else ()):
            dn.forward_dynamics(m, q, qd, tau, method=method)
            dn.forward_dynamics(m, list(q), list(qd), list(tau), _fext(m), data=dn.Data(m), method=method)


def _hybrid(M):
    dn = M.dn
    for m in M.trees():
        q, qd, qdd, tau = M.state(m)
        joints = ["j2", "j4"] + ([dn.ROOT_JOINT] if m.floating_base else [])
        dn.hybrid_dynamics(m, q, qd, qdd, tau, joints)
        dn.hybrid_dynamics(m, list(q), qd, qdd, tau, joints[1:], _fext(m), data=dn.Data(m))


def _floating_id(M):
    dn = M.dn
    for m in (M.free, M.free_plain, M.box):
        q, qd, qdd, _ = M.state(m)
        dn.floating_base_inverse_dynamics(m, q, qd, qdd[6:])
        fext = {"box": (1.0, 0, 0, 0, 0, 0.1)} if m is M.box else _fext(m)
        dn.floating_base_inverse_dynamics(m, list(q), qd, qdd[6:], fext, data=dn.Data(m))


def _load_model(M):
    dn = M.dn
    m = dn.load_model(tree_urdf(), gravity=(0.0, 0.1, -9.8), armature={"j2": 0.1}, strict=True)
    for v in (m.with_payload("l4", 1.5, (0.0, 0.0, 0.1), (0.01, 0.0, 0.0, 0.02, 0.0, 0.03)),
              m.with_gravity((0.0, 0.0, -1.0))):
        dn.gravity(v, M.state(v)[0])
    m.total_mass(), m.summary()


def _loops(name):
    """An entry for a loop function on the four-bar with and without a mimic joint, the chain of
    ten four-bars and the dual arm."""
    def run(M):
        dn = M.dn
        fn = getattr(dn, name)
        for m in (M.four, M.four_mimic, M.chain, M.dual):
            q, qd, qdd, indep = M.closed(m)
            tau = M.rng.uniform(-1, 1, m.nv)
            call = _LOOP_CALLS[name]
            call(dn, fn, m, q, qd, qdd, tau, indep)
    return run


def _loop_fd(dn, fn, m, q, qd, qdd, tau, indep):
    fn(m, q, qd, tau)
    fn(m, list(q), qd, tau, stabilization_time=None, f_ext={m.link_names[-1]: (1.0, 0, 0, 0, 0, 0)})
    if not m.has_mimic:
        fn(m, q, qd, tau, method="sparse")
        fn(m, q, qd, tau, 0.05, {m.link_names[-1]: (1.0, 0, 0, 0, 0, 0)}, method="sparse")


_LOOP_CALLS = {
    "closed_loop_forward_dynamics": _loop_fd,
    "closed_loop_inverse_dynamics": lambda dn, fn, m, q, qd, qdd, tau, indep: (
        fn(m, q, qd, qdd), fn(m, q, qd, qdd, actuated=indep),
        fn(m, q, qd, qdd, actuated=m.joint_names, loop_wrenches=dict.fromkeys(m.loop_joints, (1.0, 0, 0, 0, 0, 0)))),
    "closed_loop_gravity": lambda dn, fn, m, q, qd, qdd, tau, indep: (fn(m, q), fn(m, list(q), actuated=indep)),
    "close_loops": lambda dn, fn, m, q, qd, qdd, tau, indep: fn(m, q + 0.01, indep),
    "close_loop_velocities": lambda dn, fn, m, q, qd, qdd, tau, indep: fn(m, q, qd, indep),
    "loop_state": lambda dn, fn, m, q, qd, qdd, tau, indep: (fn(m, q), fn(m, q, qd)),
    "loop_position_errors": lambda dn, fn, m, q, qd, qdd, tau, indep: fn(m, q),
    "loop_constraints": lambda dn, fn, m, q, qd, qdd, tau, indep: (fn(m, q, qd), fn(m, q, qd, 0.1)),
    "constraint_basis": lambda dn, fn, m, q, qd, qdd, tau, indep: (
        fn(m, q), fn(m, q, qd, independent=indep, stabilization_time=0.1)),
    "mobility": lambda dn, fn, m, q, qd, qdd, tau, indep: fn(m, q),
}


def _dual(name):
    """An entry for a function of Unseren's model, on the dual arm."""
    def run(M):
        m = M.dual
        q, qd, qdd, _ = M.closed(m)
        tau = M.rng.uniform(-1, 1, m.nv)
        fn = getattr(M.dn, name)
        args = {"dual_arm_terms": (q, qd), "sphere_force": (q, qd, tau), "delta_matrix": (q,),
                "dual_arm_forward_dynamics": (q, qd, tau), "pseudovelocity_basis": (q, qd),
                "reduced_order_dynamics": (q, M.rng.uniform(-1, 1, m.nv - 3), tau),
                "dual_arm_inverse_dynamics": (q, qd, qdd, (1.0, 2.0, 3.0)),
                "decoupled_control": (q, qd, M.rng.uniform(-1, 1, 3), M.rng.uniform(-1, 1, m.nv - 3))}[name]
        fn(m, *args)
        fn(m, *args, loop_joint="sphere")
    return run


def _identify_payload(M):
    dn = M.dn
    for m in (M.plain, M.free_plain):
        Q, QD, QDD, _ = M.state(m, 40)
        loaded = m.with_payload("l4", 1.0, (0.01, 0.02, 0.03), (0.01, 0.0, 0.0, 0.02, 0.0, 0.03))
        try:
            dn.identify_payload(m, "l4", Q, QD, QDD, dn.inverse_dynamics_batch(loaded, Q, QD, QDD))
        except dn.InputError:  # a parameter the joints below l4 cannot see: refused after the kernels ran
            pass


def _observer(M):
    dn = M.dn
    from ..algorithms.estimation.observer import link_jacobian

    for m in (M.tree, M.plain, M.law, M.law_plain):
        q, qd, _, tau = M.state(m)
        o = dn.MomentumObserver(m, 5.0)
        o.update(0.0, q, qd, tau)
        o.update(0.001, list(q), qd, tau, g=dn.gravity(m, q))
        r = o.update(0.002, q, qd, tau)
        dn.external_wrench(m, q, "l4", r)
        dn.external_wrench(m, q, "tool", list(r), J=link_jacobian(m, q, "tool"))


def _contacts(M):
    """Contact dynamics and impacts: one contact, several (frictionless, Coulomb, no slip), moving
    and at rest, on a fixed and on a floating base (the box on four corners). With Coulomb friction
    a state may have no contact forces at all (Painlevé's paradox): about a third of random states
    here have none for one of the calls. The kernels have run when that is refused (the solver's
    status, a RangeError), so the next call goes on."""
    from ..errors import RangeError

    dn = M.dn

    def solvable(fn, *args, **kw):
        try:
            fn(*args, **kw)
        except RangeError:
            pass
    for m in (M.tree, M.plain, M.law, M.free, M.box):
        q, qd, _, tau = M.state(m)
        if m is M.box:
            cs = [dn.Contact("box", (x, y, -0.1), friction=mu) for x, y, mu in
                  ((-0.2, -0.1, 0.5), (0.2, -0.1, 0.0), (-0.2, 0.1, float("inf")), (0.2, 0.1, 0.5))]
        else:
            cs = [dn.Contact("l4", (0.0, 0.0, 0.05), friction=0.3), dn.Contact("tool", friction=0.0)]
        for contacts in (cs[:1], cs):
            for v in (qd, np.zeros(m.nv)):
                solvable(dn.contact_forward_dynamics, m, q, v, tau, contacts)
                solvable(dn.contact_forward_dynamics, m, list(q), v, tau, contacts,
                         f_ext=_fext(m) if m is not M.box else None, rest_speed=1e-6, data=dn.Data(m))
                solvable(dn.impact, m, q, v - 1.0, contacts)
                solvable(dn.impact, m, q, v + 1.0, contacts, restitution=0.5, data=dn.Data(m))


def _soft(M):
    """Soft contact and the simulated step: touching and not, with a surface state, f_ext, joint
    limits reached at speed, restitution and speculative contacts."""
    dn = M.dn
    for m in (M.tree, M.plain, M.law, M.free, M.box):
        q, qd, _, tau = M.state(m)
        link = "box" if m is M.box else "l4"
        cs = [dn.Contact(link, (0.0, 0.0, 0.05), surface_point=(0.0, 0.0, 5.0)),
              dn.Contact(link, friction=0.0, surface_point=(0.0, 0.0, -5.0), stiffness=1e7, damping=1e3)]
        state = np.full((2, 3), 0.001)
        for contacts, s in (([], None), (cs, None), (cs, state)):
            dn.soft_contact_forces(m, q, qd, contacts, s)
            dn.simulate_step(m, q, qd, tau, contacts, 1e-3, state=s)
        limits = np.tile([-np.inf, np.inf], (m.nv, 1))
        if m is not M.box:   # j1 at its lower limit and moving down: a limit row (joint_limits.py)
            i = m.v_slice("j1").start
            limits[i] = (q[m.q_slice("j1").start], 2.0)
            qd = qd.copy()
            qd[i] = -1.0
        for e, spec in ((0.0, False), (0.5, True)):
            dn.simulate_step(m, q, qd, tau, cs, 1e-3, state=state, limits=limits, restitution=e, speculative=spec,
                             f_ext={link: (0.0, 0.0, 1.0, 0.0, 0.0, 0.0)})


def _simplify(M):
    for m in M.trees():
        s = M.dn.simplify_inertias(m)
        M.dn.inverse_dynamics(s, *M.state(s)[:3])


def _group(name):
    def run(M):
        fn = getattr(M.dn, name)
        for m in M.trees() + (M.box,):
            q, v, _, _ = M.state(m)
            fn(m, q, M.dn.integrate(m, q, v) if name == "difference" else v)
            fn(m, list(q), list(M.dn.integrate(m, q, v) if name == "difference" else v))
    return run


def _law(name):
    def run(M):
        fn = getattr(M.dn, name)
        for m in M.trees():
            _, qd, _, _ = M.state(m)
            fn(m, qd), fn(m, list(qd)), fn(m, M.state(m, 3)[1]), fn(m, np.zeros(m.nv))
    return run


def _node(M):
    """What the node runs besides the public functions: the simulated robot's body poses."""
    from ..algorithms.tree.kinematics import body_poses

    for m in M.trees() + (M.box,):
        body_poses(m, M.state(m)[0])


CALLS = {
    "load_model": _load_model, "simplify_inertias": _simplify,
    **{n: _tree_call(n) for n in _TREE_ARGS},
    **{n: _with_link(n) for n in _LINK_ARGS},
    "forward_dynamics": _forward_dynamics, "hybrid_dynamics": _hybrid, "floating_base_inverse_dynamics": _floating_id,
    "inverse_dynamics_batch": _batch("inverse_dynamics_batch", "QVA"), "gravity_batch": _batch("gravity_batch", "Q"),
    "regressor_batch": _batch("regressor_batch", "QVA"),
    "inverse_dynamics_derivatives_batch": _batch("inverse_dynamics_derivatives_batch", "QVA"),
    "linearize": lambda M: [M.dn.linearize(m, *M.state(m)[:2], M.state(m)[3], 0.01) for m in M.trees()],
    "linearize_batch": _batch("linearize_batch", "QVT", 0.01),
    "inertial_parameters": lambda M: [M.dn.inertial_parameters(m) for m in M.trees()],
    "identify_payload": _identify_payload,
    **{n: _loops(n) for n in _LOOP_CALLS},
    **{n: _dual(n) for n in ("dual_arm_terms", "sphere_force", "delta_matrix", "dual_arm_forward_dynamics",
                             "pseudovelocity_basis", "reduced_order_dynamics", "dual_arm_inverse_dynamics",
                             "decoupled_control")},
    "MomentumObserver": _observer, "external_wrench": _observer,
    "contact_forward_dynamics": _contacts, "impact": _contacts, "soft_contact_forces": _soft, "simulate_step": _soft,
    "integrate": _group("integrate"), "difference": _group("difference"),
    "joint_friction": _law("joint_friction"), "joint_friction_slope": _law("joint_friction_slope"),
}

# the public names that compute nothing themselves (classes of errors and values, constants)
NO_KERNEL = {
    "DynamicsError": "an exception class", "InputError": "an exception class", "ModelError": "an exception class",
    "ModelWarning": "a warning class", "SingularMassMatrixError": "an exception class",
    "Data": "work arrays (made by the entries that pass data=)", "Model": "made by load_model",
    "ROOT_JOINT": "a name (hybrid_dynamics' entry passes it)", "Payload": "identify_payload's result",
    "Contact": "a description (made by the contact entries)", "JointFriction": "a description (load_model's option)",
}


def run(names=None):
    """Call every entry of CALLS (or those named), each once, then the node's own calls."""
    M = Models()
    done = set()
    for name in CALLS if names is None else names:
        if CALLS[name] not in done:
            done.add(CALLS[name])
            M.reseed(name)
            CALLS[name](M)
    if names is None:
        M.reseed("node")
        _node(M)
