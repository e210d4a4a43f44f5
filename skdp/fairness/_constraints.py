"""Generalized rate constraints: public description and compilation (specs/raco_dp.md §1.4-1.5).

A *generalized rate constraint* (RaCO-DP, Eq. 6) is

    Gamma(theta) = sum_terms coef * P_k(D_I; theta) <= tolerance,

where ``P_k(D_I)`` is the rate at which the model predicts class ``k`` on the
records of a *local set* ``D_I``. Local sets are public rules on the record's
true label ``y`` (a code in ``[0, n_classes)``) and group ``z`` (a code in
``[0, n_groups)``): a union of *atoms* ``(y, z)``. They are described with
:class:`Subset` (or a boolean ``(n_classes, n_groups)`` mask).

:class:`RateConstraint` is the general form; :class:`DemographicParity`,
:class:`EqualizedOdds`, :class:`EqualOpportunity`, :class:`FalseNegativeRate`,
:class:`FalsePositiveRate` and :class:`PositiveRateBound` build the usual ones.
:func:`make_constraints` expands and compiles any mix of them into a
:class:`CompiledConstraints`: the smallest partition of the atoms into cells
(Remark 1), the membership matrix ``S`` of local sets over cells, the
coefficient tensor ``A`` and the tolerances ``gamma``. The tensor functions in
:mod:`skdp.fairness._rates` evaluate those on histograms of predictions.

Label and group indices are always the integer codes the estimator uses
(positions in ``classes_`` and ``groups_``).
"""

import math
from dataclasses import KW_ONLY, dataclass
from numbers import Integral, Real

import numpy as np
import torch

from ._rates import (
    TorchConstraints,
    cell_histogram,
    cell_weights,
    constraint_values,
    evaluate_constraints,
    evaluate_hard_constraints,
    local_set_sizes,
)

__all__ = [
    "CompiledConstraints",
    "DemographicParity",
    "EqualOpportunity",
    "EqualizedOdds",
    "FalseNegativeRate",
    "FalsePositiveRate",
    "PositiveRateBound",
    "RateConstraint",
    "Subset",
    "TorchConstraints",
    "cell_histogram",
    "cell_weights",
    "constraint_values",
    "evaluate_constraints",
    "evaluate_hard_constraints",
    "local_set_sizes",
    "make_constraints",
]


# --------------------------------------------------------------------- helpers
def _is_int(value):
    return isinstance(value, Integral) and not isinstance(value, bool)


def _index_tuple(value, owner, name):
    """None, an int, or an iterable of ints -> None or a sorted tuple of ints."""
    if value is None:
        return None
    items = (value,) if _is_int(value) else value
    try:
        items = tuple(items)
    except TypeError:
        items = (value,)
    if not all(_is_int(v) and v >= 0 for v in items):
        raise ValueError(
            f"{owner}({name}=...) must be a non-negative integer code or a list of them, "
            f"got {value!r}."
        )
    if not items:
        raise ValueError(
            f"{owner}({name}=()) selects nothing, so the local set would be empty; use "
            f"{name}=None for no restriction."
        )
    return tuple(sorted({int(v) for v in items}))


def _check_range(indices, upper, owner, name, what):
    if indices is not None and indices[-1] >= upper:
        size = "n_classes" if what == "class" else "n_groups"
        raise ValueError(
            f"{owner}: {name}={indices} refers to {what} index {indices[-1]}, but there are "
            f"only {size}={upper} ({what} codes 0..{upper - 1})."
        )


class _Labels:
    """Formats class and group codes, with optional display names."""

    def __init__(self, class_names=None, group_names=None):
        self.class_names = None if class_names is None else list(class_names)
        self.group_names = None if group_names is None else list(group_names)

    def c(self, k):
        return str(k) if self.class_names is None else str(self.class_names[k])

    def g(self, z):
        return str(z) if self.group_names is None else str(self.group_names[z])


def _set_repr(values, fmt):
    return fmt(values[0]) if len(values) == 1 else "{" + ",".join(fmt(v) for v in values) + "}"


# ---------------------------------------------------------------------- Subset
@dataclass(frozen=True, repr=False)
class Subset:
    """A local set: the records whose (label, group) pair passes public rules.

    The set is ``{(y, z) : y in labels, y not in exclude_labels, z in groups,
    z not in exclude_groups}``; ``None`` means no restriction. Indices are the
    integer codes of labels (positions in ``classes_``) and groups (positions
    in ``groups_``). Indices are checked against ``n_classes``/``n_groups``
    when the constraint is compiled, and an empty set is an error.

    Parameters
    ----------
    labels : int, list of int or None, default=None
        True labels kept (None: all).
    groups : int, list of int or None, default=None
        Groups kept (None: all).
    exclude_labels : int, list of int or None, default=None
        True labels removed.
    exclude_groups : int, list of int or None, default=None
        Groups removed.

    Examples
    --------
    >>> from skdp.fairness import Subset
    >>> rest = Subset(labels=1, exclude_groups=0)  # D[Y=1, Z!=0]
    >>> rest
    Subset(labels=(1,), exclude_groups=(0,))
    >>> rest.mask(n_classes=2, n_groups=3).astype(int)
    array([[0, 0, 0],
           [0, 1, 1]])
    >>> rest.describe()
    'Y=1, Z!=0'
    """

    labels: object = None
    groups: object = None
    exclude_labels: object = None
    exclude_groups: object = None

    _FIELDS = ("labels", "groups", "exclude_labels", "exclude_groups")

    def __post_init__(self):
        for name in self._FIELDS:
            object.__setattr__(self, name, _index_tuple(getattr(self, name), "Subset", name))

    def __repr__(self):
        args = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in self._FIELDS
            if getattr(self, name) is not None
        )
        return f"Subset({args})"

    def mask(self, n_classes, n_groups):
        """Boolean ``(n_classes, n_groups)`` mask of the atoms in the set.

        Raises
        ------
        ValueError
            If an index is out of range or the set is empty.
        """
        _check_range(self.labels, n_classes, repr(self), "labels", "class")
        _check_range(self.exclude_labels, n_classes, repr(self), "exclude_labels", "class")
        _check_range(self.groups, n_groups, repr(self), "groups", "group")
        _check_range(self.exclude_groups, n_groups, repr(self), "exclude_groups", "group")
        rows = np.zeros(n_classes, dtype=bool)
        rows[list(range(n_classes)) if self.labels is None else list(self.labels)] = True
        cols = np.zeros(n_groups, dtype=bool)
        cols[list(range(n_groups)) if self.groups is None else list(self.groups)] = True
        if self.exclude_labels is not None:
            rows[list(self.exclude_labels)] = False
        if self.exclude_groups is not None:
            cols[list(self.exclude_groups)] = False
        out = rows[:, None] & cols[None, :]
        if not out.any():
            raise ValueError(
                f"Local set {self!r} is empty for n_classes={n_classes}, n_groups={n_groups}: "
                "it contains no (label, group) pair. Rates on an empty set are undefined; "
                "remove the term or widen the set."
            )
        return out

    def describe(self, class_names=None, group_names=None):
        """Short readable description such as ``'Y=1, Z!=0'``.

        Parameters
        ----------
        class_names, group_names : sequence, default=None
            Display names indexed by code (e.g. ``classes_``, ``groups_``).
        """
        fmt = _Labels(class_names, group_names)
        parts = []
        if self.labels is not None:
            parts.append(
                ("Y=" if len(self.labels) == 1 else "Y in ") + _set_repr(self.labels, fmt.c)
            )
        if self.exclude_labels is not None:
            parts.append(
                ("Y!=" if len(self.exclude_labels) == 1 else "Y not in ")
                + _set_repr(self.exclude_labels, fmt.c)
            )
        if self.groups is not None:
            parts.append(
                ("Z=" if len(self.groups) == 1 else "Z in ") + _set_repr(self.groups, fmt.g)
            )
        if self.exclude_groups is not None:
            parts.append(
                ("Z!=" if len(self.exclude_groups) == 1 else "Z not in ")
                + _set_repr(self.exclude_groups, fmt.g)
            )
        return ", ".join(parts) if parts else "all"


def _mask_tuple(value):
    """Validate a boolean mask given as array-like; return it as nested tuples."""
    arr = np.asarray(value)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(
            "A local set must be a Subset or a boolean mask of shape (n_classes, n_groups); "
            f"got an array of shape {arr.shape}."
        )
    if arr.dtype != bool:
        if not (np.issubdtype(arr.dtype, np.number) and np.isin(arr, (0, 1)).all()):
            raise ValueError("A local-set mask must hold booleans (or 0/1).")
        arr = arr.astype(bool)
    return tuple(tuple(bool(v) for v in row) for row in arr)


def _resolve_mask(local_set, n_classes, n_groups):
    if isinstance(local_set, Subset):
        return local_set.mask(n_classes, n_groups)
    mask = np.array(local_set, dtype=bool)
    if mask.shape != (n_classes, n_groups):
        raise ValueError(
            f"A local-set mask has shape {mask.shape}, expected (n_classes, n_groups) = "
            f"({n_classes}, {n_groups})."
        )
    if not mask.any():
        raise ValueError("A local-set mask is empty: it contains no (label, group) pair.")
    return mask


def _describe_set(local_set, labels):
    if isinstance(local_set, Subset):
        return local_set.describe(labels.class_names, labels.group_names)
    atoms = [f"({labels.c(y)},{labels.g(z)})" for y, z in zip(*np.nonzero(np.array(local_set)))]
    return "(Y,Z) in {" + ",".join(atoms) + "}"


def _finite_real(value, what):
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite real number, got {value!r}.")
    return float(value)


# -------------------------------------------------------------- RateConstraint
@dataclass(frozen=True, repr=False)
class RateConstraint:
    """One generalized rate constraint ``sum_terms coef * P_k(D_I) <= tolerance``.

    The general form (RaCO-DP Eq. 6); the builders such as
    :class:`DemographicParity` expand to lists of these.

    Parameters
    ----------
    terms : sequence of (local_set, k, coef)
        ``local_set`` is a :class:`Subset` or a boolean mask of shape
        ``(n_classes, n_groups)`` over (label, group) codes; ``k`` is the
        predicted class code whose rate is taken on that set; ``coef`` is a
        finite real. Terms on the same set and class add up.
    tolerance : float, default=0.0
        Right-hand side. It may be negative, which is how lower bounds are
        written (``-P_1(D) <= -0.3`` means ``P_1(D) >= 0.3``; see also
        :class:`PositiveRateBound`), but not below the smallest value the
        left-hand side can take (``sum`` over local sets of the smallest
        coefficient, 0 included for classes without a term): such a
        constraint can never hold and compiling it raises ``ValueError``.
    name : str, default=None
        Display name; ``None`` writes the formula.

    Examples
    --------
    Bound the gap between the true-positive rates of groups 0 and 1 from
    above:

    >>> from skdp.fairness import RateConstraint, Subset, make_constraints
    >>> tpr_gap = RateConstraint(
    ...     [(Subset(labels=1, groups=0), 1, 1.0), (Subset(labels=1, groups=1), 1, -1.0)],
    ...     tolerance=0.05,
    ... )
    >>> tpr_gap
    RateConstraint('P_1(Y=1, Z=0) - P_1(Y=1, Z=1)', tolerance=0.05)
    >>> compiled = make_constraints(tpr_gap, None, n_classes=2, n_groups=3)
    >>> compiled.atom_cell  # label-0 records and group 2 are in no local set
    array([[-1, -1, -1],
           [ 0,  1, -1]])

    A lower bound on the overall selection rate:

    >>> RateConstraint([(Subset(), 1, -1.0)], tolerance=-0.3, name="P(Yhat=1) >= 0.3")
    RateConstraint('P(Yhat=1) >= 0.3', tolerance=-0.3)
    """

    terms: tuple
    tolerance: float = 0.0
    _: KW_ONLY
    name: str = None

    def __post_init__(self):
        terms = self.terms
        if isinstance(terms, (str, bytes)) or not hasattr(terms, "__iter__"):
            raise ValueError(
                "RateConstraint(terms=...) must be a sequence of (local_set, k, coef) triples, "
                f"got {terms!r}."
            )
        checked = []
        for term in terms:
            if not isinstance(term, (tuple, list)) or len(term) != 3:
                raise ValueError(
                    f"Each RateConstraint term must be a (local_set, k, coef) triple, got {term!r}."
                )
            local_set, k, coef = term
            if not isinstance(local_set, Subset):
                local_set = _mask_tuple(local_set)
            if not _is_int(k) or k < 0:
                raise ValueError(
                    f"The predicted class k of a RateConstraint term must be a non-negative "
                    f"integer code, got {k!r}."
                )
            coef = _finite_real(coef, "The coefficient of a RateConstraint term")
            checked.append((local_set, int(k), coef))
        if not checked:
            raise ValueError(
                "RateConstraint(terms=...) needs at least one (local_set, k, coef) term."
            )
        object.__setattr__(self, "terms", tuple(checked))
        tolerance = _finite_real(self.tolerance, "RateConstraint(tolerance=...)")
        object.__setattr__(self, "tolerance", tolerance)
        if self.name is not None and not isinstance(self.name, str):
            raise ValueError(
                f"RateConstraint(name=...) must be a string or None, got {self.name!r}."
            )

    def __repr__(self):
        return f"RateConstraint({self.label()!r}, tolerance={self.tolerance!r})"

    def label(self, class_names=None, group_names=None):
        """The name, or the formula ``'P_1(Z=0) - P_1(Z!=0)'`` when unnamed."""
        if self.name is not None:
            return self.name
        fmt = _Labels(class_names, group_names)
        out = ""
        for i, (local_set, k, coef) in enumerate(self.terms):
            if i == 0:
                out += "-" if coef < 0 else ""
            else:
                out += " - " if coef < 0 else " + "
            factor = "" if abs(coef) == 1.0 else f"{abs(coef):g}*"
            out += f"{factor}P_{fmt.c(k)}({_describe_set(local_set, fmt)})"
        return out

    def expand(self, n_classes, n_groups, *, class_names=None, group_names=None):
        """Return ``[self]`` after checking it against the problem's sizes.

        ``class_names`` and ``group_names`` are accepted for symmetry with the
        builders; they only affect the formula shown when compiled unnamed.
        """
        _check_sizes(n_classes, n_groups)
        self._resolve(n_classes, n_groups)
        return [self]

    def _resolve(self, n_classes, n_groups):
        """Masks, classes and coefficients; checks ranges and emptiness."""
        out = []
        for local_set, k, coef in self.terms:
            if k >= n_classes:
                raise ValueError(
                    f"{self!r}: predicted class index {k} is out of range for "
                    f"n_classes={n_classes} (codes 0..{n_classes - 1})."
                )
            out.append((_resolve_mask(local_set, n_classes, n_groups), k, coef))
        return out


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


# ---------------------------------------------------------------- compilation
@dataclass(frozen=True, eq=False, repr=False)
class CompiledConstraints:
    """A constraint set compiled to arrays (RaCO-DP, Eq. 6, tensor encoding).

    Built by :func:`make_constraints`. All arrays are read-only numpy arrays.

    Attributes
    ----------
    atom_cell : ndarray of int64 of shape (n_classes, n_groups)
        Cell of each (true label, group) pair, in ``[0, n_cells)``, or -1 for
        pairs in no local set (such records add nothing to histograms).
        Cells are the smallest partition such that every local set is a union
        of cells (Remark 1): pairs share a cell iff they belong to exactly the
        same local sets. Cells are numbered in order of first appearance of
        their pairs in row-major (label, group) order.
    membership : ndarray of float64 of shape (n_local_sets, n_cells)
        ``S``: 1 where the cell belongs to the local set, else 0.
    coefficients : ndarray of float64 of shape (n_constraints, n_local_sets, n_classes)
        ``A``: coefficient of ``P_k(local set m)`` in constraint ``j``.
    tolerance : ndarray of float64 of shape (n_constraints,)
        ``gamma``: right-hand sides.
    names : tuple of str
        One readable name per constraint.
    local_sets : ndarray of bool of shape (n_local_sets, n_classes, n_groups)
        The distinct local sets as masks over (label, group) pairs.
    local_set_names : tuple of str
        One description per local set (e.g. ``'Y=1, Z!=0'``).

    Examples
    --------
    >>> from skdp.fairness import make_constraints
    >>> compiled = make_constraints("demographic_parity", 0.1, n_classes=2, n_groups=2)
    >>> compiled
    CompiledConstraints(n_constraints=4, n_local_sets=2, n_cells=2, n_classes=2, n_groups=2)
    >>> compiled.local_set_names
    ('Z=0', 'Z!=0')
    >>> compiled.membership
    array([[1., 0.],
           [0., 1.]])
    >>> compiled.coefficients[1]  # DP[group=0, class=1]: P_1(Z=0) - P_1(Z!=0)
    array([[ 0.,  1.],
           [ 0., -1.]])
    >>> compiled.to_torch().tolerance
    tensor([0.1000, 0.1000, 0.1000, 0.1000])
    """

    atom_cell: np.ndarray
    membership: np.ndarray
    coefficients: np.ndarray
    tolerance: np.ndarray
    names: tuple
    local_sets: np.ndarray
    local_set_names: tuple

    @property
    def n_classes(self):
        """Number of classes K."""
        return self.atom_cell.shape[0]

    @property
    def n_groups(self):
        """Number of groups G."""
        return self.atom_cell.shape[1]

    @property
    def n_cells(self):
        """Number of cells Q of the global partition."""
        return self.membership.shape[1]

    @property
    def n_local_sets(self):
        """Number of distinct local sets M."""
        return self.membership.shape[0]

    @property
    def n_constraints(self):
        """Number of constraints J."""
        return self.coefficients.shape[0]

    def __repr__(self):
        return (
            f"CompiledConstraints(n_constraints={self.n_constraints}, "
            f"n_local_sets={self.n_local_sets}, n_cells={self.n_cells}, "
            f"n_classes={self.n_classes}, n_groups={self.n_groups})"
        )

    def assign_cells(self, y, groups):
        """Cell of each record from its label and group codes (-1: in no local set).

        Parameters
        ----------
        y, groups : array-like of int of shape (n_samples,)

        Returns
        -------
        cells : ndarray of int64 of shape (n_samples,)
        """
        y = np.asarray(y)
        groups = np.asarray(groups)
        if y.shape != groups.shape or y.ndim != 1:
            raise ValueError(
                f"y and groups must be 1-D of the same length, got shapes {y.shape} and "
                f"{groups.shape}."
            )
        for arr, name, upper in ((y, "y", self.n_classes), (groups, "groups", self.n_groups)):
            if arr.size and (arr.min() < 0 or arr.max() >= upper):
                raise ValueError(f"{name} must hold integer codes in [0, {upper}).")
        return self.atom_cell[y, groups]

    def to_torch(self, device=None, dtype=None):
        """The arrays as tensors, to convert once per fit.

        Parameters
        ----------
        device : str or torch.device, default=None
        dtype : torch.dtype, default=None
            Floating dtype of ``membership``, ``coefficients`` and
            ``tolerance`` (the default dtype when None); ``atom_cell`` is long.

        Returns
        -------
        TorchConstraints
        """
        dtype = torch.get_default_dtype() if dtype is None else dtype
        return TorchConstraints(
            membership=torch.as_tensor(np.array(self.membership), dtype=dtype, device=device),
            coefficients=torch.as_tensor(np.array(self.coefficients), dtype=dtype, device=device),
            tolerance=torch.as_tensor(np.array(self.tolerance), dtype=dtype, device=device),
            atom_cell=torch.as_tensor(np.array(self.atom_cell), dtype=torch.long, device=device),
        )


def _readonly(arr):
    arr.setflags(write=False)
    return arr


def _compile(constraints, n_classes, n_groups, labels):
    """Smallest partition (Remark 1), S, A, gamma from a list of RateConstraint."""
    set_index, masks, set_names = {}, [], []
    js, ms, ks, coefs = [], [], [], []
    for j, rc in enumerate(constraints):
        for (mask, k, coef), (local_set, _, _) in zip(rc._resolve(n_classes, n_groups), rc.terms):
            key = mask.tobytes()
            if key not in set_index:
                set_index[key] = len(masks)
                masks.append(mask)
                set_names.append(_describe_set(local_set, labels))
            js.append(j)
            ms.append(set_index[key])
            ks.append(k)
            coefs.append(coef)
    n_constraints, n_sets = len(constraints), len(masks)
    coefficients = np.zeros((n_constraints, n_sets, n_classes))
    np.add.at(coefficients, (np.array(js, dtype=np.int64), np.array(ms, dtype=np.int64),
                             np.array(ks, dtype=np.int64)), np.array(coefs, dtype=np.float64))
    tolerance = np.array([rc.tolerance for rc in constraints], dtype=np.float64)
    names = tuple(rc.label(labels.class_names, labels.group_names) for rc in constraints)

    # The left-hand side is at least sum_m min_k A[j, m, k] (each local set's
    # rates lie on the simplex), so a tolerance below that can never hold.
    smallest = coefficients.min(axis=2).sum(axis=1) if n_sets else np.zeros(n_constraints)
    bad = np.flatnonzero(tolerance < smallest - 1e-12)
    if bad.size:
        j = bad[0]
        raise ValueError(
            f"Constraint {names[j]!r} has tolerance={tolerance[j]:g}, below the smallest value "
            f"its left-hand side can take ({smallest[j]:g}), so it can never be satisfied. "
            "Raise the tolerance (a negative right-hand side only makes sense with negative "
            "coefficients, as in a lower bound)."
        )

    local_sets = np.stack(masks) if masks else np.zeros((0, n_classes, n_groups), dtype=bool)
    atoms = local_sets.reshape(n_sets, n_classes * n_groups).T.astype(np.uint8)  # (KG, M)
    used = atoms.any(axis=1)
    atom_cell = np.full(n_classes * n_groups, -1, dtype=np.int64)
    if used.any():
        signatures, first, inverse = np.unique(
            atoms[used], axis=0, return_index=True, return_inverse=True
        )
        order = np.argsort(first)  # number cells by first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        atom_cell[used] = rank[inverse.reshape(-1)]
        membership = signatures[order].T.astype(np.float64)
    else:
        membership = np.zeros((n_sets, 0))
    return CompiledConstraints(
        atom_cell=_readonly(atom_cell.reshape(n_classes, n_groups)),
        membership=_readonly(np.ascontiguousarray(membership)),
        coefficients=_readonly(coefficients),
        tolerance=_readonly(tolerance),
        names=names,
        local_sets=_readonly(local_sets),
        local_set_names=tuple(set_names),
    )


_ALIASES = {
    "demographic_parity": DemographicParity,
    "equalized_odds": EqualizedOdds,
    "equal_opportunity": EqualOpportunity,
    "false_negative_rate": FalseNegativeRate,
    "false_positive_rate": FalsePositiveRate,
}


def _check_sizes(n_classes, n_groups):
    if not _is_int(n_classes) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}.")
    if not _is_int(n_groups) or n_groups < 1:
        raise ValueError(f"n_groups must be an integer >= 1, got {n_groups!r}.")


def _from_string(name):
    if name not in _ALIASES:
        raise ValueError(
            f"Unknown constraint {name!r}; valid names are {sorted(_ALIASES)} (or pass a "
            "builder such as DemographicParity(0.1), a RateConstraint, or a list of them)."
        )
    return _ALIASES[name]


def make_constraints(constraint, tolerance, n_classes, n_groups, *, class_names=None,
                     group_names=None):
    """Expand and compile constraints for ``n_classes`` classes and ``n_groups`` groups.

    Parameters
    ----------
    constraint : str, builder, RateConstraint, CompiledConstraints, list or None
        ``"demographic_parity"``, ``"equalized_odds"``, ``"equal_opportunity"``,
        ``"false_negative_rate"`` or ``"false_positive_rate"`` (the builder of
        that name with the given ``tolerance`` and default options); a builder
        (:class:`DemographicParity`, :class:`EqualizedOdds`,
        :class:`EqualOpportunity`, :class:`FalseNegativeRate`,
        :class:`FalsePositiveRate`, :class:`PositiveRateBound`); a
        :class:`RateConstraint`; or a list mixing them (constraints are
        concatenated in order). None or an empty list gives no constraint. A
        ``CompiledConstraints`` of the right sizes is returned as is.
    tolerance : float, array-like or None
        Slack of the *string* entries: a scalar ``>= 0`` shared by all their
        constraints, or one value per constraint they expand to (in order).
        Builders and RateConstraints carry their own tolerance, so a scalar is
        ignored for them and an array is an error when there is no string
        entry. Required (not None) when there is a string entry.
    n_classes : int
        Number of classes K (>= 2); labels are codes ``0..K-1``.
    n_groups : int
        Number of groups G (>= 1); groups are codes ``0..G-1``. With one
        group, the group-comparison builders generate no constraint.
    class_names, group_names : sequence, default=None
        Display names used in the constraint names (e.g. ``classes_``,
        ``groups_``); codes when None.

    Returns
    -------
    CompiledConstraints

    Examples
    --------
    >>> from skdp.fairness import FalseNegativeRate, make_constraints
    >>> compiled = make_constraints(
    ...     ["demographic_parity", FalseNegativeRate(0.3)], 0.05, n_classes=2, n_groups=2,
    ...     group_names=["f", "m"],
    ... )
    >>> for name in compiled.names:
    ...     print(name)
    DP[group=f, class=0]
    DP[group=f, class=1]
    DP[group=m, class=0]
    DP[group=m, class=1]
    FNR[class=1]
    >>> compiled.tolerance.tolist()
    [0.05, 0.05, 0.05, 0.05, 0.3]
    >>> compiled.atom_cell
    array([[0, 1],
           [2, 3]])
    """
    _check_sizes(n_classes, n_groups)
    for names, size, what in ((class_names, n_classes, "class_names"),
                              (group_names, n_groups, "group_names")):
        if names is not None and len(names) != size:
            raise ValueError(f"{what} has {len(names)} entries, expected {size}.")
    if isinstance(constraint, CompiledConstraints):
        if (constraint.n_classes, constraint.n_groups) != (n_classes, n_groups):
            raise ValueError(
                f"The compiled constraints are for n_classes={constraint.n_classes}, "
                f"n_groups={constraint.n_groups}, not n_classes={n_classes}, n_groups={n_groups}."
            )
        return constraint
    if constraint is None:
        items = []
    elif isinstance(constraint, (list, tuple)):
        items = list(constraint)
    else:
        items = [constraint]
    for item in items:
        if not isinstance(item, (str, _Builder, RateConstraint)):
            raise ValueError(
                "constraint must be a constraint name, a builder (DemographicParity, "
                "EqualizedOdds, EqualOpportunity, FalseNegativeRate, FalsePositiveRate, "
                f"PositiveRateBound), a RateConstraint, or a list of them; got {item!r}."
            )
    strings = [item for item in items if isinstance(item, str)]
    builders = {name: _from_string(name) for name in strings}
    per_constraint = tolerance is not None and np.ndim(tolerance) > 0
    slices = {}
    if strings:
        if tolerance is None:
            raise ValueError(
                f"tolerance is required for the string constraint(s) {strings}: pass a "
                "slack >= 0, e.g. tolerance=0.05."
            )
        if per_constraint:
            tol = np.asarray(tolerance)
            if tol.ndim != 1:
                raise ValueError(f"tolerance must be a scalar or 1-D, got shape {tol.shape}.")
            sizes = [len(builders[s](0.0).expand(n_classes, n_groups)) for s in strings]
            total = sum(sizes)
            if tol.shape[0] != total:
                raise ValueError(
                    f"tolerance has {tol.shape[0]} values but the string constraint(s) "
                    f"{strings} expand to J={total} constraints for n_classes={n_classes}, "
                    f"n_groups={n_groups}; pass a scalar or {total} values, in the order of "
                    "the constraint names."
                )
            bounds = np.cumsum([0] + sizes)
            slices = {i: tol[bounds[i]:bounds[i + 1]] for i in range(len(strings))}
    elif per_constraint:
        raise ValueError(
            "A per-constraint tolerance array applies to string constraints only; builders "
            "and RateConstraints take their tolerance in their own constructor."
        )
    expanded = []
    position = 0
    for item in items:
        if isinstance(item, str):
            tol = slices[position] if per_constraint else tolerance
            item = builders[item](tol)
            position += 1
        expanded.extend(item.expand(
            n_classes, n_groups, class_names=class_names, group_names=group_names
        ))
    return _compile(expanded, n_classes, n_groups, _Labels(class_names, group_names))
