"""dynamics_cli's service call (cli/calls.py) against a server slower than its resend interval.

The CLI resends an unanswered request (Fast DDS may drop the first response after discovery). A
server that takes longer than the interval to answer (a long request, or the services at nice 10
on a busy machine) must still be heard: the first answer to any of the requests is taken, so the
call returns instead of discarding each answer that comes after its request was given up.
"""
from __future__ import annotations

import threading
import time

import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed")

SLOW_S = 2.5  # longer than the first two resend intervals (1 s, 2 s)


def test_a_server_slower_than_the_resend_interval_is_answered():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    from dynamics_node.cli.calls import call_service

    rclpy.init(domain_id=ns.DOMAIN_ID)  # the default context: call_service spins with rclpy.spin_once, as the CLI does
    ctx = rclpy.get_default_context()
    served = []
    closing = threading.Event()

    def slow(req, res):
        served.append(time.monotonic())
        if not closing.is_set():
            closing.wait(SLOW_S)
        res.success, res.message = True, f"answer {len(served)}"
        return res

    server = rclpy.create_node("slow_server", context=ctx)
    server.create_service(Trigger, "/calls_test/slow", slow)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(server)
    spinner = threading.Thread(target=ex.spin, daemon=True)
    spinner.start()
    client = rclpy.create_node("calls_test_client", context=ctx)
    try:
        res = call_service(client, "/calls_test/slow", Trigger, Trigger.Request(), timeout=120.0)
        assert res.success and res.message.startswith("answer "), res
        # resends at doubling intervals: a handful of copies, not one per second of the wait
        assert len(served) <= 8, f"{len(served)} requests served"
    finally:
        closing.set()             # the copies still queued answer at once; then the server stops
        ex.shutdown(timeout_sec=10)
        spinner.join(timeout=10)
        rclpy.shutdown(context=ctx)
