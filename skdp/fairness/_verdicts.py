"""Verdicts on rate constraints from a private check of a returned model.

A fairness estimator's model check releases, once, the noisy counts of
(group, true class, predicted class) of its training records. The
constraint values of those counts, their noise (by Monte Carlo over the
public noise distribution) and a three-way verdict per constraint
(:func:`skdp.privacy.bound_verdicts`) follow by post-processing; RaCO-DP
reads them against its tolerances, DP-FERMI against a bound the user gives.
"""

from dataclasses import dataclass

import numpy as np
import torch

from ..privacy import bound_verdicts
from ._rates import constraint_values

__all__ = ["ConstraintCheck", "check_constraints", "constraint_values_of_counts"]

#: Monte Carlo draws for the noise of the checked constraint values.
CHECK_DRAWS = 200


@dataclass(frozen=True)
class ConstraintCheck:
    """Constraint values of a returned model and their verdicts.

    Attributes
    ----------
    names : list of str
        The constraints' names.
    excess : ndarray of shape (n_constraints,)
        Noisy constraint value minus its tolerance (positive: beyond it).
    std : ndarray of shape (n_constraints,)
        Standard deviation of ``excess`` due to the check's noise (0 when
        the counts are exact).
    verdicts : ndarray of shape (n_constraints,), dtype object
        ``"met"``, ``"violated"`` or ``"undetermined"`` at ``confidence``.
    confidence : float
        One-sided confidence of each verdict.
    """

    names: list
    excess: np.ndarray
    std: np.ndarray
    verdicts: np.ndarray
    confidence: float

    def as_frame(self):
        """The check as a :class:`pandas.DataFrame`, one row per constraint."""
        import pandas as pd

        return pd.DataFrame({"excess": self.excess, "std": self.std,
                             "verdict": self.verdicts}, index=pd.Index(self.names,
                                                                       name="constraint"))


def constraint_values_of_counts(compiled, counts, min_denominator=1.0):
    """Hard constraint values (clipped rates) of ``compiled`` from counts of
    (group, true class, predicted class), shape (n_groups, n_classes,
    n_classes); one group's counts serve every group when there is one."""
    atom_cell = np.asarray(compiled.atom_cell)  # (classes, groups) -> cell
    hist = np.zeros((compiled.n_cells, counts.shape[2]))
    for label in range(atom_cell.shape[0]):
        for group in range(atom_cell.shape[1]):
            cell = atom_cell[label, group]
            if cell >= 0:
                hist[cell] += counts[min(group, counts.shape[0] - 1), label]
    values = constraint_values(torch.as_tensor(hist), compiled,
                               min_denominator=min_denominator, clip_rates=True)
    return values.numpy()


def check_constraints(compiled, counts, std, *, confidence=0.95, min_denominator=1.0):
    """The :class:`ConstraintCheck` of ``compiled`` on noisy ``counts``.

    Parameters
    ----------
    compiled : CompiledConstraints
        The constraints, with their tolerances.
    counts : ndarray of shape (n_groups, n_classes, n_classes)
        Noisy counts of (group, true class, predicted class).
    std : float or None
        Standard deviation of the noise on each count (None: exact).
    confidence : float, default=0.95
        One-sided confidence of each verdict.
    min_denominator : float, default=1.0
        Floor of the group sizes dividing the counts.

    Returns
    -------
    ConstraintCheck
    """
    values = constraint_values_of_counts(compiled, counts, min_denominator)
    spread = np.zeros(compiled.n_constraints)
    if std is not None and compiled.n_constraints:
        # the public noise distribution around the released counts: how far
        # the values move (a fixed seed: post-processing, reproducible)
        rng = np.random.default_rng(0)
        draws = [constraint_values_of_counts(
            compiled, counts + rng.normal(0.0, std, counts.shape), min_denominator)
            for _ in range(CHECK_DRAWS)]
        spread = np.std(draws, axis=0)
    excess = values - np.asarray(compiled.tolerance, dtype=np.float64)
    return ConstraintCheck(names=list(compiled.names), excess=excess, std=spread,
                           verdicts=bound_verdicts(excess, spread, confidence),
                           confidence=float(confidence))
