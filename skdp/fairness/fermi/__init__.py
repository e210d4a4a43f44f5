"""DP-FERMI: private fair learning from one data set or many silos.

The estimator shell, :class:`skdp.DPFERMIClassifier`, lives in
``._estimator`` and is exported by :mod:`skdp.fairness`. This package's own
namespace is what the federated engines (:mod:`skdp.federated`) build on,
none of which imports scikit-learn or the shell:

* :mod:`.protocol`: the settings and messages that cross the boundary
  between the server and a silo, and the rules both sides apply;
* the silo's computation (:class:`SiloWorker`, its random draws
  :class:`SiloDraws`, :func:`silo_group_counts`, :class:`FermiConfig`) and
  the ERMI cells of its records;
* the server's side of a fit (:func:`train_on_silos`, :class:`FermiRun`,
  :class:`FermiFit`) and the engine registry (:func:`register_engine`).
"""

from ._ermi import fairness_strata, record_cells
from ._server import FermiFit, FermiRun, register_engine, train_on_silos
from ._trainer import FermiConfig, SiloDraws, SiloWorker, silo_group_counts

__all__ = [
    "FermiConfig",
    "FermiFit",
    "FermiRun",
    "SiloDraws",
    "SiloWorker",
    "fairness_strata",
    "record_cells",
    "register_engine",
    "silo_group_counts",
    "train_on_silos",
]
