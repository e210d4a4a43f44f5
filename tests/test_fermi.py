"""DP-FERMI / SteFFLe: ERMI algebra, privacy invariants, trainer, estimator,
silo splits (skdp.fairness.fermi: _ermi, _trainer, protocol, _estimator; skdp.datasets.make_silos)."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPFERMIClassifier
from skdp.datasets import make_fair_classification, make_silos
from skdp.fairness.fermi._ermi import (
    default_w_radius,
    empirical_priors,
    ermi,
    ermi_coefficients,
    fairness_strata,
    optimal_w,
    per_record_w_gradients,
    project_frobenius,
    psi_output_grad,
    psi_values,
    record_cells,
    w_gradient_bound,
    w_gradient_clip,
    w_gradient_replace_sensitivity,
    w_gradient_sq_table,
)
from skdp.fairness.fermi._trainer import FermiConfig, SiloContext, SiloData, silo_step
from skdp.fairness.fermi.protocol import Broadcast, FermiNoise
from skdp.metrics import demographic_parity_difference
from skdp.models import make_backend
from skdp.privacy import PrivacyBudgetError, make_accountant

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TORCH64 = torch.float64


def _random_case(rng, n, n_classes, n_groups, fairness):
    probs = rng.dirichlet(np.ones(n_classes), size=n)
    y = rng.integers(0, n_classes, size=n)
    groups = rng.integers(0, n_groups, size=n)
    groups[:n_groups] = np.arange(n_groups)  # every group present
    y[: n_classes * n_groups] = np.repeat(np.arange(n_classes), n_groups)
    groups[: n_classes * n_groups] = np.tile(np.arange(n_groups), n_classes)
    strata, n_strata = fairness_strata(fairness, y, n_classes)
    return probs, y, groups, strata, n_strata


def _trace_psi(probs, group, W, inv_sqrt):
    """The paper's trace form for one record: -Tr(W diag(F) W^T) + 2 Tr(W F s^T P^-1/2) - 1."""
    s = torch.zeros(W.shape[0], dtype=W.dtype)
    s[group] = 1.0
    quad = torch.trace(W @ torch.diag(probs) @ W.T)
    lin = torch.trace(W @ torch.outer(probs, s) @ torch.diag(inv_sqrt))
    return -quad + 2 * lin - 1


# ------------------------------------------------------------------ ERMI algebra
@pytest.mark.parametrize("fairness", ["demographic_parity", "equalized_odds", "equal_opportunity"])
@pytest.mark.parametrize("n_classes,n_groups", [(2, 2), (3, 4)])
def test_mean_psi_at_optimal_w_is_chi2_and_gradient_vanishes(fairness, n_classes, n_groups):
    rng = np.random.default_rng(0)
    probs, y, groups, strata, n_strata = _random_case(rng, 300, n_classes, n_groups, fairness)
    priors = empirical_priors(groups, strata, n_groups, n_strata)
    W_star = optimal_w(probs, groups, strata, n_groups, n_strata).requires_grad_(True)
    cells = torch.as_tensor(record_cells(groups, strata, n_groups, n_strata))
    coef = ermi_coefficients(W_star, priors.rsqrt())
    mean_psi = psi_values(torch.as_tensor(probs), cells, coef).mean()
    chi2 = ermi(probs, groups, strata, n_groups, n_strata)
    assert float(mean_psi.detach()) == pytest.approx(chi2, rel=1e-10, abs=1e-12)
    assert chi2 > 0
    (grad_w,) = torch.autograd.grad(mean_psi, W_star)
    assert float(grad_w.abs().max()) < 1e-10
    # closed-form W-gradient sums match autograd at another W
    W = torch.randn(W_star.shape, dtype=TORCH64, generator=torch.Generator().manual_seed(1))
    W.requires_grad_(True)
    total = psi_values(torch.as_tensor(probs), cells, ermi_coefficients(W, priors.rsqrt())).sum()
    (auto,) = torch.autograd.grad(total, W)
    closed = per_record_w_gradients(torch.as_tensor(probs), cells, W.detach(), priors.rsqrt()).sum(0)
    torch.testing.assert_close(closed, auto)


def test_scalar_psi_equals_trace_form():
    rng = np.random.default_rng(1)
    W = torch.as_tensor(rng.normal(size=(1, 3, 4)))
    priors = torch.as_tensor([[0.2, 0.3, 0.5]], dtype=TORCH64)
    probs = torch.as_tensor(rng.dirichlet(np.ones(4), size=6))
    groups = torch.as_tensor([0, 1, 2, 2, 1, 0])
    cells = record_cells(groups, torch.zeros(6, dtype=torch.long), 3, 1)
    scalar = psi_values(probs, cells, ermi_coefficients(W, priors.rsqrt()))
    trace = torch.stack([_trace_psi(probs[i], groups[i], W[0], priors[0].rsqrt()) for i in range(6)])
    torch.testing.assert_close(scalar, trace)


def test_psi_output_grad_matches_autograd_and_records_outside_strata_have_no_term():
    rng = np.random.default_rng(2)
    logits = torch.as_tensor(rng.normal(size=(5, 3)), dtype=TORCH64).requires_grad_(True)
    coef = torch.as_tensor(rng.normal(size=(5, 3)), dtype=TORCH64)
    (auto,) = torch.autograd.grad((torch.softmax(logits, 1) * coef).sum(), logits)
    closed = psi_output_grad(torch.softmax(logits, 1).T.detach(), coef.T)
    torch.testing.assert_close(closed.T, auto)
    strata, _ = fairness_strata("equal_opportunity", np.array([0, 1, 0]), 2)
    cells = torch.as_tensor(record_cells(np.array([0, 1, 1]), strata, 2, 1))
    W = torch.ones((1, 2, 2), dtype=TORCH64)
    values = psi_values(torch.full((3, 2), 0.5, dtype=TORCH64), cells, ermi_coefficients(W, W[0, :, 0][None]))
    assert values[0] == 0 and values[2] == 0 and values[1] != 0


def test_broadcast_tables_match_the_ermi_functions():
    rng = np.random.default_rng(6)
    W = torch.as_tensor(rng.normal(size=(2, 3, 2)))
    inv = torch.as_tensor(rng.uniform(1, 3, size=(2, 3)))
    tables = Broadcast(W, inv).refresh().tables
    torch.testing.assert_close(tables[:2], ermi_coefficients(W, inv).T)
    torch.testing.assert_close(tables[2:], w_gradient_sq_table(W, inv).T)


def test_ermi_is_zero_for_independent_predictions_and_w_radius_holds_w_star():
    rng = np.random.default_rng(3)
    probs, y, groups, strata, n_strata = _random_case(rng, 400, 3, 3, "equalized_odds")
    same = np.tile(probs[:1], (400, 1))
    assert ermi(same, groups, strata, 3, n_strata) == pytest.approx(0.0, abs=1e-12)
    priors = empirical_priors(groups, strata, 3, n_strata)
    W_star = optimal_w(probs, groups, strata, 3, n_strata)
    radius = default_w_radius(priors.numpy(), 3)
    assert float(W_star.flatten(1).norm(dim=1).max()) <= radius
    assert torch.equal(project_frobenius(W_star.clone(), radius), W_star)


# --------------------------------------------------------- sensitivity properties
priors_strategy = st.integers(2, 5).flatmap(
    lambda k: st.lists(st.floats(0.02, 1.0), min_size=k, max_size=k)
)


@FAST
@given(
    raw_priors=priors_strategy,
    n_classes=st.integers(2, 4),
    seed=st.integers(0, 2**31 - 1),
    radius_scale=st.floats(0.1, 3.0),
)
def test_w_gradient_norm_and_replace_sensitivity_within_bounds(raw_priors, n_classes, seed, radius_scale):
    rng = np.random.default_rng(seed)
    priors = np.asarray(raw_priors) / np.sum(raw_priors)
    k = len(priors)
    radius = radius_scale * default_w_radius(priors[None], n_classes)
    W = project_frobenius(torch.as_tensor(rng.normal(size=(1, k, n_classes)) * 5), radius)
    inv = torch.as_tensor(priors[None]).rsqrt()
    probs = torch.as_tensor(rng.dirichlet(np.ones(n_classes) * rng.uniform(0.05, 3), size=8))
    s, s2 = rng.integers(0, k, size=8), rng.integers(0, k, size=8)
    zeros = torch.zeros(8, dtype=torch.long)
    g1 = per_record_w_gradients(probs, record_cells(torch.as_tensor(s), zeros, k, 1), W, inv)
    g2 = per_record_w_gradients(probs, record_cells(torch.as_tensor(s2), zeros, k, 1), W, inv)
    bound = w_gradient_bound(priors[None], radius)
    assert float(g1.flatten(1).norm(dim=1).max()) <= bound * (1 + 1e-9)
    replace_bound = w_gradient_replace_sensitivity(priors[None])
    assert float((g1 - g2).flatten(1).norm(dim=1).max()) <= replace_bound * (1 + 1e-9)


def _one_silo_step(backend, X, y_codes, cells, priors, W, config, idx):
    onehot = torch.nn.functional.one_hot(torch.as_tensor(y_codes), 2).to(X.dtype)
    data = SiloData.build(backend, onehot, cells, priors.numel())
    broadcast = Broadcast(W, priors.rsqrt()).refresh()
    context = SiloContext(config, len(backend.parameters), X.dtype, X.device)
    return silo_step(backend, idx, None, data, broadcast, config, context)


@SLOW
@given(
    seed=st.integers(0, 2**31 - 1),
    lam=st.floats(0.0, 50.0),
    clip=st.floats(0.05, 5.0),
    unit=st.sampled_from(["record", "sensitive_attribute"]),
    scale=st.floats(0.1, 30.0),
)
def test_each_record_moves_the_clipped_sums_by_at_most_the_bounds(seed, lam, clip, unit, scale):
    rng = np.random.default_rng(seed)
    n, d = 6, 4
    X = torch.as_tensor(rng.normal(size=(n, d)) * scale, dtype=TORCH64)
    y = rng.integers(0, 2, size=n)
    groups = torch.as_tensor(rng.integers(0, 2, size=n))
    cells = record_cells(groups, torch.zeros(n, dtype=torch.long), 2, 1)
    priors = torch.as_tensor([[0.3, 0.7]], dtype=TORCH64)
    radius = default_w_radius(priors.numpy(), 2)
    W = project_frobenius(torch.as_tensor(rng.normal(size=(1, 2, 2)) * 3), radius)
    config = FermiConfig(
        n_rounds=1, silo_sizes=(n,), sampling_rates=(1.0 / n,), lam=lam, max_grad_norm=clip,
        w_clip=w_gradient_clip(priors.numpy()), w_radius=radius, privacy_unit=unit,
    )
    for module in (None, torch.nn.Sequential(torch.nn.Linear(d, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))):
        if module is not None:
            module = module.double()
        backend = make_backend(X, 2, module)
        with torch.no_grad():
            for p in backend.parameters:
                p.copy_(torch.as_tensor(rng.normal(size=p.shape) * 2))
        for i in range(n):
            # one-record batch, expected batch 1: the message is that record's clipped sum
            msg = _one_silo_step(backend, X, y, cells, priors, W, config, torch.tensor([i]))
            if unit == "record":
                theta_norm = math.sqrt(sum(float(t.square().sum()) for t in msg.theta))
                assert theta_norm <= clip * (1 + 1e-6)
            assert float(msg.w.norm()) <= config.w_clip * (1 + 1e-6)
            assert float(msg.monitor.abs().max()) <= 1 + 1e-12


def test_sensitive_unit_clips_the_loss_and_psi_gradients_separately():
    """With privacy_unit="sensitive_attribute" no record's gradient leaves
    unclipped: the loss part and the psi part are each clipped to C, and the
    noise on their sum is max(lam, 1) times the psi scale (never 0)."""
    rng = np.random.default_rng(4)
    n, d = 5, 3
    X = torch.as_tensor(rng.normal(size=(n, d)) * 10, dtype=TORCH64)
    y = rng.integers(0, 2, size=n)
    cells = torch.as_tensor(rng.integers(0, 2, size=n))
    priors = torch.as_tensor([[0.5, 0.5]], dtype=TORCH64)
    W = torch.as_tensor([[[1.0, -1.0], [0.5, 2.0]]], dtype=TORCH64)
    common = dict(n_rounds=1, silo_sizes=(n,), sampling_rates=(1.0 / n,), max_grad_norm=0.1,
                  w_clip=10.0, w_radius=3.0, privacy_unit="sensitive_attribute")
    backend = make_backend(X, 2)
    backend.weights.copy_(torch.as_tensor(rng.normal(size=(2, d + 1))))
    idx = torch.tensor([2])
    loss_only = _one_silo_step(backend, X, y, cells, priors, W, FermiConfig(lam=0.0, **common), idx)
    both = _one_silo_step(backend, X, y, cells, priors, W, FermiConfig(lam=3.0, **common), idx)
    # one record in the batch (expected batch 1): its loss part is clipped to C
    assert 0.0 < float(loss_only.theta[0].norm()) <= 0.1 * (1 + 1e-9)
    fairness_part = (both.theta[0] - loss_only.theta[0]) / 3.0
    assert 0.0 < float(fairness_part.norm()) <= 0.1 * (1 + 1e-9)
    noise = FermiNoise(theta=(2.0,), w=(1.0,), monitor=(1.0,))
    for lam, factor in [(0.0, 1.0), (0.5, 1.0), (3.0, 3.0)]:
        config = FermiConfig(lam=lam, noise=noise, **common)
        assert float(SiloContext(config, 1, TORCH64, "cpu").stds[0][0]) == 2.0 * factor


# ------------------------------------------------------------------ trainer
def _fair_data(n=3000, seed=0, corr=0.6):
    return make_fair_classification(n_samples=n, n_features=6, label_group_correlation=corr,
                                    feature_group_correlation=0.5, random_state=seed)


def test_noise_off_one_silo_equals_full_batch_sgda():
    X, y, g = _fair_data(n=400)
    lam, lr, lr_w, steps = 2.0, 0.5, 0.3, 25
    clf = DPFERMIClassifier(lam=lam, epsilon=None, max_grad_norm=np.inf, max_steps=steps,
                            learning_rate=lr, random_state=0, solver_options={"sample_rate": 1.0, "momentum": 0.0, "schedule": "constant", "w_learning_rate": lr_w, "return_iterate": "last"}).fit(X, y, sensitive_features=g)
    # reference: autograd on the trace-form objective, float64
    Xa = torch.as_tensor(np.column_stack([X, np.ones(len(X))]))
    Y = torch.nn.functional.one_hot(torch.as_tensor(y), 2).double()
    priors = torch.as_tensor(np.bincount(g) / len(g))
    theta = torch.zeros((2, Xa.shape[1]), dtype=TORCH64, requires_grad=True)
    W = torch.zeros((2, 2), dtype=TORCH64, requires_grad=True)
    S = torch.nn.functional.one_hot(torch.as_tensor(g), 2).double()
    radius = default_w_radius(priors[None].numpy(), 2)
    for _ in range(steps):
        F = torch.softmax(Xa @ theta.T, 1)
        loss = -(Y * torch.log(F)).sum(1).mean()
        quad = (F * (W * W).sum(0)).sum(1)
        lin = 2 * ((F @ W.T) * S * priors.rsqrt()).sum(1)
        psi = (-quad + lin - 1).mean()
        g_theta, = torch.autograd.grad(loss + lam * psi, theta, retain_graph=True)
        g_w, = torch.autograd.grad(psi, W)
        with torch.no_grad():
            theta -= lr * g_theta
            W += lr_w * g_w
            W *= min(1.0, radius / float(W.norm()))
    ref = (theta[1] - theta[0]).detach().numpy()
    np.testing.assert_allclose(clf.coef_[0], ref[:-1], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(clf.intercept_[0], ref[-1], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(clf.W_, W.detach().numpy(), rtol=2e-4, atol=2e-5)
    assert clf.epsilon_ == np.inf and clf.dp_event_ is None


def test_batched_silos_equal_one_silo_at_a_time():
    """The in-process batched pass gives each silo the messages it would
    compute alone (what a federated engine runs in each silo)."""
    rng = np.random.default_rng(5)
    n, d = 40, 3
    X = torch.as_tensor(rng.normal(size=(n, d)))
    y = rng.integers(0, 2, size=n)
    cells = torch.as_tensor(rng.integers(0, 2, size=n))
    priors = torch.as_tensor([[0.4, 0.6]], dtype=TORCH64)
    W = torch.as_tensor([[[0.5, -0.2], [0.1, 0.9]]], dtype=TORCH64)
    sizes = (15, 25)
    noise = FermiNoise(theta=(0.5, 0.7), w=(0.2, 0.3), monitor=(0.1, 0.4))
    common = dict(n_rounds=1, lam=2.0, max_grad_norm=0.7, w_clip=5.0, w_radius=3.0, noise=noise)
    config = FermiConfig(silo_sizes=sizes, sampling_rates=(0.4, 0.2), **common)
    backend = make_backend(X, 2)
    backend.weights.copy_(torch.as_tensor(rng.normal(size=(2, d + 1))))
    idx = torch.tensor([1, 4, 7, 15, 20, 30, 39])
    silo = (idx >= 15).long()
    size = 2 * (d + 1) + 4 + 3
    rows = torch.as_tensor(rng.normal(size=(2, size)))
    onehot = torch.nn.functional.one_hot(torch.as_tensor(y), 2).double()
    data = SiloData.build(backend, onehot, cells, 2)
    broadcast = Broadcast(W, priors.rsqrt()).refresh()
    context = SiloContext(config, 1, TORCH64, X.device)
    both = silo_step(backend, idx, silo, data, broadcast, config, context, rows)
    for j, (start, stop) in enumerate([(0, 15), (15, 40)]):
        one = FermiConfig(silo_sizes=(sizes[j],), sampling_rates=(config.sampling_rates[j],),
                          **{**common, "noise": FermiNoise((noise.theta[j],), (noise.w[j],),
                                                          (noise.monitor[j],))})
        mine = idx[silo == j]
        local = make_backend(X[start:stop], 2)
        local.weights.copy_(backend.weights)
        local_data = SiloData.build(local, onehot[start:stop], cells[start:stop], 2)
        msg = silo_step(local, mine - start, None, local_data, broadcast, one,
                        SiloContext(one, 1, TORCH64, X.device), rows[j:j + 1])
        torch.testing.assert_close(msg.theta[0][0], both.theta[0][j])
        torch.testing.assert_close(msg.w[0], both.w[j])
        torch.testing.assert_close(msg.monitor[0], both.monitor[j])


# ---------------------------------------------------------------- estimator
def test_every_epsilon_recomputed_from_its_event():
    X, y, g = _fair_data()
    silos = make_silos(X, 3, random_state=0)
    clf = DPFERMIClassifier(lam=1.0, epsilon=1.0, max_epochs=3, random_state=0)
    clf.fit(X, y, sensitive_features=g, silo_ids=silos)
    assert clf.n_silos_ == 3 and clf.silo_sizes_.tolist() == [1000, 1000, 1000]
    for eps, event in zip(clf.silo_epsilons_, clf.silo_dp_events_):
        fresh = make_accountant("pld").compose(event).get_epsilon(clf.delta_)
        assert fresh == pytest.approx(eps, rel=1e-9)
        assert fresh <= 1.0
    assert clf.epsilon_ == clf.silo_epsilons_.max()
    fresh = make_accountant("pld").compose(clf.dp_event_).get_epsilon(clf.delta_)
    assert fresh == pytest.approx(clf.epsilon_, rel=1e-9)
    assert clf.privacy_report_.neighboring == "add_remove" and clf.privacy_unit_ == "record"
    assert set(clf.privacy_report_.noise) == {"theta", "w", "monitor", "group_counts",
                                              "model_check"}
    assert clf.group_priors_.shape == (1, 2) and clf.W_.shape == (2, 2)
    assert set(clf.history_) == {"loss", "fairness", "clipped_fraction", "w_norm", "learning_rate"}
    assert all(len(v) == clf.n_steps_ for v in clf.history_.values())


def test_paper_calibration_warns_and_reports_the_accountant_value():
    X, y, g = _fair_data(n=2000)
    clf = DPFERMIClassifier(lam=1.0, privacy_unit="sensitive_attribute", max_epochs=3,
                            random_state=0, solver_options={"noise_calibration": "paper"})
    with pytest.warns(UserWarning, match="does not certify"):
        clf.fit(X, y, sensitive_features=g)
    fresh = make_accountant("pld").compose(clf.dp_event_).get_epsilon(clf.delta_)
    assert fresh == pytest.approx(clf.epsilon_, rel=1e-9)
    assert clf.privacy_unit_ == "sensitive_attribute"
    assert clf.privacy_report_.neighboring == "replace"


@pytest.mark.parametrize("calibration", ["paper", "accountant"])
def test_silo_epsilons_are_those_of_the_noise_that_ran(calibration):
    """epsilon_ == max(silo_epsilons_) always: with the paper's noise the
    silos' epsilons are the accountant's figures for that noise, not the
    calibrated ones (which were stored before, about 3 each)."""
    X, y, g = _fair_data(n=3000)
    silos = np.repeat([0, 1, 2], [1500, 1000, 500])
    clf = DPFERMIClassifier(lam=1.0, epsilon=3.0, max_epochs=3, batch_size=100,
                            privacy_unit="sensitive_attribute", random_state=0, solver_options={"noise_calibration": calibration})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        clf.fit(X, y, sensitive_features=g, silo_ids=silos)
    assert clf.epsilon_ == clf.silo_epsilons_.max()
    accountant = [make_accountant("pld").compose(event).get_epsilon(clf.delta_)
                  for event in clf.silo_dp_events_]
    np.testing.assert_allclose(clf.silo_epsilons_, accountant, rtol=1e-9)
    if calibration == "paper":
        assert np.ptp(clf.silo_epsilons_) > 1.0  # the paper's noise differs per silo size
    else:
        assert clf.silo_epsilons_.max() <= 3.0


def test_dp_gap_falls_as_lam_grows():
    X, y, g = _fair_data(n=6000, corr=0.8)
    gaps, scores = [], []
    for lam in (0.0, 2.0, 8.0):
        clf = DPFERMIClassifier(lam=lam, epsilon=1.0, random_state=0).fit(X, y, sensitive_features=g)
        gaps.append(demographic_parity_difference(y, clf.predict(X), sensitive_features=g))
        scores.append(clf.ermi_score(X, y, sensitive_features=g))
    assert gaps[0] > gaps[1] > gaps[2]
    assert scores[0] > scores[1] > scores[2]
    assert gaps[0] - gaps[2] > 0.2


def test_one_silo_of_everything_is_the_central_fit_and_fits_are_reproducible():
    X, y, g = _fair_data(n=1500)
    kw = dict(lam=2.0, max_epochs=3, random_state=7)
    central = DPFERMIClassifier(**kw).fit(X, y, sensitive_features=g)
    federated = DPFERMIClassifier(**kw).fit(X, y, sensitive_features=g, silo_ids=["a"] * len(y))
    np.testing.assert_array_equal(central.coef_, federated.coef_)
    np.testing.assert_array_equal(central.W_, federated.W_)
    assert central.epsilon_ == federated.epsilon_
    other = DPFERMIClassifier(**{**kw, "random_state": 8}).fit(X, y, sensitive_features=g)
    assert not np.array_equal(central.coef_, other.coef_)


def test_equalized_odds_multiclass_and_mlp_path():
    X, y, g = make_fair_classification(n_samples=1500, n_classes=3, n_groups=3,
                                       label_group_correlation=0.5, random_state=0)
    clf = DPFERMIClassifier("equalized_odds", lam=1.0, hidden_layer_sizes=(4,), max_epochs=2,
                            random_state=0)
    clf.fit(X, y, sensitive_features=g, silo_ids=np.arange(len(y)) % 2)
    assert clf.W_.shape == (3, 3, 3) and clf.group_priors_.shape == (3, 3)
    assert clf.module_state_ is not None and clf.predict_proba(X).shape == (1500, 3)
    assert clf.epsilon_ <= 1.0


def test_routing_off_columns_and_metadata_routing():
    import sklearn
    from sklearn.model_selection import cross_validate
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, g = _fair_data(n=1200)
    silos = np.arange(len(y)) % 2
    Xc = np.column_stack([X, silos, g])
    by_columns = DPFERMIClassifier(lam=1.0, max_epochs=2, silo_column=-2, sensitive_columns=-1,
                                   random_state=0).fit(Xc, y)
    by_args = DPFERMIClassifier(lam=1.0, max_epochs=2, random_state=0)
    by_args.fit(X, y, sensitive_features=g, silo_ids=silos)
    np.testing.assert_array_equal(by_columns.coef_, by_args.coef_)
    assert by_columns.n_features_in_ == X.shape[1]  # the model inputs
    np.testing.assert_array_equal(by_columns.predict(Xc), by_args.predict(X))
    with sklearn.config_context(enable_metadata_routing=True):
        clf = DPFERMIClassifier(lam=1.0, max_epochs=2, random_state=0).set_fit_request(
            sensitive_features=True, silo_ids=True)
        pipe = make_pipeline(StandardScaler(), clf)
        result = cross_validate(pipe, X, y, cv=2, params={"sensitive_features": g, "silo_ids": silos})
        assert len(result["test_score"]) == 2


def test_public_priors_and_bad_inputs():
    X, y, g = _fair_data(n=1200)
    clf = DPFERMIClassifier(max_epochs=2, random_state=0,
                            solver_options={"group_priors": {0: 0.5, 1: 0.5}})
    clf.fit(X, y, sensitive_features=g)
    np.testing.assert_allclose(clf.group_priors_, [[0.5, 0.5]])
    assert "group_counts" not in clf.privacy_report_.noise
    bad = [
        (dict(), dict(silo_ids=np.zeros(10)), "silo_ids must have one silo label per row"),
        (dict(batch_size=200), dict(silo_ids=np.r_[np.zeros(1100), np.ones(100)]),
         "fewer than batch_size=200"),
        (dict(solver_options={"group_priors": [0.5, 0.6]}), {}, "probability distribution"),
        (dict(solver_options={"group_priors": [0.5, 0.5, 0.0]}), {}, r"must have shape \(2,\)"),
        (dict(solver_options={"group_priors": {0: 1.0}}), {}, "misses groups"),
        (dict(solver_options={"group_priors": {0: 0.4, 1: 0.4, 2: 0.2}}), {}, "not in the data's groups"),
        (dict(sensitive_groups=[0]), {}, "outside sensitive_groups"),
        (dict(lam=-1.0), {}, "lam"),
        (dict(epsilon=1e-4), {}, "cannot pay"),
    ]
    for params, fit_params, match in bad:
        with pytest.raises(ValueError, match=match):
            DPFERMIClassifier(max_epochs=2, **params).fit(X, y, sensitive_features=g, **fit_params)
    one_group_silo = np.where(g == 0, 0, 1)
    with pytest.warns(UserWarning, match="hold a single group"):
        DPFERMIClassifier(max_epochs=1).fit(X, y, sensitive_features=g, silo_ids=one_group_silo)
    with pytest.raises(PrivacyBudgetError):
        DPFERMIClassifier(epsilon=1e-4, max_epochs=2).fit(X, y, sensitive_features=g)


# ---------------------------------------------------------------- make_silos
def test_make_silos_follows_algorithm_3():
    rng = np.random.default_rng(0)
    n = 1001
    age = rng.integers(17, 90, size=n).astype(float)
    X = np.zeros((n, 2))
    iid = make_silos(X, 3, attribute=age, random_state=0)
    assert sorted(np.bincount(iid).tolist()) == [333, 334, 334]
    means = [age[iid == k].mean() for k in range(3)]
    assert max(means) - min(means) < 4  # no age structure at h=0
    sorted_ = make_silos(X, 3, heterogeneity=1.0, attribute=age, random_state=0)
    for k in range(2):
        assert age[sorted_ == k].max() <= age[sorted_ == k + 1].min()
    half = make_silos(X, 4, heterogeneity=0.5, attribute=age, random_state=1)
    blocks = np.empty(n, dtype=int)
    blocks[np.argsort(age, kind="stable")] = np.repeat(np.arange(4), [251, 250, 250, 250])
    own = np.mean(half == blocks)
    assert 0.5 <= own < 0.75
    np.testing.assert_array_equal(make_silos(X, 3, random_state=5), make_silos(X, 3, random_state=5))
    for kwargs, match in [
        (dict(n_silos=0), "n_silos"), (dict(n_silos=3, heterogeneity=1.5), "heterogeneity"),
        (dict(n_silos=3, heterogeneity=0.5), "needs attribute"),
        (dict(n_silos=3, heterogeneity=0.5, attribute=age[:10]), "one value per row"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_silos(X, **kwargs)


# ------------------------------------------------------------ sklearn checks
_WEIGHTS_ARE_NOT_REPEATS = {"check_sample_weight_equivalence_on_dense_data": (
    "a weight is not a repetition under DP: records are Poisson-sampled one by one and "
    "weights are clipped to max_sample_weight (see tests/test_common.py)")}


@parametrize_with_checks([DPFERMIClassifier()],
                         expected_failed_checks=lambda estimator: _WEIGHTS_ARE_NOT_REPEATS)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


def test_search_routes_groups_and_silos_without_request_calls():
    """With routing on, fit requests sensitive_features and silo_ids by default."""
    import sklearn
    from sklearn.model_selection import GridSearchCV

    from skdp import DPFERMIClassifier
    from skdp.datasets import make_fair_classification

    X, y, g = make_fair_classification(n_samples=1500, random_state=0)
    silo = np.arange(1500) % 3
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(DPFERMIClassifier(max_steps=3, random_state=0), {"lam": [0.5, 1.0]},
                              cv=2, error_score="raise")
        search.fit(X, y, sensitive_features=g, silo_ids=silo)
    assert search.best_estimator_.n_silos_ == 3
    assert list(search.best_estimator_.groups_) == [0, 1]


def test_a_tiny_group_is_named_and_cannot_blow_up_the_w_bound():
    """A group of two records: its noisy prior would set the W-gradient
    bound 2 / sqrt(min prior) (and the W noise) tens of times higher for
    everyone; it is raised to min_group_share, named in a warning and in
    small_groups_, decided from the released counts only."""
    X, y, g = _fair_data(n=3000)
    g = g.astype(object)
    g[:2] = "tiny"
    with pytest.warns(UserWarning, match=r"Groups \['tiny'\] are too small"):
        clf = DPFERMIClassifier(lam=1.0, max_epochs=2, random_state=0).fit(
            X, y, sensitive_features=g)
    assert list(clf.small_groups_) == ["tiny"]
    assert clf.w_clip_ <= 2.0 / math.sqrt(0.02 / 1.04) + 1e-9
    assert clf.group_priors_.min() >= 0.02 / 1.04
    bare = DPFERMIClassifier(lam=1.0, max_epochs=2, random_state=0,
                             solver_options={"min_group_share": 0.0}).fit(
        X, y, sensitive_features=g)
    assert bare.small_groups_.size == 0 and bare.w_clip_ > 5 * clf.w_clip_
