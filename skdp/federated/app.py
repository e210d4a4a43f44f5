"""The Flower app of federated DP-FERMI (deployment): ``server_app`` and
``client_app``, which call the same silo and server steps as
``DPFERMIClassifier(engine="inprocess")``.

Each SuperNode is one silo; its node config says where its records are and
what it accepts::

    partition-id=0 num-partitions=3 data-path="/data/silo0.npz"
    silo-name="hospital-a" max-epsilon=2.0 max-delta=1e-5
    allow-seeded-noise=false allow-non-private=false privacy-units="record"

``data-path`` is a ``.npz`` file with arrays ``X`` (n, d), ``y`` (n,) and
optionally ``sensitive`` (n,) and ``unit_ids`` (n,: each record's person;
the silo then protects persons, not records) (write one with
:func:`skdp.federated.save_silo`). The run config (``flwr run ...
--run-config``) gives the public facts and where the ServerApp writes the
fitted estimator (a pickle)::

    n-silos=3 n-features=6 classes='[0, 1]' groups='[0, 1]'
    estimator-params='{"lam": 2.0, "epsilon": 1.0}' output="/models/fermi.pkl"

``python -m skdp.federated.app DIR`` writes a Flower app directory (its
``pyproject.toml``) for ``flwr run DIR``.
"""

import json
import os
import pickle
import sys
from pathlib import Path

from ._simulation import import_flower

import_flower()

from flwr.app import Context  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402

from ..fairness import DPFERMIClassifier  # noqa: E402
from ._flower import FlowerTransport  # noqa: E402
from .client import client_app, load_silo  # noqa: E402, F401  (the app's ClientApp)

#: Run config keys of the ServerApp and their defaults.
RUN_CONFIG = {
    "n-silos": 2,
    "n-features": 0,
    "classes": "[0, 1]",
    "groups": "[]",
    "estimator-params": "{}",
    "output": "dp_fermi.pkl",
    "round-timeout": 120.0,
    "node-timeout": 120.0,
}

server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Fit on the connected silos and write the fitted estimator to the run
    config's ``output`` (only once fitted: a failed run writes nothing)."""
    from ._flower import fast_object_pulls

    fast_object_pulls()
    config = {**RUN_CONFIG, **dict(context.run_config)}
    params = json.loads(config["estimator-params"])
    estimator = DPFERMIClassifier(**params)
    transport = FlowerTransport(
        grid, int(config["n-silos"]), round_timeout=float(config["round-timeout"]),
        node_timeout=float(config["node-timeout"]),
    )
    estimator.fit_silos(
        transport, classes=json.loads(config["classes"]),
        groups=json.loads(config["groups"]), n_features=int(config["n-features"]),
    )
    output = Path(config["output"])
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with open(partial, "wb") as fh:
        pickle.dump(estimator, fh)
    os.replace(partial, output)


APP_PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "skdp-dp-fermi"
version = "1.0.0"
description = "Federated DP-FERMI (skdp) on Flower"
license = "BSD-3-Clause"
dependencies = ["skdp[federated]"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "skdp"

[tool.flwr.app.components]
serverapp = "skdp.federated.app:server_app"
clientapp = "skdp.federated.client:client_app"

[tool.flwr.app.config]
{config}
"""


def write_app(directory, **run_config):
    """Write a Flower app directory for ``flwr run`` (its ``pyproject.toml``;
    the code is the installed ``skdp.federated.app``). ``run_config`` keys
    use underscores (``n_silos=3``) and set the defaults of the run config.

    Returns
    -------
    pathlib.Path
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = dict(RUN_CONFIG)
    for key, value in run_config.items():
        key = key.replace("_", "-")
        if key not in RUN_CONFIG:
            raise ValueError(f"unknown run config key {key!r}; use {sorted(RUN_CONFIG)}.")
        config[key] = value
    lines = []
    for key, value in config.items():
        if isinstance(value, str):
            lines.append(f"{key} = {json.dumps(value)}")
        elif isinstance(value, bool):
            lines.append(f"{key} = {str(value).lower()}")
        else:
            lines.append(f"{key} = {value!r}")
    (directory / "pyproject.toml").write_text(APP_PYPROJECT.format(config="\n".join(lines)))
    return directory


if __name__ == "__main__":  # python -m skdp.federated.app DIR
    print(write_app(sys.argv[1] if len(sys.argv) > 1 else "skdp_fermi_app"))
