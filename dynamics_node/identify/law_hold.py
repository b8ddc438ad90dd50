"""Terms of the joint law held at their prior (the URDF's value times the efforts' scale k, 0 where the
URDF has none) when the recording cannot separate them from the inertial parameters and the data's
value is one the joint cannot have, or when their fitted value is one no joint has. Both kinds are
named in the report, joint and term.

A law base parameter is one whose leading term (the largest of |B_i| times the parameters' typical
sizes, as fit_params.base_names orders them) is a joint-law coefficient: armature, viscous, Coulomb,
offset, Stribeck.

- Not separated, with a value the joint cannot have (confounded): its column of the weighted,
  column-normalised regressor, less its projection on the columns of the inertial base parameters,
  keeps less than SEPARATE of its norm (rho below; 1 / rho is the square root of its variance
  inflation factor against them), and its least-squares value is out of the joint's reach: an
  armature above both the composite inertia the joint moves and SEP_ARM times the arm's largest, an
  armature or friction coefficient below zero beyond noise, a force above the effort range. A torque
  the law does not hold that looks like the rigid body's (a spring, a cable, friction that lags the
  velocity) moves such a term by 1 / rho times as much. The case that made this rule: each joint
  moving along one sinusoid, so its acceleration is its position times -w^2 and an armature is a
  position-dependent torque to the data; the fit gave a shoulder an armature of 11.3 kg m^2 (the
  link's own inertia below 1 kg m^2), and at twice the speed that joint's error was 3.5 times the
  untouched URDF's (issue 43). A plausible value is left to the data, which determine it: held on
  separability alone, the Panda's shoulder armature (with the link inertia the data see it with) and
  an elbow offset cost up to 3.2 times the best reference's error at twice the speed.
- Implausible, after the constrained fit: an armature above ARM_OWN times the largest composite
  inertia the joint moves about its axis (H_jj over the recording, of the prior model and of the
  fitted one) and above ARM_ARM times the largest composite inertia of any joint (a geared wrist's
  rotor inertia, reflected by the square of its ratio, is often many times its own link's, but not a
  sizeable part of the arm's); a friction force above the joint's recorded effort range (b max|qd|,
  the largest |(fc + fs exp(-(qd/vs)^2)) tanh(qd/vc)| and |fs exp(-(qd/vs)^2) tanh(qd/vc)| over the
  recorded velocities, |o| above max|tau_j|: friction changes sign with the velocity and gravity does
  not, so a joint moved both ways records at least its friction).
"""
from __future__ import annotations

import numpy as np

from ..algorithms.estimation.regressor import N_PARAMS

SEPARATE = 0.05  # rho below this: the term is not separated from the inertial parameters
ARM_OWN = 10.0   # an armature above this x the joint's own composite inertia ...
ARM_ARM = 0.5    # ... and above this x the largest composite inertia of the arm is implausible
SEP_ARM = 0.25   # a term not separated: an armature above the joint's composite inertia and this x the arm's
SEP_SIGMAS = 2.0  # ... or a sign-bounded term (Ia, b, fc) below zero by more than this many standard deviations
H_SAMPLES = 200  # states (evenly strided over the window) at which H's diagonal is evaluated
VELOCITIES = 200  # points of the recorded velocity range at which the friction forces are evaluated
WORDS = {"armature": "armature", "viscous": "viscous friction", "coulomb": "Coulomb friction",
         "offset": "torque offset", "stribeck": "Stribeck friction"}


def law_terms(par, B):
    """{base index: (field, friction joint index)} of the law base parameters."""
    w = np.abs(B) * par.scale_data[None, :]
    nI = N_PARAMS * par.nb
    nf = len(par.friction_joints)
    out = {}
    for i in range(B.shape[0]):
        c = int(np.argmax(w[i]))
        if c >= nI:
            out[i] = (par.fields[(c - nI) // nf], (c - nI) % nf)
    return out


def separability(info, terms, span):
    """rho per law base parameter (``terms``): the norm of its normalised column's part that the
    inertial base parameters' columns do not explain (1: orthogonal to them, 0: in their span)."""
    G = info["G"] / np.outer(info["d"], info["d"])
    law = np.zeros(G.shape[0], bool)
    law[list(terms)] = True
    R = np.nonzero(~law & span)[0]
    lam, U = np.linalg.eigh(G[np.ix_(R, R)]) if R.size else (np.zeros(0), np.zeros((0, 0)))
    keep = lam > 1e-12 * max(lam.max(), 1e-300) if lam.size else np.zeros(0, bool)
    out = {}
    for i in terms:
        g = G[i, R] @ U[:, keep]
        out[i] = float(np.sqrt(max(G[i, i] - np.sum(g ** 2 / lam[keep]), 0.0) / max(G[i, i], 1e-300)))
    return out


def confounded(par, B, terms, rho, span, prior, delta, std, S, H):
    """{base index: why} of the law terms the recording does not separate (rho below SEPARATE) whose
    least-squares value, read as the term's own (its ``prior`` plus ``delta``, the least squares'
    distance from the prior's value of its base parameter, over the term's coefficient), is one the joint
    cannot have: an armature above both the composite inertia the joint moves (H, composite_inertia)
    and SEP_ARM x the arm's largest; an armature, viscous or Coulomb coefficient below zero by more
    than SEP_SIGMAS standard deviations; a friction force or offset above the recorded effort range
    (as implausible). Such a value is what an unmodelled torque that looks like the rigid body's (a
    spring, a cable, friction that lags the velocity) puts into a term the data cannot tell from the
    inertial parameters. A plausible value is left to the data: held at the prior, an offset or
    armature the data do determine cost up to three times the references' error at twice the speed
    (issue 43, the Panda's sine cases)."""
    rows = _rows(par)
    h_arm = float(np.max(H)) if H.size else 0.0
    out = {}
    for i, (fl, f) in terms.items():
        if not span[i] or rho[i] >= SEPARATE:
            continue
        c = par.fidx(fl, f)
        value = prior[c] + delta[i] / B[i, c]
        sd = std[i] / abs(B[i, c])
        j = rows[f]
        ok = S.mask[:, j]
        e = float(np.max(np.abs(S.TAU_RAW[ok, j]))) if ok.any() else np.inf
        v = float(np.max(np.abs(S.QD[:, j])))
        why = None
        if fl == "armature" and value > max(H[j], SEP_ARM * h_arm):
            why = (f"{value:.3g} from the data, above the composite inertia the joint moves ({H[j]:.3g}) and "
                   f"{SEP_ARM:g} x the arm's largest ({h_arm:.3g})")
        elif fl in ("armature", "viscous", "coulomb") and value < -SEP_SIGMAS * sd:
            why = f"{value:.3g} +- {sd:.2g} from the data, below zero"
        elif fl != "armature" and abs(value) * (v if fl == "viscous" else 1.0) > e:
            why = f"{value:.3g} from the data, a force above the recorded effort range {e:.3g}"
        if why:
            out[i] = f"the recording does not separate it from the inertial parameters (separability {rho[i]:.2g}) " \
                     f"and its value is one the joint cannot have: {why}"
    return out


def _rows(par):
    """Per friction joint the model joint whose row it acts on (a mimic follower: its master's)."""
    m = par.model
    out = []
    for f, name in enumerate(par.friction_joints):
        if name in m.joint_names:
            out.append(m.joint_names.index(name))
        else:
            out.append(int(m.v_src[int(np.nonzero(par.dof_friction == f)[0][0])]))
    return out


def composite_inertia(par, Q, p_list):
    """Per model joint the largest H_jj(q) over Q's rows, for each inertial parameter vector in
    ``p_list``: H's column j is the regressor at (q, 0, e_j) less the one at (q, 0, 0), times pi."""
    from .stack import _Kernel

    m = par.model
    n = min(Q.shape[0], H_SAMPLES)
    Qs = Q[np.linspace(0, Q.shape[0] - 1, n).round().astype(np.int64)]
    kern = _Kernel(m, n)
    Z = np.zeros_like(Qs)
    Y0 = kern(Qs, Z, Z)[:, :, :N_PARAMS * m.nb].copy()
    out = np.zeros(m.nv)
    for j in range(m.nv):
        E = np.zeros_like(Qs)
        E[:, j] = 1.0
        Yj = kern(Qs, Z, E)[:, j, :N_PARAMS * m.nb] - Y0[:, j]
        for pi in p_list:
            out[j] = max(out[j], float(np.max(Yj @ pi[:N_PARAMS * m.nb])))
    return out


def implausible(par, p, S, H):
    """{(field, friction joint index): why} of the terms of p no joint has (module docstring); H: per
    model joint its largest composite inertia (composite_inertia). The friction forces are the ones the
    law produces at the velocities the joint was recorded at (VELOCITIES points from 0 to max|qd|):
    with smooth Coulomb friction and a Stribeck term, fc + fs is not a force the law ever reaches when
    the Stribeck term has decayed before tanh(qd / vc) has risen."""
    from .stack import law_shapes

    rows = _rows(par)
    out = {}
    h_arm = float(np.max(H)) if H.size else 0.0
    for f, j in enumerate(rows):
        if not par.extended[f]:
            continue
        ok = S.mask[:, j]
        if not ok.any():
            continue
        e = float(np.max(np.abs(S.TAU_RAW[ok, j])))
        v = np.linspace(0.0, float(np.max(np.abs(S.QD[:, j]))), VELOCITIES)[:, None]
        _, sc, ss = law_shapes(v, par.vc[f], par.vs[f])
        val = {fl: p[par.fidx(fl, f)] for fl in par.fields}
        if "armature" in val and val["armature"] > max(ARM_OWN * H[j], ARM_ARM * h_arm):
            out["armature", f] = (f"{val['armature']:.3g} above {ARM_OWN:g} x the composite inertia the joint "
                                  f"moves ({H[j]:.3g}) and {ARM_ARM:g} x the arm's largest ({h_arm:.3g})")
        fs = val.get("stribeck", 0.0) * ss[:, 0]
        force = {"viscous": abs(val["viscous"]) * float(v[-1, 0]),
                 "coulomb": float(np.max(np.abs(val["coulomb"] * sc[:, 0] + fs))),
                 "offset": abs(val.get("offset", 0.0)), "stribeck": float(np.max(np.abs(fs)))}
        for fl, x in force.items():
            if fl in val and x > e:
                out[fl, f] = f"a force of {x:.3g} above the recorded effort range {e:.3g}"
    return out


def message(par, field, f, value, why, base_name, base_value):
    """The report's words for a held term: joint, term, prior value, its base parameter, why. When that
    base parameter combines it with inertial parameters, the combination is what is held, at the
    prior's value."""
    if " " not in base_name:
        return f"joint '{par.friction_joints[f]}': {WORDS[field]} held at its prior {value:.3g} ({base_name}: {why})"
    return (f"joint '{par.friction_joints[f]}': {WORDS[field]} held, with the inertial parameters the data "
            f"see it with, at the prior's {base_value:.3g} for {base_name} ({why})")
