"""The stream process's executor: one rcl wait set over the stream node's few entities.

rclpy's SingleThreadedExecutor rebuilds its wait set in Python at every wake-up (an ExitStack, a
generator and a task per callback, every entity of every node walked): an rclpy node that only
echoes joint states costs its process more than twice the CPU per message that waiting on rcl's wait
set directly costs (bench/bench_stream.py, docs/performance.md). At 1 kHz the difference is a fifth of
a core, which on a two-core machine whose other core runs a busy controller is the margin between
torques on time and a queue.

So the stream node (and only it: the main node keeps rclpy's executors) is served by `StreamExecutor`:
its subscriptions, timers, guard conditions and services are put in one `rcl` wait set (rclpy's
own C binding, the calls its executor makes), and what is ready is run in this thread, in the
order subscriptions (every message waiting is taken, so a burst is drained in one wake-up),
services, timers, guard conditions. The entity lists are read from the node at each wake-up (a
few attribute reads), so entities created or destroyed by the callbacks themselves (a topic
change) are seen at the next wait; entities must only be created or destroyed in this thread
(stream.py hands topic changes to it through a guard condition for that reason). Waitables (QoS
event handlers) are not served: the stream's entities are created without them. Shutting the
context down (from any thread) wakes the wait and ends `spin`.

An exception escaping a callback is logged and counted (`errors`) and never ends the thread.
"""
from __future__ import annotations

import threading

from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

WAIT_NS = 200_000_000   # a bounded wait, so that a shut-down context is noticed without a signal
OUT_DEPTH = 1000        # history of the stream's reliable outputs (torques, observer): a second at 1 kHz


class StreamExecutor:
    def __init__(self, node, logger=None):
        self.node = node
        self.context = node.context
        self.log = logger or node.get_logger()
        self.errors = 0
        self._wake = GuardCondition(None, None, context=self.context)   # triggered at shutdown
        self.context.on_shutdown(self._wake.trigger)
        self._ws = (None, None)   # (entity counts, the wait set sized for them): reused while they hold
        self.stopped = False

    def _run(self, what, fn, *args):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - logged and counted, never the end of the thread
            self.errors += 1
            self.log.error(f"{what}: {type(e).__name__}: {e}"[:500], throttle_duration_sec=2.0)

    def spin_once(self, timeout_ns: int = WAIT_NS) -> None:
        """Wait for the node's entities once and run everything that is ready. The entities' rcl
        handles (and the context's) are held in use meanwhile, as rclpy's executors hold them: an
        entity destroyed by another thread, or by rclpy's shutdown, is freed once this returns, never
        under the wait."""
        node = self.node
        held = []

        def hold(entities):
            out = []
            for e in entities:
                try:
                    e.handle.__enter__()
                except _rclpy.InvalidHandle:   # destroyed since it was listed: not waited on
                    continue
                held.append(e.handle)
                out.append(e)
            return out
        try:
            self.context.handle.__enter__()
        except (_rclpy.InvalidHandle, AttributeError):
            return
        held.append(self.context.handle)
        try:
            subs, srvs, tmrs = hold(node.subscriptions), hold(node.services), hold(node.timers)
            gcs = hold(node.guards)
            wake = hold([self._wake])
            if not wake:
                return
            self._wait_and_run(subs, srvs, tmrs, gcs, timeout_ns)
        finally:
            for h in reversed(held):
                h.__exit__(None, None, None)

    def _wait_and_run(self, subs, srvs, tmrs, gcs, timeout_ns):
        counts = (len(subs), len(gcs), len(tmrs), len(srvs))
        sized, ws = self._ws
        if sized != counts:
            ws = _rclpy.WaitSet(len(subs), len(gcs) + 1, len(tmrs), 0, len(srvs), 0, self.context.handle)
            self._ws = (counts, ws)
        ws.clear_entities()
        for s in subs:
            ws.add_subscription(s.handle)
        for s in srvs:
            ws.add_service(s.handle)
        for t in tmrs:
            ws.add_timer(t.handle)
        for g in gcs:
            ws.add_guard_condition(g.handle)
        ws.add_guard_condition(self._wake.handle)
        ws.wait(timeout_ns)
        if self.stopped or not self.context.ok():
            return
        ready = ws.get_ready_entities("subscription")
        if ready:
            for s in subs:
                if s.handle.pointer in ready:
                    take = s.handle.take_message
                    while True:  # drain: every message waiting, in one wake-up
                        got = take(s.msg_type, s.raw)
                        if got is None:
                            break
                        self._run("subscription callback", s.callback, got[0])
        ready = ws.get_ready_entities("service")
        if ready:
            for s in srvs:
                if s.handle.pointer in ready:
                    request, header = s.handle.service_take_request(s.srv_type.Request)
                    if header is not None:
                        self._run("service callback", self._serve, s, request, header)
        ready = ws.get_ready_entities("timer")
        if ready:
            for t in tmrs:
                if t.handle.pointer in ready and t.handle.is_timer_ready():
                    t.handle.call_timer()
                    self._run("timer callback", t.callback)
        ready = ws.get_ready_entities("guard_condition")
        if ready:
            for g in gcs:
                if g.handle.pointer in ready and g.callback is not None:
                    self._run("guard condition callback", g.callback)

    @staticmethod
    def _serve(srv, request, header):
        response = srv.callback(request, srv.srv_type.Response())
        srv.send_response(response, header)

    def stop(self):
        """End spin() from any thread: at once, without shutting the context down under it (the
        thread that spins shuts it down afterwards, so no entity is destroyed during a wait)."""
        self.stopped = True
        try:
            self._wake.trigger()
        except Exception:  # noqa: BLE001 - already destroyed: spin has ended
            pass

    def spin(self) -> None:
        """Until stop(), or the context is shut down (rclpy.try_shutdown from another thread)."""
        while not self.stopped and self.context.ok():
            try:
                self.spin_once()
            except Exception:  # noqa: BLE001 - at shutdown rcl raises 'context is not valid'
                if self.context.ok():
                    raise
                return

    def destroy(self):
        try:
            self._wake.destroy()
        except Exception:  # noqa: BLE001 - shutting down anyway
            pass


def output_events():
    """Event callbacks of the stream node's publishers: none. rclpy's defaults (a warning on an
    incompatible QoS or type) add two entities per publisher to every wait of the stream's executor,
    with the node's five publishers, about a fifth of what a joint state costs its process. A subscriber with an
    incompatible QoS is warned by its own side; the joint-state subscription keeps its defaults."""
    from rclpy.event_handler import PublisherEventCallbacks
    return PublisherEventCallbacks(use_default_callbacks=False)


class ConfigHandOff:
    """A new configuration handed from any thread to the thread that serves the stream node's
    entities (entities are created and destroyed only there, module docstring): `put` merges it
    with one not yet applied (the changed keys add up; the newest model and config win, and the
    newest token given: a hand-off without one, None, never hides the token of one before it),
    after which the owner wakes that thread (a guard condition whose callback calls `take`); `take`
    returns the merged (model state, config, changed keys, token) once, else None. Used by
    stream.Stream and simulation.Simulation."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending = None

    def put(self, st, cfg, changed, token=None):
        with self._lock:
            before, before_token = (self._pending[2], self._pending[3]) if self._pending else (set(), None)
            self._pending = (st, cfg, set(changed) | before, before_token if token is None else token)

    def take(self):
        with self._lock:
            pending, self._pending = self._pending, None
        return pending
