"""Private preprocessing: skdp.preprocessing scalers and encoder."""

import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp.exceptions import PrivacyLeakWarning
from skdp.preprocessing import DPMinMaxScaler, DPOneHotEncoder, DPStandardScaler
from skdp.preprocessing import _encoder, _minmax_scaler, _ranges
from skdp.preprocessing._encoder import column_codes, counts_release, present_counts
from skdp.preprocessing._ranges import histogram_release, range_histogram
from skdp.preprocessing._standard_scaler import moment_releases, moment_statistics
from skdp.privacy import make_accountant

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------ sklearn checks
CHECKED = [
    # default constructors (they warn PrivacyLeakWarning: no public bounds)
    DPStandardScaler(),
    DPMinMaxScaler(),
    DPOneHotEncoder(),
    DPStandardScaler(bounds=(-10, 10), epsilon=10.0, random_state=0),
    DPStandardScaler(data_range=(-10, 10), epsilon=10.0, random_state=0),
    DPMinMaxScaler(bounds=(-10, 10)),
    DPMinMaxScaler(data_range=(-10, 10), epsilon=10.0, random_state=0),
    DPOneHotEncoder(epsilon=10.0, random_state=0),
]


@parametrize_with_checks(CHECKED, expected_failed_checks=lambda estimator: {})
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ---------------------------------------------------------- sensitivities
def _matrix(n_features):
    return arrays(np.float64, st.tuples(st.integers(1, 30), st.just(n_features)),
                  elements=st.floats(-1e4, 1e4))


def _l2(a, b):
    return float(np.linalg.norm(np.ravel(a) - np.ravel(b)))


@PROPERTY
@given(data=st.data(), n_features=st.integers(1, 5))
def test_moment_sensitivity_add_remove(data, n_features):
    X = data.draw(_matrix(n_features))
    record = data.draw(arrays(np.float64, (1, n_features), elements=st.floats(-1e6, 1e6)))
    lower = np.full(n_features, -3.0)
    upper = lower + data.draw(st.floats(0.1, 100.0))
    before = moment_statistics(X, lower, upper)
    after = moment_statistics(np.vstack([X, record]), lower, upper)
    for release in moment_releases(n_features, with_histogram=True):
        if release.name == "histogram":
            continue
        assert _l2(before[release.name], after[release.name]) <= release.sensitivity * (1 + 1e-9)


@PROPERTY
@given(data=st.data(), n_features=st.integers(1, 5), n_bins=st.integers(2, 40))
def test_histogram_sensitivity_add_remove(data, n_features, n_bins):
    X = data.draw(_matrix(n_features))
    record = data.draw(arrays(np.float64, (1, n_features), elements=st.floats(-1e6, 1e6)))
    lower, upper = np.full(n_features, -50.0), np.full(n_features, 70.0)
    before = range_histogram(X, lower, upper, n_bins)
    after = range_histogram(np.vstack([X, record]), lower, upper, n_bins)
    # one count per feature moves, by exactly one
    assert np.array_equal(np.abs(after - before).sum(axis=1), np.ones(n_features))
    assert _l2(before, after) <= histogram_release(n_features).sensitivity * (1 + 1e-9)


@PROPERTY
@given(data=st.data(), n_features=st.integers(1, 4))
def test_category_count_sensitivity_add_remove(data, n_features):
    values = st.sampled_from(["a", "b", "c", "d", None])
    X = np.array(data.draw(st.lists(st.lists(values, min_size=n_features, max_size=n_features),
                                    min_size=1, max_size=30)), dtype=object)
    record = np.array([data.draw(st.lists(values, min_size=n_features, max_size=n_features))],
                      dtype=object)
    bigger = np.vstack([X, record])
    candidates = np.array(["a", "b", "c"], dtype=object)
    before = np.concatenate([np.bincount(c[c >= 0], minlength=3)
                             for c in (column_codes(X[:, j], candidates) for j in range(n_features))])
    after = np.concatenate([np.bincount(c[c >= 0], minlength=3)
                            for c in (column_codes(bigger[:, j], candidates)
                                      for j in range(n_features))])
    assert _l2(before, after) <= counts_release(n_features).sensitivity * (1 + 1e-9)
    # without candidates: the record raises at most one present count per
    # feature by one, or adds one new category of count 1
    for j in range(n_features):
        old = dict(zip(*present_counts(X[:, j])))
        new = dict(zip(*present_counts(bigger[:, j])))
        changed = {k: new[k] - old.get(k, 0.0) for k in new if new[k] != old.get(k, 0.0)}
        assert len(changed) <= 1 and all(v == 1.0 for v in changed.values())
        assert all(new[k] == 1.0 for k in set(new) - set(old))


# ---------------------------------------------------------- public bounds
def test_public_bounds_never_read_the_data(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the range histogram must not be computed")

    monkeypatch.setattr(_minmax_scaler, "range_histogram", fail)
    X_far = np.array([[1e6, -1e6], [2e6, 5e5], [-3e6, 0.0]])
    X_near = np.array([[0.5, 0.5], [0.2, 0.1]])
    fitted = [DPMinMaxScaler(bounds=([0, -1], [1, 1])).fit(X) for X in (X_far, X_near)]
    for attribute in ("data_min_", "data_max_", "scale_", "min_"):
        assert np.array_equal(getattr(fitted[0], attribute), getattr(fitted[1], attribute))
    out = fitted[0].transform(X_far)
    assert out.min() >= 0 and out.max() <= 1  # clipped, not widened
    assert fitted[0].epsilon_ == 0.0 and fitted[0].delta_ == 0.0
    assert type(fitted[0].dp_event_).__name__ == "NoOpDpEvent"

    scaler = DPStandardScaler(bounds=(0, 10), epsilon=1.0, random_state=0).fit(X_far)
    assert np.array_equal(scaler.bounds_, [[0, 0], [10, 10]])
    assert (scaler.mean_ >= 0).all() and (scaler.mean_ <= 10).all()


def test_public_categories_read_nothing():
    X = np.array([["a"], ["zzz"], ["b"]], dtype=object)
    enc = DPOneHotEncoder(categories=[["b", "a", "c"]]).fit(X)
    assert enc.categories_[0].tolist() == ["b", "a", "c"]
    assert enc.epsilon_ == 0.0 and type(enc.dp_event_).__name__ == "NoOpDpEvent"
    assert enc.transform(X).tolist() == [[0, 1, 0], [0, 0, 0], [1, 0, 0]]


# ------------------------------------------------------------- accounting
def _private_fits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    C = rng.choice(["a", "b", "c"], size=(500, 2)).astype(object)
    return [
        (DPStandardScaler(bounds=(-4, 4), epsilon=0.5, random_state=0), X),
        (DPStandardScaler(data_range=(-8, 8), epsilon=0.5, random_state=0), X),
        (DPMinMaxScaler(data_range=(-8, 8), epsilon=0.5, random_state=0), X),
        (DPOneHotEncoder(candidate_categories=[["a", "b", "c", "d"]] * 2, epsilon=0.5,
                         random_state=0), C),
        (DPOneHotEncoder(epsilon=0.5, random_state=0), C),
    ]


@pytest.mark.parametrize("estimator, X", _private_fits())
def test_epsilon_from_dp_event_with_fresh_accountant(estimator, X):
    est = estimator.fit(X)
    report = est.privacy_report_
    fresh = make_accountant("pld").compose(est.dp_event_).get_epsilon(report.delta)
    assert est.epsilon_ == pytest.approx(fresh, rel=1e-9)
    assert 0.99 * 0.5 <= est.epsilon_ <= 0.5
    assert est.delta_ <= est.delta * (1 + 1e-12)
    # the stability part of delta (only without candidates)
    expected = report.delta + math.exp(est.epsilon_) * getattr(est, "selection_delta_", 0.0)
    assert est.delta_ == pytest.approx(expected)


def test_noise_scale_matches_report():
    X = np.array([["a"]] * 300 + [["b"]] * 100, dtype=object)
    counts = []
    for seed in range(300):
        enc = DPOneHotEncoder(candidate_categories=[["a", "b", "c"]], epsilon=1.0,
                              random_state=seed).fit(X)
        counts.append(enc.noisy_counts_[0])
    counts = np.array(counts)
    std = enc.privacy_report_.scale("counts")
    # the sample std of 300 normals is within 12 % of sigma with prob. > 0.999
    assert np.allclose(counts.std(axis=0), std, rtol=0.12)
    assert np.allclose(counts.mean(axis=0), [300, 100, 0], atol=4 * std / np.sqrt(300))


def test_scaler_mean_noise_matches_report():
    # symmetric data about the centre of the bounds: the count's noise drops out
    X = np.tile([[-1.0], [1.0]], (500, 1))
    means = [DPStandardScaler(bounds=(-2, 2), epsilon=1.0, random_state=s).fit(X).mean_[0]
             for s in range(300)]
    report = DPStandardScaler(bounds=(-2, 2), epsilon=1.0, random_state=0).fit(X).privacy_report_
    predicted = 2.0 * report.scale("sum") / len(X)  # half-width * sigma / n
    assert np.std(means) == pytest.approx(predicted, rel=0.12)


# ------------------------------------------------------------- randomness
def test_random_state_int_is_reproducible():
    X = np.random.default_rng(1).normal(size=(200, 2))
    first = DPStandardScaler(bounds=(-3, 3), random_state=7).fit(X)
    second = clone(first).fit(X)
    assert np.array_equal(first.mean_, second.mean_)
    assert not np.array_equal(first.mean_, DPStandardScaler(bounds=(-3, 3), random_state=8)
                              .fit(X).mean_)


def test_random_state_none_is_not_replayable_by_global_seeds():
    X = np.random.default_rng(1).normal(size=(200, 2))
    fits = []
    for _ in range(2):
        np.random.seed(0)
        torch.manual_seed(0)
        fits.append(DPStandardScaler(bounds=(-3, 3), random_state=None).fit(X).mean_)
    assert not np.array_equal(*fits)


# --------------------------------------------------------------- behaviour
def test_standard_scaler_is_accurate_with_enough_data():
    X = np.random.default_rng(0).normal([40, 5], [10, 2], size=(20_000, 2))
    scaler = DPStandardScaler(bounds=([0, -5], [90, 15]), epsilon=1.0, random_state=0).fit(X)
    assert np.allclose(scaler.mean_, [40, 5], atol=0.3)
    assert np.allclose(scaler.scale_, [10, 2], rtol=0.05)
    Xt = scaler.transform(X)
    assert np.allclose(scaler.inverse_transform(Xt), np.clip(X, [0, -5], [90, 15]))


def test_private_range_is_wide_side_and_inside_public_range():
    X = np.random.default_rng(0).uniform(20, 60, size=(5000, 1))
    scaler = DPMinMaxScaler(data_range=(0, 100), epsilon=1.0, random_state=0).fit(X)
    assert 0 <= scaler.data_min_[0] <= 21 and 59 <= scaler.data_max_[0] <= 100


def test_no_bounds_warns_and_reports_infinite_epsilon():
    X = np.random.default_rng(0).normal(size=(50, 2))
    for est in (DPStandardScaler(random_state=0), DPMinMaxScaler()):
        with pytest.warns(PrivacyLeakWarning, match="read from the data|min and max"):
            est.fit(X)
        assert est.epsilon_ == math.inf
        assert "NonPrivateDpEvent" in repr(est.dp_event_)


def test_epsilon_none_is_non_private_reference():
    X = np.random.default_rng(0).normal(size=(100, 2))
    scaler = DPStandardScaler(bounds=(-5, 5), epsilon=None).fit(X)
    assert scaler.epsilon_ == math.inf and scaler.dp_event_ is None
    assert np.allclose(scaler.mean_, np.clip(X, -5, 5).mean(axis=0))


def test_encoder_candidates_keep_frequent_only():
    rng = np.random.default_rng(0)
    X = rng.choice(["a", "b", "rare"], p=[0.6, 0.39, 0.01], size=(5000, 1)).astype(object)
    enc = DPOneHotEncoder(candidate_categories=[["a", "b", "rare", "never"]],
                          min_frequency=0.05, epsilon=1.0, random_state=0).fit(X)
    assert enc.categories_[0].tolist() == ["a", "b"]
    out = enc.transform(np.array([["rare"], ["a"], ["unseen"]], dtype=object))
    assert out.tolist() == [[0, 0], [1, 0], [0, 0]]


def test_encoder_stable_histogram_hides_singletons():
    X = np.array([["common"]] * 3000 + [[f"id{i}"] for i in range(200)], dtype=object)
    enc = DPOneHotEncoder(epsilon=1.0, random_state=0).fit(X)
    assert enc.categories_[0].tolist() == ["common"]
    assert enc.noisy_counts_ is None
    assert 0 < enc.selection_delta_ < enc.delta


def test_encoder_missing_values_and_mixed_types():
    X = np.array([["a", 1], [None, 2], [np.nan, 1], ["a", 2.0]], dtype=object)
    enc = DPOneHotEncoder(epsilon=None).fit(X)
    assert enc.categories_[0].tolist() == ["a"]
    assert enc.transform(X)[:, 0].tolist() == [1, 0, 0, 1]
    # mixed public categories keep their types: 1 is not "1"
    enc = DPOneHotEncoder(categories=[["a", 1, 2], [1, 2]]).fit(X)
    assert enc.transform(X).tolist() == [[1, 0, 0, 1, 0], [0, 0, 0, 0, 1],
                                         [0, 0, 0, 1, 0], [1, 0, 0, 0, 1]]


def test_encoder_inverse_transform_round_trip():
    X = np.array([["a", "x"], ["b", "y"], ["a", "z"], ["c", "x"]], dtype=object)
    enc = DPOneHotEncoder(categories=[["a", "b"], ["x", "y"]]).fit(X)
    back = enc.inverse_transform(enc.transform(X))
    # values outside categories_ (unknown, infrequent) are all zeros: None,
    # as scikit-learn's OneHotEncoder(handle_unknown="ignore") inverts them
    assert back.dtype == object
    assert back.tolist() == [["a", "x"], ["b", "y"], ["a", None], [None, "x"]]
    known = X[:2]
    assert np.array_equal(enc.inverse_transform(enc.transform(known)), known)
    # as scikit-learn does: no unknowns keep the categories' dtype
    assert enc.inverse_transform(enc.transform(known)).dtype.kind == "U"


def test_encoder_inverse_transform_numbers_and_empty_features():
    X = np.array([[1, 5], [2, 5], [3, 6]])
    enc = DPOneHotEncoder(categories=[[1, 2, 3], []]).fit(X)
    Xt = enc.transform(X)
    assert Xt.shape == (3, 3)
    back = enc.inverse_transform(Xt)
    assert back.tolist() == [[1, None], [2, None], [3, None]]
    # a private selection: the round trip keeps the frequent categories
    rng = np.random.default_rng(0)
    C = rng.choice(["a", "b", "rare"], p=[0.6, 0.39, 0.01], size=(5000, 1)).astype(object)
    enc = DPOneHotEncoder(candidate_categories=[["a", "b", "rare"]], min_frequency=0.05,
                          epsilon=1.0, random_state=0).fit(C)
    back = enc.inverse_transform(enc.transform(C))
    assert np.array_equal(back[C != "rare"], C[C != "rare"])
    assert all(v is None for v in back[C == "rare"])
    with pytest.raises(ValueError, match="Expected 2 columns, got 3"):
        enc.inverse_transform(np.zeros((1, 3)))


@PROPERTY
@given(std=st.floats(0.1, 1e4), n_features=st.integers(1, 20), delta=st.floats(1e-12, 1e-3))
def test_stability_threshold_hides_new_categories(std, n_features, delta):
    tau = _encoder.stability_threshold(std, n_features, delta)
    # a new category has count 1: it passes with probability sf((tau - 1) / std)
    assert n_features * stats.norm.sf((tau - 1) / std) <= delta * (1 + 1e-6)


@PROPERTY
@given(noisy=arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(2, 30)),
                    elements=st.floats(-1e3, 1e3)),
       quantile=st.floats(0, 0.49))
def test_range_from_noisy_histogram_is_a_valid_range(noisy, quantile):
    lower, upper = np.full(noisy.shape[0], -2.0), np.full(noisy.shape[0], 5.0)
    low, high = _ranges.range_from_histogram(noisy, lower, upper, quantile)
    assert (lower <= low).all() and (low < high).all() and (high <= upper + 1e-12).all()


def test_pickle_keeps_privacy_report():
    X = np.random.default_rng(0).normal(size=(50, 2))
    scaler = DPStandardScaler(bounds=(-3, 3), random_state=0).fit(X)
    again = pickle.loads(pickle.dumps(scaler))
    assert again.privacy_report_ == scaler.privacy_report_
    assert np.array_equal(again.transform(X), scaler.transform(X))


def test_column_transformer_with_pandas_output():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "age": rng.uniform(17, 90, 300),
        "hours": rng.uniform(1, 99, 300),
        "color": pd.Categorical(rng.choice(["red", "blue"], 300)),
    })
    pre = ColumnTransformer([
        ("num", DPStandardScaler(bounds={"age": (17, 90), "hours": (1, 99)}, random_state=0),
         ["age", "hours"]),
        ("cat", DPOneHotEncoder(categories=[["red", "blue", "green"]]), ["color"]),
    ]).set_output(transform="pandas")
    out = pre.fit_transform(frame)
    assert list(out.columns) == ["num__age", "num__hours", "cat__color_red",
                                 "cat__color_blue", "cat__color_green"]
    pipe = make_pipeline(DPMinMaxScaler(bounds=(0, 100))).set_output(transform="pandas")
    assert list(pipe.fit_transform(frame[["age"]]).columns) == ["age"]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("estimator, X, match", [
    (DPStandardScaler(bounds=(1, 1)), np.ones((3, 2)), "lower < upper"),
    (DPStandardScaler(bounds=([0, 0, 0], [1, 1, 1])), np.ones((3, 2)), "one .lower, upper. pair"),
    (DPStandardScaler(bounds=(0, np.inf)), np.ones((3, 2)), "finite"),
    (DPStandardScaler(bounds={"a": (0, 1)}), np.ones((3, 1)), "no column names"),
    (DPStandardScaler(bounds=(0, 1), data_range=(0, 2)), np.ones((3, 1)), "not both"),
    (DPMinMaxScaler(bounds=(0, 1), data_range=(0, 2)), np.ones((3, 1)), "not both"),
    (DPMinMaxScaler(feature_range=(1, 0), bounds=(0, 1)), np.ones((3, 1)), "feature_range"),
    (DPStandardScaler(bounds=(0, 1)), np.array([[np.nan]]), "NaN"),
    (DPStandardScaler(epsilon=-1.0, bounds=(0, 1)), np.ones((3, 1)), "epsilon"),
    (DPOneHotEncoder(categories=[["a"]]), np.ones((3, 2)), "one list of categories"),
    (DPOneHotEncoder(categories=[["a"]], candidate_categories=[["a"]]), np.ones((3, 1)),
     "candidate_categories"),
    (DPOneHotEncoder(min_frequency=1.5), np.ones((3, 1)), "min_frequency"),
])
def test_bad_input_errors(estimator, X, match):
    with pytest.raises(ValueError, match=match):
        estimator.fit(X)


def test_dict_bounds_must_cover_every_feature():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    with pytest.raises(ValueError, match=r"missing \['b'\], unknown \['c'\]"):
        DPStandardScaler(bounds={"a": (0, 1), "c": (0, 1)}).fit(frame)
