"""Privacy units: the ids of ``unit_ids`` (a person per id), checked and
coded, and the parameters every estimator that takes them shares."""

from numbers import Integral

import numpy as np
import torch
from sklearn.utils._param_validation import Interval

from .._groups import encode_groups
from ..privacy import current_communicator

__all__ = ["MAX_RECORDS_PER_UNIT", "UNIT_CONSTRAINTS", "unit_codes", "unit_factors"]


#: Default ``max_records_per_unit`` of the estimators that take ``unit_ids``
#: (chosen on held-out persons of benchmarks/bench_units.py, see
#: docs/units.rst; the DP-SGD estimators hold the same value).
MAX_RECORDS_PER_UNIT = 16

#: Parameter constraints of ``max_records_per_unit`` and ``unit_column``.
UNIT_CONSTRAINTS = {
    "max_records_per_unit": [Interval(Integral, 1, None, closed="left")],
    "unit_column": [str, Integral, None],
}


def unit_codes(unit_ids, n_samples):
    """``(codes, n_units)`` of ``unit_ids`` (one hashable id per row of X,
    no missing value), or ``(None, None)`` for None; a ValueError naming
    ``unit_ids`` otherwise."""
    if unit_ids is None:
        return None, None
    if hasattr(unit_ids, "ndim") and unit_ids.ndim > 1 and unit_ids.shape[1:] != (1,):
        raise ValueError(
            f"unit_ids must be one id per row of X (1-D); got shape {unit_ids.shape}.")
    values = np.asarray(unit_ids).reshape(-1) if hasattr(unit_ids, "ndim") else unit_ids
    codes, units = encode_groups(values, n_samples, name="unit_ids")
    comm = current_communicator()
    if comm.distributed:  # data-parallel: codes among the ids of every rank
        return _global_unit_codes(codes, units, comm)
    return codes, len(units)


def _global_unit_codes(codes, units, comm):
    """``(codes, n_units)`` of a rank's units numbered among the units of
    every rank, as one process holding all the rows would number them.

    When the ranks' ids lie in disjoint ranges (rows sorted by unit id
    before they were cut into shards, as :func:`~skdp.distributed.launch`
    cuts them), the global numbering is each rank's own, shifted by the
    number of units of the ranks whose ids come first: the ranks exchange
    their first and last ids and their counts only, and no unit can be on
    two ranks. Otherwise every rank receives the sorted ids of all ranks
    and the ranks check that no unit is on two of them.
    """
    spans = comm.gather_objects((units[0], units[-1], len(units)) if len(units) else None)
    offsets = _ordered_span_offsets(spans)
    if offsets is not None:
        return codes + offsets[comm.rank], sum(span[2] for span in spans if span)
    labels = comm.union(units)
    codes = np.searchsorted(labels, units)[codes]
    check_units_on_one_rank(codes, len(labels), comm)
    return codes, len(labels)


def _ordered_span_offsets(spans):
    """The number of units before each rank's when the ranks' sorted ids
    (``(first, last, count)`` per rank, None for a rank without rows) lie
    in disjoint ranges, else None (overlapping ranges, or ids that do not
    compare).

    >>> from skdp._fit.units import _ordered_span_offsets
    >>> _ordered_span_offsets([(5, 9, 3), (0, 4, 2), (10, 11, 2)])
    [2, 0, 5]
    >>> _ordered_span_offsets([(0, 5, 3), (4, 9, 2)]) is None
    True
    """
    ranks = [r for r, span in enumerate(spans) if span is not None]
    try:
        ranks.sort(key=lambda r: spans[r][0])
        if not all(spans[a][1] < spans[b][0] for a, b in zip(ranks, ranks[1:])):
            return None
    except TypeError:
        return None
    offsets, before = [0] * len(spans), 0
    for r in ranks:
        offsets[r], before = before, before + spans[r][2]
    return offsets


def check_units_on_one_rank(codes, n_units, comm):
    """A ValueError naming ``unit_ids``, the same on every rank, when a unit
    has records on more than one rank of a data-parallel fit: a unit's
    records are bounded and sampled together, by the rank that holds them."""
    held = torch.zeros(n_units, dtype=torch.int64, device=comm.device)
    held[torch.as_tensor(np.unique(codes), device=comm.device)] = 1
    comm.sum_([held])
    spread = int((held > 1).sum())
    if spread:
        raise ValueError(
            f"unit_ids: {spread} unit(s) have records on more than one rank; a data-parallel "
            "fit needs all records of a unit on one rank. Shard the rows by unit (e.g. sort "
            "them by unit id before cutting them into shards)."
        )


def unit_factors(state):
    """The unit factors of a fit with units (a float64 array), else None."""
    units = state.units
    return None if units is None else units.factors
