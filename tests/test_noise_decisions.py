"""Decisions from noisy releases know their noise (issue 34): releases that
could decide nothing are not made, verdicts have three outcomes, searches
and encoders say when they cannot tell."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from sklearn.metrics import accuracy_score, log_loss

from skdp import (
    DPBilevelLogisticRegression,
    DPDROClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
)
from skdp._fit.checks import ClippedShare, ModelCheck
from skdp._fit.releases import ScoreCalibration
from skdp.exceptions import (
    CategoryWarning,
    ClippingWarning,
    ConstraintWarning,
    ModelCheckWarning,
    NoiseDecisionWarning,
    SelectionWarning,
)
from skdp.model_selection import PrivateGridSearchCV
from skdp.model_selection import _private_search
from skdp.preprocessing import DPOneHotEncoder, DPSimpleImputer
from skdp.preprocessing._encoder import stability_threshold
from skdp.privacy import bound_verdicts, verdict_margin


def _logistic(n, seed=0, d=5, intercept=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    coef = np.linspace(1.5, -1.0, d)
    y = (rng.random(n) < expit(X @ coef + intercept)).astype(int)
    return X, y


def _categories(caught, category):
    return [w for w in caught if issubclass(w.category, category)]


# ------------------------------------------------------------ the verdicts
@settings(max_examples=200, deadline=None)
@given(excess=st.floats(-5, 5), std=st.floats(0, 3),
       confidence=st.floats(0.5, 0.999))
def test_verdicts_follow_the_noise(excess, std, confidence):
    (verdict,) = bound_verdicts([excess], std, confidence)
    z = verdict_margin(confidence)
    if excess + z * std <= 0:
        assert verdict == "met"
    elif excess - z * std > 0:
        assert verdict == "violated"
    else:
        assert verdict == "undetermined"
    if std == 0:  # exact values are never undetermined
        assert verdict != "undetermined"


def test_verdict_confidence_is_checked():
    with pytest.raises(ValueError, match="confidence"):
        bound_verdicts([0.0], 1.0, confidence=1.0)


# ---------------------------------------------- releases planned from n
@pytest.mark.parametrize("make", [
    lambda: DPSGDClassifier(epsilon=1.0, max_steps=20, random_state=0),
    lambda: DPSGDClassifier(epsilon=8.0, max_steps=20, random_state=0),
    lambda: DPRateConstrainedClassifier(epsilon=8.0, max_steps=20, random_state=0),
    lambda: DPDROClassifier(epsilon=8.0, max_steps=20, random_state=0),
    lambda: DPBilevelLogisticRegression(epsilon=8.0, random_state=0),
])
def test_the_planned_noise_is_the_reports_noise(make):
    """The public pre-check reads the noise the plan then gives each release."""
    X, y = _logistic(40_000)
    model = make()
    fit_params = ({"sensitive_features": np.arange(len(y)) % 2}
                  if isinstance(model, DPRateConstrainedClassifier) else {})
    model.fit(X, y, **fit_params)
    for release in (ScoreCalibration(), ModelCheck(), ClippedShare()):
        assert release.name in model.privacy_report_.noise
        assert release.planned_std(model) == pytest.approx(
            model.privacy_report_.scale(release.name), rel=1e-12)


def test_releases_that_cannot_decide_are_not_made():
    X, y = _logistic(3000)
    model = DPSGDClassifier(epsilon=1.0, max_steps=20, random_state=0)
    assert model._fit_release(ScoreCalibration).min_records(model) > 3000
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X[:1000], y[:1000])
    # the check cannot tell a constant classifier from a useful one on 1,000
    # records at epsilon=1: skipped, said once, nothing spent on it
    skipped = _categories(caught, ModelCheckWarning)
    assert len(skipped) == 1 and "skipped" in str(skipped[0].message)
    assert set(model.privacy_report_.noise) == {"gradient"}
    assert model.score_calibration_ is None and model.prediction_shares_ is None
    assert model.clipped_share_ is None
    # on 3,000 it judges, and the calibration still waits for more data
    assert ModelCheck().min_records(model, 1) < 3000
    model.fit(X, y)
    assert set(model.privacy_report_.noise) == {"gradient", "model_check", "clipped_share"}
    assert model.prediction_shares_ is not None and model.score_calibration_ is None
    assert model.epsilon_ <= 1.0 + 1e-9


def test_model_check_can_be_turned_off():
    X, y = _logistic(1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DPSGDClassifier(epsilon=1.0, max_steps=20, model_check=False,
                                random_state=0).fit(X, y)
    assert not _categories(caught, ModelCheckWarning)
    assert "model_check" not in model.privacy_report_.noise
    assert model.check_log_loss_ is None and model.prediction_counts_ is None


def test_noise_decision_warnings_share_one_base():
    for category in (CategoryWarning, ClippingWarning, ConstraintWarning, ModelCheckWarning,
                     SelectionWarning):
        assert issubclass(category, NoiseDecisionWarning)
        assert issubclass(category, UserWarning)


# ------------------------------------------------- calibration never hurts
def _panel(n_persons, seed):
    rng = np.random.default_rng(seed)
    sizes = np.minimum(200, 1 + rng.geometric(1 / 14, size=n_persons))
    persons = np.repeat(np.arange(n_persons), sizes)
    X = rng.normal(size=(len(persons), 5))
    effect = rng.normal(scale=0.5, size=n_persons)[persons]
    y = (rng.random(len(persons)) < expit(X @ np.linspace(1.5, -1.0, 5) + effect)).astype(int)
    return X, y, persons


@pytest.mark.parametrize("setting", ["records 1000", "records 8000 at epsilon 8", "persons"])
def test_default_calibration_never_hurts(setting):
    """The default against calibration=None over seeds: median accuracy at
    least None's minus 0.005 and never below the majority rate, median
    held-out log-loss at most None's."""
    X_test, y_test = _logistic(20_000, seed=99, intercept=0.8)
    epsilon = 8.0 if "epsilon 8" in setting else 1.0
    scores = {"auto": [], None: []}
    for seed in range(6):
        if setting == "persons":
            X, y, persons = _panel(300, seed)
            X_test, y_test, _ = _panel(300, 99)
            fit_params = {"unit_ids": persons}
        else:
            X, y = _logistic(8000 if "8000" in setting else 1000, seed=seed, intercept=0.8)
            fit_params = {}
        for calibration in scores:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NoiseDecisionWarning)
                model = DPSGDClassifier(epsilon=epsilon, calibration=calibration,
                                        learning_rate=5.0, random_state=seed).fit(
                    X, y, **fit_params)
            proba = model.predict_proba(X_test)
            scores[calibration].append((accuracy_score(y_test, model.predict(X_test)),
                                        log_loss(y_test, proba)))
            if calibration == "auto" and setting == "records 8000 at epsilon 8":
                assert model.score_calibration_ is not None  # the calibration is made here
    majority = max(np.mean(y_test), 1 - np.mean(y_test))
    default = np.array(scores["auto"])
    none = np.array(scores[None])
    assert np.median(default[:, 0]) >= np.median(none[:, 0]) - 0.005
    assert default[:, 0].min() >= majority
    # where the calibration is made and the model already calibrated, the
    # two tie to a few 1e-6
    assert np.median(default[:, 1]) <= np.median(none[:, 1]) * (1 + 1e-4)


def test_auto_learning_rate_keeps_a_small_fit_above_the_majority_rate():
    """At 300 records and epsilon=1 the noise's walk over the fit would move
    each weight by about one unit at learning_rate=0.5 (here 3 of 8 seeds
    fall below the majority rate); "auto" lowers the step from public
    quantities so that every seed beats a constant, and keeps 0.5 where the
    data outweighs the noise."""
    def sparse_logistic(n, seed):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(n, 30))
        coef = np.zeros(30)
        coef[:5] = np.linspace(1.5, -1.0, 5)
        return X, (rng.random(n) < expit(X @ coef + 1.0)).astype(int)

    X_test, y_test = sparse_logistic(20_000, 99)
    majority = max(np.mean(y_test), 1 - np.mean(y_test))
    for seed in range(8):
        X, y = sparse_logistic(300, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDecisionWarning)
            model = DPSGDClassifier(random_state=seed).fit(X, y)
        walk = (model.noise_multiplier_ * model.max_grad_norm * np.sqrt(model.n_steps_)
                / (model.sampling_rate_ * 300))
        assert model.learning_rate_ == pytest.approx(0.3 / walk)
        assert model.learning_rate_ < 0.5
        assert model.score(X_test, y_test) > majority
    X, y = sparse_logistic(20_000, 0)
    assert DPSGDClassifier(max_steps=50, random_state=0).fit(X, y).learning_rate_ == 0.5
    assert DPSGDClassifier(learning_rate=2.0, max_steps=5).fit(X, y).learning_rate_ == 2.0


# ----------------------------------------------------- constraint verdicts
def test_small_group_constraint_is_undetermined_and_warns():
    """A 10 % group of 500 records at epsilon=1: the check's noise on its
    rate (~0.07) dwarfs the tolerance 0.01, so the verdict cannot be met."""
    X, y = _logistic(5000, seed=3)
    group = (np.arange(5000) % 10 == 0).astype(int)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DPRateConstrainedClassifier(epsilon=1.0, tolerance=0.01, max_steps=50,
                                            random_state=0).fit(X, y, sensitive_features=group)
    assert model.noisy_violation_std_.max() > 0.01
    assert "undetermined" in set(model.constraint_verdicts_)
    assert "met" not in set(model.constraint_verdicts_[model.noisy_violation_std_ > 0.05])
    assert model.constraints_met_ is False
    messages = [str(w.message) for w in _categories(caught, ConstraintWarning)]
    assert any("undetermined" in m and "epsilon" in m and "tolerance" in m for m in messages)


def test_constraint_verdicts_without_noise_are_exact():
    X, y = _logistic(3000, seed=4)
    group = np.arange(3000) % 2
    model = DPRateConstrainedClassifier(epsilon=None, tolerance=0.05, max_steps=100,
                                        random_state=0).fit(X, y, sensitive_features=group)
    assert set(model.constraint_verdicts_) <= {"met", "violated"}
    assert np.all(model.noisy_violation_std_ == 0)
    assert model.constraints_met_ == bool((model.noisy_violation_ <= 0).all())


# -------------------------------------------------------------- searches
def test_tied_candidates_are_marked_and_the_first_is_chosen():
    from skdp.model_selection import _selection

    results = {"params": [{"c": 1}, {"c": 2}, {"c": 3}],
               "mean_test_score": np.array([0.80, 0.83, 0.82])}
    noise = {"score": _selection.ScoreNoise(np.array([0.02, 0.02, 0.02]))}
    tied = _private_search._tied_with_best(results, noise, "score")
    assert tied.tolist() == [False, True, True]
    wide = {"score": _selection.ScoreNoise(np.array([0.05, 0.05, 0.05]))}
    assert _private_search._tied_with_best(results, wide, "score").all()
    message = _private_search._choice_within_noise(results, wide, "score")
    assert "first in the grid" in message and "{'c': 1}" in message


def test_candidates_are_fitted_without_their_own_checks():
    X, y = _logistic(2000)
    estimator = DPSGDClassifier(max_steps=5)
    candidate, _ = _private_search._fit_candidate(
        estimator, {"learning_rate": 0.5}, 0, 0.5, None, X, y, {}, check_candidates=False)
    assert candidate.model_check is False and candidate.calibration is None
    asked, _ = _private_search._fit_candidate(
        estimator, {"model_check": True}, 0, 0.5, None, X, y, {}, check_candidates=False)
    assert asked.model_check is True and asked.calibration is None
    kept, _ = _private_search._fit_candidate(
        estimator, {}, 0, 0.5, None, X, y, {}, check_candidates=True)
    assert kept.model_check is True and kept.calibration == "auto"


def test_search_says_when_every_candidate_dropped_its_constraints():
    X, y = _logistic(3000, seed=5)
    group = (np.arange(3000) % 25 == 0).astype(int)  # a 4 % group
    search = PrivateGridSearchCV(
        DPRateConstrainedClassifier(max_steps=30), {"tolerance": [0.02, 0.05, 0.1]},
        epsilon=0.3, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y, sensitive_features=group)
    assert (search.cv_results_["dropped_constraints"] > 0).all()
    assert (search.cv_results_["enforced_constraints"] == 0).all()
    summary = [w for w in _categories(caught, SelectionWarning)
               if "Every candidate" in str(w.message)]
    assert len(summary) == 1
    assert "unconstrained" in str(summary[0].message)


# --------------------------------------------------------------- encoder
def test_encoder_states_its_threshold():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({f"c{j}": rng.choice(["a", "b", "c", "d"], p=[0.4, 0.3, 0.2, 0.1],
                                          size=7000) for j in range(15)})
    with pytest.warns(CategoryWarning, match=r"20\.\d% of the 7000 records") as record:
        encoder = DPOneHotEncoder(epsilon=0.04, random_state=0).fit(X)
    message = str(record[0].message)
    assert "c0:" in message and "candidate_categories" in message
    std = encoder.privacy_report_.scale("counts")
    assert encoder.count_threshold_ == pytest.approx(
        stability_threshold(std, 15, encoder.selection_delta_))
    assert encoder.n_dropped_categories_ is None
    # with candidates the number dropped per column is released
    with pytest.warns(CategoryWarning, match="Candidates dropped per column"):
        with_candidates = DPOneHotEncoder(epsilon=0.04, random_state=0,
                                          candidate_categories=[list("abcd")] * 15).fit(X)
    assert with_candidates.n_dropped_categories_.shape == (15,)
    assert (with_candidates.n_dropped_categories_
            == 4 - np.array([len(c) for c in with_candidates.categories_])).all()
    # a low threshold is silent
    with warnings.catch_warnings():
        warnings.simplefilter("error", CategoryWarning)
        DPOneHotEncoder(epsilon=1.0, random_state=0).fit(X.iloc[:, :2])


# ------------------------------------------------------------ raw scales
def test_raw_scale_that_degrades_without_collapsing_warns():
    rng = np.random.default_rng(0)
    n = 20_000
    X = rng.normal(size=(n, 4))
    amount = rng.normal(0, 30, n)  # a raw column: unscaled, weakly informative
    y = (rng.random(n) < expit(X @ np.array([1.0, -0.8, 0.5, 0.0])
                             + 0.01 * amount)).astype(int)
    raw = np.column_stack([X, amount])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DPSGDClassifier(epsilon=1.0, random_state=0).fit(raw, y)
    assert 0.05 < model.prediction_shares_.min()  # not a constant classifier
    assert _categories(caught, ClippingWarning)
    assert model.clipped_share_ > ClippedShare.warn_share
    scaled = (raw - raw.mean(0)) / raw.std(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DPSGDClassifier(epsilon=1.0, random_state=0).fit(scaled, y)
    assert not _categories(caught, ClippingWarning)
    assert model.clipped_share_ < 0.05


# ---------------------------------------------------------- smaller items
def test_imputer_takes_a_string_marker():
    X = pd.DataFrame({"charges": ["29.85", " ", "108.15", "1889.5"] * 50,
                      "tenure": np.arange(200, dtype=float)})
    imputer = DPSimpleImputer(missing_values=" ", strategy="constant", fill_value=0.0).fit(X)
    out = imputer.transform(X)
    assert out.dtype == np.float64 and out[1, 0] == 0.0 and out[0, 0] == 29.85
    with pytest.raises(ValueError, match="must be a number.*DPOneHotEncoder"):
        imputer.fit(pd.DataFrame({"a": ["x", " "]}))


def test_missing_values_point_to_the_private_imputer():
    X, y = _logistic(100)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="DPSimpleImputer"):
        DPSGDClassifier().fit(X, y)


def test_misaligned_pandas_groups_are_named():
    X, y = _logistic(300)
    frame = pd.DataFrame(X, index=np.arange(300) + 1000)
    groups = pd.Series(np.arange(300) % 2)
    with pytest.warns(UserWarning, match="different pandas indexes"):
        DPRateConstrainedClassifier(epsilon=None, max_steps=3).fit(
            frame, y, sensitive_features=groups)


def test_warm_start_report_names_the_earlier_fits():
    X, y = _logistic(3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDecisionWarning)
        model = DPSGDClassifier(epsilon=1.0, max_steps=10, warm_start=True, random_state=0)
        first = model.fit(X, y).epsilon_
        model.fit(X, y)
    report = model.privacy_report_
    assert len(report.earlier) == 1 and report.earlier[0].epsilon == first
    assert "continues 1 earlier fit(s)" in report.summary()
    assert "continues 1 earlier" in report._repr_html_()
