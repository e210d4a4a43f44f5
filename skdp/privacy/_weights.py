"""Sample and class weights, the one implementation every trainer shares.

A weighted fit gives each record a factor ``a_i = w_i / max_sample_weight``
in [0, 1] (:func:`record_weight_factors`; ``w_i`` clipped to the public
bound ``max_sample_weight``). The factor multiplies the record's
contribution to every released statistic *after* that contribution is
clipped or bounded: its clipped gradient (the model backends of
:mod:`skdp.models` fold ``a_i`` into every clipped gradient sum) and its
other per-record terms (:func:`weigh`: histogram rows, counts, clipped dual
statistics). A record of factor ``a_i <= 1`` moves each clipped sum by at
most ``a_i`` times its bound, so every sensitivity -- and with it the noise
and the accountant's epsilon -- is the one of the unweighted fit, whatever
the weights. Poisson sampling stays per record.

:func:`bound_units` bounds the contribution of a privacy unit (a person
with many records) by the same factors: at most ``max_records_per_unit``
records of a unit are kept, each with the factor ``1 / min(|u|, k)``, so the
factors of a unit sum to 1 and a unit moves each sum as one record does.

:func:`balanced_class_weights` turns (noisy) class counts into the weights
of ``class_weight="balanced"`` (post-processing of an accounted release).
"""

from dataclasses import dataclass

import numpy as np

#: ``balanced_class_weights`` keeps every weight within this factor of the
#: largest (a noisy count near zero would otherwise weigh every other class
#: down to nothing).
BALANCED_MAX_RATIO = 100.0


def record_weight_factors(weights, max_weight):
    """Per-record factors ``min(w_i, max_weight) / max_weight``, in [0, 1].

    The one place where sample weights become the factors that multiply
    each record's clipped contribution (see the module docstring): weights
    above ``max_weight`` count as ``max_weight`` and a weight that is not a
    number counts as 0, so no weight can move a clipped sum by more than its
    bound.

    Parameters
    ----------
    weights : torch.Tensor of shape (n_records,)
        Non-negative sample weights.
    max_weight : float
        The public bound ``max_sample_weight`` (positive).

    Returns
    -------
    torch.Tensor of shape (n_records,)

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import record_weight_factors
    >>> record_weight_factors(torch.tensor([0.0, 0.5, 2.0, 1e30]), 2.0)
    tensor([0.0000, 0.2500, 1.0000, 1.0000])
    """
    if not max_weight > 0:
        raise ValueError(f"max_weight must be positive, got {max_weight!r}.")
    return weights.nan_to_num(nan=0.0).clamp(0.0, float(max_weight)).div(float(max_weight))


def weigh(values, weights):
    """``values`` with each record's column multiplied by its weight factor.

    ``values`` has the records on its last axis (class-major columns);
    ``weights`` are factors in [0, 1] from :func:`record_weight_factors`, or
    None, which returns ``values`` itself (the unweighted code path, bit for
    bit). Applied to a per-record statistic *after* it is clipped, it leaves
    the statistic's sensitivity unchanged.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import weigh
    >>> weigh(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([1.0, 0.5]))
    tensor([[1., 1.],
            [3., 2.]])
    """
    if weights is None:
        return values
    return values * weights.to(values.dtype)


def balanced_class_weights(counts):
    """``n / (n_classes * count_c)`` of class counts (noisy ones floored at
    1), each at least the largest over :data:`BALANCED_MAX_RATIO`.

    Parameters
    ----------
    counts : array-like of shape (n_classes,)
        Class counts, e.g. released with Gaussian noise (may be negative).

    Returns
    -------
    ndarray of shape (n_classes,)

    Examples
    --------
    >>> from skdp.privacy import balanced_class_weights
    >>> balanced_class_weights([30.0, 10.0, -2.0]).round(3).tolist()
    [0.456, 1.367, 13.667]
    """
    counts = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    weights = counts.sum() / (len(counts) * counts)
    return np.maximum(weights, weights.max() / BALANCED_MAX_RATIO)


# ------------------------------------------------------- privacy units
@dataclass(frozen=True)
class UnitBounds:
    """The records each privacy unit keeps, and their weight factors.

    Built once per fit by :func:`bound_units`; the fit's sampler
    (:class:`~skdp.privacy.UnitSampler`) and record weights are made from it.

    Attributes
    ----------
    codes : ndarray of int64, shape (n_records,)
        Unit of each record, in ``0 .. n_units - 1``.
    n_units : int
        Number of units (public, like the number of records of a record-level
        fit).
    max_records : int
        The public bound ``k = max_records_per_unit``.
    kept : ndarray of bool, shape (n_records,)
        The records kept: at most ``k`` of each unit, a uniform random subset
        drawn independently of the records' values.
    factors : ndarray of float64, shape (n_records,)
        ``1 / min(|u|, k)`` for a kept record of unit ``u``, 0 for a dropped
        one: the factors of a unit sum to 1.
    """

    codes: np.ndarray
    n_units: int
    max_records: int
    kept: np.ndarray
    factors: np.ndarray

    @property
    def description(self):
        """The privacy unit as reports name it."""
        return f"unit (max_records_per_unit={self.max_records})"


def record_keys(n_records, generator):
    """One uniform key per record (float64), for :func:`bound_units`.

    A seeded ``generator`` gives one key (:func:`~skdp.privacy.stream_key`)
    of a counter-based stream, and record ``i`` (of all ranks' records in a
    data-parallel fit) its value ``i`` (:func:`~skdp.privacy.counter_uniforms`):
    each rank derives the keys of its own records, and they are those of
    the fit in one process. A :class:`~skdp.privacy.SecureGenerator` draws
    every key from the operating system (in a data-parallel fit, on the
    root, which sends each rank all of them).
    """
    import torch

    from ._communicator import current_communicator
    from ._random import counter_uniforms, is_secure, stream_key, uniform_

    comm = current_communicator()
    if is_secure(generator):
        return comm.draw_rows(
            lambda size: uniform_(torch.empty(size, dtype=torch.float64,
                                              device=generator.device), generator),
            n_records).cpu().numpy()
    key = stream_key(generator) if comm.is_root else torch.zeros(2, dtype=torch.int64)
    return counter_uniforms(comm.share(key), comm.offset, n_records)


def bound_units(codes, n_units, max_records, generator):
    """Bound each unit's contribution: keep at most ``max_records`` of its
    records, chosen at random, and give each kept record the factor
    ``1 / min(|u|, max_records)``.

    Every released sum of a fit adds a record's clipped (or bounded)
    contribution times its factor (:func:`weigh`, the backends'
    ``record_weights``), so a whole unit moves it by at most the bound of one
    record: the sensitivities of a record-level plan hold with units in
    place of records. The subset of a unit depends only on how many records
    it has and on uniforms drawn for them (``max_records`` smallest of one
    uniform key per record), independently of other units and of the
    values; it is drawn once for the fit, so adding or removing a unit
    changes no other unit's subset in distribution.

    Parameters
    ----------
    codes : array-like of int, shape (n_records,)
        Unit of each record, in ``0 .. n_units - 1``.
    n_units : int
    max_records : int
        At least 1.
    generator : torch.Generator or SecureGenerator

    Returns
    -------
    UnitBounds

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import bound_units
    >>> units = bound_units([0, 0, 0, 1, 2, 2], 3, 2, torch.Generator().manual_seed(0))
    >>> int(units.kept.sum()), units.factors.tolist()[3], sorted(set(units.factors[:3].tolist()))
    (5, 1.0, [0.0, 0.5])
    """
    if not (isinstance(max_records, (int, np.integer)) and max_records >= 1):
        raise ValueError(f"max_records must be an integer >= 1, got {max_records!r}.")
    codes = np.asarray(codes, dtype=np.int64)
    n = codes.shape[0]
    keys = record_keys(n, generator)
    # units counted from the smallest code held here: in a data-parallel fit
    # a rank holds a range of the codes, and its arrays stay that long
    local = codes - (codes.min() if n else 0)
    order = np.lexsort((keys, local))  # by unit, then by key
    sizes = np.bincount(local)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts[local[order]]
    kept = rank < max_records
    factors = np.where(kept, 1.0 / np.minimum(sizes, max_records)[local], 0.0)
    return UnitBounds(codes=codes, n_units=int(n_units), max_records=int(max_records),
                      kept=kept, factors=factors)
