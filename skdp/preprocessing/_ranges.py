"""Private per-feature ranges from a noisy histogram over a public range.

Each feature's public ``data_range`` is cut into ``n_bins`` equal bins and
every record, clipped into the range, adds one to exactly one bin of every
feature. Adding or removing a record therefore moves the concatenated
histogram by at most ``sqrt(n_features)`` in l2 norm, the sensitivity of its
Gaussian release. The range is then read from the noisy histogram alone
(post-processing): from the lower edge of the first bin where the noisy
cumulative count passes ``quantile`` of the noisy total, to the upper edge of
the last bin where the count from the right does; rounding outwards to bin
edges keeps the estimate on the wide side.
"""

import math

import numpy as np

from ..privacy import Release


def histogram_release(n_features, share=1.0, name="histogram"):
    """The Gaussian release of the range histogram (l2 sensitivity
    ``sqrt(n_features)`` under add/remove-one)."""
    return Release(name, sensitivity=math.sqrt(n_features), share=share)


def range_histogram(X, lower, upper, n_bins):
    """Counts of ``X`` (clipped to ``[lower, upper]``) in ``n_bins`` equal bins.

    Returns an array of shape (n_features, n_bins).
    """
    X = np.clip(np.asarray(X, dtype=np.float64), lower, upper)
    codes = np.floor((X - lower) / (upper - lower) * n_bins).astype(np.int64)
    codes = np.clip(codes, 0, n_bins - 1)
    n_features = X.shape[1]
    flat = codes + n_bins * np.arange(n_features)
    return np.bincount(flat.ravel(), minlength=n_features * n_bins).reshape(
        n_features, n_bins
    ).astype(np.float64)


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
