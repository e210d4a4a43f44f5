"""Model selection for fair and private learning: refit rules, private
hyperparameter search, the privacy spent by ordinary searches, and (from
:mod:`skdp.bilevel`) the bilevel tuners that choose a regularization
strength inside one private fit."""

from ..bilevel import DPBilevelLogisticRegression, DPBilevelRidge, dp_loc_gd
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
