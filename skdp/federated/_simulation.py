"""The ``engine="flower-simulation"`` path of ``DPFERMIClassifier.fit``."""

import contextlib
import logging
import os
import warnings

from ..fairness.fermi import train_on_silos
from ._silo import FermiSilo, SiloPolicy
from ._transport import FederatedError


def import_flower():
    """Import Flower, or say how to install it."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "The Flower engines need Flower: pip install 'flwr[simulation]==1.41.0' (in a "
            f"checkout of skdp: pip install -e '.[federated]'). ({exc})"
        ) from exc


class _RunSimulationBanner(logging.Filter):
    """Drops Flower's "DEPRECATED FEATURE: The `run_simulation` function is
    deprecated" warning and nothing else.

    ``flwr==1.41.0`` has no other public way to run a ``ServerApp`` object
    and ``ClientApp`` objects in process (``flwr run`` starts a SuperLink and
    loads the apps from a project directory), so the engine keeps
    ``run_simulation``; the banner would tell skdp's users to change code
    they did not write.
    """

    def filter(self, record):
        if record.levelno != logging.WARNING:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record we cannot format is not ours to drop
            return True
        return not (message.lstrip().startswith("DEPRECATED FEATURE:")
                    and "`run_simulation`" in message)


@contextlib.contextmanager
def _without_run_simulation_banner():
    """Filter the banner from Flower's logger ``flwr`` during the block
    only; the filter is removed afterwards, whatever happens."""
    logger = logging.getLogger("flwr")
    banner = _RunSimulationBanner()
    logger.addFilter(banner)
    try:
        yield
    finally:
        logger.removeFilter(banner)


def fit_in_simulation(run, data, make_backend, device, *, module=None, options=None):
    """Fit with each silo a Flower ``ClientApp`` in Flower's simulation
    engine, and the server a ``ServerApp`` in this process: the
    ``engine="flower-simulation"`` of :class:`~skdp.DPFERMIClassifier`.

    Parameters
    ----------
    run : skdp.fairness.fermi.FermiRun
    data : list of (X, y_codes, group_codes, unit_codes), one per silo, in silo order
        ``unit_codes`` (each record's privacy unit, or None) stay with the
        silo: each silo bounds, samples and weighs its own units.
    make_backend : callable ``(X_t, n_outputs) -> backend``
    device : torch.device
    module : callable or None
        The estimator's ``module`` (each silo builds its own copy).
    options : dict or None
        The estimator's ``engine_options``.

    Returns
    -------
    skdp.fairness.fermi.FermiFit
    """
    import_flower()
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from ._flower import FlowerTransport, engine_options, make_client_app

    timeouts, rest = engine_options(options)
    backend_config = rest.pop("backend_config", {"client_resources": {"num_cpus": 1}})
    if rest:
        raise ValueError(
            f"engine_options has unknown keys {sorted(rest)}; use round_timeout, node_timeout "
            "and backend_config."
        )
    silos = [
        FermiSilo(X, y, g, unit_ids=units, silo=j, name=name, policy=SiloPolicy.permissive(),
                  encoded=True, module=module, device=device)
        for j, ((X, y, g, units), name) in enumerate(zip(data, run.silo_names))
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
            outcome["fit"] = train_on_silos(run, transport, make_backend, device)
        except BaseException as exc:  # handed back to fit, raised there
            outcome["error"] = exc

    with warnings.catch_warnings(), _without_run_simulation_banner():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        run_simulation(server_app=server_app, client_app=client_app,
                       num_supernodes=len(silos), backend_config=backend_config,
                       verbose_logging=False)
    if "error" in outcome:
        raise outcome["error"]
    if "fit" not in outcome:
        raise FederatedError("the Flower simulation ended before the fit finished; no model "
                             "was fitted (see Flower's log above).")
    return outcome["fit"]
