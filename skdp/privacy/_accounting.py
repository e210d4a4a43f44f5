"""Privacy accounting and calibration on dp-accounting ``DpEvent``s.

Every estimator describes what it releases as a ``DpEvent`` and asks this
module for the epsilon of that event, for the noise multiplier that meets a
budget at a given step count, or for the largest step count a noise multiplier
can afford. The epsilon is always the number a dp-accounting accountant
returns for the event; nothing here evaluates a closed-form bound from a paper.

Speed: a plain ``PLDAccountant()`` (value discretization ``1e-4``) takes about
0.2 s for one T=500 subsampled-Gaussian evaluation, so a calibration by
bisection costs seconds. We use ``PLDAccountant(value_discretization_interval=
1e-3)`` -- still a pessimistic (certified upper) estimate, about 0.02 % above
the default one at typical settings and 8x cheaper -- start the search from a
Gaussian-DP central-limit guess, refine it with a safeguarded secant on
``log epsilon``, and cache results. For plans of Gaussian releases
(DP-SGD's Poisson-subsampled steps, one-off Gaussian releases, several
batches composed) the search runs on
:func:`~._pld_search.epsilon_estimate`, the same PLD construction on whole
arrays (equal to the accountant's epsilon to rounding, 4-10x cheaper), and
the accountant is called once, to certify the answer
(:func:`certified_search`); if the certificate fails the search goes on
with the accountant. A calibration then costs one accountant evaluation.
"""

import math
from functools import lru_cache

import dp_accounting as dpa
import numpy as np
from dp_accounting import pld, rdp
from scipy import optimize, special

from ._pld_search import can_estimate, epsilon_estimate

#: Value discretization of the PLD accountant used by skdp. Coarser grids give
#: larger (still certified) epsilons; 1e-3 is within 0.1 % of dp-accounting's
#: default 1e-4 at the step counts skdp trains for, at an eighth of the cost.
PLD_DISCRETIZATION = 1e-3

ACCOUNTANTS = ("pld", "rdp")
NEIGHBORING = ("add_remove", "replace")

# Calibrated noise gives an epsilon in [(1 - _CAL_RTOL) * target, target].
_CAL_RTOL = 6e-3
_MAX_NOISE = 1e4


class PrivacyBudgetError(ValueError):
    """The privacy budget cannot pay for what was asked (e.g. not one step)."""


def make_accountant(accountant="pld"):
    """Return a fresh dp-accounting accountant of the kind skdp uses.

    Parameters
    ----------
    accountant : {"pld", "rdp"}, default="pld"
        ``"pld"``: privacy-loss-distribution accountant (tight), with value
        discretization :data:`PLD_DISCRETIZATION`. ``"rdp"``: Renyi-DP
        accountant (looser, supports fewer events).

    Returns
    -------
    dp_accounting.PrivacyAccountant
        Add/remove-one neighbouring relation. Replace-one neighbours are
        handled by doubling sensitivities inside the events (see
        :func:`sensitivity_factor`), so every skdp event is read under the
        add/remove relation.

    Examples
    --------
    >>> import dp_accounting as dpa
    >>> from skdp.privacy import make_accountant
    >>> event = dpa.GaussianDpEvent(noise_multiplier=2.0)
    >>> round(make_accountant("pld").compose(event).get_epsilon(1e-5), 2)
    1.99
    """
    if accountant == "pld":
        return pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    if accountant == "rdp":
        return rdp.RdpAccountant()
    raise ValueError(
        f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}."
    )


def sensitivity_factor(neighboring):
    """Sensitivity multiplier for a neighbouring relation (1 or 2).

    Under replace-one neighbours a record can leave and another arrive, so
    every sensitivity doubles; skdp encodes that in the events by dividing
    noise multipliers (noise scale / sensitivity) by two.
    """
    if neighboring == "add_remove":
        return 1.0
    if neighboring == "replace":
        return 2.0
    raise ValueError(
        f"neighboring must be one of {NEIGHBORING}, got {neighboring!r}."
    )


def poisson_gaussian_event(noise_multiplier, sampling_rate, steps, *, neighboring="add_remove"):
    """DpEvent of ``steps`` Poisson-subsampled Gaussian releases (DP-SGD).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the l2 sensitivity of one record
        under add/remove neighbours (the clipping norm for DP-SGD).
    sampling_rate : float
        Poisson sampling probability of each record per step.
    steps : int
        Number of steps.
    neighboring : {"add_remove", "replace"}, default="add_remove"

    Returns
    -------
    dp_accounting.DpEvent

    Examples
    --------
    >>> from skdp.privacy import poisson_gaussian_event
    >>> poisson_gaussian_event(1.0, 0.01, 100)
    SelfComposedDpEvent(event=PoissonSampledDpEvent(sampling_probability=0.01, event=GaussianDpEvent(noise_multiplier=1.0)), count=100)
    """
    step = poisson_gaussian_step(noise_multiplier, sampling_rate, neighboring=neighboring)
    return dpa.SelfComposedDpEvent(step, int(steps))


def poisson_gaussian_step(noise_multiplier, sampling_rate, *, neighboring="add_remove"):
    """DpEvent of one Poisson-subsampled Gaussian release (one DP-SGD step)."""
    sigma = float(noise_multiplier) / sensitivity_factor(neighboring)
    return dpa.PoissonSampledDpEvent(
        float(sampling_rate), dpa.GaussianDpEvent(noise_multiplier=sigma)
    )


class _EventKey:
    """Hashable stand-in for an event that holds lists (``ComposedDpEvent``):
    equal when the events' reprs are, which spell out every field exactly
    (floats repr round-trip)."""

    __slots__ = ("event", "key")

    def __init__(self, event):
        self.event = event
        self.key = repr(event)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _EventKey) and self.key == other.key


@lru_cache(maxsize=4096)
def _epsilon_cached(event, delta, accountant):
    event = event.event if isinstance(event, _EventKey) else event
    return float(make_accountant(accountant).compose(event).get_epsilon(delta))


def compute_epsilon(event, delta, accountant="pld"):
    """Epsilon of ``event`` at ``delta``, from a fresh dp-accounting accountant.

    Equal to ``make_accountant(accountant).compose(event).get_epsilon(delta)``;
    results are cached per (event, delta, accountant) because events are
    immutable.

    Examples
    --------
    >>> from skdp.privacy import compute_epsilon, poisson_gaussian_event
    >>> event = poisson_gaussian_event(4.0, 0.032, 500)
    >>> round(compute_epsilon(event, 1e-5), 3)
    0.668
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}.")
    if event == dpa.NoOpDpEvent() or (
        isinstance(event, dpa.SelfComposedDpEvent) and event.count == 0
    ):
        return 0.0
    try:
        hash(event)
    except TypeError:  # events holding lists (ComposedDpEvent) are unhashable
        event = _EventKey(event)
    return _epsilon_cached(event, float(delta), accountant)


def _gdp_epsilon(sigma, delta, sampling_rate, steps):
    """Epsilon of the central-limit (mu-GDP) approximation of DP-SGD.

    Only a search aid, never reported: for Poisson-subsampled Gaussian
    DP-SGD, mu = q * sqrt(T * (exp(1/sigma^2) - 1)) (Bu et al., 2020), and
    mu-GDP gives delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
    """
    exponent = min(1.0 / sigma**2, 700.0)
    mu = sampling_rate * math.sqrt(steps * math.expm1(exponent))

    def excess(eps):
        return gdp_delta(eps, mu) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        if hi > 1e3:
            return hi
        hi *= 2
    return optimize.brentq(excess, 0.0, hi, xtol=1e-10)


def _gdp_noise_guess(target_epsilon, delta, sampling_rate, steps):
    """Noise multiplier at which the GDP approximation meets the target, and
    the local slope d log(eps) / d log(sigma) there (search aids)."""

    def log_gap(log_sigma):
        eps = _gdp_epsilon(math.exp(log_sigma), delta, sampling_rate, steps)
        return math.log(max(eps, 1e-300)) - math.log(target_epsilon)

    try:
        log_sigma = optimize.brentq(log_gap, math.log(1e-2), math.log(_MAX_NOISE), xtol=1e-6)
    except ValueError:
        return 1.0, -1.0
    h = 1e-3
    slope = (log_gap(log_sigma + h) - log_gap(log_sigma - h)) / (2 * h)
    if not np.isfinite(slope) or slope >= 0:
        slope = -1.0
    return math.exp(log_sigma), slope


def _secant_search(log_eps_of, x0, slope, log_target, *, increasing, rtol, max_evals=30):
    """Find x with f(x) = log eps in [log_target + log(1 - rtol), log_target].

    ``log_eps_of`` is monotone in x (``increasing`` tells the direction).
    The second point is aimed from ``x0`` with the guessed ``slope``; the
    bracket is expanded if needed. Returns the feasible x (f(x) <=
    log_target) closest to the target found, or None.
    """
    lower_ok = log_target + math.log1p(-rtol)
    feasible, infeasible = None, None  # (x, f) pairs
    evals = 0

    def record(x):
        nonlocal feasible, infeasible, evals
        f = log_eps_of(x)
        evals += 1
        if f <= log_target:
            if feasible is None or abs(f - log_target) < abs(feasible[1] - log_target):
                feasible = (x, f)
        elif infeasible is None or abs(f - log_target) < abs(infeasible[1] - log_target):
            infeasible = (x, f)
        return f

    aim = log_target + 0.5 * math.log1p(-rtol)
    x_prev, f_prev = x0, record(x0)
    step = (aim - f_prev) / slope
    step = math.copysign(min(max(abs(step), 1e-4), 1.0), step)
    x_cur, f_cur = x0 + step, record(x0 + step)
    while evals < max_evals:
        if feasible is not None and feasible[1] >= lower_ok:
            return feasible[0]
        if feasible is not None and infeasible is not None:
            lo, hi = feasible, infeasible
            # secant between the nearest feasible and infeasible points,
            # kept inside the bracket; bisect if it lands too close to an end.
            slope = (hi[1] - lo[1]) / (hi[0] - lo[0])
            x_new = lo[0] + (aim - lo[1]) / slope
            a, b = sorted((lo[0], hi[0]))
            width = b - a
            if not (a + 1e-3 * width < x_new < b - 1e-3 * width):
                x_new = 0.5 * (a + b)
            if width < 1e-12:
                break
        else:
            # both points on one side: extrapolate the secant to the window
            slope = (f_cur - f_prev) / (x_cur - x_prev) if x_cur != x_prev else 0.0
            if not np.isfinite(slope) or slope == 0.0 or (slope > 0) != increasing:
                slope = 1.0 if increasing else -1.0
            step = (aim - f_cur) / slope
            x_new = x_cur + math.copysign(min(max(abs(step), 1e-4), 2.0), step)
        x_prev, f_prev = x_cur, f_cur
        x_cur, f_cur = x_new, record(x_new)
    if feasible is None:
        return None
    return feasible[0]


def with_initial_event(initial_event, event):
    """``event`` preceded by the one-off release ``initial_event`` (if any)."""
    if initial_event is None:
        return event
    return dpa.ComposedDpEvent([initial_event, event])


def estimated_log_epsilon(event_of, delta, accountant):
    """``x -> log epsilon(event_of(x))`` from the whole-array PLD replica
    (:mod:`._pld_search`), or None where it does not apply (another
    accountant, or releases other than Gaussian ones)."""
    if accountant != "pld" or not can_estimate(event_of(None)):
        return None

    def log_eps(x):
        eps = epsilon_estimate(event_of(x), delta, PLD_DISCRETIZATION)
        return math.log(max(eps, 1e-300))

    return log_eps


def certified_search(log_eps, estimate, x0, slope, log_target, *, increasing, rtol):
    """:func:`_secant_search` for x with accountant log epsilon ``log_eps(x)``
    in ``[log_target + log(1 - rtol), log_target]``.

    With an ``estimate`` (see :func:`estimated_log_epsilon`) the search runs
    on it and the accountant is called once, at its answer; if that misses
    the window, the search goes on with the accountant from there. Returns
    x or None (nothing feasible found).
    """
    if estimate is not None:
        x0 = _secant_search(estimate, x0, slope, log_target, increasing=increasing,
                            rtol=rtol) or x0
        if log_target + math.log1p(-rtol) <= log_eps(x0) <= log_target:
            return x0
    return _secant_search(log_eps, x0, slope, log_target, increasing=increasing, rtol=rtol)


def _noise_search(target_epsilon, delta, sampling_rate, steps, accountant, neighboring,
                  initial_event, certify):
    """log of the calibrated noise multiplier (see
    :func:`calibrate_noise_multiplier`), or None if infeasible. Without
    ``certify``, the replica's answer alone (a guess, where it applies)."""
    factor = sensitivity_factor(neighboring)

    def event_of(log_sigma):
        sigma = 1.0 if log_sigma is None else math.exp(log_sigma)
        event = poisson_gaussian_event(sigma, sampling_rate, steps, neighboring=neighboring)
        return with_initial_event(initial_event, event)

    def log_eps(log_sigma):
        eps = compute_epsilon(event_of(log_sigma), delta, accountant)
        return math.log(max(eps, 1e-300))

    estimate = estimated_log_epsilon(event_of, delta, accountant)
    guess, slope = _gdp_noise_guess(target_epsilon, delta, sampling_rate, steps)
    guess *= factor
    log_target = math.log(target_epsilon)
    if guess >= _MAX_NOISE:
        if log_eps(math.log(_MAX_NOISE)) > log_target:
            return None
        guess = _MAX_NOISE / 2
    x0 = math.log(max(guess, 1e-2))
    if not certify and estimate is not None:
        return _secant_search(estimate, x0, slope, log_target, increasing=False, rtol=_CAL_RTOL)
    log_sigma = certified_search(log_eps, estimate, x0, slope, log_target, increasing=False,
                                 rtol=_CAL_RTOL)
    if log_sigma is None or math.exp(log_sigma) > _MAX_NOISE:
        return None
    return log_sigma


@lru_cache(maxsize=1024)
def _calibrate_noise_cached(
    target_epsilon, delta, sampling_rate, steps, accountant, neighboring, initial_event
):
    log_sigma = _noise_search(target_epsilon, delta, sampling_rate, steps, accountant,
                              neighboring, initial_event, certify=True)
    return None if log_sigma is None else math.exp(log_sigma)


def noise_multiplier_guess(target_epsilon, delta, sampling_rate, steps, *, accountant="pld",
                           neighboring="add_remove"):
    """A starting point for a calibration that composes more than one
    DP-SGD plan: the multiplier :func:`calibrate_noise_multiplier` would
    return, from the replica alone where it applies (no accountant call,
    not certified), else from :func:`calibrate_noise_multiplier`."""
    check_budget(target_epsilon, delta)
    log_sigma = _noise_search(float(target_epsilon), float(delta), float(sampling_rate),
                              int(steps), accountant, neighboring, None, certify=False)
    if log_sigma is None:
        return calibrate_noise_multiplier(target_epsilon, delta, sampling_rate, steps,
                                          accountant=accountant, neighboring=neighboring)
    return math.exp(log_sigma)


def calibrate_noise_multiplier(
    target_epsilon, delta, sampling_rate, steps, *, accountant="pld", neighboring="add_remove",
    initial_event=None,
):
    """Smallest noise multiplier (to within 0.6 % in epsilon) meeting the budget.

    The returned multiplier gives, for
    ``poisson_gaussian_event(sigma, sampling_rate, steps)``, an accountant
    epsilon in ``[0.994 * target_epsilon, target_epsilon]``.

    Parameters
    ----------
    target_epsilon : float
    delta : float
    sampling_rate : float
    steps : int
    accountant : {"pld", "rdp"}, default="pld"
    neighboring : {"add_remove", "replace"}, default="add_remove"
    initial_event : dp_accounting.DpEvent or None, default=None
        A one-off release made before training (e.g. noisy group sizes); the
        budget then covers ``ComposedDpEvent([initial_event, training])``.

    Returns
    -------
    float

    Raises
    ------
    PrivacyBudgetError
        If even a noise multiplier of 1e4 cannot meet the budget.

    Notes
    -----
    With the ``"pld"`` accountant the search runs on a whole-array copy of
    the accountant's construction (equal to its epsilon to rounding) and
    calls dp-accounting once, to certify the multiplier it returns; the
    search continues on dp-accounting if that certificate fails.

    Examples
    --------
    >>> from skdp.privacy import calibrate_noise_multiplier
    >>> sigma = calibrate_noise_multiplier(1.0, 1e-5, 0.03, 500)
    >>> round(sigma, 1)
    2.7
    """
    check_budget(target_epsilon, delta)
    sigma = _calibrate_noise_cached(
        float(target_epsilon), float(delta), float(sampling_rate), int(steps),
        accountant, neighboring, initial_event,
    )
    if sigma is None:
        raise PrivacyBudgetError(
            f"epsilon={target_epsilon} at delta={delta} cannot pay for {steps} steps "
            f"at sampling rate {sampling_rate:.4g} even with noise multiplier "
            f"{_MAX_NOISE:g}; raise epsilon or reduce the number of steps."
        )
    return sigma


def _largest_affordable(eps_at, target_epsilon, cap):
    """Largest T in [0, cap] with ``eps_at(T) <= target_epsilon`` (eps_at
    increasing in T)."""
    if eps_at(1) > target_epsilon:
        return 0
    if eps_at(cap) <= target_epsilon:
        return cap
    # epsilon grows roughly like sqrt(T): guess from the one-step value, then
    # keep a feasible/infeasible bracket and interpolate on log-log scale.
    lo, hi = 1, cap
    f_lo, f_hi = math.log(max(eps_at(1), 1e-300)), math.log(eps_at(cap))
    log_target = math.log(target_epsilon)
    while hi - lo > 1:
        frac = (log_target - f_lo) / (f_hi - f_lo) if f_hi > f_lo else 0.5
        mid = int(round(math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo)))))
        mid = min(max(mid, lo + 1), hi - 1)
        if hi - lo > 8:  # keep interpolation from crawling along one side
            span = hi - lo
            mid = min(max(mid, lo + span // 16), hi - span // 16)
        f_mid = eps_at(mid)
        if f_mid <= target_epsilon:
            lo, f_lo = mid, math.log(max(f_mid, 1e-300))
        else:
            hi, f_hi = mid, math.log(f_mid)
    return lo


@lru_cache(maxsize=1024)
def _max_steps_cached(step_event, target_epsilon, delta, accountant, cap, initial_event):
    def event_of(steps):
        steps = 1 if steps is None else steps
        return with_initial_event(initial_event, dpa.SelfComposedDpEvent(step_event, steps))

    def eps_at(steps):
        return compute_epsilon(event_of(steps), delta, accountant)

    estimate = estimated_log_epsilon(event_of, delta, accountant)
    if estimate is not None:
        # search on the whole-array replica; the accountant confirms that the
        # answer fits and that one more step would not
        steps = _largest_affordable(lambda t: math.exp(estimate(t)), target_epsilon, cap)
        fits = steps == 0 or eps_at(steps) <= target_epsilon
        if fits and (steps == cap or eps_at(steps + 1) > target_epsilon):
            return steps
    return _largest_affordable(eps_at, target_epsilon, cap)


def calibrate_steps(
    step_event, target_epsilon, delta, *, accountant="pld", max_steps=100_000, initial_event=None
):
    """Largest T such that ``step_event`` composed T times fits the budget.

    Parameters
    ----------
    step_event : dp_accounting.DpEvent
        The release of one step, e.g. :func:`poisson_gaussian_step`.
    target_epsilon, delta : float
    accountant : {"pld", "rdp"}, default="pld"
    max_steps : int, default=100_000
        Upper end of the search.
    initial_event : dp_accounting.DpEvent or None, default=None
        A one-off release made before the steps, composed with them.

    Returns
    -------
    int
        In ``[0, max_steps]``; 0 means not even one step is affordable.

    Examples
    --------
    >>> from skdp.privacy import calibrate_steps, poisson_gaussian_step
    >>> calibrate_steps(poisson_gaussian_step(4.0, 0.032), 1.0, 1e-5, max_steps=5000)
    1057
    """
    check_budget(target_epsilon, delta)
    return _max_steps_cached(
        step_event, float(target_epsilon), float(delta), accountant, int(max_steps), initial_event
    )


def check_budget(epsilon, delta):
    """A ValueError unless ``epsilon`` is positive and finite and ``delta``
    in (0, 1).

    >>> from skdp.privacy import check_budget
    >>> check_budget(1.0, 1e-5)
    """
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}.")


def gdp_mu(epsilon, delta):
    """The mu of the mu-GDP mechanism that is exactly (epsilon, delta)-DP.

    Solves ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Dong,
    Roth & Su, 2022). A budgeting aid (e.g. to give a one-off release a share
    of the budget); reported epsilons always come from the accountant.

    Examples
    --------
    >>> from skdp.privacy import gdp_mu
    >>> round(gdp_mu(1.0, 1e-5), 3)
    0.268
    """
    check_budget(epsilon, delta)

    def excess(mu):
        return gdp_delta(epsilon, mu) - delta

    low = 1e-6  # tiny budgets (epsilon and delta near 0) need a smaller mu
    while excess(low) > 0 and low > 1e-200:
        low *= 1e-3
    return float(optimize.brentq(excess, low, 100.0, xtol=min(1e-12, 1e-6 * low)))


def gdp_delta(epsilon, mu):
    """The smallest delta at which a ``mu``-GDP mechanism is
    ``(epsilon, delta)``-DP: ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu -
    mu/2)`` (Dong, Roth & Su, 2022), the one formula behind every Gaussian-DP
    conversion of skdp (the exponential is computed in log space and capped).

    Examples
    --------
    >>> from skdp.privacy import gdp_delta, gdp_mu
    >>> round(float(gdp_delta(1.0, gdp_mu(1.0, 1e-5))) / 1e-5, 6)
    1.0
    """
    # scipy.special's ndtr / log_ndtr are what scipy.stats.norm's cdf and
    # logcdf evaluate, without the distribution machinery's ~50 us a call
    second = math.exp(min(epsilon + special.log_ndtr(-epsilon / mu - mu / 2), 700.0))
    return special.ndtr(-epsilon / mu + mu / 2) - second


def gdp_epsilon(mu, delta):
    """Epsilon at which a ``mu``-GDP mechanism is ``(epsilon, delta)``-DP.

    Inverse of :func:`gdp_mu`: solves ``gdp_delta(eps, mu) = delta`` for eps
    (0 when the mechanism is already ``(0, delta)``-DP). A budgeting aid, as
    :func:`gdp_mu`.

    Examples
    --------
    >>> from skdp.privacy import gdp_epsilon, gdp_mu
    >>> round(gdp_epsilon(gdp_mu(1.0, 1e-5), 1e-5), 6)
    1.0
    """
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu!r}.")

    def excess(eps):
        return gdp_delta(eps, mu) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
        if hi > 1e4:
            raise ValueError(f"mu={mu} is too large to express as an epsilon at delta={delta}.")
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def pure_dp_to_gdp(epsilon0):
    """Smallest mu such that every epsilon0-DP mechanism is mu-GDP.

    The trade-off curve of (epsilon0, 0)-DP is the piecewise-linear
    ``max(0, 1 - e^eps a, e^-eps (1 - a))``; the Gaussian curve G_mu through its
    kink, ``mu = 2 * Phi^-1(e^eps / (1 + e^eps))``, lies below it everywhere
    because G_mu is convex and shares the end points (0, 1) and (1, 0). Used
    for the Laplace histogram of RaCO-DP: Laplace noise of scale b on a query
    of l1 sensitivity s is (s / b)-DP.

    Examples
    --------
    >>> from skdp.privacy import pure_dp_to_gdp
    >>> round(pure_dp_to_gdp(0.1), 4)
    0.1253
    """
    if not epsilon0 > 0:
        raise ValueError(f"epsilon0 must be positive, got {epsilon0!r}.")
    p = 1.0 / (1.0 + math.exp(-epsilon0))
    return 2.0 * float(special.ndtri(p))


def gdp_to_pure_dp(mu):
    """Inverse of :func:`pure_dp_to_gdp`: the epsilon0 whose bound is ``mu``."""
    p = float(special.ndtr(mu / 2.0))
    return math.log(p / (1.0 - p))


def joint_noise_multiplier(gaussian_multipliers=(), pure_epsilons=()):
    """Noise multiplier of one Gaussian mechanism that dominates several
    releases on the same data.

    Releasing Gaussian queries with noise multipliers ``sigma_i`` (noise std
    over l2 sensitivity) and pure ``epsilon_j``-DP queries on the same batch,
    possibly adaptively, is mu-GDP with ``mu^2 = sum 1/sigma_i^2 + sum
    mu(epsilon_j)^2`` (Dong, Roth & Su, 2022: GDP composes adaptively; pure DP
    converts with :func:`pure_dp_to_gdp`). A mu-GDP mechanism is dominated by
    the Gaussian pair (N(0, 1), N(mu, 1)), and Poisson subsampling preserves
    dominating pairs (Zhu, Dong & Wang, 2022), so the subsampled joint step is
    accounted exactly as ``PoissonSampledDpEvent(q, GaussianDpEvent(1/mu))``.

    Examples
    --------
    >>> from skdp.privacy import joint_noise_multiplier
    >>> round(joint_noise_multiplier((3.0, 4.0)), 4)  # (1/9 + 1/16)^(-1/2)
    2.4
    """
    mu_sq = sum(1.0 / float(s) ** 2 for s in gaussian_multipliers)
    mu_sq += sum(pure_dp_to_gdp(e) ** 2 for e in pure_epsilons)
    if mu_sq <= 0:
        raise ValueError("joint_noise_multiplier needs at least one release.")
    return 1.0 / math.sqrt(mu_sq)
