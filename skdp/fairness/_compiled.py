"""Compilation of rate constraints to arrays (specs/raco_dp.md §1.4-1.5).

:class:`~skdp.fairness.RateConstraint` is the general form of a rate
constraint; :class:`~skdp.fairness.DemographicParity`,
:class:`~skdp.fairness.EqualizedOdds`, :class:`~skdp.fairness.EqualOpportunity`,
:class:`~skdp.fairness.FalseNegativeRate`,
:class:`~skdp.fairness.FalsePositiveRate` and
:class:`~skdp.fairness.PositiveRateBound` build the usual ones.
:func:`make_constraints` expands and compiles any mix of them into a
:class:`CompiledConstraints`: the smallest partition of the atoms into cells
(Remark 1), the membership matrix ``S`` of local sets over cells, the
coefficient tensor ``A`` and the tolerances ``gamma``. The tensor functions in
:mod:`skdp.fairness._rates` evaluate those on histograms of predictions.
"""

from dataclasses import dataclass

import numpy as np
import torch

from ._builders import (
    DemographicParity,
    EqualizedOdds,
    EqualOpportunity,
    FalseNegativeRate,
    FalsePositiveRate,
    _Builder,
)
from ._rate_constraint import RateConstraint
from ._rates import TorchConstraints
from ._subsets import _check_sizes, _describe_set, _Labels

__all__ = ["CompiledConstraints", "make_constraints"]


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
