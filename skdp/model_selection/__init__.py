"""Model selection for fair and private learning: refit rules, private
hyperparameter search, and the privacy spent by ordinary searches."""

from ._bilevel import DPBilevelLogisticRegression, DPBilevelRidge  # noqa: I001
from ._dp_loc_gd import dp_loc_gd
from ._private_search import PrivateGridSearchCV, PrivateRandomizedSearchCV
from ._privacy_spent import TrainingSpent, privacy_spent
from ._refit import best_within

__all__ = [
    "DPBilevelLogisticRegression",
    "DPBilevelRidge",
    "dp_loc_gd",
    "PrivateGridSearchCV",
    "PrivateRandomizedSearchCV",
    "TrainingSpent",
    "best_within",
    "privacy_spent",
]
