"""The simulated robot's commands (no rclpy), as ros2_control sends them.

`simulation_command_interface` says what the commands on effort_command_topic are:
- effort: the joint efforts [N m or N], applied as they are (clipped to the URDF <limit effort>);
- position [rad or m]: a joint-space PD loop at every step, tau = kp (q_ref - q) + kd (qd_ref - qd)
  + g(q) (qd_ref from a trajectory's velocities, else 0; g the model's gravity torques, fed forward as a
  position-controlled drive compensates its load, so a held position is reached exactly), as
  gz_ros2_control runs for position-commanded joints; until a joint's first command it holds its
  initial position, and a position is held after its command grows old (a forward_command_controller publishes once);
- velocity [rad/s or m/s]: tau = kd (qd_ref - qd) + g(q); an old command counts as zero velocity.
The PD torque is clipped to the effort limit as an effort command is. Positions beyond a joint's
<limit lower upper> and velocities beyond its <limit velocity> are clipped to them, counted and
reported (`clipped`, `last_clip`).

Messages: std_msgs/Float64MultiArray in command_joints order (a forward_command_controller's
~/commands), sensor_msgs/JointState by name (its effort, position or velocity field by the
interface), or trajectory_msgs/JointTrajectory (a joint_trajectory_controller's ~/joint_trajectory):
its points are followed in simulated time from its header.stamp, or from the step the message arrives
when the stamp is zero, as a joint_trajectory_controller does (positions linearly interpolated between
points, velocities the points' or the interpolation's slope), the last point held; before a stamp still
to come, the joints hold the positions they had when the message arrived. A copy of a stamped trajectory
sent again replaces it with the same reference.
Gains `simulation_pd_gains`: kp kd for every joint or per joint; empty = kp = I w^2, kd = 2 I w
(w = 2 pi 10 rad/s; I the geometric mean of the joint's smallest and largest diagonal inertia of H over
16 poses within its limits: `_inertia`).
"""
from __future__ import annotations

import math

import numpy as np

import dynamics_node as dn
from ..errors import ConfigError

OMEGA = 2 * math.pi * 10.0
# a trajectory stamped more than a day of simulated time ahead was stamped with the wall clock
FAR_AHEAD_NS = 86_400 * 10**9


def _names(items, limit=120):
    s = ", ".join(items)
    return s if len(s) <= limit else s[:limit] + f" ... ({len(items)} in all)"


class Commands:
    def __init__(self, model, cfg, names, index, q0):
        self.mode = cfg.simulation_command_interface
        self.names, self.index = names, index
        nv = model.nv
        self.lower, self.upper = np.full(nv, -np.inf), np.full(nv, np.inf)
        self.vmax = np.full(nv, np.inf)
        self.effort = np.full(nv, np.inf)
        for j in names:
            lim = model.joint_limits.get(j)
            if not lim:
                continue
            v = index[j]
            lo, hi, eff, vel = lim
            if model.joint_kinds.get(j) in ("revolute", "prismatic") and lo < hi:
                self.lower[v], self.upper[v] = lo, hi
            if math.isfinite(eff) and eff > 0:
                self.effort[v] = eff
            if math.isfinite(vel) and vel > 0:
                self.vmax[v] = vel
        self.command_names = (list(cfg.command_joints) or list(names)) if cfg.effort_command_topic else []
        self.command_v = np.asarray([index[j] for j in self.command_names], dtype=np.intp)
        self.timeout_ns = int(round(cfg.simulation_command_timeout * 1e9))
        self.cmd = np.zeros(nv)
        self.cmd_t = np.full(nv, -(1 << 62), dtype=np.int64)
        jv = np.asarray([index[j] for j in names], dtype=np.intp)
        self.hold = np.zeros(nv)
        self.hold[jv] = [q0[model.q_slice(j).start] for j in names]
        self.kp, self.kd = self._gains(model, cfg, names, jv, q0)
        self.traj = None
        self.clipped = 0
        self.last_clip = ""
        self._efforts = None  # torque()'s effort-mode arrays, made again after changed()

    @staticmethod
    def _gains(model, cfg, names, jv, q0):
        g = cfg.simulation_pd_gains
        kp, kd = np.zeros(model.nv), np.zeros(model.nv)
        if not g and cfg.simulation_command_interface == "effort":
            return kp, kd  # no PD loop
        if not g:
            inertia = Commands._inertia(model, names, jv, q0)
            kp[jv], kd[jv] = inertia * OMEGA ** 2, 2.0 * inertia * OMEGA
        elif len(g) == 2:
            kp[jv], kd[jv] = g
        elif len(g) == 2 * len(names):
            kp[jv], kd[jv] = g[0::2], g[1::2]
        else:
            raise ConfigError(f"simulation_pd_gains: expected 0, 2 or {2 * len(names)} values (kp kd for every "
                              f"joint, or per joint in the model's order {_names(names)}), got {len(g)}")
        return kp, kd

    @staticmethod
    def _inertia(model, names, jv, q0, poses=16):
        """Per joint, the geometric mean of the smallest and largest diagonal entry of H over q0 and
        poses - 1 others drawn (seeded) within the limits: a joint's inertia changes with the pose (a
        vertical axis through a stretched arm sees little of it), and gains for the mean keep the loop
        both lively at the largest (damping ratio (I_min / I_max)^(1/4)) and stable at the smallest
        (kd dt / I_min = 2 w dt (I_max / I_min)^(1/2), far below 2 at 1 kHz)."""
        rng = np.random.default_rng(0)
        qi = np.asarray([model.q_slice(j).start for j in names], dtype=np.intp)
        lo = np.asarray([(model.joint_limits.get(j) or (-math.pi, math.pi))[0] for j in names], dtype=float)
        hi = np.asarray([(model.joint_limits.get(j) or (-math.pi, math.pi))[1] for j in names], dtype=float)
        ok = np.isfinite(lo) & np.isfinite(hi) & (lo < hi)
        lo, hi = np.where(ok, lo, -math.pi), np.where(ok, hi, math.pi)
        diag = []
        for k in range(poses):
            q = np.asarray(q0, dtype=float).copy()
            if k:
                q[qi] = rng.uniform(lo, hi)
            diag.append(np.diag(np.asarray(dn.mass_matrix(model, q)))[jv])
        diag = np.asarray(diag)
        return np.sqrt(diag.min(axis=0) * diag.max(axis=0))

    def _take(self, dst, vals, t_ns, what):
        """Clip to the limits of the interface, report what was clipped, store."""
        lo, hi = ((self.lower, self.upper) if self.mode == "position" else
                  (-self.vmax, self.vmax) if self.mode == "velocity" else (-self.effort, self.effort))
        c = np.clip(vals, lo[dst], hi[dst])
        out = np.flatnonzero(c != vals)
        if out.size and self.mode != "effort":  # an effort beyond its limit is saturated, as the node's own
            self.clipped += 1
            k = int(out[0])
            self.last_clip = (f"{what}: {self.mode} {vals[k]:g} for '{self.names_v(dst[k])}' clipped to {c[k]:g} "
                              f"(its URDF <limit>)")
        self.cmd[dst] = c
        self.cmd_t[dst] = t_ns
        self.traj = None if self.traj is None else self._drop(self.traj, dst)
        self.changed()
        return ""

    def changed(self):
        """Says that cmd or cmd_t were written (torque() keeps arrays made from them)."""
        self._efforts = None

    def names_v(self, v):
        return next((n for n, i in self.index.items() if i == v), str(v))

    def array(self, data, t_ns) -> str:
        a = np.asarray(data, dtype=float).ravel()
        if a.size != self.command_v.size:
            return (f"{self.mode} command of {a.size} values refused: expected {self.command_v.size}, one per joint "
                    f"of command_joints in order ({_names(self.command_names)})")
        if not np.isfinite(a).all():
            k = int(np.flatnonzero(~np.isfinite(a))[0])
            return f"{self.mode} command refused: data[{k}] ('{self.command_names[k]}') is {a[k]}"
        return self._take(self.command_v, a, t_ns, "command")

    def named(self, names, values, t_ns) -> str:
        e = np.asarray(values, dtype=float).ravel()
        field = {"effort": "efforts", "position": "positions", "velocity": "velocities"}[self.mode]
        if e.size != len(names):
            return f"{self.mode} command refused: {len(names)} names but {e.size} {field}"
        idx = [(k, self.index[n]) for k, n in enumerate(names) if n in self.index]
        if not idx:
            return f"{self.mode} command refused: it names no joint of the model ({_names(list(names)) or 'none'})"
        if len({v for _, v in idx}) != len(idx):
            return f"{self.mode} command refused: a joint is listed twice"
        src = np.asarray([k for k, _ in idx], dtype=np.intp)
        dst = np.asarray([v for _, v in idx], dtype=np.intp)
        if not np.isfinite(e[src]).all():
            k = int(src[np.flatnonzero(~np.isfinite(e[src]))[0]])
            return f"{self.mode} command refused: {self.mode}[{k}] ('{names[k]}') is {e[k]}"
        return self._take(dst, e[src], t_ns, "command")

    def trajectory(self, names, points, t_ns, start_ns=0, q_v=None) -> str:
        """points: [(time_from_start s, positions, velocities)] of a JointTrajectory; start_ns its
        header.stamp (0: now, t_ns); q_v the joints' positions by v index at t_ns, held until a later start."""
        if self.mode == "effort":
            return "trajectory refused: simulation_command_interface is effort (a trajectory is followed in " \
                   "position or velocity)"
        unknown = [n for n in names if n not in self.index]
        if unknown or len(set(names)) != len(names) or not names:
            return f"trajectory refused: joints {_names(unknown) or 'listed twice or none'} are not the model's"
        if not points:
            return "trajectory refused: no points"
        if start_ns - t_ns > FAR_AHEAD_NS:
            return (f"trajectory refused: header.stamp {start_ns * 1e-9:.3f} s is {(start_ns - t_ns) * 1e-9:.3f} s "
                    f"ahead of the simulated time {t_ns * 1e-9:.3f} s: stamp it with the simulated /clock "
                    f"(use_sim_time) or leave it zero (start now)")
        dst = np.asarray([self.index[n] for n in names], dtype=np.intp)
        ts, P, V = [], [], []
        for k, (t, pos, vel) in enumerate(points):
            pos, vel = np.asarray(pos, dtype=float), np.asarray(vel, dtype=float)
            if pos.size != dst.size or (vel.size and vel.size != dst.size):
                return f"trajectory refused: point {k} has {pos.size} positions and {vel.size} velocities for " \
                       f"{dst.size} joints"
            if not (np.isfinite(pos).all() and np.isfinite(vel).all() and math.isfinite(t)) or (ts and t < ts[-1]):
                return f"trajectory refused: point {k} is not finite or goes back in time"
            ts.append(t)
            P.append(pos)
            V.append(vel if vel.size else None)
        P = np.asarray(P)
        cP = np.clip(P, self.lower[dst], self.upper[dst])
        if (cP != P).any():
            self.clipped += 1
            j = self.names_v(dst[np.argwhere(cP != P)[0][1]])
            self.last_clip = f"trajectory: positions beyond the URDF <limit> of '{j}' clipped to it"
        now = np.zeros(dst.size) if q_v is None else np.asarray(q_v, dtype=float)[dst]
        self.traj = (start_ns if start_ns > 0 else t_ns, dst, np.asarray(ts), cP, V, now)
        self.cmd_t[dst] = t_ns
        self.changed()
        return ""

    @staticmethod
    def _drop(traj, dst):
        keep = ~np.isin(traj[1], dst)
        if not keep.any():
            return None
        return (traj[0], traj[1][keep], traj[2], traj[3][:, keep], [None if v is None else v[keep] for v in traj[4]],
                traj[5][keep])

    def _reference(self, t_ns):
        """(q_ref, qd_ref, where) of a trajectory at the simulated time, or None."""
        t0, dst, ts, P, V, before = self.traj
        if t_ns < t0:  # a start still to come
            return dst, before, np.zeros(dst.size)
        t = (t_ns - t0) * 1e-9
        k = int(np.searchsorted(ts, t, side="right"))
        if k == 0:
            return dst, P[0], np.zeros(dst.size)
        if k >= len(ts):
            return dst, P[-1], np.zeros(dst.size)
        a = (t - ts[k - 1]) / (ts[k] - ts[k - 1]) if ts[k] > ts[k - 1] else 1.0
        q = P[k - 1] + a * (P[k] - P[k - 1])
        if V[k - 1] is not None and V[k] is not None:
            v = V[k - 1] + a * (V[k] - V[k - 1])
        else:
            v = (P[k] - P[k - 1]) / max(ts[k] - ts[k - 1], 1e-9)
        return dst, q, v

    def torque(self, q_v, qd, t_ns, gravity=None):
        """The joint efforts of this step (q_v: the joints' positions by v index; gravity: the model's
        gravity torques at q, fed forward by the PD loop)."""
        if self.mode == "effort":
            e = self._efforts
            if e is None:  # made once per command: the oldest and newest command's times, the efforts of
                zero = np.zeros(self.cmd.size)  # every command fresh, and of every command old (read-only)
                every = np.clip(self.cmd, -self.effort, self.effort)
                zero.flags.writeable = every.flags.writeable = False
                e = self._efforts = (int(self.cmd_t.min()), int(self.cmd_t.max()), every, zero)
            if t_ns - e[1] > self.timeout_ns:
                return e[3]
            if t_ns - e[0] <= self.timeout_ns:
                return e[2]
        fresh = (t_ns - self.cmd_t) <= self.timeout_ns
        if self.mode == "effort":
            return np.where(fresh, np.clip(self.cmd, -self.effort, self.effort), 0.0)
        vref = np.where(fresh, self.cmd, 0.0) if self.mode == "velocity" else np.zeros_like(qd)
        if self.mode == "position":
            qref = np.where(self.cmd_t > -(1 << 61), self.cmd, self.hold)
        if self.traj is not None:
            dst, qr, vr = self._reference(t_ns)
            vref[dst] = vr
            if self.mode == "position":
                qref[dst] = qr
        tau = self.kd * (vref - qd)
        if self.mode == "position":
            tau = tau + self.kp * (qref - q_v)
        if gravity is not None:
            tau = tau + gravity
        return np.clip(tau, -self.effort, self.effort)

    def over_velocity(self, qd):
        return [self.names_v(int(v)) for v in np.flatnonzero(np.abs(qd) > self.vmax)]
