"""The `dynamics_node` process: executors and their threads, the stream thread's priority, signals,
and `main` (console script `dynamics_node [URDF] [--ros-args ...]`).

The node and its services node (node.py) each get a SingleThreadedExecutor in a thread of its own;
the main thread spins `dynamics_node` (parameters, timers, the robot_description topic). The
joint-state stream runs in a child process (stream_process.py).
SIGINT/SIGTERM stop the process cleanly (exit 0) in well under a second; a start that cannot
succeed prints one line naming the parameter, the value and what to do, and exits with 2.
"""
from __future__ import annotations

import os
import sys
import threading
import time

NODE_DOC = __doc__


def _spin_until_shutdown(executor, context, start=None):
    """executor.spin(), ending quietly at shutdown: when SIGINT/SIGTERM shut the context down
    while an executor is between two waits, rclpy raises RCLError ("context is not valid")
    instead of ExternalShutdownException. With `start` (an Event), only once it is set."""
    from rclpy.executors import ExternalShutdownException
    while start is not None and context.ok() and not start.wait(0.1):
        pass
    while context.ok():
        try:
            executor.spin_once()
        except (ExternalShutdownException, KeyboardInterrupt):
            return
        except Exception:  # noqa: BLE001 - only at shutdown; otherwise re-raised
            if context.ok():
                raise
            return


def spin_helpers(node):
    """Spin the node's services node in a daemon thread with its own executor (the joint-state
    stream has a process of its own: stream_process.py), from the node's "serving" on (node.serving).
    Returns [(executor, thread)]; the caller spins `node` itself (parameters, timers, the
    robot_description topic), from its start on."""
    from rclpy.executors import SingleThreadedExecutor
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node.service_node)
    thread = threading.Thread(target=_spin_until_shutdown, args=(executor, node.context, node.serving),
                              name="services", daemon=True)
    thread.start()
    return [(executor, thread)]


class _Signals:
    """SIGINT and SIGTERM, quietly, in every phase of the process (exit code 0, no traceback).

    rclpy's handlers (installed by rclpy.init) shut the context down and then call the Python
    handler that was there before them: this one. Before the node runs (imports, loading the model,
    waiting for the stream) there is nothing to close yet: the process ends at once (the stream
    process sees its pipe close and ends too). While it runs, rclpy's shutdown ends the executors and
    main() closes everything. Once stopping, a second signal changes nothing: `ros2 launch` without a
    terminal forwards Ctrl-C to a node that got it from the process group already, and a
    KeyboardInterrupt in the middle of the shutdown printed a traceback (and could leave the
    process to launch's SIGTERM)."""

    phase = "starting"

    @classmethod
    def install(cls):
        import signal
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, cls.handler)

    @classmethod
    def handler(cls, signum, frame):
        if cls.phase == "starting":
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(0)


def main(argv=None, fast_exit=True) -> int:
    """Run the node. Returns the exit code (2: cannot start). After a normal run it ends the process
    itself (os._exit(0) once every ROS entity is closed) unless fast_exit is False."""
    if fast_exit and threading.current_thread() is threading.main_thread():
        _Signals.phase = "starting"
        _Signals.install()
    argv = list(sys.argv if argv is None else argv)
    # Safe default on shared machines: no discovery traffic beyond this host unless asked for.
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from rclpy.utilities import remove_ros_args
    try:
        plain = remove_ros_args(args=argv)[1:]
    except Exception as e:   # rcl's parser: RCLInvalidROSArgsError, its message names the rule
        text = " ".join(str(e).split()).split(", at /")[0]
        print(f"dynamics_node: cannot start: bad ROS arguments: {text} (a list value whose items hold ':=' "
              "needs them quoted: -p \"xacro_args:=['prefix:=left_']\")", file=sys.stderr, flush=True)
        return 2
    if any(a in ("-h", "--help") for a in plain):
        from . import node as node_module
        from .params.node_params import help_text
        print(node_module.__doc__)
        print(help_text())
        return 0
    import rclpy
    from rclpy.exceptions import ParameterException
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from .node import DynamicsNode, StartupError

    rclpy.init(args=argv)
    node = None
    helpers = []
    try:
        try:
            node = DynamicsNode(urdf_path_default=plain[0] if plain else "")
        except StartupError as e:
            print(f"dynamics_node: cannot start: {e}", file=sys.stderr, flush=True)
            return 2
        except ParameterException as e:  # e.g. a parameter override of the wrong type or range
            text = " ".join(str(e).split())
            print(f"dynamics_node: cannot start: bad parameter: {text} (see dynamics_node --help)",
                  file=sys.stderr, flush=True)
            return 2
        # the main executor exists before the helpers start answering: a client's SIGTERM right
        # after its first answer must not find it half-built
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        helpers = spin_helpers(node)
        _Signals.phase = "running"
        _spin_until_shutdown(executor, node.context)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: BLE001
        # SIGINT/SIGTERM may shut the context down while entities or executors are still being
        # created (rclpy then raises RCLError 'context is not valid'): that is a clean stop
        if rclpy.ok():
            raise
    finally:
        _Signals.phase = "stopping"
        # let the helper threads leave rclpy before the nodes go (a thread still inside rcl at
        # interpreter exit aborts the process); one short budget for every join
        deadline = time.monotonic() + (0.3 if fast_exit else 2.0)
        if node is not None:  # try_shutdown destroys the context's nodes: within the same budget
            node.join_deadline = deadline
        rclpy.try_shutdown()
        for _, thread in helpers:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if node is not None:
            node.join_deadline = deadline
            try:
                node.destroy_node()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
    if fast_exit and node is not None:
        # Everything ROS is closed; the interpreter's own teardown (numba/LLVM finalisation)
        # would take another ~0.5 s, so leave now: SIGINT/SIGTERM stop the node well within 1 s.
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            rclpy.get_default_context().destroy()  # the DDS participant leaves the graph now
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
