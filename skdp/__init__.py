"""skdp: differentially private scikit-learn estimators with constraints."""

from .linear_model import DPSGDClassifier

__version__ = "0.1.0.dev0"

__all__ = ["DPSGDClassifier", "__version__"]
