"""Whole-array evaluation of the PLD accountant's epsilon for Gaussian
releases (a search aid).

Calibrating a noise multiplier (or a step count) is a root search on the
accountant's epsilon. One evaluation by dp-accounting's ``PLDAccountant``
spends most of its time in Python loops: the connect-the-dots PLD of one
Poisson-subsampled Gaussian step is built from the hockey-stick divergence at
every point of its loss grid (about 6,000 points per neighbouring direction
at skdp's discretization), one scalar call per point, and the tail bound of a
T-fold composition takes 40 separate log-sum-exp passes. This module runs the
same construction -- the same grid, the same divergences, the same
connect-the-dots masses, the same Chernoff truncation, FFT self-convolution,
tail truncation after each composition and epsilon scan -- on whole numpy
arrays, 4-10 times faster, for any composition of Gaussian and
Poisson-subsampled Gaussian releases.

Its numbers only steer the search. They agree with the accountant's to
rounding (``tests/test_accounting.py`` checks it, so a change in
dp-accounting's construction shows there), but
:func:`~skdp.privacy._accounting.certified_search` certifies the answer with
a real dp-accounting evaluation, and that is the epsilon every report
carries; a replica that drifted would only cost evaluations.
"""
import math

import dp_accounting as dpa
import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_mechanism as plm
from scipy import fft, signal, special

# dp-accounting's defaults for a Gaussian PLD and its self-composition
_LOG_MASS_TRUNCATION = -50.0
_TAIL_MASS_TRUNCATION = 1e-15

#: The standard normal quantile at which dp-accounting truncates a Gaussian
#: step's loss (``ppf(exp(_LOG_MASS_TRUNCATION) / 2)``, scipy's ``ndtri``).
_TAIL_QUANTILE = float(special.ndtri(0.5 * math.exp(_LOG_MASS_TRUNCATION)))


def _log_a_exp_b_plus_c(a, b, c):
    """log(a * exp(b) + c) for a > 0 > c, elementwise over ``b``."""
    d = b + np.log(a)
    out = d + np.log1p(-np.exp(np.log(-c) - d))
    return np.where(b == 0, np.log(a + c), out)


def _mu_upper_cdf(x, sigma, q, adjacency):
    """dp-accounting's ``mu_upper_cdf`` of a sensitivity-1 Gaussian loss: the
    same ``ndtr`` that its ``scipy.stats.norm`` evaluates, without that
    distribution's per-call overhead."""
    if adjacency == plm.AdjacencyType.ADD:
        return special.ndtr(x / sigma)
    if q == 1.0:
        return special.ndtr((x + 1) / sigma)
    return (1 - q) * special.ndtr(x / sigma) + q * special.ndtr((x + 1) / sigma)


def _mu_lower_log_cdf(x, sigma, q, adjacency):
    """dp-accounting's ``mu_lower_log_cdf`` of a sensitivity-1 Gaussian loss
    (``log_ndtr``, as :func:`_mu_upper_cdf`)."""
    if adjacency == plm.AdjacencyType.REMOVE:
        return special.log_ndtr(x / sigma)
    if q == 1.0:
        return special.log_ndtr((x - 1) / sigma)
    return np.logaddexp(np.log1p(-q) + special.log_ndtr(x / sigma),
                        np.log(q) + special.log_ndtr((x - 1) / sigma))


def _hockey_stick(epsilons, sigma, q, adjacency):
    """Hockey-stick divergence of one (subsampled) Gaussian step at ``epsilons``.

    The privacy loss is non-increasing in x, so the divergence at eps is
    mu_upper_cdf(x) - e^eps mu_lower_cdf(x) at the largest x whose loss is
    at least eps.
    """
    deltas = np.zeros_like(epsilons)
    if q == 1.0:
        inside = np.ones_like(epsilons, dtype=bool)
        unsubsampled = epsilons
    elif adjacency == plm.AdjacencyType.ADD:
        inside = epsilons < -math.log1p(-q)
        with np.errstate(divide="ignore", invalid="ignore"):
            unsubsampled = -_log_a_exp_b_plus_c(1 / q, -epsilons[inside], 1 - 1 / q)
        at_edge = np.isclose(epsilons[inside], -math.log(1 - q), rtol=1e-9, atol=0.0)
        unsubsampled = np.where(at_edge, np.inf, unsubsampled)
    else:
        inside = epsilons > math.log1p(-q)
        deltas[~inside] = -np.expm1(epsilons[~inside])
        at_edge = np.isclose(epsilons[inside], math.log(1 - q), rtol=1e-9, atol=0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            unsubsampled = _log_a_exp_b_plus_c(1 / q, epsilons[inside], 1 - 1 / q)
        unsubsampled = np.where(at_edge, -np.inf, unsubsampled)
    # inverse of the unsubsampled loss s (-s/2 - x) / sigma^2 (s = 1); ADD
    # shifts it by the sensitivity
    cutoffs = -0.5 - unsubsampled * sigma**2
    if adjacency == plm.AdjacencyType.ADD:
        cutoffs = cutoffs + 1.0
    eps_in = epsilons[inside]
    deltas[inside] = (_mu_upper_cdf(cutoffs, sigma, q, adjacency)
                      - np.exp(eps_in + _mu_lower_log_cdf(cutoffs, sigma, q, adjacency)))
    return np.clip(deltas, 0.0, 1.0)


def _privacy_loss(x, sigma, q, adjacency):
    """dp-accounting's privacy loss at the point ``x`` of a sensitivity-1
    Gaussian step (``GaussianPrivacyLoss.privacy_loss``), in the same
    operations."""
    if adjacency == plm.AdjacencyType.ADD:
        return -_privacy_loss(-x, sigma, q, plm.AdjacencyType.REMOVE)
    loss = (-0.5 - x) / (sigma**2)
    if q == 1.0:
        return loss
    return pld_common.log_a_times_exp_b_plus_c(q, loss, 1 - q)


def _connect_dots_bounds(sigma, q, adjacency):
    """``(epsilon_lower, epsilon_upper)``: the losses between which
    dp-accounting builds a step's connect-the-dots grid
    (``GaussianPrivacyLoss.connect_dots_bounds``: the losses at its tail
    truncation points), without building the loss object (its frozen
    ``scipy.stats`` normal costs more than the rest of a step's bounds)."""
    lower = _TAIL_QUANTILE * sigma
    upper = -lower
    if adjacency == plm.AdjacencyType.ADD:
        upper += 1
    else:
        lower -= 1
    return _privacy_loss(upper, sigma, q, adjacency), _privacy_loss(lower, sigma, q, adjacency)


def _step_pmf(sigma, q, adjacency, discretization):
    """Connect-the-dots PLD of one step: (lowest loss index, masses, mass at +inf)."""
    epsilon_lower, epsilon_upper = _connect_dots_bounds(sigma, q, adjacency)
    lower = math.floor(epsilon_lower / discretization)
    upper = math.ceil(epsilon_upper / discretization)
    deltas = _hockey_stick(np.arange(lower, upper + 1) * discretization, sigma, q, adjacency)
    if lower == upper:
        return lower, np.array([1.0 - deltas[0]]), float(deltas[0])
    deltas = np.minimum.accumulate(deltas)
    diffs = np.diff(deltas)
    probs = np.empty_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(discretization)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(discretization)) / math.expm1(discretization)
    probs[-1] = diffs[-1] / math.expm1(-discretization)
    return lower, np.maximum(0.0, probs), float(deltas[-1])


def _power(values, exponent):
    """``values ** exponent`` (integer exponent >= 1) by repeated squaring:
    a few complex products instead of a complex log and exp per entry."""
    result, base = None, values
    while True:
        if exponent & 1:
            result = base if result is None else result * base
        exponent >>= 1
        if not exponent:
            return result
        base = base * base


def _self_compose(pmf, count):
    """``count``-fold composition, truncating tails of at most 1e-15 by a
    Chernoff bound on 40 orders of the moment generating function."""
    lower, probs, infinity = pmf
    size = len(probs)
    upper_bound, lower_bound = (size - 1) * count, 0
    orders = np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / size
    # moment generating function at orders +-k / size (k = 1..20): the terms
    # are probs * exp(index / size)^(+-k), at most e^20, so no log-sum-exp
    # shift is needed and the powers come by repeated multiplication
    growth = np.exp(np.arange(size) / size)
    mgfs = np.empty(len(orders))
    for sign, ratio in ((1, growth), (-1, 1 / growth)):
        terms = probs
        for k in range(1, 21):
            terms = terms * ratio
            mgfs[20 + k - 1 if sign > 0 else 20 - k] = terms.sum()
    with np.errstate(divide="ignore"):
        bounds = (count * np.log(mgfs) + math.log(2 / _TAIL_MASS_TRUNCATION)) / orders
    for order, bound in zip(orders, bounds):
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper_bound = min(upper_bound, math.ceil(bound))
        else:
            lower_bound = max(lower_bound, math.floor(bound))
    length = upper_bound - lower_bound + 1
    fast = fft.next_fast_len(max(length, size))
    wrapped = fft.irfft(_power(fft.rfft(probs, fast), count), fast)
    out = np.roll(wrapped, -lower_bound)[:length]
    infinity = _TAIL_MASS_TRUNCATION - math.expm1(count * math.log1p(-infinity))
    return lower * count + lower_bound, out, infinity


def _truncate(pmf):
    """Drop the longest prefix and suffix of mass at most 5e-16 each: the
    prefix's mass moves to the first kept loss, the suffix's to +infinity
    (pessimistic), as dp-accounting does after each composition."""
    lower, probs, infinity = pmf
    half = _TAIL_MASS_TRUNCATION / 2

    def prefix(values):
        over = np.add.accumulate(values) > half
        return int(np.argmax(over)) if over.any() else len(values)

    left = prefix(probs)
    right = max(len(probs) - prefix(probs[::-1]), left + 1)
    kept = probs[left:right].copy()
    kept[0] += np.sum(probs[:left])
    return lower + left, kept, infinity + np.sum(probs[right:])


def _compose(first, second):
    lower1, probs1, inf1 = first
    lower2, probs2, inf2 = second
    probs = signal.fftconvolve(probs1, probs2)
    return _truncate((lower1 + lower2, probs, inf1 + inf2 - inf1 * inf2))


def _epsilon(pmf, delta, discretization):
    """Smallest epsilon whose hockey-stick divergence is at most ``delta``,
    scanning losses from the top as dp-accounting does."""
    lower, probs, infinity = pmf
    if infinity > delta:
        return math.inf
    probs = probs[::-1]
    upper_loss = (lower + len(probs) - 1) * discretization
    steps = np.full(len(probs), -discretization)
    steps[0] = upper_loss
    losses = np.add.accumulate(steps)
    upper_after = np.add.accumulate(np.concatenate(([infinity], probs)))
    lower_after = np.add.accumulate(np.concatenate(([0.0], np.exp(-losses) * probs)))
    upper_before, lower_before = upper_after[:-1], lower_after[:-1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        stop = (upper_before > delta) & (lower_before > 0) & (
            np.log((upper_before - delta) / lower_before) >= losses
        )
    early = (upper_after[1:] >= delta) & (lower_after[1:] == 0)
    first_stop = int(np.argmax(stop)) if stop.any() else len(probs)
    if early[:first_stop].any():
        return max(0.0, float(losses[int(np.argmax(early))]))
    mass_upper, mass_lower = upper_after[first_stop], lower_after[first_stop]
    if mass_upper <= mass_lower + delta:
        return 0.0
    return math.log((mass_upper - delta) / mass_lower)


def _gaussian_pld(sigma, q, count, discretization):
    """(remove, add) PMFs of a Gaussian release with noise multiplier
    ``sigma``, Poisson-subsampled at rate ``q`` and self-composed ``count``
    times (``count=None``: a plain Gaussian, composed by the caller in its
    multiplier, not self-composed). ``add`` is None for a symmetric PLD."""
    directions = [plm.AdjacencyType.REMOVE]
    if q < 1.0:
        directions.append(plm.AdjacencyType.ADD)
    pmfs = [_step_pmf(sigma, q, adjacency, discretization) for adjacency in directions]
    if count is not None:
        pmfs = [_self_compose(pmf, count) for pmf in pmfs]
    return pmfs[0], (pmfs[1] if len(pmfs) > 1 else None)


def _releases(event, count=1):
    """(sigma, q, count) of every Gaussian release in ``event``, in the order
    dp-accounting's PLD accountant composes them (a plain Gaussian release
    repeated ``c`` times is one with multiplier ``sigma / sqrt(c)`` and
    count None); raises ValueError for anything else."""
    if isinstance(event, dpa.NoOpDpEvent):
        return []
    if isinstance(event, dpa.SelfComposedDpEvent):
        return _releases(event.event, count * event.count)
    if isinstance(event, dpa.ComposedDpEvent):
        return [r for e in event.events for r in _releases(e, count)]
    if isinstance(event, dpa.GaussianDpEvent) and event.noise_multiplier > 0:
        return [(event.noise_multiplier / math.sqrt(count), 1.0, None)]
    if (isinstance(event, dpa.PoissonSampledDpEvent)
            and isinstance(event.event, dpa.GaussianDpEvent)
            and event.event.noise_multiplier > 0 and 0 <= event.sampling_probability <= 1):
        if event.sampling_probability == 0:
            return []
        return [(event.event.noise_multiplier, event.sampling_probability, count)]
    raise ValueError(f"no whole-array estimate for {event!r}")


def can_estimate(event):
    """Whether :func:`epsilon_estimate` handles ``event``: compositions of
    Gaussian and Poisson-subsampled Gaussian releases."""
    try:
        _releases(event)
    except ValueError:
        return False
    return True


def epsilon_estimate(event, delta, discretization):
    """Epsilon of ``event`` under add/remove neighbours as dp-accounting's PLD
    accountant with value discretization ``discretization`` computes it (to
    rounding): a search aid, not a certified epsilon.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        Gaussian and Poisson-subsampled Gaussian releases, self-composed and
        composed in any nesting (see :func:`can_estimate`).
    delta : float
    discretization : float

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For any other event.
    """
    remove = add = (0, np.ones(1), 0.0)  # no release yet
    symmetric = True
    for sigma, q, count in _releases(event):
        pld_remove, pld_add = _gaussian_pld(float(sigma), float(q), count, discretization)
        if not (symmetric and pld_add is None):
            # a symmetric PLD's add side is its remove side
            add = _compose(remove if symmetric else add,
                           pld_remove if pld_add is None else pld_add)
            symmetric = False
        remove = _compose(remove, pld_remove)
    epsilon = _epsilon(remove, delta, discretization)
    if not symmetric:
        epsilon = max(epsilon, _epsilon(add, delta, discretization))
    return epsilon
