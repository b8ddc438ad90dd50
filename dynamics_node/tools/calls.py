"""Calling a running dynamics_node's services from a tool (dynamics_cli, the payload recorder)."""
from __future__ import annotations

import os
import time


def _spin_until_one(node, futures, until):
    """Spin until one of `futures` is done (returns it) or until the monotonic time `until` (returns None)."""
    import rclpy
    while True:
        done = next((f for f in futures if f.done()), None)
        if done is not None or time.monotonic() >= until:
            return done
        rclpy.spin_once(node, timeout_sec=min(0.1, max(0.0, until - time.monotonic())))


def call_service(node, path, srv_type, req, timeout):
    """Call a service and return the response; TimeoutError when there is none within timeout.

    Right after discovery, Fast DDS may drop the first response ("failed to send response
    (timeout)": the server has not matched the client's reply reader yet), so an unanswered
    request is sent again after 1 s, then 2, 4 and every 8 s; every request this CLI sends is
    idempotent. The earlier requests stay pending and the first answer to any of them is taken:
    on a busy machine an answer can take longer than the resend interval, and dropping the
    request it answers would wait for ever behind the node's queue of copies.
    """
    deadline = time.monotonic() + timeout
    client = node.create_client(srv_type, path)
    if not client.wait_for_service(timeout_sec=timeout):
        raise TimeoutError(f"service {path} not available within {timeout:g} s "
                           f"(is the node running with ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}?)")
    pending, interval = [], 1.0
    try:
        while True:
            pending.append(client.call_async(req))
            done = _spin_until_one(node, pending, min(deadline, time.monotonic() + interval))
            if done is not None:
                return done.result()
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no answer from {path} within {timeout:g} s")
            interval = min(2.0 * interval, 8.0)
    finally:
        for f in pending:
            if not f.done():
                client.remove_pending_request(f)
