"""Flower transport: DP-FERMI's silo requests as Flower messages.

Imported only by the Flower engines (it imports Flower). Requests and
replies are ``RecordDict``\\ s of one ``ConfigRecord`` (``"cfg"``: phase,
round, JSON settings or figures, and ``"arrays"``: the model, ``W``, priors,
or a silo's noisy sums and counts, packed into one bytes value). A silo's
ledger (what it has spent in this run) lives in its node's
``context.state`` -- on the silo's side, out of the server's reach.
"""

import json
import math
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.proto.message_pb2 import ConfirmMessageReceivedRequest
from flwr.proto.runtime_pb2 import PullAppMessagesRequest
from flwr.supercore.inflatable.inflatable_object import iterate_object_tree
from flwr.supercore.inflatable.inflatable_protobuf_utils import make_pull_object_fn_protobuf
from flwr.supercore.inflatable.inflatable_utils import (
    ObjectPullError,
    ObjectUnavailableError,
    inflate_object_from_contents,
)

from ._silo import SiloRefusal
from ._transport import FederatedError, SiloTransport

_LEDGER = "skdp-ledger"


def fast_object_pulls(initial=0.005, cap=0.05, concurrency=8):
    """Shorten Flower's retry backoff when a message's objects are not yet
    available (1 s, doubling up to 10 s, in ``flwr==1.41.0``) to ``initial``
    seconds, doubling up to ``cap``, and let up to ``concurrency`` objects
    move at once (Flower's default is the number of CPU cores, at most 2),
    in this process. A round's messages are small and arrive within
    milliseconds on a LAN, so these waits, not the network, set the pace
    of a round."""
    from flwr.supercore.inflatable import inflatable_utils

    for fn in (inflatable_utils.pull_objects, inflatable_utils.pull_and_inflate_object_from_tree):
        if fn.__kwdefaults__ and "initial_backoff" in fn.__kwdefaults__:
            fn.__kwdefaults__.update(initial_backoff=float(initial), backoff_cap=float(cap))
    for fn in (inflatable_utils.pull_objects, inflatable_utils.push_object_contents_from_iterable,
               inflatable_utils.push_objects):
        for key in ("max_concurrent_pulls", "max_concurrent_pushes"):
            if fn.__kwdefaults__ and key in fn.__kwdefaults__:
                fn.__kwdefaults__[key] = int(concurrency)
    inflatable_utils.get_num_workers = int


# ------------------------------------------------------------------ encoding
# Flower stores and moves every record, array and array chunk of a message
# as a separate object, one HTTP request each way through the SuperLink. A
# message here is therefore a single ConfigRecord whose "arrays" value packs
# every array into one bytes value: 3 objects per message instead of ~12,
# which is most of a deployment round's cost at the SuperLink.
_HEADER = struct.Struct("<I")


def pack_arrays(named):
    """Pack named numeric arrays into one ``bytes`` value: a JSON header of
    (name, dtype, shape) and the raw little-endian buffers (no pickle)."""
    header, buffers = [], []
    for name, value in named.items():
        value = np.asarray(value)
        if value.dtype.kind not in "biuf":
            raise TypeError(f"array {name!r} has dtype {value.dtype}; only numbers are sent.")
        value = value.astype(value.dtype.newbyteorder("<"), order="C", copy=False)
        header.append([str(name), value.dtype.str, list(value.shape)])
        buffers.append(value.tobytes())
    head = json.dumps(header).encode()
    return b"".join([_HEADER.pack(len(head)), head, *buffers])


def unpack_arrays(payload):
    """The dict of arrays packed by :func:`pack_arrays`."""
    payload = bytes(payload)
    (size,) = _HEADER.unpack_from(payload)
    offset = _HEADER.size + size
    out = {}
    for name, dtype, shape in json.loads(payload[_HEADER.size:offset]):
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        out[name] = np.frombuffer(payload, dtype=dtype, count=count,
                                  offset=offset).reshape(shape).copy()
        offset += count * dtype.itemsize
    if offset != len(payload):
        raise ValueError("a packed message has trailing bytes; it is corrupt.")
    return out


def _record(cfg, arrays=None):
    cfg = dict(cfg)
    if arrays:
        cfg["arrays"] = pack_arrays(arrays)
    return RecordDict({"cfg": ConfigRecord(cfg)})


def _arrays_of(cfg):
    return unpack_arrays(cfg["arrays"]) if "arrays" in cfg else {}


def _request(phase, request, round_index):
    cfg = {"phase": phase, "round": -1 if round_index is None else int(round_index)}
    arrays = {}
    if phase == "setup":
        cfg["settings"] = json.dumps(request["settings"])
    elif phase == "check":
        arrays = {f"param-{i}": p for i, p in enumerate(request["params"])}
    elif phase == "train":
        arrays = {f"param-{i}": p for i, p in enumerate(request["params"])}
        arrays.update(W=request["W"], priors=request["priors"])
    return _record(cfg, arrays)


#: Fields of a ``hello`` reply: ``n_units`` from a silo that holds unit ids,
#: ``n_records`` from one that does not (``protocol`` since version 3).
_HELLO = {"protocol": str, "silo": int, "name": str, "n_records": int, "n_units": int}


def _reply(phase, reply):
    if phase == "hello":
        return _record({k: reply[k] for k in _HELLO if k in reply})
    if phase == "setup":
        cfg = {"epsilon": float(reply["epsilon"]), "delta": float(reply["delta"]),
               "noise": json.dumps(reply["noise"])}
        return _record(cfg, None if reply["counts"] is None else {"counts": reply["counts"]})
    if phase == "check":
        return _record({}, {"check": reply["check"]})
    arrays = {f"theta-{i}": t for i, t in enumerate(reply["theta"])}
    arrays.update(w=reply["w"], monitor=reply["monitor"])
    return _record({}, arrays)


def _decode_reply(phase, content):
    cfg = content["cfg"]
    if phase == "hello":
        return {key: kind(cfg[key]) for key, kind in _HELLO.items() if key in cfg}
    arrays = _arrays_of(cfg)
    if phase == "setup":
        return {"epsilon": float(cfg["epsilon"]), "delta": float(cfg["delta"]),
                "noise": json.loads(cfg["noise"]), "counts": arrays.get("counts")}
    if phase == "check":
        return {"check": arrays["check"]}
    n_parts = sum(1 for k in arrays if k.startswith("theta-"))
    return {"theta": [arrays[f"theta-{i}"] for i in range(n_parts)],
            "w": arrays["w"], "monitor": arrays["monitor"]}


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
    elif phase in ("train", "check"):
        arrays = _arrays_of(cfg)
        n_parts = sum(1 for k in arrays if k.startswith("param-"))
        params = [arrays[f"param-{i}"] for i in range(n_parts)]
        if phase == "check":
            reply, ledger = silo.check(params, ledger)
        else:
            reply, ledger = silo.train(round_index, params, arrays["W"], arrays["priors"],
                                       ledger)
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
        self._pool = None
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
        where = {"hello": "hello", "setup": "setup", "check": "the model check"}.get(
            phase, f"round {round_index}")
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
            for m in self._pull(list(pending), deadline):
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


    def _pull(self, message_ids, deadline):
        """The replies among ``message_ids`` that have arrived.

        With Flower's HTTP grid (a deployment), the objects of every arrived
        reply are pulled at once, in parallel, instead of one reply after
        the other as ``Grid.pull_messages`` does: with ten silos that was
        most of a round. Other grids (simulation) use ``pull_messages``.
        """
        client = getattr(self.grid, "_runtime_client", None)
        run = getattr(self.grid, "_run", None)
        node = getattr(self.grid, "node", None)
        if client is None or run is None or node is None:
            return list(self.grid.pull_messages(message_ids))
        res = client.PullMessages(PullAppMessagesRequest(message_ids=message_ids))
        arrived = [(p.metadata.message_id, tree)
                   for p, tree in zip(res.messages_list, res.message_object_trees, strict=True)]
        if not arrived:
            return []
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="skdp-pull")
        pull_object = make_pull_object_fn_protobuf(client.PullObject, node, run.run_id)

        def pull(object_id):
            wait = 0.005
            while True:
                try:
                    return object_id, pull_object(object_id)
                except ObjectUnavailableError:  # announced, not yet uploaded
                    if time.monotonic() > deadline:
                        return object_id, None
                    time.sleep(wait)
                    wait = min(2 * wait, 0.05)
                except ObjectPullError:  # the sender's upload session expired
                    return object_id, None

        def confirm(message_id):
            client.ConfirmMessageReceived(ConfirmMessageReceivedRequest(
                node=node, run_id=run.run_id, message_object_id=message_id))

        ids = [t.object_id for _, tree in arrived for t in iterate_object_tree(tree)]
        contents = dict(self._pool.map(pull, ids))
        # a reply whose upload never finished (its silo died meanwhile) has not
        # arrived: the caller's deadline names the silo
        complete = [mid for mid, tree in arrived
                    if all(contents[t.object_id] is not None for t in iterate_object_tree(tree))]
        list(self._pool.map(confirm, complete))
        replies = []
        for message_id in complete:
            message = inflate_object_from_contents(message_id, contents)
            message.metadata.__dict__["_message_id"] = message_id
            replies.append(message)
        return replies


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
