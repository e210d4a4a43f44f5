"""The general form of a rate constraint (RaCO-DP, Eq. 6; specs/raco_dp.md §1.4).

A *generalized rate constraint* is

    Gamma(theta) = sum_terms coef * P_k(D_I; theta) <= tolerance,

where ``P_k(D_I)`` is the rate at which the model predicts class ``k`` on the
records of a local set ``D_I`` (see :mod:`skdp.fairness._subsets`).
:class:`RateConstraint` is this general form; the named builders in
:mod:`skdp.fairness._builders` expand to lists of them.
"""

from dataclasses import KW_ONLY, dataclass

from ._subsets import (
    Subset,
    _check_sizes,
    _describe_set,
    _finite_real,
    _is_int,
    _Labels,
    _mask_tuple,
    _resolve_mask,
)

__all__ = ["RateConstraint"]


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
