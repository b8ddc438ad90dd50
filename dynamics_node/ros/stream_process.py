"""The joint-state stream in a process of its own, so that no service work can hold torques back.

Services and the stream in one interpreter share one GIL: rclpy converting a 100,000-point
trajectory request holds it for tens of milliseconds, and every joint state arriving meanwhile
waits. So the node (parameters, services, diagnostics) runs the stream (stream.Stream: joint
states in, gravity torques and effort commands out) in a child process with its own rclpy context,
node `<node name>_stream` and executor, every thread of it at the real-time priority of
`stream_thread_priority` (process.set_process_priority says why every thread).

The node sends the child, over a pipe, everything it needs to build the same model state
(the validated Config, the robot_description topic's text, the payloads, the resolved topic
names); the child loads the model itself (the same source gives the same model). A new model goes
first as a preview, before the node loads it itself (the node runs at services_nice: on a busy
machine its loading delayed the stream by up to seconds), then as the node's state of it. The node
logs "serving" and a model's lines only once the child is ready and has taken that state
(StreamProcess.when_applied). The child sends back, twice a second, what diagnostics show
(`Stream.report()`). The child ends when the node
says so or when the pipe closes (the node is gone, however it ended); the node restarts a child
that died, and reports it.

The child is a `python -c` of this module started with subprocess in a session of its own: a
Ctrl-C (or any signal to the node's process group, as `ros2 launch` sends it) reaches the node
alone, which then stops the child. A child in the node's group got SIGINT too, at any moment of its
start (multiprocessing's spawn cannot start a child with signals ignored), and printed tracebacks.
"""
from __future__ import annotations

import os
import threading
import time

REPORT_PERIOD = 0.5  # s


def child_main(fd, node_name, namespace, priority=""):
    """Entry point of the stream process (StreamProcess.start): the pipe is file descriptor fd;
    priority, when given, is stream_thread_priority, taken once the stream has subscribed."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the node ends it; SIGTERM (sent to it alone) kills it
    from multiprocessing.connection import Connection
    _child(Connection(int(fd)), node_name, namespace, int(priority) if priority else None)


def _child(conn, node_name, namespace, priority):
    """The stream process, in the order that gives the first torque soonest and says "ready" only
    when everything answers:
    1. rclpy, the stream's node and the loader's modules (model_state.warm_loader: no numba) while
       the node loads the robot, then the first state: load, the torque kernels, subscribe, spin.
       Gravity torques are published from here on;
    2. in a thread of its own (dn_warm, ordinary scheduling): numba and the kernels of the observer
       and model_terms (about a second, more on a busy machine), then the stream runs them from the
       next joint state on, and only then "ready" (the node logs "serving");
    3. meanwhile, from its first torques on, the thread that loads models (dn_pipe, ordinary) takes
       every later message of the node: a new state is loaded and warmed there while the stream
       keeps answering with the one it has, and handed over whole (a robot that arrives while
       numba loads is answered without waiting for it).
    A new model (a description from the topic, a model parameter) comes twice: first as a preview,
    which the node sends before it loads the model itself (StreamProcess.preview), so that loading it
    here does not wait for the node's own loading; then as the node's state of it, which finds it
    loaded and taken (StateLoader), or as the previous state when the node refused it."""
    import gc

    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    from .diagnostics import Timings
    from .model_state import StateLoader, warm_loader
    from .scheduling import ordinary_thread, set_process_priority
    from .stream import Stream
    from .stream_executor import StreamExecutor

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node(f"{node_name}_stream", namespace=namespace, use_global_arguments=False,
                start_parameter_services=False,
                parameter_overrides=[Parameter("start_type_description_service", value=False)])
    log = node.get_logger()
    executor = StreamExecutor(node, log)
    topics: dict = {}
    try:
        warm_loader()    # while the node loads the model (the state comes after)
    except Exception as e:  # noqa: BLE001 - the robot's own loading will say what fails
        log.warning(f"warming the model loader up: {type(e).__name__}: {e}")
    try:
        first = conn.recv()  # ("state", ...) before anything else
    except (EOFError, OSError):  # the node could not start (it said why) or ended meanwhile
        os._exit(0)
    send_lock = threading.Lock()

    def send(msg):
        with send_lock:
            try:
                conn.send(msg)
            except (OSError, ValueError):
                pass

    loader = StateLoader()
    apply_lock = threading.Lock()   # dn_pipe's states and dn_warm's turning the extras on: one at a time

    def on_applied(token):
        if token is not None:
            send(("applied", token))

    def take_priority(prio):
        why = set_process_priority(prio)
        send(("priority", prio, why))

    def apply(msg, first=False):
        kind = msg[0]
        if kind == "priority":
            take_priority(int(msg[1]))
        elif kind in ("state", "preview"):
            with apply_lock:
                take_state(msg, first)

    def take_state(msg, first):
        kind = msg[0]
        if kind == "state":
            _, seq, cfg, topic_text, payloads, resolved, changed = msg
            topics.update(resolved)
            try:
                st = loader.state(cfg, topic_text, payloads, changed)
            except Exception as e:  # noqa: BLE001 - the node checked it; say so if it still fails
                log.error(f"cannot build the model state: {type(e).__name__}: {e}")
                send(("error", f"{type(e).__name__}: {e}", seq))
                return
        else:
            _, cfg, topic_text, payloads, changed = msg
            seq = None
            try:
                st = loader.preview(cfg, topic_text, payloads, changed)
            except Exception:  # noqa: BLE001 - the node refuses it too, and says why
                return
        if st is not None:  # before the stream has it (at start, before it subscribes)
            warm_torques(st, cfg)
            if stream.extras:
                warm_extras(st, cfg)
        stream.configure(st, cfg, changed, now=first, token=seq)

    topics.update(first[5])  # resolved names, before the stream creates its publisher
    simulating = first[2].simulation  # simulation.py: this process runs the simulated robot instead
    if simulating:
        from .simulation import Simulation
        stream = Simulation(node, lambda name: topics.get(name, name), log)
        stream.extras = True
    else:
        stream = Stream(node, lambda name: topics.get(name, name), log)
        stream.timing = Timings()
        stream.terms.timing = Timings()
        stream.extras = False   # turned on by the thread below once their kernels are loaded
    stream.on_applied = on_applied
    stream.on_latest = lambda path: send(("latest", path))
    apply(first, first=True)
    if priority is not None:
        take_priority(priority)

    def load_extras():
        ordinary_thread("dn_warm")  # seconds of loading: never at real-time priority
        if not stream.extras:
            prewarm()
            with apply_lock:
                st, cfg = loader.current_state()
                if st is not None:
                    warm_extras(st, cfg)
                stream.extras = True
                if cfg is not None:   # else the first state failed: the stream has nothing to run them on
                    stream.configure(st, cfg, set())
            while cfg is not None and not stream.extras_running:   # until the stream runs them
                if executor.stopped or not node.context.ok():
                    return
                time.sleep(0.005)
        gc.freeze()  # what is loaded by now lives as long as the process (see below)
        send(("ready", os.getpid()))

    def receive():
        ordinary_thread("dn_pipe")  # it loads models: never at real-time priority
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = ("stop",)
            if msg[0] == "stop":   # the spinning thread ends and shuts down (no entity freed under its wait)
                executor.stop()
                return
            apply(msg)

    def report():
        while not executor.stopped:
            time.sleep(REPORT_PERIOD)
            try:
                send(("report", stream.report()))
            except Exception as e:  # noqa: BLE001 - a report must never stop the stream; said, not hidden
                log.error(f"stream report: {type(e).__name__}: {e}", throttle_duration_sec=10.0)

    threading.Thread(target=load_extras, name="stream_warm", daemon=True).start()
    threading.Thread(target=receive, name="stream_pipe", daemon=True).start()
    threading.Thread(target=report, name="stream_report", daemon=True).start()
    # Everything loaded by now lives as long as the process: out of the collector's reach, a full
    # collection no longer walks it (some 100 000 objects, about 50 ms inside a joint-state callback)
    gc.freeze()
    try:
        stream.run(executor) if simulating else executor.spin()
    except Exception:  # noqa: BLE001 - told to stop (or the node gone) while starting: a clean end
        if node.context.ok():
            raise
    finally:
        rclpy.try_shutdown()
        if stream.latest_writer is not None:
            stream.latest_writer.close()
        os._exit(0)


def prewarm():
    """Numba and the kernels of the momentum observer and its wrench (numba: about a second to
    import and load from its cache, more on a busy machine), loaded on a two-link model: the compiled
    code does not depend on the model, so warm_extras() on the robot finds it loaded. The stream
    process runs this after its first torques, in the thread that loads models."""
    import numpy as np

    import dynamics_node as dn
    from ..algorithms.estimation.observer import MomentumObserver, external_wrench, link_jacobian
    from .model_state import PREWARM_URDF
    try:
        m = dn.load_model(PREWARM_URDF)
        q = np.zeros(m.nq)
        MomentumObserver(m, 1.0).update(0.0, q, q, q)
        external_wrench(m, q, "b", q, J=link_jacobian(m, q, "b"))
    except Exception:  # noqa: BLE001 - warm_extras() on the robot will load what this could not
        pass


def warm(st, cfg):
    """Every kernel the stream will run on st (warm_torques, then warm_extras), loaded in the calling
    thread: no joint state ever waits for a kernel to load, and none is skipped for it."""
    warm_torques(st, cfg)
    warm_extras(st, cfg)


def warm_torques(st, cfg):
    """The kernels of st's torques: gravity (or closed-loop gravity), or the simulated robot's step
    on its environment (sim/world.py), run once."""
    import numpy as np

    from .stream import gravity_effort
    if cfg.simulation:
        from ..sim.world import World
        try:
            w = World(st, cfg)
            w.started = True  # even when it will wait for a command
            w.step()
        except Exception:  # noqa: BLE001 - the loop will say what fails
            pass
        return
    try:
        gravity_effort(st, np.asarray(st.model.neutral(), dtype=float))
    except Exception:  # noqa: BLE001 - a neutral pose need not close the loops
        pass


def warm_extras(st, cfg):
    """The kernels of the momentum observer and of the model_terms topic when they are on."""
    if cfg.simulation:
        return
    from .model_terms import warm as warm_terms
    from .stream_observer import warm as warm_observer
    warm_observer(st, cfg)
    warm_terms(st, cfg)


class StreamProcess:
    """The node's handle on the stream process: configure it, read its last report."""

    def __init__(self, node_name, namespace, logger):
        self.node_name, self.namespace, self.log = node_name, namespace, logger
        self.proc = None
        self.conn = None
        self.last = {}                 # the latest report
        self.last_at = None            # when it arrived (monotonic): its "age" is as of then
        self.last_state = None         # the latest ("state", ...) message, resent to a new child
        self.priority = None
        self.restarts = 0
        self.stopping = False
        self.ready = False
        self.ready_event = threading.Event()   # set at the child's "ready" (answering, every kernel loaded)
        self.error = ""
        self.seq = self.applied = 0
        self.failed = 0                # the latest state the child could not build (its "error")
        self._applied_cv = threading.Condition()
        self._when_applied: list = []  # [(seq, fn)] for when_applied
        self.on_latest = None          # called with a latest.LatestReader for each new shared merge
        self._lock = threading.Lock()

    def start(self):
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection
        ours, theirs = socket.socketpair()
        parent = Connection(ours.detach())
        fd = theirs.detach()
        self.conn = parent
        self.ready = False
        self.ready_event.clear()
        env = dict(os.environ)   # this very package, wherever it was imported from
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        code = "from dynamics_node.ros.stream_process import child_main; import sys; child_main(*sys.argv[1:])"
        prio = "" if self.priority is None else str(int(self.priority))  # taken once it has subscribed
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code, str(fd), self.node_name, self.namespace, prio],
                                         pass_fds=(fd,), start_new_session=True, env=env, stdin=subprocess.DEVNULL)
        finally:
            os.close(fd)
        if self.last_state is not None:  # a restart; else the node starts it before its first state
            self._send(self.last_state)
        threading.Thread(target=self._receive, args=(parent,), name="stream_reports", daemon=True).start()

    def _send(self, msg):
        with self._lock:
            try:
                self.conn.send(msg)
            except (OSError, ValueError, AttributeError):
                pass

    def _receive(self, conn):
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            if msg[0] == "applied":
                with self._applied_cv:
                    self.applied = max(self.applied, msg[1])
                    self._applied_cv.notify_all()
                self._run_when_applied()
            elif msg[0] == "latest":
                self._take_latest(msg[1])
            elif msg[0] == "ready":
                self.ready = True
                self.ready_event.set()
                self._run_when_applied()
            elif msg[0] == "report":
                self.last, self.last_at = msg[1], time.monotonic()
            elif msg[0] == "error":
                self.error = msg[1]
                self.failed = max(self.failed, msg[2])
                self._run_when_applied()
            elif msg[0] == "priority":
                _, prio, why = msg
                if why is None:
                    how = f"SCHED_FIFO priority {prio}" if prio else "ordinary scheduling"
                    self.log.info(f"joint-state stream process (every thread): {how}")
                else:
                    self.log.warning(f"joint-state stream process: cannot set SCHED_FIFO priority {prio} ({why}); it "
                                     "keeps ordinary scheduling, and other load on the machine shows in its latency")

    def _take_latest(self, path):
        from .latest import LatestReader
        try:
            reader = LatestReader(path)
        except (OSError, ValueError) as e:
            self.log.error(f"cannot map the stream's latest joint states ({path}): {e}")
            return
        if self.on_latest is not None:
            self.on_latest(reader)

    def configure(self, cfg, topic_text, payloads, resolved, changed, wait=2.0):
        """Send the stream a new state; once it runs, wait (up to `wait` s) until it has taken it,
        so that a service answer or a parameter change applies to every later joint state."""
        self.seq += 1
        self.last_state = ("state", self.seq, cfg, topic_text, dict(payloads), dict(resolved), set(changed))
        if self.proc is None:
            self.start()
            return
        self._send(self.last_state)
        if wait > 0 and self.ready and self.alive():
            with self._applied_cv:
                self._applied_cv.wait_for(lambda: self.applied >= self.seq, timeout=wait)

    def preview(self, cfg, topic_text, payloads, changed):
        """A model the node is about to load, handed to the stream before the node has loaded and
        checked it: the stream process loads it at once, beside the node's own loading, and switches
        to it when it loads and passes the same checks (keeping its model when not); the node's state
        of it follows (configure), or after a refusal the previous one (resend)."""
        self._send(("preview", cfg, topic_text, dict(payloads), set(changed)))

    def resend(self):
        """The latest state again, as no change (after a refused preview: the stream returns to it
        if it took that model; it has kept it loaded)."""
        if self.last_state is not None:
            self.seq += 1
            self.last_state = self.last_state[:1] + (self.seq,) + self.last_state[2:6] + (set(),)
            self._send(self.last_state)

    def when_applied(self, fn):
        """fn(error) once the stream process is ready and has taken the latest state sent (now, in
        this thread, when it has): error is None, or the child's reason when it could not build it.
        A restarted child takes that state again first."""
        with self._applied_cv:
            self._when_applied.append((self.seq, fn))
        self._run_when_applied()

    def _run_when_applied(self):
        due = []
        with self._applied_cv:
            keep = []
            for seq, fn in self._when_applied:
                if self.ready and self.applied >= seq:
                    due.append((fn, None))
                elif self.failed >= seq:
                    due.append((fn, self.error))
                else:
                    keep.append((seq, fn))
            self._when_applied = keep
        for fn, error in due:
            try:
                fn(error)
            except Exception as e:  # noqa: BLE001 - a log line must not end the reports' thread
                self.log.error(f"after the stream took a state: {type(e).__name__}: {e}")

    def set_priority(self, prio):
        self.priority = int(prio)
        self._send(("priority", self.priority))

    def restart(self):
        """A new child with the latest state (its mode, stream or simulated robot, is chosen when it
        starts: the node calls this when the simulation parameter changes)."""
        self.stop()
        self.stopping = False
        self.start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check(self):
        """Restart a child that died (called by the node's 1 Hz timer); True when it was dead."""
        if self.stopping or self.proc is None or self.alive():
            return False
        code = self.proc.returncode
        self.restarts += 1
        self.error = f"the joint-state process exited (code {code}); restarted ({self.restarts} so far)"
        self.log.error(self.error)
        self.last = {}
        self.start()
        return True

    def stop(self, timeout=0.3):
        """End the child: asked to stop when it runs, killed when it is still starting (it holds
        nothing yet) or does not stop within timeout."""
        self.stopping = True
        if self.proc is None:
            return
        import subprocess
        if self.ready:
            self._send(("stop",))
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.alive():
            self.proc.kill()
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                pass
