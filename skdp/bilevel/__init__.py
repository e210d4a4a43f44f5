"""Private regularization tuning in one fit: the bilevel tuners.

The estimator shells (``._estimator``: :class:`DPBilevelRidge`,
:class:`DPBilevelLogisticRegression`) plan the budget and run the outer loop
of ``._solvers`` over private inner solves: DP-Loc-GD (``._dp_loc_gd``,
also public as :func:`dp_loc_gd`), the shared DP-SGD loop, or output
perturbation. :mod:`skdp.model_selection` re-exports them.
"""

from ._dp_loc_gd import dp_loc_gd
from ._estimator import DPBilevelLogisticRegression, DPBilevelRidge

__all__ = ["DPBilevelLogisticRegression", "DPBilevelRidge", "dp_loc_gd"]
