"""Joint states merged from any number of publishers, no rclpy.

`JointStateMerger` keeps, per model joint, its latest position and velocity with the
time it arrived, from any number of publishers: an arm driver and a gripper (or each leg) may
publish separate `sensor_msgs/JointState` messages on one topic. A message updates the joints it
names (joints the model does not have are ignored); a torque is computed whenever every joint it
needs has a value no older than `joint_state_timeout` (arrival time, monotonic: publishers' clocks
need not agree; the output carries the header of the message that completed it). A message listing
a joint twice, or with a position array whose length differs from the names, is refused whole; a
NaN or inf value drops only that value (a NaN velocity does not block gravity torques, which need
positions only); an effort array of the wrong length is reported and ignored.

Closed-loop models need only the actuated joints: the passive ones are solved from the loop
closure (`dn.close_loops`, starting from the last solution) unless the message brings them fresh.

`LatestJointStates` is the node's view of the stream process's merge (latest.py), which the node reads
instead of subscribing itself.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np

import dynamics_node as dn
from ..errors import InputError, clip
from .conversions import _as_float_vector


class JointStateMerger:
    def __init__(self, st):
        self.st = st
        m = st.model
        conv = st.conv
        self.names = list(conv.joint_names)
        self.index = {j: k for k, j in enumerate(self.names)}
        needed = st.torque_names if st.loops else self.names
        self.single_dof = all(len(conv._q_of[j]) == 1 and len(conv._v_of[j]) == 1 for j in self.names)
        self.jq = np.asarray([conv._q_of[j][0] for j in self.names], dtype=np.intp)
        self.jv = np.asarray([conv._v_of[j][0] for j in self.names], dtype=np.intp)
        self.q = np.asarray(m.neutral(), dtype=float).copy()
        self.pos = self.q[self.jq].copy()
        self.t_pos = np.full(len(self.names), -math.inf)
        self.vel = np.zeros(len(self.names))
        self.t_vel = np.full(len(self.names), -math.inf)
        self.need = np.asarray([self.index[j] for j in needed], dtype=np.intp)
        self.all_joints = np.arange(len(self.names), dtype=np.intp)
        self._plans: dict = {}
        self.last_closed = None        # closed-loop models: the last closed configuration
        self.continuous_q = np.asarray([conv._q_of[j][0] for j in self.names if j not in needed
                                        and m.joint_kinds.get(j) == "continuous"], dtype=np.intp)
        self.closure_residual = float("nan")
        self.effort_length_errors = 0
        self.matched = 0                               # model joints named by the latest message
        self.eff = np.zeros(len(self.names))           # efforts, for the momentum observer
        self.t_eff = np.full(len(self.names), -math.inf)

    def _plan(self, names: tuple):
        plan = self._plans.get(names)
        if plan is None:
            first = {}
            for k, n in enumerate(names):
                if n in first:
                    raise InputError(f"joint_states: joint '{clip(n)}' is listed twice (name[{first[n]}] and "
                                     f"name[{k}]): the message is refused")
                first[n] = k
            pairs = [(k, self.index[n]) for k, n in enumerate(names) if n in self.index]
            plan = (np.asarray([p[0] for p in pairs], dtype=np.intp),
                    np.asarray([p[1] for p in pairs], dtype=np.intp), len(names))
            if len(self._plans) > 64:
                self._plans.clear()
            self._plans[names] = plan
        return plan

    def update(self, msg, now: float) -> list:
        """Take a message's values; returns a list of problems (dropped values) for a warning.
        Raises InputError when the whole message is refused."""
        if not self.single_dof:
            raise InputError("joint_states: the model has multi-coordinate joints, which "
                             "sensor_msgs/JointState cannot describe")
        src, dst, n = self._plan(tuple(msg.name))
        pos = _as_float_vector(msg.position)
        if pos.size != n:
            raise InputError(f"joint_states: {n} names but {pos.size} positions: the message is refused")
        vel = _as_float_vector(msg.velocity)
        if vel.size not in (0, n):
            raise InputError(f"joint_states: {n} names but {vel.size} velocities: the message is refused")
        problems = []
        self.matched = int(src.size)
        if len(msg.effort) not in (0, n):
            self.effort_length_errors += 1
            problems.append(f"{n} names but {len(msg.effort)} efforts (efforts ignored)")
        if not src.size:
            return problems
        p = pos[src]
        ok = np.isfinite(p)
        if ok.all():
            self.pos[dst] = p
            self.t_pos[dst] = now
        else:
            self.pos[dst[ok]] = p[ok]
            self.t_pos[dst[ok]] = now
            bad = [self.names[j] for j in dst[~ok]]
            problems.append(f"non-finite position of {', '.join(bad)} (dropped)")
        if vel.size:
            v = vel[src]
            okv = np.isfinite(v)
            self.vel[dst[okv]] = v[okv]
            self.t_vel[dst[okv]] = now
            if not okv.all():
                problems.append(f"non-finite velocity of {', '.join(self.names[j] for j in dst[~okv])} (dropped)")
        if len(msg.effort) == n:  # the observer's input; a non-finite effort is dropped like a velocity
            e = _as_float_vector(msg.effort)[src]
            oke = np.isfinite(e)
            self.eff[dst[oke]] = e[oke]
            self.t_eff[dst[oke]] = now
        return problems

    def stale(self, now: float, timeout: float, which=None) -> list:
        """Names of the needed joints (or `which` indices) without a value newer than timeout."""
        idx = self.need if which is None else which
        old = self.t_pos[idx] < now - timeout
        return [self.names[j] for j in idx[old]]

    def configuration(self, now: float, timeout: float):
        """q of the model when every needed joint is fresh, else None. Closed loops: completed."""
        limit = now - timeout
        if self.t_pos[self.need].min() < limit:
            return None
        q = self.q
        q[self.jq] = self.pos
        if not self.st.loops:
            return q
        if self.t_pos.min() >= limit:   # every tree joint measured: no closure to solve
            return q.copy()
        m = self.st.model
        start = q.copy()
        if self.last_closed is not None:
            passive = np.ones(len(self.names), dtype=bool)
            passive[self.need] = False
            start[self.jq[passive]] = self.last_closed[self.jq[passive]]
        closed = dn.close_loops(m, start, list(self.st.torque_names))
        # a continuous joint's angle is taken within half a turn of where it was (Newton may land
        # a whole number of turns away: the same pose, but a jump in the reported position)
        wrap = self.continuous_q
        closed[wrap] = start[wrap] + np.remainder(closed[wrap] - start[wrap] + math.pi, 2 * math.pi) - math.pi
        from ..algorithms.loops import loop_position_errors
        errs = np.asarray(loop_position_errors(m, closed), dtype=float)
        self.closure_residual = float(np.abs(errs).max()) if errs.size else 0.0
        self.last_closed = closed
        return closed.copy()


class LatestJointStates:
    """The node's view of the stream's merge (latest.py: shared memory written by the stream
    process after every joint state), for gravity_compensation's "latest joint state", the markers
    and the limit check of diagnostics. The node does not subscribe to the joint states itself."""

    def __init__(self):
        self.merger = None
        self.reader = None
        self._lock = threading.Lock()

    def reset(self, st):
        with self._lock:
            self.merger = JointStateMerger(st) if st is not None else None

    def set_reader(self, reader):
        self.reader = reader

    def _fill(self, merger):
        """Copy the stream's latest merge into merger; False when there is none for its joints."""
        reader = self.reader
        got = reader.read(merger.names) if reader is not None else None
        if got is None:
            return False
        merger.pos[:], merger.t_pos[:] = got
        return True

    def q(self, st, cfg):
        """q at the latest joint states of st's model; InputError saying why there is none."""
        topic, timeout, merger = cfg.joint_states_topic, cfg.joint_state_timeout, self.merger
        if merger is None or merger.st is not st:
            raise InputError(f"position: empty, and no usable joint state was received on {topic}")
        now = time.monotonic()
        with self._lock:
            if not self._fill(merger):
                raise InputError(f"position: empty, and no usable joint state was received on {topic}")
            q = merger.configuration(now, timeout)
            stale = merger.stale(now, timeout) if q is None else []
            never = bool(np.isinf(merger.t_pos).all())
        if q is None:
            raise InputError(f"position: empty, and no usable joint state was received on {topic}" if never else
                             f"position: empty, and the latest joint states on {topic} are older than "
                             f"joint_state_timeout {timeout:g} s for {', '.join(stale[:10])}")
        return q.copy()

    def q_or_none(self, st, cfg):
        try:
            return self.q(st, cfg) if st is not None else None
        except Exception:  # noqa: BLE001 - none yet, stale, or a loop that does not close there
            return None
