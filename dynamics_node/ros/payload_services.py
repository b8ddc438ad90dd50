"""Payload identification at the ROS edge: the identify_payload service's handler (least squares on
the payload's inertial parameters, dn.identify_payload). What `dynamics_cli identify_payload
--record` does before calling it (record, resample, differentiate) is a tool: cli/record.py.
"""
from __future__ import annotations

import numpy as np

import dynamics_node as dn
from ..errors import InputError


# ------------------------------------------------------------------------------------ the service
def _stack_efforts(traj, order, field, nv):
    n, width = len(traj.points), order.v_index.size
    for k, p in enumerate(traj.points):
        for attr in ("velocities", "accelerations", "effort"):
            m = len(getattr(p, attr))
            if m != width:
                raise InputError(f"{field}.points[{k}].{attr}: expected {width} values (every point needs "
                                 f"positions, velocities, accelerations and the measured effort), got {m}")
    E = np.array([np.asarray(p.effort, dtype=np.float64) for p in traj.points]).reshape(n, width)
    if not np.isfinite(E).all():
        k, i = (int(x) for x in np.argwhere(~np.isfinite(E))[0])
        raise InputError(f"{field}.points[{k}].effort: value {E[k, i]} is not finite")
    if order.identity:
        return E
    TAU = np.empty((n, nv))
    TAU[:, order.v_index] = E
    return TAU


def identify_payload(ctx, st, req, res):
    """Least squares over the payload's 10 inertial parameters (dn.identify_payload); with
    ``apply``, the result is set as set_payload would (refused when it is physically inconsistent)."""
    c = st.conv
    link = c.link(req.link, "link")
    if st.loops:
        raise InputError("identify_payload: the model has closed loops, whose constraint forces the joint "
                         "torques include; identification needs a tree")
    order, Q, QD, QDD = c.trajectory(req.samples, "samples")
    TAU = _stack_efforts(req.samples, order, "samples", st.model.nv)
    p = dn.identify_payload(st.model, link, Q, QD, QDD, TAU)
    res.mass = p.mass
    res.center_of_mass.x, res.center_of_mass.y, res.center_of_mass.z = p.center_of_mass
    res.inertia = [float(x) for x in p.inertia]
    res.residual_rms = p.residual_rms
    res.condition_number = p.condition_number
    notes = [f"{p.mass:.6g} kg at ({', '.join(f'{x:.4g}' for x in p.center_of_mass)}) m in '{link}' from "
             f"{p.samples} samples"] + list(p.warnings)
    if req.apply:
        if not p.consistent:
            raise InputError(f"apply: not applied, the identified payload is physically inconsistent: "
                             f"{'; '.join(p.warnings)} (identified: {p.mass:.6g} kg, centre of mass "
                             f"{p.center_of_mass}, inertia {p.inertia})")
        notes.append(ctx.set_payload(link, p.mass, p.center_of_mass, p.inertia))
    res.message = "; ".join(notes)
