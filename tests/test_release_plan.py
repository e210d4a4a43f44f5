"""Release plans: calibration, joint accounting and reports (skdp.privacy._plan)."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skdp.privacy import (
    BatchReleases,
    InitialRelease,
    PrivacyBudgetError,
    Release,
    ReleasePlan,
    calibrate_noise_multiplier,
    calibrate_steps,
    joint_noise_multiplier,
    make_accountant,
    poisson_gaussian_event,
    poisson_gaussian_step,
    pure_dp_to_gdp,
    silo_summary,
)
from skdp.privacy._accounting import gdp_mu

DELTA = 1e-5
SLOW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fresh_epsilon(event, delta=DELTA, accountant="pld"):
    return make_accountant(accountant).compose(event).get_epsilon(delta)


releases_strategy = st.lists(
    st.tuples(
        st.sampled_from(["gaussian", "laplace"]),
        st.floats(0.05, 1.0),  # share
        st.floats(0.1, 20.0),  # sensitivity
    ),
    min_size=1, max_size=4,
)


def make_releases(spec, gaussian_only=False):
    return [
        Release(f"r{i}", sensitivity=s, share=share,
                mechanism="gaussian" if gaussian_only else mech)
        for i, (mech, share, s) in enumerate(spec)
    ]


@SLOW
@given(
    spec=releases_strategy,
    q=st.floats(0.005, 0.2),
    steps=st.integers(10, 800),
    eps=st.floats(0.3, 8.0),
    neighboring=st.sampled_from(["add_remove", "replace"]),
)
def test_calibrated_plan_meets_target_and_matches_accountant(spec, q, steps, eps, neighboring):
    plan = ReleasePlan(
        BatchReleases(make_releases(spec), steps=steps, sampling_rate=q), neighboring=neighboring
    )
    report = plan.calibrate(eps, DELTA)
    assert report.epsilon == pytest.approx(fresh_epsilon(report.dp_event), rel=1e-12)
    assert report.epsilon <= eps
    exact = neighboring == "add_remove" or all(m == "gaussian" for m, _, _ in spec)
    if exact:
        assert report.epsilon >= 0.99 * eps
    # the released noise is at least what the accountant was told
    factor = 2.0 if neighboring == "replace" else 1.0
    gaussian = [report.multiplier(r.name) / factor for r in plan.batches[0].releases
                if r.mechanism == "gaussian"]
    pure = [factor / report.multiplier(r.name) for r in plan.batches[0].releases
            if r.mechanism == "laplace"]
    released_joint = joint_noise_multiplier(gaussian, pure)
    assert released_joint >= report.joint_noise_multipliers[0] * (1 - 1e-12)
    assert released_joint == pytest.approx(report.joint_noise_multipliers[0], rel=2e-2)


@SLOW
@given(spec=releases_strategy, q=st.floats(0.005, 0.2), steps=st.integers(10, 800),
       eps=st.floats(0.3, 8.0))
def test_joint_gaussian_multiplier_is_inverse_root_sum(spec, q, steps, eps):
    """(sum sigma_i^-2)^(-1/2), each sigma_i in units of its release's sensitivity."""
    plan = ReleasePlan(BatchReleases(make_releases(spec, gaussian_only=True), steps=steps,
                                     sampling_rate=q))
    report = plan.calibrate(eps, DELTA)
    sigmas = [report.noise[f"r{i}"].scale / s for i, (_, _, s) in enumerate(spec)]
    joint = sum(s**-2 for s in sigmas) ** -0.5
    assert joint == pytest.approx(report.joint_noise_multipliers[0], rel=1e-8)
    # and the shares are respected
    shares = np.array([share for _, share, _ in spec])
    mu_sq = np.array([s**-2 for s in sigmas])
    np.testing.assert_allclose(mu_sq / mu_sq.sum(), shares / shares.sum(), rtol=1e-8)


@SLOW
@given(q=st.floats(0.001, 1.0), steps=st.integers(1, 2000), eps=st.floats(0.1, 10.0),
       clip=st.floats(0.01, 100.0), neighboring=st.sampled_from(["add_remove", "replace"]),
       accountant=st.sampled_from(["pld", "rdp"]))
def test_single_release_reproduces_dpsgd_event(q, steps, eps, clip, neighboring, accountant):
    plan = ReleasePlan(
        BatchReleases([Release("gradient", sensitivity=clip)], steps=steps, sampling_rate=q),
        neighboring=neighboring, accountant=accountant,
    )
    try:
        sigma = calibrate_noise_multiplier(eps, DELTA, q, steps, accountant=accountant,
                                           neighboring=neighboring)
    except PrivacyBudgetError:
        with pytest.raises(PrivacyBudgetError):
            plan.calibrate(eps, DELTA)
        return
    report = plan.calibrate(eps, DELTA)
    assert report.dp_event == poisson_gaussian_event(sigma, q, steps, neighboring=neighboring)
    assert report.multiplier("gradient") == sigma
    assert report.scale("gradient") == pytest.approx(sigma * clip, rel=1e-15)


def test_laplace_release_is_converted_to_gdp():
    plan = ReleasePlan(BatchReleases(
        [Release("g", sensitivity=1.0, share=0.8), Release("h", mechanism="laplace", share=0.2)],
        steps=200, sampling_rate=0.05,
    ))
    report = plan.calibrate(1.0, DELTA)
    expected = joint_noise_multiplier([report.multiplier("g")], [1.0 / report.multiplier("h")])
    assert expected == pytest.approx(report.joint_noise_multipliers[0], rel=1e-8)
    mu_h = pure_dp_to_gdp(1.0 / report.multiplier("h"))
    assert mu_h**2 * report.joint_noise_multipliers[0] ** 2 == pytest.approx(0.2, rel=1e-6)


def test_account_certifies_given_noise():
    plan = ReleasePlan(BatchReleases(
        [Release("g", sensitivity=2.0), Release("h", sensitivity=1.0)],
        steps=100, sampling_rate=0.1,
    ))
    report = plan.account({"g": 8.0, "h": 6.0}, DELTA)
    joint = (4.0**-2 + 6.0**-2) ** -0.5
    assert report.dp_event == poisson_gaussian_event(joint, 0.1, 100)
    assert report.epsilon == fresh_epsilon(report.dp_event)
    with pytest.raises(ValueError, match="missing"):
        plan.account({"g": 1.0}, DELTA)


def test_calibrate_steps_is_largest_affordable():
    plan = ReleasePlan(BatchReleases(
        [Release("g", sensitivity=1.0, share=0.9), Release("h", share=0.1)],
        steps=5000, sampling_rate=0.02,
    ))
    report = plan.calibrate_steps(1.0, DELTA, release="g", noise_multiplier=3.0)
    assert report.multiplier("g") == 3.0
    assert report.multiplier("h") == pytest.approx(3.0 * math.sqrt(0.9 / 0.1), rel=1e-8)
    steps = report.steps[0]
    step = report.step_events[0]
    assert fresh_epsilon(dpa.SelfComposedDpEvent(step, steps)) <= 1.0
    assert fresh_epsilon(dpa.SelfComposedDpEvent(step, steps + 1)) > 1.0
    with pytest.raises(PrivacyBudgetError, match="single step"):
        plan.calibrate_steps(0.01, DELTA, release="g", noise_multiplier=0.3)


def test_fixed_noise_takes_its_part_first():
    plan = ReleasePlan(BatchReleases(
        [Release("g", share=1.0), Release("h", noise_scale=10.0)], steps=300, sampling_rate=0.03,
    ))
    report = plan.calibrate(1.0, DELTA)
    assert report.scale("h") == 10.0
    joint = report.joint_noise_multipliers[0]
    assert (report.multiplier("g") ** -2 + 10.0**-2) ** -0.5 == pytest.approx(joint, rel=1e-8)
    tight = ReleasePlan(BatchReleases(
        [Release("g"), Release("h", noise_scale=0.5)], steps=300, sampling_rate=0.03,
    ))
    with pytest.raises(PrivacyBudgetError, match="alone spends"):
        tight.calibrate(1.0, DELTA)


def test_initial_release_is_composed_before_training():
    plan = ReleasePlan(
        BatchReleases([Release("g")], steps=300, sampling_rate=0.03),
        initial=[InitialRelease("sizes", budget_share=0.02)],
    )
    report = plan.calibrate(1.0, DELTA)
    std = 1.0 / (math.sqrt(0.02) * gdp_mu(1.0, DELTA))
    assert report.scale("sizes") == pytest.approx(std, rel=1e-12)
    initial, training = report.dp_event.events
    assert initial == dpa.GaussianDpEvent(std)
    assert training == dpa.SelfComposedDpEvent(poisson_gaussian_step(report.multiplier("g"), 0.03), 300)
    assert 0.99 <= report.epsilon <= 1.0
    curve = report.privacy_curve(5)
    assert curve[0, 1] > fresh_epsilon(dpa.GaussianDpEvent(std)) - 1e-9
    assert np.all(np.diff(curve[:, 1]) > 0)
    assert curve[-1, 1] == pytest.approx(report.epsilon)


def test_batches_at_other_rates_compose_as_separate_events():
    anchors = BatchReleases([Release("anchor", sensitivity=1.0)], steps=25, sampling_rate=1.0,
                            name="anchors", noise_ratio=4.0)
    diffs = BatchReleases([Release("x_diff", share=0.5), Release("eta_diff", share=0.5)],
                          steps=500, sampling_rate=0.01, name="diffs")
    plan = ReleasePlan([anchors, diffs])
    report = plan.calibrate(2.0, DELTA)
    assert isinstance(report.dp_event, dpa.ComposedDpEvent)
    first, second = report.dp_event.events
    assert first.count == 25 and second.count == 500
    assert first.event.sampling_probability == 1.0
    assert second.event.sampling_probability == 0.01
    z_anchor, z_diff = report.joint_noise_multipliers
    assert z_anchor == pytest.approx(4.0 * z_diff, rel=1e-6)
    assert 0.98 * 2.0 <= report.epsilon <= 2.0
    assert report.epsilon == pytest.approx(fresh_epsilon(report.dp_event), rel=1e-12)


def test_per_silo_reports_use_each_silo_size():
    plan = ReleasePlan(BatchReleases(
        [Release("theta", sensitivity=1.0, share=0.5), Release("W", sensitivity=3.0, share=0.5)],
        steps=400, batch_size=100,
    ))
    sizes = [2000, 5000, 800]
    reports = plan.calibrate_silos(1.0, DELTA, sizes)
    assert [r.sampling_rates[0] for r in reports] == [100 / n for n in sizes]
    for report, n in zip(reports, sizes):
        assert report.epsilon <= 1.0
        assert report.epsilon == fresh_epsilon(report.dp_event)
    # a smaller silo samples more of its records, so it needs more noise
    assert reports[2].multiplier("theta") > reports[0].multiplier("theta") > reports[1].multiplier("theta")
    assert silo_summary(reports).epsilon == max(r.epsilon for r in reports)
    with pytest.raises(ValueError, match="n_records"):
        plan.calibrate(1.0, DELTA)


def test_replace_one_doubles_sensitivities():
    kwargs = dict(steps=300, sampling_rate=0.03)
    add = ReleasePlan(BatchReleases([Release("g")], **kwargs)).account({"g": 4.0}, DELTA)
    rep = ReleasePlan(BatchReleases([Release("g")], **kwargs), neighboring="replace").account(
        {"g": 8.0}, DELTA)
    assert add.dp_event == rep.dp_event


def test_non_private_report():
    plan = ReleasePlan(BatchReleases([Release("g")], steps=10, sampling_rate=0.5))
    report = plan.non_private(DELTA)
    assert report.epsilon == np.inf and report.dp_event is None
    assert report.multiplier("g") is None


@pytest.mark.parametrize("kwargs, match", [
    (dict(name="a", mechanism="exponential"), "mechanism"),
    (dict(name="a", sensitivity=0.0), "sensitivity"),
    (dict(name="a", share=-1.0), "share"),
    (dict(name="a", noise_scale=0.0), "noise_scale"),
])
def test_release_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Release(**kwargs)


def test_plan_rejects_bad_structure():
    with pytest.raises(ValueError, match="exactly one"):
        BatchReleases([Release("a")], steps=3)
    with pytest.raises(ValueError, match="unique"):
        ReleasePlan(BatchReleases([Release("a"), Release("a")], steps=3, sampling_rate=0.1))
    with pytest.raises(ValueError, match="neighboring"):
        ReleasePlan(BatchReleases([Release("a")], steps=3, sampling_rate=0.1), neighboring="x")


def test_calibrate_steps_uses_existing_calibration():
    """The plan's step calibration agrees with the engine's own for one release."""
    plan = ReleasePlan(BatchReleases([Release("g", sensitivity=0.5)], steps=3000,
                                     sampling_rate=0.032))
    report = plan.calibrate_steps(1.0, DELTA, release="g", noise_multiplier=4.0)
    assert report.steps[0] == calibrate_steps(poisson_gaussian_step(4.0, 0.032), 1.0, DELTA,
                                              max_steps=3000)
