"""Epsilon lower bounds of privacy audits (skdp.audit._bounds).

Mechanisms of known privacy are simulated: randomized response (pure
epsilon-DP per canary) and a Gaussian release per canary (mu-GDP). A lower
bound at confidence 0.95 must stay at or below the truth in about 95% of
runs; the tests ask for 90% of 200 (or 100) seeded runs, so they are
deterministic and far from the edge.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from skdp.audit import (
    OneRunAuditResult,
    clopper_pearson_epsilon_lower_bound,
    epsilon_lower_bound_from_scores,
    fdp_one_run_epsilon_lower_bound,
    one_run_epsilon_lower_bound,
)
from skdp.privacy import gdp_epsilon

RR_EPSILONS = [0.5, 1.0, 2.0, 4.0]


def _randomized_response(epsilon, n_runs, m, seed):
    """Inclusion bits and released bits (each flipped w.p. 1 / (1 + e^eps))."""
    rng = np.random.default_rng(seed)
    included = rng.random((n_runs, m)) < 0.5
    truthful = rng.random((n_runs, m)) < 1.0 / (1.0 + math.exp(-epsilon))
    return included, np.where(truthful, included, ~included)


def _gaussian(mu, n_runs, m, seed):
    """Inclusion bits and releases b_i + N(0, 1/mu^2): mu-GDP per canary."""
    rng = np.random.default_rng(seed)
    included = rng.random((n_runs, m)) < 0.5
    return included, included + rng.normal(0.0, 1.0 / mu, (n_runs, m))


# --------------------------------------------------------- randomized response
@pytest.mark.parametrize("epsilon", RR_EPSILONS)
def test_one_run_bound_covers_randomized_response(epsilon):
    # Every canary guessed by its released bit: 200 runs of 1000 canaries.
    included, released = _randomized_response(epsilon, 200, 1000, seed=int(10 * epsilon))
    n_correct = (included == released).sum(axis=1)
    bounds = np.array([one_run_epsilon_lower_bound(1000, int(v), 1000) for v in n_correct])
    assert np.mean(bounds <= epsilon) >= 0.9
    assert np.median(bounds) > 0.5 * epsilon  # and not vacuous


@pytest.mark.parametrize("epsilon", RR_EPSILONS)
def test_bound_from_scores_covers_randomized_response(epsilon):
    included, released = _randomized_response(epsilon, 100, 500, seed=int(10 * epsilon) + 1)
    results = [
        epsilon_lower_bound_from_scores(s, b, delta=1e-6) for s, b in zip(released, included)
    ]
    assert np.mean([r.epsilon <= epsilon for r in results]) >= 0.9


def test_one_run_bound_is_close_for_many_canaries():
    # m = 10,000 canaries, randomized response at epsilon = 2.
    included, released = _randomized_response(2.0, 1, 10_000, seed=7)
    n_correct = int((included == released).sum())
    direct = one_run_epsilon_lower_bound(10_000, n_correct, 10_000)
    result = epsilon_lower_bound_from_scores(released[0], included[0], delta=0.0)
    assert 1.0 < result.epsilon <= 2.0
    assert 1.5 < direct <= 2.0


# ----------------------------------------------------------- Gaussian mechanism
def test_fdp_bound_covers_gaussian_mechanism():
    mu, delta = 2.0, 1e-5
    truth = gdp_epsilon(mu, delta)
    included, scores = _gaussian(mu, 100, 1000, seed=3)
    results = [epsilon_lower_bound_from_scores(s, b, delta=delta) for s, b in zip(scores, included)]
    assert np.mean([r.mu_fdp <= mu for r in results]) >= 0.9
    assert np.mean([r.epsilon_fdp <= truth for r in results]) >= 0.9
    assert np.mean([r.epsilon <= truth for r in results]) >= 0.9


def test_fdp_bound_covers_gaussian_mechanism_at_one_k():
    # 200 runs, the top and bottom 100 of 1000 canaries guessed.
    mu, delta = 1.0, 1e-5
    included, scores = _gaussian(mu, 200, 1000, seed=4)
    order = np.argsort(-scores, axis=1)
    ranked = np.take_along_axis(included, order, axis=1)
    n_correct = ranked[:, :100].sum(axis=1) + (~ranked[:, -100:]).sum(axis=1)
    bounds = np.array(
        [fdp_one_run_epsilon_lower_bound(200, int(v), 1000, delta=delta) for v in n_correct]
    )
    assert np.mean(bounds <= gdp_epsilon(mu, delta)) >= 0.9


@pytest.mark.parametrize("seed", range(5))
def test_fdp_bound_beats_steinke_on_gaussian_mechanism(seed):
    included, scores = _gaussian(2.0, 1, 1000, seed=100 + seed)
    result = epsilon_lower_bound_from_scores(scores[0], included[0], delta=1e-5)
    assert result.epsilon_fdp >= result.epsilon > 0.0


# ------------------------------------------------------------- Clopper-Pearson
def test_clopper_pearson_matches_hand_computation():
    fp, n_neg, fn, n_pos, delta = 40, 1000, 70, 800, 1e-5
    fpr = stats.beta.ppf(1 - 0.025, fp + 1, n_neg - fp)
    fnr = stats.beta.ppf(1 - 0.025, fn + 1, n_pos - fn)
    expected = max(math.log((1 - delta - fnr) / fpr), math.log((1 - delta - fpr) / fnr))
    got = clopper_pearson_epsilon_lower_bound(fp, n_neg, fn, n_pos, delta=delta)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got == pytest.approx(2.8017, abs=1e-4)


@pytest.mark.parametrize("epsilon", RR_EPSILONS)
def test_clopper_pearson_covers_randomized_response(epsilon):
    rng = np.random.default_rng(int(100 * epsilon))
    error = 1.0 / (1.0 + math.exp(epsilon))
    fps, fns = rng.binomial(1000, error, 200), rng.binomial(1000, error, 200)
    bounds = np.array(
        [clopper_pearson_epsilon_lower_bound(int(a), 1000, int(b), 1000) for a, b in zip(fps, fns)]
    )
    assert np.mean(bounds <= epsilon) >= 0.9
    assert np.median(bounds) > 0.5 * epsilon


def test_clopper_pearson_without_information():
    assert clopper_pearson_epsilon_lower_bound(0, 0, 0, 0) == 0.0
    assert clopper_pearson_epsilon_lower_bound(0, 10, 10, 10) == 0.0
    assert clopper_pearson_epsilon_lower_bound(0, 1000, 0, 1000) > 0.0


# ----------------------------------------------------------------- properties
@st.composite
def _audits(draw):
    m = draw(st.integers(1, 2000))
    r = draw(st.integers(1, m))
    v = draw(st.integers(0, r - 1))
    return m, r, v


_DELTAS = st.sampled_from([0.0, 1e-6, 1e-3])
_BOUNDS = {
    "steinke": lambda r, v, m, delta, c: one_run_epsilon_lower_bound(
        r, v, m, delta=delta, confidence=c
    ),
    "fdp": lambda r, v, m, delta, c: fdp_one_run_epsilon_lower_bound(
        r, v, m, delta=max(delta, 1e-6), confidence=c
    ),
}


@pytest.mark.parametrize("name", sorted(_BOUNDS))
@settings(max_examples=40, deadline=None)
@given(audit=_audits(), delta=_DELTAS)
def test_more_correct_guesses_never_lower_the_bound(name, audit, delta):
    m, r, v = audit
    bound = _BOUNDS[name]
    assert bound(r, v + 1, m, delta, 0.95) >= bound(r, v, m, delta, 0.95) - 1e-6


@pytest.mark.parametrize("name", sorted(_BOUNDS))
@settings(max_examples=40, deadline=None)
@given(
    audit=_audits(),
    delta=_DELTAS,
    confidences=st.lists(st.floats(0.5, 0.999), min_size=2, max_size=2, unique=True),
)
def test_higher_confidence_never_raises_the_bound(name, audit, delta, confidences):
    m, r, v = audit
    low, high = sorted(confidences)
    bound = _BOUNDS[name]
    assert bound(r, v + 1, m, delta, high) <= bound(r, v + 1, m, delta, low) + 1e-6


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 500),
    errors=st.tuples(st.integers(0, 500), st.integers(0, 500)),
    delta=_DELTAS,
    confidences=st.lists(st.floats(0.5, 0.999), min_size=2, max_size=2, unique=True),
)
def test_clopper_pearson_monotone(n, errors, delta, confidences):
    fp, fn = min(errors[0], n), min(errors[1], n)
    low, high = sorted(confidences)
    bound = clopper_pearson_epsilon_lower_bound(fp, n, fn, n, delta=delta, confidence=low)
    assert clopper_pearson_epsilon_lower_bound(fp, n, fn, n, delta=delta, confidence=high) <= bound
    if fp > 0:
        assert (
            clopper_pearson_epsilon_lower_bound(fp - 1, n, fn, n, delta=delta, confidence=low)
            >= bound
        )


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 1000), delta=_DELTAS)
def test_edge_cases_are_finite_or_infinite_never_nan(m, delta):
    r = m
    for v in {0, r}:  # no guesses, all wrong, all right
        steinke = one_run_epsilon_lower_bound(r, v, m, delta=delta)
        fdp = fdp_one_run_epsilon_lower_bound(r, v, m, delta=delta)
        assert 0.0 <= steinke <= 64.0
        assert not math.isnan(fdp) and fdp >= 0.0
        if v == 0:
            assert steinke == fdp == 0.0


def test_all_right_is_finite_for_steinke_and_infinite_for_pure_fdp():
    assert 0.0 < one_run_epsilon_lower_bound(100, 100, 100) < 64.0
    assert math.isinf(fdp_one_run_epsilon_lower_bound(100, 100, 100, delta=0.0))
    assert math.isfinite(fdp_one_run_epsilon_lower_bound(100, 100, 100, delta=1e-5))


@pytest.mark.parametrize(
    "scores, included",
    [
        ([], []),
        ([0.3], [True]),
        ([1.0, 1.0, 1.0, 1.0], [True, False, True, False]),
        (np.arange(100.0), np.ones(100, dtype=bool)),
        (np.arange(100.0), np.zeros(100, dtype=bool)),
        (np.arange(100.0), np.arange(100) >= 50),
        (np.arange(100.0), np.arange(100) < 50),
    ],
)
def test_bound_from_scores_edge_cases(scores, included):
    result = epsilon_lower_bound_from_scores(scores, included, delta=1e-5)
    assert isinstance(result, OneRunAuditResult)
    values = [result.epsilon, result.epsilon_fdp, result.mu_fdp]
    assert all(not math.isnan(x) and x >= 0.0 for x in values)
    assert result.n_guesses == 2 * result.k <= len(scores)


def test_bound_from_scores_accounts_for_the_sweep():
    included, scores = _gaussian(2.0, 1, 1000, seed=5)
    swept = epsilon_lower_bound_from_scores(scores[0], included[0], delta=1e-5)
    k, v = swept.k, swept.n_correct
    assert swept.ks == (20, 50, 100, 200, 500)
    assert swept.n_correct_per_k[swept.ks.index(k)] == v
    # the best k at confidence 1 - 0.05 / 5, not at 0.95
    assert swept.epsilon == one_run_epsilon_lower_bound(
        2 * k, v, 1000, delta=1e-5, confidence=0.99
    )
    assert swept.epsilon < one_run_epsilon_lower_bound(2 * k, v, 1000, delta=1e-5)
    alone = epsilon_lower_bound_from_scores(scores[0], included[0], delta=1e-5, k=k)
    assert alone.ks == (k,) and alone.epsilon >= swept.epsilon


def test_bound_from_scores_checks_inputs():
    with pytest.raises(ValueError, match="k must be in"):
        epsilon_lower_bound_from_scores(np.arange(10.0), np.arange(10) < 5, delta=0.0, k=6)
    with pytest.raises(ValueError, match="same length"):
        epsilon_lower_bound_from_scores(np.arange(10.0), np.arange(9) < 5, delta=0.0)
    with pytest.raises(ValueError, match="finite"):
        epsilon_lower_bound_from_scores([np.nan, 1.0], [True, False], delta=0.0)
    with pytest.raises(ValueError, match="n_correct <= n_guesses"):
        one_run_epsilon_lower_bound(10, 11, 20)
    with pytest.raises(ValueError, match="confidence"):
        one_run_epsilon_lower_bound(10, 5, 20, confidence=1.0)
    with pytest.raises(ValueError, match="delta"):
        fdp_one_run_epsilon_lower_bound(10, 5, 20, delta=1.0)
