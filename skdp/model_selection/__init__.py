"""Model selection for fair and private learning: refit rules, private
hyperparameter search, and the privacy spent by ordinary searches."""

from ._private_search import PrivateGridSearchCV, PrivateRandomizedSearchCV
from ._privacy_spent import TrainingSpent, privacy_spent
from ._refit import best_within

__all__ = [
    "PrivateGridSearchCV",
    "PrivateRandomizedSearchCV",
    "TrainingSpent",
    "best_within",
    "privacy_spent",
]
