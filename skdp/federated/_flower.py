"""Flower transport: DP-FERMI's silo requests as Flower messages.

Imported only by the Flower engines (it imports Flower). Requests and
replies are ``RecordDict``\\ s of one ``ConfigRecord`` (``"cfg"``: phase,
round, JSON settings or figures) and one ``ArrayRecord`` (``"arrays"``: the
model, ``W``, priors; or a silo's noisy sums, noisy counts). A silo's
ledger (what it has spent in this run) lives in its node's
``context.state`` -- on the silo's side, out of the server's reach.
"""

import json
import math
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from ._silo import SiloRefusal
from ._transport import FederatedError, SiloTransport

_LEDGER = "skdp-ledger"


def fast_object_pulls(initial=0.005, cap=0.05):
    """Shorten Flower's retry backoff when a message's objects are not yet
    available (1 s, doubling up to 10 s, in ``flwr==1.41.0``) to ``initial``
    seconds, doubling up to ``cap``, in this process. A round's messages are
    small and arrive within milliseconds on a LAN, so the default backoff,
    not the network, set the pace of a round."""
    from flwr.supercore.inflatable import inflatable_utils

    for fn in (inflatable_utils.pull_objects, inflatable_utils.pull_and_inflate_object_from_tree):
        if fn.__kwdefaults__ and "initial_backoff" in fn.__kwdefaults__:
            fn.__kwdefaults__.update(initial_backoff=float(initial), backoff_cap=float(cap))


# ------------------------------------------------------------------ encoding
def _arrays(named):
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in named.items()})


def _request(phase, request, round_index):
    cfg = {"phase": phase, "round": -1 if round_index is None else int(round_index)}
    arrays = {}
    if phase == "setup":
        cfg["settings"] = json.dumps(request["settings"])
    elif phase == "train":
        arrays = {f"param-{i}": p for i, p in enumerate(request["params"])}
        arrays.update(W=request["W"], priors=request["priors"])
    return RecordDict({"cfg": ConfigRecord(cfg), "arrays": _arrays(arrays)})


def _reply(phase, reply):
    if phase == "hello":
        return RecordDict({"cfg": ConfigRecord({k: reply[k] for k in ("silo", "name",
                                                                      "n_records")})})
    if phase == "setup":
        cfg = {"epsilon": float(reply["epsilon"]), "delta": float(reply["delta"]),
               "noise": json.dumps(reply["noise"])}
        arrays = {} if reply["counts"] is None else {"counts": reply["counts"]}
        return RecordDict({"cfg": ConfigRecord(cfg), "arrays": _arrays(arrays)})
    arrays = {f"theta-{i}": t for i, t in enumerate(reply["theta"])}
    arrays.update(w=reply["w"], monitor=reply["monitor"])
    return RecordDict({"arrays": _arrays(arrays)})


def _decode_reply(phase, content):
    if phase == "hello":
        cfg = content["cfg"]
        return {"silo": int(cfg["silo"]), "name": str(cfg["name"]),
                "n_records": int(cfg["n_records"])}
    arrays = content["arrays"]
    if phase == "setup":
        cfg = content["cfg"]
        return {"epsilon": float(cfg["epsilon"]), "delta": float(cfg["delta"]),
                "noise": json.loads(cfg["noise"]),
                "counts": arrays["counts"].numpy() if "counts" in arrays else None}
    n_parts = sum(1 for k in arrays if k.startswith("theta-"))
    return {"theta": [arrays[f"theta-{i}"].numpy() for i in range(n_parts)],
            "w": arrays["w"].numpy(), "monitor": arrays["monitor"].numpy()}


# ------------------------------------------------------------------ client
def handle(silo, msg, context):
    """Answer one request with ``silo`` (a FermiSilo), keeping its ledger in
    ``context.state``. Refusals and failures raise, which Flower returns to
    the server as an error message."""
    cfg = msg.content["cfg"]
    phase, round_index = str(cfg["phase"]), int(cfg["round"])
    ledger = {}
    if _LEDGER in context.state:
        ledger = json.loads(context.state[_LEDGER]["ledger"])
    if phase == "hello":
        reply = silo.hello()
    elif phase == "setup":
        reply, ledger = silo.setup(json.loads(cfg["settings"]), ledger)
    elif phase == "train":
        arrays = msg.content["arrays"]
        n_parts = sum(1 for k in arrays if k.startswith("param-"))
        params = [arrays[f"param-{i}"].numpy() for i in range(n_parts)]
        reply, ledger = silo.train(round_index, params, arrays["W"].numpy(),
                                   arrays["priors"].numpy(), ledger)
    else:
        raise SiloRefusal(f"silo {silo.name!r}: unknown request {phase!r}.")
    if phase != "hello":
        context.state[_LEDGER] = ConfigRecord({"ledger": json.dumps(ledger)})
    return Message(_reply(phase, reply), reply_to=msg)


def make_client_app(get_silo):
    """A Flower ``ClientApp`` whose silo is ``get_silo(context)`` (a
    :class:`~skdp.federated.FermiSilo`, typically chosen by the node's
    ``partition-id``)."""
    app = ClientApp()

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return handle(get_silo(context), msg, context)

    return app


# ------------------------------------------------------------------ server
class FlowerTransport(SiloTransport):
    """The silos behind a Flower ``Grid``, one node per silo.

    Waits up to ``node_timeout`` seconds for ``n_silos`` nodes (an empty or
    short node list is waited for, never averaged), orders them by the
    ``silo`` index each reports (its ``partition-id``), and gives every
    request ``round_timeout`` seconds: a silo that does not answer in time,
    refuses or fails stops the fit with a :class:`FederatedError` naming the
    silo and the round.
    """

    def __init__(self, grid, n_silos, *, round_timeout=120.0, node_timeout=120.0, poll=0.005):
        super().__init__()
        self.grid = grid
        self.n_silos = int(n_silos)
        self.round_timeout = float(round_timeout)
        self.poll = float(poll)
        self.node_ids = self._wait_for_nodes(float(node_timeout))
        self._hello()
        indices = [h["silo"] for h in self.hellos]
        if sorted(indices) != list(range(self.n_silos)):
            raise FederatedError(
                f"the {self.n_silos} silos report partition ids {sorted(indices)}; each silo "
                f"needs its own partition-id in 0 .. {self.n_silos - 1}."
            )
        order = np.argsort(indices)
        self.node_ids = [self.node_ids[i] for i in order]
        self.hellos = [self.hellos[i] for i in order]
        self.sizes = self.sizes[order]
        self.names = [self.names[i] for i in order]

    def _wait_for_nodes(self, timeout):
        deadline = time.monotonic() + timeout
        nodes = []
        while True:
            nodes = sorted(int(n) for n in self.grid.get_node_ids())
            if len(nodes) >= self.n_silos:
                break
            if time.monotonic() > deadline:
                raise FederatedError(
                    f"only {len(nodes)} of {self.n_silos} silo nodes connected within "
                    f"{timeout:g} s; start every SuperNode (or raise node_timeout)."
                )
            time.sleep(0.05)
        if len(nodes) > self.n_silos:
            raise FederatedError(
                f"{len(nodes)} nodes are connected for {self.n_silos} silos; run one SuperNode "
                "per silo (or set n-silos to the number of nodes)."
            )
        return nodes

    def _name(self, j):
        return self.names[j] if self.names else f"node {self.node_ids[j]}"

    def _call(self, phase, requests, round_index):
        where = {"hello": "hello", "setup": "setup"}.get(phase, f"round {round_index}")
        messages = [
            Message(_request(phase, None if requests is None else requests[j], round_index),
                    dst_node_id=node, message_type="query")
            for j, node in enumerate(self.node_ids)
        ]
        ids = list(self.grid.push_messages(messages))
        slot = {mid: j for j, mid in enumerate(ids)}
        replies = [None] * len(ids)
        pending = set(ids)
        deadline = time.monotonic() + self.round_timeout
        wait = self.poll
        while pending:
            for m in self.grid.pull_messages(list(pending)):
                mid = m.metadata.reply_to_message_id
                if mid in pending:
                    pending.discard(mid)
                    replies[slot[mid]] = m
            if not pending:
                break
            if time.monotonic() > deadline:
                silent = sorted(slot[mid] for mid in pending)
                names = ", ".join(f"{self._name(j)!r} (node {self.node_ids[j]})" for j in silent)
                raise FederatedError(
                    f"silo {names} did not answer {where} within {self.round_timeout:g} s; "
                    "the fit stopped and no model was fitted."
                )
            time.sleep(wait)
            wait = min(wait * 1.5, 0.05)
        out = []
        for j, m in enumerate(replies):
            if m.has_error():
                raise FederatedError(
                    f"silo {self._name(j)!r} (node {self.node_ids[j]}) refused or failed "
                    f"{where}: {_reason(m.error.reason)}"
                )
            out.append(_decode_reply(phase, m.content))
        return out


def _reason(text):
    """The useful end of a Flower error reason (Ray wraps it in tracebacks)."""
    text = str(text)
    marker = "Message: "
    if marker in text:
        text = text[text.rindex(marker) + len(marker):]
    text = text.strip().strip("'>").strip()
    return text if len(text) <= 500 else "..." + text[-500:]


def engine_options(options):
    """Timeouts of :class:`FlowerTransport` from an options dict."""
    options = dict(options or {})
    timeouts = {k: float(options.pop(k)) for k in ("round_timeout", "node_timeout")
                if k in options}
    for key, value in timeouts.items():
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"engine_options[{key!r}] must be a positive number of seconds.")
    return timeouts, options
