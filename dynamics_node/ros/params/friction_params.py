"""The node's parameters of the joint law (the law: dynamics_node/joint_law.py), as
`dynamics_identify fit` writes them in OUT.yaml:

    friction: true
    armature: [Ia_1, ..., Ia_n]            # the model's joint order (node_params.py)
    friction_model.joints: [name_1, ...]   # joints of the model, each once
    friction_model.viscous / coulomb / coulomb_velocity / stribeck / stribeck_velocity / offset:
                                           # one value per friction_model.joints entry; missing = zeros
    effort_command_friction: 0.0           # the fraction of tau_f(qd) added to the effort command

The law acts with ``friction: true``; the joints not in friction_model.joints keep the URDF's
<dynamics damping friction>. Values are checked against RANGES (a value outside names the parameter,
the index and the range, by the law's one checker joint_law.law_lists), the names against the
model when it is loaded (model_state.py). No rclpy here, and no import of node_params.py (which
imports this module): the entries are plain tuples that node_params.py turns into its Param.
"""
from __future__ import annotations

import math

from ...joint_law import FIELDS, RANGES, UNITS, law_lists

# (default, type, description, range): node_params.py makes them Param entries of PARAMETERS
FRICTION_PARAMETERS = {
    "friction_model.joints": ([], "string_array", "Joints the joint law's lists below are given for (each a "
                              "joint of the model, once); empty = the URDF's <dynamics> only. Used with "
                              "friction: true (docs/identify.md).", None),
    **{f"friction_model.{f}": ([], "double_array", f"The joint law's {f.replace('_', ' ')} per "
                               f"friction_model.joints entry [{UNITS[f]}], each in [{RANGES[f][0]:g}, "
                               f"{RANGES[f][1]:g}]; empty = zeros.", None) for f in FIELDS},
    "effort_command_friction": (0.0, "double", "Fraction in [0, 1] of the joint law's friction tau_f(qd) added "
                                "to the effort command (friction compensation of a leader or hand-guided arm); "
                                "needs a fresh velocity of every joint, saturated like the rest.", (0.0, 1.0)),
}
FRICTION_KEYS = frozenset(k for k in FRICTION_PARAMETERS if k.startswith("friction_model."))


def validate_friction(v, error) -> dict:
    """{"friction_model": ((joint, {field: value}), ...), "effort_command_friction": x} from the values v,
    or ``error`` (params.ConfigError) naming the parameter, the index and the reason."""
    joints = [str(j) for j in v["friction_model.joints"]]
    law = law_lists(joints, {f: list(v[f"friction_model.{f}"]) for f in FIELDS}, error)   # the law's one checker
    x = v["effort_command_friction"]
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise error(f"effort_command_friction: expected a number, got {x!r}") from None
    if not (math.isfinite(x) and 0.0 <= x <= 1.0):
        raise error(f"effort_command_friction: {x!r} is outside [0, 1] (the fraction of the friction torque added "
                    "to the effort command)")
    model = tuple((j, tuple((f, law[f][k]) for f in FIELDS)) for k, j in enumerate(joints))
    return {"friction_model": model, "effort_command_friction": x}


def joint_friction_option(friction_model, joint_names, error):
    """The dn.JointFriction of a validated friction_model for a model with ``joint_names``, None when it
    names no joint; ``error`` naming the entry that is not a joint of the model."""
    if not friction_model:
        return None
    import dynamics_node as dn

    names = list(joint_names)
    for k, (j, _) in enumerate(friction_model):
        if j not in names:
            shown = ", ".join(names)
            raise error(f"friction_model.joints[{k}]: the model has no joint '{j}' (its joints: "
                        f"{shown if len(shown) <= 300 else shown[:300] + ' ...'})")
    return dn.JointFriction(**{f: {j: dict(vals)[f] for j, vals in friction_model} for f in FIELDS})


def command_friction(st, merger, now, cfg, log):
    """effort_command_friction's tau_f(qd) (dn.joint_friction) on the effort command's joints, from the
    stream's merged velocities (joint_states.JointStateMerger). Zeros, with a warning, until every joint's
    velocity is fresh: friction compensation from a stale velocity would push the arm."""
    import numpy as np

    import dynamics_node as dn

    stale = merger.t_vel < now - cfg.joint_state_timeout
    if stale.any() or st.loops or not merger.single_dof:
        names = [merger.names[j] for j in np.nonzero(stale)[0]]
        why = (f"no fresh velocity of {', '.join(names)[:200]}" if names else
               "the model has closed loops or multi-coordinate joints")
        log.warning(f"effort_command_friction: the effort command goes without friction compensation: {why}",
                    throttle_duration_sec=2.0)
        return np.zeros(len(st.command_index))
    qd = np.zeros(st.model.nv)
    qd[merger.jv] = merger.vel
    return dn.joint_friction(st.model, qd)[st.torque_v_index][st.command_index]
