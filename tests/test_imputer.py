"""Private imputation: skdp.preprocessing.DPSimpleImputer."""

import math
import pickle
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPSGDClassifier
from skdp.exceptions import PrivacyLeakWarning
from skdp.preprocessing import DPSimpleImputer, DPStandardScaler
from skdp.preprocessing._imputer import (
    category_counts,
    count_releases,
    mean_releases,
    mean_statistics,
)
from skdp.preprocessing._ranges import histogram_release, range_histogram
from skdp.privacy import make_accountant
from skdp.model_selection import spent

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------ sklearn checks
CHECKED = [
    # the closest to the default that fits without public knowledge: the
    # default strategy="mean" needs bounds (see test_default_needs_bounds)
    DPSimpleImputer(strategy="constant"),
    DPSimpleImputer(strategy="constant", fill_value=-1.0, add_indicator=True),
    DPSimpleImputer(bounds=(-10, 10), epsilon=10.0, random_state=0),
    DPSimpleImputer(data_range=(-10, 10), epsilon=10.0, random_state=0),
    DPSimpleImputer(strategy="median", bounds=(-10, 10), epsilon=10.0, random_state=0),
    DPSimpleImputer(strategy="most_frequent", bounds=(-10, 10), epsilon=10.0, random_state=0,
                    add_indicator=True),
    DPSimpleImputer(missing_values=-1.0, bounds=(-10, 10), epsilon=10.0, random_state=0),
]


@parametrize_with_checks(CHECKED, expected_failed_checks=lambda estimator: {})
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_default_needs_bounds():
    """The default strategy ("mean") learns from the data: without public
    bounds there is nothing to clip to, and a clear error says what to give."""
    X = np.array([[1.0, np.nan], [2.0, 3.0]])
    for strategy in ("mean", "median", "most_frequent"):
        with pytest.raises(ValueError, match="bounds.*data_range.*constant"):
            DPSimpleImputer(strategy=strategy).fit(X)


# ---------------------------------------------------------- sensitivities
def _with_missing(data, n_rows, n_features, low=-1e6, high=1e6):
    values = data.draw(arrays(np.float64, (n_rows, n_features), elements=st.floats(low, high)))
    missing = data.draw(arrays(np.bool_, (n_rows, n_features)))
    values[missing] = np.nan
    return values


def _l2(a, b):
    return float(np.linalg.norm(np.ravel(a) - np.ravel(b)))


@PROPERTY
@given(data=st.data(), n_features=st.integers(1, 6), n_rows=st.integers(0, 25))
def test_mean_sensitivity_add_remove(data, n_features, n_rows):
    """Adding one record (any values, any missing pattern, |x| up to 1e300)
    moves the clipped sums and the counts of observed values by at most the
    stated l2 sensitivities, over all features together."""
    X = _with_missing(data, n_rows, n_features)
    record = _with_missing(data, 1, n_features, -1e300, 1e300)
    lower = np.asarray(data.draw(arrays(np.float64, n_features, elements=st.floats(-100, 100))))
    upper = lower + data.draw(arrays(np.float64, n_features, elements=st.floats(0.01, 1e4)))
    bigger = np.vstack([X, record])
    before = mean_statistics(X, ~np.isnan(X), lower, upper)
    after = mean_statistics(bigger, ~np.isnan(bigger), lower, upper)
    releases = {r.name: r for r in mean_releases(n_features)}
    assert set(before) == set(releases)
    for name, release in releases.items():
        assert _l2(before[name], after[name]) <= release.sensitivity * (1 + 1e-9)
    # each feature's sum moves by at most 1 (in units of its half-width)
    assert (np.abs(after["sum"] - before["sum"]) <= 1 + 1e-12).all()
    assert np.isfinite(after["sum"]).all()


@PROPERTY
@given(data=st.data(), n_features=st.integers(1, 5), n_rows=st.integers(0, 25),
       n_bins=st.integers(2, 40))
def test_histogram_of_observed_values_sensitivity(data, n_features, n_rows, n_bins):
    X = _with_missing(data, n_rows, n_features)
    record = _with_missing(data, 1, n_features, -1e300, 1e300)
    lower, upper = np.full(n_features, -50.0), np.full(n_features, 70.0)
    bigger = np.vstack([X, record])
    before = range_histogram(np.nan_to_num(X), lower, upper, n_bins, observed=~np.isnan(X))
    after = range_histogram(np.nan_to_num(bigger), lower, upper, n_bins,
                            observed=~np.isnan(bigger))
    # one count moves by one in each feature the record has a value for
    assert np.array_equal(np.abs(after - before).sum(axis=1), (~np.isnan(record[0])) * 1.0)
    assert before.sum() == (~np.isnan(X)).sum()
    assert _l2(before, after) <= histogram_release(n_features).sensitivity * (1 + 1e-9)


@PROPERTY
@given(data=st.data(), n_features=st.integers(1, 4), n_rows=st.integers(0, 25))
def test_category_count_sensitivity(data, n_features, n_rows):
    values = st.sampled_from([0.0, 1.0, 2.0, 7.5, np.nan, 1e300])
    X = np.array(data.draw(st.lists(st.lists(values, min_size=n_features, max_size=n_features),
                                    min_size=n_rows, max_size=n_rows)),
                 dtype=np.float64).reshape(n_rows, n_features)
    record = np.array([data.draw(st.lists(values, min_size=n_features, max_size=n_features))])
    categories = [np.array([0.0, 1.0, 7.5])] * n_features
    bigger = np.vstack([X, record])
    before = category_counts(X, ~np.isnan(X), categories)
    after = category_counts(bigger, ~np.isnan(bigger), categories)
    (release,) = count_releases(n_features)
    assert _l2(before, after) <= release.sensitivity * (1 + 1e-9)
    assert np.abs(after - before).max(initial=0) <= 1


# ------------------------------------------------------------- accounting
def _data(n=3000, seed=0, share_missing=0.2):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(40, 10, n), rng.exponential(5, n), rng.uniform(-3, 7, n)])
    X[rng.random(X.shape) < share_missing] = np.nan
    return X


PRIVATE = [
    DPSimpleImputer(bounds=([0, 0, -5], [100, 50, 10]), epsilon=0.5, random_state=0),
    DPSimpleImputer(data_range=(-100, 100), epsilon=0.5, random_state=0),
    DPSimpleImputer(strategy="median", bounds=([0, 0, -5], [100, 50, 10]), epsilon=0.5,
                    random_state=0),
    DPSimpleImputer(strategy="most_frequent", bounds=(-100, 100), epsilon=0.5, random_state=0),
    DPSimpleImputer(strategy="most_frequent", categories=[[10, 40, 70], [0, 5], [0, 1]],
                    epsilon=0.5, random_state=0),
]


@pytest.mark.parametrize("imputer", PRIVATE)
def test_epsilon_from_dp_event_with_fresh_accountant(imputer):
    est = clone(imputer).fit(_data())
    fresh = make_accountant("pld").compose(est.dp_event_).get_epsilon(est.delta_)
    assert est.epsilon_ == pytest.approx(fresh, rel=1e-9)
    assert 0.99 * 0.5 <= est.epsilon_ <= 0.5
    assert est.delta_ == est.delta
    assert est.privacy_report_.epsilon == est.epsilon_


def test_constant_strategy_costs_nothing_and_reads_no_values():
    X_far = np.array([[1e300, np.nan], [-2e6, 5.0], [np.nan, np.nan]])
    X_near = np.array([[0.5, 0.5], [0.2, 0.1], [0.0, 1.0]])
    fits = [DPSimpleImputer(strategy="constant", fill_value=-1.5).fit(X) for X in (X_far, X_near)]
    for est in fits:
        assert est.epsilon_ == 0.0 and est.delta_ == 0.0
        assert est.dp_event_ == dpa.NoOpDpEvent()
        assert est.statistics_.tolist() == [-1.5, -1.5]
    assert fits[0].transform(X_far).tolist() == [[1e300, -1.5], [-2e6, 5.0], [-1.5, -1.5]]
    assert DPSimpleImputer(strategy="constant").fit(X_far).statistics_.tolist() == [0.0, 0.0]
    assert not DPSimpleImputer(strategy="constant")._skdp_reads_data()
    assert DPSimpleImputer(bounds=(0, 1))._skdp_reads_data()


def test_noise_scale_matches_report():
    """The mean's spread over seeds is the one the report's noise predicts."""
    X = np.tile([[-1.0], [1.0], [np.nan]], (400, 1))  # observed mean 0, centred
    means = [DPSimpleImputer(bounds=(-2, 2), epsilon=1.0, random_state=s).fit(X).statistics_[0]
             for s in range(300)]
    report = DPSimpleImputer(bounds=(-2, 2), epsilon=1.0, random_state=0).fit(X).privacy_report_
    predicted = 2.0 * report.scale("sum") / 800  # half-width * sigma / n observed
    # the sample std of 300 normals is within 12 % of sigma with prob. > 0.999
    assert np.std(means) == pytest.approx(predicted, rel=0.12)
    assert abs(np.mean(means)) < 4 * predicted / np.sqrt(300)


# ---------------------------------------------------------------- utility
def test_mean_is_accurate_at_epsilon_one():
    X = _data(n=5000)
    bounds = ([0, 0, -5], [100, 50, 10])
    est = DPSimpleImputer(bounds=bounds, epsilon=1.0, random_state=0).fit(X)
    truth = np.nanmean(np.clip(X, *bounds), axis=0)
    report = est.privacy_report_
    half = (np.array(bounds[1]) - np.array(bounds[0])) / 2
    n_observed = (~np.isnan(X)).sum(axis=0)
    mean_u = (truth - (np.array(bounds[1]) + np.array(bounds[0])) / 2) / half
    predicted = half * np.hypot(report.scale("sum"), mean_u * report.scale("count")) / n_observed
    assert (np.abs(est.statistics_ - truth) <= 5 * predicted).all()
    assert (np.abs(est.statistics_ - truth) <= [0.5, 0.3, 0.1]).all()
    assert not est.fallback_.any()
    out = est.transform(X)
    assert np.isfinite(out).all()
    observed = ~np.isnan(X)
    assert np.array_equal(out[observed], X[observed])  # observed values pass unchanged
    assert np.array_equal(out[~observed], np.broadcast_to(est.statistics_, X.shape)[~observed])


def test_mean_with_private_range_is_accurate():
    """Inside a wide data_range the bounds are estimated first; the mean is
    then as accurate as the (wider) estimated bounds allow."""
    X = _data(n=5000)
    est = DPSimpleImputer(data_range=(-1000, 1000), epsilon=1.0, random_state=0).fit(X)
    lower, upper = est.bounds_
    observed = ~np.isnan(X)
    # the estimated range holds all but a few of the observed values
    inside = (X >= lower) & (X <= upper)
    assert (inside.sum(axis=0) >= 0.97 * observed.sum(axis=0)).all()
    truth = np.nanmean(np.clip(X, lower, upper), axis=0)
    report = est.privacy_report_
    half, center = (upper - lower) / 2, (upper + lower) / 2
    predicted = half * np.hypot(report.scale("sum"),
                                (truth - center) / half * report.scale("count"))
    predicted /= observed.sum(axis=0)
    assert (np.abs(est.statistics_ - truth) <= 5 * predicted).all()
    assert (np.abs(est.statistics_ - np.nanmean(X, axis=0)) <= 3.0).all()


def test_median_is_accurate_at_epsilon_one():
    X = _data(n=5000)
    bounds = ([0, 0, -5], [100, 50, 10])
    est = DPSimpleImputer(strategy="median", bounds=bounds, epsilon=1.0, random_state=0).fit(X)
    width = (np.array(bounds[1]) - np.array(bounds[0])) / est.n_bins
    assert (np.abs(est.statistics_ - np.nanmedian(X, axis=0)) <= 2 * width).all()


def test_most_frequent_categories_and_bins():
    rng = np.random.default_rng(0)
    n = 4000
    X = np.column_stack([rng.choice([1.0, 2.0, 3.0], p=[0.2, 0.7, 0.1], size=n),
                         rng.choice([0.0, 7.0, 9.5], p=[0.1, 0.3, 0.6], size=n)])
    X[rng.random(X.shape) < 0.3] = np.nan
    est = DPSimpleImputer(strategy="most_frequent", categories=[[1, 2, 3, 4], [0, 7, 9.5]],
                          epsilon=1.0, random_state=0).fit(X)
    assert est.statistics_.tolist() == [2.0, 9.5]
    est = DPSimpleImputer(strategy="most_frequent", bounds=(0, 10), n_bins=20, epsilon=1.0,
                          random_state=0).fit(X)
    # centres of the bins [2, 2.5) and [9.5, 10]
    assert est.statistics_.tolist() == [2.25, 9.75]


def test_missing_values_as_a_number():
    X = np.array([[1.0, -1.0], [3.0, 4.0], [-1.0, 6.0]] * 500)
    est = DPSimpleImputer(missing_values=-1.0, bounds=(0, 10), epsilon=None).fit(X)
    assert np.allclose(est.statistics_, [2.0, 5.0])
    assert np.array_equal(est.transform([[-1.0, -1.0]]), [est.statistics_])
    assert est.transform([[-1.0, 7.0]])[0, 1] == 7.0
    with pytest.raises(ValueError, match="NaN"):
        est.transform([[np.nan, 1.0]])


# ------------------------------------------------------- extreme records
@pytest.mark.parametrize("strategy, kwargs", [
    ("mean", {"bounds": (0, 10)}),
    ("mean", {"data_range": (-100, 100)}),
    ("median", {"bounds": (0, 10)}),
    ("most_frequent", {"bounds": (0, 10)}),
    ("most_frequent", {"categories": [[1, 2], [1, 2], [1, 2]]}),
])
@pytest.mark.parametrize("epsilon", [1.0, None])
def test_extreme_record_and_empty_feature(strategy, kwargs, epsilon):
    """One record at +-1e300 or the float maximum and a feature that is
    entirely missing: no NaN, no inf, no exception, no warning."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 10, 200), rng.integers(0, 10, 200),
                         np.full(200, np.nan)]).astype(np.float64)
    X[0, 0], X[1, 1] = 1e300, -np.finfo(np.float64).max
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = DPSimpleImputer(strategy=strategy, epsilon=epsilon, random_state=0,
                              **kwargs).fit(X)
        out = est.transform(X)
    assert np.isfinite(est.statistics_).all()
    assert np.isfinite(out).all()
    if "categories" in kwargs:
        assert set(est.statistics_) <= {1.0, 2.0}
    else:
        assert (est.bounds_[0] <= est.statistics_).all()
        assert (est.statistics_ <= est.bounds_[1]).all()
    if epsilon is None:  # the exact count of the empty feature is 0: fallback
        assert est.fallback_.tolist() == [False, False, True]
        middle = 1.0 if "categories" in kwargs else est.bounds_.mean(axis=0)[2]
        assert est.statistics_[2] == middle


def test_fallback_is_fill_value_when_given():
    X = np.column_stack([np.arange(100.0), np.full(100, np.nan)])
    est = DPSimpleImputer(bounds=(0, 100), fill_value=-7.0, epsilon=None).fit(X)
    assert est.statistics_.tolist() == [49.5, -7.0]
    assert est.fallback_.tolist() == [False, True]


def test_fallback_decided_from_noisy_count():
    """A feature with a single observed value falls back to the middle of its
    bounds: its noisy count (1 plus noise of std ~10) stays below the
    threshold, so its one value is never averaged in the clear."""
    X = np.column_stack([np.arange(1000.0) % 10, np.full(1000, np.nan)])
    X[0, 1] = 3.0
    est = DPSimpleImputer(bounds=(0, 10), epsilon=1.0, random_state=3).fit(X)
    assert est.fallback_.tolist() == [False, True]
    assert est.statistics_[1] == 5.0


# ------------------------------------------------------------ workflows
def test_column_names_kept_through_pipeline_with_dict_bounds():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.uniform(17, 90, 2000), "hours": rng.uniform(1, 99, 2000)})
    frame.loc[rng.random(2000) < 0.2, "age"] = np.nan
    bounds = {"age": (17, 90), "hours": (1, 99)}
    pipe = Pipeline([
        ("impute", DPSimpleImputer(bounds=bounds, epsilon=0.5, random_state=0)),
        ("scale", DPStandardScaler(bounds=bounds, epsilon=0.5, random_state=0)),
    ]).set_output(transform="pandas")
    out = pipe.fit_transform(frame)
    assert list(out.columns) == ["age", "hours"]
    assert list(pipe["scale"].feature_names_in_) == ["age", "hours"]
    assert np.isfinite(out.to_numpy()).all()
    imputer = DPSimpleImputer(strategy="constant", add_indicator=True).set_output(
        transform="pandas")
    out = imputer.fit_transform(frame)
    assert list(out.columns) == ["age", "hours", "missingindicator_age",
                                 "missingindicator_hours"]
    assert out["missingindicator_age"].tolist() == frame["age"].isna().astype(float).tolist()


def test_spent_composes_the_imputer_event():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, size=(1000, 2))
    y = (X[:, 0] > 5).astype(int)
    X[rng.random(X.shape) < 0.1] = np.nan
    imputer = DPSimpleImputer(bounds=(0, 10), epsilon=0.3, delta=1e-6, random_state=0)
    clf = DPSGDClassifier(epsilon=1.0, delta=1e-5, batch_size=100, max_epochs=2, random_state=0)
    pipe = Pipeline([("impute", imputer), ("clf", clf)]).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        total = spent(pipe)
    events = dpa.ComposedDpEvent([pipe["impute"].dp_event_, pipe["clf"].dp_event_])
    fresh = make_accountant("pld").compose(events).get_epsilon(1e-6 + 1e-5)
    assert total.epsilon == pytest.approx(fresh, rel=1e-9)
    assert [name for name, _, _ in total.steps] == ["impute", "clf"]
    free = Pipeline([("impute", DPSimpleImputer(strategy="constant")), ("clf", clone(clf))])
    free.fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        assert spent(free).epsilon == pytest.approx(free["clf"].epsilon_, rel=1e-9)


def test_epsilon_none_is_a_non_private_reference():
    X = _data(n=500)
    est = DPSimpleImputer(bounds=(-100, 100), epsilon=None).fit(X)
    assert est.epsilon_ == math.inf and est.dp_event_ is None
    assert np.allclose(est.statistics_, np.nanmean(X, axis=0))


def test_random_state_and_pickle():
    X = _data(n=500)
    first = DPSimpleImputer(bounds=(-100, 100), random_state=7).fit(X)
    assert np.array_equal(first.statistics_, clone(first).fit(X).statistics_)
    other = DPSimpleImputer(bounds=(-100, 100), random_state=8).fit(X)
    assert not np.array_equal(first.statistics_, other.statistics_)
    again = pickle.loads(pickle.dumps(first))
    assert again.privacy_report_ == first.privacy_report_
    assert np.array_equal(again.transform(X), first.transform(X))


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("estimator, X, match", [
    (DPSimpleImputer(bounds=(1, 1)), np.ones((3, 2)), "lower < upper"),
    (DPSimpleImputer(bounds={"a": (0, 1)}), np.ones((3, 1)), "no column names"),
    (DPSimpleImputer(bounds=(0, 1), data_range=(0, 2)), np.ones((3, 1)), "not both"),
    (DPSimpleImputer(strategy="mean", categories=[[0, 1]], bounds=(0, 1)), np.ones((3, 1)),
     "categories.*most_frequent"),
    (DPSimpleImputer(strategy="most_frequent", categories=[[0, 1]]), np.ones((3, 2)),
     "one list of categories per feature"),
    (DPSimpleImputer(strategy="most_frequent", categories=[[]]), np.ones((3, 1)),
     "non-empty"),
    (DPSimpleImputer(strategy="most_frequent", categories=[[0, np.inf]]), np.ones((3, 1)),
     "finite"),
    (DPSimpleImputer(strategy="constant", fill_value=np.nan), np.ones((3, 1)), "fill_value"),
    (DPSimpleImputer(strategy="constant"), np.array([[np.inf]]), "infinity"),
    (DPSimpleImputer(epsilon=-1.0, bounds=(0, 1)), np.ones((3, 1)), "epsilon"),
    (DPSimpleImputer(strategy="bogus"), np.ones((3, 1)), "strategy"),
])
def test_bad_input_errors(estimator, X, match):
    with pytest.raises(ValueError, match=match):
        estimator.fit(X)
