"""Federated engines for DP-FERMI: the silos on Flower.

The silo's computation, the server's side of a fit and the protocol between
them live in :mod:`skdp.fairness.fermi` and import no Flower; this package
only moves their messages, and registers ``engine="flower-simulation"``
with :class:`~skdp.DPFERMIClassifier`. Flower is imported lazily, inside the engines, so that
``import skdp`` never needs it (``pip install 'flwr[simulation]==1.41.0'``, or
``pip install -e ".[federated]"`` in a checkout, adds it).

* :class:`FermiSilo`, :class:`SiloPolicy`: one silo's side (its records,
  its own release plan, budget and noise).
* :func:`fit_federated`: the server's side, given a transport.
* :class:`LocalFederation`: a localhost Flower deployment (SuperLink and
  SuperNodes, with or without TLS) for demos and tests.
* ``skdp.federated.app``: the Flower ServerApp and ClientApp.
"""

from ..fairness.fermi import register_engine
from ._local import LocalFederation, save_silo, write_localhost_certificates
from ._server import fit_federated
from ._silo import FermiSilo, SiloPolicy, SiloRefusal
from ._simulation import fit_in_simulation
from ._transport import DirectTransport, FederatedError, SiloTransport

register_engine("flower-simulation", fit_in_simulation)

__all__ = [
    "DirectTransport",
    "FederatedError",
    "FermiSilo",
    "LocalFederation",
    "SiloPolicy",
    "SiloRefusal",
    "SiloTransport",
    "fit_federated",
    "save_silo",
    "write_localhost_certificates",
]
