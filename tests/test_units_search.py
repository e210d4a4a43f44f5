"""Private searches with privacy units (issue 24): the split by unit, the
unit ids of every fit, the selection releases bounded per unit, and the
accounting about units."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from skdp import DPRateConstrainedClassifier, DPSGDClassifier, DPSGDRegressor
from skdp.exceptions import UnitPrivacyNotAvailableError
from skdp.metrics import get_fairness_scorer
from skdp.model_selection import (
    PrivateGridSearchCV,
    PrivateRandomizedSearchCV,
    _private_search,
    _selection,
)
from skdp.preprocessing import DPStandardScaler
from skdp.privacy import bound_units, compute_epsilon

FAST = {"max_steps": 30, "random_state": 0}
GRID = {"learning_rate": [0.2, 1.0]}
UNIT = "unit (max_records_per_unit=16)"


def _data(n=900, n_units=90, seed=0):
    """Features, labels and unit ids; units of very different sizes."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    sizes = rng.pareto(1.2, n_units) + 1.0
    units = rng.choice(n_units, size=n, p=sizes / sizes.sum())
    return X, y, units


def _search(estimator=None, grid=GRID, **kwargs):
    kwargs.setdefault("epsilon", 2.0)
    kwargs.setdefault("random_state", 0)
    return PrivateGridSearchCV(estimator or DPSGDClassifier(**FAST), grid, **kwargs)


def _quiet_fit(search, *args, **kwargs):
    """Fit, ignoring the utility warnings of these tiny fits (noisy choice,
    near-constant model)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return search.fit(*args, **kwargs)


# ------------------------------------------ one unit and the selection releases
@st.composite
def selection_panels(draw):
    """Units of 1..200 validation records (far above k), K candidates,
    extreme predictions and targets, and the unit to add or remove."""
    sizes = draw(st.lists(st.integers(1, 200), min_size=2, max_size=6))
    k = draw(st.sampled_from([1, 3, 16]))
    n_candidates = draw(st.integers(1, 4))
    scale = draw(st.sampled_from([1.0, 1e3, 1e300]))
    seed = draw(st.integers(0, 2**16))
    removed = draw(st.integers(0, len(sizes) - 1))
    return sizes, k, n_candidates, scale, seed, removed


def _panel(panel):
    sizes, k, n_candidates, scale, seed, removed = panel
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    units = bound_units(codes, len(sizes), k, torch.Generator().manual_seed(seed))
    # the neighbour without the unit: the other units keep their subsets
    present = codes != removed
    return rng, codes.shape[0], n_candidates, scale, units.factors, present


@settings(max_examples=40, deadline=None)
@given(selection_panels(), st.integers(2, 3), st.integers(1, 3))
def test_one_unit_moves_the_histograms_by_at_most_their_sensitivity(panel, n_classes,
                                                                    n_groups):
    rng, m, K, _, factors, present = _panel(panel)
    predictions = rng.integers(0, n_classes, size=(K, m))
    y_codes = rng.integers(0, n_classes, m)
    groups = rng.integers(0, n_groups, m)

    def histograms(mask):
        return _selection.confusion_histograms(predictions[:, mask], y_codes[mask],
                                               groups[mask], n_classes, n_groups,
                                               factors[mask])

    moved = histograms(np.ones(m, bool)) - histograms(present)
    (release,) = _selection.histogram_plan(K).batches[0].releases
    assert release.sensitivity == pytest.approx(math.sqrt(K))
    assert np.linalg.norm(moved) <= release.sensitivity * (1 + 1e-9)
    # each candidate's histogram moves by at most 1 in l1
    assert np.abs(moved).reshape(K, -1).sum(axis=1).max() <= 1 + 1e-9


@settings(max_examples=40, deadline=None)
@given(selection_panels(), st.sampled_from([None, (-2.0, 2.0)]), st.sampled_from([0.5, 3.0]))
def test_one_unit_moves_the_error_sums_by_at_most_their_sensitivity(panel, y_bounds, bound):
    rng, m, K, scale, factors, present = _panel(panel)
    predictions = rng.normal(size=(K, m)) * scale
    predictions[:, rng.integers(0, m)] = rng.choice([np.nan, np.inf, -np.inf])
    y = rng.normal(size=m) * scale
    moments = y_bounds is not None
    losses = ["squared", "absolute"]

    def statistics(mask):
        return _selection.error_sums(predictions[:, mask], y[mask], losses, bound, y_bounds,
                                     moments, factors[mask])

    sums_all, stats_all = statistics(np.ones(m, bool))
    sums_without, stats_without = statistics(present)
    plan = _selection.regression_plan(K, losses, bound, stats_all.shape[0])
    sensitivity = {r.name: r.sensitivity for r in plan.batches[0].releases}
    for loss in losses:
        moved = np.linalg.norm(sums_all[loss] - sums_without[loss])
        assert moved <= sensitivity[_selection.LOSS_RELEASES[loss]] * (1 + 1e-9)
    moved = np.linalg.norm(stats_all - stats_without)
    assert moved <= sensitivity[_selection.MOMENTS] * (1 + 1e-9)


def test_without_weights_the_statistics_count_records():
    rng = np.random.default_rng(0)
    predictions, y = rng.integers(0, 2, (2, 50)), rng.integers(0, 2, 50)
    plain = _selection.confusion_histograms(predictions, y, None, 2, 1)
    ones = _selection.confusion_histograms(predictions, y, None, 2, 1, np.ones(50))
    assert np.allclose(plain, ones) and plain.sum() == 100


def test_the_fit_weighs_each_validation_unit_once(monkeypatch):
    """The histograms the search releases hold every validation unit with a
    total weight of 1, whatever its number of records."""
    X, y, units = _data()
    released = {}
    original = _private_search.release_histograms

    def spy(counts, *args):
        released["counts"] = counts
        return original(counts, *args)

    monkeypatch.setattr(_private_search, "release_histograms", spy)
    # without a refit, best_estimator_ is a candidate fitted on the training units
    search = _quiet_fit(_search(refit_share=0.0), X, y, unit_ids=units)
    counts = released["counts"]
    per_candidate = counts.reshape(counts.shape[0], -1).sum(axis=1)
    n_validation_units = search.n_units_ - search.best_estimator_.n_units_
    assert search.n_units_ == len(np.unique(units))
    assert 1 <= n_validation_units < search.n_units_
    assert np.allclose(per_candidate, n_validation_units, rtol=1e-12)


# ----------------------------------------------------------- the split
def test_the_split_keeps_every_unit_on_one_side(monkeypatch):
    X, y, units = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(person=units)
    seen = []
    original = _private_search._fit_candidate

    def spy(estimator, params, seed, mu, shares, X_part, *rest):
        seen.append(np.asarray(X_part["person"]))
        return original(estimator, params, seed, mu, shares, X_part, *rest)

    monkeypatch.setattr(_private_search, "_fit_candidate", spy)
    search = _quiet_fit(_search(DPSGDClassifier(unit_column="person", **FAST)), frame, y)
    *candidates, refit = seen
    assert np.array_equal(np.sort(refit), np.sort(units))  # the refit sees every record
    train_units = np.unique(candidates[0])
    for part in candidates:
        # every record of a training unit is in the training part, no other
        assert np.array_equal(np.sort(part), np.sort(units[np.isin(units, train_units)]))
    assert 0 < train_units.shape[0] < search.n_units_


def test_the_split_draws_a_coin_per_unit():
    """validation_fraction counts units, whatever their sizes: one unit holds
    half of the records here."""
    n_units = 4000
    units = np.concatenate([np.zeros(4000, int), np.arange(1, n_units)])
    X = np.zeros((units.shape[0], 1))
    y = np.arange(units.shape[0]) % 2
    search = _search(validation_fraction=0.25)
    search._validate_params()
    task = search._prepare(X, y, {"unit_ids": units})
    fractions, big_in_validation = [], 0
    for seed in range(20):
        search.random_state = seed
        generator, _ = search._randomness(task.n_candidates + 1)
        train = search._split(task, generator)
        for unit in (0, 7):
            assert np.unique(train[units == unit]).shape[0] == 1
        fractions.append(1 - np.unique(units[train]).shape[0] / n_units)
        big_in_validation += not train[0]
    assert abs(np.mean(fractions) - 0.25) < 0.01
    assert 0 < big_in_validation < 20


def test_too_few_units_for_a_split():
    X, y, _ = _data(n=200)
    with pytest.raises(ValueError, match="validation units"):
        _quiet_fit(_search(), X, y, unit_ids=np.arange(200) % 2)


# ----------------------------------------------------------- accounting
@pytest.mark.parametrize("regression", [False, True], ids=["classifier", "regressor"])
def test_epsilon_from_the_event_and_the_report_names_the_unit(regression):
    X, y, units = _data()
    if regression:
        search = _search(DPSGDRegressor(**FAST), y_bounds=(-4.0, 4.0),
                         scoring=["neg_mean_squared_error", "r2"],
                         refit="neg_mean_squared_error")
        _quiet_fit(search, X, X[:, 0], unit_ids=units)
    else:
        search = _quiet_fit(_search(), X, y, unit_ids=units)
    assert search.epsilon_ == pytest.approx(compute_epsilon(search.dp_event_,
                                                            search.event_delta_))
    assert search.epsilon_ <= 2.0
    for part in ("training_part", "validation_part"):
        split = search.budget_split_[part]
        assert split["epsilon"] == pytest.approx(compute_epsilon(split["dp_event"],
                                                                 search.event_delta_))
    report = search.privacy_report_
    assert report.privacy_unit == UNIT and report.epsilon == search.epsilon_
    assert report.dp_event == search.dp_event_
    assert f"one {UNIT} with all its records" in report.summary()
    assert search.n_units_ == len(np.unique(units))
    assert search.best_estimator_.privacy_report_.privacy_unit.startswith("unit")


def test_singleton_units_spend_like_records():
    X, y, _ = _data()
    records = _quiet_fit(_search(), X, y)
    units = _quiet_fit(_search(), X, y, unit_ids=np.arange(len(y)))
    assert units.epsilon_ == pytest.approx(records.epsilon_, rel=1e-12)
    for key in ("selection_noise_std", "candidate_epsilon", "refit_epsilon"):
        assert units.budget_split_[key] == pytest.approx(records.budget_split_[key], rel=1e-12)
    for part in ("training_part", "validation_part"):
        assert units.budget_split_[part]["epsilon"] == pytest.approx(
            records.budget_split_[part]["epsilon"], rel=1e-12)
    assert records.privacy_report_.privacy_unit == "record" and records.n_units_ is None
    assert units.n_units_ == len(y)


def test_fits_may_bound_units_by_another_k():
    """The grid may search over the fits' max_records_per_unit: each fit's
    event is about a unit whatever its bound."""
    X, y, units = _data()
    search = _quiet_fit(_search(grid={"max_records_per_unit": [1, 4]}, max_records_per_unit=2),
                        X, y, unit_ids=units)
    assert search.privacy_report_.privacy_unit == "unit (max_records_per_unit=2)"
    assert search.best_estimator_.max_records_per_unit == search.best_params_[
        "max_records_per_unit"]
    assert search.epsilon_ <= 2.0


# -------------------------------------------------------------- routing
def test_routing_on_plain_and_pipeline_candidates():
    X, y, units = _data()
    n_units = len(np.unique(units))
    with sklearn.config_context(enable_metadata_routing=True):
        search = _quiet_fit(_search(), X, y, unit_ids=units)
        assert search.best_estimator_.n_units_ == n_units
        pipe = Pipeline([("scale", FunctionTransformer()), ("clf", DPSGDClassifier(**FAST))])
        search = _quiet_fit(_search(pipe, {"clf__learning_rate": [0.2, 1.0]}), X, y,
                            unit_ids=units)
        assert search.best_estimator_[-1].n_units_ == n_units
        assert search.privacy_report_.privacy_unit == UNIT
        # sensitive features and units together, fairness scorers on the weighted histogram
        groups = (X[:, 1] > 0).astype(int)
        raco = DPRateConstrainedClassifier(**FAST)
        search = PrivateRandomizedSearchCV(
            raco, {"learning_rate": [0.2, 1.0]}, n_iter=2, epsilon=2.0, random_state=0,
            scoring={"acc": "accuracy",
                     "dp": get_fairness_scorer("demographic_parity_difference")},
            refit="acc",
        )
        _quiet_fit(search, X, y, sensitive_features=groups, unit_ids=units)
        assert search.best_estimator_.n_units_ == n_units
        assert np.isfinite(search.cv_results_["mean_test_dp"]).all()


def test_routing_off_unit_ids_and_step_prefix():
    X, y, units = _data()
    n_units = len(np.unique(units))
    search = _quiet_fit(_search(), X, y, unit_ids=units)
    assert search.n_units_ == search.best_estimator_.n_units_ == n_units
    pipe = Pipeline([("scale", FunctionTransformer()), ("clf", DPSGDClassifier(**FAST))])
    search = _quiet_fit(_search(pipe, {"clf__learning_rate": [0.2, 1.0]}), X, y,
                        clf__unit_ids=units)
    assert search.best_estimator_[-1].n_units_ == n_units
    assert search.privacy_report_.privacy_unit == UNIT


@pytest.mark.parametrize("column", ["person", 1])
def test_routing_off_the_candidates_unit_column(column):
    X, y, units = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame.insert(1, "person", units)
    data = frame if isinstance(column, str) else frame.to_numpy()
    search = _quiet_fit(_search(DPSGDClassifier(unit_column=column, **FAST)), data, y)
    assert search.n_units_ == search.best_estimator_.n_units_ == len(np.unique(units))
    assert search.privacy_report_.privacy_unit == UNIT
    assert search.best_estimator_.n_features_in_ == 3
    assert search.predict(data).shape == (len(y),)


# --------------------------------------------------------------- errors
class _PerRecordClassifier(DPSGDClassifier):
    """A private classifier whose guarantee is per record only: it rejects
    unit ids, as an estimator without unit support does."""

    __skdp_private__ = True

    def fit(self, X, y, *, unit_ids=None, **params):
        if unit_ids is not None:
            raise UnitPrivacyNotAvailableError(
                f"{type(self).__name__}'s guarantee is per record")
        return super().fit(X, y, **params)


def test_candidates_that_cannot_bound_units_say_so():
    X, y, units = _data()
    with pytest.raises(UnitPrivacyNotAvailableError, match="candidate.*_PerRecordClassifier"):
        _quiet_fit(_search(_PerRecordClassifier(**FAST)), X, y, unit_ids=units)
    pipe = Pipeline([("scale", FunctionTransformer()), ("clf", _PerRecordClassifier(**FAST))])
    grid = {"clf__learning_rate": [0.2, 1.0]}
    with (sklearn.config_context(enable_metadata_routing=True),
          pytest.raises(UnitPrivacyNotAvailableError, match="_PerRecordClassifier")):
        _quiet_fit(_search(pipe, grid), X, y, unit_ids=units)
    # routing off, ids for the classifier only: the scaler is fitted per record
    pipe = Pipeline([("scale", DPStandardScaler(bounds=(-5, 5))),
                     ("clf", DPSGDClassifier(**FAST))])
    with pytest.raises(UnitPrivacyNotAvailableError, match="'scale'.*per record"):
        _quiet_fit(_search(pipe, grid), X, y, clf__unit_ids=units)


def test_clear_errors_about_unit_ids():
    X, y, units = _data()
    with pytest.raises(ValueError, match="unit_ids"):
        _search().fit(X, y, unit_ids=units[:-1])
    pipe = Pipeline([("scale", FunctionTransformer()),
                     ("clf", DPSGDClassifier(unit_column=0, **FAST))])
    with pytest.raises(ValueError, match="clf__unit_ids"):
        _search(pipe, {"clf__learning_rate": [0.2]}).fit(X, y)
    with pytest.raises(ValueError, match="unit_column"):
        _search(grid={"unit_column": [0, 1]}).fit(X, y)
    both = Pipeline([("a", DPSGDClassifier(**FAST))])
    with pytest.raises(ValueError, match="different unit ids"):
        _search(both, {"a__learning_rate": [0.2]}).fit(
            X, y, a__unit_ids=units, unit_ids=units[::-1])
    with pytest.raises(ValueError, match="max_records_per_unit"):
        _search(max_records_per_unit=0).fit(X, y, unit_ids=units)
