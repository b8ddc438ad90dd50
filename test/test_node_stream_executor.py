"""The stream process's executor (ros/stream_executor.py), in-process with a real rcl context: it serves
subscriptions (every waiting message in one wake-up), services, timers and guard conditions of its
node, entities created by callbacks are seen at the next wait, an exception in a callback is logged
and counted without ending the loop, and shutting the context down from another thread ends spin()."""
from __future__ import annotations

import threading
import time

import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")


@pytest.fixture()
def ctx():
    import rclpy
    from rclpy.context import Context
    from rclpy.signals import SignalHandlerOptions
    c = Context()
    rclpy.init(context=c, domain_id=ns.DOMAIN_ID, signal_handler_options=SignalHandlerOptions.NO)
    yield c
    rclpy.try_shutdown(context=c)


class Log:
    def __init__(self):
        self.errors = []

    def error(self, text, **_kw):
        self.errors.append(text)


def test_it_serves_every_kind_of_entity_and_survives_a_failing_callback(ctx):
    import rclpy
    from std_msgs.msg import Int64
    from std_srvs.srv import Trigger

    from dynamics_node.ros.stream_executor import StreamExecutor
    node = rclpy.create_node(f"exec_test_{id(ctx)}", context=ctx)
    got, ticks, guards, calls = [], [], [], []
    topic = f"/exec_test_{id(ctx)}/numbers"
    node.create_subscription(Int64, topic, lambda m: got.append(m.data) if m.data != 13 else 1 / 0, 100)
    pub = node.create_publisher(Int64, topic, 100)
    node.create_timer(0.01, lambda: ticks.append(1))
    gc = node.create_guard_condition(lambda: guards.append(1))

    def serve(req, res):
        calls.append(1)
        res.success, res.message = True, "served"
        return res
    node.create_service(Trigger, f"/exec_test_{id(ctx)}/trigger", serve)
    log = Log()
    ex = StreamExecutor(node, log)

    # a client in a context of its own, spun by rclpy's executor in a thread
    cctx = rclpy.context.Context()
    rclpy.init(context=cctx, domain_id=ns.DOMAIN_ID, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    cnode = rclpy.create_node(f"exec_client_{id(ctx)}", context=cctx)
    client = cnode.create_client(Trigger, f"/exec_test_{id(ctx)}/trigger")
    cex = rclpy.executors.SingleThreadedExecutor(context=cctx)
    cex.add_node(cnode)
    stop = threading.Event()

    def spin_client():
        while not stop.is_set():
            cex.spin_once(timeout_sec=0.05)
    spinner = threading.Thread(target=spin_client, daemon=True)
    spinner.start()
    try:
        deadline = time.monotonic() + 10
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            ex.spin_once(50_000_000)
        for k in range(20):            # a burst, 13 among them fails in the callback
            pub.publish(Int64(data=k))
        gc.trigger()
        fut = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (len(got) == 19 and ticks and guards and calls):
            if fut is None and client.service_is_ready():
                fut = client.call_async(Trigger.Request())
            ex.spin_once(50_000_000)
        assert got == [k for k in range(20) if k != 13]
        assert ticks and guards == [1] and calls
        assert ex.errors == 1 and "ZeroDivisionError" in log.errors[0]
        # an entity created by a callback is served from the next wait
        more = []
        node.create_subscription(Int64, topic + "_more", more.append, 10)
        pub2 = node.create_publisher(Int64, topic + "_more", 10)
        deadline = time.monotonic() + 10
        while not more and time.monotonic() < deadline:
            pub2.publish(Int64(data=7))
            ex.spin_once(50_000_000)
        assert [m.data for m in more][:1] == [7]
    finally:
        stop.set()
        spinner.join(5.0)
        cnode.destroy_node()
        rclpy.try_shutdown(context=cctx)

    # shutting the context down from another thread ends spin() at once (not at the next timeout)
    done = threading.Event()
    t = threading.Thread(target=lambda: (ex.spin(), done.set()), daemon=True)
    t.start()
    time.sleep(0.1)
    rclpy.try_shutdown(context=ctx)
    assert done.wait(30.0)   # not a timing: spin() would wait forever if the shutdown went unnoticed
    ex.destroy()
    node.destroy_node()


def test_config_hand_off_merges_what_is_not_yet_applied_and_gives_it_once():
    from dynamics_node.ros.stream_executor import ConfigHandOff
    h = ConfigHandOff()
    assert h.take() is None
    h.put("state 1", "config 1", {"gravity"}, token=1)
    h.put("state 2", "config 2", ["urdf_path"], token=2)   # before the stream's thread took the first
    assert h.take() == ("state 2", "config 2", {"gravity", "urdf_path"}, 2)
    assert h.take() is None                                  # once
    h.put("state 3", "config 3", set())
    assert h.take() == ("state 3", "config 3", set(), None)  # nothing of the earlier ones left


def test_config_hand_off_loses_no_key_under_concurrent_puts():
    from dynamics_node.ros.stream_executor import ConfigHandOff
    h, seen = ConfigHandOff(), set()
    keys = [f"k{i}" for i in range(4000)]

    def producer(part):
        for k in part:
            h.put(None, None, {k})

    threads = [threading.Thread(target=producer, args=(keys[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        got = h.take()
        if got is not None:
            seen |= got[2]
    for t in threads:
        t.join()
    got = h.take()
    seen |= got[2] if got else set()
    assert seen == set(keys)
