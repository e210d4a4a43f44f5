"""Tests of the DP distributionally robust estimators (skdp.robust)."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification
from sklearn.metrics import roc_auc_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPDROClassifier, DPDRORegressor
from skdp.datasets import make_imbalanced_digits, make_rare_subpopulation
from skdp.metrics import (
    get_worst_group_scorer,
    worst_class_recall,
    worst_group_mean_squared_error,
)
from skdp.privacy import compute_epsilon
from skdp.privacy._clipping import clipped_linear_diff_sum, clipped_module_diff_sum
from skdp.robust import make_divergence
from skdp.robust._losses import CrossEntropyLoss, WeightedHead


# ------------------------------------------------------------ conjugates
def _numerical_conjugate(div, s):
    a = np.concatenate([np.linspace(0, 12, 240001), np.linspace(12, 400, 20001)])
    psi = div.psi(torch.as_tensor(a)).numpy()
    return np.max(s * a - psi)


@pytest.mark.parametrize("name,kwargs", [
    ("chi2", {}), ("kl", {}), ("kl_cvar", {"alpha": 0.2}),
    ("cressie_read", {"k": 1.5}), ("cressie_read", {"k": 3.0}),
])
def test_conjugates_match_numerical_supremum(name, kwargs):
    div = make_divergence(name, **kwargs)
    for s in np.linspace(-3, 2.5, 23):
        closed = float(div.conjugate(torch.tensor(s, dtype=torch.float64)))
        assert closed == pytest.approx(_numerical_conjugate(div, s), abs=2e-4)
        # the derivative is the maximiser, i.e. the worst-case weight ratio
        h = 1e-6
        numeric = (float(div.conjugate(torch.tensor(s + h, dtype=torch.float64)))
                   - float(div.conjugate(torch.tensor(s - h, dtype=torch.float64)))) / (2 * h)
        assert float(div.weight(torch.tensor(s, dtype=torch.float64))) == pytest.approx(
            numeric, rel=1e-4, abs=1e-3)


def test_corrected_rows_differ_from_the_printed_table():
    # printed KL-CVaR row: min(e^s, (1 + s + log a)/a) - 1 gives -4.05 at 0
    cvar = make_divergence("kl_cvar", alpha=0.2)
    assert float(cvar.conjugate(torch.tensor(0.0, dtype=torch.float64))) == pytest.approx(0.0)
    printed = min(1.0, (1 + math.log(0.2)) / 0.2) - 1
    assert printed == pytest.approx(-4.05, abs=0.01)
    # chi-square needs the positive part below s = -2
    chi2 = make_divergence("chi2")
    assert float(chi2.conjugate(torch.tensor(-5.0, dtype=torch.float64))) == -1.0


@pytest.mark.parametrize("bad", [dict(divergence="kl_cvar", solver_options={"alpha": 1.5}),
                                 dict(divergence="cressie_read", solver_options={"k": 1.0}),
                                 dict(lam=0.0), dict(lam=-1.0)])
def test_bad_divergence_parameters_raise(bad):
    X, y = make_classification(n_samples=100, random_state=0)
    with pytest.raises(ValueError):
        DPDROClassifier(**bad).fit(X, y)


# ---------------------------------------------------- per-sample gradients
def test_closed_form_per_sample_gradients_match_autograd():
    torch.manual_seed(0)
    X = torch.randn(7, 4, dtype=torch.float64)
    rows = torch.cat([X, torch.ones(7, 1, dtype=torch.float64)], 1)
    onehot = torch.nn.functional.one_hot(torch.randint(0, 3, (7,)), 3).double()
    W = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    W_old = torch.randn(3, 5, dtype=torch.float64)
    weights, weights_old = torch.rand(7, dtype=torch.float64) * 3, torch.rand(7, dtype=torch.float64)
    head = WeightedHead(CrossEntropyLoss())

    def per_sample(Wm, w):
        grads = []
        for i in range(7):
            Wi = Wm.detach().clone().requires_grad_(True)
            loss = w[i] * CrossEntropyLoss.loss((rows[i:i + 1] @ Wi.T), onehot[i:i + 1]).sum()
            grads.append(torch.autograd.grad(loss, Wi)[0])
        return torch.stack(grads)

    g_new, g_old = per_sample(W, weights), per_sample(W_old, weights_old)

    def clip(g, c):
        n = g.flatten(1).norm(dim=1).clamp_min(1e-12)
        return g * (c / n).clamp(max=1.0).view(-1, 1, 1)

    expected = clip(clip(g_new, 0.7) - clip(g_old, 0.7), 0.3).sum(0)
    out = head.output_grad((W @ rows.T).detach(), onehot.T, weights[None])
    out_old = head.output_grad(W_old @ rows.T, onehot.T, weights_old[None])
    total, _ = clipped_linear_diff_sum(rows, out, out_old, 0.3, inner_norm=0.7)
    torch.testing.assert_close(total, expected)

    module = torch.nn.Linear(5, 3, bias=False).double()
    with torch.no_grad():
        module.weight.copy_(W)
    sums, _ = clipped_module_diff_sum(
        module, head.loss, rows, (onehot, weights[:, None]), {"weight": W_old},
        (onehot, weights_old[:, None]), max_norm=0.3, inner_norm=0.7)
    torch.testing.assert_close(sums["weight"], expected)


def test_clip_then_weight_keeps_the_weighted_direction():
    """Records with gradients longer than C keep their DRO weight: the sum is
    sum_i w_i clip(g_i, C). The old clip(w_i g_i, C) gave every such record
    the same length C, so the weights (and lam) had no effect on them."""
    from skdp.models._backends import LinearBackend, ModuleBackend
    X = torch.tensor([[10.0, 0.0], [0.0, 10.0]], dtype=torch.float64)
    backend = LinearBackend(X, 1)
    idx = torch.arange(2)
    batch, logits_t = backend.forward(idx)

    class Identity:  # loss = output, so the gradient is the augmented row
        @staticmethod
        def output_grad(out_t, *targets_t):
            return torch.ones_like(out_t)

        @staticmethod
        def loss(out):
            return out[:, 0]

    w = torch.tensor([3.0, 1.0], dtype=torch.float64)
    (total,), sq = backend.clipped_weighted_grad_sum(idx, batch, logits_t, Identity, (), w, 1.0)
    unit = torch.tensor([[10.0, 0.0, 1.0], [0.0, 10.0, 1.0]], dtype=torch.float64)
    unit = unit / unit.norm(dim=1, keepdim=True)
    torch.testing.assert_close(total[0], 3.0 * unit[0] + unit[1])
    # the direction differs from the old clip-the-weighted-gradient sum
    old = unit[0] + unit[1]
    cosine = float(total[0] @ old / (total[0].norm() * old.norm()))
    assert cosine < 0.95
    # the module path (torch.func) gives the same sum
    module = torch.nn.Linear(2, 1).double()
    with torch.no_grad():
        module.weight.zero_()
        module.bias.zero_()
    mb = ModuleBackend(X, module)
    sums, _ = mb.clipped_weighted_grad_sum(idx, X, None, Identity, (), w, 1.0)
    torch.testing.assert_close(torch.cat([sums[0][0], sums[1]]), total[0])


def test_weighted_differences_match_autograd():
    torch.manual_seed(1)
    X = torch.randn(6, 3, dtype=torch.float64) * 5
    rows = torch.cat([X, torch.ones(6, 1, dtype=torch.float64)], 1)
    onehot = torch.nn.functional.one_hot(torch.randint(0, 2, (6,)), 2).double()
    W, W_old = torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    w, w_old = torch.rand(6, dtype=torch.float64) * 4, torch.rand(6, dtype=torch.float64) * 4

    def grads(Wm):
        out = []
        for i in range(6):
            Wi = Wm.clone().requires_grad_(True)
            loss = CrossEntropyLoss.loss(rows[i:i + 1] @ Wi.T, onehot[i:i + 1]).sum()
            out.append(torch.autograd.grad(loss, Wi)[0])
        return torch.stack(out)

    def clip(g, c):
        n = g.flatten(1).norm(dim=1).clamp_min(1e-12)
        return g * (c / n).clamp(max=1.0).view(-1, 1, 1)

    expected = clip(w.view(-1, 1, 1) * clip(grads(W), 0.5)
                    - w_old.view(-1, 1, 1) * clip(grads(W_old), 0.5), 0.8).sum(0)
    total, _ = clipped_linear_diff_sum(
        rows, CrossEntropyLoss.output_grad(W @ rows.T, onehot.T),
        CrossEntropyLoss.output_grad(W_old @ rows.T, onehot.T), 0.8, inner_norm=0.5,
        weights=w, previous_weights=w_old)
    torch.testing.assert_close(total, expected)
    module = torch.nn.Linear(4, 2, bias=False).double()
    with torch.no_grad():
        module.weight.copy_(W)
    sums, _ = clipped_module_diff_sum(module, CrossEntropyLoss.loss, rows, (onehot,),
                                      {"weight": W_old}, max_norm=0.8, inner_norm=0.5,
                                      weights=w, previous_weights=w_old)
    torch.testing.assert_close(sums["weight"], expected)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 5.0), st.floats(1.0, 20.0), st.integers(2, 12))
def test_weighted_sum_moves_by_at_most_W_times_C(seed, clip, cap, n):
    """Removing a record moves sum_i w_i clip(g_i, C) by at most W C (w_i <= W)."""
    from skdp.models._backends import LinearBackend
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64) * 10
    onehot = torch.nn.functional.one_hot(torch.randint(0, 2, (n,), generator=g), 2).double()
    w = torch.rand(n, generator=g, dtype=torch.float64) * cap
    backend = LinearBackend(X, 2)
    backend.weights.copy_(torch.randn(2, 4, generator=g, dtype=torch.float64))
    idx = torch.arange(n)
    batch, logits_t = backend.forward(idx)
    (full,), _ = backend.clipped_weighted_grad_sum(idx, batch, logits_t, CrossEntropyLoss,
                                                   (onehot.T,), w, clip)
    for i in range(n):
        keep = torch.nonzero(torch.arange(n) != i).flatten()
        b, lt = backend.forward(keep)
        (part,), _ = backend.clipped_weighted_grad_sum(keep, b, lt, CrossEntropyLoss,
                                                       (onehot[keep].T,), w[keep], clip)
        assert float((full - part).norm()) <= cap * clip * (1 + 1e-9)


def test_weight_bound_is_the_planned_sensitivity():
    X, y = _data(800)
    for lam, expected in [(0.3, 6.0), (3.0, 1.5), (0.01, 10.0)]:
        clf = DPDROClassifier(epsilon=2.0, lam=lam, max_grad_norm=2.0, max_epochs=1,
                              random_state=0, solver_options={"algorithm": "double_spider"}).fit(X,
                                                                                                 y)
        # chi2: (psi*)'(B / lam) = (B / lam + 2) / 2 with B = 3, capped at max_weight=10
        assert clf.weight_bound_ == pytest.approx(expected)
        assert clf.privacy_report_.noise["x_anchor"].sensitivity == pytest.approx(2.0 * expected)
    kl = DPDROClassifier(divergence="kl", epsilon=2.0, max_epochs=1, random_state=0,
                         solver_options={"algorithm": "recursive_spider"}).fit(X, y)
    assert kl.weight_bound_ == 1.0  # recursive SPIDER: exp((l - B)/lam) <= 1


def test_lam_moves_the_noiseless_solution_towards_the_rare_group():
    """Without noise, a small lam (strong worst-case weighting) beats a large
    one (close to ERM) on the rare subpopulation."""
    X, y, groups = make_rare_subpopulation(8000, random_state=0)
    rare = groups == 1
    acc = {}
    for lam in (0.1, 10.0):
        clf = DPDROClassifier(epsilon=None, lam=lam, random_state=0,
                              solver_options={"algorithm": "double_spider",
                                              "iterate": "last"}).fit(X, y)
        acc[lam] = np.mean(clf.predict(X[rare]) == y[rare])
    assert acc[0.1] > acc[10.0] + 0.02


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 5.0), st.integers(2, 20))
def test_clipped_differences_bound_each_record(seed, bound, n):
    """Removing any one record moves the difference sum by at most the bound."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(n, 4, generator=g, dtype=torch.float64) * 10
    new = torch.randn(2, n, generator=g, dtype=torch.float64) * 10
    old = torch.randn(2, n, generator=g, dtype=torch.float64) * 10
    full, _ = clipped_linear_diff_sum(rows, new, old, bound)
    for i in range(n):
        keep = torch.arange(n) != i
        part, _ = clipped_linear_diff_sum(rows[keep], new[:, keep], old[:, keep], bound)
        assert float((full - part).norm()) <= bound * (1 + 1e-9)


# ---------------------------------------------------------- dual and SPIDER
def _data(n=600, seed=0):
    return make_classification(n_samples=n, n_features=6, flip_y=0.05, random_state=seed)


def test_kl_penalized_eta_closed_form():
    X, y = _data()
    clf = DPDROClassifier(divergence="kl", epsilon=None, lam=0.5, max_epochs=5, random_state=0,
                          solver_options={"algorithm": "double_spider", "max_weight": None})
    clf.fit(X, y)
    losses = np.minimum(clf._sample_losses(X, y), clf._option("loss_bound"))
    eta, value, _ = clf._dual_solution(losses)
    assert eta == pytest.approx(0.5 * np.log(np.mean(np.exp(losses / 0.5))), rel=1e-10)
    # the closed form minimises the dual over eta
    div = make_divergence("kl")
    for other in (eta - 0.1, eta + 0.1):
        dual = 0.5 * div.conjugate(torch.as_tensor((losses - other) / 0.5)).mean().item() + other
        assert dual > value
    w = clf.worst_case_weights(X, y)
    np.testing.assert_allclose(w, np.exp(losses / 0.5) / np.exp(losses / 0.5).sum(), rtol=1e-8)


@pytest.mark.parametrize("algorithm,divergence", [("double_spider", "chi2"),
                                                  ("recursive_spider", "kl")])
def test_noiseless_spider_decreases_the_dro_objective(algorithm, divergence):
    X, y = _data()
    kwargs = dict(divergence=divergence, epsilon=None, lam=1.0, learning_rate=0.2,
                  random_state=0, solver_options={"algorithm": algorithm})
    start = DPDROClassifier(max_steps=1, **kwargs).fit(X, y).dro_objective(X, y)
    end = DPDROClassifier(max_epochs=10, **kwargs).fit(X, y).dro_objective(X, y)
    assert end < start - 0.05


def test_noiseless_double_spider_matches_plain_minibatch_spider():
    """Without noise and with inner clipping inactive, the trainer is SPIDER."""
    X, y = _data(200)
    clf = DPDROClassifier(
        divergence="chi2", epsilon=None, lam=1.0, max_steps=6, batch_size=200,
        max_grad_norm=1e6, learning_rate=0.1, random_state=0,
        solver_options={"algorithm": "double_spider", "epoch_size": 3,
                        "anchor_batch_size": "full", "dual_grad_norm": 1e6, "diff_clip": 1e6,
                        "step_norm_cap": 1e6, "dual_learning_rate": 0.3, "iterate": "last"},
    ).fit(X, y)
    # plain full-batch SPIDER (every batch is the whole data at rate 1)
    div, lam, B = make_divergence("chi2"), 1.0, clf._option("loss_bound")
    Xa = torch.as_tensor(np.c_[X, np.ones(len(X))], dtype=torch.float64)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(y), 2).double()
    W = torch.zeros(2, Xa.shape[1], dtype=torch.float64)
    eta = 0.0

    def grads(W, eta_w):
        logits = Xa @ W.T
        loss = (torch.logsumexp(logits, 1) - (onehot * logits).sum(1)).clamp(0, B)
        w = div.weight((loss - eta_w) / lam)
        gx = ((torch.softmax(logits, 1) - onehot) * w[:, None]).T @ Xa / len(X)
        return gx, float((1 - w).mean())

    W_prev, eta_prev = W.clone(), eta
    for t in range(6):
        if t % 3 == 0:
            g = grads(W, eta)[1]
        else:
            g += grads(W, eta)[1] - grads(W_prev, eta_prev)[1]
        eta_new = min(max(eta - 0.3 * g, 0.0), B)
        if t % 3 == 0:
            v = grads(W, eta_new)[0]
        else:
            v = v + grads(W, eta_new)[0] - grads(W_prev, eta)[0]
        W_prev, eta_prev = W.clone(), eta
        W = W - 0.1 * v
        eta = eta_new
    assert clf.eta_ == pytest.approx(eta, rel=1e-4, abs=1e-6)
    coef = (W[1, :-1] - W[0, :-1]).numpy()
    np.testing.assert_allclose(clf.coef_[0], coef, rtol=1e-3, atol=1e-5)


# ------------------------------------------------------------------ privacy
@pytest.mark.parametrize("kwargs", [
    dict(solver_options={"algorithm": "double_spider"}),
    dict(divergence="kl", solver_options={"algorithm": "recursive_spider"}),
    dict(divergence="kl", rho=0.5, solver_options={"algorithm": "recursive_spider"}),
    dict(), dict(divergence="kl", rho=0.5),
])
def test_epsilon_recomputed_from_dp_event(kwargs):
    X, y = _data(800)
    clf = DPDROClassifier(epsilon=2.0, max_epochs=3, random_state=0, **kwargs).fit(X, y)
    assert clf.epsilon_ <= 2.0
    assert compute_epsilon(clf.dp_event_, clf.delta_, "pld") == pytest.approx(clf.epsilon_)
    if clf.algorithm_ != "dp_sgd":
        # the calibration and the check of the returned model (one joint
        # Gaussian release), then anchors and differences: two events at
        # different rates
        initial, *events = clf.dp_event_.events
        noise = clf.privacy_report_.noise
        # (those of them the records are enough for: the check is skipped on
        # 800 records)
        joint = sum(noise[name].multiplier ** -2
                    for name in ("score_calibration", "model_check", "clipped_share")
                    if name in noise) ** -0.5
        assert initial.noise_multiplier == pytest.approx(joint)
        assert [e.count for e in events] == list(clf.privacy_report_.steps)
        assert clf.privacy_report_.sampling_rates[0] > clf.privacy_report_.sampling_rates[1]


def test_paper_noise_warns_and_reports_the_accountant():
    X, y = _data(800)
    with pytest.warns(UserWarning, match="not calibrated"):
        clf = DPDROClassifier(epsilon=1.0, max_epochs=2, random_state=0,
                              solver_options={"noise": "paper"}).fit(X, y)
    assert clf.epsilon_ == pytest.approx(compute_epsilon(clf.dp_event_, clf.delta_, "pld"))


def test_membership_inference_bound():
    """A loss-threshold attack on the DP fit stays below e^eps/(1+e^eps);
    the same attack on the non-private fit (overfitting, many features)
    beats it, so the test can fail."""
    rng = np.random.RandomState(0)
    n, d, eps = 400, 400, 0.5
    X = rng.normal(size=(2 * n, d))
    y = rng.randint(2, size=2 * n)           # labels are noise: only memorisation helps
    members = np.arange(n)
    bound = math.exp(eps) / (1 + math.exp(eps))
    margin = 3 * math.sqrt(2 / n / 12)   # 3 standard errors of a Mann-Whitney AUC

    def attack_auc(clf):
        losses = clf._sample_losses(X, y)
        is_member = np.r_[np.ones(n), np.zeros(n)]
        return roc_auc_score(is_member, -losses)

    kwargs = dict(batch_size=100, max_epochs=60, learning_rate=1.0, random_state=0,
                  solver_options={"step_norm_cap": 10.0})
    private = DPDROClassifier(epsilon=eps, **kwargs).fit(X[members], y[members])
    public = DPDROClassifier(epsilon=None, max_grad_norm=np.inf, **kwargs).fit(
        X[members], y[members])
    assert attack_auc(private) < bound + margin
    assert attack_auc(public) > bound + margin


# --------------------------------------------------------------- estimator
@pytest.mark.parametrize("divergence", ["chi2", "kl"])
@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_auto_algorithm_depends_on_the_number_of_records(divergence, kind):
    """Below SPIDER_MIN_SAMPLES records "auto" is DP-SGD on the dual (the
    SPIDER algorithms need many short steps); from it on, a SPIDER."""
    from skdp.robust._dro import SPIDER_MIN_SAMPLES

    X, y = _data(SPIDER_MIN_SAMPLES[kind])
    Estimator = DPDROClassifier if kind == "classifier" else DPDRORegressor
    if kind == "regressor":
        y = y + X[:, 0]
    kwargs = dict(divergence=divergence, epsilon=None, max_steps=2, random_state=0)
    small = Estimator(**kwargs).fit(X[:-1], y[:-1])
    large = Estimator(**kwargs).fit(X, y)
    assert small.algorithm_ == "dp_sgd"
    assert large.algorithm_ == ("recursive_spider" if divergence == "kl" else "double_spider")


def test_errors_are_clear():
    X, y = _data(300)
    with pytest.raises(ValueError, match="overflows"):
        DPDROClassifier(divergence="kl", lam=1e-3, solver_options={"loss_bound": 3.0}).fit(X, y)
    with pytest.raises(ValueError, match="cannot buy"):
        DPDROClassifier(epsilon=1e-4, delta=1e-9).fit(X, y)
    with pytest.raises(ValueError, match="needs divergence='kl'"):
        DPDROClassifier(rho=0.5).fit(X, y)
    with pytest.raises(ValueError, match="finite"):
        DPDRORegressor().fit(X, np.r_[np.nan, y[1:]].astype(float))


def test_regressor_and_worst_group_metrics():
    X, y, groups = make_rare_subpopulation(4000, task="regression", random_state=0)
    reg = DPDRORegressor(epsilon=2.0, random_state=0, y_bounds=(-8, 8)).fit(X, y)
    mse = worst_group_mean_squared_error(y, reg.predict(X), sensitive_features=groups)
    assert np.isfinite(mse) and reg.epsilon_ <= 2.0
    assert reg.worst_case_weights(X, y).sum() == pytest.approx(1.0)
    scorer = get_worst_group_scorer("worst_group_mean_squared_error")
    assert scorer(reg, X, y, sensitive_features=groups) == pytest.approx(-mse)
    data = make_imbalanced_digits(random_state=0)
    clf = DPDROClassifier(epsilon=None, max_epochs=5, random_state=0).fit(data.X_train,
                                                                          data.y_train)
    recall = worst_class_recall(data.y_test, clf.predict(data.X_test))
    assert 0 <= recall <= 1
    assert get_worst_group_scorer("worst_class_recall")(clf, data.X_test, data.y_test) == recall


_WEIGHTS_ARE_NOT_REPEATS = {"check_sample_weight_equivalence_on_dense_data": (
    "a weight is not a repetition under DP: records are Poisson-sampled one by one and "
    "weights are clipped to max_sample_weight (see tests/test_common.py)")}


@parametrize_with_checks([DPDROClassifier(), DPDRORegressor()],
                         expected_failed_checks=lambda estimator: _WEIGHTS_ARE_NOT_REPEATS)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)
