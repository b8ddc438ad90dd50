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
    """(model, loader warnings) of a URDF (a path or urdf.read_urdf's Parsed): refuses what the fit does not support."""
    from .. import load_model

    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        model = load_model(urdf, friction=friction)
    if model.loops:
        raise ModelError(f"{clip(model.source, 160)}: a closed-loop model (<loop_joint> "
                         f"{clip_names(model.loop_joints)}) is not supported yet by dynamics_identify")
    odd = [n for n, k in model.joint_kinds.items() if k not in ("revolute", "continuous", "prismatic")]
    if odd:
        raise ModelError(f"{clip(model.source, 160)}: joints {clip_names(odd)} of type "
                         f"{model.joint_kinds[odd[0]]}: only revolute, continuous and prismatic joints "
                         "(a fixed-base tree) are supported; a floating base or multi-DoF joint is not")
    if model.nv == 0:
        raise ModelError(f"{clip(model.source, 160)}: the model has no moving joint: nothing to identify")
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


def law_urdf_path(output):
    """The URDF of the law's own inertias beside OUT.urdf (written when the law's class is richer than
    a URDF holds): OUT.law.urdf."""
    import os

    return os.path.splitext(os.path.abspath(output))[0] + ".law.urdf"


def fit_command(args, out=print):
    from .. import inverse_dynamics_batch, load_model
    from ..urdf_source import read_description
    from .classes import BLOCKS, choose
    from .law_out import law_values, write, yaml_path
    from .solve import base_parameter_report, fit_class, least_squares_rms
    from .urdf_out import edit_urdf, write_checked

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
    law = fit_class(model, model_f, S, cls, vc, vs, args.prior_weight, par)
    zero = np.zeros(model.nv)
    urdf_fit = law if cls == "coulomb" else fit_class(model, model_f, S, "coulomb", zero, zero, args.prior_weight)
    res = law.res
    warns += res.warnings
    if res.condition > 1e3:
        warns.append(f"poor excitation: condition number {res.condition:.3g} of the weighted base regressor "
                     "(column-normalised); play the trajectory of 'dynamics_identify excite'")
    entries, w = base_parameter_report(law)
    warns += w
    if urdf_fit is not law:
        warns += base_parameter_report(urdf_fit)[1]
    law_text = edit_urdf(text, law.par, law.p)
    urdf_text = law_text if urdf_fit is law else edit_urdf(text, urdf_fit.par, urdf_fit.p)
    vals, arm = law_values(model, law.par, law.p)
    fitted = _law_model(law_text, model, vals, arm)
    alone = load_model(urdf_text, friction=True)
    pred = inverse_dynamics_batch(fitted, S.Q, S.QD, S.QDD)
    pred_alone = inverse_dynamics_batch(alone, S.Q, S.QD, S.QDD)
    prior_pred = inverse_dynamics_batch(model_f, S.Q, S.QD, S.QDD)
    rms_f, max_f = report.rms_max(S.TAU_RAW - pred)      # as evaluate: the recorded efforts
    rms_alone, _ = report.rms_max(S.TAU_RAW - pred_alone)
    rms_filt, _ = report.rms_max(S.TAU - pred)
    rms_prior, _ = report.rms_max(S.TAU_RAW - prior_pred)
    rms_ls = least_squares_rms(law.par, S)
    rms_ls_urdf = rms_ls if urdf_fit is law else least_squares_rms(urdf_fit.par, S)
    if not (np.isfinite(pred).all() and np.isfinite(pred_alone).all()):
        raise InputError("the identified model's torques on the recording are not finite: the data are degenerate")
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
    law_path = str(args.output) if urdf_fit is law else law_urdf_path(args.output)
    write_checked(urdf_text, args.output)
    if urdf_fit is not law:
        write_checked(law_text, law_path)
    params_path = yaml_path(args.output)
    write(params_path, law_path, model.joint_names, vals, arm)
    data = dict(
        command="fit", bag=rec.path, topic=rec.topic, urdf=str(args.urdf), output=str(args.output),
        params=params_path, law_urdf=law_path, friction_class=cls, cross_validation=dict(
            blocks=BLOCKS, scores=scores, relative_rms={k: v for k, v in rel_cv.items()}, scored_on="recorded efforts"),
        law={f: dict(zip(model.joint_names, v)) for f, v in vals.items()},
        armature=dict(zip(model.joint_names, arm)), friction_curves=curves,
        window=[float(S.t[0]), float(S.t[-1])], samples=int(S.Q.shape[0]), samples_fit=int(res.samples),
        rate_hz=S.fs, cutoff_hz=S.cutoff, decimation=S.decimate, solver=res.solver,
        joints=list(model.joint_names), rms=rms_f, rms_filtered=rms_filt, max=max_f, rms_unconstrained_ls=rms_ls,
        rms_urdf_alone=rms_alone, rms_unconstrained_ls_urdf_class=rms_ls_urdf,
        rms_urdf=rms_prior, effort_std=spread, residual_sigma_wls=res.sigma, condition_number=res.condition,
        prior_factor=res.prior_factor, joint_range=rng, base_parameters=entries,
        parameters={nm: float(v) for nm, v in zip(law.par.names, law.p)}, friction_joints=list(law.par.friction_joints),
        urdf_parameters={nm: float(v) for nm, v in zip(urdf_fit.par.names, urdf_fit.p)},
        adjusted_bodies=[dict(link=model.body_link[b], eta=e) for b, e in law.adjusted],
        urdf_warnings=load_warnings, warnings=warns)
    if args.report:
        report.write_json(args.report, data)
    if args.plot:
        report.render_plot(args.plot, S.t, model.joint_names, S.TAU, pred,
                           f"fit: filtered measured effort and the identified model ({rec.path})", curves=curves)
    for w in warns:
        out(f"warning: {w}")
    out(f"identified {len(entries)} base parameters ({int(res.determined.sum())} determined) from {S.Q.shape[0]} "
        f"samples at {S.fs:.4g} Hz (low-pass {S.cutoff:.3g} Hz), condition number {res.condition:.4g}")
    out("friction classes, cross-validated score (RMS over joints of the held-out RMS of the recorded efforts / "
        f"their std, {BLOCKS} contiguous blocks): " + ", ".join(f"{k} {v:.4g}" for k, v in scores.items())
        + f"; chosen: {cls}")
    for j, nm in enumerate(model.joint_names):
        out(f"  {nm}: RMS {rms_f[j]:.4g} N m (least squares of the class {rms_ls[j]:.4g}; "
            f"{clip(args.output, 60)} alone {rms_alone[j]:.4g}, least squares of a URDF {rms_ls_urdf[j]:.4g}; "
            f"the input URDF {rms_prior[j]:.4g}), "
            f"effort spread {spread[j]:.4g}; b {vals['viscous'][j]:.4g}, fc {vals['coulomb'][j]:.4g}, "
            f"vc {vals['coulomb_velocity'][j]:.4g}, fs {vals['stribeck'][j]:.4g}, "
            f"vs {vals['stribeck_velocity'][j]:.4g}, o {vals['offset'][j]:.4g}, Ia {arm[j]:.4g}")
    if urdf_fit is law:
        out(f"wrote {args.output} (the identified robot, its joint law is a URDF's) and {params_path} (for the node)")
    else:
        out(f"wrote {args.output} (the best URDF alone, for any tool), {law_path} (the inertias of the {cls} law) "
            f"and {params_path} (the node's parameter file: the law with {law_path})")
    return data


def _evaluated_model(args, out):
    """(model, urdf used, parameter file used or None, loader warnings, what the output line says) for
    evaluate: a parameter file (``--params``, or OUT.yaml beside ``--urdf``) brings the URDF its
    ``urdf_path`` names, as it does for the node, and its joint law; ``--params none`` or no file
    beside: the URDF alone with its <dynamics> friction (what other tools read from it)."""
    import os

    from .. import load_model
    from ..urdf import read_urdf
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
    parsed = read_urdf(used)   # read and parsed once, loaded twice (the joint law needs the model's joints)
    model, load_warnings = load(parsed, True)
    arm, law = law_from(rp, model, params, warn=lambda w: out(f"warning: {w}"))
    on = rp.get("friction", True) is not False
    model = load_model(parsed, armature=arm, friction=(law if law is not None else True) if on else False)
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
