"""Private fair learning: the rate-constraint language shared by fairness
algorithms (builders, :class:`RateConstraint`, compiled constraint tensors),
and the algorithms built on it, each in its own package: RaCO-DP
(:mod:`.raco`, :class:`DPRateConstrainedClassifier`) and DP-FERMI
(:mod:`.fermi`, :class:`DPFERMIClassifier`)."""

from ._builders import (
    DemographicParity,
    EqualizedOdds,
    EqualOpportunity,
    FalseNegativeRate,
    FalsePositiveRate,
    PositiveRateBound,
)
from ._compiled import CompiledConstraints, make_constraints
from ._rate_constraint import RateConstraint
from ._subsets import Subset
from .fermi._estimator import DPFERMIClassifier
from .raco import DPRateConstrainedClassifier

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
