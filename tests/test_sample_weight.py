"""``fit(sample_weight=...)`` and ``max_sample_weight`` for every estimator.

A weight ``w`` scales a record's clipped contribution by
``min(w, max_sample_weight) / max_sample_weight``: no sensitivity changes,
so the accountant's epsilon does not depend on the weights (docs:
privacy.rst, "Sample weights, class weights and warm starts").
"""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import config_context
from sklearn.base import clone, is_classifier
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import (
    check_all_zero_sample_weights_error,
    check_classifiers_one_label_sample_weights,
    check_sample_weight_equivalence_on_dense_data,
    check_sample_weights_list,
    check_sample_weights_not_an_array,
    check_sample_weights_not_overwritten,
    check_sample_weights_pandas_series,
    check_sample_weights_shape,
)

from skdp import (
    DPBilevelLogisticRegression,
    DPBilevelRidge,
    DPDROClassifier,
    DPDRORegressor,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp.models import CrossEntropyHead
from skdp.models._backends import LinearBackend, ModuleBackend
from skdp.privacy import record_weight_factors, weigh
from skdp.model_selection import spent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SAMPLE_WEIGHT_EQUIVALENCE = (
    "a weight is not a repetition under DP: records are Poisson-sampled one by one "
    "(k copies are k independent draws and change n, hence the sampling rate and the "
    "step count), weights above max_sample_weight (default 1) are clipped, and each "
    "record's contribution is w / max_sample_weight of a clipped gradient"
)


def estimators(**common):
    """One fast configuration of every estimator."""
    steps = dict(max_steps=25, random_state=0, **common)
    bilevel = dict(n_outer_iter=2, inner_steps=5, validation_fraction=0.5, random_state=0,
                   **common)
    return [
        DPSGDClassifier(**steps),
        DPRateConstrainedClassifier(**steps),
        DPFERMIClassifier(**steps),
        DPDROClassifier(**steps),
        DPBilevelLogisticRegression(**bilevel),
        DPSGDRegressor(**steps),
        DPDRORegressor(**steps),
        DPBilevelRidge(**bilevel),
    ]


def _name(estimator):
    return type(estimator).__name__


def _data(estimator, n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    groups = rng.integers(0, 2, n)
    if is_classifier(estimator):
        y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    else:
        y = X @ np.array([1.0, -0.5, 0.0, 0.25]) + 0.1 * rng.normal(size=n)
    return X, y, groups


def _fit_params(estimator, groups):
    if isinstance(estimator, (DPRateConstrainedClassifier, DPFERMIClassifier)):
        return {"sensitive_features": groups}
    return {}


def _outputs(estimator, X):
    if is_classifier(estimator):
        return estimator.predict_proba(X)[:, 1]
    return estimator.predict(X)


# ---------------------------------------------------- scikit-learn's checks
SAMPLE_WEIGHT_CHECKS = [
    check_sample_weights_pandas_series,
    check_sample_weights_not_an_array,
    check_sample_weights_list,
    check_all_zero_sample_weights_error,
    check_sample_weights_shape,
    check_sample_weights_not_overwritten,
    pytest.param(check_sample_weight_equivalence_on_dense_data,
                 marks=pytest.mark.xfail(strict=True, reason=SAMPLE_WEIGHT_EQUIVALENCE)),
    check_classifiers_one_label_sample_weights,
]


@pytest.mark.parametrize("check", SAMPLE_WEIGHT_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_sklearn_sample_weight_checks(estimator, check):
    if check is check_classifiers_one_label_sample_weights and not is_classifier(estimator):
        pytest.skip("a classifier check")
    check(_name(estimator), estimator)


# ------------------------------------------------------------- semantics
@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_fit_takes_sample_weight_and_routes_it(estimator):
    assert "max_sample_weight" in estimator.get_params()
    with config_context(enable_metadata_routing=True):
        requested = clone(estimator).set_fit_request(sample_weight=True)
        assert requested.get_metadata_routing().fit.requests["sample_weight"] is True


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_weights_of_one_match_no_weights(estimator):
    """Up to float rounding (the weighted path multiplies by 1.0)."""
    X, y, groups = _data(estimator)
    params = _fit_params(estimator, groups)
    plain = clone(estimator).fit(X, y, **params)
    ones = clone(estimator).fit(X, y, sample_weight=np.ones(len(y)), **params)
    np.testing.assert_allclose(_outputs(ones, X), _outputs(plain, X), rtol=1e-5, atol=1e-6)
    assert ones.epsilon_ == plain.epsilon_


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_epsilon_does_not_depend_on_the_weights(estimator):
    X, y, groups = _data(estimator)
    params = _fit_params(estimator, groups)
    weights = np.random.default_rng(1).uniform(0.0, 3.0, len(y))
    plain = clone(estimator).set_params(max_sample_weight=3.0).fit(X, y, **params)
    weighted = clone(estimator).set_params(max_sample_weight=3.0).fit(
        X, y, sample_weight=weights, **params)
    assert weighted.epsilon_ == plain.epsilon_
    assert weighted.dp_event_ == plain.dp_event_


def _flipped_block(estimator, n=600, block=200, seed=0):
    """Clean rows, then a block that contradicts them (flipped labels or
    shifted targets): the block moves a weighted-1 model a lot."""
    X, y, groups = _data(estimator, n + block, seed)
    y = y.copy()
    if is_classifier(estimator):
        y[n:] = 1 - y[n:]
    else:
        y[n:] = y[n:] + 3.0
    return X, y, groups, n


def _non_private(estimator):
    estimator = clone(estimator).set_params(epsilon=None)
    if isinstance(estimator, (DPBilevelLogisticRegression, DPBilevelRidge)):
        return estimator.set_params(n_outer_iter=3)
    params = {"max_steps": None, "max_epochs": 20}
    if "y_bounds" in estimator.get_params():
        params["y_bounds"] = (-6.0, 6.0)
    return estimator.set_params(**params)


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_zero_weight_removes_a_records_influence(estimator):
    """Without noise, zero weight on a block of contradicting records gives
    about the model trained without them, far from the one with weight 1."""
    estimator = _non_private(estimator)
    X, y, groups, n = _flipped_block(estimator)
    params = _fit_params(estimator, groups)
    params_clean = _fit_params(estimator, groups[:n])
    if isinstance(estimator, (DPBilevelLogisticRegression, DPBilevelRidge)):
        mask = np.arange(len(y)) % 2 == 0  # the same split for both fits
        params, params_clean = {"validation_mask": mask}, {"validation_mask": mask[:n]}
    weights = np.r_[np.ones(n), np.zeros(len(y) - n)]
    clean = clone(estimator).fit(X[:n], y[:n], **params_clean)
    zero = clone(estimator).fit(X, y, sample_weight=weights, **params)
    full = clone(estimator).fit(X, y, **params)
    reference = _outputs(clean, X)
    off_zero = np.abs(_outputs(zero, X) - reference).mean()
    off_full = np.abs(_outputs(full, X) - reference).mean()
    assert off_zero < 0.25 * off_full, (off_zero, off_full)


@pytest.mark.parametrize("estimator", estimators()[:2], ids=_name)
def test_weights_above_the_bound_are_clipped_with_a_warning(estimator):
    X, y, groups = _data(estimator)
    params = _fit_params(estimator, groups)
    weights = np.r_[np.full(10, 50.0), np.ones(len(y) - 10)]
    with pytest.warns(UserWarning, match=r"exceed max_sample_weight=1; they were clipped"):
        clipped = clone(estimator).fit(X, y, sample_weight=weights, **params)
    capped = clone(estimator).fit(X, y, sample_weight=np.minimum(weights, 1.0), **params)
    np.testing.assert_allclose(_outputs(clipped, X), _outputs(capped, X), rtol=1e-6, atol=1e-7)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*max_sample_weight.*")
        clone(estimator).set_params(max_sample_weight=50.0).fit(
            X, y, sample_weight=weights, **params)


@pytest.mark.parametrize("weights, match", [
    (-np.ones(600), "sample_weight"),
    (np.r_[np.nan, np.ones(599)], "sample_weight"),
    (np.ones(7), "sample_weight"),
])
def test_bad_weights_are_clear_errors(weights, match):
    estimator = DPSGDClassifier(max_steps=5, random_state=0)
    X, y, _ = _data(estimator)
    with pytest.raises(ValueError, match=match):
        estimator.fit(X, y, sample_weight=weights)


def test_max_sample_weight_is_validated():
    X, y, _ = _data(DPSGDClassifier())
    with pytest.raises(ValueError, match="max_sample_weight"):
        DPSGDClassifier(max_sample_weight=0.0).fit(X, y)


def test_weights_relative_to_the_bound():
    """Weight w with bound M is the factor w / M: weights 2 under M=2 are
    weights 1 under M=1."""
    estimator = DPSGDClassifier(max_steps=25, random_state=0)
    X, y, _ = _data(estimator)
    a = clone(estimator).set_params(max_sample_weight=2.0).fit(X, y, sample_weight=np.full(600, 2.0))
    b = clone(estimator).fit(X, y, sample_weight=np.ones(600))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-7)


# ------------------------------------------------- the privacy invariant
def _backend(kind, X, n_outputs=2):
    if kind == "linear":
        return LinearBackend(X, n_outputs)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 3), torch.nn.Tanh(),
                                 torch.nn.Linear(3, n_outputs))
    return ModuleBackend(X, module.double())


def _weighted_sum(kind, X, onehot, weights, bound, clip):
    backend = _backend(kind, X)
    with torch.no_grad():
        for p in backend.parameters:
            p.copy_(torch.linspace(-2.0, 2.0, p.numel(), dtype=p.dtype).view(p.shape))
    backend.record_weights = record_weight_factors(weights, bound)
    idx = torch.arange(X.shape[0])
    batch, logits = backend.forward(idx)
    sums, _ = backend.clipped_grad_sum(idx, batch, logits, CrossEntropyHead(),
                                       (onehot.T.contiguous(),), clip)
    return torch.cat([s.flatten() for s in sums])


@settings(max_examples=40, deadline=None)
@given(
    weights=st.lists(st.one_of(st.floats(0.0, 4.0), st.floats(4.0, 1e300)), min_size=2,
                     max_size=8),
    scale=st.floats(0.01, 1e6),
    bound=st.floats(0.1, 4.0),
    kind=st.sampled_from(["linear", "module"]),
)
def test_a_weighted_record_moves_a_clipped_sum_by_at_most_the_bound(weights, scale, bound,
                                                                     kind):
    """Add/remove one record of any weight (far above the bound too): the
    clipped, weighted gradient sum moves by at most the clipping bound, and
    a weighted histogram row by at most 1."""
    clip = 0.7
    n = len(weights)
    rng = np.random.default_rng(n)
    X = torch.as_tensor(rng.normal(size=(n, 3)) * scale, dtype=torch.float64)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, 2, n)), 2).double()
    w = torch.as_tensor(weights, dtype=torch.float64)
    with_record = _weighted_sum(kind, X, onehot, w, bound, clip)
    without = _weighted_sum(kind, X[1:], onehot[1:], w[1:], bound, clip)
    assert float((with_record - without).norm()) <= clip * (1 + 1e-9) + 1e-12
    rows = weigh(onehot.T, record_weight_factors(w, bound))  # (classes, records)
    assert float((rows.sum(1) - rows[:, 1:].sum(1)).abs().sum()) <= 1.0 + 1e-12


# ----------------------------------------------------------- routing
def _weights_and_data():
    estimator = DPSGDClassifier(max_steps=25, random_state=0)
    X, y, _ = _data(estimator)
    weights = np.random.default_rng(2).uniform(0.0, 1.0, len(y))
    return estimator, X, y, weights


def test_sample_weight_routes_through_pipeline_search_and_cross_validate():
    estimator, X, y, weights = _weights_and_data()
    with config_context(enable_metadata_routing=True):
        requested = clone(estimator).set_fit_request(sample_weight=True).set_score_request(
            sample_weight=False)
        pipe = Pipeline([("scale", StandardScaler().set_fit_request(sample_weight=False)),
                         ("clf", requested)])
        pipe.fit(X, y, sample_weight=weights)
        direct = clone(estimator).fit(StandardScaler().fit_transform(X), y,
                                      sample_weight=weights)
        np.testing.assert_allclose(pipe[-1].coef_, direct.coef_, rtol=1e-6, atol=1e-7)
        search = GridSearchCV(requested, {"learning_rate": [0.2, 0.5]}, cv=2)
        search.fit(X, y, sample_weight=weights)
        scores = cross_validate(requested, X, y, cv=2, params={"sample_weight": weights})
        assert len(scores["test_score"]) == 2
        with pytest.raises(Exception, match="sample_weight"):
            GridSearchCV(clone(estimator), {"learning_rate": [0.5]}, cv=2).fit(
                X, y, sample_weight=weights)


def test_private_search_and_spent_with_weights():
    from skdp.model_selection import PrivateGridSearchCV

    estimator, X, y, weights = _weights_and_data()
    search = PrivateGridSearchCV(clone(estimator), {"learning_rate": [0.2, 0.5]},
                                 random_state=0)
    search.fit(X, y, sample_weight=weights)
    unweighted = PrivateGridSearchCV(clone(estimator), {"learning_rate": [0.2, 0.5]},
                                     random_state=0).fit(X, y)
    assert search.epsilon_ == unweighted.epsilon_
    assert spent(search).epsilon == spent(unweighted).epsilon
