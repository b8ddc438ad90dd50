"""Helpers of the node tests (test_node_*.py): start dynamics_node subprocesses, talk to them.

Isolation: every test process uses its own ROS_DOMAIN_ID (101..200, from its pid, moved on to the
next one where a participant of this host already uses it: domain_in_use), passed to the node
subprocesses, and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, so no DDS traffic leaves the host
and parallel runs do not see each other. Every wait is bounded; node processes are killed in
fixture teardown (and at exit, should a teardown not run).
"""
from __future__ import annotations

import atexit
import functools
import os
import pathlib
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
ARM7 = REPO / "urdf" / "arm7.urdf"
ERD = (pathlib.Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
       / "site-packages" / "cmeel.prefix" / "share" / "example-robot-data" / "robots")



def domain_in_use(domain: int) -> bool:
    """Whether a DDS participant on this host already uses `domain`: a UDP port of the domain's
    range bound (the RTPS default port mapping, Fast DDS's PortParameters: 7400 + 250 x domain for
    discovery, then discovery and user unicast ports 2 apart per participant, within 250), read from
    /proc/net/udp and udp6 (Linux; elsewhere: never in use)."""
    low = 7400 + 250 * domain
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            try:
                port = int(line.split()[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if low <= port < low + 250:
                return True
    return False


def _free_domain(first: int) -> int:
    """The first domain from `first` on (101..200, cyclically) that no participant of this host
    uses; `first` itself when all are taken. A node left running by hand on the domain a test run
    drew would otherwise answer the tests' calls in place of theirs."""
    for k in range(100):
        d = 101 + (first - 101 + k) % 100
        if not domain_in_use(d):
            return d
    return first


DOMAIN_ID = _free_domain(101 + os.getpid() % 100)
os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

START_TIMEOUT = 120.0    # a first start may compile the numba kernels into their cache
CALL_TIMEOUT = 60.0     # no answer this long is a hang, not a slow machine (latency is bench_node's)


def erd(rel: str) -> pathlib.Path:
    """A URDF of example-robot-data (test-only)."""
    return ERD / rel


def node_env() -> dict:
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(DOMAIN_ID)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("ROS_LOCALHOST_ONLY", None)
    return env


def _param_arg(name, value) -> str:
    if isinstance(value, bool):
        v = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        v = "[" + ",".join(repr(float(x)) if not isinstance(x, str) else x for x in value) + "]"
    else:
        v = str(value)
    return f"{name}:={v}"


_ALL_PROCS: list = []


class NodeProcess:
    """A dynamics_node subprocess with its own node name (services under /<name>/...).

    services_nice is 0 unless the test sets it. The node's default, 10, puts its main process and,
    in a session of its own as here, its autogroup at nice 10: beside two processes spinning at nice 0
    (make test-busy) it gets about a tenth of a core, and its start, its discovery of this process and
    its answers took minutes in some runs. A test of what the node answers is then decided by the
    scheduler; the deployment default is tested by test_services_nice_... and by the README's and
    launch's routes, which start the node with its defaults."""

    def __init__(self, name: str, params: dict, extra_args=(), ros_args=()):
        self.name = name
        self.params = {"services_nice": 0, **params}
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"{name}-", suffix=".log", delete=False)
        cmd = [sys.executable, "-m", "dynamics_node.ros", *extra_args, "--ros-args",
               "-r", f"__node:={name}", "--log-level", "info", *ros_args]
        for k, v in self.params.items():
            cmd += ["-p", _param_arg(k, v)]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, cwd=str(REPO), env=node_env(), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        _ALL_PROCS.append(self)

    def path(self, leaf: str) -> str:
        return f"/{self.name}/{leaf}"

    def output(self) -> str:
        try:
            with open(self.log.name) as f:
                return f.read()
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGINT, timeout=5.0):
        """Send sig, wait up to timeout; returns (returncode, seconds to exit). Kills on timeout."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None, time.monotonic() - t0
        return rc, time.monotonic() - t0

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


@atexit.register
def _kill_leftovers():
    for p in _ALL_PROCS:
        p.kill()


def _on_sigterm(signum, frame):
    """A test run stopped with SIGTERM (a CI timeout, `kill`) skips atexit: kill the nodes first,
    or their stream processes (SCHED_FIFO) keep running beside whatever runs next."""
    _kill_leftovers()
    os._exit(128 + signum)


if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
    signal.signal(signal.SIGTERM, _on_sigterm)


def run_node_once(params: dict, timeout=60.0, extra_args=()):
    """Run the node expecting it to exit by itself (bad start): returns (returncode, output)."""
    cmd = [sys.executable, "-m", "dynamics_node.ros", *extra_args, "--ros-args"]
    for k, v in params.items():
        cmd += ["-p", _param_arg(k, v)]
    p = subprocess.run(cmd, cwd=str(REPO), env=node_env(), capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


# ----------------------------------------------------------------------------------- client side
class RosClient:
    """One rclpy context + node for the whole test process, spun by a background thread."""

    def __init__(self):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        self.rclpy = rclpy
        self.context = Context()
        rclpy.init(context=self.context, domain_id=DOMAIN_ID,
                   signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(f"node_tests_{os.getpid()}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._clients = {}
        self._lock = threading.Lock()
        self._stop = False
        self._between_spins = queue.Queue()
        for name in ("destroy_subscription", "destroy_publisher", "destroy_client", "destroy_timer"):
            setattr(self.node, name, functools.partial(self._in_spin_thread, getattr(self.node, name)))
        self._made = []  # (destroy, entity) for every client, subscription and publisher made here
        self._made_lock = threading.Lock()   # not _lock: client() holds that while it creates one
        for kind in ("client", "subscription", "publisher"):
            setattr(self.node, f"create_{kind}", functools.partial(
                self._recorded, getattr(self.node, f"create_{kind}"), getattr(self.node, f"destroy_{kind}")))
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while not self._stop and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - shutdown races
                if self._stop:
                    return
            while not self._between_spins.empty():
                fn, args, out = self._between_spins.get()
                try:
                    out["value"] = fn(*args)
                except Exception as e:  # noqa: BLE001 - handed to the caller
                    out["error"] = e
                out["done"].set()

    def _in_spin_thread(self, fn, *args, timeout=60.0):
        """fn(*args) run by the spinning thread between two spin_once calls. rclpy's destroy_* called
        from another thread while the executor spins wait, holding the GIL, for the entity to be out of
        use by the executor, which needs the GIL to get there: a deadlock (rclpy issue 255 for the
        race; seen here as a test that hung in destroy_subscription on a busy machine)."""
        if threading.current_thread() is self.thread or not self.thread.is_alive():
            return fn(*args)
        out = {"done": threading.Event()}
        self._between_spins.put((fn, args, out))
        if not out["done"].wait(timeout):
            raise TimeoutError(f"{getattr(fn, '__name__', fn)} not run by the spinning thread within {timeout} s")
        if "error" in out:
            raise out["error"]
        return out.get("value")

    def _recorded(self, create, destroy, *args, **kw):
        entity = create(*args, **kw)
        with self._made_lock:
            self._made.append((destroy, entity))
        return entity

    def release(self):
        """Destroy every client, subscription and publisher made since the last release (conftest
        calls it after each test module). Each is an endpoint that every node process started later
        has to discover; kept for the whole run they grew to hundreds, and a node's discovery of the
        endpoints it needs grew slower with them (a service answered after 3.5 s beside 1000 idle
        clients, 0.5 s beside none). One a test destroyed already is skipped by rclpy."""
        with self._lock, self._made_lock:
            made, self._made = self._made, []
            self._clients.clear()
        for destroy, entity in reversed(made):
            try:
                destroy(entity)
            except Exception:  # noqa: BLE001 - destroyed already, or rclpy shutting down
                pass

    def client(self, srv_type, path):
        key = (srv_type, path)
        with self._lock:
            c = self._clients.get(key)
            if c is None:
                c = self.node.create_client(srv_type, path)
                self._clients[key] = c
        return c

    def wait_for_service(self, srv_type, path, timeout=START_TIMEOUT, proc: NodeProcess = None):
        c = self.client(srv_type, path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if c.service_is_ready():
                return c
            if proc is not None and not proc.alive():
                raise RuntimeError(f"node {proc.name} exited ({proc.proc.returncode}):\n{proc.output()}")
            time.sleep(0.02)
        raise TimeoutError(f"service {path} not ready within {timeout} s"
                           + (f"; node output:\n{proc.output()}" if proc else ""))

    def call(self, srv_type, path, request, timeout=CALL_TIMEOUT, retry=2.0):
        c = self.client(srv_type, path)
        if not c.service_is_ready():
            self.wait_for_service(srv_type, path, timeout)
        # Fast DDS may drop the first response after discovery ("failed to send response
        # (timeout)"): an unanswered request is sent again after `retry` s, then at doubling
        # intervals up to 8 s (all test requests are idempotent). The earlier ones stay pending
        # and the first answer to any is taken: on a busy machine (the services run at nice 10)
        # an answer may take longer than the interval, and dropping the request it answered left
        # the client waiting behind the node's queue of copies.
        deadline = time.monotonic() + timeout
        done = threading.Event()
        pending, interval = [], retry
        try:
            while True:
                fut = c.call_async(request)
                fut.add_done_callback(lambda _f: done.set())
                pending.append(fut)
                done.wait(max(0.05, min(interval, deadline - time.monotonic())))
                answered = next((f for f in pending if f.done()), None)
                if answered is not None:
                    return answered.result()
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"no answer from {path} within {timeout} s")
                interval = min(2.0 * interval, 8.0)
        finally:
            for f in pending:
                if not f.done():
                    c.remove_pending_request(f)

    def set_parameters(self, node_name, **values):
        """Set parameters one by one on /node_name; returns [(successful, reason)]."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter
        req = SetParameters.Request()
        req.parameters = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        res = self.call(SetParameters, f"/{node_name}/set_parameters", req)
        return [(r.successful, r.reason) for r in res.results]

    def get_parameter(self, node_name, name):
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python
        res = self.call(GetParameters, f"/{node_name}/get_parameters",
                        GetParameters.Request(names=[name]))
        return parameter_value_to_python(res.values[0])

    def subscribe(self, msg_type, topic, depth=1000, qos=None):
        """A queue.Queue that receives every message of topic."""
        q = queue.Queue()
        sub = self.node.create_subscription(msg_type, topic, q.put, qos or depth)
        return q, sub

    def publisher(self, msg_type, topic, depth=1000):
        return self.node.create_publisher(msg_type, topic, depth)

    def wait_for_subscriber(self, pub, timeout=60.0, count=1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pub.get_subscription_count() >= count:
                return
            time.sleep(0.02)
        raise TimeoutError(f"no subscriber on {pub.topic_name} within {timeout} s")

    def close(self):
        self._stop = True
        self.thread.join(timeout=2)
        try:
            self.executor.shutdown(timeout_sec=1.0)  # not left to its __del__ at interpreter exit
            self.node.destroy_node()
        finally:
            self.rclpy.try_shutdown(context=self.context)


_CLIENT = None


def ros() -> RosClient:
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = RosClient()
        atexit.register(_CLIENT.close)
    return _CLIENT


def serve_one(name: str, params: dict, **kw):
    """A module fixture's node: start it (start_nodes), yield it, stop it after the module.
    Use as `yield from ns.serve_one(NAME, {...})`."""
    procs = start_nodes({name: params}, **kw)
    try:
        yield procs[name]
    finally:
        for p in procs.values():
            p.stop()
            p.kill()


def start_nodes(specs: dict, service="inverse_dynamics", ros_args=()):
    """Start several nodes in parallel ({name: params}) and wait until each serves."""
    from dynamics_interfaces.srv import InverseDynamics
    procs = {name: NodeProcess(name, params, ros_args=ros_args) for name, params in specs.items()}
    client = ros()
    try:
        for name, p in procs.items():
            client.wait_for_service(InverseDynamics, p.path(service), proc=p)
    except Exception:
        for p in procs.values():
            p.kill()
        raise
    return procs


def joint_state(names, positions, velocities=None, stamp_ns=0, efforts=None):
    from sensor_msgs.msg import JointState
    m = JointState()
    m.header.stamp.sec = int(stamp_ns // 1_000_000_000)
    m.header.stamp.nanosec = int(stamp_ns % 1_000_000_000)
    m.name = list(names)
    m.position = [float(x) for x in positions]
    if velocities is not None:
        m.velocity = [float(x) for x in velocities]
    if efforts is not None:
        m.effort = [float(x) for x in efforts]
    return m


def stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def drain(q: "queue.Queue", timeout=0.0) -> list:
    """Everything in q now (waiting up to timeout for the first item)."""
    out = []
    try:
        out.append(q.get(timeout=timeout) if timeout > 0 else q.get_nowait())
        while True:
            out.append(q.get_nowait())
    except queue.Empty:
        pass
    return out


def collect(q: "queue.Queue", n: int, timeout: float) -> list:
    """Items of q until there are n or timeout seconds have passed."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += drain(q, timeout=0.05)
    return out


def core_available() -> bool:
    """True when the package is installed/importable; a broken core fails the tests, never skips them."""
    import importlib.util
    return importlib.util.find_spec("dynamics_node") is not None


def ros_available() -> bool:
    """True when rclpy and the built interfaces import. Under `make test` (DYNAMICS_REQUIRE_ROS=1,
    set by the Makefile, whose setup builds both) a failed import is an error, never a skip."""
    import os

    try:
        import rclpy  # noqa: F401
        import dynamics_interfaces.srv  # noqa: F401
        return True
    except Exception:  # noqa: BLE001
        if os.environ.get("DYNAMICS_REQUIRE_ROS") == "1":
            raise
        return False
