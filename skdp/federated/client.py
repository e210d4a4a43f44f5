"""The silo's side of the Flower app: the ``ClientApp`` a SuperNode runs.

Each SuperNode is one silo; its node config says where its records are and
what it accepts (see :mod:`skdp.federated.app`). This module imports only
the silo (:class:`~skdp.federated.FermiSilo`), the Flower transport and the
DP-FERMI protocol: no estimator, no scikit-learn model.
"""

import numpy as np

from ._simulation import import_flower

import_flower()

from ._flower import make_client_app  # noqa: E402
from ._silo import FermiSilo, SiloPolicy  # noqa: E402

_SILOS = {}


def load_silo(node_config):
    """The :class:`FermiSilo` of a SuperNode, from its node config (cached
    per process)."""
    if "data-path" not in node_config:
        raise ValueError(
            "this SuperNode has no data-path in its --node-config; start it with "
            "--node-config 'partition-id=0 data-path=\"/path/silo.npz\"'."
        )
    key = (str(node_config["data-path"]), int(node_config.get("partition-id", 0)))
    if key not in _SILOS:
        with np.load(key[0], allow_pickle=False) as data:
            X, y = data["X"], data["y"]
            sensitive = data["sensitive"] if "sensitive" in data.files else None
            unit_ids = data["unit_ids"] if "unit_ids" in data.files else None
        _SILOS[key] = FermiSilo(
            X, y, sensitive, unit_ids=unit_ids, silo=key[1],
            name=node_config.get("silo-name", key[1]),
            policy=SiloPolicy.from_node_config(node_config),
        )
    return _SILOS[key]


client_app = make_client_app(lambda context: load_silo(context.node_config))
