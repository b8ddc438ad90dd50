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


def render_plot(path, t, joints, measured, predicted, title, labels=("measured", "predicted")):
    """One panel per joint: measured and predicted torque over time."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(joints)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n + 1), sharex=True, squeeze=False)
    for j, name in enumerate(joints):
        ax = axes[j, 0]
        ax.plot(t, measured[:, j], lw=0.8, label=labels[0])
        ax.plot(t, predicted[:, j], lw=0.8, label=labels[1])
        ax.set_ylabel(f"{clip(name, 24)}\n[N m]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(title, fontsize=10)
    axes[-1, 0].set_xlabel("time since the topic's first message [s]")
    fig.tight_layout()

    def save(fh):
        fig.savefig(fh, format="png", dpi=90)

    try:
        atomic_write(path, save, mode="wb")
    finally:
        plt.close(fig)


def rms_max(residual):
    return np.sqrt(np.mean(residual ** 2, axis=0)), np.max(np.abs(residual), axis=0)
