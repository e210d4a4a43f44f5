"""Local sets: the public rules that select records by (true label, group).

A *local set* ``D_I`` (specs/raco_dp.md §1.4) is a union of *atoms*
``(y, z)``, where ``y`` is the record's true label (a code in
``[0, n_classes)``) and ``z`` its group (a code in ``[0, n_groups)``). Local
sets are described with :class:`Subset` or a boolean ``(n_classes, n_groups)``
mask. This module also holds the small validation helpers shared by the
constraint modules.

Label and group indices are always the integer codes the estimator uses
(positions in ``classes_`` and ``groups_``).
"""

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

__all__ = ["Subset"]


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



def _check_sizes(n_classes, n_groups):
    if not _is_int(n_classes) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}.")
    if not _is_int(n_groups) or n_groups < 1:
        raise ValueError(f"n_groups must be an integer >= 1, got {n_groups!r}.")



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
