"""DPSGDRegressor: privacy report, least-squares limit, clipping, targets, checks."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import make_regression
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPSGDRegressor
from skdp.models import SquaredLossHead
from skdp.privacy import clipped_linear_sum, compute_epsilon


@pytest.fixture(scope="module")
def data():
    X, y = make_regression(n_samples=3000, n_features=6, n_informative=4, noise=5.0,
                           bias=3.0, random_state=0)
    return X, y


def test_epsilon_recomputed_from_event(data):
    X, y = data
    reg = DPSGDRegressor(epsilon=1.0, random_state=0).fit(X, y)
    assert 0.99 <= reg.epsilon_ <= 1.0
    assert compute_epsilon(reg.dp_event_, reg.delta_, reg.accountant_) == reg.epsilon_
    # the target-scale histogram is a one-off release composed with the steps
    report = reg.privacy_report_
    assert report.initial_event is not None
    assert report.noise["target_scale"].multiplier > 0
    assert report.steps == (reg.n_steps_,)
    assert reg.noise_multiplier_ == report.multiplier("gradient")


def test_public_bounds_spend_nothing_on_the_target(data):
    X, y = data
    reg = DPSGDRegressor(epsilon=1.0, y_bounds=(-400, 400), random_state=0).fit(X, y)
    assert reg.privacy_report_.initial_event is None
    assert "target_scale" not in reg.privacy_report_.noise
    assert reg.y_scale_ == 400.0 and reg.y_offset_ == 0.0
    assert reg.dp_event_.count == reg.n_steps_


def test_fitted_attributes_and_utility(data):
    X, y = data
    X_train, X_test, y_train, y_test = X[:2000], X[2000:], y[:2000], y[2000:]
    reg = DPSGDRegressor(epsilon=1.0, random_state=0).fit(X_train, y_train)
    assert reg.coef_.shape == (6,)
    assert isinstance(reg.intercept_, float)
    assert reg.predict(X_test).shape == (1000,)
    ref = Ridge().fit(X_train, y_train).score(X_test, y_test)
    assert reg.score(X_test, y_test) >= ref - 0.05
    # scale is a power of two that covers the bulk of |y|
    assert np.log2(reg.y_scale_) == int(np.log2(reg.y_scale_))
    assert np.quantile(np.abs(y_train), 0.5) <= reg.y_scale_


def test_noise_off_is_least_squares(data):
    X, y = data
    X, y = X[:500], y[:500]
    exact = dict(epsilon=None, max_grad_norm=np.inf, batch_size=500, max_epochs=1500,
                 learning_rate=0.5, y_bounds=(-1000, 1000), random_state=0)
    reg = DPSGDRegressor(**exact).fit(X, y)
    ols = LinearRegression().fit(X, y)
    np.testing.assert_allclose(reg.coef_, ols.coef_, rtol=1e-3, atol=1e-2)
    assert reg.intercept_ == pytest.approx(ols.intercept_, abs=1e-2)
    assert reg.epsilon_ == np.inf and reg.dp_event_ is None

    # alpha / 2 ||w||^2 on the mean loss is Ridge(alpha=n * alpha) (y scaled
    # by 1000: the penalty acts on the scaled model, the same up to units)
    ridge = DPSGDRegressor(alpha=0.5, **exact).fit(X, y)
    ref = Ridge(alpha=500 * 0.5).fit(X, y)
    np.testing.assert_allclose(ridge.coef_, ref.coef_, rtol=1e-3, atol=1e-2)
    assert ridge.intercept_ == pytest.approx(ref.intercept_, abs=1e-2)
    assert np.linalg.norm(ridge.coef_) < np.linalg.norm(reg.coef_)


def test_mlp_regressor(data):
    X, y = data
    reg = DPSGDRegressor(epsilon=3.0, hidden_layer_sizes=(8,), random_state=0).fit(X, y)
    assert reg.coef_ is None and reg.module_state_ is not None
    assert reg.score(X, y) > 0.5
    restored = clone(reg).set_params(random_state=0).fit(X, y)
    np.testing.assert_allclose(restored.predict(X), reg.predict(X))


def test_squared_head_paths_agree():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    y = torch.randn(7, generator=gen, dtype=torch.float64)
    w = torch.randn(3, generator=gen, dtype=torch.float64)
    pred = X @ w
    head = SquaredLossHead()
    np.testing.assert_allclose(head.output_grad(pred[None], y[None])[0], pred - y)
    # one record's clipped gradient is the residual times its row, norm <= C
    total, sq = clipped_linear_sum(X, head.output_grad(pred[None], y[None]), 0.1)
    expected = (pred - y)[:, None] * X
    norms = expected.norm(dim=1)
    np.testing.assert_allclose(sq, norms**2)
    factors = torch.clamp(0.1 / norms, max=1.0)
    np.testing.assert_allclose(total[0], (expected * factors[:, None]).sum(0))


@pytest.mark.parametrize("outlier", [1e3, 1e6, 1e9])
def test_clipping_bounds_each_record(outlier):
    """Adding one record (however extreme its target) moves the clipped
    gradient sum of a step by at most C."""
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(50, 4)))
    y = torch.as_tensor(rng.normal(size=50))
    w = torch.as_tensor(rng.normal(size=4))
    head, clip = SquaredLossHead(), 0.7

    def grad_sum(rows, targets):
        out = head.output_grad((rows @ w)[None], targets[None])
        return clipped_linear_sum(rows, out, clip)[0]

    extra_x = torch.as_tensor(rng.normal(size=(1, 4))) * 100
    extra_y = torch.tensor([outlier], dtype=torch.float64)
    neighbour = grad_sum(torch.cat([X, extra_x]), torch.cat([y, extra_y]))
    assert float((neighbour - grad_sum(X, y)).norm()) <= clip * (1 + 1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_targets_are_rejected(data, bad):
    X, y = data
    y = y.copy()
    y[3] = bad
    with pytest.raises(ValueError, match="y must be finite"):
        DPSGDRegressor().fit(X, y)


@pytest.mark.parametrize("bounds", [(1.0, 1.0), (2.0, -1.0), (0.0, np.inf), (1.0,), ("a", 2)])
def test_bad_bounds(data, bounds):
    X, y = data
    with pytest.raises(ValueError, match="y_bounds"):
        DPSGDRegressor(y_bounds=bounds).fit(X, y)


def test_bounds_clip_targets(data):
    X, y = data
    reg = DPSGDRegressor(epsilon=None, y_bounds=(-1.0, 1.0), random_state=0).fit(X, y)
    # targets far outside the bounds were clipped to them: predictions stay
    # near [-1, 1] although y spans hundreds
    assert np.abs(reg.predict(X)).max() < 5 < np.abs(y).max()


def test_reproducible_with_seed_and_secure_without(data):
    X, y = data
    a = DPSGDRegressor(random_state=3).fit(X, y)
    b = DPSGDRegressor(random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = DPSGDRegressor().fit(X, y)
    d = DPSGDRegressor().fit(X, y)
    assert not np.array_equal(c.coef_, d.coef_)


_WEIGHTS_ARE_NOT_REPEATS = {"check_sample_weight_equivalence_on_dense_data": (
    "a weight is not a repetition under DP: records are Poisson-sampled one by one and "
    "weights are clipped to max_sample_weight (see tests/test_common.py)")}


@parametrize_with_checks([DPSGDRegressor()],
                         expected_failed_checks=lambda estimator: _WEIGHTS_ARE_NOT_REPEATS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
