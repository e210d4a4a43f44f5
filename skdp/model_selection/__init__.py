"""Model selection and private workflows: refit rules, private
hyperparameter search, one epsilon for a fitted pipeline (:func:`spent`), the
budgets of a workflow's fits and steps, the privacy spent by ordinary
searches, and (from :mod:`skdp.bilevel`) the bilevel tuners that choose a
regularization strength inside one private fit."""

from ..bilevel import DPBilevelLogisticRegression, DPBilevelRidge, dp_loc_gd
from ._budget import SearchBudget, plan_search_budget, share_budget
from ._private_search import PrivateGridSearchCV, PrivateRandomizedSearchCV
from ._privacy_spent import TrainingSpent, privacy_spent
from ._refit import best_within
from ._spent import Spent, spent

__all__ = [
    "DPBilevelLogisticRegression",
    "DPBilevelRidge",
    "dp_loc_gd",
    "PrivateGridSearchCV",
    "PrivateRandomizedSearchCV",
    "SearchBudget",
    "Spent",
    "TrainingSpent",
    "best_within",
    "plan_search_budget",
    "privacy_spent",
    "share_budget",
    "spent",
]
