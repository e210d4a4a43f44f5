"""The ``engine="flower-simulation"`` path of ``DPFERMIClassifier.fit``."""

import os
import warnings

from ._silo import FermiSilo, SiloPolicy
from ._transport import FederatedError


def import_flower():
    """Import Flower, or say how to install it."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "The Flower engines need Flower: pip install 'skdp[federated]' "
            f"(flwr[simulation]==1.41.0). ({exc})"
        ) from exc


def fit_in_simulation(estimator, data, n_groups):
    """Fit ``estimator`` with each silo a Flower ``ClientApp`` in Flower's
    simulation engine, and the server a ``ServerApp`` in this process.

    Parameters
    ----------
    estimator : DPFERMIClassifier
        Validated by ``fit`` (classes, groups and silos encoded).
    data : list of (X, y_codes, group_codes), one per silo, in silo order
    n_groups : int

    Returns
    -------
    estimator : the fitted estimator
    """
    import_flower()
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from ._flower import FlowerTransport, engine_options, make_client_app

    timeouts, rest = engine_options(estimator.engine_options)
    backend_config = rest.pop("backend_config", {"client_resources": {"num_cpus": 1}})
    if rest:
        raise ValueError(
            f"engine_options has unknown keys {sorted(rest)}; use round_timeout, node_timeout "
            "and backend_config."
        )
    silos = [
        FermiSilo(X, y, g, silo=j, name=str(label), policy=SiloPolicy.permissive(),
                  encoded=True, module=estimator.module, device=estimator.device)
        for j, ((X, y, g), label) in enumerate(zip(data, estimator.silos_))
    ]

    def get_silo(context):
        return silos[int(context.node_config["partition-id"])]

    client_app = make_client_app(get_silo)
    server_app = ServerApp()
    outcome = {}

    @server_app.main()
    def main(grid: Grid, context) -> None:
        try:
            transport = FlowerTransport(grid, len(silos), **timeouts)
            estimator._train_on_silos(transport, n_groups)
            outcome["fitted"] = True
        except BaseException as exc:  # handed back to fit, raised there
            outcome["error"] = exc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        run_simulation(server_app=server_app, client_app=client_app,
                       num_supernodes=len(silos), backend_config=backend_config,
                       verbose_logging=False)
    if "error" in outcome:
        raise outcome["error"]
    if not outcome.get("fitted"):
        raise FederatedError("the Flower simulation ended before the fit finished; no model "
                             "was fitted (see Flower's log above).")
    return estimator
