"""The simulated robot's world (no rclpy): its environment, state, commands and step.

`World(st, cfg)` holds, for one model state, what `simulation: true` simulates (simulation.py runs it
at its rate and publishes it):
- the environment (sim/env.py): the floor plane `simulation_floor` (a point and a normal in the root
  link's frame, default z = 0, normal +z), the boxes of `simulation_obstacles`, and the collision
  points of the links (sim/shapes.py: their URDF <collision> shapes; else a point at each moving
  link's origin; or `simulation_contact_points`), soft contacts of Featherstone §11.8 with
  `simulation_friction`, `simulation_stiffness` and `simulation_damping` (dn.Contact);
- the joint limits (URDF <limit lower upper> of revolute and prismatic joints: hard constraints in
  joint space in dn.simulate_step, restitution `simulation_limit_restitution`);
- the model the step uses: the state's, with `simulation_default_damping` on joints without damping;
- the state q, qd (start: `simulation_initial_positions` by name, the rest at zero, at rest, inside
  the limits; a floating base at its neutral pose unless root.x .. root.qw are named), the surfaces'
  state, and the simulated time in integer nanoseconds (steps of 1/simulation_rate s);
- the commands (commands.py): efforts, or positions / velocities through a PD loop
  (`simulation_command_interface`), from a Float64MultiArray in command_joints order
  (`command_array`), a JointState by name (`command_named`) or a JointTrajectory
  (`command_trajectory`); effort and velocity commands older than `simulation_command_timeout`
  (simulated time) count as zero; efforts are clipped to the URDF <limit effort>, as a drive would;
- `step()`: one step of dn.simulate_step's law (semi-implicit Euler, the contact forces implicit,
  contacts and limits speculative; the model's `friction` option decides whether the URDF's damping and
  friction act): the selection of the pairs and the step in one call of the compiled kernel
  (sim/step.py through _fastcall.step_into, on buffers made once), or, for a model with mimic
  joints or without the C shim, env.select and dn.simulate_step (`step_python`, the same step in
  Python; also what names the problem of a step the kernel refuses).
`notes` are what the world says once (meshes as boxes, positions moved inside limits, ignored
<safety_controller>). A step that fails or whose result is not finite is not taken: the world halts
at its last finite state (`halted` says why) until reset. Nothing non-finite leaves it.
"""
from __future__ import annotations

import math

import numpy as np

import dynamics_node as dn
from .. import _fast
from ..errors import DynamicsError, clip
from ..errors import ConfigError

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
    n, ng = len(model.joint_names), len(cfg.simulation_pd_gains)
    if ng not in (0, 2, 2 * n):  # refused with the parameter, not later by the stream (commands.py)
        raise ConfigError(f"simulation_pd_gains: expected 0, 2 or {2 * n} values (kp kd for every joint, or per "
                          f"joint in the model's order {_names(model.joint_names)}), got {ng}")
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


def effort_limits(model):
    """Per v index, the URDF <limit effort> (inf where none is given; the floating base: inf)."""
    lim = np.full(model.nv, np.inf)
    for j in model.joint_names:
        e = (model.joint_limits.get(j) or (0, 0, float("nan")))[2]
        if math.isfinite(e) and e > 0:
            lim[model.v_slice(j).start] = e
    return lim


def limits_of(model, names):
    """nv x 2 [lower upper] of the revolute and prismatic joints' URDF <limit> (+-inf: none; continuous
    joints and the floating base have none); None when no joint has a limit."""
    lim = np.column_stack((np.full(model.nv, -np.inf), np.full(model.nv, np.inf)))
    for j in names:
        x = model.joint_limits.get(j)
        if x and model.joint_kinds.get(j) in ("revolute", "prismatic") and x[0] < x[1]:
            lim[model.v_slice(j).start] = x[:2]
    return lim if np.isfinite(lim).any() else None


def sim_model(model, cfg):
    """The model the world steps: simulation_default_damping on every joint whose model damping is zero
    (the model's friction law, core RNEA/ABA, then includes it); the model itself when 0."""
    b = cfg.simulation_default_damping
    if b <= 0.0:
        return model
    from ..model import Model, _copy_spec
    spec = model._spec
    damp = np.array(spec.damping, dtype=float)
    free = np.zeros(len(damp), dtype=bool)
    free[:6 if model.floating_base else 0] = True  # the floating base's coordinates are not a joint
    damp[(damp == 0.0) & ~free] = b
    return Model(_copy_spec(spec, damping=list(damp)))


class World:
    def __init__(self, st, cfg):
        from .commands import Commands
        from .env import Environment
        m = sim_model(st.model, cfg)
        self.st, self.cfg, self.model = st, cfg, m
        self.dt_ns = max(1, int(round(1e9 / cfg.simulation_rate)))
        self.dt = self.dt_ns * 1e-9
        self.names = list(m.joint_names)
        self.jq = np.asarray([m.q_slice(j).start for j in self.names], dtype=np.intp)
        self.jv = np.asarray([m.v_slice(j).start for j in self.names], dtype=np.intp)
        self.index = {j: int(v) for j, v in zip(self.names, self.jv)}
        self.limits = limits_of(m, self.names)
        if self.limits is not None:
            self.limits.flags.writeable = False  # checked once by simulate_step (joint_limits.limits_arg)
        self.notes = []
        from .shapes import shapes_of
        shapes = shapes_of(m, cfg)
        self.notes += shapes.notes
        self.env = Environment(m, cfg, shapes)
        self._kernel = self._buffers() if _fast.AVAILABLE and not m.has_mimic else None
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
        if self.limits is not None:
            for j, qi, v in zip(self.names, self.jq, self.jv):
                x = float(np.clip(self.q0[qi], *self.limits[v]))
                if x != self.q0[qi]:
                    self.notes.append(f"joint '{j}': initial position {self.q0[qi]:g} is beyond its <limit>; "
                                      f"starts at {x:g}")
                    self.q0[qi] = x
        root = m.xml_root
        for el in (root.findall("joint") if root is not None else []):
            if el.find("safety_controller") is not None:
                self.notes.append(f"joint '{el.get('name')}': <safety_controller> is read and ignored (the "
                                  "simulated robot enforces <limit> only)")
        self.commands = Commands(m, cfg, self.names, self.index, self.q0)
        self.command_names = self.commands.command_names
        self.command_v = self.commands.command_v
        self.limit = self.commands.effort
        self.t_ns = 0
        self.steps = 0
        self.started = not cfg.simulation_wait_for_command
        self._lazy = None  # (limit_tau, F, k): the kernel's outputs of the last step, until forces or limit_tau is read
        self.reset()

    @property
    def contacts(self):
        """The contacts of the last step (sim/env.py)."""
        return self.env.contacts

    # ---------------------------------------------------------------- state
    def reset(self):
        """Back to the initial state at rest, surfaces undeformed (the simulated time goes on)."""
        self.q = self.q0.copy()
        self.qd = np.zeros(self.model.nv)
        self.env.reset()
        self.forces = np.zeros((0, 3))
        self.limit_tau = np.zeros(self.model.nv)
        self.halted = ""

    def take_over(self, old):
        """Continue from an older world when only what the motion does not start from changed (gravity,
        payloads, rate, commands' settings, the environment's constants): same joints and coordinates,
        same initial positions. Else this one starts from its initial state. The time always goes on."""
        self.t_ns, self.steps, self.started = old.t_ns, old.steps, old.started or self.started
        if (old.names == self.names and old.model.nq == self.model.nq and np.array_equal(old.q0, self.q0)
                and old.cfg.simulation_floor == self.cfg.simulation_floor):
            self.q, self.qd, self.halted = old.q.copy(), old.qd.copy(), old.halted
            if old.env.state.shape == self.env.state.shape:
                self.env.state[:] = old.env.state
            c, o = self.commands, old.commands
            if c.mode == o.mode:
                c.cmd[:], c.cmd_t[:], c.traj = o.cmd, o.cmd_t, o.traj
                c.changed()
        return self

    # ---------------------------------------------------------------- commands
    def command_array(self, data) -> str:
        """A Float64MultiArray's data in command_joints order; '' when taken, else why it was refused."""
        why = self.commands.array(data, self.t_ns)
        self.started = self.started or not why
        return why

    def command_named(self, names, values) -> str:
        """A JointState's values by name (joints the model does not have are ignored)."""
        why = self.commands.named(names, values, self.t_ns)
        self.started = self.started or not why
        return why

    def command_trajectory(self, names, points, start_ns=0) -> str:
        """A JointTrajectory: [(time_from_start s, positions, velocities)], start_ns its header.stamp in
        simulated time (0: now) (commands.py)."""
        qv = np.zeros(self.model.nv)
        qv[self.jv] = self.q[self.jq]
        why = self.commands.trajectory(list(names), points, self.t_ns, start_ns, qv)
        self.started = self.started or not why
        return why

    def effort(self) -> np.ndarray:
        """The efforts applied now (commands.py): effort commands, or the PD loop's."""
        if self.commands.mode == "effort":  # the joints' positions and gravity are the PD loop's
            return self.commands.torque(None, self.qd, self.t_ns)
        qv = np.zeros(self.model.nv)
        qv[self.jv] = self.q[self.jq]
        g = np.asarray(dn.gravity(self.model, self.q))
        g[:6 if self.model.floating_base else 0] = 0.0  # nothing drives a floating base
        return self.commands.torque(qv, self.qd, self.t_ns, g)

    def over_velocity(self):
        """The joints over their URDF <limit velocity> now."""
        return self.commands.over_velocity(self.qd)

    # ---------------------------------------------------------------- the step
    def _buffers(self):
        """What the compiled step needs besides the state, made once: the kernel, the limits as one vector,
        its outputs but q and qd (which are new arrays at each step), a second state array and the
        scratch's sizes. The outputs the world hands out lazily (the forces, the limits' torques, the pairs'
        slots and points: `forces`, `limit_tau`, env.took_lazily) come in two sets used in turn, so that the
        last successful step's stay intact while the next step runs (and fails, maybe)."""
        from .select import env_kmax
        from .step import sim_step_c, step_scratch
        from ..layout import SE_MODE, SE_NBOX, SE_NPT, SE_NSPH, SIM_INFO_N
        e, nv = self.env.envi, self.model.nv
        k = env_kmax(int(e[SE_NPT]), int(e[SE_NSPH]), int(e[SE_NBOX]), int(e[SE_MODE]))
        lim = self.limits.reshape(-1).copy() if self.limits is not None else np.zeros(0)
        qdd = np.empty(nv)
        outs = [(np.empty(nv), np.empty(3 * k), np.empty(3 * k), np.zeros(SIM_INFO_N + k, dtype=np.int64))
                for _ in range(2)]
        nf, ni = step_scratch(self.model.nvt, k)
        return {"addr": sim_step_c.address, "lim": lim, "qdd": qdd,
                "state": np.empty_like(self.env.state).reshape(-1), "outs": outs, "next": 0,
                "fx": np.zeros(0), "info_n": SIM_INFO_N, "sizes": (nf, ni),
                "call": (sim_step_c.address, self.model, np.zeros(0), self.dt, self.env.envi, self.env.envf, lim,
                         qdd, nf, ni)}

    def _made(self):
        """The last step's forces and limit_tau as arrays of their own, if the kernel's buffers still hold them."""
        lz = self._lazy
        if lz is not None:
            self._lazy = None
            ltau, F, k = lz
            self._forces, self._limit_tau = F[:3 * k].reshape(k, 3).copy(), ltau.copy()

    @property
    def forces(self):
        """The contact forces of the last step (k x 3, world), one per pair of its problem."""
        self._made()
        return self._forces

    @forces.setter
    def forces(self, value):
        self._made()  # a pending step's limit_tau first, so that the two stay of the same step
        self._forces = value

    @property
    def limit_tau(self):
        """The joint limits' generalized force of the last step (nv)."""
        self._made()
        return self._limit_tau

    @limit_tau.setter
    def limit_tau(self, value):
        self._made()
        self._limit_tau = value

    def step(self) -> bool:
        """One step of dt (False, and nothing changed, while waiting for a command or halted)."""
        if not self.started or self.halted:
            return False
        b = self._kernel
        if b is not None:
            addr, m, fx, dt, envi, envf, lim, qdd, nf, ni = b["call"]
            env = self.env
            o = b["next"]
            ltau, F, P, info = b["outs"][o]
            q1, qd1, sout = np.empty(m.nq), np.empty(m.nv), b["state"]
            st = _fast.step_into(addr, m, self.q, self.qd, self.effort(), fx, dt, envi, envf, env.state.reshape(-1),
                                 lim, self.cfg.simulation_limit_restitution, True, q1, qd1, qdd, ltau, sout, F, P,
                                 info, nf, ni)
            if st == 0:
                k = int(info[0])
                env.took_lazily(self.q, info, b["info_n"], P, k)
                b["state"], env.state = env.state.reshape(-1), sout.reshape(-1, 3)
                self.q, self.qd = q1, qd1
                self._lazy = (ltau, F, k)
                b["next"] = 1 - o
                return self._advance()
        return self.step_python()  # also what names the problem of a step the kernel refused

    def step_python(self) -> bool:
        """step() by env.select and dn.simulate_step (module docstring)."""
        if not self.started or self.halted:
            return False
        try:
            contacts, state = self.env.select(self.q)
            r = dn.simulate_step(self.model, self.q, self.qd, self.effort(), contacts, self.dt, state=state,
                                 limits=self.limits, restitution=self.cfg.simulation_limit_restitution,
                                 speculative=True)
        except DynamicsError as e:  # InputError included (a step that would not be finite)
            self.halted = clip(f"halted at t = {self.t_ns * 1e-9:.6f} s: {type(e).__name__}: {e}", 600)
            return False
        self.q, self.qd, self.forces, self.limit_tau = r.q, r.qd, r.forces, r.limit_tau
        self.env.store(r.state)
        return self._advance()

    def _advance(self):
        self.t_ns += self.dt_ns
        self.steps += 1
        return True

    def contact_points(self):
        """World positions (n x 3) of every collision point (spheres: their centres) at q."""
        return self.env.points_at(self.q)

    def touching(self) -> int:
        return int(np.count_nonzero(np.any(self.forces != 0.0, axis=1)))
