"""skdp: differentially private scikit-learn estimators with constraints."""

from . import audit, federated, model_selection  # noqa: F401  (federated registers the Flower engine)
from .bilevel import DPBilevelLogisticRegression, DPBilevelRidge
from .fairness import DPFERMIClassifier, DPRateConstrainedClassifier
from .linear_model import DPSGDClassifier, DPSGDRegressor
from .robust import DPDROClassifier, DPDRORegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "DPBilevelLogisticRegression",
    "DPBilevelRidge",
    "DPDROClassifier",
    "DPDRORegressor",
    "DPFERMIClassifier",
    "DPRateConstrainedClassifier",
    "DPSGDClassifier",
    "DPSGDRegressor",
    "__version__",
]
