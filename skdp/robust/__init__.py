"""Distributionally robust learning under differential privacy.

:class:`DPDROClassifier` and :class:`DPDRORegressor` minimise the worst-case
expected loss over reweightings of the training data within a
psi-divergence (chi-square, KL, KL-regularised CVaR, Cressie-Read), with DP
Double-SPIDER, DP Recursive-SPIDER or DP-SGD on the dual objective.
"""

from ._divergences import DIVERGENCES, Divergence, make_divergence
from ._dro import DPDROClassifier, DPDRORegressor

__all__ = ["DIVERGENCES", "DPDROClassifier", "DPDRORegressor", "Divergence", "make_divergence"]
