"""Private calibration of binary classifiers' scores (skdp._fit.calibration):
one accounted release of (score bin, class) counts, then post-processing."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from skdp import (
    DPBilevelLogisticRegression,
    DPDROClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
)
from skdp._fit.calibration import (
    MIN_TEMPERATURE_SCALE,
    N_BINS,
    SCORE_BOUND,
    calibration_counts,
    fit_score_map,
    score_bin_codes,
    score_bins,
)
from skdp.privacy import compute_epsilon

scores_strategy = st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True),
              st.floats(-20, 20)),
    min_size=2, max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(scores=scores_strategy, data=st.data())
def test_each_record_adds_one_to_one_count(scores, data):
    """The release's l2 sensitivity is 1 under add/remove: removing any
    record, however extreme its score, changes one count by one."""
    scores = np.asarray(scores)
    y = np.asarray(data.draw(st.lists(st.integers(0, 1), min_size=len(scores),
                                      max_size=len(scores))))
    counts = calibration_counts(scores, y)
    assert counts.shape == (N_BINS, 2)
    assert counts.sum() == len(scores)
    removed = data.draw(st.integers(0, len(scores) - 1))
    keep = np.arange(len(scores)) != removed
    difference = counts - calibration_counts(scores[keep], y[keep])
    assert np.abs(difference).sum() == 1.0
    assert np.linalg.norm(difference) == 1.0


def _logistic_sample(n, scale, shift, seed=0):
    """True scores t, labels drawn from expit(t), and a model's scores
    ``(t - shift) / scale``: the map (scale, shift) calibrates them."""
    rng = np.random.default_rng(seed)
    true_scores = rng.normal(0, 1.5, n)
    y = (rng.random(n) < expit(true_scores)).astype(int)
    return (true_scores - shift) / scale, y


@pytest.mark.parametrize("scale, shift", [(0.3, 0.5), (2.0, -1.0), (1.0, 0.0)])
def test_exact_counts_recover_the_calibrating_map(scale, shift):
    scores, y = _logistic_sample(50_000, scale, shift)
    fitted = fit_score_map(calibration_counts(scores, y))
    # bins of width 0.5 blur the scores a little
    np.testing.assert_allclose(fitted, (scale, shift), atol=0.12)


def test_noisy_counts_recover_the_map_on_large_data():
    scores, y = _logistic_sample(30_000, 0.4, 0.8, seed=1)
    rng = np.random.default_rng(0)
    std = 20.0
    counts = calibration_counts(scores, y) + rng.normal(0, std, (N_BINS, 2))
    scale, shift = fit_score_map(counts, std)
    assert abs(scale - 0.4) < 0.1 and abs(shift - 0.8) < 0.25


def test_counts_below_the_noise_leave_the_model_as_trained():
    """Whatever the noisy counts of a few records suggest, a map the noise
    cannot support is not applied: the identity (never a constant)."""
    scores, y = _logistic_sample(200, 1.0, 0.0)
    y[:150] = 1
    counts = calibration_counts(scores, y)
    assert fit_score_map(counts, noise_std=40.0) == (1.0, 0.0)
    assert fit_score_map(counts, 40.0, temperature_only=True) == (1.0, 0.0)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), noise_std=st.floats(5.0, 60.0))
def test_noisy_counts_never_flip_the_scores(seed, noise_std):
    """The fitted scale is never negative, so the map never reverses the
    model's ranking, and with noise its shift stays bounded."""
    scores, y = _logistic_sample(3000, 1.0, 0.0, seed=seed)
    rng = np.random.default_rng(seed)
    counts = calibration_counts(scores, y) + rng.normal(0, noise_std, (N_BINS, 2))
    scale, shift = fit_score_map(counts, noise_std)
    assert scale >= 0.0 and np.isfinite(shift)


def _credit(n, seed=0):
    """Standardised lending-like data, about a fifth positives."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 6))
    score = X @ np.array([1.2, -0.8, 0.5, 0.0, 0.3, -0.2]) + 0.4 * group - 1.8
    y = (rng.random(n) < expit(score)).astype(int)
    return X, y, group


@pytest.mark.parametrize("estimator", [DPSGDClassifier, DPBilevelLogisticRegression,
                                       DPDROClassifier])
def test_calibration_release_is_in_the_accounted_event(estimator):
    # the calibration is made when the records are enough for its noise:
    # 2,000 of its noise std, about 3,800 at epsilon=8
    X, y, _ = _credit(6000)
    model = estimator(epsilon=8.0, random_state=0).fit(X, y)
    assert "score_calibration" in model.privacy_report_.noise
    scale, shift = model.score_calibration_
    assert 0.0 <= scale and np.isfinite(shift)
    assert compute_epsilon(model.dp_event_, model.delta_) == pytest.approx(model.epsilon_)
    assert model.epsilon_ <= 8.0 + 1e-6


def test_no_calibration_without_privacy_or_for_multiclass():
    X, y, _ = _credit(2000)
    reference = DPSGDClassifier(epsilon=None, random_state=0).fit(X, y)
    assert reference.score_calibration_ is None
    three = np.where(X[:, 0] > 0.5, 2, y)
    multiclass = DPSGDClassifier(epsilon=1.0, random_state=0).fit(X, three)
    assert "score_calibration" not in multiclass.privacy_report_.noise
    assert multiclass.score_calibration_ is None


@pytest.mark.parametrize("hidden", [(), (8,)])
def test_fairness_estimators_keep_their_predictions(hidden):
    """RaCO's constraints bound the rates of its predictions: its map is a
    temperature (scale > 0, no shift), which changes no prediction."""
    X, y, group = _credit(8000)
    model = DPRateConstrainedClassifier(epsilon=8.0, random_state=0,
                                        hidden_layer_sizes=hidden).fit(
        X, y, sensitive_features=group)
    scale, shift = model.score_calibration_
    assert shift == 0.0 and scale >= MIN_TEMPERATURE_SCALE
    if hidden:
        calibrated = model.decision_function(X)
        model._module_score_map = None
        np.testing.assert_array_equal(calibrated > 0, model.decision_function(X) > 0)


def test_calibration_repairs_an_over_confident_model():
    """A too large step size leaves DP-SGD's probabilities over-confident;
    the calibrated model's held-out log-loss is better than the same fit's
    uncalibrated one and than a constant predictor's."""
    X, y, _ = _credit(30_000, seed=3)
    X_test, y_test, _ = _credit(10_000, seed=4)
    losses = {}
    for calibration in (None, "auto"):
        model = DPSGDClassifier(epsilon=1.0, learning_rate=20.0, random_state=0,
                                calibration=calibration)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X, y)
        losses[calibration] = log_loss(y_test, model.predict_proba(X_test))
    constant = log_loss(y_test, np.full(len(y_test), y.mean()))
    reference = log_loss(y_test, LogisticRegression().fit(X, y).predict_proba(X_test)[:, 1])
    assert losses["auto"] < losses[None]
    assert losses["auto"] < constant
    assert losses["auto"] < 1.1 * reference


def test_calibration_none_leaves_its_share_to_training():
    X, y, _ = _credit(6000)
    calibrated = DPSGDClassifier(epsilon=8.0, random_state=0).fit(X, y)
    raw = DPSGDClassifier(epsilon=8.0, random_state=0, calibration=None).fit(X, y)
    assert raw.score_calibration_ is None
    assert "score_calibration" not in raw.privacy_report_.noise
    assert raw.noise_multiplier_ < calibrated.noise_multiplier_
    assert raw.epsilon_ <= 8.0 + 1e-6 and calibrated.epsilon_ <= 8.0 + 1e-6


def test_weighted_records_add_at_most_one():
    """With sample or class weights a record adds its factor (at most 1) to
    its count, so the sensitivity stays 1."""
    scores = np.array([0.1, 0.1, 3.0])
    counts = calibration_counts(scores, np.array([1, 1, 0]), np.array([0.25, 5.0, 0.5]))
    assert counts.sum() == pytest.approx(0.25 + 1.0 + 0.5)


_EDGES = score_bins()[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.floats(-SCORE_BOUND, SCORE_BOUND),
    st.sampled_from(list(_EDGES)).flatmap(
        lambda edge: st.sampled_from([edge, np.nextafter(edge, np.inf),
                                      np.nextafter(edge, -np.inf)])).map(
        lambda v: float(np.clip(v, -SCORE_BOUND, SCORE_BOUND)))), min_size=1, max_size=50))
def test_score_bins_by_asinh_are_searchsorted_bins(values):
    """The arithmetic binning is searchsorted's, on the edges and one ulp
    either side of them too."""
    scores = np.array(values, dtype=np.float64)
    expected = np.clip(np.searchsorted(_EDGES, scores, side="right") - 1, 0, N_BINS - 1)
    np.testing.assert_array_equal(score_bin_codes(scores), expected)
