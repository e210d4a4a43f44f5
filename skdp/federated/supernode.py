"""A Flower SuperNode for one DP-FERMI silo, with the ClientApp inside it.

``python -m skdp.federated.supernode [flower-supernode options]`` runs
Flower's own SuperNode (``flower-supernode``, same options) in
``--isolation process`` mode, and answers each request, as soon as the
node has stored it, with the installed ``skdp.federated.client:client_app`` in
the SuperNode's own process (:func:`answer_in_node`). Flower's default
(``--isolation subprocess``) starts a new Python process per message, which
imports Flower, torch and skdp and reloads the silo's data every round;
with ``--isolation process`` a separate ClientApp process would still fetch
every request and push every reply through the node's Runtime API, about a
dozen HTTP requests per message. Here a round's overhead is the node's
traffic with the SuperLink alone.

Two more properties follow: the code that touches the silo's records is
the silo's installed skdp, not code shipped by the server in the app bundle;
and the silo's data are loaded once.

The polling of the SuperNode loop is paced by the rounds (the loop's own
intervals are 3 s when idle and 0.5 s while a reply is pending): after a
reply, the node's next poll comes shortly before the next request is due
(a running estimate of the time between requests), then polls follow at a
twentieth of that time and back off to ``SKDP_FLWR_POLL`` seconds (default
0.2), so that the silos neither flood the SuperLink nor wait long (each
poll is an HTTP request costing the SuperLink a few milliseconds of CPU).
This patches module attributes of ``flwr==1.41.0`` (the pinned version) at
start-up.
"""

import os
import sys
import time

from ._simulation import import_flower

_CLIENT_APP_TASK = "flwr-clientapp"


class _RoundPacedSleeps:
    """Stands in for the ``time`` module inside Flower's SuperNode loop.

    Flower's loop polls the SuperLink right after each reply and then every
    3 s while there is no message for the node, and sleeps 0.5 s at a time
    while it waits for the ClientApp's reply. Every poll is an HTTP request
    that costs the SuperLink several milliseconds of CPU, so with many silos
    the polls themselves slow the rounds down. Here a reply is waited for in
    ``fast`` steps, and the requests are expected at the pace of the rounds:
    ``period`` is a running estimate of the time between two requests.
    After a reply the node does not poll until ``lead`` of a period after
    the previous request (:meth:`before_poll`), then polls every twentieth
    of a period (at least ``fast``), the interval growing by half up to
    ``limit``. When a request was already waiting at the first poll, the
    period was overestimated and is shortened. In steady rounds a silo
    polls once to three times per round.
    """

    def __init__(self, limit, fast=0.005, lead=0.85):
        self._limit = float(limit)
        self._fast = float(fast)
        self._lead = float(lead)
        self._idle = self._fast
        self._period = 0.0  # running estimate of the time between requests
        self._last = None  # when the previous request arrived
        self._polls = 0  # polls since the previous request
        self._replied = False

    def before_poll(self):
        """Called by the loop before it polls: right after a reply, wait
        until the next request is due."""
        if not self._replied:
            return
        self._replied = False
        self._idle = min(max(self._fast, self._period / 20), self._limit)
        remaining = self._last + min(self._lead * self._period, 10.0 * self._limit) \
            - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)

    def sleep(self, seconds):
        if seconds < 1.0:  # a reply is being waited for
            time.sleep(min(float(seconds), self._fast))
            return
        self._polls += 1  # idle: the SuperLink had no message for this node
        time.sleep(self._idle)
        self._idle = min(self._idle * 1.5, self._limit)

    def message_received(self):
        """Called by the loop when it stored a request for this node."""
        now = time.monotonic()
        if self._last is not None:
            interval = now - self._last
            if self._polls == 0:  # it was already waiting: the wait was too long
                interval *= 0.7
            self._period = interval if self._period == 0 else (
                0.5 * self._period + 0.5 * interval)
        self._last = now
        self._polls = 0
        self._replied = True

    def __getattr__(self, name):
        return getattr(time, name)


def answer_in_node(state, object_store):
    """Answer this node's pending ClientApp task in this thread, with the
    installed ``skdp.federated.client:client_app``: the task is claimed,
    activated and finished in the node's own state, the request read from
    and the reply written to its object store -- what Flower's ClientApp
    process does through the node's Runtime API, without the HTTP round
    trips. The silo's context (which holds its ledger) is saved back.

    Returns False when the node had no ClientApp task."""
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.inflatable.inflatable_object import iterate_object_tree
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
    from flwr.supercore.servicer.runtime.runtime_handlers import acquire_task
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.supernode.start_client_internal import _insert_message

    from .client import client_app

    claimed = acquire_task(AcquireTaskRequest(supported_task_types=[_CLIENT_APP_TASK],
                                              agentapp_fab_hashes=[]), state)
    if not claimed.HasField("task"):
        return False
    task = claimed.task
    run = state.get_run(task.run_id)
    context = state.get_run_series_context(run.series_id)
    state.activate_task(task.task_id)
    TaskIdentity.task_id, TaskIdentity.run_id = task.task_id, task.run_id
    TaskIdentity.node_id = context.node_id
    status, details = SubStatus.FAILED, "ClientApp failed"
    try:
        (request,) = state.get_messages_legacy(run_ids=[task.run_id], is_reply=False, limit=1)
        request_id = request.metadata.message_id
        state.record_message_processing_start(message_id=request_id)
        tree = object_store.get_object_tree(request_id)
        contents = {t.object_id: object_store.get(t.object_id)
                    for t in iterate_object_tree(tree)}
        request = inflate_object_from_contents(request_id, contents)
        request.metadata.__dict__["_message_id"] = request_id
        object_store.delete(request_id)
        try:
            reply = client_app(message=request, context=context)
            status, details = SubStatus.COMPLETED, ""
        except Exception as exc:  # returned to the server as an error
            details = f"{type(exc).__name__}: {exc}"
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details),
                            reply_to=request)
        state.record_message_processing_end(message_id=request_id)
        _insert_message(reply, state, object_store)
    finally:
        state.finish_task(task.task_id, sub_status=status, details=details)
        state.set_run_series_context(run.series_id, context)
    return True


def main(argv=None):
    """Entry point: ``python -m skdp.federated.supernode [options]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
    import_flower()
    import flwr.supernode.start_client_internal as loop
    from flwr.supernode.cli import flower_supernode

    from ._flower import fast_object_pulls

    poll = float(os.environ.get("SKDP_FLWR_POLL", "0.2"))
    pacing = loop.time = _RoundPacedSleeps(poll)
    fast_object_pulls()
    pull_and_store = loop._pull_and_store_message

    def pull_and_answer(*, state, object_store, **kwargs):
        pacing.before_poll()
        run_id = pull_and_store(state=state, object_store=object_store, **kwargs)
        if run_id is not None:
            pacing.message_received()
            answer_in_node(state, object_store)
        return run_id

    loop._pull_and_store_message = pull_and_answer
    if "--isolation" not in argv and not any(a.startswith("--isolation=") for a in argv):
        argv += ["--isolation", "process"]
    sys.argv = ["flower-supernode"] + argv
    flower_supernode()


if __name__ == "__main__":
    main()
