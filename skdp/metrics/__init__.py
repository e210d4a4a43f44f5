"""Fairness metrics and scorers.

Metrics compare rates of hard predictions across groups given by
``sensitive_features`` (any number of groups; several columns form
intersectional groups), as a difference or a ratio, with fairlearn's
``method="between_groups"`` or ``"to_overall"`` or skdp's ``"one_vs_rest"``.
Scorers wrap them for ``GridSearchCV`` and ``cross_validate``, with the
groups routed as metadata (requested by default) or read from a column of
``X``.
"""

from ._fairness import (
    GroupRates,
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equal_opportunity_ratio,
    equalized_odds_difference,
    equalized_odds_ratio,
    false_negative_rate_difference,
    false_positive_rate_difference,
    group_rates,
    selection_rate,
    worst_group_accuracy,
)
from ._frame import FRAME_METRICS, REGRESSION_METRICS, SCORE_METRICS, DPMetricFrame
from ._private_scorers import (
    PRIVATE_FAIRNESS_METRICS,
    dp_fairness_metric,
    exact_fairness_scorer,
    make_private_fairness_scorer,
)
from ._scorers import (
    get_fairness_scorer,
    get_fairness_scorer_names,
    make_fairness_scorer,
    needs_sensitive_features,
)
from ._worst_group import get_worst_group_scorer, worst_class_recall, worst_group_mean_squared_error

__all__ = [
    "DPMetricFrame",
    "FRAME_METRICS",
    "PRIVATE_FAIRNESS_METRICS",
    "REGRESSION_METRICS",
    "SCORE_METRICS",
    "dp_fairness_metric",
    "exact_fairness_scorer",
    "make_private_fairness_scorer",
    "GroupRates",
    "demographic_parity_difference",
    "demographic_parity_ratio",
    "equal_opportunity_difference",
    "equal_opportunity_ratio",
    "equalized_odds_difference",
    "equalized_odds_ratio",
    "false_negative_rate_difference",
    "false_positive_rate_difference",
    "get_fairness_scorer",
    "get_fairness_scorer_names",
    "group_rates",
    "make_fairness_scorer",
    "needs_sensitive_features",
    "selection_rate",
    "worst_group_accuracy",
    "get_worst_group_scorer",
    "worst_class_recall",
    "worst_group_mean_squared_error",
]
