"""Calling a running dynamics_node's services from a tool (dynamics_cli, the payload recorder)."""
from __future__ import annotations

import os
import time


def _spin_until(node, future, timeout):
    import rclpy
    deadline = time.monotonic() + timeout
    while not future.done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=min(0.1, max(0.0, deadline - time.monotonic())))
    return future.done()


def call_service(node, path, srv_type, req, timeout):
    """Call a service and return the response; TimeoutError when there is none within timeout.

    Right after discovery, Fast DDS may drop the first response ("failed to send response
    (timeout)": the server has not matched the client's reply reader yet), so an unanswered
    request is sent again every second; every request this CLI sends is idempotent.
    """
    deadline = time.monotonic() + timeout
    client = node.create_client(srv_type, path)
    if not client.wait_for_service(timeout_sec=timeout):
        raise TimeoutError(f"service {path} not available within {timeout:g} s "
                           f"(is the node running with ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}?)")
    while True:
        fut = client.call_async(req)
        remaining = deadline - time.monotonic()
        if _spin_until(node, fut, max(0.05, min(1.0, remaining))):
            return fut.result()
        client.remove_pending_request(fut)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no answer from {path} within {timeout:g} s")
