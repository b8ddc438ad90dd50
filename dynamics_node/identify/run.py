"""The commands ``fit`` and ``evaluate``: loading, checks, the fit, the outputs."""
from __future__ import annotations

import warnings as _warnings

import numpy as np

from ..errors import DynamicsError, InputError, ModelError, clip, clip_names
from . import report
from .bag import read_joint_states
from .signals import prepare

MOVES = 1e-3  # rad (m): a joint whose range in the window is below this never moves


def load(urdf, friction):
    """(model, loader warnings): refuses what the fit does not support."""
    from .. import load_model

    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        model = load_model(urdf, friction=friction)
    if model.loops:
        raise ModelError(f"{clip(urdf, 160)}: a closed-loop model (<loop_joint> {clip_names(model.loop_joints)}) "
                         "is not supported yet by dynamics_identify")
    odd = [n for n, k in model.joint_kinds.items() if k not in ("revolute", "continuous", "prismatic")]
    if odd:
        raise ModelError(f"{clip(urdf, 160)}: joints {clip_names(odd)} of type "
                         f"{model.joint_kinds[odd[0]]}: only revolute, continuous and prismatic joints "
                         "(a fixed-base tree) are supported; a floating base or multi-DoF joint is not")
    if model.nv == 0:
        raise ModelError(f"{clip(urdf, 160)}: the model has no moving joint: nothing to identify")
    return model, [str(w.message) for w in caught]


def _samples(args, model):
    rec = read_joint_states(args.bag, args.topic)
    S = prepare(rec, model, args.t_from, args.t_to)
    return rec, S


def _motion(S, model):
    rng = S.Q.max(axis=0) - S.Q.min(axis=0)
    still = [model.joint_names[j] for j in range(model.nv) if rng[j] < MOVES]
    return rng, still


def _law_model(text_or_path, model, vals, arm):
    """The model of the joint law: URDF inertias, armature and dn.JointFriction per model joint."""
    from .. import JointFriction, load_model

    names = list(model.joint_names)
    return load_model(text_or_path, armature=dict(zip(names, arm)),
                      friction=JointFriction(**{f: dict(zip(names, v)) for f, v in vals.items()}))


def fit_command(args, out=print):
    from .. import inverse_dynamics_batch
    from ..urdf_source import read_description
    from .classes import BLOCKS, choose, parameterise
    from .fit import fit
    from .law_out import law_values, write, yaml_path
    from .stack import full_regressor
    from .urdf_out import edit_urdf, make_consistent, write_checked

    model, load_warnings = load(args.urdf, False)
    model_f, _ = load(args.urdf, True)
    text, _ = read_description(args.urdf, None)
    rec, S = _samples(args, model)
    warns = list(S.warnings)
    rng, still = _motion(S, model)
    if len(still) == model.nv:
        raise InputError(f"too little excitation to identify anything: no joint moves in the window "
                         f"(ranges below {MOVES:g}); every parameter is undetermined")
    if still:
        warns.append(f"joints that never move in the window: {clip_names(still)} (their friction and the "
                     "inertia only they would reveal stay at the URDF's values)")
    cls, vc, vs, scores, rel_cv, par = choose(model, model_f, S, getattr(args, "friction", "auto"))
    par, shapes = parameterise(model, model_f, S, cls, vc, vs, par)
    res = fit(par, S, prior_weight=args.prior_weight, shapes=shapes)
    warns += res.warnings
    p, adjusted = make_consistent(par, res.p, res.prior_factor)
    if res.condition > 1e3:
        warns.append(f"poor excitation: condition number {res.condition:.3g} of the weighted base regressor "
                     "(column-normalised); play the trajectory of 'dynamics_identify excite'")
    B = par.base_map()
    names = par.base_names(B)
    undetermined = [names[i] for i in np.nonzero(~res.determined)[0]]
    if undetermined:
        warns.append(f"{len(undetermined)} of {len(names)} base parameters not determined by the data (kept near "
                     f"the URDF's values): {clip_names(undetermined, 600, quote=False)}")
    new_text = edit_urdf(text, par, p)
    vals, arm = law_values(model, par, p)
    fitted = _law_model(new_text, model, vals, arm)
    pred = inverse_dynamics_batch(fitted, S.Q, S.QD, S.QDD)
    prior_pred = inverse_dynamics_batch(model_f, S.Q, S.QD, S.QDD)
    rms_f, max_f = report.rms_max(S.TAU_RAW - pred)      # as evaluate: the recorded efforts
    rms_filt, _ = report.rms_max(S.TAU - pred)
    rms_prior, _ = report.rms_max(S.TAU_RAW - prior_pred)
    sl = slice(None, None, max(1, S.Q.shape[0] // 4000))
    Yb = full_regressor(par, S.Q[sl], S.QD[sl], S.QDD[sl])[:, :, par.base_idx]  # the law as evaluated
    rms_ls, _ = report.rms_max(S.TAU_RAW[sl] - Yb @ res.p_ls)
    spread = S.TAU_RAW.std(axis=0)
    for j, nm in enumerate(model.joint_names):
        moves = prior_pred[:, j].std() > 0 and S.TAU[:, j].std() > 0
        c = np.corrcoef(S.TAU[:, j], prior_pred[:, j])[0, 1] if moves else 0.0
        if c < -0.5:
            warns.append(f"joint '{nm}': the efforts look sign-flipped (correlation {c:.2f} with the URDF model's "
                         "torques)")
        if spread[j] > 0 and rms_f[j] > 0.5 * spread[j]:
            warns.append(f"joint '{nm}': the identified model explains little of its effort (RMS {rms_f[j]:.3g} "
                         f"against a spread of {spread[j]:.3g}): sign, units, or unmodelled effects?")
    curves = report.friction_curves(fitted, S, pred)
    write_checked(new_text, args.output)
    params_path = yaml_path(args.output)
    write(params_path, args.output, model.joint_names, vals, arm)
    data = dict(
        command="fit", bag=rec.path, topic=rec.topic, urdf=str(args.urdf), output=str(args.output),
        params=params_path, friction_class=cls, cross_validation=dict(
            blocks=BLOCKS, scores=scores, relative_rms={k: v for k, v in rel_cv.items()}),
        law={f: dict(zip(model.joint_names, v)) for f, v in vals.items()},
        armature=dict(zip(model.joint_names, arm)), friction_curves=curves,
        window=[float(S.t[0]), float(S.t[-1])], samples=int(S.Q.shape[0]), samples_fit=int(res.samples),
        rate_hz=S.fs, cutoff_hz=S.cutoff, decimation=S.decimate, solver=res.solver,
        joints=list(model.joint_names), rms=rms_f, rms_filtered=rms_filt, max=max_f, rms_unconstrained_ls=rms_ls,
        rms_urdf=rms_prior, effort_std=spread, residual_sigma_wls=res.sigma, condition_number=res.condition,
        prior_factor=res.prior_factor, joint_range=rng,
        base_parameters=[dict(name=names[i], ls=res.p_ls[i], std=res.std[i],
                              relative_std=abs(res.std[i]) / max(abs(res.p_ls[i]), 1e-300),
                              determined=bool(res.determined[i]), constrained=float(B[i] @ p))
                         for i in range(len(names))],
        parameters={nm: float(v) for nm, v in zip(par.names, p)}, friction_joints=list(par.friction_joints),
        adjusted_bodies=[dict(link=model.body_link[b], eta=e) for b, e in adjusted],
        urdf_warnings=load_warnings, warnings=warns)
    if args.report:
        report.write_json(args.report, data)
    if args.plot:
        report.render_plot(args.plot, S.t, model.joint_names, S.TAU, pred,
                           f"fit: filtered measured effort and the identified model ({rec.path})", curves=curves)
    for w in warns:
        out(f"warning: {w}")
    out(f"identified {len(names)} base parameters ({int(res.determined.sum())} determined) from {S.Q.shape[0]} "
        f"samples at {S.fs:.4g} Hz (low-pass {S.cutoff:.3g} Hz), condition number {res.condition:.4g}")
    out("friction classes, cross-validated score (RMS over joints of held-out RMS / effort std, "
        f"{BLOCKS} contiguous blocks): " + ", ".join(f"{k} {v:.4g}" for k, v in scores.items())
        + f"; chosen: {cls}")
    for j, nm in enumerate(model.joint_names):
        out(f"  {nm}: RMS {rms_f[j]:.4g} N m (URDF {rms_prior[j]:.4g}, unconstrained LS {rms_ls[j]:.4g}), "
            f"effort spread {spread[j]:.4g}; b {vals['viscous'][j]:.4g}, fc {vals['coulomb'][j]:.4g}, "
            f"vc {vals['coulomb_velocity'][j]:.4g}, fs {vals['stribeck'][j]:.4g}, "
            f"vs {vals['stribeck_velocity'][j]:.4g}, o {vals['offset'][j]:.4g}, Ia {arm[j]:.4g}")
    out(f"wrote {args.output} and {params_path}")
    return data


def _evaluated_model(args, out):
    """(model, urdf used, parameter file used or None, loader warnings, what the output line says) for
    evaluate: a parameter file (``--params``, or OUT.yaml beside ``--urdf``) brings the URDF its
    ``urdf_path`` names, as it does for the node, and its joint law; ``--params none`` or no file
    beside: the URDF alone with its <dynamics> friction (what other tools read from it)."""
    import os

    from .. import load_model
    from .law_out import law_from, parse, urdf_of, yaml_path

    given = getattr(args, "params", None)
    urdf = getattr(args, "urdf", None)
    if given is None and urdf is None:
        raise InputError("evaluate needs --urdf ROBOT.urdf, or --params OUT.yaml (whose urdf_path names the URDF)")
    if given == "none":
        params = None
    elif given:
        params = given
    else:
        params = yaml_path(urdf) if os.path.exists(yaml_path(urdf)) else None
    if params is None:
        model, load_warnings = load(urdf, True)
        return model, urdf, None, load_warnings, f"{clip(urdf, 160)} alone (its <dynamics> friction on)"
    rp = parse(params)
    named = urdf_of(rp, params)
    used = named or urdf
    if used is None:
        raise InputError(f"--params: '{clip(params, 160)}' has no urdf_path: give the URDF with --urdf")
    if named and urdf and os.path.abspath(named) != os.path.abspath(urdf):
        out(f"note: {clip(params, 160)} names {clip(named, 160)} in its urdf_path (the inertias its law was "
            "fitted with): evaluated with that URDF, as the node would run it")
    model, load_warnings = load(used, True)
    arm, law = law_from(rp, model, params, warn=lambda w: out(f"warning: {w}"))
    on = rp.get("friction", True) is not False
    model = load_model(used, armature=arm, friction=(law if law is not None else True) if on else False)
    what = (f"{clip(used, 160)} with the joint law of {os.path.abspath(params)}" if on else
            f"{clip(used, 160)} with the armature of {os.path.abspath(params)} (friction: false there)")
    return model, used, os.path.abspath(params), load_warnings, what


def evaluate_command(args, out=print):
    from .. import inverse_dynamics_batch
    from .signals import joint_states, prepare, states_at

    model, urdf, used, load_warnings, what = _evaluated_model(args, out)
    rec = read_joint_states(args.bag, args.topic)
    S = prepare(rec, model, args.t_from, args.t_to, edges=False)
    t, T, E = joint_states(rec, model.joint_names, args.t_from, args.t_to)
    if t.size == 0:
        raise InputError(f"no complete joint state in the window on '{clip(rec.topic, 80)}' (every joint of the "
                         "model needs a value)")
    stamps, inv = np.unique(T, return_inverse=True)  # each joint's prediction at its own value's stamp
    inv = inv.reshape(T.shape)
    try:
        P = inverse_dynamics_batch(model, *states_at(S, stamps))
    except DynamicsError as e:
        raise InputError(f"inverse dynamics on the recording failed: {clip(e, 300)}") from None
    pred = np.take_along_axis(P, inv, axis=0)
    R = E - pred
    ok = np.isfinite(R)
    n_j = ok.sum(axis=0)

    def per_joint(f, X):
        return np.array([f(X[ok[:, j], j]) if n_j[j] else np.nan for j in range(model.nv)])
    rms = per_joint(lambda x: float(np.sqrt(np.mean(x ** 2))), R)
    mx = per_joint(lambda x: float(np.abs(x).max()), R)
    spread = per_joint(lambda x: float(x.std()), E)
    if not (np.isfinite(rms[n_j > 0]).all() and np.isfinite(pred).all()):
        raise InputError("the prediction or its error is not finite on this recording (efforts or states out of "
                         "range)")
    data = dict(command="evaluate", bag=rec.path, topic=rec.topic, urdf=str(urdf), params=used,
                window=[float(t[0]), float(t[-1])], joints=list(model.joint_names), rms=rms, max=mx,
                samples=int(t.size), samples_per_joint=n_j, publishers=rec.publishers, effort_std=spread,
                relative_rms=np.where(spread > 0, rms / np.where(spread > 0, spread, 1), np.nan),
                rate_hz=S.fs, cutoff_hz=S.cutoff, urdf_warnings=load_warnings, warnings=S.warnings)
    if args.report:
        report.write_json(args.report, data)
    if args.plot:
        report.render_plot(args.plot, t, model.joint_names, E, pred,
                           f"evaluate: measured effort and {clip(urdf, 60)}" + (" (the joint law)" if used else ""))
    for w in S.warnings:
        out(f"warning: {w}")
    out(f"{t.size} joint states ({rec.publishers} publisher{'s' if rec.publishers > 1 else ''} merged by joint name) "
        f"at {S.fs:.4g} Hz, window [{t[0]:.3f}, {t[-1]:.3f}] s; the model: {what}")
    for j, nm in enumerate(model.joint_names):
        if n_j[j]:
            out(f"  {nm}: RMS {rms[j]:.4g} N m, max {mx[j]:.4g} N m, effort spread {spread[j]:.4g} ({n_j[j]} efforts)")
        else:
            out(f"  {nm}: no effort recorded in the window")
    return data
