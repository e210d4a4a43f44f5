"""Private per-feature ranges from a noisy histogram over a public range.

Each feature's public ``data_range`` is cut into ``n_bins`` equal bins and
every record, clipped into the range, adds one to exactly one bin of every
feature. Adding or removing a record therefore moves the concatenated
histogram by at most ``sqrt(n_features)`` in l2 norm, the sensitivity of its
Gaussian release. The range is then read from the noisy histogram alone
(post-processing): from the lower edge of the first bin where the noisy
cumulative count passes ``quantile`` of the noisy total, to the upper edge of
the last bin where the count from the right does; rounding outwards to bin
edges keeps the estimate on the wide side. :func:`histogram_median` reads
a feature's median from the same kind of noisy histogram.
"""

import math

import numpy as np

from ..privacy import Release


def histogram_release(n_features, share=1.0, name="histogram"):
    """The Gaussian release of the range histogram (l2 sensitivity
    ``sqrt(n_features)`` under add/remove-one)."""
    return Release(name, sensitivity=math.sqrt(n_features), share=share)


def range_histogram(X, lower, upper, n_bins, observed=None, weights=None):
    """Counts of ``X`` (clipped to ``[lower, upper]``) in ``n_bins`` equal bins.

    ``observed`` (a boolean mask of the shape of ``X``, or None for all)
    selects the entries that are counted; the others (missing values, which
    may be NaN) count nowhere, so a record still adds at most one to one bin
    of each feature. ``weights`` (one factor in [0, 1] per record, or None
    for 1) scales what each record adds: the unit factors of a fit with
    ``unit_ids``, so that a unit adds at most one to the bins of each
    feature.

    Returns an array of shape (n_features, n_bins).
    """
    X = np.asarray(X, dtype=np.float64)
    if observed is not None:
        X = np.where(observed, X, lower)
    X = np.clip(X, lower, upper)
    codes = np.floor((X - lower) / (upper - lower) * n_bins).astype(np.int64)
    codes = np.clip(codes, 0, n_bins - 1)
    n_features = X.shape[1]
    flat = codes + n_bins * np.arange(n_features)
    entry_weights = None if observed is None else np.asarray(observed, dtype=np.float64)
    if weights is not None:
        record_weights = np.asarray(weights, dtype=np.float64)[:, None]
        entry_weights = (np.broadcast_to(record_weights, X.shape) if entry_weights is None
                         else entry_weights * record_weights)
    if entry_weights is not None:
        entry_weights = entry_weights.ravel()
    return np.bincount(flat.ravel(), weights=entry_weights,
                       minlength=n_features * n_bins).reshape(n_features, n_bins).astype(np.float64)


def range_from_histogram(noisy, lower, upper, quantile):
    """Per-feature ``(lower, upper)`` read from a (noisy) histogram.

    Parameters
    ----------
    noisy : ndarray of shape (n_features, n_bins)
    lower, upper : ndarray of shape (n_features,)
        The public range the bins cut.
    quantile : float in [0, 0.5)

    Returns
    -------
    low, high : ndarray of shape (n_features,)
        Bin edges with ``low < high``.
    """
    n_features, n_bins = noisy.shape
    total = np.maximum(noisy.sum(axis=1, keepdims=True), 1.0)
    target = quantile * total
    first = np.argmax(np.cumsum(noisy, axis=1) > target, axis=1)
    last = n_bins - 1 - np.argmax(np.cumsum(noisy[:, ::-1], axis=1) > target, axis=1)
    # no bin passes (all noise): keep the whole public range
    first = np.where((np.cumsum(noisy, axis=1) > target).any(axis=1), first, 0)
    last = np.where((np.cumsum(noisy[:, ::-1], axis=1) > target).any(axis=1), last, n_bins - 1)
    lo_bin, hi_bin = np.minimum(first, last), np.maximum(first, last)
    width = (upper - lower) / n_bins
    return lower + lo_bin * width, lower + (hi_bin + 1) * width


def histogram_median(noisy, lower, upper):
    """Per-feature median read from a (noisy) histogram over ``[lower, upper]``.

    The first bin where the cumulative count reaches half the total, and the
    point inside it found by linear interpolation (the records of a bin
    taken as spread evenly over it). Post-processing of the histogram only;
    the result is always in ``[lower, upper]``, also when the noisy total is
    not positive (the caller decides from the noisy total whether to trust
    it).

    Parameters
    ----------
    noisy : ndarray of shape (n_features, n_bins)
    lower, upper : ndarray of shape (n_features,)

    Returns
    -------
    median : ndarray of shape (n_features,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing._ranges import histogram_median
    >>> histogram_median(np.array([[0.0, 4.0, 4.0, 0.0]]), np.array([0.0]), np.array([4.0]))
    array([2.])
    """
    n_features, n_bins = noisy.shape
    rows = np.arange(n_features)
    cumulative = np.cumsum(noisy, axis=1)
    half = cumulative[:, -1] / 2
    crossing = np.argmax(cumulative >= half[:, None], axis=1)
    before = np.where(crossing > 0, cumulative[rows, np.maximum(crossing - 1, 0)], 0.0)
    inside = noisy[rows, crossing]
    fraction = np.clip((half - before) / np.where(inside > 0, inside, 1.0), 0.0, 1.0)
    fraction = np.where(inside > 0, fraction, 0.5)
    width = (upper - lower) / n_bins
    return np.clip(lower + (crossing + fraction) * width, lower, upper)
