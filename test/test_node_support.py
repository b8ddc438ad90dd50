"""The node tests' own isolation (node_support.py): a domain that a participant of this host
already uses is seen as taken, so that a node left running by hand cannot answer a test run's calls
(it did once: a stray arm7 node on the drawn domain made four launch and CLI tests fail)."""
from __future__ import annotations

import time

import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")


def test_a_domain_with_a_participant_is_in_use_and_free_again_after():
    import rclpy
    from rclpy.context import Context
    from rclpy.signals import SignalHandlerOptions
    domain = ns._free_domain(101 + (ns.DOMAIN_ID - 101 + 50) % 100)   # not this run's own
    assert domain != ns.DOMAIN_ID and not ns.domain_in_use(domain)
    c = Context()
    rclpy.init(context=c, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("isolation_probe", context=c)
    try:
        assert ns.domain_in_use(domain)
        assert ns._free_domain(domain) != domain     # a test run drawing it moves on
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=c)
    deadline = time.monotonic() + 5.0
    while ns.domain_in_use(domain) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ns.domain_in_use(domain)


def test_this_run_uses_the_domain_it_drew():
    import os
    assert os.environ["ROS_DOMAIN_ID"] == str(ns.DOMAIN_ID) and 101 <= ns.DOMAIN_ID <= 200
    assert ns.node_env()["ROS_DOMAIN_ID"] == str(ns.DOMAIN_ID)
