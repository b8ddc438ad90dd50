"""Scheduling of the stream process's threads: SCHED_FIFO for all of them but the ones that load
models (ordinary), with the OS thread names that `top -H` shows and the tests read."""
from __future__ import annotations

import errno
import os
import threading


ORDINARY_THREADS = ("dn_pipe", "dn_warm")  # OS names of the stream process's threads that stay ordinary


def ordinary_thread(name: str):
    """The calling thread: ordinary scheduling (always allowed) and the OS name `name` (one of
    ORDINARY_THREADS; shown by `top -H`, read by set_process_priority and the tests). For the stream
    process's threads that do heavy work that is not real-time (loading a model, warming kernels up:
    up to seconds of CPU): at SCHED_FIFO they would take a core from the rest of the machine,
    the node's own main process included, for as long."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write(name)
    except OSError:
        pass


def _thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _thread_ids():
    """This process's threads (Linux /proc), or the calling one where there is no /proc."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [threading.get_native_id()]


def _each_thread(tids, apply):
    """apply(tid) for every thread; None when done, else the first refusal's reason (a thread that
    ended meanwhile is no refusal)."""
    for tid in tids:
        try:
            apply(tid)
        except OSError as e:
            if os.path.exists(f"/proc/self/task/{tid}"):
                return e.strerror or str(e)
    return None


def set_process_priority(priority: int):
    """SCHED_FIFO at priority (1-99) for every thread of this process but the ordinary ones
    (ORDINARY_THREADS, ordinary_thread), or ordinary scheduling for 0; threads created later inherit
    it. Returns None when done, else why not (Linux only; needs
    CAP_SYS_NICE or an RLIMIT_RTPRIO of at least priority).

    For the stream process (stream_process.py), every thread, not only the one that runs the
    executor: a joint state passes Fast DDS's receive thread before the executor sees it, and a
    Python helper thread (the reports) holding the GIL at ordinary priority would hold the
    real-time thread back behind every busy process of the machine (priority inversion). The thread
    that loads models stays ordinary: it holds the GIL only while a configuration changes, when the
    stream waits for the new model anyway. `make bench` measures the
    latency (joint state published -> torques published) under service load: with only the executor
    thread at SCHED_FIFO its p99 is an order of magnitude above what it is with every thread
    (docs/performance.md), lower still once the stream's outputs lost their QoS-event handlers
    (stream_executor.output_events)."""
    param = os.sched_param(priority)
    try:
        policy = os.SCHED_FIFO if priority > 0 else os.SCHED_OTHER
    except AttributeError:
        return "this platform has no SCHED_FIFO"
    tids = [tid for tid in _thread_ids() if _thread_name(tid) not in ORDINARY_THREADS]
    return _each_thread(tids, lambda tid: os.sched_setscheduler(tid, policy, param))


def set_process_nice(nice: int):
    """Nice value `nice` for every thread of this process (threads created later inherit it) and,
    when this process leads its session, for the session's autogroup too. Returns None when done,
    else why not (lowering it needs CAP_SYS_NICE).

    For the node's main process, which answers the services: under CPU contention its work yields to
    the processes beside it, a controller first (the stream has a process of its own, stream_process.py).
    Linux's autogroup (sched_autogroup_enabled, for processes outside a cgroup of their own) shares
    the CPU between sessions before nice values count within one, so a node started in a session of
    its own (a terminal of its own, `setsid`) says its nice value to its autogroup as well; under
    `ros2 launch` it shares launch's session and leaves that group alone.
    bench/bench_stream.py measures the end-to-end p99 under service load (a never-sleeping client in
    another session) at nice 0 and with the autogroup at 19 (bench/README.md). What remains of that tail
    is not this node's doing: in bench_stream's controls the same load served by a
    second node gives the client the same p99, and the load processes' CPU bursts alone, without ROS
    and with no service called, double it (bench/README.md)."""
    why = _each_thread(_thread_ids(), lambda tid: os.setpriority(os.PRIO_PROCESS, tid, nice))
    if why is not None:
        return why
    try:
        if os.getsid(0) == os.getpid():
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))
    except OSError as e:  # no autogroup (kernel option), or lowering it
        if e.errno not in (errno.ENOENT, errno.EINVAL):  # nothing to set
            return e.strerror or str(e)
    return None
