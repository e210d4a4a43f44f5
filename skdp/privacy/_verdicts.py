"""Three-way verdicts on noisy values: met, violated, or undetermined.

A private fit that checks a bound on a noisy release (a fairness constraint,
a prediction share) can say "met" only when the bound holds beyond the
noise, "violated" only when it fails beyond it, and otherwise must say that
it cannot tell. :func:`bound_verdicts` is that rule, shared by every
estimator that reports a verdict.
"""

from statistics import NormalDist

import numpy as np

__all__ = ["MET", "UNDETERMINED", "VIOLATED", "bound_verdicts", "interval_verdicts",
           "verdict_margin"]

MET = "met"
VIOLATED = "violated"
UNDETERMINED = "undetermined"


def verdict_margin(confidence):
    """The number of noise standard deviations a one-sided verdict at
    ``confidence`` needs: the standard normal quantile of ``confidence``.

    >>> from skdp.privacy import verdict_margin
    >>> round(verdict_margin(0.95), 3)
    1.645
    """
    if not 0.5 <= confidence < 1.0:
        raise ValueError(
            f"confidence must be in [0.5, 1); got {confidence!r} (0.95 is usual).")
    return NormalDist().inv_cdf(confidence)


def bound_verdicts(excess, std, confidence=0.95):
    """Verdicts on ``excess <= 0`` for noisy values ``excess`` (a value minus
    its bound) whose noise has standard deviation ``std``.

    ``"met"`` when ``excess + z * std <= 0`` and ``"violated"`` when
    ``excess - z * std > 0``, with ``z`` the one-sided normal quantile of
    ``confidence`` (:func:`verdict_margin`); else ``"undetermined"``. With
    ``std = 0`` (exact values) the verdict is never undetermined. Each
    verdict holds at ``confidence`` on its own (no correction for several
    bounds). Reads released values and public noise scales only: it is
    post-processing.

    Parameters
    ----------
    excess : array-like of shape (n_bounds,)
        Noisy values minus their bounds.
    std : float or array-like of shape (n_bounds,)
        Standard deviation of the noise of each value.
    confidence : float, default=0.95
        One-sided confidence of each verdict, in [0.5, 1).

    Returns
    -------
    ndarray of shape (n_bounds,), dtype object
        ``"met"``, ``"violated"`` or ``"undetermined"``.

    Examples
    --------
    >>> from skdp.privacy import bound_verdicts
    >>> bound_verdicts([-0.05, 0.05, 0.01], std=0.02).tolist()
    ['met', 'violated', 'undetermined']
    """
    excess = np.atleast_1d(np.asarray(excess, dtype=np.float64))
    std = np.broadcast_to(np.asarray(std, dtype=np.float64), excess.shape)
    margin = verdict_margin(confidence) * std
    return interval_verdicts(excess - margin, excess + margin, 0.0)


def interval_verdicts(low, high, bound):
    """Verdicts on ``value <= bound`` for values known to lie in ``[low,
    high]``: ``"met"`` when ``high <= bound``, ``"violated"`` when ``low >
    bound``, else ``"undetermined"``. :func:`bound_verdicts` is this rule
    for the one-sided intervals ``excess +- z * std``.

    Examples
    --------
    >>> from skdp.privacy import interval_verdicts
    >>> interval_verdicts([0.00, 0.12, 0.05], [0.08, 0.20, 0.15], 0.1).tolist()
    ['met', 'violated', 'undetermined']
    """
    low = np.atleast_1d(np.asarray(low, dtype=np.float64))
    high = np.broadcast_to(np.asarray(high, dtype=np.float64), low.shape)
    verdicts = np.full(low.shape, UNDETERMINED, dtype=object)
    verdicts[high <= bound] = MET
    verdicts[low > bound] = VIOLATED
    return verdicts
