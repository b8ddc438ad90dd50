"""The report of a fit or an evaluation (JSON) and its plot (matplotlib, Agg backend, PNG)."""
from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from ..errors import InputError, clip


def _clean(x):
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return _clean(x.tolist())
    if isinstance(x, (np.floating, float)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def atomic_write(path, write, mode="w"):
    """write(fh) into a temporary file beside path, then rename: no partial file."""
    path = os.path.abspath(path)
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        raise InputError(f"folder '{clip(d, 160)}' of '{clip(path, 160)}' does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".identify-", dir=d)
    try:
        with os.fdopen(fd, mode) as fh:
            write(fh)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path, data):
    atomic_write(path, lambda fh: json.dump(_clean(data), fh, indent=2, allow_nan=False))


def friction_curves(model, S, pred, bins=41):
    """Per joint the friction curve: the recorded effort minus the identified rigid-body part (ID and
    armature: pred - tau_f), averaged in velocity bins (at least 5 samples), and the identified tau_f
    at the bins' centres. {joint: {"velocity", "measured", "model", "count"}}."""
    from .. import joint_friction

    tf = joint_friction(model, S.QD)
    meas = S.TAU_RAW - (pred - tf)  # the recorded efforts: the filter would smear the curve at qd = 0
    out = {}
    for j, name in enumerate(model.joint_names):
        v = S.QD[:, j]
        lo, hi = float(v.min()), float(v.max())
        if not hi > lo:
            continue
        edges = np.linspace(lo, hi, bins + 1)
        k = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, bins - 1)
        cnt = np.bincount(k, minlength=bins)
        sm = np.bincount(k, weights=meas[:, j], minlength=bins)
        ok = cnt >= 5
        c = 0.5 * (edges[1:] + edges[:-1])[ok]
        QD = np.zeros((c.size, model.nv))
        QD[:, j] = c
        out[name] = dict(velocity=c, measured=sm[ok] / cnt[ok], model=joint_friction(model, QD)[:, j] if c.size
                         else c, count=cnt[ok])
    return out


def render_plot(path, t, joints, measured, predicted, title, labels=("measured", "predicted"), curves=None):
    """One panel per joint: measured and predicted torque over time; with ``curves`` (friction_curves)
    a second column: the friction curve per joint against velocity."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(joints)
    fig, axes = plt.subplots(n, 2 if curves is not None else 1, figsize=(15 if curves is not None else 10,
                             1.8 * n + 1), squeeze=False)
    for j, name in enumerate(joints):
        ax = axes[j, 0]
        ax.plot(t, measured[:, j], lw=0.8, label=labels[0])
        ax.plot(t, predicted[:, j], lw=0.8, label=labels[1])
        ax.set_ylabel(f"{clip(name, 24)}\n[N m]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(title, fontsize=10)
    axes[-1, 0].set_xlabel("time since the topic's first message [s]")
    if curves is not None:
        for j, name in enumerate(joints):
            ax = axes[j, 1]
            c = curves.get(name)
            if c is not None:
                ax.plot(c["velocity"], c["measured"], ".", ms=3, label="measured - rigid body (bin means)")
                ax.plot(c["velocity"], c["model"], lw=1.2, label="identified tau_f(qd)")
            ax.grid(alpha=0.3)
        axes[0, 1].legend(loc="upper left", fontsize=8)
        axes[0, 1].set_title("friction curves", fontsize=10)
        axes[-1, 1].set_xlabel("joint velocity [rad/s or m/s]")
    fig.tight_layout()

    def save(fh):
        fig.savefig(fh, format="png", dpi=90)

    try:
        atomic_write(path, save, mode="wb")
    finally:
        plt.close(fig)


def rms_max(residual):
    return np.sqrt(np.mean(residual ** 2, axis=0)), np.max(np.abs(residual), axis=0)
