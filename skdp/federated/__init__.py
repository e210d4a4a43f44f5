"""Federated engines for DP-FERMI: the silos on Flower.

The silo step and the server step live with the trainer
(:mod:`skdp.fairness._fermi`) and import no Flower; this package only moves
their messages. Flower is imported lazily, inside the engines, so that
``import skdp`` never needs it (``pip install skdp[federated]`` adds it).

* :class:`FermiSilo`, :class:`SiloPolicy`: one silo's side (its records,
  its own release plan, budget and noise).
* :func:`fit_federated`: the server's side, given a transport.
* :class:`LocalFederation`: a localhost Flower deployment (SuperLink and
  SuperNodes, with or without TLS) for demos and tests.
* ``skdp.federated.app``: the Flower ServerApp and ClientApp.
"""

from ._local import LocalFederation, save_silo, write_localhost_certificates
from ._server import fit_federated
from ._silo import FermiSilo, SiloPolicy, SiloRefusal
from ._transport import DirectTransport, FederatedError, SiloTransport

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
