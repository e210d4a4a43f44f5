"""skdp: differentially private scikit-learn estimators with constraints.

The estimators and subpackages load on first use (``skdp.DPSGDClassifier``,
``from skdp import DPSGDClassifier``, ``skdp.audit``): importing skdp, or
one estimator, does not import every algorithm, the audits, the searches and
the federated engines.
"""

import importlib

__version__ = "0.1.0.dev0"

#: Estimator -> the subpackage that defines it.
_ESTIMATORS = {
    "DPBilevelLogisticRegression": "bilevel",
    "DPBilevelRidge": "bilevel",
    "DPDROClassifier": "robust",
    "DPDRORegressor": "robust",
    "DPFERMIClassifier": "fairness",
    "DPRateConstrainedClassifier": "fairness",
    "DPSGDClassifier": "linear_model",
    "DPSGDRegressor": "linear_model",
}

_SUBPACKAGES = frozenset({
    "audit", "bilevel", "datasets", "debug", "distributed", "exceptions", "fairness",
    "federated", "linear_model", "metrics", "model_selection", "models", "preprocessing",
    "privacy", "robust",
})

__all__ = sorted(_ESTIMATORS) + ["__version__"]


def __getattr__(name):
    if name in _ESTIMATORS:
        value = getattr(importlib.import_module(f".{_ESTIMATORS[name]}", __name__), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_ESTIMATORS) | _SUBPACKAGES)
