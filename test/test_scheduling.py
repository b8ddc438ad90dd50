"""dynamics_node.ros.scheduling in-process: the per-thread loop behind set_process_priority and
set_process_nice (a refusal named, a thread that ended meanwhile no refusal), and set_process_nice on
every thread of a process (in a child process, not a session leader: nice values cannot be
lowered again without CAP_SYS_NICE, and its autogroup is left alone)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from dynamics_node.ros import scheduling

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc needed")


def test_each_thread_names_the_first_refusal_and_skips_threads_that_ended():
    me = threading.get_native_id()
    gone = max(int(t) for t in os.listdir("/proc") if t.isdigit()) + 10_000_000  # no such thread

    def refuse(tid):
        raise PermissionError(1, "Operation not permitted")

    assert scheduling._each_thread([me], refuse) == "Operation not permitted"
    assert scheduling._each_thread([gone], refuse) is None
    seen = []
    assert scheduling._each_thread([me, gone], seen.append) is None
    assert seen == [me, gone]


def test_thread_ids_are_this_process_threads():
    ready, stop = threading.Event(), threading.Event()
    ids = {}

    def worker():
        ids["worker"] = threading.get_native_id()
        ready.set()
        stop.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    try:
        ready.wait(10)
        tids = scheduling._thread_ids()
        assert threading.get_native_id() in tids and ids["worker"] in tids
        assert sorted(tids) == sorted(int(x) for x in os.listdir("/proc/self/task"))
    finally:
        stop.set()
        t.join()


CHILD = r"""
import os, threading
from dynamics_node.ros import scheduling
stop = threading.Event()
threads = [threading.Thread(target=stop.wait, args=(10,)) for _ in range(3)]
for t in threads: t.start()
target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 3)   # raising it: always allowed
why = scheduling.set_process_nice(target)
late = threading.Thread(target=stop.wait, args=(10,)); late.start()   # created after: inherits
nices = []
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/stat") as f:
        nices.append(int(f.read().rsplit(")", 1)[1].split()[16]))
stop.set()
print(why, target, len(nices), sorted(set(nices)))
"""


def test_set_process_nice_reaches_every_thread_and_those_created_later():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    why, target, count, nices = out.stdout.split(maxsplit=3)
    assert why == "None"
    assert int(count) >= 5  # the main thread, three workers, the late one
    assert nices.strip() == f"[{target}]"
