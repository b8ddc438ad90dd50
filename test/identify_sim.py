"""Simulated recordings with a known truth for the dynamics_identify tests: a perturbed, physically
consistent copy of a robot's inertial parameters plus friction (written into the URDF's XML), a
smooth trajectory within the limits, the truth's torques from Pinocchio's RNEA (independent of the
core) plus friction, and a rosbag2 recording of them (rosbags writer) with noise."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np


def _consistent_perturbation(mass, com, Ic, rng, amount):
    """A rigid body near (mass, com, Ic): mass x [1 - a, 1 + a], the CoM moved by a x 5 cm, the
    principal moments scaled and the axes turned, keeping the triangle inequality."""
    m = mass * (1 + amount * rng.uniform(-1, 1)) if mass > 0 else 0.1
    c = np.asarray(com) + amount * 0.05 * rng.uniform(-1, 1, 3)
    ev = np.linalg.eigvalsh(Ic) if mass > 0 else np.full(3, 1e-4)
    ev = np.maximum(ev, 1e-6)
    # second moments of the mass distribution (Wensing et al.): positive <=> triangle inequality
    sig = np.maximum(0.5 * ev.sum() - ev, 1e-7 * ev.sum()) * (1 + amount * rng.uniform(-1, 1, 3))
    ev2 = sig.sum() - sig
    A = rng.normal(size=(3, 3)) * amount
    R, _ = np.linalg.qr(np.eye(3) + A)
    return m, c, R @ np.diag(ev2) @ R.T


def perturbed_urdf(text, rng, amount=0.3, friction=(0.3, 3.0), skip_links=()):
    """(URDF text of the truth, {joint: (damping, coulomb)}). Every link with an inertial (and no
    inertial: given one) on a moving joint's child is perturbed; every moving joint gets friction."""
    root = ET.fromstring(text)
    moving_children = {j.find("child").get("link") for j in root.findall("joint") if j.get("type") != "fixed"}
    for link in root.findall("link"):
        if link.get("name") not in moving_children or link.get("name") in skip_links:
            continue
        ine = link.find("inertial")
        if ine is None:
            continue
        o = ine.find("origin")
        xyz = [float(x) for x in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()]
        rpy = [float(x) for x in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
        I = ine.find("inertia")
        vals = {k: float(I.get(k, 0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        Il = np.array([[vals["ixx"], vals["ixy"], vals["ixz"]], [vals["ixy"], vals["iyy"], vals["iyz"]],
                       [vals["ixz"], vals["iyz"], vals["izz"]]])
        Rr = _rpy(rpy)
        m, c, Ic = _consistent_perturbation(float(ine.find("mass").get("value")), xyz, Rr @ Il @ Rr.T, rng, amount)
        if o is None:
            o = ET.SubElement(ine, "origin")
        o.set("xyz", " ".join(repr(float(x)) for x in c))
        o.set("rpy", "0 0 0")
        ine.find("mass").set("value", repr(float(m)))
        for k, (r, s) in {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2),
                          "izz": (2, 2)}.items():
            I.set(k, repr(float(Ic[r, s])))
    fr = {}
    for j in root.findall("joint"):
        if j.find("mimic") is not None and j.find("dynamics") is not None:  # the truth: friction on masters only
            j.remove(j.find("dynamics"))
        if j.get("type") in ("revolute", "continuous", "prismatic") and j.find("mimic") is None:
            d = j.find("dynamics")
            if d is None:
                d = ET.SubElement(j, "dynamics")
            b, f = rng.uniform(*friction) * 0.5, rng.uniform(*friction)
            d.set("damping", repr(float(b)))
            d.set("friction", repr(float(f)))
            fr[j.get("name")] = (b, f)
    return ET.tostring(root, encoding="unicode"), fr


def _rpy(rpy):
    r, p, y = rpy
    Rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    Ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    Rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def fourier_trajectory(model, t, rng, period=10.0, harmonics=5, fill=0.6, vmax=1.5):
    """Q, QD, QDD (exact derivatives) of a random finite Fourier series per joint, centred in its
    limits, scaled to use ``fill`` of the half range and at most ``vmax`` rad/s."""
    nv = model.nv
    w = 2 * math.pi / period
    Q, QD, QDD = (np.zeros((t.size, nv)) for _ in range(3))
    for j, name in enumerate(model.joint_names):
        lim = model.joint_limits.get(name)
        lo, hi = (-math.pi, math.pi) if lim is None or not np.isfinite(lim[0]) else (lim[0], lim[1])
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        if lim is not None and np.isfinite(lim[3]) and lim[3] > 0:
            v_lim = min(vmax, 0.8 * lim[3])
        else:
            v_lim = vmax
        q = np.zeros(t.size)
        qd, qdd = np.zeros(t.size), np.zeros(t.size)
        for k in range(1, harmonics + 1):
            a, b = rng.normal(size=2) / k
            q += a * np.sin(w * k * t) + b * np.cos(w * k * t)
            qd += w * k * (a * np.cos(w * k * t) - b * np.sin(w * k * t))
            qdd += -(w * k) ** 2 * (a * np.sin(w * k * t) + b * np.cos(w * k * t))
        s = min(fill * min(half, 2.0) / np.abs(q).max(), v_lim / np.abs(qd).max())
        Q[:, j], QD[:, j], QDD[:, j] = mid + s * q, s * qd, s * qdd
    return Q, QD, QDD


def random_law(model, fr, rng, stribeck=True):
    """The issue-27 joint law of a truth: per joint (Ia, b, fc, vc, fs, vs, o) with b, fc from ``fr``
    (perturbed_urdf's), an armature, a smooth Coulomb scale, a Stribeck bump and an offset."""
    law = {}
    for n in model.joint_names:
        b, fc = fr.get(n, (0.0, 0.0))
        law[n] = dict(Ia=rng.uniform(0.05, 0.3), b=b, fc=fc, vc=float(rng.choice([0.01, 0.02, 0.05])),
                      fs=rng.uniform(0.5, 1.5) * fc if stribeck else 0.0, vs=float(rng.choice([0.05, 0.1, 0.2])),
                      o=rng.uniform(-1.0, 1.0))
    return law


def law_torque(law, QD, QDD, names):
    """The joint law written out here (numpy, not the core): Ia qdd + b qd + (fc + fs exp(-(qd/vs)^2))
    tanh(qd/vc) + o per joint."""
    T = np.zeros_like(QD)
    for j, n in enumerate(names):
        c = law.get(n)
        if c is None:
            continue
        v = QD[:, j]
        s = np.tanh(v / c["vc"]) if c["vc"] > 0 else np.sign(v)
        st = c["fs"] * np.exp(-(v / c["vs"]) ** 2) if c["vs"] > 0 else 0.0
        T[:, j] = c["Ia"] * QDD[:, j] + c["b"] * v + (c["fc"] + st) * s + c["o"]
    return T


def model_rows(pm, model, Q, QD, QDD, f):
    """f(q, v, a) (rows per Pinocchio dof) at each state, in the model's joint order: a mimic follower
    (q_f = mul q_m + off) moves with its master and its row is added to the master's times mul
    (tau = G^T tau_tree)."""
    import pinocchio as pin

    iq = [pm.joints[pm.getJointId(n)].idx_q for n in model.joint_names]
    fol = [(pm.joints[pm.getJointId(f)].idx_q, model.joint_names.index(mst), mul, off)
           for f, (mst, mul, off) in model.mimic.items()]
    q, v, a = pin.neutral(pm), np.zeros(pm.nv), np.zeros(pm.nv)
    out = []
    for k in range(Q.shape[0]):
        q[iq], v[iq], a[iq] = Q[k], QD[k], QDD[k]
        for i, jm, mul, off in fol:
            q[i], v[i], a[i] = mul * Q[k, jm] + off, mul * QD[k, jm], mul * QDD[k, jm]
        full = f(q, v, a)
        row = full[iq].copy()
        for i, jm, mul, _ in fol:
            row[jm] += mul * full[i]
        out.append(row)
    return np.stack(out)


def joint_torque_regressor(urdf_path, model, Q, QD, QDD):
    """Pinocchio's joint-torque regressor at each state, in the model's joint order (model_rows)."""
    import pinocchio as pin

    pm = pin.buildModelFromUrdf(urdf_path)
    pd = pm.createData()
    return model_rows(pm, model, Q, QD, QDD, lambda q, v, a: pin.computeJointTorqueRegressor(pm, pd, q, v, a))


def least_squares_prediction(urdf_path, model, train, test, law=None):
    """Unconstrained least squares on the ``train`` recording (Q, QD, QDD, TAU; joints weighted by 1 /
    their effort's std), predicted at the ``test`` states (Q, QD, QDD): Pinocchio's joint-torque
    regressor with viscous and sign() Coulomb friction, or with ``law`` (fitted_law's) the full class
    at its vc, vs (offset, armature, tanh Coulomb, Stribeck where vs > 0), the columns written here."""
    def columns(Q, QD, QDD):
        Y = joint_torque_regressor(urdf_path, model, Q, QD, QDD)
        F = []
        for j, n in enumerate(model.joint_names):
            v, a = QD[:, j], QDD[:, j]
            if law is None:
                c = [v, np.sign(v)]
            else:
                vc, vs = law[n]["vc"], law[n]["vs"]
                sh = np.tanh(v / vc) if vc > 0 else np.sign(v)
                c = [v, sh, np.ones_like(v), a] + ([np.exp(-(v / vs) ** 2) * sh] if vs > 0 else [])
            block = np.zeros((v.size, model.nv, len(c)))
            block[:, j, :] = np.stack(c, axis=1)
            F.append(block)
        return np.concatenate([Y] + F, axis=2)
    A, TAU = columns(*train[:3]), train[3]
    w = 1.0 / np.maximum(TAU.std(axis=0), 1e-12)
    x, *_ = np.linalg.lstsq((A * w[None, :, None]).reshape(-1, A.shape[2]), (TAU * w).reshape(-1), rcond=1e-10)
    return columns(*test[:3]) @ x


def law_prediction(urdf_text, law, model, Q, QD, QDD):
    """OUT.yaml's model (fitted_law's URDF text and law): Pinocchio's RNEA on that URDF, the joint law
    written here, and a mimic follower's <dynamics> on its master's row."""
    return truth_torques(urdf_text, model, {}, Q, QD, QDD, law=law) + follower_friction(urdf_text, model, QD)


def urdf_prediction(urdf_text, model, Q, QD, QDD):
    """A URDF alone: Pinocchio's RNEA plus its <dynamics> b qd + fc sign(qd), a mimic follower's on its
    master's row (as a URDF tool applies them)."""
    dyn = {j.get("name"): j.find("dynamics") for j in ET.fromstring(urdf_text).findall("joint")}
    fr = {n: (float(dyn[n].get("damping", 0)), float(dyn[n].get("friction", 0))) if dyn.get(n) is not None
          else (0.0, 0.0) for n in model.joint_names}
    return truth_torques(urdf_text, model, fr, Q, QD, QDD) + follower_friction(urdf_text, model, QD)


def follower_friction(urdf_text, model, QD):
    """The <dynamics> friction of mimic followers (q_f = mul q_m + off) in the URDF text, on their
    masters' rows: mul (b mul qd + fc sign(mul qd)), as a URDF tool with mimic joints applies it."""
    dyn = {j.get("name"): j.find("dynamics") for j in ET.fromstring(urdf_text).findall("joint")}
    T = np.zeros_like(QD)
    for f, (master, mul, _) in model.mimic.items():
        d = dyn.get(f)
        if d is not None:
            j = model.joint_names.index(master)
            v = mul * QD[:, j]
            T[:, j] += mul * (float(d.get("damping", 0)) * v + float(d.get("friction", 0)) * np.sign(v))
    return T


def fitted_law(out):
    """(URDF text of OUT.yaml's urdf_path, the law per joint as law_torque takes it) of a fit's OUT.urdf."""
    import yaml

    rp = yaml.safe_load(out.with_suffix(".yaml").read_text())["dynamics_node"]["ros__parameters"]
    fm = rp["friction_model"]
    law = {n: dict(Ia=rp["armature"][k], b=fm["viscous"][k], fc=fm["coulomb"][k], vc=fm["coulomb_velocity"][k],
                   fs=fm["stribeck"][k], vs=fm["stribeck_velocity"][k], o=fm["offset"][k])
           for k, n in enumerate(fm["joints"])}
    with open(rp["urdf_path"]) as fh:
        return fh.read(), law


def truth_torques(urdf_text, model, fr, Q, QD, QDD, law=None):
    """Pinocchio's RNEA on the truth URDF plus friction b qd + f sign(qd) (the core's convention), or
    with ``law`` (random_law) the issue-27 joint law instead."""
    import pinocchio as pin

    pm = pin.buildModelFromXML(urdf_text)
    pd = pm.createData()
    TAU = model_rows(pm, model, Q, QD, QDD, lambda q, v, a: pin.rnea(pm, pd, q, v, a))
    if law is not None:
        return TAU + law_torque(law, QD, QDD, model.joint_names)
    for j, n in enumerate(model.joint_names):
        b, f = fr.get(n, (0.0, 0.0))
        TAU[:, j] += b * QD[:, j] + f * np.sign(QD[:, j])
    return TAU


def write_bag(path, t, names, Q, QD, TAU, storage="sqlite3", split=None, topic="/joint_states", t0=1000.0,
              velocity=True, extra_topics=()):
    """A rosbag2 recording of JointState messages at times t (s), stamps t0 + t. ``split``: a list of
    name groups, one message per group per sample (several publishers)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    JS, H, T = (ts.types[n] for n in ("sensor_msgs/msg/JointState", "std_msgs/msg/Header",
                                      "builtin_interfaces/msg/Time"))
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    groups = split or [list(names)]
    cols = [[list(names).index(n) for n in g] for g in groups]
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conn = w.add_connection(topic, JS.__msgtype__, typestore=ts)
        for extra in extra_topics:
            w.add_connection(extra, "std_msgs/msg/String", typestore=ts)
        for k in range(t.size):
            stamp = t0 + float(t[k])
            sec = int(math.floor(stamp))
            for g, c in zip(groups, cols):
                msg = JS(header=H(stamp=T(sec=sec, nanosec=int(round((stamp - sec) * 1e9)) % 1000000000),
                                  frame_id=""),
                         name=list(g), position=np.ascontiguousarray(Q[k, c]),
                         velocity=np.ascontiguousarray(QD[k, c]) if velocity else np.zeros(0),
                         effort=np.ascontiguousarray(TAU[k, c]))
                w.write(conn, int(stamp * 1e9), ts.serialize_cdr(msg, JS.__msgtype__))


def write_publishers_bag(path, groups, topic="/joint_states", t0=1000.0, storage="sqlite3"):
    """A rosbag2 recording of several publishers, each sending some joints at stamps of its own: groups
    is a list of (names, t, Q, QD, TAU) (one row per message of that publisher); messages are written in
    stamp order, interleaved."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    JS, H, T = (ts.types[n] for n in ("sensor_msgs/msg/JointState", "std_msgs/msg/Header",
                                      "builtin_interfaces/msg/Time"))
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    rows = sorted((float(g[1][k]), gi, k) for gi, g in enumerate(groups) for k in range(len(g[1])))
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conn = w.add_connection(topic, JS.__msgtype__, typestore=ts)
        for tk, gi, k in rows:
            names, _, Q, QD, TAU = groups[gi]
            stamp = t0 + tk
            sec = int(math.floor(stamp))
            msg = JS(header=H(stamp=T(sec=sec, nanosec=int(round((stamp - sec) * 1e9)) % 1000000000), frame_id=""),
                     name=list(names), position=np.ascontiguousarray(Q[k], dtype=float),
                     velocity=np.ascontiguousarray(QD[k], dtype=float),
                     effort=np.ascontiguousarray(TAU[k], dtype=float))
            w.write(conn, int(stamp * 1e9), ts.serialize_cdr(msg, JS.__msgtype__))


def lagged_friction(QD, dt, fc, b, tau):
    """Friction the joint law does not hold: viscous b qd plus Coulomb friction whose reversal lags the
    velocity's sign by a first-order lag of time constant tau (s), F' = (fc sign(qd) - F) / tau,
    integrated at the samples' spacing dt (exact for piecewise-constant sign). Real joints reverse their
    friction over a short time or displacement; at weak excitation this is what the low-passed Coulomb
    and Stribeck columns of a fit meet near zero velocity."""
    a = 1.0 - math.exp(-dt / tau)
    target = fc * np.sign(QD)
    F = np.zeros(QD.shape[1])
    out = np.empty_like(QD)
    for k in range(QD.shape[0]):
        F = F + a * (target[k] - F)
        out[k] = F
    return out + b * QD



def sine_trajectory(model, t, rng, periods, fill=0.5, vmax=1.5, phase=None):
    """Q, QD, QDD of ONE sinusoid per joint (joint j: period periods[j], a random phase unless given),
    centred in its limits, its amplitude ``fill`` of the half range (at most 2 rad) and its speed at
    most ``vmax`` rad/s: each joint's acceleration is -(2 pi / period)^2 times its displacement, so an
    armature's column is its own position's."""
    nv = model.nv
    Q, QD, QDD = (np.zeros((t.size, nv)) for _ in range(3))
    ph = rng.uniform(0, 2 * math.pi, nv) if phase is None else np.broadcast_to(phase, (nv,))
    for j, name in enumerate(model.joint_names):
        lim = model.joint_limits.get(name)
        lo, hi = (-math.pi, math.pi) if lim is None or not np.isfinite(lim[0]) else (lim[0], lim[1])
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        w = 2 * math.pi / periods[j]
        a = min(fill * min(half, 2.0), vmax / w)
        Q[:, j] = mid + a * np.sin(w * t + ph[j])
        QD[:, j] = a * w * np.cos(w * t + ph[j])
        QDD[:, j] = -a * w * w * np.sin(w * t + ph[j])
    return Q, QD, QDD
