"""dn.simulate_step's route: the C front (_fastcall.StepRoute, dynamics_node/_step_route.c) takes the
plain call straight to the compiled step (step.sim_step_c) on the thread's buffer; the Python side
(_slow) answers everything else: the arguments checked and each refused by name (as algorithms/contact/checks.py
does for the contact functions), then the same kernel through _fastcall.step_into (through numba's
dispatcher without the C shim), or contact/soft.reference_step for a model with mimic joints (the tree
kernel takes tree coordinates), and a step whose result would not be finite refused naming the input
out of range (overflow_error, through dispatch.refuse as every route does). The explicit environment of
a list of contacts (layout.SIM_*) is made once per list and model (_entry, kept in _CACHE as
algorithms/contact/forward_dynamics.py keeps its entries)."""
from __future__ import annotations

import numpy as np

from .. import _fast
from ..batch_errors import BIG
from ..layout import (D_COULOMB, D_DAMPING, D_OFFSET, D_STRIBECK, SC_D, SC_K, SC_MU, SC_P,
                      SC_R, SC_S, SE_MODE, SE_NPT, SIM_CONTACT, SIM_EXPLICIT, SIM_HEAD_F, SIM_HEAD_I, SIM_INFO_N,
                      SIM_PT_I, SP_BODY)
from .._kernel_io import OVERFLOW_STATUS
from ..packed import dof_floats
from .step import sim_step_c, step_kernel, step_scratch
from ..algorithms.contact.soft import SimulationStep, reference_step, step_args

_CACHE: dict = {}  # (model, *contacts) -> the entry of _entry
_EMPTY = np.zeros(0)


def simulate_step(model, q, qd, tau, contacts, dt, state=None, f_ext=None, limits=None, restitution=0.0,
                  speculative=False):
    """One step of a simulation with soft contacts (the law: algorithms/contact/soft.py's docstring):
    SimulationStep(q, qd, state, forces, qdd, limit_tau). dt in seconds (> 0); state as in
    soft_contact_forces (None = undeformed). limits: None, or nv x 2 [lower upper] per velocity
    coordinate (+-inf: none), hard unilateral constraints in joint space solved with the contacts
    (joint_limits.py), restitution e in [0, 1] at their impacts; limit_tau (nv) is their generalized
    force. speculative: a contact also acts from the step in which its point would reach the surface
    (p + dt (v_n + dt b_n) <= 0, b_n its free acceleration), not only once it is below it, so a landing
    point does not sink by up to |v| dt before the surface pushes. One compiled kernel (step.py)
    through its C front (module docstring); a step whose result would not be finite is refused
    (InputError naming the input out of range)."""
    return _STEP(model, q, qd, tau, contacts, dt, state, f_ext, limits, restitution, speculative)


def explicit_env(packed):
    """(envi, envf): a packed list of contacts (contact.args.pack) as an EXPLICIT environment."""
    k = packed.k
    envi = np.zeros(SIM_HEAD_I + SIM_PT_I * k, dtype=np.int64)
    envi[SE_MODE], envi[SE_NPT] = SIM_EXPLICIT, k
    envi[SIM_HEAD_I + SP_BODY::SIM_PT_I] = packed.body
    envf = np.zeros(SIM_HEAD_F + SIM_CONTACT * k)
    C = envf[SIM_HEAD_F:].reshape(k, SIM_CONTACT)
    C[:, SC_P:SC_P + 3] = packed.point.reshape(k, 3)
    C[:, SC_R:SC_R + 9] = packed.frame.reshape(k, 9)
    for j, c in enumerate(packed.contacts):
        C[j, SC_S:SC_S + 3] = c.surface_point
        C[j, SC_K], C[j, SC_D], C[j, SC_MU] = c.stiffness, c.damping, c.friction
    return envi, envf


def _entry(model, contacts):
    """The C front's entry for a list of contacts on a model: (envi, envf, k, floats, ints) with
    step_scratch's sizes; None when the list does not pack (the Python side then says why)."""
    from ..algorithms.contact.args import cached_pack

    p = cached_pack(model, contacts)
    if p is None:
        return None
    e = (*explicit_env(p), p.k, *step_scratch(model.nvt, p.k))
    if len(_CACHE) >= 256:
        _CACHE.clear()
    _CACHE[(model, *contacts)] = e
    return e


def front():
    """simulate_step's route: the C front when the shim is built, else the Python side."""
    if not _fast.AVAILABLE:
        return _slow
    from ..dispatch import _bind_model

    _bind_model()
    return _fast.StepRoute(sim_step_c.address, _CACHE, _entry, SimulationStep, _slow)


def run(model, q, qd, tau, fx, dt, envi, envf, sin, lim, e, spec, out, nf, ni):
    """The kernel on checked arrays: out = (q1, qd1, qdd, limit_tau, state_out, F, P, info). Returns its
    status."""
    if _fast.AVAILABLE:
        return _fast.step_into(sim_step_c.address, model, q, qd, tau, fx, float(dt), envi, envf, sin, lim,
                               float(e), bool(spec), *out, nf, ni)
    return step_kernel(model._kmi, model._kmf, q, qd, tau, fx, dt, envi, envf, sin, lim, e, bool(spec), *out,
                       np.empty(model.work_size))


def _slow(model, q, qd, tau, contacts, dt, state, f_ext, limits, restitution, speculative):
    """Every call the C front does not answer, errors included (module docstring)."""
    from ..dispatch import wrenches
    from ..algorithms.contact.checks import _raise

    q, qd, tau, packed, dt, e, lim, s = step_args(model, q, qd, tau, contacts, dt, state, limits, restitution)
    k = packed.k
    fx = wrenches(model, f_ext)
    if model.has_mimic:
        r = reference_step(model, q, qd, tau, contacts, dt, s, f_ext, limits, e, speculative)
        if not all(np.isfinite(x).all() for x in r):
            overflow_error(model, q, qd, tau, dt, s, f_ext)
        return r
    envi, envf = explicit_env(packed)
    flat = np.column_stack(lim[:2]).reshape(-1) if lim is not None else _EMPTY
    nf, ni = step_scratch(model.nvt, k)
    out = (np.empty(model.nq), np.empty(model.nv), np.empty(model.nv), np.empty(model.nv), np.empty(3 * k),
           np.empty(3 * k), np.empty(3 * k), np.empty(SIM_INFO_N + k, dtype=np.int64))
    st = run(model, q, qd, tau, fx, dt, envi, envf, s.reshape(-1), flat, e, speculative, out, nf, ni)
    if st == OVERFLOW_STATUS:
        overflow_error(model, q, qd, tau, dt, s, f_ext)
    if st:
        _raise(model, st, "the simulation step", ("q", "qd", "tau"), (q, qd, tau), f_ext)
    q1, qd1, qdd, ltau, s1, F = out[:6]
    return SimulationStep(q1, qd1, s1.reshape(k, 3), F.reshape(k, 3), qdd, ltau)


def overflow_error(model, q, qd, tau, dt, state, f_ext=None):
    """Raise the refusal of a step whose result is not finite from finite inputs, in one line: the input
    entry out of range as every route names it (dispatch.refuse: field, index, joint, value), the model's
    own parameters beyond BIG that the step multiplies (its joint friction law, gravity, a payload) in
    the symptom; when no input reaches BIG, the largest entry of each input and those parameters."""
    from ..dispatch import refuse
    from ..errors import RangeError
    from .._kernel_io import A_Q, A_QD, A_TAU, coordinate_owner

    own = _own_parameters(model)
    symptom = "its result is not finite (NaN or inf)" + "".join(f"; {o}" for o in own)
    found = []
    for name, x, arg in (("q", q, A_Q), ("qd", qd, A_QD), ("tau", tau, A_TAU)):
        if x.size:
            i = int(np.argmax(np.abs(x)))
            found.append(f"{name}[{i}] (joint '{coordinate_owner(model, arg, i, False)}') = {x[i]:.3g}")
    if state.size:
        j, c = np.unravel_index(int(np.argmax(np.abs(state))), state.shape)
        found.append(f"state[{j}, {c}] = {state[j, c]:.3g}")
    found.append(f"dt = {dt:.3g}")
    e = RangeError("the simulation step is not finite (NaN or inf) although every input is: largest entries "
                   + ", ".join(found) + "".join(f"; {o}" for o in own), symptom=symptom)
    refuse(model, "the simulation step", e, ("q", "qd", "tau", "state"), (q, qd, tau, state),
           (("dt", dt),) + ((("f_ext", f_ext),) if f_ext else ()))


def _own_parameters(model):
    """The model's parameters beyond BIG that a step multiplies: its joint friction law, gravity, payloads."""
    out = []
    D = dof_floats(model._kmf, model.nb, model.nvt)
    law = float(np.max(np.abs(D[:, [D_DAMPING, D_COULOMB, D_STRIBECK, D_OFFSET]]), initial=0.0))
    if law > BIG:
        out.append(f"the model's joint friction law (coefficients up to {law:.3g})")
    g = float(np.max(np.abs(model.gravity), initial=0.0))
    if g > BIG:
        out.append(f"the model's gravity (|g| = {g:.3g})")
    out += [f"the payload {n} ({p.mass:.3g} kg)" for n, p in model.payloads.items() if not abs(p.mass) < BIG]
    return out


_STEP = front()
