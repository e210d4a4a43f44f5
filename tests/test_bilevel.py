"""DP bilevel tuning: hypergradient, corrected rule, privacy, solvers, checks."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp.bilevel._estimator import _DPBilevelMixin
from skdp.bilevel._solvers import Problem, Regularizer, exact_solve, regularizer
from skdp.model_selection import DPBilevelLogisticRegression, DPBilevelRidge, dp_loc_gd
from skdp.models import SquaredLossHead, WeightedHead
from skdp.privacy import clipped_linear_sum, compute_epsilon


def _ridge_problem(seed=0, n_train=60, n_val=40, d=5, scale=1.0, noise=0.8):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=d) * scale
    X = rng.normal(size=(n_train + n_val, d))
    y = X @ theta + noise * rng.normal(size=n_train + n_val)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def _closed_form(Xt, yt, omega):
    """theta*(omega) of mean squared loss / 2 + omega / 2 ||w||^2, with an
    unpenalised intercept; returns (theta, rows, D, H)."""
    rows = np.column_stack([Xt, np.ones(len(Xt))])
    D = np.diag([1.0] * Xt.shape[1] + [0.0])
    H = rows.T @ rows / len(rows)
    theta = np.linalg.solve(H + omega * D, rows.T @ yt / len(rows))
    return theta, rows, D, H


def _validation_loss(Xt, yt, Xv, yv, omega):
    theta, *_ = _closed_form(Xt, yt, omega)
    rows_v = np.column_stack([Xv, np.ones(len(Xv))])
    return 0.5 * np.mean((rows_v @ theta - yv) ** 2)


def _exact_hypergradient(Xt, yt, Xv, yv, omega):
    """dF/domega = -grad f(theta*)^T (H + omega D)^{-1} D theta*."""
    theta, _, D, H = _closed_form(Xt, yt, omega)
    rows_v = np.column_stack([Xv, np.ones(len(Xv))])
    grad_f = rows_v.T @ (rows_v @ theta - yv) / len(rows_v)
    return -grad_f @ np.linalg.solve(H + omega * D, D @ theta)


def _weighted_problems(Xt, yt, Xv, yv, lam):
    """The tuner's ``train`` and ``mixed`` weighted problems (unshrunk)."""
    n_t, n_v = len(Xt), len(Xv)
    n = n_t + n_v
    rows = torch.as_tensor(np.column_stack([np.vstack([Xt, Xv]), np.ones(n)]))
    y = torch.as_tensor(np.concatenate([yt, yv]))[:, None]
    f64 = dict(dtype=torch.float64)
    w_train = torch.cat([torch.full((n_t,), n / n_t, **f64), torch.zeros(n_v, **f64)])
    w_mixed = torch.cat([torch.full((n_t,), n / n_t, **f64),
                         torch.full((n_v,), n / (lam * n_v), **f64)])
    train = Problem(rows, torch.cat([y, w_train[:, None]], 1), "squared", "train")
    mixed = Problem(rows, torch.cat([y, w_mixed[:, None]], 1), "squared", "mixed")
    return train, mixed


def _penalty_hypergradient(Xt, yt, Xv, yv, omega, lam):
    """lambda (R(theta_lambda) - R(theta*)) with exact inner solves, via the
    tuner's weighted problems."""
    train, mixed = _weighted_problems(Xt, yt, Xv, yv, lam)
    theta0 = torch.zeros((1, train.rows.shape[1]), dtype=torch.float64)
    theta = exact_solve(train, omega, theta0)
    theta_lam = exact_solve(mixed, omega, theta0)
    np.testing.assert_allclose(theta[0].numpy(), _closed_form(Xt, yt, omega)[0], rtol=1e-8)
    return lam * (regularizer(theta_lam) - regularizer(theta))


def test_penalty_hypergradient_matches_exact_derivative():
    Xt, yt, Xv, yv = _ridge_problem()
    omega = 0.3
    exact = _exact_hypergradient(Xt, yt, Xv, yv, omega)
    # finite differences agree with the implicit-function formula
    h = 1e-6
    fd = (_validation_loss(Xt, yt, Xv, yv, omega + h)
          - _validation_loss(Xt, yt, Xv, yv, omega - h)) / (2 * h)
    assert fd == pytest.approx(exact, rel=1e-5)
    errors = [abs(_penalty_hypergradient(Xt, yt, Xv, yv, omega, lam) - exact)
              for lam in (10.0, 100.0, 1000.0, 1e4)]
    # O(1/lambda): each factor 10 in lambda divides the error by about 10
    for coarse, fine in zip(errors, errors[1:]):
        assert 5 < coarse / fine < 20
    assert errors[-1] < 1e-3 * abs(exact)


@pytest.mark.parametrize("omega", [0.01, 0.3, 3.0])
def test_corrected_rule_descends_and_printed_sign_ascends(omega):
    Xt, yt, Xv, yv = _ridge_problem(seed=1)
    hyper = _penalty_hypergradient(Xt, yt, Xv, yv, omega, 1e4)
    eta = 0.05 * omega / max(abs(hyper), 1e-12)
    F = _validation_loss(Xt, yt, Xv, yv, omega)
    corrected = max(0.0, omega - eta * hyper)   # the spec's sign
    printed = max(0.0, omega + eta * hyper)     # the paper's printed sign
    assert _validation_loss(Xt, yt, Xv, yv, corrected) < F
    assert _validation_loss(Xt, yt, Xv, yv, printed) > F


def test_non_private_tuner_finds_the_validation_optimum():
    # omega* near noise^2 / (n_train scale^2) = 0.3: an interior optimum
    Xt, yt, Xv, yv = _ridge_problem(seed=2, n_train=300, n_val=200, d=20, scale=0.3, noise=3.0)
    X, y = np.vstack([Xt, Xv]), np.concatenate([yt, yv])
    mask = np.r_[np.zeros(300, bool), np.ones(200, bool)]
    reg = DPBilevelRidge(epsilon=None, n_outer_iter=25, y_bounds=(-50, 50), omega_init=1.0,
                         random_state=0).fit(X, y, validation_mask=mask)
    grid = np.logspace(-3, 1, 400)
    scale = reg.y_scale_
    losses = [_validation_loss(Xt, yt / scale, Xv, yv / scale, g) for g in grid]
    best = grid[int(np.argmin(losses))]
    assert 2e-3 < best < 5
    assert reg.omega_ == pytest.approx(best, rel=0.1)
    assert reg.epsilon_ == np.inf and reg.dp_event_ is None
    # the validation loss decreased along the path
    path_losses = [_validation_loss(Xt, yt / scale, Xv, yv / scale, w) for w in reg.omega_path_]
    assert path_losses[reg.t_out_] < path_losses[0]


def _sparse_problem(seed=0, n_train=300, n_val=200, d=20, noise=1.0):
    rng = np.random.default_rng(seed)
    theta = np.zeros(d)
    theta[:3] = [1.5, -1.0, 0.8]
    X = rng.normal(size=(n_train + n_val, d))
    y = X @ theta + noise * rng.normal(size=n_train + n_val)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def _smoothed_validation_loss(Xt, yt, Xv, yv, omega, reg):
    train, _ = _weighted_problems(Xt, yt, Xv, yv, 1.0)
    theta = exact_solve(train, omega, torch.zeros((1, Xt.shape[1] + 1), dtype=torch.float64),
                        reg=reg)[0].numpy()
    rows_v = np.column_stack([Xv, np.ones(len(Xv))])
    return 0.5 * np.mean((rows_v @ theta - yv) ** 2), theta


def test_smoothed_l1_exact_solve_is_stationary():
    Xt, yt, Xv, yv = _sparse_problem(d=8)
    reg = Regularizer("smoothed_l1", 0.01)
    train, _ = _weighted_problems(Xt, yt, Xv, yv, 1.0)
    theta = exact_solve(train, 0.2, torch.zeros((1, 9), dtype=torch.float64), reg=reg)
    rows = np.column_stack([Xt, np.ones(len(Xt))])
    w = theta[0].numpy()
    grad = rows.T @ (rows @ w - yt) / len(rows)
    grad[:-1] += 0.2 * w[:-1] / np.sqrt(w[:-1] ** 2 + 0.01**2)
    assert np.abs(grad).max() < 1e-9
    assert reg.value(theta) == pytest.approx(np.sum(np.sqrt(w[:-1] ** 2 + 1e-4) - 0.01))
    # the logistic loss goes through L-BFGS
    onehot = torch.nn.functional.one_hot(torch.as_tensor((yt > 0).astype(int)), 2).double()
    rows_t = torch.as_tensor(rows)
    logistic = Problem(rows_t, torch.cat([onehot, torch.ones(len(rows), 1)], 1), "logistic", "t")
    theta = exact_solve(logistic, 0.05, torch.zeros((2, 9), dtype=torch.float64), reg=reg)
    probs = torch.softmax(rows_t @ theta.T, 1)
    grad = (probs - onehot).T @ rows_t / len(rows)
    grad[:, :-1] += 0.05 * reg.gradient(theta[:, :-1])
    assert float(grad.abs().max()) < 1e-6


def test_smoothed_l1_hypergradient_matches_finite_differences():
    Xt, yt, Xv, yv = _sparse_problem(seed=3, n_train=80, n_val=50, d=6)
    reg = Regularizer("smoothed_l1", 0.05)
    omega, h = 0.1, 1e-5

    def F(w):
        return _smoothed_validation_loss(Xt, yt, Xv, yv, w, reg)[0]

    fd = (F(omega + h) - F(omega - h)) / (2 * h)
    theta0 = torch.zeros((1, Xt.shape[1] + 1), dtype=torch.float64)
    errors = []
    for lam in (10.0, 100.0, 1000.0, 1e4):
        train, mixed = _weighted_problems(Xt, yt, Xv, yv, lam)
        theta = exact_solve(train, omega, theta0, reg=reg)
        theta_lam = exact_solve(mixed, omega, theta0, reg=reg)
        errors.append(abs(lam * (reg.value(theta_lam) - reg.value(theta)) - fd))
    # the O(1/lambda) bias of the penalty method
    for coarse, fine in zip(errors, errors[1:]):
        assert 4 < coarse / fine < 25
    assert errors[-1] < 1e-3 * abs(fd)


def test_smoothed_l1_sparser_than_l2_at_matched_norm():
    Xt, yt, Xv, yv = _sparse_problem(seed=4, n_train=200, d=20)
    l1 = Regularizer("smoothed_l1", 0.01)
    _, theta_l1 = _smoothed_validation_loss(Xt, yt, Xv, yv, 0.3, l1)
    target = np.linalg.norm(theta_l1[:-1])
    # the l2 strength giving the same coefficient norm (bisection in log omega)
    low, high = 1e-4, 1e4
    for _ in range(100):
        mid = np.sqrt(low * high)
        norm = np.linalg.norm(_closed_form(Xt, yt, mid)[0][:-1])
        low, high = (mid, high) if norm > target else (low, mid)
    theta_l2 = _closed_form(Xt, yt, np.sqrt(low * high))[0]
    assert np.linalg.norm(theta_l2[:-1]) == pytest.approx(target, rel=1e-6)
    small_l1 = np.abs(theta_l1[3:-1])   # the 17 coefficients whose truth is 0
    small_l2 = np.abs(theta_l2[3:-1])
    assert small_l1.sum() < 0.25 * small_l2.sum()
    assert np.median(small_l1) < 0.05 * np.median(small_l2) + 1e-3
    assert np.abs(theta_l1[:3]).min() > 0.3   # the signal survives


def test_non_private_tuner_descends_with_smoothed_l1():
    Xt, yt, Xv, yv = _sparse_problem(seed=5, n_train=100, noise=2.0)
    X, y = np.vstack([Xt, Xv]), np.concatenate([yt, yv])
    mask = np.r_[np.zeros(len(Xt), bool), np.ones(len(Xv), bool)]
    reg = DPBilevelRidge(epsilon=None, regularizer="smoothed_l1", n_outer_iter=20, y_bounds=(-10, 10), omega_init=1e-3, refit_share=0.0, random_state=0, solver_options={"l1_smoothing": 0.01}).fit(X, y, validation_mask=mask)
    spec = Regularizer("smoothed_l1", 0.01)
    scale = reg.y_scale_
    yt_s, yv_s = (np.clip(v, -10, 10) / scale for v in (yt, yv))

    def F(w):
        return _smoothed_validation_loss(Xt, yt_s, Xv, yv_s, w, spec)[0]

    grid = np.logspace(-4, 0, 60)
    best = grid[int(np.argmin([F(g) for g in grid]))]
    assert 2e-4 < best < 0.5   # an interior optimum
    path = [F(w) for w in reg.omega_path_]
    assert path[reg.t_out_] < path[0]
    assert F(reg.omega_) - F(best) < 0.1 * (path[0] - F(best))
    # history_ reports the smoothed l1 R of the released models
    theta = np.r_[reg.coef_ / scale, 0.0][None]
    assert reg.history_["R_train"][reg.t_out_] == pytest.approx(spec.value(torch.as_tensor(theta)))


def test_smoothed_l1_penalty_gradient_and_value():
    from skdp._training import SmoothedL1Penalty, make_penalty
    from skdp.models import make_backend

    linear = make_backend(torch.zeros((4, 3)), 2)
    linear.weights.copy_(torch.tensor([[0.5, -0.02, 0.0, 3.0], [-1.0, 0.01, 2.0, -3.0]]))
    penalty = make_penalty(linear, Regularizer("smoothed_l1", 0.01).penalty(0.5))
    assert isinstance(penalty, SmoothedL1Penalty)
    w = linear.weights[:, :-1]
    assert penalty.value() == pytest.approx(
        0.5 * float((torch.sqrt(w**2 + 1e-4) - 0.01).sum()))
    sums = [torch.zeros_like(linear.weights)]
    penalty.add_gradient(sums, expected_batch=2.0)
    torch.testing.assert_close(sums[0][:, :-1], 1.0 * w / torch.sqrt(w**2 + 1e-4))
    assert torch.all(sums[0][:, -1] == 0)   # intercept not penalised


@pytest.mark.parametrize("solver", ["dp_sgd", "dp_loc_gd"])
def test_private_smoothed_l1(solver):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = X @ np.r_[1.0, -1.0, np.zeros(4)] + 0.5 * rng.normal(size=3000)
    kwargs = dict(epsilon=2.0, regularizer="smoothed_l1", inner_solver=solver, n_outer_iter=3,
                  y_bounds=(-5, 5), random_state=0)
    reg = DPBilevelRidge(**kwargs).fit(X, y)
    plain = DPBilevelRidge(**{**kwargs, "regularizer": "l2"}).fit(X, y)
    # the penalty is post-processing: same releases, same privacy
    assert reg.epsilon_ == plain.epsilon_ <= 2.0
    assert reg.privacy_report_.noise == plain.privacy_report_.noise
    assert np.all(np.isfinite(reg.history_["R_train"]))
    assert reg.score(X, y) > 0.7
    clf = DPBilevelLogisticRegression(
        epsilon=2.0, regularizer="smoothed_l1", inner_solver=solver, n_outer_iter=2,
        random_state=0).fit(X, (y > 0).astype(int))
    assert clf.epsilon_ <= 2.0 and clf.score(X, (y > 0).astype(int)) > 0.7


@pytest.mark.parametrize("solver", ["dp_sgd", "dp_loc_gd", "output_perturbation"])
def test_epsilon_recomputed_from_event(solver):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = X @ rng.normal(size=5) + rng.normal(size=2000)
    reg = DPBilevelRidge(epsilon=1.0, inner_solver=solver, n_outer_iter=3,
                         random_state=0).fit(X, y)
    assert reg.epsilon_ <= 1.0 + 1e-9
    assert reg.epsilon_ > 0.95
    assert compute_epsilon(reg.dp_event_, reg.delta_, reg.accountant_) == reg.epsilon_
    report = reg.privacy_report_
    # T solves of each kind, plus the refit, each a batch of the plan
    assert set(report.noise) >= {"train", "mixed", "refit"}
    assert reg.noise_multiplier_ == report.multiplier("train")
    steps = dict(zip(("train", "mixed", "refit"), report.steps))
    assert steps["train"] % 3 == 0 and steps["mixed"] % 3 == 0
    assert report.initial_event is not None  # the private target scale
    assert len(reg.omega_path_) == 4 and 0 <= reg.t_out_ < 3
    assert reg.omega_ == reg.omega_path_[reg.t_out_]


def test_paper_outer_noise_is_accounted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4))
    y = (X[:, 0] > 0).astype(int)
    clf = DPBilevelLogisticRegression(epsilon=2.0, n_outer_iter=3, refit_share=0.0, random_state=0,
                                      solver_options={"outer_noise": "paper"}).fit(X, y)
    assert "hypergradient" in clf.privacy_report_.noise
    assert clf.privacy_report_.multiplier("hypergradient") > 0
    assert clf.epsilon_ <= 2.0
    none = DPBilevelLogisticRegression(epsilon=2.0, n_outer_iter=3, refit_share=0.0,
                                       random_state=0).fit(X, y)
    # without outer noise the inner solves get more of the budget
    assert none.noise_multiplier_ < clf.noise_multiplier_


def test_weighted_clipping_bounds_each_record():
    """A record of either part, whatever its weight, moves a clipped
    gradient sum by at most C."""
    rng = np.random.default_rng(0)
    rows = torch.as_tensor(np.column_stack([rng.normal(size=(40, 3)) * 10, np.ones(40)]))
    y = torch.as_tensor(rng.normal(size=40) * 100)
    weights = torch.as_tensor(rng.choice([1.25, 0.05, 50.0], size=40))
    theta = torch.as_tensor(rng.normal(size=(1, 4)))
    head, clip = WeightedHead(SquaredLossHead()), 0.5
    targets_t = torch.stack([y, weights])

    def total(keep):
        out = head.output_grad(theta @ rows[keep].T, targets_t[:, keep])
        return clipped_linear_sum(rows[keep], out, clip)[0]

    everyone = torch.ones(40, dtype=torch.bool)
    for i in range(40):
        keep = everyone.clone()
        keep[i] = False
        assert float((total(everyone) - total(keep)).norm()) <= clip * (1 + 1e-9)


def test_dp_loc_gd_error_rate():
    """||theta - theta*|| shrinks like C sqrt(d) / (mu n epsilon)."""
    rng = np.random.default_rng(0)
    d, alpha = 4, 0.5
    errors = {}
    for n in (2000, 8000):
        X = rng.normal(size=(n, d)) * 0.3
        y = X @ np.full(d, 0.5) + 0.1 * rng.normal(size=n)
        exact, b, _ = dp_loc_gd(X, y, alpha=alpha, epsilon=None, n_steps=200, random_state=0)
        errs = []
        for seed in range(4):
            coef, _, report = dp_loc_gd(X, y, alpha=alpha, epsilon=1.0, n_steps=200,
                                        random_state=seed)
            assert report.epsilon <= 1.0
            errs.append(np.linalg.norm(coef - exact))
        errors[n] = np.mean(errs)
        assert errors[n] < 10 * 1.0 * np.sqrt(d) / (alpha * n * 1.0)
    assert errors[8000] < errors[2000] / 2


def test_bad_input():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    y = X[:, 0]
    with pytest.raises(ValueError, match="omega_bounds"):
        DPBilevelRidge(solver_options={"omega_bounds": (0.0, 1.0)}).fit(X, y)
    with pytest.raises(ValueError, match="omega_bounds"):
        DPBilevelRidge(solver_options={"omega_bounds": (1.0, 0.5)}).fit(X, y)
    with pytest.raises(ValueError, match="omega_init"):
        DPBilevelRidge(omega_init=1e3).fit(X, y)
    with pytest.raises(ValueError, match="too small|cannot pay"):
        DPBilevelRidge(epsilon=1e-4, n_outer_iter=50).fit(X, y)
    with pytest.raises(ValueError, match="validation part"):
        DPBilevelRidge(validation_fraction=0.001, random_state=0).fit(X[:200], y[:200])
    with pytest.raises(ValueError, match="validation_mask"):
        DPBilevelRidge().fit(X, y, validation_mask=np.ones(10, bool))
    with pytest.raises(ValueError, match="regularizer"):
        DPBilevelRidge(regularizer="l1").fit(X, y)
    with pytest.raises(ValueError, match="l1_smoothing"):
        DPBilevelRidge(regularizer="smoothed_l1", solver_options={"l1_smoothing": 0.0}).fit(X, y)
    with pytest.raises(ValueError, match="output_perturbation.*dp_sgd"):
        DPBilevelRidge(regularizer="smoothed_l1", inner_solver="output_perturbation").fit(X, y)
    with pytest.raises(ValueError, match="output_perturbation"):
        DPBilevelLogisticRegression(regularizer="smoothed_l1", epsilon=None,
                                    inner_solver="output_perturbation").fit(X, y > 0)


def test_logistic_tuner_utility():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 10))
    y = (X @ rng.normal(size=10) + rng.normal(size=4000) > 0).astype(int)
    clf = DPBilevelLogisticRegression(epsilon=3.0, random_state=0).fit(X[:3000], y[:3000])
    assert clf.coef_.shape == (1, 10)
    assert clf.score(X[3000:], y[3000:]) > 0.8
    assert clf.omega_path_[0] == clf.omega_init


# seeded, with even parts: the coin split's part sizes are random, and some
# checks fit on 10 records, where a part of 20 % would have fewer than 2
# records in 38 % of the runs (even parts: 2 %)
_WEIGHTS_ARE_NOT_REPEATS = {"check_sample_weight_equivalence_on_dense_data": (
    "a weight is not a repetition under DP: records are Poisson-sampled one by one and "
    "weights are clipped to max_sample_weight (see tests/test_common.py)")}


@parametrize_with_checks([DPBilevelRidge(validation_fraction=0.5, random_state=0),
                          DPBilevelLogisticRegression(validation_fraction=0.5, random_state=0)],
                         expected_failed_checks=lambda estimator: _WEIGHTS_ARE_NOT_REPEATS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------ the split
def _fitted_masks(monkeypatch, fits):
    """Validation masks the tuner built in ``fits`` (callables that fit)."""
    masks = []
    problems = _DPBilevelMixin._problems

    def spy(self, rows, targets, mask, *args, **kwargs):
        masks.append(np.array(mask, copy=True))
        return problems(self, rows, targets, mask, *args, **kwargs)

    monkeypatch.setattr(_DPBilevelMixin, "_problems", spy)
    for fit in fits:
        fit()
    return masks


def _quick_ridge(**kwargs):
    return DPBilevelRidge(epsilon=1.0, n_outer_iter=1, inner_steps=2, refit_share=0.0,
                          y_bounds=(-10, 10), **kwargs)


@pytest.mark.parametrize("cls", [DPBilevelRidge, DPBilevelLogisticRegression])
def test_split_is_one_coin_per_record(monkeypatch, cls):
    """Appending a record leaves every other record's part unchanged (a
    split by position would move about a fifth of them), and each record
    is in the validation part with probability validation_fraction."""
    rng = np.random.default_rng(0)
    n = 2000
    X = rng.normal(size=(n + 1, 3))
    y = X[:, 0] + rng.normal(size=n + 1)
    if cls is DPBilevelLogisticRegression:
        y = (y > 0).astype(int)
    kwargs = {"epsilon": 1.0, "n_outer_iter": 1, "inner_steps": 2, "refit_share": 0.0,
              "random_state": 0}
    small, large = _fitted_masks(monkeypatch, [
        lambda: cls(**kwargs).fit(X[:n], y[:n]),
        lambda: cls(**kwargs).fit(X, y),
    ])
    assert small.shape == (n,) and large.shape == (n + 1,)
    np.testing.assert_array_equal(large[:n], small)
    # 0.2 +- 4.7 standard deviations of a Binomial(2000, 0.2) share
    assert abs(small.mean() - 0.2) < 0.042


def test_split_fraction_follows_validation_fraction(monkeypatch):
    rng = np.random.default_rng(1)
    n = 20000
    X = rng.normal(size=(n, 2))
    y = X[:, 0] + rng.normal(size=n)
    masks = _fitted_masks(monkeypatch, [
        lambda f=f: _quick_ridge(validation_fraction=f, random_state=3).fit(X, y)
        for f in (0.1, 0.5)
    ])
    for fraction, mask in zip((0.1, 0.5), masks):
        sd = np.sqrt(fraction * (1 - fraction) / n)
        assert abs(mask.mean() - fraction) < 5 * sd


def test_split_without_seed_is_unpredictable(monkeypatch):
    """random_state=None draws the coins from the CSPRNG: seeding numpy's
    global generator does not replay them."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 2))
    y = X[:, 0] + rng.normal(size=500)

    def fit():
        np.random.seed(0)
        torch.manual_seed(0)
        _quick_ridge().fit(X, y)

    first, second = _fitted_masks(monkeypatch, [fit, fit])
    assert not np.array_equal(first, second)


def test_validation_mask_overrides_the_coins(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = X[:, 0] + rng.normal(size=300)
    given = np.arange(300) % 4 == 0
    (mask,) = _fitted_masks(monkeypatch, [
        lambda: _quick_ridge(random_state=0).fit(X, y, validation_mask=given)])
    np.testing.assert_array_equal(mask, given)



@given(st.integers(20, 300), st.floats(0.05, 0.95), st.booleans(), st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_part_weights_do_not_move_when_a_record_is_added(n, fraction, in_validation, seed):
    """The part weights multiply each gradient before it is clipped, so one
    added record must not move the other records' weights: with a coin split
    they come from the public n and validation_fraction alone."""
    from skdp.bilevel._estimator import _public_part_sizes

    rng = np.random.default_rng(seed)
    X = torch.as_tensor(rng.normal(size=(n + 1, 2)))
    onehot = torch.as_tensor(np.eye(2)[rng.integers(0, 2, n + 1)])
    mask = np.append(rng.random(n) < fraction, in_validation)
    if mask.all() or not mask.any():
        return
    est = DPBilevelLogisticRegression(validation_fraction=fraction)
    weights = []
    for rows in (n, n + 1):
        sizes = _public_part_sizes(mask[:rows], None, fraction)
        problems = est._problems(X[:rows], onehot[:rows], mask[:rows], X.device, sizes)
        weights.append([problem.targets[:n, -1] for problem in problems])
    for before, after in zip(*weights):
        np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=1e-12)
