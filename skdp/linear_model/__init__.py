"""Linear (and MLP) classifiers and regressors trained with DP-SGD."""

from ._dpsgd import DPSGDClassifier
from ._dpsgd_regressor import DPSGDRegressor

__all__ = ["DPSGDClassifier", "DPSGDRegressor"]
