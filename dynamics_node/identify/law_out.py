"""OUT.yaml: the identified joint law as a parameter file of the node (issue 27), and reading it back
(``evaluate``). Beside OUT.urdf, with the same stem:

    dynamics_node:
      ros__parameters:
        urdf_path: /absolute/path/OUT.urdf
        friction: true
        armature: [Ia_1, ..., Ia_n]            # model joint order
        friction_model:
          joints: [name_1, ..., name_n]
          viscous: [...]                       # N m s/rad (N s/m)
          coulomb: [...]                       # N m (N)
          coulomb_velocity: [...]              # rad/s (m/s); 0 = sign
          stribeck: [...]                      # N m (N)
          stribeck_velocity: [...]             # rad/s (m/s)
          offset: [...]                        # N m (N)

Every list has one entry per joint of the model, in the model's joint order (mimic followers are not
joints of the model: they keep the URDF's <dynamics>). Missing lists mean zeros; a missing
``friction_model.joints`` means the URDF's <dynamics> only.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..errors import InputError, clip
from ..algorithms.friction import FIELDS, NONNEGATIVE, JointFriction
from .report import atomic_write

NODE = "dynamics_node"


def law_values(model, par, p):
    """{field: per model joint} and the armature per model joint from the fit's parameters p."""
    vals = {f: np.zeros(model.nv) for f in FIELDS}
    arm = np.zeros(model.nv)
    for f, name in enumerate(par.friction_joints):
        if name not in model.joint_names:
            continue
        j = model.joint_names.index(name)
        vals["viscous"][j] = par.field_values(p, "viscous")[f]
        vals["coulomb"][j] = par.field_values(p, "coulomb")[f]
        vals["offset"][j] = par.field_values(p, "offset")[f]
        vals["stribeck"][j] = par.field_values(p, "stribeck")[f]
        arm[j] = par.field_values(p, "armature")[f]
        vals["coulomb_velocity"][j] = par.vc[f]
        vals["stribeck_velocity"][j] = par.vs[f] if "stribeck" in par.fields else 0.0
    return vals, arm


def yaml_path(urdf_path):
    return os.path.splitext(os.path.abspath(urdf_path))[0] + ".yaml"


def write(path, urdf_path, joints, vals, arm):
    """OUT.yaml (module docstring), written atomically. Numbers as repr(float): they read back exactly."""
    def lst(xs):
        return "[" + ", ".join(repr(float(x)) for x in xs) + "]"

    def text(fh):
        fh.write("# The joint law identified by dynamics_identify fit (docs/identify.md): run the node with\n"
                 f"#   dynamics_node --ros-args --params-file {os.path.basename(path)}\n")
        fh.write(f"{NODE}:\n  ros__parameters:\n")
        fh.write(f"    urdf_path: {_quote(os.path.abspath(urdf_path))}\n    friction: true\n")
        fh.write(f"    armature: {lst(arm)}\n    friction_model:\n")
        fh.write("      joints: [" + ", ".join(_quote(j) for j in joints) + "]\n")
        for f in FIELDS:
            fh.write(f"      {f}: {lst(vals[f])}\n")
    atomic_write(path, text)


def _quote(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def read(path, model):
    """(armature {joint: Ia}, dn.JointFriction) from a parameter file written by ``write`` (or by hand in
    its form). InputError naming the file and the key for anything the law cannot use."""
    import yaml

    where = clip(str(path), 160)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as e:
        raise InputError(f"--params: cannot read '{where}': {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise InputError(f"--params: '{where}' is not YAML: {clip(e, 200)}") from None
    node = doc.get(NODE) if isinstance(doc, dict) else None
    if node is None and isinstance(doc, dict):
        node = doc.get("/**")
    rp = node.get("ros__parameters") if isinstance(node, dict) else None
    if not isinstance(rp, dict):
        raise InputError(f"--params: '{where}' has no {NODE}: ros__parameters: section")
    fm = rp.get("friction_model") or {}
    flat = {k[len("friction_model."):]: v for k, v in rp.items() if k.startswith("friction_model.")}
    if isinstance(fm, dict):
        flat.update(fm)
    names = list(model.joint_names)
    joints = flat.get("joints") or []
    for k, j in enumerate(joints):
        if j not in names:
            raise InputError(f"--params: '{where}': friction_model.joints[{k}] '{clip(str(j), 80)}' is not a joint of "
                             f"the model ({clip(', '.join(names), 200)})")
    if len(set(joints)) != len(joints):
        raise InputError(f"--params: '{where}': friction_model.joints names a joint twice")
    law = {}
    for f in FIELDS:
        v = flat.get(f)
        if v is None or len(v) == 0:
            v = [0.0] * len(joints)
        v = _numbers(v, f"friction_model.{f}", where, len(joints))
        if f in NONNEGATIVE and any(x < 0 for x in v):
            raise InputError(f"--params: '{where}': friction_model.{f} has a negative value: must be >= 0")
        law[f] = dict(zip(joints, v))
    arm = rp.get("armature") or []
    arm = _numbers(arm, "armature", where, None)
    if len(arm) not in (0, 1, len(names)):
        raise InputError(f"--params: '{where}': armature must have 0, 1 or {len(names)} values, got {len(arm)}")
    if any(a < 0 for a in arm):
        raise InputError(f"--params: '{where}': armature has a negative value: must be >= 0")
    armature = dict(zip(names, arm * len(names) if len(arm) == 1 else arm))
    return armature, (JointFriction(**law) if joints else None)


def _numbers(v, key, where, n):
    if not isinstance(v, (list, tuple)):
        raise InputError(f"--params: '{where}': {key} must be a list of numbers, got {clip(repr(v), 80)}")
    out = []
    for k, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
            raise InputError(f"--params: '{where}': {key}[{k}] = {clip(repr(x), 40)} is not a finite number")
        out.append(float(x))
    if n is not None and len(out) != n:
        raise InputError(f"--params: '{where}': {key} has {len(out)} values, friction_model.joints {n}")
    return out
