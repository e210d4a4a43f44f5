"""Fairness rate constraints and the private rate-constrained classifier."""

from ._constraints import (
    CompiledConstraints,
    DemographicParity,
    EqualizedOdds,
    EqualOpportunity,
    FalseNegativeRate,
    FalsePositiveRate,
    PositiveRateBound,
    RateConstraint,
    Subset,
    make_constraints,
)
from ._rate_constrained import DPRateConstrainedClassifier

__all__ = [
    "CompiledConstraints",
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
