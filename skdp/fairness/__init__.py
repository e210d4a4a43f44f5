"""Fairness rate constraints and the private rate-constrained classifier."""

from ._builders import (
    DemographicParity,
    EqualizedOdds,
    EqualOpportunity,
    FalseNegativeRate,
    FalsePositiveRate,
    PositiveRateBound,
)
from ._compiled import CompiledConstraints, make_constraints
from ._dp_fermi import DPFERMIClassifier
from ._rate_constraint import RateConstraint
from ._rate_constrained import DPRateConstrainedClassifier
from ._subsets import Subset

__all__ = [
    "CompiledConstraints",
    "DPFERMIClassifier",
    "DPRateConstrainedClassifier",
    "DemographicParity",
    "EqualOpportunity",
    "EqualizedOdds",
    "FalseNegativeRate",
    "FalsePositiveRate",
    "PositiveRateBound",
    "RateConstraint",
    "Subset",
    "make_constraints",
]
