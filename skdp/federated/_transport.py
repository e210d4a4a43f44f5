"""The server's view of remote silos: requests out, replies in, in silo
order. Engines (Flower simulation, Flower deployment, a direct in-memory
transport for tests) only implement :meth:`SiloTransport._call`; nothing
here imports Flower."""

import numpy as np
import torch

from ..fairness.fermi.protocol import PROTOCOL, SiloMessages


class FederatedError(RuntimeError):
    """A federated fit stopped: a silo refused, failed or did not answer."""


class SiloTransport:
    """Base of the transports of :func:`skdp.fairness.fermi.train_on_silos`
    (through :meth:`skdp.DPFERMIClassifier.fit_silos`).

    Subclasses implement ``_call(phase, requests, round_index)``: send
    ``requests[j]`` (a dict) to silo ``j`` for every silo, and return the
    replies in silo order, raising :class:`FederatedError` (naming the silo
    and the round) when one refuses, fails or times out. ``hello`` replies
    give the silos' protocol version, public sizes (record counts, or unit
    counts from silos that hold unit ids: ``per_unit``) and names.
    """

    def __init__(self):
        self.hellos = []
        self.sizes = None
        self.names = None
        self.per_unit = False

    def _hello(self):
        """Read the silos' public facts; refuse silos of another protocol
        version, and a mix of silos with and without unit ids."""
        hellos = self._call("hello", None, None)
        self.hellos = hellos
        self.names = [str(h["name"]) for h in hellos]
        for name, hello in zip(self.names, hellos):
            if hello.get("protocol") != PROTOCOL:
                raise FederatedError(
                    f"silo {name!r} speaks {hello.get('protocol') or 'an older protocol'}, this "
                    f"server {PROTOCOL!r}; install the same skdp version on both sides."
                )
        per_unit = ["n_units" in h for h in hellos]
        if any(per_unit) and not all(per_unit):
            with_units = [n for n, u in zip(self.names, per_unit) if u]
            raise FederatedError(
                f"silos {with_units[:5]} hold unit ids (they protect persons with all their "
                "records) and the others do not; a fit has one privacy unit: give every silo "
                "unit ids (a silo with one record per person can use its row numbers)."
            )
        #: whether ``sizes`` count the silos' privacy units (not records)
        self.per_unit = all(per_unit) and bool(per_unit)
        key = "n_units" if self.per_unit else "n_records"
        self.sizes = np.array([int(h[key]) for h in hellos], dtype=np.int64)

    def _call(self, phase, requests, round_index):
        raise NotImplementedError

    def setup(self, settings):
        return self._call("setup", [{"settings": settings}] * len(self.sizes), None)

    def backend(self, make_backend, n_features, n_classes, device):
        """The server's model: no rows, only parameters."""
        empty = torch.zeros((0, int(n_features)), dtype=torch.float32, device=device)
        return make_backend(empty, n_classes)

    def check(self, backend, n_groups):
        """Each silo's noisy check of the returned model (a list of vectors)."""
        params = [p.detach().cpu().numpy() for p in backend.parameters]
        replies = self._call("check", [{"params": params}] * len(self.sizes), None)
        return [np.asarray(r["check"], dtype=np.float64) for r in replies]

    def exchange(self, backend, config, priors):
        priors = np.asarray(priors, dtype=np.float64)

        def exchange(step, broadcast):
            params = [p.detach().cpu().numpy() for p in backend.parameters]
            request = {"params": params, "W": broadcast.W.detach().cpu().numpy(),
                       "priors": priors}
            replies = self._call("train", [request] * len(self.sizes), step)
            like = backend.parameters[0]

            def stack(arrays):
                return torch.as_tensor(np.stack(arrays), dtype=like.dtype, device=like.device)

            theta = [stack([r["theta"][i] for r in replies]) for i in range(len(params))]
            return SiloMessages(theta=theta, w=stack([r["w"] for r in replies]),
                                monitor=stack([r["monitor"] for r in replies]))

        return exchange


class DirectTransport(SiloTransport):
    """:class:`~skdp.federated._silo.FermiSilo` objects called directly, each
    with its own ledger (what Flower keeps in a node's state): the protocol
    without a network, for tests and debugging."""

    def __init__(self, silos):
        super().__init__()
        self.silos = list(silos)
        self.ledgers = [{} for _ in self.silos]
        self._hello()

    def _call(self, phase, requests, round_index):
        replies = []
        for j, silo in enumerate(self.silos):
            try:
                if phase == "hello":
                    replies.append(silo.hello())
                elif phase == "setup":
                    reply, self.ledgers[j] = silo.setup(requests[j]["settings"], self.ledgers[j])
                    replies.append(reply)
                elif phase == "check":
                    reply, self.ledgers[j] = silo.check(requests[j]["params"], self.ledgers[j])
                    replies.append(reply)
                else:
                    r = requests[j]
                    reply, self.ledgers[j] = silo.train(round_index, r["params"], r["W"],
                                                        r["priors"], self.ledgers[j])
                    replies.append(reply)
            except Exception as exc:
                where = phase if round_index is None else f"round {round_index}"
                raise FederatedError(f"silo {silo.name!r} failed at {where}: {exc}") from exc
        return replies
