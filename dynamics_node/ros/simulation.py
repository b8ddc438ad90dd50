"""The simulated robot (`simulation: true`): what the stream process runs instead of the
joint-state stream.

Why there: the stream process (stream_process.py) already has what a real-time loop needs: its own
interpreter (no service work of the node shares its GIL), SCHED_FIFO priority on every thread but
the model loader, a lean rcl wait set (stream_executor.py) and a thread that loads models and warms
kernels at ordinary priority. So in simulation mode its one real-time thread runs `Simulation.run`:
at absolute deadlines (CLOCK_MONOTONIC: Python's time.sleep is clock_nanosleep with an absolute
time on Linux) spaced 1/(simulation_rate x real_time_factor) s apart, it steps the world
(sim.world.World: dn.simulate_step; the commands, the physics and the shared latest state at every
step) and publishes joint_states_topic (every joint, position and velocity, stamped with the
simulated time) and /clock (from 0) together at simulation_publish_rate of simulated time (Schedule:
100 Hz by default, ros2_control's controller_manager's update_rate; at or above simulation_rate, every
step): to a subscriber each message costs a callback, and at real_time_factor 5 every 1 kHz step
published is 10,000 messages a wall-clock second that an rclpy client cannot take on a 2-core
machine without slowing the simulation it shares the cores with. Between two steps it serves its
entities through the same executor: the effort commands, configuration changes (a guard condition)
and ~/reset_simulation (at least once a period, however short: at real_time_factor 5 a period is
200 us). One thread owns the world, so no lock is needed. A step that starts more than one period
after its deadline is counted late and the schedule restarts from now (the simulated time then falls
behind the wall clock; no burst of catch-up steps).

The node in simulation mode does not compute gravity torques from joint states (it would hear its
own): the dynamics node that controls the simulated robot is another node (launch/sim.launch.py).
The simulated robot never publishes on the command topic; it subscribes to it with the type its
publishers use: std_msgs/Float64MultiArray (command_joints order, what the dynamics node sends)
unless only sensor_msgs/JointState publishers are there (by name), or only
trajectory_msgs/JointTrajectory ones (a joint_trajectory_controller's); the type is looked up in the
graph twice a second. What the values are (effort, position, velocity): sim/commands.py.

Also published: ~/contact_markers (visualization_msgs/MarkerArray at markers_rate while someone
subscribes: the box obstacles, each contact point near a surface, green while it touches, and its
force as an arrow of 2 mm per N)
and, for a floating base, ~/base_pose (geometry_msgs/PoseStamped, frame "world") and ~/base_twist
(geometry_msgs/TwistStamped, the root's linear and angular velocity in the root frame, the core's
convention): /joint_states carries the joints only.
"""
from __future__ import annotations

import time

import numpy as np

from .conversions import to_float64_array
from .diagnostics import Timings
from ..sim.world import World

SPIN_MARGIN_NS = 150_000      # wake from the wait set this long before a deadline, then sleep to it
GRAPH_PERIOD_NS = 500_000_000  # how often the command topic's publishers' type is looked up
FORCE_SCALE = 0.002            # m per N of the force arrows


class Simulation:
    """The simulation mode's entities and loop (module docstring); the interface stream_process.py
    uses of stream.Stream: configure, report, on_applied, on_latest, latest_writer."""

    def __init__(self, node, resolve, logger):
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock
        from std_srvs.srv import Trigger
        from visualization_msgs.msg import MarkerArray

        from .stream_executor import OUT_DEPTH, ConfigHandOff, output_events
        self.node, self.resolve, self.log = node, resolve, logger
        self.world = None
        self.cfg = None
        self.on_applied = self.on_latest = None
        self.latest_writer = None
        self._handoff = ConfigHandOff()
        self.qos = QoSProfile(depth=OUT_DEPTH, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.events = output_events
        self.pub_js = self.pub_pose = self.pub_twist = self.sub_cmd = None
        self.cmd_topic = self.cmd_type = None
        self.pub_clock = node.create_publisher(Clock, resolve("/clock"), 10, event_callbacks=output_events())
        self.pub_markers = node.create_publisher(MarkerArray, resolve("~/contact_markers"), 5,
                                                 event_callbacks=output_events())
        self._clock = Clock()
        self._js = self._js_bytes = self._clock_bytes = None
        self._gc = node.create_guard_condition(self._apply_pending)
        node.create_service(Trigger, resolve("~/reset_simulation"), self._reset)
        self.step_time, self.lateness = Timings(), Timings()
        self.late = self.errors = self.commands = self.refused = self.published = 0
        self.schedule = Schedule()
        self.last_error = self.last_refusal = ""
        self._graph_at = self._markers_at = 0
        self._rate_mark = None     # (wall ns, simulated ns, steps) at the previous report

    # -------------------------------------------------------------- configuration (any thread)
    def configure(self, st, cfg, changed, now=False, token=None):
        self._handoff.put(st, cfg, changed, token)
        if now:
            self._apply_pending()
        else:
            self._gc.trigger()

    def _apply_pending(self):
        pending = self._handoff.take()
        if pending is None:
            return
        st, cfg, changed, token = pending
        try:
            old = self.world
            world = World(st, cfg) if st is not None else None
            if world is not None and old is not None:
                world.take_over(old)
            if world is not None and (old is None or old.names != world.names):
                self._share(world.names)
            for note in (world.notes if world is not None else ()):
                self.log.warning(f"simulation: {note}")
            self._topics(cfg, world, changed)
            self.world, self.cfg = world, cfg
        except Exception as e:  # noqa: BLE001 - a bad configuration must not end the loop
            self.errors += 1
            self.last_error = f"configuration: {type(e).__name__}: {e}"
            self.log.error(f"simulation: {self.last_error}")
        if self.on_applied is not None:
            self.on_applied(token)

    def _share(self, names):
        """A shared-memory merge (latest.py) for the node's gravity_compensation with an empty position,
        its markers and limit check: the simulated joints, written at every step."""
        old, self.latest_writer = self.latest_writer, None
        if old is not None:
            old.close()
        if self.on_latest is None:
            return
        from .latest import LatestWriter
        self.latest_writer = LatestWriter(names)
        self.on_latest(self.latest_writer.path)

    def _topics(self, cfg, world, changed):
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from sensor_msgs.msg import JointState
        node, ev = self.node, self.events
        if self.pub_js is None or "joint_states_topic" in changed:
            old, self.pub_js = self.pub_js, node.create_publisher(JointState, self.resolve(cfg.joint_states_topic),
                                                                  self.qos, event_callbacks=ev())
            if old is not None:
                node.destroy_publisher(old)
        self._js = self._js_bytes = None
        floating = world is not None and world.model.floating_base
        if floating and self.pub_pose is None:
            self.pub_pose = node.create_publisher(PoseStamped, self.resolve("~/base_pose"), self.qos,
                                                  event_callbacks=ev())
            self.pub_twist = node.create_publisher(TwistStamped, self.resolve("~/base_twist"), self.qos,
                                                   event_callbacks=ev())
        topic = self.resolve(cfg.effort_command_topic) if cfg.effort_command_topic else None
        if topic != self.cmd_topic:
            self.cmd_topic = topic
            self._subscribe(self._command_type())

    def _command_type(self):
        """Float64MultiArray unless the command topic's publishers all send JointState, or all
        trajectory_msgs/JointTrajectory (a joint_trajectory_controller's topic)."""
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory
        if self.cmd_topic is None:
            return None
        types = {i.topic_type for i in self.node.get_publishers_info_by_topic(self.cmd_topic)}
        if types == {"trajectory_msgs/msg/JointTrajectory"}:
            return JointTrajectory
        return JointState if types == {"sensor_msgs/msg/JointState"} else Float64MultiArray

    def _subscribe(self, msg_type):
        from rclpy.event_handler import SubscriptionEventCallbacks
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        old, self.sub_cmd, self.cmd_type = self.sub_cmd, None, msg_type
        if old is not None:
            self.node.destroy_subscription(old)
        if msg_type is None:
            return
        # best effort hears reliable and best-effort publishers alike (stream.py says why)
        self.sub_cmd = self.node.create_subscription(
            msg_type, self.cmd_topic, self._on_command, QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT),
            event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False))
        mode = self.cfg.simulation_command_interface if self.cfg else "effort"
        self.log.info(f"simulation: {mode} commands from {self.cmd_topic} as {msg_type.__module__.split('.')[0]}/"
                      f"{msg_type.__name__}")

    # -------------------------------------------------------------- commands and services (loop thread)
    def _on_command(self, msg):
        w = self.world
        if w is None:
            return
        self.commands += 1
        if hasattr(msg, "data"):
            why = w.command_array(msg.data)
        elif hasattr(msg, "points"):
            why = w.command_trajectory(list(msg.joint_names), [
                (p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec, list(p.positions), list(p.velocities))
                for p in msg.points], msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec)
        else:
            why = w.command_named(list(msg.name), getattr(msg, w.commands.mode))
        if why:
            self.refused += 1
            self.last_refusal = why
            self.log.warning(f"simulation: {why}", throttle_duration_sec=2.0)

    def _reset(self, _req, res):
        w = self.world
        if w is None:
            res.success, res.message = False, "no model yet"
            return res
        w.reset()
        w.started = not w.cfg.simulation_wait_for_command
        res.success = True
        res.message = f"simulation reset to its initial state at t = {w.t_ns * 1e-9:.6f} s (the clock goes on)"
        self.log.info(res.message)
        return res

    # -------------------------------------------------------------- the loop
    def run(self, executor):
        """Step and publish at absolute deadlines until executor.stop() (the stream process's pipe says
        stop, or closes) or the context is shut down (module docstring)."""
        ctx = self.node.context
        deadline = time.monotonic_ns()
        while ctx.ok() and not executor.stopped:
            try:
                spun = False
                while True:  # commands, configuration and services until just before the deadline, and at
                    rest = deadline - time.monotonic_ns()  # least once a period however short it is
                    if rest <= SPIN_MARGIN_NS and spun:
                        break
                    executor.spin_once(max(0, rest - SPIN_MARGIN_NS))
                    spun = True
                    if executor.stopped or not ctx.ok():
                        return
                rest = deadline - time.monotonic_ns()
                if rest > 0:
                    time.sleep(rest * 1e-9)
                t0 = time.monotonic_ns()
                w = self.world
                if w is None:  # no model yet
                    deadline = t0 + 100_000_000
                    continue
                self._tick(w, t0)
                t1 = time.monotonic_ns()
                self.step_time.add((t1 - t0) * 1e-9)
                self.lateness.add(max(0, t0 - deadline) * 1e-9)
                period = int(w.dt_ns / self.cfg.real_time_factor)
                if t0 - deadline > period:  # missed a whole period: start the schedule again from now
                    self.late += 1
                    deadline = t1 + period
                else:
                    deadline += period
                if t1 - self._graph_at > GRAPH_PERIOD_NS:
                    self._graph_at = t1
                    self._check_command_type()
            except Exception as e:  # noqa: BLE001 - logged and counted, never the end of the loop
                if executor.stopped or not ctx.ok():
                    return
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {e}"
                self.log.error(f"simulation: {self.last_error}"[:500], throttle_duration_sec=2.0)
                deadline = time.monotonic_ns() + 1_000_000

    def _check_command_type(self):
        want = self._command_type()
        if want is not self.cmd_type:
            self._subscribe(want)

    def _tick(self, w, now_ns):
        """One step: the physics and the commands' effect at every call; the state published when the
        schedule says (simulation_publish_rate)."""
        if w.step() is False and w.halted and not getattr(w, "_said", False):
            w._said = True
            self.errors += 1
            self.last_error = w.halted
            self.log.error(f"simulation {w.halted}; ~/reset_simulation or a parameter change starts it again")
        if self.latest_writer is not None:
            self.latest_writer.write(w.q[w.jq], np.full(len(w.names), now_ns * 1e-9))
        t = w.t_ns
        if self.schedule.due(t, w.dt_ns, self.cfg.simulation_publish_rate):
            self._publish(w, t)
        rate = self.cfg.markers_rate
        if rate > 0 and now_ns - self._markers_at > 1e9 / rate and self.pub_markers.get_subscription_count():
            self._markers_at = now_ns
            self.pub_markers.publish(contact_markers(w, self._stamp(t)))

    def _stamp(self, t):
        """The Clock message's time set to t ns (the message kept for the fallback path), returned."""
        c = self._clock.clock
        c.sec, c.nanosec = divmod(t, 1_000_000_000)
        return c

    def _publish(self, w, t):
        """/clock and joint_states_topic (and a floating base's pose and twist) at the simulated time t."""
        self.published += 1
        stamp = self._stamp(t)
        sec, nsec = stamp.sec, stamp.nanosec
        if self._clock_bytes is None:
            from rosgraph_msgs.msg import Clock
            t0 = Clock()
            self._clock_bytes = Patched(t0, {"sec": (t0.clock, "sec", None), "nanosec": (t0.clock, "nanosec", None)})
        self._clock_bytes.publish(self.pub_clock, self._clock, sec=sec, nanosec=nsec)
        js = self._js
        if js is None:
            from sensor_msgs.msg import JointState
            js, t0 = JointState(), JointState()  # the message itself, and the bytes' template
            js.name = t0.name = list(w.names)
            n, h = len(w.names), t0.header.stamp
            self._js_bytes = Patched(t0, {"sec": (h, "sec", None), "nanosec": (h, "nanosec", None),
                                          "position": (t0, "position", n), "velocity": (t0, "velocity", n)})
            self._js = js
        if self._js_bytes.ok:
            self._js_bytes.publish(self.pub_js, None, sec=sec, nanosec=nsec, position=w.q[w.jq],
                                   velocity=w.qd[w.jv])
        else:
            js.header.stamp = stamp
            js.position = to_float64_array(w.q[w.jq])
            js.velocity = to_float64_array(w.qd[w.jv])
            self.pub_js.publish(js)
        if w.model.floating_base and self.pub_pose is not None:
            self._base(w, stamp)

    def _base(self, w, stamp):
        from geometry_msgs.msg import PoseStamped, TwistStamped
        p = PoseStamped()
        p.header.stamp, p.header.frame_id = stamp, "world"
        q = w.q
        p.pose.position.x, p.pose.position.y, p.pose.position.z = (float(x) for x in q[:3])
        o = p.pose.orientation
        o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
        self.pub_pose.publish(p)
        tw = TwistStamped()
        tw.header.stamp, tw.header.frame_id = stamp, w.model.root_link
        v = w.qd
        tw.twist.linear.x, tw.twist.linear.y, tw.twist.linear.z = (float(x) for x in v[:3])
        tw.twist.angular.x, tw.twist.angular.y, tw.twist.angular.z = (float(x) for x in v[3:6])
        self.pub_twist.publish(tw)

    # -------------------------------------------------------------- report (any thread)
    def report(self) -> dict:
        w, now = self.world, time.monotonic_ns()
        sim = {"running": False}
        if w is not None:
            mark, self._rate_mark = self._rate_mark, (now, w.t_ns, w.steps)
            rate = rtf = None
            if mark is not None and now > mark[0]:
                rate = (w.steps - mark[2]) / ((now - mark[0]) * 1e-9)
                rtf = (w.t_ns - mark[1]) / (now - mark[0])
            sim = {"running": w.started and not w.halted, "waiting": not w.started, "halted": w.halted,
                   "wall": now * 1e-9,  # CLOCK_MONOTONIC of this report: rates over reports are exact
                   "time": w.t_ns * 1e-9, "steps": w.steps, "rate_hz": rate, "real_time_factor": rtf,
                   "target_rate_hz": self.cfg.simulation_rate * self.cfg.real_time_factor,
                   "publish_rate_hz": self.cfg.simulation_publish_rate, "published": self.published,
                   "late": self.late, "contacts": w.env.count, "touching": w.touching(),
                   "collision_points": w.env.npoints, "obstacles": len(w.env.boxes),
                   "over_velocity_limit": ", ".join(w.over_velocity()), "clipped": w.commands.clipped,
                   "last_clip": w.commands.last_clip, "command_interface": w.commands.mode,
                   "at_limit": ", ".join(n for n, v in zip(w.names, w.jv) if w.limit_tau[v] != 0.0),
                   "commands": self.commands, "refused": self.refused, "last_refusal": self.last_refusal,
                   "command_topic": self.cmd_topic or "", "command_type": getattr(self.cmd_type, "__name__", ""),
                   "step_us": self.step_time.totals_us(), "lateness_us": self.lateness.totals_us(),
                   "step_recent_us": self.step_time.percentiles_us()}  # the last 2000 steps: p50 p95 p99 max
        return {"simulation": sim, "errors": self.errors, "last_error": self.last_error}


class Schedule:
    """When the state is published (simulation_publish_rate): at the first step at or after each
    multiple of the period (1/rate s of simulated time, in integer ns; the first step published too),
    so the stamps are the multiples themselves when the period is a whole number of steps; and,
    while the simulated time stands still (waiting for the first command, halted), once every period's
    worth of steps, so that a subscriber that comes then still hears the state. A rate at or above the
    step's: every step. A simulated time that goes back (a new world) is published at once."""

    def __init__(self):
        self.next_ns = 0      # the next multiple of the period
        self.last_ns = None   # the simulated time last published
        self.prev_ns = None   # the simulated time of the previous step
        self.idle = 0         # steps since the last publication

    def due(self, t_ns, dt_ns, rate) -> bool:
        period = max(1, int(round(1e9 / rate)))
        still, self.prev_ns = t_ns == self.prev_ns, t_ns
        self.idle += 1
        if self.last_ns is not None and t_ns >= self.last_ns:
            if still and self.idle < max(1, int(round(period / dt_ns))):
                return False
            if not still and t_ns < self.next_ns:
                return False
        self.last_ns, self.idle, self.next_ns = t_ns, 0, (t_ns // period + 1) * period
        return True


class Patched:
    """A message published as its serialized bytes (rclpy publishes bytes as they are) with some fields
    written into them in place at each publish: what rclpy's conversion of a JointState costs (its names
    converted again at each message) is spent once. The fields' places are found by serializing the
    message once with a distinct sentinel in each (an int32 or uint32 field: a number; a float64 array:
    numbers); a field whose sentinel is not found exactly once, or an array whose entries are not 8 bytes
    apart, leaves `ok` False and publish() sends the message itself."""

    def __init__(self, msg, fields):
        """fields: {name: (object holding it, attribute, n)}: n None for an integer, else an array of n."""
        import struct

        from rclpy.serialization import serialize_message
        self.views, self.ok = {}, False
        sentinel = {}
        for k, (name, (obj, attr, n)) in enumerate(fields.items()):
            if n is not None:
                x = [1.0e6 + 0.123456789 * (k * 1000 + i + 1) for i in range(n)]
                setattr(obj, attr, x)
                sentinel[name] = ([struct.pack("<d", v) for v in x], "<f8", n)
            else:
                x = 0x2F00B1E5 + 97 * k
                setattr(obj, attr, x)
                sentinel[name] = ([struct.pack("<I", x)], "<u4", 1)
        self.buf = bytearray(serialize_message(msg))
        raw = bytes(self.buf)
        for name, (patterns, dtype, n) in sentinel.items():
            at = [raw.find(p) for p in patterns]
            if any(a < 0 or raw.count(p) != 1 for a, p in zip(at, patterns)) or \
                    any(b - a != 8 for a, b in zip(at, at[1:])):
                return
            self.views[name] = np.frombuffer(self.buf, dtype=dtype, count=n, offset=at[0]) if n else np.zeros(0)
        self.ok = True

    def publish(self, pub, msg, **values):
        """The bytes with these values written in (msg itself when not ok)."""
        if not self.ok:
            pub.publish(msg)
            return
        for name, v in values.items():
            self.views[name][:] = v
        pub.publish(bytes(self.buf))


def contact_markers(w, stamp):
    """Each contact point near a surface this step (sphere: green touching, grey apart) and its force
    (arrow), and the box obstacles (grey cubes), root-link frame."""
    from geometry_msgs.msg import Point
    from visualization_msgs.msg import Marker, MarkerArray
    out = MarkerArray()
    clear = Marker(action=Marker.DELETEALL)  # the points near a surface change from step to step
    clear.header.stamp, clear.header.frame_id = stamp, w.model.root_link
    out.markers.append(clear)
    for k, (c, h) in enumerate(w.env.boxes):
        b = Marker(ns="obstacles", id=k, type=Marker.CUBE, action=Marker.ADD)
        b.header.stamp, b.header.frame_id = stamp, w.model.root_link
        b.pose.position.x, b.pose.position.y, b.pose.position.z = (float(x) for x in c)
        b.pose.orientation.w = 1.0
        b.scale.x, b.scale.y, b.scale.z = (float(2 * x) for x in h)
        b.color.r, b.color.g, b.color.b, b.color.a = 0.55, 0.45, 0.35, 0.8
        out.markers.append(b)
    pts = w.env.world_points
    for k, (p, f) in enumerate(zip(pts, w.forces)):
        touching = bool(np.any(f != 0.0))
        s = Marker(ns="contact_points", id=k, type=Marker.SPHERE, action=Marker.ADD)
        s.header.stamp, s.header.frame_id = stamp, w.model.root_link
        s.pose.position.x, s.pose.position.y, s.pose.position.z = (float(x) for x in p)
        s.pose.orientation.w = 1.0
        s.scale.x = s.scale.y = s.scale.z = 0.03
        s.color.r, s.color.g, s.color.b, s.color.a = (0.1, 0.9, 0.1, 1.0) if touching else (0.6, 0.6, 0.6, 0.6)
        a = Marker(ns="contact_forces", id=k, type=Marker.ARROW, action=Marker.ADD if touching else Marker.DELETE)
        a.header = s.header
        a.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                    Point(x=float(p[0] + FORCE_SCALE * f[0]), y=float(p[1] + FORCE_SCALE * f[1]),
                          z=float(p[2] + FORCE_SCALE * f[2]))]
        a.pose.orientation.w = 1.0
        a.scale.x, a.scale.y, a.scale.z = 0.01, 0.02, 0.03
        a.color.r, a.color.g, a.color.b, a.color.a = 1.0, 0.2, 0.1, 1.0
        out.markers += [s, a]
    return out
