"""A Flower SuperNode for one DP-FERMI silo, with a warm ClientApp.

``python -m skdp.federated.supernode [flower-supernode options]`` runs
Flower's own SuperNode (``flower-supernode``, same options) in
``--isolation process`` mode, plus, in the same process, an executor that
answers the node's ClientApp tasks with the installed
``skdp.federated.app:client_app``. Compared with Flower's default
(``--isolation subprocess``: one new Python process per message, which
imports Flower, torch and skdp and reloads the silo's data every round, and
polls every 0.5--3 s), a round's overhead is Flower's own HTTP traffic.

Two more properties follow: the code that touches the silo's records is
the silo's installed skdp, not code shipped by the server in the app bundle;
and the silo's data are loaded once.

The polling intervals of the SuperNode loop are shortened (the loop's own
are 3 s when idle and 0.5 s while a reply is pending): idle polls start at
5 ms and back off to ``SKDP_FLWR_POLL`` seconds (default 0.2), so that an
idle federation does not flood the SuperLink. This patches module attributes of
``flwr==1.41.0`` (the pinned version) at start-up.
"""

import os
import sys
import threading
import time

from ._simulation import import_flower

_CLIENT_APP_TASK = "flwr-clientapp"


class _ShortSleeps:
    """Stands in for the ``time`` module inside Flower's SuperNode loop.

    The loop sleeps 3 s when the SuperLink had no message and 0.5 s while it
    waits for the ClientApp's reply. Here an idle sleep starts at ``fast``
    seconds and grows by half each idle poll up to ``limit`` (so an idle
    federation does not flood the SuperLink), and a reply wait is ``fast``.
    """

    def __init__(self, limit, fast=0.005):
        self._limit = float(limit)
        self._fast = float(fast)
        self._idle = self._fast

    def sleep(self, seconds):
        if seconds >= 1.0:  # idle: nothing to pull
            time.sleep(self._idle)
            self._idle = min(self._idle * 1.5, self._limit)
        else:  # a message is being answered: poll fast, and again once done
            self._idle = self._fast
            time.sleep(min(float(seconds), self._fast))

    def __getattr__(self, name):
        return getattr(time, name)


def _runtime_address(argv):
    host, port = "127.0.0.1", "9094"
    for i, arg in enumerate(argv):
        if arg == "--host" and i + 1 < len(argv):
            host = argv[i + 1]
        elif arg.startswith("--host="):
            host = arg.split("=", 1)[1]
        elif arg == "--port" and i + 1 < len(argv):
            port = argv[i + 1]
        elif arg.startswith("--port="):
            port = arg.split("=", 1)[1]
    return f"{host}:{port}"


def serve_tasks(runtime_address, *, insecure=True, root_certificates=None, poll=0.2,
                stop=None):
    """Answer the SuperNode's ClientApp tasks in this process, forever (or
    until ``stop`` is set): acquire a task, pull its message and context,
    call ``skdp.federated.app.client_app``, push the reply and the context
    (which holds the silo's ledger). Idle polls start at 5 ms after a task
    and grow by half up to ``poll`` seconds."""
    from flwr.app import Message
    from flwr.app.error import Error
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supernode.runtime.run_clientapp import (
        pull_task_input,
        push_message,
        push_task_output,
    )

    from .app import client_app

    def client(interceptors):
        return RuntimeHttpClient.from_server_address(
            server_address=runtime_address, insecure=insecure,
            root_certificates=root_certificates, interceptors=interceptors,
            retry_invoker=make_simple_http_retry_invoker(),
        )

    acquirer = client([RuntimeVersionHttpInterceptor(component_name="SuperExec")])
    wait = 0.005
    while stop is None or not stop.is_set():
        try:
            res = acquirer.AcquireTask(AcquireTaskRequest(
                supported_task_types=[_CLIENT_APP_TASK], agentapp_fab_hashes=[]))
        except Exception:  # the SuperNode's API is not up yet, or restarting
            time.sleep(0.2)
            continue
        if not (res.HasField("task") and res.token):
            time.sleep(wait)
            wait = min(wait * 1.5, poll)
            continue
        wait = 0.005
        task_client = client([RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                              RuntimeTokenHttpInterceptor(res.token)])
        heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(task_client))
        heartbeat.start()
        context, reply, status, details = None, None, SubStatus.FAILED, "ClientApp failed"
        try:
            message, context, _run, _fab = pull_task_input(task_client)
            try:
                reply = client_app(message=message, context=context)
                status, details = SubStatus.COMPLETED, ""
            except Exception as exc:  # returned to the server as an error
                details = f"{type(exc).__name__}: {exc}"
                reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                      reason=details), reply_to=message)
            push_message(task_client, reply, context)
        except Exception as exc:  # communication failure: the task expires
            details = f"{type(exc).__name__}: {exc}"
        finally:
            push_task_output(task_client, context, status, details)
            heartbeat.stop()
            task_client.close()


def main(argv=None):
    """Entry point: ``python -m skdp.federated.supernode [options]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
    import_flower()
    import flwr.supernode.start_client_internal as loop
    from flwr.supernode.cli import flower_supernode

    from ._flower import fast_object_pulls

    loop.time = _ShortSleeps(float(os.environ.get("SKDP_FLWR_POLL", "0.2")))
    fast_object_pulls()
    if "--isolation" not in argv and not any(a.startswith("--isolation=") for a in argv):
        argv += ["--isolation", "process"]
    certificates = None
    for i, arg in enumerate(argv):  # the Runtime API's CA, when it runs with TLS
        if arg == "--ssl-ca-certfile" and i + 1 < len(argv):
            certificates = argv[i + 1]
    runtime_insecure = certificates is None
    threading.Thread(
        target=serve_tasks, args=(_runtime_address(argv),),
        kwargs={"insecure": runtime_insecure, "root_certificates": certificates},
        daemon=True, name="skdp-clientapp",
    ).start()
    sys.argv = ["flower-supernode"] + argv
    flower_supernode()


if __name__ == "__main__":
    main()
