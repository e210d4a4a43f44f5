"""``warm_start=True`` on every estimator: training continues from the
previous parameters, and the privacy attributes compose both fits."""

import dp_accounting as dpa
import numpy as np
import pytest
from sklearn.base import clone, is_classifier

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
from skdp.privacy import compute_epsilon

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def estimators(**common):
    steps = dict(max_steps=30, random_state=0, **common)
    bilevel = dict(n_outer_iter=2, inner_steps=10, random_state=0, **common)
    return [
        DPSGDClassifier(**steps),
        DPSGDClassifier(hidden_layer_sizes=(4,), **steps),
        DPRateConstrainedClassifier(**steps),
        DPFERMIClassifier(**steps),
        DPDROClassifier(**steps),
        DPBilevelLogisticRegression(**bilevel),
        DPSGDRegressor(**steps),
        DPDRORegressor(**steps),
        DPBilevelRidge(**bilevel),
    ]


def _name(estimator):
    mlp = "-mlp" if getattr(estimator, "hidden_layer_sizes", ()) else ""
    return type(estimator).__name__ + mlp


def _data(estimator, n=800, n_features=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    if is_classifier(estimator):
        y = (X[:, 0] - X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    else:
        y = 2.0 * X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y, {"sensitive_features": rng.integers(0, 2, n)} if isinstance(
        estimator, (DPRateConstrainedClassifier, DPFERMIClassifier)) else {}


def _parameters(estimator):
    if estimator.module_state_ is not None:
        return np.concatenate([np.ravel(v) for v in estimator.module_state_.values()])
    return np.r_[np.ravel(estimator.coef_), np.ravel(estimator.intercept_)]


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_two_warm_fits_compose_their_events(estimator):
    X, y, params = _data(estimator)
    warm = clone(estimator).set_params(warm_start=True).fit(X, y, **params)
    first_event, first_epsilon = warm.dp_event_, warm.epsilon_
    cold = clone(estimator).fit(X, y, **params)  # the second fit's own event
    warm.fit(X, y, **params)
    assert warm.dp_event_ == dpa.ComposedDpEvent([first_event, cold.dp_event_])
    assert warm.epsilon_ == compute_epsilon(warm.dp_event_, warm.delta_, warm.accountant_)
    assert warm.epsilon_ > first_epsilon
    assert warm.privacy_report_.epsilon == warm.epsilon_
    # without warm_start, a fit is accounted alone
    again = cold.fit(X, y, **params)
    assert again.epsilon_ == first_epsilon


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_continuation_starts_from_the_previous_parameters(estimator):
    """One more fit with (almost) no training keeps the previous model."""
    X, y, params = _data(estimator)
    warm = clone(estimator).set_params(warm_start=True).fit(X, y, **params)
    before = _parameters(warm)
    if isinstance(estimator, (DPBilevelLogisticRegression, DPBilevelRidge)):
        # one outer iteration of one noisy SGD step, the model of that step
        tiny = {"n_outer_iter": 1, "inner_steps": 1, "refit_share": 0.0, "epsilon": 50.0}
    elif isinstance(estimator, (DPDROClassifier, DPDRORegressor)):
        tiny = {"max_steps": 1, "learning_rate": 1e-6,
                "solver_options": {"step_norm_cap": 1e-6}}
    else:
        tiny = {"max_steps": 1, "learning_rate": 1e-6}
    if isinstance(estimator, DPFERMIClassifier):
        tiny["solver_options"] = {"w_learning_rate": 0.0}
    if "calibration" in warm.get_params():
        tiny["calibration"] = None  # the calibration would rescale the model
    warm.set_params(**tiny)
    after = _parameters(warm.fit(X, y, **params))
    cold = _parameters(clone(warm).set_params(warm_start=False).fit(X, y, **params))
    scale = np.abs(before).max()
    if isinstance(estimator, (DPBilevelLogisticRegression, DPBilevelRidge)):
        # one step (learning rate 0.1 or 0.5) moves it, far less than from zero
        assert np.abs(after - before).max() < 0.5 * np.abs(cold - before).max()
    else:
        assert np.abs(after - before).max() < 1e-3 * scale
        assert np.abs(cold - before).max() > 0.1 * scale


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
def test_other_features_are_a_clear_error(estimator):
    X, y, params = _data(estimator)
    warm = clone(estimator).set_params(warm_start=True).fit(X, y, **params)
    expected = warm.predict(X[:20])
    with pytest.raises(ValueError, match="warm_start=True.*3 features.*4 features"):
        warm.fit(X[:, :3], y, **params)
    # the fitted estimator is left as it was
    assert warm.n_features_in_ == 4
    np.testing.assert_array_equal(warm.predict(X[:20]), expected)


def test_other_classes_are_a_clear_error():
    clf = DPSGDClassifier(max_steps=5, warm_start=True, random_state=0)
    X, y, _ = _data(clf)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="warm_start=True.*classes"):
        clf.fit(X, np.where(y == 1, 2, 0))
    np.testing.assert_array_equal(clf.classes_, [0, 1])


def test_another_model_is_a_clear_error():
    clf = DPSGDClassifier(max_steps=5, warm_start=True, random_state=0)
    X, y, _ = _data(clf)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="warm_start=True.*hidden_layer_sizes"):
        clf.set_params(hidden_layer_sizes=(3,)).fit(X, y)


def test_a_non_private_previous_fit_makes_the_result_non_private():
    clf = DPSGDClassifier(epsilon=None, max_steps=5, warm_start=True, random_state=0)
    X, y, _ = _data(clf)
    clf.fit(X, y)
    clf.set_params(epsilon=1.0).fit(X, y)
    assert clf.epsilon_ == np.inf
    assert clf.dp_event_ is None


def test_fermi_composes_each_silo():
    clf = DPFERMIClassifier(max_steps=20, warm_start=True, random_state=0)
    X, y, params = _data(clf)
    silos = np.arange(len(y)) % 2
    clf.fit(X, y, silo_ids=silos, **params)
    first = list(clf.silo_dp_events_)
    clf.fit(X, y, silo_ids=silos, **params)
    for before, event in zip(first, clf.silo_dp_events_, strict=True):
        assert event.events[0] == before
    assert clf.epsilon_ == clf.silo_epsilons_.max()
    with pytest.raises(ValueError, match="silos"):
        clf.fit(X, y, silo_ids=np.arange(len(y)) % 3, **params)


def test_privacy_curve_includes_the_previous_fit():
    clf = DPSGDClassifier(max_steps=20, warm_start=True, random_state=0)
    X, y, _ = _data(clf)
    first = clf.fit(X, y).epsilon_
    curve = clf.fit(X, y).privacy_curve(3)
    assert curve[0, 1] > first  # the previous fit counts from the first step on
    assert curve[-1, 1] == pytest.approx(clf.epsilon_, rel=1e-3)


def _units(n, seed=0):
    return np.random.default_rng(seed).integers(0, n // 4, n)


@pytest.mark.parametrize("estimator", estimators(), ids=_name)
@pytest.mark.parametrize("first_with_units", [True, False], ids=["units-then-records",
                                                                  "records-then-units"])
def test_a_record_and_a_unit_fit_do_not_compose(estimator, first_with_units):
    """A warm start that mixes a fit about units with a fit about records is
    refused before the second fit spends anything (the audit's example: with
    max_records_per_unit=1 the exact record-level epsilon of such a pair was
    3.487 where a relabelled composition reported 1.995), and the estimator
    keeps its first fit."""
    X, y, params = _data(estimator)
    units = _units(len(X))
    first = {"unit_ids": units} if first_with_units else {}
    second = {} if first_with_units else {"unit_ids": units}
    warm = clone(estimator).set_params(warm_start=True).fit(X, y, **params, **first)
    before = (warm.epsilon_, warm.dp_event_, _parameters(warm).copy())
    with pytest.raises(ValueError, match="do not compose"):
        warm.fit(X, y, **params, **second)
    assert warm.epsilon_ == before[0] and warm.dp_event_ == before[1]
    assert np.array_equal(_parameters(warm), before[2])
    warm.predict(X)


def test_compose_reports_refuses_records_with_units():
    from skdp.privacy import BatchReleases, Release, ReleasePlan, compose_reports

    batch = BatchReleases([Release("gradient")], steps=10, sampling_rate=0.1)
    records = ReleasePlan(batch).calibrate(1.0, 1e-5)
    units = ReleasePlan(batch, privacy_unit="unit (max_records_per_unit=1)").calibrate(1.0, 1e-5)
    for earlier, later in ((records, units), (units, records)):
        with pytest.raises(ValueError, match="about records with a fit about units"):
            compose_reports(earlier, later)
    assert compose_reports(units, units).privacy_unit == units.privacy_unit
