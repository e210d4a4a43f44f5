"""``class_weight`` on every classifier: a public dict is free, ``"balanced"``
buys its class counts with one accounted Gaussian release."""

import numpy as np
import pytest
from sklearn.base import clone

from skdp import (
    DPBilevelLogisticRegression,
    DPDROClassifier,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
)
from skdp.privacy import balanced_class_weights

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def classifiers(**common):
    steps = dict(max_steps=40, random_state=0, **common)
    return [
        DPSGDClassifier(**steps),
        DPRateConstrainedClassifier(**steps),
        DPFERMIClassifier(**steps),
        DPDROClassifier(**steps),
        DPBilevelLogisticRegression(n_outer_iter=2, inner_steps=20, random_state=0, **common),
    ]


def _name(estimator):
    return type(estimator).__name__


def _imbalanced(n=2000, positive=0.1, seed=0):
    """About ``positive`` of the labels are 1, with a weak signal: an
    unweighted model predicts 1 rarely."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    score = X[:, 0] + 1.5 * rng.normal(size=n)
    y = (score > np.quantile(score, 1.0 - positive)).astype(int)
    return X, y, rng.integers(0, 2, n)


def _fit(estimator, X, y, groups, **params):
    if isinstance(estimator, (DPRateConstrainedClassifier, DPFERMIClassifier)):
        params["sensitive_features"] = groups
    return clone(estimator).fit(X, y, **params)


@pytest.mark.parametrize("estimator", classifiers(epsilon=4.0), ids=_name)
def test_balanced_adds_one_accounted_release(estimator):
    X, y, groups = _imbalanced()
    plain = _fit(estimator, X, y, groups)
    balanced = _fit(clone(estimator).set_params(class_weight="balanced"), X, y, groups)
    assert set(balanced.privacy_report_.noise) - set(plain.privacy_report_.noise) == {
        "class_counts"}
    assert balanced.privacy_report_.scale("class_counts") > 0
    # the budget is still enforced: the release takes its share of it
    assert balanced.epsilon_ <= 4.0
    assert balanced.class_weight_.max() == pytest.approx(1.0)
    assert balanced.class_weight_[1] > balanced.class_weight_[0]


@pytest.mark.parametrize("estimator", [DPSGDClassifier(max_steps=20, random_state=0),
                                       DPRateConstrainedClassifier(max_steps=20,
                                                                   random_state=0)],
                         ids=_name)
def test_balanced_costs_epsilon_at_the_same_noise(estimator):
    """At a fixed noise multiplier and step count (a budget that affords
    them), the class counts are one more release: epsilon_ grows."""
    X, y, groups = _imbalanced()
    fixed = clone(estimator).set_params(epsilon=50.0, solver_options={"noise_multiplier": 3.0})
    plain = _fit(fixed, X, y, groups)
    balanced = _fit(clone(fixed).set_params(class_weight="balanced"), X, y, groups)
    assert balanced.n_steps_ == plain.n_steps_ == 20
    assert balanced.epsilon_ > plain.epsilon_
    # dp_event_ composes the one-off releases (the class counts among them)
    # first: one Gaussian of a smaller joint multiplier than without them
    initial = balanced.dp_event_.events[0]
    assert initial == balanced.privacy_report_.initial_event
    assert initial.noise_multiplier < plain.dp_event_.events[0].noise_multiplier


@pytest.mark.parametrize("estimator", classifiers(epsilon=4.0), ids=_name)
def test_balanced_raises_the_predicted_positive_rate(estimator):
    X, y, groups = _imbalanced()
    plain = _fit(estimator, X, y, groups)
    balanced = _fit(clone(estimator).set_params(class_weight="balanced"), X, y, groups)
    assert balanced.predict(X).mean() > plain.predict(X).mean() + 0.05


@pytest.mark.parametrize("estimator", classifiers(epsilon=2.0)[:4], ids=_name)
def test_a_dict_is_public_and_free(estimator):
    X, y, groups = _imbalanced()
    plain = _fit(estimator, X, y, groups)
    weighted = _fit(clone(estimator).set_params(class_weight={1: 4.0}), X, y, groups)
    assert weighted.epsilon_ == plain.epsilon_
    assert set(weighted.privacy_report_.noise) == set(plain.privacy_report_.noise)
    np.testing.assert_allclose(weighted.class_weight_, [0.25, 1.0])


def test_class_weight_multiplies_sample_weight():
    """Class weights {0: 1, 1: 2} are the per-record weights 0.5 and 1
    (their ratios, the largest at max_sample_weight)."""
    estimator = DPSGDClassifier(max_steps=30, random_state=0)
    X, y, _ = _imbalanced()
    by_class = clone(estimator).set_params(class_weight={0: 1.0, 1: 2.0}).fit(X, y)
    by_record = clone(estimator).fit(X, y, sample_weight=np.where(y == 1, 1.0, 0.5))
    np.testing.assert_allclose(by_class.coef_, by_record.coef_, rtol=1e-6, atol=1e-7)
    both = clone(estimator).set_params(class_weight={0: 1.0, 1: 2.0}).fit(
        X, y, sample_weight=np.full(len(y), 0.5))
    half = clone(estimator).fit(X, y, sample_weight=np.where(y == 1, 0.5, 0.25))
    np.testing.assert_allclose(both.coef_, half.coef_, rtol=1e-6, atol=1e-7)


def test_class_weight_errors():
    X, y, _ = _imbalanced(n=300)
    with pytest.raises(ValueError, match="class_weight names the classes"):
        DPSGDClassifier(max_steps=5, class_weight={7: 1.0}).fit(X, y)
    with pytest.raises(ValueError, match="class_weight must map"):
        DPSGDClassifier(max_steps=5, class_weight={0: -1.0}).fit(X, y)
    with pytest.raises(ValueError, match="class_weight"):
        DPSGDClassifier(max_steps=5, class_weight="uniform").fit(X, y)


def test_balanced_without_privacy_uses_exact_counts():
    X, y, _ = _imbalanced()
    clf = DPSGDClassifier(epsilon=None, max_steps=5, class_weight="balanced",
                          random_state=0).fit(X, y)
    exact = balanced_class_weights(np.bincount(y))
    np.testing.assert_allclose(clf.class_weight_, exact / exact.max())
    assert "class_counts" not in clf.privacy_report_.noise


def test_balanced_weights_are_bounded():
    weights = balanced_class_weights([1e6, -50.0, 3.0])
    assert weights.max() / weights.min() <= 100.0 + 1e-9
    assert np.all(np.isfinite(weights))
