"""Lower bounds on epsilon from the outcome of a privacy audit.

An audit runs a mechanism on data with *canaries* and then tries to tell
which canaries were used. Each function here turns what the auditor saw
(guesses made and guesses right, or false positives and false negatives)
into an epsilon that the mechanism must exceed, at a stated confidence:

* :func:`one_run_epsilon_lower_bound`: one training run, any ``(epsilon,
  delta)``-DP mechanism (Steinke, Nasr & Jagielski, 2023);
* :func:`fdp_one_run_epsilon_lower_bound`: one training run, a mechanism
  whose trade-off curve is Gaussian (Mahloujifar, Melis & Chaudhuri, 2024);
* :func:`clopper_pearson_epsilon_lower_bound`: many training runs, one
  canary in or out each time (Jagielski et al., 2020; Nasr et al., 2021);
* :func:`epsilon_lower_bound_from_scores`: the one-run bounds from canary
  scores, over a public grid of guess counts with a Bonferroni correction.

A lower bound above the epsilon a mechanism claims proves, at the stated
confidence, that the claim is wrong; a lower bound below it proves nothing
about privacy (see ``docs/audit.rst``).
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from ..privacy import gdp_epsilon

__all__ = [
    "OneRunAuditResult",
    "clopper_pearson_epsilon_lower_bound",
    "epsilon_lower_bound_from_scores",
    "fdp_one_run_epsilon_lower_bound",
    "one_run_epsilon_lower_bound",
]

#: Largest epsilon (and Gaussian-DP mu) the searches consider. At epsilon=64
#: randomized response is right with probability 1 - 1.6e-28, which rounds to
#: 1: no finite number of guesses rejects it.
_EPSILON_MAX = 64.0
_MU_MAX = 64.0
#: Smallest positive mu the f-DP search considers; below it the bound is 0.
_MU_MIN = 1e-4
#: Absolute tolerance of the searches (the returned value is never above
#: the exact bound: it is the lower end of the last bracket).
_TOL = 1e-7
#: Default grid of k (guesses per side) for the score sweep, as divisors of m.
_K_DIVISORS = (50, 20, 10, 5, 2)


# ---------------------------------------------------------------- validation
def _check_confidence(confidence):
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    return 1.0 - confidence


def _check_delta(delta):
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}.")
    return delta


def _check_count(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}.")
    return int(value)


def _check_guesses(n_guesses, n_correct, n_canaries):
    r = _check_count(n_guesses, "n_guesses")
    v = _check_count(n_correct, "n_correct")
    m = _check_count(n_canaries, "n_canaries")
    if not v <= r <= m:
        raise ValueError(
            "Expected n_correct <= n_guesses <= n_canaries, got "
            f"n_correct={v}, n_guesses={r}, n_canaries={m}."
        )
    return r, v, m


# ------------------------------------------------------------------- search
def _bisect_last_rejected(rejects, upper):
    """Largest x in [0, upper] up to which ``rejects`` holds, by bisection.

    ``rejects`` is assumed true on an interval [0, x*) and false above it.
    Returns 0 when ``rejects(0)`` is false and ``upper`` when ``rejects(upper)``
    is true; otherwise the lower end of a bracket of width below ``_TOL``
    (always a rejected point, so the result errs low).
    """
    if not rejects(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while rejects(hi):
        lo = hi
        if hi >= upper:
            return float(upper)
        hi = min(2.0 * hi, upper)
    while hi - lo > _TOL:
        mid = 0.5 * (lo + hi)
        if rejects(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _multisect_last_rejected(rejects, lower, upper, n_points=32):
    """As :func:`_bisect_last_rejected`, for a ``rejects`` that is vectorised.

    ``rejects(x)`` takes an array and returns a boolean array. Each round
    evaluates ``n_points`` points of the bracket at once and keeps the one
    before the first point not rejected, so a bracket shrinks ``n_points + 1``
    times per round (instead of twice). Returns 0 when ``lower`` is not
    rejected.
    """
    grid = np.geomspace(lower, upper, n_points)
    first = _first_false(rejects(grid))
    if first == 0:
        return 0.0
    if first == n_points:
        return float(upper)
    lo, hi = grid[first - 1], grid[first]
    while hi - lo > _TOL:
        grid = np.linspace(lo, hi, n_points + 2)[1:-1]
        first = _first_false(rejects(grid))
        if first > 0:
            lo = grid[first - 1]
        if first < n_points:
            hi = grid[first]
    return float(lo)


def _first_false(mask):
    false = np.flatnonzero(~mask)
    return int(false[0]) if false.size else mask.size


# --------------------------------------------- Steinke, Nasr & Jagielski 2023
def _one_run_p_value(epsilon, r, v, m, delta):
    """Upper bound on P[W >= v] for an (epsilon, delta)-DP mechanism.

    Theorem 5.2 of Steinke, Nasr & Jagielski (2023); see
    :func:`one_run_epsilon_lower_bound`.
    """
    q = special.expit(epsilon)
    tail = stats.binom.sf(v - 1, r, q)  # F(v) = P[Bin(r, q) >= v]
    if delta == 0.0 or v == 0:
        return float(tail)
    i = np.arange(1, v + 1)
    window = stats.binom.sf(v - i - 1, r, q) - tail  # P[v - i <= Bin(r, q) < v]
    alpha = float(np.max(window / i))
    return min(1.0, float(tail) + 2.0 * m * delta * alpha)


def one_run_epsilon_lower_bound(n_guesses, n_correct, n_canaries, *, delta=0.0, confidence=0.95):
    r"""Epsilon lower bound of a one-run audit (Steinke, Nasr & Jagielski, 2023).

    Each of the ``n_canaries`` (m) canaries is included in the training data
    independently with probability 1/2; after one run the auditor guesses
    "in" or "out" for ``n_guesses`` (r) of them and abstains on the rest;
    ``n_correct`` (v) guesses are right. For an ``(epsilon, delta)``-DP
    mechanism, Theorem 5.2 of the paper bounds the chance of ``v`` or more
    right guesses, whatever the attack:

    .. math::

        P[W \ge v] \le p(\varepsilon) = F(v) + 2 m \delta \max_{1 \le i \le v}
        \frac{F(v - i) - F(v)}{i},
        \qquad F(j) = P\Big[\mathrm{Bin}\Big(r, \frac{e^\varepsilon}
        {1 + e^\varepsilon}\Big) \ge j\Big].

    The bound returned is the largest epsilon at which the observation is
    still significant, :math:`\hat\varepsilon = \sup\{\varepsilon \ge 0 :
    p(\varepsilon) \le \beta\}` with :math:`\beta = 1 - \text{confidence}`,
    found by bisection (to 1e-7, rounding down). Then
    :math:`P[\hat\varepsilon > \varepsilon] \le \beta` for a mechanism that
    is ``(epsilon, delta)``-DP with respect to each canary.

    Parameters
    ----------
    n_guesses : int
        Number of guesses made, r (abstentions excluded).
    n_correct : int
        Number of right guesses, v, with ``v <= r``.
    n_canaries : int
        Number of canaries, m, with ``r <= m``: all of them count in the
        delta term, guessed or not.
    delta : float, default=0.0
        The delta of the claim under test, in [0, 1).
    confidence : float, default=0.95
        The confidence 1 - beta of the bound, in (0, 1).

    Returns
    -------
    epsilon : float
        The lower bound; 0 when nothing can be concluded (no guesses, or too
        few right at this confidence), at most 64.

    See Also
    --------
    fdp_one_run_epsilon_lower_bound : The f-DP analysis of the same audit.
    epsilon_lower_bound_from_scores : Both bounds from canary scores.

    Notes
    -----
    The guesses must be a function of the mechanism's output (and of public
    randomness) only: made before looking at which canaries were included.
    The search assumes :math:`p` increases with epsilon, which holds for
    ``delta=0`` and is assumed, as in the paper's code, otherwise.

    References
    ----------
    T. Steinke, M. Nasr and M. Jagielski, "Privacy auditing with one (1)
    training run", NeurIPS 2023, arXiv:2305.08846.

    Examples
    --------
    1000 canaries, all guessed, 800 right: randomized response at epsilon
    log(4) = 1.39 gets 800 right on average.

    >>> from skdp.audit import one_run_epsilon_lower_bound
    >>> round(one_run_epsilon_lower_bound(1000, 800, 1000), 3)
    1.254
    >>> round(one_run_epsilon_lower_bound(1000, 800, 1000, delta=1e-5), 3)
    1.254
    >>> one_run_epsilon_lower_bound(1000, 520, 1000)
    0.0
    """
    r, v, m = _check_guesses(n_guesses, n_correct, n_canaries)
    delta = _check_delta(delta)
    beta = _check_confidence(confidence)
    if v == 0:
        return 0.0
    return _bisect_last_rejected(
        lambda eps: _one_run_p_value(eps, r, v, m, delta) <= beta, _EPSILON_MAX
    )


# ----------------------------------------- Mahloujifar, Melis & Chaudhuri 2024
def _gaussian_rejects(mu, r, v, m, beta):
    """Whether v right out of r guesses rejects mu-GDP at level beta, per mu.

    The recursion of Mahloujifar, Melis & Chaudhuri (2024) with the Gaussian
    trade-off function, vectorised over an array of mu: see
    :func:`fdp_one_run_epsilon_lower_bound`. Stops early once every mu is
    settled, rejected (the mass only grows) or at a fixed point (h stops
    growing, and then nothing changes any more).
    """
    mu = np.asarray(mu, dtype=float)
    total = r / m
    right = np.full(mu.shape, beta * v / m)
    wrong = np.full(mu.shape, beta * (r - v) / m)
    settled = np.zeros(mu.shape, dtype=bool)
    for i in range(v - 1, -1, -1):
        bound = special.ndtr(special.ndtri(np.minimum(right, 1.0)) - mu)
        grown = np.maximum(wrong, bound)
        right = right + (i / (r - i)) * (grown - wrong)
        settled |= (grown == wrong) | (right + grown > total)
        wrong = grown
        if settled.all():
            break
    return right + wrong > total


def _fdp_mu_lower_bound(r, v, m, beta):
    """Largest mu rejected by :func:`_gaussian_rejects` (0 when none is)."""
    if v == 0:
        return 0.0
    return _multisect_last_rejected(lambda mu: _gaussian_rejects(mu, r, v, m, beta), _MU_MIN, _MU_MAX)


def _mu_to_epsilon(mu, delta):
    if mu <= 0.0:
        return 0.0
    if delta == 0.0:
        return math.inf  # a mu-GDP curve with mu > 0 has no finite pure epsilon
    try:
        return gdp_epsilon(mu, delta)
    except ValueError:  # epsilon beyond 1e4: as good as no bound on privacy
        return math.inf


def fdp_one_run_epsilon_lower_bound(n_guesses, n_correct, n_canaries, *, delta, confidence=0.95):
    r"""Epsilon lower bound of a one-run audit, by the f-DP analysis.

    The audit is that of :func:`one_run_epsilon_lower_bound` (m canaries
    each included with probability 1/2, r guesses, v right); the analysis is
    that of Mahloujifar, Melis & Chaudhuri (2024) for a mechanism with the
    Gaussian trade-off function :math:`G_\mu`, i.e. :math:`\mu`-GDP. Write
    :math:`\bar f_\mu(x) = \Phi(\Phi^{-1}(x) - \mu)`, the least probability
    of an event under one neighbour given probability x under the other.
    Starting from

    .. math::

        \rho_v = \beta \frac{v}{m}, \qquad \eta_v = \beta \frac{r - v}{m},

    the recursion, for :math:`i = v - 1, \dots, 0`,

    .. math::

        \eta_i = \max\big(\eta_{i+1}, \bar f_\mu(\rho_{i+1})\big), \qquad
        \rho_i = \rho_{i+1} + \frac{i}{r - i} (\eta_i - \eta_{i+1})

    gives the least mass a :math:`\mu`-GDP mechanism needs to have
    :math:`P[W \ge v] \ge \beta`. If :math:`\rho_0 + \eta_0 > r / m`, more
    than all of it, then :math:`P[W \ge v] < \beta`: :math:`\mu`-GDP is
    rejected at level :math:`\beta = 1 - \text{confidence}`. The bound on
    :math:`\mu` is the largest rejected one (searched on [1e-4, 64] by
    vectorised bisection, to 1e-7, rounding down), and the bound on epsilon
    is the epsilon at which :math:`\hat\mu`-GDP is ``(epsilon, delta)``-DP,
    :func:`skdp.privacy.gdp_epsilon`.

    Parameters
    ----------
    n_guesses : int
        Number of guesses made, r (abstentions excluded).
    n_correct : int
        Number of right guesses, v, with ``v <= r``.
    n_canaries : int
        Number of canaries, m, with ``r <= m``.
    delta : float
        The delta at which to express the bound on mu as an epsilon, in
        [0, 1). With ``delta=0`` the bound is infinite as soon as
        :math:`\hat\mu > 0`: no Gaussian curve is pure DP.
    confidence : float, default=0.95
        The confidence 1 - beta of the bound, in (0, 1).

    Returns
    -------
    epsilon : float
        The lower bound; 0 when nothing can be concluded.

    See Also
    --------
    one_run_epsilon_lower_bound : The bound for any ``(epsilon, delta)``-DP
        mechanism.

    Notes
    -----
    This bound assumes more than :func:`one_run_epsilon_lower_bound`: it
    tests the hypotheses ":math:`\mu`-GDP", so it lower-bounds the epsilon of
    a mechanism whose trade-off curve is Gaussian (DP-SGD's, the Gaussian
    mechanism's) and is typically tighter for them. For another curve (say
    randomized response, which is pure DP) it bounds the mu of the tightest
    Gaussian curve above it, not the mechanism's own epsilon, and may exceed
    that epsilon. Implemented: the paper's recursive bound for an alphabet of
    two (in or out), one hypothesis per mu; the search assumes the rejected
    mu form an interval from 0.

    References
    ----------
    S. Mahloujifar, L. Melis and K. Chaudhuri, "Auditing f-differential
    privacy in one run", 2024, arXiv:2410.22235.

    Examples
    --------
    >>> from skdp.audit import fdp_one_run_epsilon_lower_bound
    >>> round(fdp_one_run_epsilon_lower_bound(1000, 800, 1000, delta=1e-5), 3)
    2.333
    """
    r, v, m = _check_guesses(n_guesses, n_correct, n_canaries)
    delta = _check_delta(delta)
    beta = _check_confidence(confidence)
    return _mu_to_epsilon(_fdp_mu_lower_bound(r, v, m, beta), delta)


# ------------------------------------------------------------ Clopper-Pearson
def _clopper_pearson_upper(successes, trials, alpha):
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a proportion."""
    if successes >= trials:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, successes + 1, trials - successes))


def _log_ratio(numerator, denominator):
    return math.log(numerator / denominator) if numerator > 0.0 else -math.inf


def clopper_pearson_epsilon_lower_bound(
    false_positives, n_negatives, false_negatives, n_positives, *, delta=0.0, confidence=0.95
):
    r"""Epsilon lower bound from repeated trials, by Clopper-Pearson intervals.

    The audit of Jagielski et al. (2020) and Nasr et al. (2021): the
    mechanism is run ``n_negatives`` times without the canary and
    ``n_positives`` times with it, each run independently, and a test
    guesses from each output whether the canary was in. For an
    ``(epsilon, delta)``-DP mechanism any test's rates satisfy
    :math:`\mathrm{FPR}\, e^\varepsilon + \mathrm{FNR} \ge 1 - \delta` and
    :math:`\mathrm{FNR}\, e^\varepsilon + \mathrm{FPR} \ge 1 - \delta`. With
    one-sided Clopper-Pearson upper bounds :math:`\overline{\mathrm{FPR}}`
    and :math:`\overline{\mathrm{FNR}}` at level :math:`\beta / 2` each
    (Bonferroni, :math:`\beta = 1 - \text{confidence}`),

    .. math::

        \hat\varepsilon = \max\Big(0,
        \log\frac{1 - \delta - \overline{\mathrm{FNR}}}{\overline{\mathrm{FPR}}},
        \log\frac{1 - \delta - \overline{\mathrm{FPR}}}{\overline{\mathrm{FNR}}}\Big),

    where :math:`\overline{p} = B^{-1}(1 - \beta/2;\, k + 1, n - k)` for k
    errors in n trials (1 when k = n), :math:`B^{-1}` the beta quantile.

    Parameters
    ----------
    false_positives : int
        Runs without the canary that the test called "in".
    n_negatives : int
        Runs without the canary.
    false_negatives : int
        Runs with the canary that the test called "out".
    n_positives : int
        Runs with the canary.
    delta : float, default=0.0
        The delta of the claim under test, in [0, 1).
    confidence : float, default=0.95
        The confidence 1 - beta of the bound, in (0, 1).

    Returns
    -------
    epsilon : float
        The lower bound, 0 when nothing can be concluded.

    Notes
    -----
    The test (its threshold included) must be fixed before the runs it is
    evaluated on; a threshold tuned on the same runs needs a correction for
    the choice, or fresh runs.

    Examples
    --------
    1000 runs each way; the test errs 50 times each way (epsilon
    log(19) = 2.94 for randomized response).

    >>> from skdp.audit import clopper_pearson_epsilon_lower_bound
    >>> round(clopper_pearson_epsilon_lower_bound(50, 1000, 50, 1000), 3)
    2.66
    """
    fp = _check_count(false_positives, "false_positives")
    n_neg = _check_count(n_negatives, "n_negatives")
    fn = _check_count(false_negatives, "false_negatives")
    n_pos = _check_count(n_positives, "n_positives")
    if fp > n_neg or fn > n_pos:
        raise ValueError("Errors cannot outnumber the runs they are counted in.")
    delta = _check_delta(delta)
    beta = _check_confidence(confidence)
    fpr = _clopper_pearson_upper(fp, n_neg, beta / 2.0)
    fnr = _clopper_pearson_upper(fn, n_pos, beta / 2.0)
    return max(
        0.0, _log_ratio(1.0 - delta - fnr, fpr), _log_ratio(1.0 - delta - fpr, fnr)
    )


# --------------------------------------------------------------- from scores
@dataclass(frozen=True)
class OneRunAuditResult:
    """The one-run bounds of :func:`epsilon_lower_bound_from_scores`.

    Attributes
    ----------
    epsilon : float
        Bound of Steinke, Nasr & Jagielski, the best over the grid of k:
        valid for any ``(epsilon, delta)``-DP mechanism.
    k : int
        Guesses per side (k "in" and k "out") that gave ``epsilon``.
    n_guesses : int
        Guesses made at that k, ``2 * k``.
    n_correct : int
        Right guesses at that k.
    epsilon_fdp : float
        Bound of Mahloujifar, Melis & Chaudhuri with the Gaussian trade-off
        function, the best over the grid: valid only for a mechanism whose
        trade-off curve is Gaussian (see :func:`~skdp.audit.is_gaussian_event`;
        for randomized response, Laplace or a subsampled Gaussian it can
        exceed the true epsilon). NaN when not computed.
    mu_fdp : float
        The bound on the Gaussian-DP mu behind ``epsilon_fdp``.
    k_fdp : int
        Guesses per side that gave ``epsilon_fdp``.
    ks : tuple of int
        The grid of k tried, each at confidence ``1 - beta / len(ks)``.
    n_correct_per_k : tuple of int
        Right guesses at each k of ``ks``.
    delta : float
        The delta of the bounds.
    confidence : float
        The confidence of each of ``epsilon`` and ``epsilon_fdp``, the sweep
        over ``ks`` accounted for.
    """

    epsilon: float
    k: int
    n_guesses: int
    n_correct: int
    epsilon_fdp: float
    mu_fdp: float
    k_fdp: int
    ks: tuple
    n_correct_per_k: tuple
    delta: float
    confidence: float


def _check_scores(scores, included):
    scores = np.asarray(scores, dtype=float)
    included = np.asarray(included)
    if scores.ndim != 1 or included.shape != scores.shape:
        raise ValueError(
            "scores and included must be 1-D and of the same length, got shapes "
            f"{scores.shape} and {included.shape}."
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite.")
    if included.dtype != bool:
        if not np.all((included == 0) | (included == 1)):
            raise ValueError("included must be boolean (or 0/1).")
        included = included.astype(bool)
    return scores, included


def _k_grid(k, m):
    if k is None:
        return tuple(sorted({m // d for d in _K_DIVISORS} - {0}))
    ks = (k,) if isinstance(k, numbers.Integral) else tuple(k)
    ks = tuple(sorted({_check_count(x, "k") for x in ks}))
    if not ks or ks[0] < 1 or 2 * ks[-1] > m:
        raise ValueError(f"Each k must be in [1, n_canaries // 2 = {m // 2}], got {k!r}.")
    return ks


def _correct_top_bottom(scores, included, ks):
    """Right guesses when the top k are guessed in and the bottom k out.

    Ties are broken by canary order (a stable sort), which is harmless when
    the order of the canaries does not depend on their inclusion.
    """
    order = np.argsort(-scores, kind="stable")
    ranked = included[order]
    ins_from_top = np.concatenate([[0], np.cumsum(ranked)])
    outs_from_bottom = np.concatenate([[0], np.cumsum(~ranked[::-1])])
    ks = np.asarray(ks, dtype=int)
    return ins_from_top[ks] + outs_from_bottom[ks]


def epsilon_lower_bound_from_scores(scores, included, *, delta, confidence=0.95, k=None,
                                    fdp=True):
    r"""One-run epsilon lower bounds from canary scores, over a grid of guesses.

    For each k of a grid, the auditor guesses "in" for the k canaries with
    the highest scores and "out" for the k with the lowest, abstaining on
    the rest (r = 2k guesses), and counts the right guesses against
    ``included``. Each k gives :func:`one_run_epsilon_lower_bound` and
    :func:`fdp_one_run_epsilon_lower_bound`; the result keeps the best k of
    each. **The sweep is paid for**: every k is evaluated at confidence
    :math:`1 - \beta / K` for K values of k (Bonferroni), so the best of
    them is still a lower bound at confidence :math:`1 - \beta`. Each of the
    two bounds holds at that confidence; quoting the larger of the two needs
    another halving of beta.

    Parameters
    ----------
    scores : array-like of shape (m,)
        Attack score of each canary, higher meaning more likely included,
        computed from the mechanism's output alone.
    included : array-like of bool of shape (m,)
        Whether each canary was included; each must have been included
        independently with probability 1/2.
    delta : float
        The delta of the claim under test, in [0, 1).
    confidence : float, default=0.95
        The confidence of each bound, the sweep accounted for.
    k : int, sequence of int or None, default=None
        Guesses per side, each in [1, m // 2]. ``None`` uses the public grid
        ``m // 50, m // 20, m // 10, m // 5, m // 2`` (the non-zero ones).
        Whatever the grid, it must be chosen without looking at ``included``.
    fdp : bool, default=True
        Whether to compute the f-DP bound, which holds only for a mechanism
        whose trade-off curve is Gaussian (see
        :func:`~skdp.audit.is_gaussian_event`); without it ``epsilon_fdp``
        and ``mu_fdp`` are NaN and ``k_fdp`` 0.

    Returns
    -------
    result : OneRunAuditResult
        The bounds, the k that gave them and the counts of guesses. All
        bounds are 0 when m < 2 (no k to try).

    Notes
    -----
    Ties in ``scores`` are broken by canary order; that order must not
    depend on which canaries were included.

    Examples
    --------
    Randomized response at epsilon 2 on 2000 canaries: each canary's score
    is its released bit.

    >>> import numpy as np
    >>> from skdp.audit import epsilon_lower_bound_from_scores
    >>> rng = np.random.default_rng(0)
    >>> included = rng.random(2000) < 0.5
    >>> truthful = rng.random(2000) < np.exp(2) / (1 + np.exp(2))
    >>> result = epsilon_lower_bound_from_scores(
    ...     np.where(truthful, included, ~included), included, delta=0.0)
    >>> result.k, result.n_guesses, result.n_correct
    (1000, 2000, 1775)
    >>> round(result.epsilon, 3)
    1.901
    """
    scores, included = _check_scores(scores, included)
    delta = _check_delta(delta)
    beta = _check_confidence(confidence)
    m = scores.size
    ks = _k_grid(k, m)
    if not ks:
        return OneRunAuditResult(0.0, 0, 0, 0, 0.0, 0.0, 0, (), (), delta, 1.0 - beta)
    correct = _correct_top_bottom(scores, included, ks)
    each = 1.0 - beta / len(ks)
    steinke = [
        one_run_epsilon_lower_bound(2 * k_, int(v), m, delta=delta, confidence=each)
        for k_, v in zip(ks, correct)
    ]
    mus = ([_fdp_mu_lower_bound(2 * k_, int(v), m, beta / len(ks)) for k_, v in zip(ks, correct)]
           if fdp else [np.nan])
    best, best_fdp = int(np.argmax(steinke)), int(np.argmax(mus))
    return OneRunAuditResult(
        epsilon=steinke[best],
        k=ks[best],
        n_guesses=2 * ks[best],
        n_correct=int(correct[best]),
        epsilon_fdp=_mu_to_epsilon(mus[best_fdp], delta) if fdp else np.nan,
        mu_fdp=mus[best_fdp],
        k_fdp=ks[best_fdp] if fdp else 0,
        ks=ks,
        n_correct_per_k=tuple(int(v) for v in correct),
        delta=delta,
        confidence=1.0 - beta,
    )
