"""OUT.yaml: the identified joint law as a parameter file of the node, and reading it back
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
from ..joint_law import FIELDS, RANGES, JointFriction, law_lists
from .report import atomic_write

NODE = "dynamics_node"
LIMIT = RANGES["offset"][1]   # the node's range of the armature (that of the law's torques)


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
        has_s = "stribeck" in par.fields and par.vs[f] > 0  # vs = 0: no Stribeck term (its fs is not a parameter)
        vals["stribeck"][j] = par.field_values(p, "stribeck")[f] if has_s else 0.0
        arm[j] = par.field_values(p, "armature")[f]
        vals["coulomb_velocity"][j] = par.vc[f]
        vals["stribeck_velocity"][j] = par.vs[f] if has_s else 0.0
    return vals, arm


def yaml_path(urdf_path):
    return os.path.splitext(os.path.abspath(urdf_path))[0] + ".yaml"


def write(path, urdf_path, joints, vals, arm):
    """OUT.yaml (module docstring), written atomically. Numbers as repr(float): they read back exactly."""
    bad = [f for f in FIELDS if not np.all(np.isfinite(vals[f]))] + ([] if np.all(np.isfinite(arm)) else ["armature"])
    if bad:
        raise InputError(f"the identified joint law is not finite ({', '.join(bad)}): nothing written")

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


def parse(path):
    """The ``ros__parameters`` mapping of the node's section of the parameter file at ``path``. InputError
    in one line naming the file (and, for a YAML error, the line, the column and the problem)."""
    import yaml

    where = clip(str(path), 160)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as e:
        raise InputError(f"--params: cannot read '{where}': {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"--params: '{where}' is not UTF-8 text (byte {e.start})") from None
    except yaml.YAMLError as e:
        raise InputError(f"--params: '{where}' is not valid YAML: {_yaml_problem(e)}") from None
    node = doc.get(NODE) if isinstance(doc, dict) else None
    if node is None and isinstance(doc, dict):
        node = doc.get("/**")
    rp = node.get("ros__parameters") if isinstance(node, dict) else None
    if not isinstance(rp, dict):
        raise InputError(f"--params: '{where}' has no {NODE}: ros__parameters: mapping")
    return rp


def _yaml_problem(e):
    """'line L, column C: problem' of a yaml error, one line."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    what = getattr(e, "problem", None) or getattr(e, "context", None) or str(e)
    at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return clip(" ".join(f"{at}{what}".split()), 200)


def urdf_of(rp, path):
    """The URDF the parameter file's ``urdf_path`` names (absolute, or relative to the file's folder; a
    file moved with its folder is found beside it), None when it names none."""
    u = rp.get("urdf_path")
    where = clip(str(path), 160)
    if u is None or u == "":
        return None
    if not isinstance(u, str):
        raise InputError(f"--params: '{where}': urdf_path must be a path (a string), got {clip(repr(u), 80)}")
    here = os.path.dirname(os.path.abspath(path))
    for cand in (u if os.path.isabs(u) else os.path.join(here, u), os.path.join(here, os.path.basename(u))):
        if os.path.isfile(cand):
            return cand
    raise InputError(f"--params: '{where}': urdf_path '{clip(u, 160)}' does not exist (nor beside the file)")


def read(path, model, warn=None):
    """(armature {joint: Ia}, dn.JointFriction or None) from a parameter file written by ``write`` (or by
    hand in its form), for ``model``. InputError in one line naming the file and the key for anything
    the law cannot use; keys of friction_model the node does not know are reported through ``warn``
    (the node warns of them too and ignores them)."""
    return law_from(parse(path), model, path, warn)


def law_from(rp, model, path, warn=None):
    """read() on an already parsed ``ros__parameters`` mapping."""
    where = clip(str(path), 160)
    fm = rp.get("friction_model")
    if fm is not None and not isinstance(fm, dict):
        raise InputError(f"--params: '{where}': friction_model must be a mapping (joints: [...], viscous: [...], "
                         f"...), got {clip(repr(fm), 80)}")
    flat = {k[len("friction_model."):]: v for k, v in rp.items() if k.startswith("friction_model.")}
    flat.update(fm or {})
    unknown = sorted(str(k) for k in flat if k not in ("joints", *FIELDS))
    if unknown and warn is not None:
        warn(f"'{where}': unknown keys ignored (the node ignores them too): "
             + ", ".join(f"friction_model.{clip(k, 60)}" for k in unknown[:8])
             + f"; known: joints, {', '.join(FIELDS)}")
    names = list(model.joint_names)
    joints = flat.get("joints")
    if joints is None:
        joints = []
    if not isinstance(joints, list) or not all(isinstance(j, str) for j in joints):
        raise InputError(f"--params: '{where}': friction_model.joints must be a list of joint names, got "
                         f"{clip(repr(joints), 80)}")
    for k, j in enumerate(joints):
        if j not in names:
            raise InputError(f"--params: '{where}': friction_model.joints[{k}] '{clip(str(j), 80)}' is not a joint of "
                             f"the model ({clip(', '.join(names), 200)})")
    law = law_lists(joints, {f: flat.get(f) for f in FIELDS}, InputError, f"--params: '{where}': ")
    law = {f: dict(zip(joints, law[f])) for f in FIELDS}
    arm = rp.get("armature")
    arm = _numbers([] if arm is None else arm, "armature", where, None)
    if len(arm) not in (0, 1, len(names)):
        raise InputError(f"--params: '{where}': armature must have 0, 1 or {len(names)} values, got {len(arm)}")
    if any(a < 0 for a in arm):
        raise InputError(f"--params: '{where}': armature has a negative value: must be >= 0")
    armature = dict(zip(names, arm * len(names) if len(arm) == 1 else arm))
    return armature, (JointFriction(**law) if joints else None)


def _numbers(v, key, where, n):
    if not isinstance(v, (list, tuple)):
        raise InputError(f"--params: '{where}': {key} must be a list of numbers"
                         + (" (one per friction_model.joints entry)" if n is not None else "")
                         + f", got {clip(repr(v), 80)}")
    out = []
    for k, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
            raise InputError(f"--params: '{where}': {key}[{k}] = {clip(repr(x), 40)} is not a finite number")
        if abs(float(x)) > LIMIT:
            raise InputError(f"--params: '{where}': {key}[{k}] = {float(x):.4g} is outside [-{LIMIT:g}, {LIMIT:g}] "
                             "(the node's range)")
        out.append(float(x))
    if n is not None and len(out) != n:
        raise InputError(f"--params: '{where}': {key} has {len(out)} values, friction_model.joints {n}")
    return out
