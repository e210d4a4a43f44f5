"""Accounting and calibration against dp-accounting computed directly."""

import dp_accounting as dpa
import pytest
from dp_accounting import pld, rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from skdp.privacy import (
    PLD_DISCRETIZATION,
    PrivacyBudgetError,
    calibrate_noise_multiplier,
    calibrate_steps,
    compute_epsilon,
    make_accountant,
    poisson_gaussian_event,
    poisson_gaussian_step,
)
from skdp.privacy import _accounting
from skdp.privacy._pld_search import can_estimate, epsilon_estimate


def _direct(event, delta, kind="pld"):
    if kind == "pld":
        acc = pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    else:
        acc = rdp.RdpAccountant()
    return acc.compose(event).get_epsilon(delta)


def test_known_figures():
    # spec raco_dp.md §3.3 sanity check: q=0.032, sigma=4, T=500, delta=1e-5
    event = poisson_gaussian_event(4.0, 0.032, 500)
    assert compute_epsilon(event, 1e-5, "pld") == pytest.approx(0.6668, abs=2e-3)
    assert compute_epsilon(event, 1e-5, "rdp") == pytest.approx(0.7333, abs=1e-3)
    # peers spec §2.4: q=256/60000, sigma=1.1, 14100 steps
    event = poisson_gaussian_event(1.1, 256 / 60000, 14100)
    assert compute_epsilon(event, 1e-5, "rdp") == pytest.approx(2.600, abs=5e-3)


@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_epsilon_equals_direct_dp_accounting(kind):
    event = poisson_gaussian_event(1.3, 0.02, 300)
    assert compute_epsilon(event, 1e-6, kind) == _direct(event, 1e-6, kind)
    assert make_accountant(kind).compose(event).get_epsilon(1e-6) == _direct(event, 1e-6, kind)


def test_pld_discretization_is_certified_and_close_to_default():
    """The coarser grid is an upper bound within 0.1 % of dp-accounting's default."""
    event = poisson_gaussian_event(2.0, 0.03, 500)
    ours = compute_epsilon(event, 1e-5)
    default = pld.PLDAccountant().compose(event).get_epsilon(1e-5)
    assert default <= ours <= default * 1.001


def test_replace_doubles_sensitivity():
    a = poisson_gaussian_event(2.0, 0.05, 100, neighboring="replace")
    b = poisson_gaussian_event(1.0, 0.05, 100)
    assert a == b
    assert compute_epsilon(a, 1e-5) > compute_epsilon(poisson_gaussian_event(2.0, 0.05, 100), 1e-5)


@settings(max_examples=8, deadline=None)
@given(
    eps=st.sampled_from([0.5, 1.0, 2.0, 4.0]),
    q=st.floats(0.005, 0.2),
    steps=st.integers(20, 1500),
    kind=st.sampled_from(["pld", "rdp"]),
)
def test_calibrated_noise_meets_target_within_one_percent(eps, q, steps, kind):
    sigma = calibrate_noise_multiplier(eps, 1e-5, q, steps, accountant=kind)
    spent = _direct(poisson_gaussian_event(sigma, q, steps), 1e-5, kind)
    assert spent <= eps
    assert spent >= 0.99 * eps


def test_calibrated_noise_within_one_percent_of_default_pld():
    sigma = calibrate_noise_multiplier(1.0, 1e-5, 0.03, 500)
    exact = pld.PLDAccountant().compose(poisson_gaussian_event(sigma, 0.03, 500)).get_epsilon(1e-5)
    assert 0.99 <= exact <= 1.0


def test_calibrate_steps_is_the_largest_feasible():
    step = poisson_gaussian_step(3.0, 0.03)
    steps = calibrate_steps(step, 1.0, 1e-5, max_steps=5000)
    assert 0 < steps < 5000
    assert _direct(dpa.SelfComposedDpEvent(step, steps), 1e-5) <= 1.0
    assert _direct(dpa.SelfComposedDpEvent(step, steps + 1), 1e-5) > 1.0


def test_calibrate_steps_zero_and_cap():
    assert calibrate_steps(poisson_gaussian_step(0.3, 0.5), 0.01, 1e-5, max_steps=100) == 0
    assert calibrate_steps(poisson_gaussian_step(50.0, 0.001), 5.0, 1e-5, max_steps=50) == 50


def test_infeasible_noise_calibration_raises():
    with pytest.raises(PrivacyBudgetError, match="raise epsilon"):
        calibrate_noise_multiplier(1e-7, 1e-12, 1.0, 10_000)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"accountant": "gdp"}, "accountant"), ({"neighboring": "swap"}, "neighboring")],
)
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate_noise_multiplier(1.0, 1e-5, 0.01, 100, **kwargs)


@settings(max_examples=30, deadline=None)
@given(eps0=st.floats(0.01, 5.0))
def test_pure_dp_trade_off_dominates_gaussian(eps0):
    """G_mu lies below the (eps0, 0)-DP trade-off curve, touching at the kink."""
    import numpy as np
    from scipy import stats as sps

    from skdp.privacy import gdp_to_pure_dp, pure_dp_to_gdp

    mu = pure_dp_to_gdp(eps0)
    alpha = np.linspace(1e-9, 1 - 1e-9, 4001)
    pure = np.maximum.reduce([np.zeros_like(alpha), 1 - np.exp(eps0) * alpha,
                              np.exp(-eps0) * (1 - alpha)])
    gauss = sps.norm.cdf(sps.norm.ppf(1 - alpha) - mu)
    assert np.all(gauss <= pure + 1e-9)
    assert gdp_to_pure_dp(mu) == pytest.approx(eps0, rel=1e-9)


def test_joint_gaussian_releases_compose_like_one_gaussian():
    """Two Gaussian releases on the same batch == one with the joint multiplier
    (checked against dp-accounting composing the unsubsampled pair)."""
    from skdp.privacy import joint_noise_multiplier

    joint = joint_noise_multiplier((2.0, 3.0))
    composed = dpa.ComposedDpEvent([dpa.GaussianDpEvent(2.0), dpa.GaussianDpEvent(3.0)])
    direct = pld.PLDAccountant(value_discretization_interval=1e-4).compose(composed).get_epsilon(1e-5)
    single = pld.PLDAccountant(value_discretization_interval=1e-4).compose(
        dpa.GaussianDpEvent(joint)).get_epsilon(1e-5)
    assert single == pytest.approx(direct, rel=2e-3)


def test_compute_epsilon_of_composed_event():
    a, b = poisson_gaussian_event(2.0, 0.01, 50), poisson_gaussian_event(3.0, 0.02, 80)
    composed = dpa.ComposedDpEvent([a, b])
    assert compute_epsilon(composed, 1e-5) == _direct(composed, 1e-5)


# ---------------------------------------------------------------- the search aid
@settings(max_examples=20, deadline=None)
@given(
    sigma=st.floats(0.5, 10.0),
    q=st.one_of(st.floats(1e-4, 0.5), st.just(1.0)),
    steps=st.integers(1, 2000),
    delta=st.floats(1e-8, 1e-3),
    initial=st.one_of(st.none(), st.floats(0.5, 30.0)),
    second=st.one_of(st.none(), st.tuples(st.floats(0.5, 10.0), st.floats(1e-3, 0.5),
                                          st.integers(1, 500))),
)
def test_search_estimate_agrees_with_the_accountant(sigma, q, steps, delta, initial, second):
    # DP-SGD's steps, after a one-off Gaussian release and before a second
    # kind of batch (as multi-batch plans compose them)
    events = [poisson_gaussian_event(sigma, q, steps)]
    if initial is not None:
        events.insert(0, dpa.GaussianDpEvent(noise_multiplier=initial))
    if second is not None:
        events.append(poisson_gaussian_event(*second))
    event = events[0] if len(events) == 1 else dpa.ComposedDpEvent(events)
    assert can_estimate(event)
    expected = _direct(event, delta)
    estimate = epsilon_estimate(event, delta, PLD_DISCRETIZATION)
    # equal up to FFT rounding, which shows in the tails at small delta
    assert estimate == pytest.approx(expected, rel=1e-6, abs=1e-10)


@settings(max_examples=200, deadline=None)
@given(
    sigma=st.floats(0.05, 1e4),
    q=st.one_of(st.floats(1e-7, 1.0, exclude_max=True), st.just(1.0)),
    add=st.booleans(),
)
def test_search_grid_bounds_are_the_accountants_to_the_bit(sigma, q, add):
    # the replica's grid of one step spans the losses at dp-accounting's
    # tail truncation points, computed without its loss object: the same
    # bits, or the grid (and every estimate) would shift
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from skdp.privacy._pld_search import _connect_dots_bounds

    adjacency = plm.AdjacencyType.ADD if add else plm.AdjacencyType.REMOVE
    bounds = plm.GaussianPrivacyLoss(
        sigma, sensitivity=1, pessimistic_estimate=True, log_mass_truncation_bound=-50.0,
        sampling_prob=q, adjacency_type=adjacency,
    ).connect_dots_bounds()
    assert _connect_dots_bounds(sigma, q, adjacency) == (bounds.epsilon_lower,
                                                         bounds.epsilon_upper)


def test_search_estimate_declines_other_releases():
    laplace = dpa.ComposedDpEvent([dpa.LaplaceDpEvent(1.0), poisson_gaussian_event(1.0, 0.1, 5)])
    assert not can_estimate(laplace)
    with pytest.raises(ValueError, match="no whole-array estimate"):
        epsilon_estimate(laplace, 1e-5, PLD_DISCRETIZATION)
    # nothing released: epsilon 0, as the accountant says
    assert epsilon_estimate(dpa.NoOpDpEvent(), 1e-5, PLD_DISCRETIZATION) == 0.0


def _cold():
    _accounting._calibrate_noise_cached.cache_clear()
    _accounting._max_steps_cached.cache_clear()
    _accounting._epsilon_cached.cache_clear()


@pytest.mark.parametrize("q, steps", [(0.03, 320), (1.28e-4, 7812), (1e-3, 100_000)])
def test_calibration_certifies_with_one_accountant_evaluation(q, steps):
    _cold()
    sigma = calibrate_noise_multiplier(1.0, 1e-5, q, steps)
    assert _accounting._epsilon_cached.cache_info().misses == 1
    assert 0.994 <= _direct(poisson_gaussian_event(sigma, q, steps), 1e-5) <= 1.0


@pytest.mark.parametrize("bias", [-0.05, 0.05])
def test_calibration_falls_back_to_the_accountant_when_the_estimate_misses(monkeypatch, bias):
    # a search aid that is off by 5 % must cost evaluations, never the budget
    exact = _accounting.estimated_log_epsilon

    def biased(*args):
        log_eps = exact(*args)
        return lambda x: log_eps(x) + bias

    monkeypatch.setattr(_accounting, "estimated_log_epsilon", biased)
    _cold()
    sigma = calibrate_noise_multiplier(1.0, 1e-5, 0.03, 320)
    _accounting._calibrate_noise_cached.cache_clear()
    assert _accounting._epsilon_cached.cache_info().misses > 1
    assert 0.994 <= _direct(poisson_gaussian_event(sigma, 0.03, 320), 1e-5) <= 1.0


@pytest.mark.parametrize("sigma, q, eps, cap", [(4.0, 0.032, 1.0, 5000), (0.8, 1e-3, 2.0, 20_000),
                                               (2.0, 0.1, 0.5, 1000)])
def test_calibrate_steps_with_the_estimate_equals_the_accountant_search(monkeypatch, sigma, q,
                                                                        eps, cap):
    step = poisson_gaussian_step(sigma, q)
    _cold()
    steps = calibrate_steps(step, eps, 1e-5, max_steps=cap)
    assert _accounting._epsilon_cached.cache_info().misses <= 2  # the answer and one more
    monkeypatch.setattr(_accounting, "estimated_log_epsilon", lambda *args: None)
    _cold()
    assert calibrate_steps(step, eps, 1e-5, max_steps=cap) == steps
    _cold()
