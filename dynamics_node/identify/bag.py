"""Joint states from a rosbag2 recording, without ROS: the ``rosbags`` package (PyPI) reads both
storages (sqlite3 ``.db3`` and MCAP), as a folder with metadata.yaml or as a bare file.

Every sensor_msgs/msg/JointState on the topic contributes, per joint it names, one sample (time,
position, velocity, effort): several publishers that each send some joints are merged by joint name,
as the node merges them. Time is the message's header stamp (the log time where the stamp is zero).
Each joint's samples are sorted by time; a joint's velocity or effort missing from a message (empty
array) is NaN there.
"""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, clip, clip_names

JOINT_STATE = "sensor_msgs/msg/JointState"


class BagError(InputError):
    """The recording cannot be used (names the bag, the topic or the joints)."""


@dataclass
class JointSeries:
    t: np.ndarray       # s since the topic's first message
    position: np.ndarray
    velocity: np.ndarray  # NaN where a message had none
    effort: np.ndarray    # NaN where a message had none


@dataclass
class Recording:
    path: str
    topic: str
    joints: dict          # name -> JointSeries
    messages: int
    publishers: int       # distinct name lists seen (a proxy for the publishers)
    duration: float       # s from the first to the last message of the topic


def _open(path):
    from rosbags.rosbag2 import Reader

    p = pathlib.Path(path)
    if not p.exists():
        raise BagError(f"bag '{clip(path, 160)}' does not exist")
    if p.is_dir() and not (p / "metadata.yaml").exists():
        files = sorted(x.name for x in p.iterdir() if x.suffix in (".db3", ".mcap"))
        if len(files) == 1:  # a folder holding one storage file but no metadata.yaml
            p = p / files[0]
        else:
            raise BagError(f"bag folder '{clip(path, 160)}' has no metadata.yaml"
                           + (f" and {len(files)} storage files" if files else " and no .db3 or .mcap file"))
    elif p.is_file() and p.suffix not in (".db3", ".mcap"):
        raise BagError(f"'{clip(path, 160)}' is not a rosbag2 recording: a folder with metadata.yaml, a .db3 "
                       "or a .mcap file is expected")
    try:
        reader = Reader(p)
        reader.open()
    except BagError:
        raise
    except Exception as e:  # noqa: BLE001 - rosbags, sqlite3 and mcap raise many kinds: all mean unreadable
        raise BagError(f"cannot read bag '{clip(path, 160)}' (truncated or corrupt?): "
                       f"{type(e).__name__}: {clip(e, 200)}") from None
    return reader


def _typestore(reader):
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    try:  # the bag's own definitions, when it carries them (newer distributions)
        from rosbags.typesys import get_types_from_msg

        for c in reader.connections:
            if c.msgtype == JOINT_STATE or not c.msgdef or not getattr(c.msgdef, "data", None):
                continue
            if getattr(c.msgdef.format, "name", "") == "MSG":
                store.register(get_types_from_msg(c.msgdef.data, c.msgtype))
    except Exception:  # noqa: BLE001 - only other topics' types: they are not read
        pass
    return store


def read_joint_states(path, topic="/joint_states") -> Recording:
    """All JointState messages of ``topic`` in the bag at ``path``, merged per joint (module docstring).
    BagError: no such bag, unreadable (truncated) storage, no such topic (the message lists the topics
    there), a topic of another type, no messages, messages without effort."""
    path = os.fspath(path)
    reader = _open(path)
    try:
        return _read(reader, path, topic)
    except BagError:
        raise
    except Exception as e:  # noqa: BLE001 - a storage that breaks while being read: truncated or corrupt
        raise BagError(f"cannot read bag '{clip(path, 160)}' (truncated or corrupt?): "
                       f"{type(e).__name__}: {clip(e, 200)}") from None
    finally:
        try:
            reader.close()
        except Exception:  # noqa: BLE001
            pass


def _read(reader, path, topic):
    conns = [c for c in reader.connections if c.topic == topic]
    if not conns:
        there = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections})
        raise BagError(f"bag '{clip(path, 160)}' has no topic '{clip(topic, 80)}'; its topics: "
                       f"{clip_names(there, 400, quote=False) if there else 'none'}")
    bad = [c.msgtype for c in conns if c.msgtype != JOINT_STATE]
    if bad:
        raise BagError(f"topic '{clip(topic, 80)}' in '{clip(path, 160)}' carries {bad[0]}, not {JOINT_STATE}")
    store = _typestore(reader)
    groups = {}  # name tuple -> lists of (time, log time, positions, velocities, efforts)
    n = 0
    for conn, logtime, raw in reader.messages(connections=conns):
        msg = store.deserialize_cdr(raw, conn.msgtype)
        names = tuple(msg.name)
        k = len(names)
        if k == 0 or len(set(names)) != k or len(msg.position) != k:
            continue  # refused whole, as the node refuses it
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        g = groups.setdefault(names, ([], [], [], [], []))
        g[0].append(stamp if stamp > 0 else np.nan)
        g[1].append(logtime * 1e-9)
        g[2].append(np.asarray(msg.position, dtype=float))
        g[3].append(np.asarray(msg.velocity, dtype=float) if len(msg.velocity) == k else np.full(k, np.nan))
        g[4].append(np.asarray(msg.effort, dtype=float) if len(msg.effort) == k else np.full(k, np.nan))
        n += 1
    if n == 0:
        raise BagError(f"topic '{clip(topic, 80)}' in '{clip(path, 160)}' holds no usable JointState message "
                       "(each needs names and as many positions)")
    # one clock for every message: header stamps where all have them, else the log times
    use_stamp = all(not np.isnan(g[0]).any() for g in groups.values())
    times = {names: np.array(g[0] if use_stamp else g[1]) for names, g in groups.items()}
    t0 = min(float(t.min()) for t in times.values())
    t1 = max(float(t.max()) for t in times.values())
    per = {}
    for names, g in groups.items():
        t = times[names] - t0
        P, V, E = np.array(g[2]), np.array(g[3]), np.array(g[4])
        for c, name in enumerate(names):
            per.setdefault(name, []).append((t, P[:, c], V[:, c], E[:, c]))
    joints = {}
    for name, parts in per.items():
        t = np.concatenate([p[0] for p in parts])
        order = np.argsort(t, kind="stable")
        cols = [np.concatenate([p[i] for p in parts])[order] for i in range(1, 4)]
        t = t[order]
        keep = np.ones(t.size, bool)  # one sample per time: the last one of equal stamps
        keep[:-1] = np.diff(t) > 0
        joints[name] = JointSeries(t[keep], *(c[keep] for c in cols))
    no_effort = [nm for nm, s in joints.items() if not np.isfinite(s.effort).any()]
    if len(no_effort) == len(joints):
        raise BagError(f"topic '{clip(topic, 80)}' in '{clip(path, 160)}' has no effort field (every message's "
                       "effort array is empty): identification needs the measured joint torques")
    return Recording(path=path, topic=topic, joints=joints, messages=n, publishers=len(groups), duration=t1 - t0)
