"""Writing the identified model: the input URDF's XML with, per moving body, the ``<inertial>`` of the
link its joint carries replaced and the ``<dynamics damping friction>`` of every moving joint set;
everything else (comments, visuals, limits, attribute order) is kept as it was.

A model body merges the links welded to it by fixed joints (Featherstone Ch. 4, dynamics_node.urdf).
The identified inertia is the body's, so it goes on the link that carries the body's joint (whose
frame is the body frame) and the ``<inertial>`` of the other links welded to that body is removed:
their mass is part of the identified one. (Subtracting their URDF inertias instead would make the
constraint on the written link depend on a fixed offset, which breaks the scale-equivariance of
the fit.) Links welded to the fixed base are not touched.

The file is written to a temporary file beside OUT.urdf, loaded back with
``load_model(..., strict=True)`` and only then renamed to OUT.urdf: no partial output.
"""
from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET

import numpy as np

from ..algorithms.estimation.regressor import N_PARAMS
from ..errors import InputError, clip


def about_com(pi):
    """(m, c, I_C) from pi = [m, h, Ibar]: c = h / m and I_C = Ibar + m [c]x [c]x (Eq. 2.63)."""
    m, h = float(pi[0]), np.asarray(pi[1:4], float)
    c = h / m
    S = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
    Ib = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
    return m, c, Ib + m * S @ S


def physical_problems(pi, rel=1e-7):
    """Why pi is not a rigid body's (mass > 0, I_C positive definite, strict triangle inequality with a
    relative margin ``rel``), empty when it is."""
    if not (np.isfinite(pi).all() and pi[0] > 0):
        return [f"mass {pi[0]:.4g} is not positive"]
    _, _, Ic = about_com(pi)
    ev = np.linalg.eigvalsh(0.5 * (Ic + Ic.T))
    tol = rel * max(float(ev[-1]), 1e-300)
    out = []
    if ev[0] <= tol:
        out.append(f"inertia about the CoM not positive definite (principal moments {ev[0]:.4g}, {ev[1]:.4g}, "
                   f"{ev[2]:.4g})")
    elif ev[0] + ev[1] <= ev[2] + tol:
        out.append(f"principal moments {ev[0]:.4g}, {ev[1]:.4g}, {ev[2]:.4g} break the triangle inequality")
    return out


def pi_of_pseudo(J):
    Sig = J[:3, :3]
    Ib = np.trace(Sig) * np.eye(3) - Sig
    return np.array([J[3, 3], *J[:3, 3], Ib[0, 0], Ib[0, 1], Ib[1, 1], Ib[0, 2], Ib[1, 2], Ib[2, 2]])


def make_consistent(par, p, k):
    """p with every body physically consistent with a margin: a body the solver left on the boundary
    (within its tolerance) gets eta * k * J_ref added, the smallest eta in 1e-8 .. 1e-1 that does.
    Returns (p, [(body, eta)])."""
    p = p.copy()
    fixed = []
    for b in range(par.nb):
        s = slice(N_PARAMS * b, N_PARAMS * (b + 1))
        if not physical_problems(p[s]):
            continue
        ref = k * pi_of_pseudo(par.j_ref[b])
        for eta in 10.0 ** np.arange(-8, 0):
            if not physical_problems(p[s] + eta * ref):
                p[s] = p[s] + eta * ref
                fixed.append((b, float(eta)))
                break
        else:
            raise InputError(f"the identified inertia of {par.model.body_label[b]} is not physical: "
                             f"{'; '.join(physical_problems(p[s]))}")
    nf = len(par.friction_joints)
    for fl in ("viscous", "coulomb", "armature"):  # solver round-off below zero
        if fl in par.fields:
            fv = p[par.fidx(fl, 0):par.fidx(fl, 0) + nf]
            fv[fv < 0] = 0.0
    if "stribeck" in par.fields:  # fc + fs >= 0 within round-off
        c, s = par.fidx("coulomb", 0), par.fidx("stribeck", 0)
        p[s:s + nf] = np.maximum(p[s:s + nf], -p[c:c + nf])
    return p, fixed


def _f(x):
    return repr(float(x))


def _parse(text):
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True, insert_pis=True))
    return ET.fromstring(text, parser=parser)


def _child_indent(parent):
    if len(parent) and parent.text and parent.text.strip() == "":
        return parent.text
    return "\n    "


def _set_inertial(link_el, pi):
    m, c, Ic = about_com(pi)
    old = link_el.find("inertial")
    ind = _child_indent(link_el)
    inner = ind + "  "
    new = ET.Element("inertial")
    new.text = inner
    o = ET.SubElement(new, "origin", {"xyz": f"{_f(c[0])} {_f(c[1])} {_f(c[2])}", "rpy": "0 0 0"})
    o.tail = inner
    ms = ET.SubElement(new, "mass", {"value": _f(m)})
    ms.tail = inner
    it = ET.SubElement(new, "inertia", {"ixx": _f(Ic[0, 0]), "ixy": _f(Ic[0, 1]), "ixz": _f(Ic[0, 2]),
                                        "iyy": _f(Ic[1, 1]), "iyz": _f(Ic[1, 2]), "izz": _f(Ic[2, 2])})
    it.tail = ind
    if old is not None:
        new.tail = old.tail
        link_el[list(link_el).index(old)] = new
    else:
        new.tail = link_el[-1].tail if len(link_el) else "\n  "
        if len(link_el):
            link_el[-1].tail = ind
        else:
            link_el.text = ind
        link_el.append(new)


def _set_dynamics(joint_el, damping, friction):
    d = joint_el.find("dynamics")
    if d is None:
        d = ET.Element("dynamics")
        ind = _child_indent(joint_el)
        if len(joint_el):
            d.tail = joint_el[-1].tail
            joint_el[-1].tail = ind
        else:
            joint_el.text, d.tail = ind, "\n  "
        joint_el.append(d)
    d.set("damping", _f(damping))
    d.set("friction", _f(friction))


def edit_urdf(text, par, p):
    """The URDF text with the identified parameters (module docstring)."""
    root = _parse(text)
    links = {el.get("name"): el for el in root.findall("link")}
    joints = {el.get("name"): el for el in root.findall("joint")}
    model = par.model
    for b in range(par.nb):
        main = model.body_link[b]
        if main not in links:
            raise InputError(f"link '{clip(main, 80)}' of the model is not a <link> of the URDF")
        _set_inertial(links[main], p[N_PARAMS * b:N_PARAMS * (b + 1)])
        for name, fr in model.link_frames.items():
            if fr.body == b and name != main and links[name].find("inertial") is not None:
                links[name].remove(links[name].find("inertial"))
    for f, name in enumerate(par.friction_joints):
        _set_dynamics(joints[name], p[par.fidx("viscous", f)], p[par.fidx("coulomb", f)])
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0"?>\n' + body + "\n"


def write_checked(text, out_path):
    """Write text to out_path through a temporary file that must load with strict=True first."""
    from .. import load_model
    from ..errors import DynamicsError

    out_path = os.path.abspath(out_path)
    d = os.path.dirname(out_path) or "."
    if not os.path.isdir(d):
        raise InputError(f"--output: folder '{clip(d, 160)}' does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".identify-", suffix=".urdf", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            load_model(tmp, strict=True)
        except DynamicsError as e:
            raise InputError(f"the identified URDF does not load strictly: {clip(e, 300)}") from None
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
