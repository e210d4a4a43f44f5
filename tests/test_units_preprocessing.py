"""Privacy units (``unit_ids``) in the private preprocessing steps, and one
privacy unit for a whole workflow in :func:`skdp.model_selection.spent`."""

import math
import pickle
from contextlib import contextmanager
from dataclasses import replace
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
import sklearn
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from skdp import DPSGDClassifier
from skdp.preprocessing import (
    DPMinMaxScaler,
    DPOneHotEncoder,
    DPSimpleImputer,
    DPStandardScaler,
    _base,
    _encoder,
    _imputer,
    _standard_scaler,
)
from skdp.preprocessing._encoder import present_counts
from skdp.privacy import bound_units, compute_epsilon
from skdp.model_selection import spent

FAST = {"max_steps": 30, "random_state": 0}
N_FEATURES = 3
CANDIDATES = [str(v) for v in range(5)]

#: Steps whose fit releases something, by name: a factory and the kind of
#: data it takes ("numeric", "missing": numeric with NaN, "rounded": small
#: integers with NaN, "categorical").
RELEASING = {
    "scaler_bounds": (lambda **kw: DPStandardScaler(bounds=(-2, 2), **kw), "numeric"),
    "scaler_range": (lambda **kw: DPStandardScaler(data_range=(-4, 4), **kw), "numeric"),
    "minmax_range": (lambda **kw: DPMinMaxScaler(data_range=(-4, 4), **kw), "numeric"),
    "imputer_mean": (lambda **kw: DPSimpleImputer(bounds=(-2, 2), **kw), "missing"),
    "imputer_mean_range": (lambda **kw: DPSimpleImputer(data_range=(-4, 4), **kw), "missing"),
    "imputer_median": (lambda **kw: DPSimpleImputer(strategy="median", bounds=(-2, 2), **kw),
                       "missing"),
    "imputer_categories": (lambda **kw: DPSimpleImputer(
        strategy="most_frequent", categories=[[-1.0, 0.0, 1.0]] * N_FEATURES, **kw), "rounded"),
    "encoder_candidates": (lambda **kw: DPOneHotEncoder(
        candidate_categories=[CANDIDATES] * N_FEATURES, **kw), "categorical"),
    "encoder_stable": (lambda **kw: DPOneHotEncoder(**kw), "categorical"),
}

#: Steps whose fit reads nothing from the values (free for any unit).
PUBLIC = {
    "minmax_bounds": (lambda **kw: DPMinMaxScaler(bounds=(-2, 2), **kw), "numeric"),
    "encoder_public": (lambda **kw: DPOneHotEncoder(categories=[CANDIDATES] * N_FEATURES, **kw),
                       "categorical"),
    "imputer_constant": (lambda **kw: DPSimpleImputer(strategy="constant", **kw), "missing"),
}


def _tables(rng, n, scale=1.0):
    """The data of every kind, ``n`` rows of ``N_FEATURES`` columns, numeric
    values ``scale`` times standard normal."""
    numeric = rng.normal(size=(n, N_FEATURES)) * scale
    missing = np.where(rng.random(numeric.shape) < 0.2, np.nan, numeric)
    rounded = np.where(np.isnan(missing), np.nan, np.clip(np.round(missing), -2, 2))
    categorical = rng.integers(0, 7, (n, N_FEATURES)).astype(str).astype(object)
    return {"numeric": numeric, "missing": missing, "rounded": rounded,
            "categorical": categorical}


def _data(n=600, n_units=60, seed=0):
    rng = np.random.default_rng(seed)
    return _tables(rng, n), rng.integers(0, n_units, n)


# ------------------------------------------ one unit moves every release
@contextmanager
def _captured(units):
    """Fits inside use ``units`` as their bounds, and every dict of
    statistics a fit hands to ``add_noise`` (before noise) is recorded."""
    original = _base.add_noise
    records = []

    def record(statistics, report, generator):
        records.append({k: np.asarray(v, dtype=np.float64).ravel().copy()
                        for k, v in statistics.items()})
        return original(statistics, report, generator)

    with patch.object(_base, "bound_units", lambda *args, **kwargs: units), \
            patch.object(_base, "add_noise", record), \
            patch.object(_standard_scaler, "add_noise", record), \
            patch.object(_encoder, "add_noise", record), \
            patch.object(_imputer, "add_noise", record):
        yield records


def _without(units, present):
    """The bounds of the neighbour without a unit: the other units keep the
    same records (their subsets do not depend on the unit)."""
    return replace(units, codes=units.codes[present], n_units=units.n_units - 1,
                   kept=units.kept[present], factors=units.factors[present])


@st.composite
def panels(draw):
    """Units of 1..40 records (up to 40 times k), a bound k, a scale of the
    values up to 1e12, a seed and the unit to remove."""
    sizes = draw(st.lists(st.integers(1, 40), min_size=2, max_size=5))
    k = draw(st.sampled_from([1, 2, 5]))
    scale = draw(st.sampled_from([1.0, 1e3, 1e12]))
    seed = draw(st.integers(0, 2**16))
    removed = draw(st.integers(0, len(sizes) - 1))
    return sizes, k, scale, seed, removed


@settings(max_examples=25, deadline=None)
@given(panels())
def test_one_unit_moves_every_release_by_at_most_its_sensitivity(panel):
    """Every statistic a preprocessing fit releases (the first release of a
    fit, before later ones adapt to its noisy output) moves by at most the
    sensitivity its report states when a whole unit with all its records
    goes; the other units keep their subsets."""
    sizes, k, scale, seed, removed = panel
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    tables = _tables(rng, len(codes), scale)
    # the removed unit holds categories nobody else has
    tables["categorical"][codes == removed, 0] = "mine"
    units = bound_units(codes, len(sizes), k, torch.Generator().manual_seed(seed))
    present = codes != removed
    for name, (make, kind) in RELEASING.items():
        released = []
        everyone = np.ones(len(codes), dtype=bool)
        for rows, bounds in ((everyone, units), (present, _without(units, present))):
            step = make(epsilon=1.0, random_state=0, max_records_per_unit=k)
            with _captured(bounds) as records:
                step.fit(tables[kind][rows], unit_ids=codes[rows])
            released.append((records[0], step.privacy_report_))
        (full, report), (neighbour, _) = released
        assert report.privacy_unit == f"unit (max_records_per_unit={k})"
        if name == "encoder_stable":
            _check_stable_counts(full, neighbour, tables["categorical"], units, present, k)
            continue
        for release, values in full.items():
            moved = float(np.linalg.norm(values - neighbour[release]))
            bound = report.noise[release].sensitivity
            assert moved <= bound * (1 + 1e-9) + 1e-9, (name, release, moved, bound)


def _check_stable_counts(full, neighbour, X, units, present, k):
    """The counts of the categories present (the encoder without candidates):
    those of kept records only, moving by at most sqrt(d) on the categories
    both have; the removed unit's own categories number at most k per
    feature, each of weighted count at most 1 (the stability threshold's
    premise)."""
    kept, factors = X[units.kept], units.factors[units.kept]
    by_feature = [dict(zip(*present_counts(kept[:, j], factors))) for j in range(N_FEATURES)]
    assert np.allclose(full["counts"], np.concatenate([list(c.values()) for c in by_feature]))
    others = X[present][units.kept[present]]
    other_factors = units.factors[present][units.kept[present]]
    squares = 0.0
    for j, counts in enumerate(by_feature):
        rest = dict(zip(*present_counts(others[:, j], other_factors)))
        new = [c for c in counts if c not in rest]
        assert len(new) <= k and all(counts[c] <= 1 + 1e-12 for c in new)
        squares += sum((counts[c] - rest[c]) ** 2 for c in rest)
    assert math.sqrt(squares) <= math.sqrt(N_FEATURES) * (1 + 1e-9)
    assert neighbour["counts"].shape[0] <= full["counts"].shape[0]


def test_dropped_records_make_no_category():
    """A unit's dropped records never make a category present: of three
    records with categories of their own and k=1, exactly one is released
    (exact counts, epsilon=None)."""
    X = np.array([["a"]] * 10 + [["z1"], ["z2"], ["z3"]], dtype=object)
    ids = np.r_[np.arange(10), [10, 10, 10]]
    for seed in range(5):
        enc = DPOneHotEncoder(epsilon=None, max_records_per_unit=1, random_state=seed)
        enc.fit(X, unit_ids=ids)
        found = [c for c in enc.categories_[0] if c.startswith("z")]
        assert len(found) == 1 and enc.n_units_ == 11


def test_stability_threshold_covers_k_new_categories_per_feature():
    """Without candidates a unit may bring k new categories per feature:
    the threshold is set for n_features * k of them."""
    tables, ids = _data()
    seen = []
    original = _encoder.stability_threshold

    def spy(std, n_new, selection_delta):
        seen.append(n_new)
        return original(std, n_new, selection_delta)

    with patch.object(_encoder, "stability_threshold", spy):
        DPOneHotEncoder(random_state=0).fit(tables["categorical"])
        DPOneHotEncoder(max_records_per_unit=4, random_state=0).fit(
            tables["categorical"], unit_ids=ids)
    assert seen == [N_FEATURES, N_FEATURES * 4]


def test_weighted_counts_count_units():
    """Without missing values the weighted counts of each feature add up to
    the number of units (each unit's factors sum to one)."""
    tables, ids = _data()
    with _captured(bound_units(ids, 60, 3, torch.Generator().manual_seed(0))) as records:
        DPOneHotEncoder(epsilon=None, max_records_per_unit=3).fit(
            tables["categorical"], unit_ids=ids)
    assert records[0]["counts"].sum() == pytest.approx(60 * N_FEATURES)


# ------------------------------------------------- accounting and report
@pytest.mark.parametrize("name", sorted(RELEASING))
def test_epsilon_from_event_and_report_names_the_unit(name):
    make, kind = RELEASING[name]
    tables, ids = _data()
    step = make(epsilon=2.0, max_records_per_unit=4, random_state=0).fit(tables[kind],
                                                                          unit_ids=ids)
    report = step.privacy_report_
    assert step.epsilon_ == pytest.approx(compute_epsilon(step.dp_event_, report.delta, "pld"))
    assert step.epsilon_ <= 2.0 and step.n_units_ == 60
    assert report.privacy_unit == "unit (max_records_per_unit=4)"
    assert "one unit (max_records_per_unit=4) with all its records" in report.summary()


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_steps_are_free_for_units(name):
    make, kind = PUBLIC[name]
    tables, ids = _data()
    step = make(max_records_per_unit=4).fit(tables[kind], unit_ids=ids)
    assert step.epsilon_ == 0.0 and step.n_units_ == 60
    assert step.privacy_report_.privacy_unit == "unit (max_records_per_unit=4)"


@pytest.mark.parametrize("name", sorted(RELEASING))
def test_singleton_units_spend_like_records(name):
    make, kind = RELEASING[name]
    tables, _ = _data()
    X = tables[kind]
    singletons = np.arange(X.shape[0])
    a = make(random_state=0).fit(X)
    b = make(random_state=0).fit(X, unit_ids=singletons)
    assert a.epsilon_ == b.epsilon_ and a.delta_ == b.delta_
    assert {r: n.scale for r, n in a.privacy_report_.noise.items()} == {
        r: n.scale for r, n in b.privacy_report_.noise.items()}
    assert b.n_units_ == X.shape[0]
    # without noise, the same statistics (sums of factors 1)
    exact_a = make(epsilon=None).fit(X)
    exact_b = make(epsilon=None).fit(X, unit_ids=singletons)
    for attribute in ("mean_", "var_", "data_min_", "data_max_", "statistics_"):
        if hasattr(exact_a, attribute):
            assert np.allclose(getattr(exact_a, attribute), getattr(exact_b, attribute),
                               rtol=1e-9, atol=1e-12)
    if hasattr(exact_a, "categories_"):
        assert all(np.array_equal(c, d) for c, d in zip(exact_a.categories_,
                                                         exact_b.categories_))


@pytest.mark.parametrize("name", sorted(RELEASING) + sorted(PUBLIC))
def test_without_unit_ids_nothing_changes(name):
    make, kind = {**RELEASING, **PUBLIC}[name]
    tables, _ = _data()
    a = make(random_state=0).fit(tables[kind])
    b = make(random_state=0, max_records_per_unit=1).fit(tables[kind])
    assert a.n_units_ is None and a.privacy_report_.privacy_unit == "record"
    assert a.epsilon_ == b.epsilon_
    for attribute, value in vars(a).items():
        if attribute.endswith("_") and isinstance(value, np.ndarray):
            assert np.array_equal(value, getattr(b, attribute)), attribute


def test_unit_fit_is_reproducible_and_close_to_the_truth():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 2000, 20_000)
    X = rng.normal(3.0, 2.0, (20_000, 2))
    a = DPStandardScaler(bounds=(-10, 10), random_state=0).fit(X, unit_ids=ids)
    b = DPStandardScaler(bounds=(-10, 10), random_state=0).fit(X, unit_ids=ids)
    assert np.array_equal(a.mean_, b.mean_) and np.array_equal(a.scale_, b.scale_)
    assert np.allclose(a.mean_, 3.0, atol=0.3) and np.allclose(a.scale_, 2.0, atol=0.3)
    assert a.n_samples_seen_ == pytest.approx(2000, rel=0.05)  # a count of units


def test_clear_errors():
    tables, ids = _data()
    X = tables["numeric"]
    with pytest.raises(ValueError, match="unit_ids"):
        DPStandardScaler(bounds=(-2, 2)).fit(X, unit_ids=ids[:-1])
    bad = ids.astype(float)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="unit_ids"):
        DPSimpleImputer(bounds=(-2, 2)).fit(tables["missing"], unit_ids=bad)
    with pytest.raises(ValueError, match="unit_ids"):
        DPOneHotEncoder().fit(tables["categorical"], unit_ids=np.c_[ids, ids])
    with pytest.raises(ValueError, match="max_records_per_unit"):
        DPMinMaxScaler(data_range=(-4, 4), max_records_per_unit=0).fit(X, unit_ids=ids)


# ------------------------------------------------- pipelines and spent()
N_UNITS = 300


def _xy():
    X = _data(n=1500)[0]["numeric"]
    rng = np.random.default_rng(1)
    ids = rng.permutation(np.arange(X.shape[0]) % N_UNITS)
    return X, (X[:, 0] + 0.5 * rng.normal(size=X.shape[0]) > 0).astype(int), ids


def _pipe():
    return Pipeline([("scale", DPStandardScaler(bounds=(-3, 3), random_state=0)),
                     ("clf", DPSGDClassifier(**FAST))])


def _check_unit_pipeline(pipe):
    assert pipe["scale"].n_units_ == N_UNITS and pipe["clf"].n_units_ == N_UNITS
    total = spent(pipe)
    assert total.privacy_unit == "unit (max_records_per_unit=16)"
    assert total.epsilon == pytest.approx(compute_epsilon(total.dp_event, total.delta, "pld"))
    assert max(pipe["scale"].epsilon_, pipe["clf"].epsilon_) < total.epsilon < math.inf
    _, _, _, steps = total  # still a plain 4-tuple, the unit beside it
    assert len(steps) == 2 and pickle.loads(pickle.dumps(total)).privacy_unit == total.privacy_unit


def test_pipeline_with_routing_on():
    X, y, ids = _xy()
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = _pipe().fit(X, y, unit_ids=ids)
    _check_unit_pipeline(pipe)


def test_pipeline_with_routing_off():
    X, y, ids = _xy()
    pipe = _pipe().fit(X, y, scale__unit_ids=ids, clf__unit_ids=ids)
    _check_unit_pipeline(pipe)


def test_column_transformer_with_routing_on():
    tables, ids = _data()
    frame = pd.DataFrame(tables["missing"], columns=["a", "b", "c"])
    frame["kind"] = tables["categorical"][:, 0]
    y = (np.nan_to_num(tables["missing"][:, 0]) > 0).astype(int)
    numeric = Pipeline([("impute", DPSimpleImputer(bounds=(-3, 3), random_state=0)),
                        ("scale", DPStandardScaler(bounds=(-3, 3), random_state=0))])
    encode = DPOneHotEncoder(candidate_categories=[CANDIDATES], random_state=0)
    pipe = Pipeline([
        ("pre", ColumnTransformer([("num", numeric, ["a", "b", "c"]),
                                   ("cat", encode, ["kind"])])),
        ("clf", DPSGDClassifier(**FAST)),
    ])
    with sklearn.config_context(enable_metadata_routing=True):
        pipe.fit(frame, y, unit_ids=ids)
    fitted = pipe["pre"].named_transformers_
    assert fitted["num"]["impute"].n_units_ == 60 and fitted["cat"].n_units_ == 60
    total = spent(pipe)
    assert total.privacy_unit.startswith("unit") and len(total.steps) == 4


def test_spent_refuses_records_mixed_with_units():
    X, y, ids = _xy()
    pipe = _pipe().fit(X, y, clf__unit_ids=ids)  # the scaler is about records
    with pytest.raises(ValueError, match="same unit_ids") as error:
        spent(pipe)
    message = str(error.value)
    assert "'scale' (DPStandardScaler) about records" in message
    assert "'clf' (DPSGDClassifier) about unit (max_records_per_unit=16)" in message


def test_spent_refuses_different_units():
    X, y, ids = _xy()
    pipe = _pipe().fit(X, y, scale__unit_ids=ids, clf__unit_ids=ids % 150)
    with pytest.raises(ValueError, match=f"n_units_={N_UNITS}.*n_units_=150"):
        spent(pipe)


def test_spent_composes_different_bounds_on_the_same_units():
    X, y, ids = _xy()
    pipe = _pipe().set_params(scale__max_records_per_unit=4)
    pipe.fit(X, y, scale__unit_ids=ids, clf__unit_ids=ids)
    assert spent(pipe).privacy_unit == "unit"


def test_spent_free_steps_hold_for_any_unit():
    X, y, ids = _xy()
    pipe = Pipeline([("scale", DPMinMaxScaler(bounds=(-3, 3))),
                     ("clf", DPSGDClassifier(**FAST))]).fit(X, y, clf__unit_ids=ids)
    total = spent(pipe)
    assert total.privacy_unit == "unit (max_records_per_unit=16)"
    assert total.epsilon == pytest.approx(pipe["clf"].epsilon_)
    records = _pipe().fit(X, y)
    assert spent(records).privacy_unit == "record"
