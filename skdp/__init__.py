"""skdp: differentially private scikit-learn estimators with constraints."""

from .fairness import DPFERMIClassifier, DPRateConstrainedClassifier
from .linear_model import DPSGDClassifier, DPSGDRegressor
from .model_selection import DPBilevelLogisticRegression, DPBilevelRidge
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
