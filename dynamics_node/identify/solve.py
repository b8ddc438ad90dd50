"""One class of the joint law fitted (fit.py's weighted least squares and semidefinite program, then a
margin of physical consistency), the yardstick of unconstrained least squares on the recorded
efforts, and what the report says of every base parameter.

``fit`` writes two models when the chosen class is richer than a URDF can hold: the law's (its
inertias fitted together with offsets, armature, smooth Coulomb and Stribeck friction, which only
OUT.yaml carries) and the URDF class's own (inertias with viscous and sign() Coulomb friction,
fitted on their own), so that OUT.urdf alone is the best model a URDF can hold.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import clip_names
from .stack import grams

MAX_LS_ROWS = 20000  # recorded samples (evenly strided) for the least-squares yardstick


@dataclass
class ClassFit:
    name: str            # the class (params.CLASSES)
    par: object          # its Parameterisation (vc, vs set)
    res: object          # fit.Fit
    p: np.ndarray        # the parameters written (physically consistent with a margin)
    adjusted: list       # [(body, eta)] of urdf_out.make_consistent


def fit_class(model, model_f, S, name, vc, vs, prior_weight, par=None) -> ClassFit:
    from .classes import parameterise
    from .fit import fit
    from .urdf_out import make_consistent

    par, shapes = parameterise(model, model_f, S, name, vc, vs, par)
    res = fit(par, S, prior_weight=prior_weight, shapes=shapes)
    p, adjusted = make_consistent(par, res.p, res.prior_factor)
    return ClassFit(name, par, res, p, adjusted)


def least_squares_rms(par, S):
    """Per joint the RMS of recorded effort minus the class's unconstrained least squares (weights 1 /
    the effort's variance per joint), fitted and evaluated on the window's recorded samples with the
    law at the states' velocity: what the class can do at best on this recording, as evaluate
    measures it."""
    from .fit import least_squares

    n = S.Q.shape[0]
    rows = np.arange(n) if n <= MAX_LS_ROWS else np.linspace(0, n - 1, MAX_LS_ROWS).round().astype(np.int64)
    M, counts = grams(par, S.Q[rows], S.QD[rows], S.QDD[rows], S.TAU_RAW[rows], S.mask[rows])
    var = np.array([np.var(S.TAU_RAW[rows][S.mask[rows, j], j]) for j in range(par.model.nv)])
    _, _, rss, _ = least_squares(par, M, counts, 1.0 / np.where(var > 0, var, 1.0))
    return np.sqrt(rss / np.maximum(counts, 1))


def base_parameter_report(cf: ClassFit):
    """(the report's base_parameters entries, warnings that say truthfully where the undetermined ones
    are). A base parameter whose columns are all zero in the data (a Stribeck term the class search
    left out of a joint: vs = 0) is not part of the law and not listed as undetermined."""
    par, res, p = cf.par, cf.res, cf.p
    B = par.base_map()
    names = par.base_names(B)
    k = res.prior_factor
    prior = k * (B @ par.prior)
    absent = res.absent if getattr(res, "absent", None) is not None else np.zeros(len(names), bool)
    held = res.held if res.held is not None else np.zeros(len(names), bool)
    law_held = res.law_held or {}
    entries, held_names, loose = [], [], []
    for i, nm in enumerate(names):
        value = float(B[i] @ p)
        entries.append(dict(name=nm, ls=res.p_ls[i], std=res.std[i],
                            relative_std=abs(res.std[i]) / max(abs(res.p_ls[i]), 1e-300),
                            determined=bool(res.determined[i]), held_at_prior=bool(held[i]),
                            prior=float(prior[i]), constrained=value, in_law=not bool(absent[i]),
                            law_term_held=law_held.get(i)))
        if absent[i] or res.determined[i] or i in law_held:  # a held law term: its own warning (fit.py)
            continue
        if held[i]:
            held_names.append(nm)
        else:
            loose.append(f"{nm} = {value:.3g} (least squares {res.p_ls[i]:.3g} +- {res.std[i]:.2g})")
    warns = []
    scale = "the URDF's values" if abs(k - 1.0) < 0.01 else f"{k:.3g} x the URDF's values (the efforts' scale)"
    n = len(names) - int(absent.sum())
    if held_names:
        warns.append(f"{cf.name} class: {len(held_names)} of {n} base parameters not determined by the data (outside "
                     "what the recording excites, or their least-squares values within about one standard deviation "
                     f"of the URDF's), held at {scale}: {clip_names(held_names, 600, quote=False)}")
    if loose:
        warns.append(f"{cf.name} class: {len(loose)} of {n} base parameters poorly determined (standard deviation "
                     "above 10 % of their typical size) but away from the URDF's values, so fitted from the data: "
                     f"{clip_names(loose, 800, quote=False)}")
    return entries, warns
