"""Named builders of the usual rate constraints (specs/raco_dp.md §1.4).

:class:`DemographicParity`, :class:`EqualizedOdds`, :class:`EqualOpportunity`,
:class:`FalseNegativeRate`, :class:`FalsePositiveRate` and
:class:`PositiveRateBound` each expand, for given ``n_classes`` and
``n_groups``, to a list of :class:`~skdp.fairness.RateConstraint`.
"""

from dataclasses import dataclass

import numpy as np

from ._rate_constraint import RateConstraint
from ._subsets import (
    Subset,
    _check_range,
    _check_sizes,
    _finite_real,
    _index_tuple,
    _is_int,
    _Labels,
)

__all__ = [
    "DemographicParity",
    "EqualOpportunity",
    "EqualizedOdds",
    "FalseNegativeRate",
    "FalsePositiveRate",
    "PositiveRateBound",
]


# -------------------------------------------------------------------- builders
def _check_slack(tolerance, owner):
    """Scalar or 1-D sequence of finite, non-negative slacks -> float or tuple."""
    arr = np.asarray(tolerance, dtype=object if tolerance is None else None)
    if arr.ndim > 1 or arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(
            f"{owner}(tolerance=...) must be a non-negative number or a 1-D array of them "
            f"(one per constraint), got {tolerance!r}."
        )
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}(tolerance=...) must be finite, got {tolerance!r}.")
    if np.any(arr < 0):
        raise ValueError(
            f"{owner}(tolerance=...) must be >= 0, got {tolerance!r}: a negative slack on a "
            "rate gap or an error rate can never be satisfied. For a lower bound on a rate "
            "use PositiveRateBound(lower=...) or a RateConstraint with negative coefficients."
        )
    return float(arr) if arr.ndim == 0 else tuple(float(v) for v in arr)


def _check_label(value, owner, name):
    if not _is_int(value) or value < 0:
        raise ValueError(f"{owner}({name}=...) must be a non-negative class code, got {value!r}.")
    return int(value)


def _check_group_selection(groups, owner):
    if groups is None or (isinstance(groups, str) and groups == "all"):
        return groups
    if isinstance(groups, str):
        raise ValueError(
            f"{owner}(groups=...) must be None (all records pooled), 'all' (one constraint "
            f"per group) or a list of group codes, got {groups!r}."
        )
    return _index_tuple(groups, owner, "groups")


def _group_selection(groups, n_groups, owner):
    """[None] for pooled records, else the list of group codes."""
    if groups is None:
        return [None]
    if groups == "all":
        return list(range(n_groups))
    _check_range(groups, n_groups, owner, "groups", "group")
    return list(groups)


class _Builder:
    """Expands to a list of :class:`RateConstraint` for given sizes.

    Subclasses implement ``_generate(n_classes, n_groups, labels)`` returning
    ``(name, terms)`` pairs; the tolerance (scalar or one per constraint) is
    attached here.
    """

    def expand(self, n_classes, n_groups, *, class_names=None, group_names=None):
        """The constraints for ``n_classes`` classes and ``n_groups`` groups.

        Parameters
        ----------
        n_classes, n_groups : int
        class_names, group_names : sequence, default=None
            Display names for the constraint names (codes when None).

        Returns
        -------
        constraints : list of RateConstraint
        """
        _check_sizes(n_classes, n_groups)
        labels = _Labels(class_names, group_names)
        generated = self._generate(n_classes, n_groups, labels)
        tol = self.tolerance
        if isinstance(tol, tuple):
            if len(tol) != len(generated):
                raise ValueError(
                    f"{type(self).__name__}(tolerance=...) has {len(tol)} values but expands to "
                    f"J={len(generated)} constraints for n_classes={n_classes}, "
                    f"n_groups={n_groups}; pass a scalar or {len(generated)} values in the "
                    "order of the constraint names."
                )
        else:
            tol = (tol,) * len(generated)
        return [RateConstraint(terms, t, name=name) for (name, terms), t in zip(generated, tol)]


def _check_variant(variant, owner):
    if variant not in ("one_vs_rest", "pairwise"):
        raise ValueError(
            f"{owner}(variant=...) must be 'one_vs_rest' or 'pairwise', got {variant!r}."
        )


@dataclass(frozen=True)
class DemographicParity(_Builder):
    """Demographic parity: every group predicts each class at the same rate.

    ``variant="one_vs_rest"`` (the paper's form, Eq. 7): for every group
    ``z`` and class ``k``, ``P_k(D[Z=z]) - P_k(D[Z!=z]) <= tolerance``;
    ``J = n_groups * n_classes`` constraints, named ``DP[group=z, class=k]``
    in group-major order. ``variant="pairwise"``: for every ordered pair of
    distinct groups, ``P_k(D[Z=z]) - P_k(D[Z=z']) <= tolerance``;
    ``J = n_groups * (n_groups - 1) * n_classes``. With one group there is
    nothing to compare and no constraint is generated.

    Parameters
    ----------
    tolerance : float or array-like of shape (n_constraints,)
        Slack ``gamma >= 0``, shared or one per constraint.
    variant : {"one_vs_rest", "pairwise"}, default="one_vs_rest"

    Examples
    --------
    >>> from skdp.fairness import DemographicParity, make_constraints
    >>> DemographicParity(0.1)
    DemographicParity(tolerance=0.1, variant='one_vs_rest')
    >>> compiled = make_constraints(DemographicParity(0.1), None, n_classes=2, n_groups=9)
    >>> compiled.n_constraints, compiled.n_cells
    (18, 9)
    """

    tolerance: object
    variant: str = "one_vs_rest"

    def __post_init__(self):
        object.__setattr__(self, "tolerance", _check_slack(self.tolerance, "DemographicParity"))
        _check_variant(self.variant, "DemographicParity")

    def _generate(self, n_classes, n_groups, labels):
        out = []
        for z in range(n_groups if n_groups > 1 else 0):
            if self.variant == "one_vs_rest":
                for k in range(n_classes):
                    out.append((
                        f"DP[group={labels.g(z)}, class={labels.c(k)}]",
                        [(Subset(groups=z), k, 1.0), (Subset(exclude_groups=z), k, -1.0)],
                    ))
            else:
                for other in range(n_groups):
                    if other == z:
                        continue
                    for k in range(n_classes):
                        out.append((
                            f"DP[group={labels.g(z)} vs {labels.g(other)}, class={labels.c(k)}]",
                            [(Subset(groups=z), k, 1.0), (Subset(groups=other), k, -1.0)],
                        ))
        return out


@dataclass(frozen=True)
class EqualizedOdds(_Builder):
    """Equalized odds: equal prediction rates across groups within each true label.

    ``variant="one_vs_rest"`` (the paper's form, Eq. 15-16): for every group
    ``z``, true label ``y`` and predicted class ``k``,
    ``P_k(D[Y=y, Z=z]) - P_k(D[Y=y, Z!=z]) <= tolerance``;
    ``J = n_classes**2 * n_groups`` constraints, named
    ``EO[group=z, label=y, class=k]`` in that (group, label, class) order.
    ``variant="pairwise"`` compares every ordered pair of distinct groups
    instead; ``J = n_classes**2 * n_groups * (n_groups - 1)``. No constraint
    with a single group.

    Parameters
    ----------
    tolerance : float or array-like of shape (n_constraints,)
        Slack ``gamma >= 0``, shared or one per constraint.
    variant : {"one_vs_rest", "pairwise"}, default="one_vs_rest"

    Examples
    --------
    >>> from skdp.fairness import EqualizedOdds, make_constraints
    >>> compiled = make_constraints(EqualizedOdds(0.1), None, n_classes=2, n_groups=2)
    >>> compiled.n_constraints, compiled.n_cells
    (8, 4)
    >>> compiled.atom_cell  # one cell per (label, group)
    array([[0, 1],
           [2, 3]])
    """

    tolerance: object
    variant: str = "one_vs_rest"

    def __post_init__(self):
        object.__setattr__(self, "tolerance", _check_slack(self.tolerance, "EqualizedOdds"))
        _check_variant(self.variant, "EqualizedOdds")

    def _generate(self, n_classes, n_groups, labels):
        out = []
        for z in range(n_groups if n_groups > 1 else 0):
            if self.variant == "one_vs_rest":
                others = [None]
            else:
                others = [o for o in range(n_groups) if o != z]
            for other in others:
                for y in range(n_classes):
                    rest = (
                        Subset(labels=y, exclude_groups=z) if other is None
                        else Subset(labels=y, groups=other)
                    )
                    versus = "" if other is None else f" vs {labels.g(other)}"
                    for k in range(n_classes):
                        out.append((
                            f"EO[group={labels.g(z)}{versus}, label={labels.c(y)}, "
                            f"class={labels.c(k)}]",
                            [(Subset(labels=y, groups=z), k, 1.0), (rest, k, -1.0)],
                        ))
        return out


@dataclass(frozen=True)
class EqualOpportunity(_Builder):
    """Equal opportunity: equal true-positive rates of ``pos_label`` across groups.

    With ``TPR(S) = P_pos(D[Y=pos] & S)``, for every group ``z`` both
    ``TPR(Z=z) - TPR(Z!=z) <= tolerance`` (named ``EqOpp[group=z, class=pos]``)
    and ``TPR(Z!=z) - TPR(Z=z) <= tolerance`` (named
    ``EqOpp[rest vs group=z, class=pos]``). With two groups the second family
    repeats the first (the rest of group 0 is group 1) and is left out, so
    ``J = 2`` for two groups and ``J = 2 * n_groups`` for three or more; none
    for one group. This is equalized odds restricted to ``Y = pos``: for a
    binary task the same set as its ``k = 0`` and ``k = 1`` constraints.

    Parameters
    ----------
    tolerance : float or array-like of shape (n_constraints,)
        Slack ``gamma >= 0``, shared or one per constraint.
    pos_label : int, default=1
        Code of the positive class.

    Examples
    --------
    >>> from skdp.fairness import EqualOpportunity, make_constraints
    >>> compiled = make_constraints(EqualOpportunity(0.05), None, n_classes=2, n_groups=2)
    >>> compiled.names
    ('EqOpp[group=0, class=1]', 'EqOpp[group=1, class=1]')
    >>> compiled.atom_cell  # only positives matter
    array([[-1, -1],
           [ 0,  1]])
    """

    tolerance: object
    pos_label: int = 1

    def __post_init__(self):
        object.__setattr__(self, "tolerance", _check_slack(self.tolerance, "EqualOpportunity"))
        _check_label(self.pos_label, "EqualOpportunity", "pos_label")

    def _generate(self, n_classes, n_groups, labels):
        pos = self.pos_label
        _check_range((pos,), n_classes, "EqualOpportunity", "pos_label", "class")
        if n_groups < 2:
            return []
        out = []
        pairs = [(+1.0, "")] + ([(-1.0, "rest vs ")] if n_groups > 2 else [])
        for sign, prefix in pairs:
            for z in range(n_groups):
                out.append((
                    f"EqOpp[{prefix}group={labels.g(z)}, class={labels.c(pos)}]",
                    [
                        (Subset(labels=pos, groups=z), pos, sign),
                        (Subset(labels=pos, exclude_groups=z), pos, -sign),
                    ],
                ))
        return out


@dataclass(frozen=True)
class FalseNegativeRate(_Builder):
    """Upper bound on the false-negative (miss) rate of chosen classes.

    For each class ``c`` in ``classes``: ``FNR_c = P(Yhat != c | Y = c) =
    sum_{k != c} P_k(D[Y=c]) <= tolerance``, named ``FNR[class=c]``. For a
    binary task the default constrains the positive class,
    ``P(Yhat=0 | Y=1) = P_0(D[Y=1])`` -- the paper's ``k = 0`` constraint
    ``P_k(D[Y!=k])`` of Eq. 17. (The paper's ``k = 1`` constraint,
    ``P_1(D[Y=0])``, is :class:`FalsePositiveRate`; for more classes its
    ``P_k(D[Y!=k])`` is ``FalsePositiveRate(pos_label=k)``.)

    Parameters
    ----------
    tolerance : float or array-like of shape (n_constraints,)
        Largest allowed miss rate, shared or one per constraint.
    classes : int, list of int or None, default=None
        Codes of the true classes whose miss rate is bounded. None: class 1
        for a binary task, every class otherwise.
    groups : None, "all" or list of int, default=None
        None bounds the rate over all records; ``"all"`` bounds it within
        every group, a list within the listed groups (one constraint per group
        and class, named ``FNR[group=z, class=c]``, group-major).

    Examples
    --------
    >>> from skdp.fairness import FalseNegativeRate, make_constraints
    >>> compiled = make_constraints(FalseNegativeRate(0.2), None, n_classes=2, n_groups=2)
    >>> compiled.names, compiled.n_cells
    (('FNR[class=1]',), 1)
    >>> compiled.coefficients[0]  # P_0 on the set {Y=1}
    array([[1., 0.]])
    """

    tolerance: object
    classes: object = None
    groups: object = None

    def __post_init__(self):
        object.__setattr__(self, "tolerance", _check_slack(self.tolerance, "FalseNegativeRate"))
        classes = _index_tuple(self.classes, "FalseNegativeRate", "classes")
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "groups", _check_group_selection(self.groups, "FalseNegativeRate"))

    def _generate(self, n_classes, n_groups, labels):
        classes = self.classes
        if classes is None:
            classes = (1,) if n_classes == 2 else tuple(range(n_classes))
        _check_range(classes, n_classes, "FalseNegativeRate", "classes", "class")
        out = []
        for z in _group_selection(self.groups, n_groups, "FalseNegativeRate"):
            where = "" if z is None else f"group={labels.g(z)}, "
            for c in classes:
                local = Subset(labels=c, groups=z)
                out.append((
                    f"FNR[{where}class={labels.c(c)}]",
                    [(local, k, 1.0) for k in range(n_classes) if k != c],
                ))
        return out


@dataclass(frozen=True)
class FalsePositiveRate(_Builder):
    """Upper bound on the false-positive rate of ``pos_label``.

    ``FPR = P(Yhat = pos | Y != pos) = P_pos(D[Y!=pos]) <= tolerance``, named
    ``FPR[class=pos]``.

    Parameters
    ----------
    tolerance : float or array-like of shape (n_constraints,)
        Largest allowed false-positive rate, shared or one per constraint.
    pos_label : int, default=1
        Code of the positive class.
    groups : None, "all" or list of int, default=None
        None bounds the rate over all records; ``"all"`` or a list of group
        codes bounds it within each group (``FPR[group=z, class=pos]``).

    Examples
    --------
    >>> from skdp.fairness import FalsePositiveRate, make_constraints
    >>> compiled = make_constraints(FalsePositiveRate(0.1, groups="all"), None, 2, 2)
    >>> compiled.names
    ('FPR[group=0, class=1]', 'FPR[group=1, class=1]')
    >>> compiled.atom_cell
    array([[ 0,  1],
           [-1, -1]])
    """

    tolerance: object
    pos_label: int = 1
    groups: object = None

    def __post_init__(self):
        object.__setattr__(self, "tolerance", _check_slack(self.tolerance, "FalsePositiveRate"))
        _check_label(self.pos_label, "FalsePositiveRate", "pos_label")
        object.__setattr__(self, "groups", _check_group_selection(self.groups, "FalsePositiveRate"))

    def _generate(self, n_classes, n_groups, labels):
        pos = self.pos_label
        _check_range((pos,), n_classes, "FalsePositiveRate", "pos_label", "class")
        out = []
        for z in _group_selection(self.groups, n_groups, "FalsePositiveRate"):
            where = "" if z is None else f"group={labels.g(z)}, "
            out.append((
                f"FPR[{where}class={labels.c(pos)}]",
                [(Subset(exclude_labels=pos, groups=z), pos, 1.0)],
            ))
        return out


@dataclass(frozen=True)
class PositiveRateBound(_Builder):
    """Bounds on the rate of predicting ``pos_label`` (selection rate / coverage).

    ``upper`` gives ``P_pos(D) <= upper``; ``lower`` gives
    ``-P_pos(D) <= -lower``, i.e. ``P_pos(D) >= lower`` -- the documented way
    to a negative right-hand side. Named
    ``PositiveRate[class=pos] <= upper`` and ``... >= lower``.

    Parameters
    ----------
    lower : float or None, default=None
        Smallest allowed rate, in ``[0, 1]``.
    upper : float or None, default=None
        Largest allowed rate, in ``[0, 1]``. At least one of the two is needed.
    pos_label : int, default=1
        Code of the class whose rate is bounded.
    groups : None, "all" or list of int, default=None
        None bounds the rate over all records; ``"all"`` or a list of group
        codes bounds it within each group.

    Examples
    --------
    >>> from skdp.fairness import PositiveRateBound, make_constraints
    >>> compiled = make_constraints(PositiveRateBound(lower=0.3, upper=0.8), None, 2, 2)
    >>> compiled.names
    ('PositiveRate[class=1] <= 0.8', 'PositiveRate[class=1] >= 0.3')
    >>> compiled.tolerance.tolist()
    [0.8, -0.3]
    """

    lower: float = None
    upper: float = None
    pos_label: int = 1
    groups: object = None

    def __post_init__(self):
        for name in ("lower", "upper"):
            value = getattr(self, name)
            if value is not None:
                value = _finite_real(value, f"PositiveRateBound({name}=...)")
                if not 0.0 <= value <= 1.0:
                    raise ValueError(
                        f"PositiveRateBound({name}=...) must lie in [0, 1] (it bounds a rate), "
                        f"got {value}."
                    )
                object.__setattr__(self, name, value)
        if self.lower is None and self.upper is None:
            raise ValueError("PositiveRateBound needs lower=..., upper=... or both.")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(
                f"PositiveRateBound(lower={self.lower}, upper={self.upper}) is infeasible: "
                "lower must not exceed upper."
            )
        _check_label(self.pos_label, "PositiveRateBound", "pos_label")
        object.__setattr__(self, "groups", _check_group_selection(self.groups, "PositiveRateBound"))

    def expand(self, n_classes, n_groups, *, class_names=None, group_names=None):
        """The constraints for ``n_classes`` classes and ``n_groups`` groups.

        Parameters
        ----------
        n_classes, n_groups : int
        class_names, group_names : sequence, default=None
            Display names for the constraint names (codes when None).

        Returns
        -------
        constraints : list of RateConstraint
        """
        _check_sizes(n_classes, n_groups)
        labels = _Labels(class_names, group_names)
        pos = self.pos_label
        _check_range((pos,), n_classes, "PositiveRateBound", "pos_label", "class")
        out = []
        for z in _group_selection(self.groups, n_groups, "PositiveRateBound"):
            where = "" if z is None else f"group={labels.g(z)}, "
            rate = f"PositiveRate[{where}class={labels.c(pos)}]"
            local = Subset(groups=z)
            if self.upper is not None:
                out.append(RateConstraint(
                    [(local, pos, 1.0)], self.upper, name=f"{rate} <= {self.upper:g}"
                ))
            if self.lower is not None:
                out.append(RateConstraint(
                    [(local, pos, -1.0)], -self.lower, name=f"{rate} >= {self.lower:g}"
                ))
        return out
