"""The simulated robot's world (no rclpy): its environment, state, commands and step.

`World(st, cfg)` holds, for one model state, what `simulation: true` simulates (simulation.py runs it
at its rate and publishes it):
- the environment: the floor plane `simulation_floor` (a point and a normal in the root link's frame,
  default z = 0, normal +z) and a contact point on each of `simulation_contact_links` (default every
  moving link, at its origin), soft contacts of Featherstone §11.8 with `simulation_friction`,
  `simulation_stiffness` and `simulation_damping` (dn.Contact);
- the state q, qd (start: `simulation_initial_positions` by name, the rest at zero, at rest; a
  floating base at its neutral pose unless root.x .. root.qw are named), the surfaces' state, and the
  simulated time in integer nanoseconds (steps of 1/simulation_rate s);
- the commanded efforts per joint with the simulated time they arrived: a std_msgs/Float64MultiArray
  in command_joints order (`command_array`) or a sensor_msgs/JointState's efforts by name
  (`command_named`); a joint whose command is older than `simulation_command_timeout` (simulated
  time) gets zero effort; commands are clipped to the URDF <limit effort>, as a drive would;
- `step()`: one dn.simulate_step (semi-implicit Euler, the contact forces implicit; the model's
  `friction` option decides whether the URDF's damping and friction act).
A step that fails or whose result is not finite is not taken: the world halts at its last finite state
(`halted` says why) until reset. Nothing non-finite leaves it.
"""
from __future__ import annotations

import math

import numpy as np

import dynamics_node as dn
from ..errors import DynamicsError, clip
from .params import ConfigError

ROOT_Q = ("root.x", "root.y", "root.z", "root.qx", "root.qy", "root.qz", "root.qw")


def _names(items, limit=200):
    s = ", ".join(items)
    return s if len(s) <= limit else s[:limit] + f" ... ({len(items)} in all)"


def check_simulation(cfg, model) -> None:
    """The simulation parameters against a model, only with simulation on (ConfigError naming them)."""
    if not cfg.simulation:
        return
    if model.loop_joints:
        raise ConfigError(f"simulation: the model has loop joints ({_names(model.loop_joints)}); the simulated "
                          "robot is for trees (fixed or floating base)")
    multi = [j for j in model.joint_names if len(range(*model.q_slice(j).indices(model.nq))) != 1
             or len(range(*model.v_slice(j).indices(model.nv))) != 1]
    if multi:
        raise ConfigError(f"simulation: joints with several coordinates ({_names(multi)}) cannot be published "
                          "as sensor_msgs/JointState")
    known = set(model.joint_names) | (set(ROOT_Q) if model.floating_base else set())
    for k, (name, _) in enumerate(cfg.simulation_initial_positions):
        if name not in known:
            raise ConfigError(f"simulation_initial_positions[{k}]: the model has no joint '{clip(name)}' (its "
                              f"joints: {_names(model.joint_names)}"
                              f"{'; the base: root.x .. root.qw' if model.floating_base else ''})")
    moving = set(moving_links(model))
    for k, link in enumerate(cfg.simulation_contact_links):
        if link not in model.link_names:
            raise ConfigError(f"simulation_contact_links[{k}]: the model has no link '{clip(link)}' (its links: "
                              f"{_names(model.link_names)})")
        if link not in moving:
            raise ConfigError(f"simulation_contact_links[{k}]: '{clip(link)}' is fixed to the world: a contact on "
                              "it can neither move nor be pushed")


def moving_links(model):
    return [lk for k, lk in enumerate(model.link_names) if model.link_body[k] >= 0]


def build_contacts(model, cfg):
    """The environment's dn.Contact list (module docstring)."""
    floor = cfg.simulation_floor
    if not floor:
        return []
    links = list(cfg.simulation_contact_links) or moving_links(model)
    pts = cfg.simulation_contact_points or (0.0,) * (3 * len(links))
    return [dn.Contact(lk, point=pts[3 * k:3 * k + 3], normal=floor[3:], friction=cfg.simulation_friction,
                       surface_point=floor[:3], stiffness=cfg.simulation_stiffness, damping=cfg.simulation_damping)
            for k, lk in enumerate(links)]


def effort_limits(model):
    """Per v index, the URDF <limit effort> (inf where none is given; the floating base: inf)."""
    lim = np.full(model.nv, np.inf)
    for j in model.joint_names:
        e = (model.joint_limits.get(j) or (0, 0, float("nan")))[2]
        if math.isfinite(e) and e > 0:
            lim[model.v_slice(j).start] = e
    return lim


class World:
    def __init__(self, st, cfg):
        m = st.model
        self.st, self.cfg, self.model = st, cfg, m
        self.dt_ns = max(1, int(round(1e9 / cfg.simulation_rate)))
        self.dt = self.dt_ns * 1e-9
        self.timeout_ns = int(round(cfg.simulation_command_timeout * 1e9))
        self.contacts = build_contacts(m, cfg)
        self.names = list(m.joint_names)
        self.jq = np.asarray([m.q_slice(j).start for j in self.names], dtype=np.intp)
        self.jv = np.asarray([m.v_slice(j).start for j in self.names], dtype=np.intp)
        self.index = {j: int(v) for j, v in zip(self.names, self.jv)}
        self.limit = effort_limits(m)
        # Float64MultiArray commands: command_joints (else every joint in the model's order); checked against
        # the model only with a command topic (model_state.build_state), so none without one
        self.command_names = (list(cfg.command_joints) or self.names) if cfg.effort_command_topic else []
        self.command_v = np.asarray([self.index[j] for j in self.command_names], dtype=np.intp)
        self.q0 = np.asarray(m.neutral(), dtype=float).copy()
        pos = {n: x for n, x in cfg.simulation_initial_positions}
        for j in self.names:
            if j in pos:
                self.q0[m.q_slice(j).start] = pos[j]
        if m.floating_base:
            for k, n in enumerate(ROOT_Q):
                if n in pos:
                    self.q0[k] = pos[n]
            quat = self.q0[3:7]
            norm = float(np.linalg.norm(quat))
            self.q0[3:7] = quat / norm if norm > 0 else (0.0, 0.0, 0.0, 1.0)
        self.t_ns = 0
        self.steps = 0
        self.cmd = np.zeros(m.nv)
        self.cmd_t = np.full(m.nv, -(1 << 62), dtype=np.int64)  # simulated time of each joint's command
        self.started = not cfg.simulation_wait_for_command
        self.reset()

    # ---------------------------------------------------------------- state
    def reset(self):
        """Back to the initial state at rest, surfaces undeformed (the simulated time goes on)."""
        self.q = self.q0.copy()
        self.qd = np.zeros(self.model.nv)
        self.surface = np.zeros((len(self.contacts), 3))
        self.forces = np.zeros((len(self.contacts), 3))
        self.halted = ""

    def take_over(self, old):
        """Continue from an older world when only what the motion does not start from changed (gravity,
        payloads, rate, commands' settings, the environment's constants): same joints and coordinates,
        same initial positions. Else this one starts from its initial state. The time always goes on."""
        self.t_ns, self.steps, self.started = old.t_ns, old.steps, old.started or self.started
        if (old.names == self.names and old.model.nq == self.model.nq and np.array_equal(old.q0, self.q0)
                and old.cfg.simulation_floor == self.cfg.simulation_floor):
            self.q, self.qd, self.halted = old.q.copy(), old.qd.copy(), old.halted
            if len(old.contacts) == len(self.contacts):
                self.surface, self.forces = old.surface.copy(), old.forces.copy()
            self.cmd[:], self.cmd_t[:] = old.cmd, old.cmd_t
        return self

    # ---------------------------------------------------------------- commands
    def command_array(self, data) -> str:
        """A Float64MultiArray's data in command_joints order; '' when taken, else why it was refused."""
        a = np.asarray(data, dtype=float).ravel()
        if a.size != self.command_v.size:
            return (f"effort command of {a.size} values refused: expected {self.command_v.size}, one per joint "
                    f"of command_joints in order ({_names(self.command_names, 120)})")
        if not np.isfinite(a).all():
            k = int(np.flatnonzero(~np.isfinite(a))[0])
            return f"effort command refused: data[{k}] ('{self.command_names[k]}') is {a[k]}"
        self.cmd[self.command_v] = a
        self.cmd_t[self.command_v] = self.t_ns
        self.started = True
        return ""

    def command_named(self, names, effort) -> str:
        """A JointState's efforts by name (joints the model does not have are ignored)."""
        e = np.asarray(effort, dtype=float).ravel()
        if e.size != len(names):
            return f"effort command refused: {len(names)} names but {e.size} efforts"
        idx = [(k, self.index[n]) for k, n in enumerate(names) if n in self.index]
        if not idx:
            return f"effort command refused: it names no joint of the model ({_names(list(names), 120) or 'none'})"
        if len({v for _, v in idx}) != len(idx):
            return "effort command refused: a joint is listed twice"
        src = np.asarray([k for k, _ in idx], dtype=np.intp)
        dst = np.asarray([v for _, v in idx], dtype=np.intp)
        if not np.isfinite(e[src]).all():
            k = int(src[np.flatnonzero(~np.isfinite(e[src]))[0]])
            return f"effort command refused: effort[{k}] ('{names[k]}') is {e[k]}"
        self.cmd[dst] = e[src]
        self.cmd_t[dst] = self.t_ns
        self.started = True
        return ""

    def effort(self) -> np.ndarray:
        """The efforts applied now: fresh commands clipped to the URDF effort limits, else zero."""
        fresh = (self.t_ns - self.cmd_t) <= self.timeout_ns
        return np.where(fresh, np.clip(self.cmd, -self.limit, self.limit), 0.0)

    # ---------------------------------------------------------------- the step
    def step(self) -> bool:
        """One step of dt (False, and nothing changed, while waiting for a command or halted)."""
        if not self.started or self.halted:
            return False
        try:
            r = dn.simulate_step(self.model, self.q, self.qd, self.effort(), self.contacts, self.dt,
                                 state=self.surface)
            ok = all(np.isfinite(x).all() for x in (r.q, r.qd, r.state, r.forces))
            why = "" if ok else "the state is not finite"
        except DynamicsError as e:  # InputError included (a value too large for the model)
            ok, why = False, f"{type(e).__name__}: {e}"
        if not ok:
            self.halted = clip(f"halted at t = {self.t_ns * 1e-9:.6f} s: {why}", 600)
            return False
        self.q, self.qd, self.surface, self.forces = r.q, r.qd, r.state, r.forces
        self.t_ns += self.dt_ns
        self.steps += 1
        return True

    def contact_points(self):
        """World positions (k x 3) of the contact points at q."""
        out = np.empty((len(self.contacts), 3))
        for k, c in enumerate(self.contacts):
            T = np.asarray(dn.link_pose(self.model, self.q, c.link))
            out[k] = T[:3, :3] @ c.point + T[:3, 3]
        return out

    def touching(self) -> int:
        return int(np.count_nonzero(np.any(self.forces != 0.0, axis=1)))
