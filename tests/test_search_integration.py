"""End-to-end tests: skdp estimators inside Pipeline, GridSearchCV and
cross_validate, with fairness scorers and the ``best_within`` refit rule.

Two ways for the groups to reach both the estimator (for training) and the
fairness scorer (for evaluation on each fold's test rows):

* **routing on** (``sklearn.config_context(enable_metadata_routing=True)``):
  ``est.set_fit_request(sensitive_features=True)``,
  ``scorer.set_score_request(sensitive_features=True)`` and
  ``search.fit(X, y, sensitive_features=A)``; scikit-learn splits ``A`` by
  fold.
* **routing off** (the default): the group is a column of a DataFrame ``X``
  that the preprocessing passes through (pandas output), the estimator takes
  it out with ``sensitive_columns`` and the scorer reads it with
  ``sensitive_column``.

Every search scores an extra ``"epsilon"`` scorer that reads the fitted
estimator's ``epsilon_``, so that the privacy spent by every fit of every
candidate on every fold is checked against the requested budget.

The data is small and the training short, so that the whole file runs in a
few seconds; the checks are about plumbing (what reaches what, and whether
the stored scores are the metric of the right predictions on the right
rows), not about accuracy.
"""

import warnings

import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.datasets import make_fair_classification
from skdp.metrics import demographic_parity_difference, get_fairness_scorer, make_fairness_scorer
from skdp.model_selection import best_within

pd = pytest.importorskip("pandas")

# Short, noisy training on small data triggers skdp's diagnostic warnings
# (noisy histograms, growing multipliers, clipping); they are expected here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*too few for histogram noise:UserWarning"),
    pytest.mark.filterwarnings("ignore:Lagrange multipliers keep growing:UserWarning"),
    pytest.mark.filterwarnings("ignore:About .* of per-sample gradients are clipped:UserWarning"),
]

N_SAMPLES = 2400
N_FEATURES = 5
BOUND = 0.1
N_SPLITS = 3

# name -> (estimator factory, grid over the final step "clf")
ESTIMATORS = {
    "DPSGDClassifier": (
        lambda **kw: DPSGDClassifier(batch_size=128, max_epochs=3, random_state=0, **kw),
        {"clf__epsilon": [1.0, 4.0], "clf__learning_rate": [0.1, 1.0]},
    ),
    "DPRateConstrainedClassifier": (
        lambda **kw: DPRateConstrainedClassifier(max_epochs=5, random_state=0, **kw),
        {"clf__epsilon": [1.0, 4.0], "clf__tolerance": [0.02, 0.3]},
    ),
}
ESTIMATOR_NAMES = list(ESTIMATORS)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The models here are tiny (5 inputs, batches of ~100-400 rows): torch's
    intra-op threads only add synchronisation, which on a loaded 2-core
    machine made single fits vary from 10 ms to over 2 s. Restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


# ------------------------------------------------------------------ helpers
def _arrays(seed=0, n=N_SAMPLES):
    """numpy X, y and integer groups 0/1, correlated with the label."""
    return make_fair_classification(
        n, N_FEATURES, n_groups=2, label_group_correlation=0.5,
        feature_group_correlation=0.5, random_state=seed,
    )


def _frame(seed=0, n=N_SAMPLES):
    """DataFrame X with numeric columns x0..x4 and a string "group" column."""
    X, y, groups = make_fair_classification(
        n, N_FEATURES, n_groups=2, label_group_correlation=0.5,
        feature_group_correlation=0.5, random_state=seed, return_frame=True,
    )
    X["group"] = groups.map({0: "a", 1: "b"}).astype(object)
    return X, y


def _splits(n=N_SAMPLES):
    return list(KFold(N_SPLITS, shuffle=True, random_state=0).split(np.zeros(n)))


def _epsilon_scorer(estimator, X, y):
    """Scorer reading the privacy spent by the fitted final step."""
    return estimator[-1].epsilon_


def _routed_pipeline(name):
    factory, grid = ESTIMATORS[name]
    clf = factory().set_fit_request(sensitive_features=True)
    return Pipeline([("scale", StandardScaler()), ("clf", clf)]), grid


def _column_pipeline(name, numeric):
    factory, grid = ESTIMATORS[name]
    pre = ColumnTransformer(
        [("num", StandardScaler(), numeric)],
        remainder="passthrough",
        verbose_feature_names_out=False,
    ).set_output(transform="pandas")
    return Pipeline([("pre", pre), ("clf", factory(sensitive_columns="group"))]), grid


def _expected_best_index(cv_results, bound):
    """The refit rule written out: most accurate candidate with gap <= bound
    (ties to the fairer, then the first); else the smallest gap."""
    accuracy = np.asarray(cv_results["mean_test_accuracy"])
    gap = -np.asarray(cv_results["mean_test_dpd"])
    qualifies = gap <= bound
    if qualifies.any():
        index = np.flatnonzero(qualifies)
        return int(index[np.lexsort((gap[index], -accuracy[index]))[0]]), True
    return int(np.lexsort((-accuracy, gap))[0]), False


def _fit_search(search, X, y, **fit_params):
    """Fit, returning the warnings raised by best_within's fallback."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y, **fit_params)
    return [str(w.message) for w in caught if "No candidate has a mean dpd" in str(w.message)]


def _check_search(search, fold_fit_predict, y, groups, fallback_warnings):
    """Checks shared by the routing-on and routing-off searches.

    ``fold_fit_predict(params, train, test)`` fits the pipeline by hand on the
    train rows and returns its predictions on the test rows.
    """
    results = search.cv_results_
    n_candidates = len(results["params"])
    for key in ("mean_test_accuracy", "mean_test_dpd", "mean_test_epsilon"):
        assert key in results

    splits = _splits()
    y_all = np.asarray(y)
    groups = np.asarray(groups)
    for index, params in enumerate(results["params"]):
        for i, (train, test) in enumerate(splits):
            stored_dpd = results[f"split{i}_test_dpd"][index]
            stored_acc = results[f"split{i}_test_accuracy"][index]
            assert np.isfinite(stored_dpd) and -1.0 <= stored_dpd <= 0.0
            # The estimators are deterministic for an int random_state, so
            # the fold can be refitted by hand: the stored fairness score is
            # minus the gap of that fit's predictions on the fold's test rows,
            # with the groups of exactly those rows.
            y_pred = fold_fit_predict(params, train, test)
            gap = demographic_parity_difference(
                y_all[test], y_pred, sensitive_features=groups[test]
            )
            assert stored_dpd == pytest.approx(-gap, abs=1e-12)
            assert stored_acc == pytest.approx(accuracy_score(y_all[test], y_pred), abs=1e-12)
            # Privacy: every fit of every candidate stays within its budget.
            spent = results[f"split{i}_test_epsilon"][index]
            assert 0.0 < spent <= params["clf__epsilon"]

    # The refit rule.
    expected, qualified = _expected_best_index(results, BOUND)
    assert search.best_index_ == expected
    assert search.best_params_ == results["params"][expected]
    if qualified:
        assert -results["mean_test_dpd"][search.best_index_] <= BOUND
        assert not fallback_warnings
    else:
        assert fallback_warnings, "best_within must warn when no candidate is within the bound"
    assert 0 <= search.best_index_ < n_candidates

    # The refitted model got the groups and kept to its budget.
    best = search.best_estimator_[-1]
    assert list(best.groups_) == sorted(set(groups.tolist()))
    assert best.epsilon_ <= search.best_params_["clf__epsilon"]


# ------------------------------------------------------- GridSearchCV, routing on
@pytest.mark.parametrize("name", ESTIMATOR_NAMES)
def test_grid_search_routing_on(name):
    X, y, groups = _arrays()
    with sklearn.config_context(enable_metadata_routing=True):
        model, grid = _routed_pipeline(name)
        dpd = get_fairness_scorer("demographic_parity_difference")
        dpd.set_score_request(sensitive_features=True)
        search = GridSearchCV(
            model, grid,
            scoring={"accuracy": "accuracy", "dpd": dpd, "epsilon": _epsilon_scorer},
            refit=best_within("dpd", BOUND), cv=_splits(),
        )
        fallback = _fit_search(search, X, y, sensitive_features=groups)

        def fold_fit_predict(params, train, test):
            fitted = clone(model).set_params(**params)
            fitted.fit(X[train], y[train], sensitive_features=groups[train])
            return fitted.predict(X[test])

        _check_search(search, fold_fit_predict, y, groups, fallback)
        # predict needs no groups.
        assert search.predict(X).shape == y.shape


# ------------------------------------------------------ GridSearchCV, routing off
@pytest.mark.parametrize("name", ESTIMATOR_NAMES)
def test_grid_search_routing_off_sensitive_column(name):
    X, y = _frame()
    numeric = [c for c in X.columns if c != "group"]
    model, grid = _column_pipeline(name, numeric)
    dpd = make_fairness_scorer(demographic_parity_difference, sensitive_column="group")
    search = GridSearchCV(
        model, grid,
        scoring={"accuracy": "accuracy", "dpd": dpd, "epsilon": _epsilon_scorer},
        refit=best_within("dpd", BOUND), cv=_splits(),
    )
    fallback = _fit_search(search, X, y)

    def fold_fit_predict(params, train, test):
        fitted = clone(model).set_params(**params).fit(X.iloc[train], y.iloc[train])
        return fitted.predict(X.iloc[test])

    _check_search(search, fold_fit_predict, y, X["group"], fallback)
    # The group column reached the estimator but is not a model input.
    best = search.best_estimator_[-1]
    assert best.n_features_in_ == len(numeric)
    assert list(best.feature_names_in_) == numeric
    assert search.predict(X).shape == y.shape


@pytest.mark.parametrize("name", ESTIMATOR_NAMES)
def test_routing_on_and_off_give_the_same_search(name):
    """Same rows, same folds, same seeds: routed groups and a group column
    must produce identical fold scores and the same choice."""
    X, y = _frame()
    numeric = [c for c in X.columns if c != "group"]
    off_model, grid = _column_pipeline(name, numeric)
    off = GridSearchCV(
        off_model, grid,
        scoring={"accuracy": "accuracy",
                 "dpd": get_fairness_scorer("demographic_parity_difference",
                                            sensitive_column="group")},
        refit=best_within("dpd", BOUND), cv=_splits(),
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No candidate has", category=UserWarning)
        off.fit(X, y)
        with sklearn.config_context(enable_metadata_routing=True):
            on_model, _ = _routed_pipeline(name)
            dpd = get_fairness_scorer("demographic_parity_difference")
            on = GridSearchCV(
                on_model, grid,
                scoring={"accuracy": "accuracy",
                         "dpd": dpd.set_score_request(sensitive_features=True)},
                refit=best_within("dpd", BOUND), cv=_splits(),
            # the same DataFrame as the routing-off pipeline reads: the same
            # memory layout, so the scaler's sums are the same by construction
            ).fit(X[numeric], y.to_numpy(), sensitive_features=X["group"])
    for key in ("accuracy", "dpd"):
        for i in range(N_SPLITS):
            np.testing.assert_array_equal(
                on.cv_results_[f"split{i}_test_{key}"], off.cv_results_[f"split{i}_test_{key}"]
            )
    assert on.best_index_ == off.best_index_


# ----------------------------------------------------------- cross_validate
@pytest.mark.parametrize("name", ESTIMATOR_NAMES)
def test_cross_validate_routing_on(name):
    X, y, groups = _arrays()
    factory, _ = ESTIMATORS[name]
    epsilon = 2.0
    with sklearn.config_context(enable_metadata_routing=True):
        model = Pipeline([
            ("scale", StandardScaler()),
            ("clf", factory(epsilon=epsilon).set_fit_request(sensitive_features=True)),
        ])
        dpd = get_fairness_scorer("demographic_parity_difference")
        result = cross_validate(
            model, X, y, cv=_splits(),
            scoring={"accuracy": "accuracy",
                     "dpd": dpd.set_score_request(sensitive_features=True)},
            params={"sensitive_features": groups},
            return_estimator=True, return_indices=True,
        )
    assert result["test_dpd"].shape == (N_SPLITS,)
    for fitted, test, stored in zip(
        result["estimator"], result["indices"]["test"], result["test_dpd"]
    ):
        gap = demographic_parity_difference(
            y[test], fitted.predict(X[test]), sensitive_features=groups[test]
        )
        assert stored == pytest.approx(-gap, abs=1e-12)
        assert -1.0 <= stored <= 0.0
        assert list(fitted[-1].groups_) == [0, 1]
        assert fitted[-1].epsilon_ <= epsilon


# ---------------------------------------------------------------- group kinds
def _object_columns(*columns):
    """2-D object array keeping each column's own label type (ints stay ints)."""
    out = np.empty((len(columns[0]), len(columns)), dtype=object)
    for j, column in enumerate(columns):
        out[:, j] = column
    return out


def _group_variants(groups, seed=1):
    rng = np.random.RandomState(seed)
    second = rng.choice(["u", "v"], size=groups.shape[0])
    return {
        "strings": (
            np.array(["female", "male", "other"])[groups],
            ["female", "male", "other"],
        ),
        "ints": (np.array([10, 20, 30])[groups], [10, 20, 30]),
        "two_columns_array": (
            _object_columns(groups, second),
            [(g, s) for g in range(3) for s in ("u", "v")],
        ),
        "two_columns_frame": (
            pd.DataFrame({"g": groups, "s": second}),
            [(g, s) for g in range(3) for s in ("u", "v")],
        ),
    }


@pytest.mark.parametrize(
    "kind", ["strings", "ints", "two_columns_array", "two_columns_frame"]
)
def test_rate_constrained_group_kinds_routing_on(kind):
    X, y, groups = make_fair_classification(
        3000, N_FEATURES, n_groups=3, label_group_correlation=0.4,
        feature_group_correlation=0.5, random_state=0,
    )
    sensitive, expected_groups = _group_variants(groups)[kind]
    with sklearn.config_context(enable_metadata_routing=True):
        model = Pipeline([
            ("scale", StandardScaler()),
            ("clf", DPRateConstrainedClassifier(
                epsilon=2.0, tolerance=0.1, max_epochs=5, random_state=0,
            ).set_fit_request(sensitive_features=True)),
        ])
        dpd = get_fairness_scorer("demographic_parity_difference")
        result = cross_validate(
            model, X, y, cv=_splits(3000),
            scoring={"dpd": dpd.set_score_request(sensitive_features=True)},
            params={"sensitive_features": sensitive},
            return_estimator=True, return_indices=True,
        )
    rows = np.asarray(sensitive, dtype=object)
    for fitted, test, stored in zip(
        result["estimator"], result["indices"]["test"], result["test_dpd"]
    ):
        clf = fitted[-1]
        assert list(clf.groups_) == expected_groups
        # one demographic-parity constraint per (group, class)
        assert len(clf.constraint_names_) == 2 * len(expected_groups)
        assert clf.epsilon_ <= 2.0
        gap = demographic_parity_difference(
            y[test], fitted.predict(X[test]), sensitive_features=rows[test]
        )
        assert np.isfinite(stored) and stored == pytest.approx(-gap, abs=1e-12)


def test_rate_constrained_intersectional_columns_routing_off():
    X, y = _frame(n=3000)
    X["sub"] = np.random.RandomState(1).choice(["u", "v"], size=len(X))
    numeric = [c for c in X.columns if c.startswith("x")]
    pre = ColumnTransformer(
        [("num", StandardScaler(), numeric)], remainder="passthrough",
        verbose_feature_names_out=False,
    ).set_output(transform="pandas")
    model = Pipeline([
        ("pre", pre),
        ("clf", DPRateConstrainedClassifier(
            epsilon=2.0, tolerance=0.1, max_epochs=5, random_state=0,
            sensitive_columns=["group", "sub"],
        )),
    ])
    dpd = get_fairness_scorer("demographic_parity_difference", sensitive_column=["group", "sub"])
    result = cross_validate(
        model, X, y, cv=_splits(3000), scoring={"dpd": dpd},
        return_estimator=True, return_indices=True,
    )
    for fitted, test, stored in zip(
        result["estimator"], result["indices"]["test"], result["test_dpd"]
    ):
        assert list(fitted[-1].groups_) == [(g, s) for g in "ab" for s in "uv"]
        assert fitted[-1].n_features_in_ == len(numeric)
        gap = demographic_parity_difference(
            y.iloc[test], fitted.predict(X.iloc[test]),
            sensitive_features=X[["group", "sub"]].iloc[test],
        )
        assert stored == pytest.approx(-gap, abs=1e-12)


# ----------------------------------------------------------------- errors
@pytest.mark.parametrize("name", ESTIMATOR_NAMES)
def test_wrong_length_sensitive_features(name):
    X, y, groups = _arrays(n=1500)
    factory, _ = ESTIMATORS[name]
    with pytest.raises(ValueError, match="sensitive_features has 1499 entries"):
        factory().fit(X, y, sensitive_features=groups[:-1])
    # Routed metadata of the wrong length is not split by scikit-learn (it
    # passes through unchanged), so the estimator's own check catches it.
    with sklearn.config_context(enable_metadata_routing=True):
        model = Pipeline([
            ("scale", StandardScaler()),
            ("clf", factory().set_fit_request(sensitive_features=True)),
        ])
        with pytest.raises(ValueError, match="sensitive_features has 1499 entries"):
            cross_validate(model, X, y, cv=3, params={"sensitive_features": groups[:-1]},
                           error_score="raise")
    # and the scorer when called by hand
    fitted = factory().fit(X, y, sensitive_features=groups)
    dpd = get_fairness_scorer("demographic_parity_difference")
    with pytest.raises(ValueError, match="sensitive_features"):
        dpd(fitted, X, y, sensitive_features=groups[:-1])


@pytest.mark.parametrize("name", ESTIMATOR_NAMES)
def test_routing_on_without_set_fit_request(name):
    """With routing on, skdp estimators request ``sensitive_features`` in
    ``fit`` by default (as ``GroupKFold`` requests ``groups``), so Pipeline,
    GridSearchCV and cross_validate route the groups with no
    ``set_fit_request`` call; ``set_fit_request(sensitive_features=False)``
    opts out, and a Pipeline with no other consumer then rejects the
    argument (TypeError)."""
    X, y, groups = _arrays(n=1500)
    factory, _ = ESTIMATORS[name]
    with sklearn.config_context(enable_metadata_routing=True):
        direct = factory(max_steps=5).fit(X, y, sensitive_features=groups)
        assert list(direct.groups_) == [0, 1]

        clf = factory(max_steps=5)
        assert clf.get_metadata_routing().fit.requests["sensitive_features"] is True
        model = Pipeline([("scale", StandardScaler()), ("clf", clf)])
        assert list(model.fit(X, y, sensitive_features=groups)[-1].groups_) == [0, 1]
        search = GridSearchCV(clf, {"max_steps": [5]}, cv=2, error_score="raise")
        assert list(search.fit(X, y, sensitive_features=groups).best_estimator_.groups_) == [0, 1]
        search = GridSearchCV(model, {"clf__max_steps": [5]}, cv=2, error_score="raise")
        search.fit(X, y, sensitive_features=groups)
        assert list(search.best_estimator_[-1].groups_) == [0, 1]
        result = cross_validate(model, X, y, cv=2, params={"sensitive_features": groups},
                                error_score="raise", return_estimator=True)
        assert all(list(est[-1].groups_) == [0, 1] for est in result["estimator"])

        clf.set_fit_request(sensitive_features=False)
        with pytest.raises(TypeError, match="not routed to any object"):
            model.fit(X, y, sensitive_features=groups)


@pytest.mark.filterwarnings("ignore:Constraints not met:UserWarning")
def test_forgotten_requests_with_routing_on():
    """What docs/searches.rst says happens when a request is forgotten with
    routing on: the skdp estimator needs no ``set_fit_request`` (its fit
    requests the groups by default; they reach every fit and the skdp
    fairness scorer), while a fairness metric wrapped by scikit-learn's own
    ``make_scorer`` without ``set_score_request`` raises
    ``UnsetMetadataPassedError`` naming that scorer."""
    from sklearn.exceptions import UnsetMetadataPassedError
    from sklearn.metrics import make_scorer

    X, y, groups = _arrays(n=1500)
    factory, _ = ESTIMATORS["DPRateConstrainedClassifier"]
    with sklearn.config_context(enable_metadata_routing=True):
        model = Pipeline([("scale", StandardScaler()), ("clf", factory(max_steps=5))])
        scoring = {"accuracy": "accuracy",
                   "dpd": get_fairness_scorer("demographic_parity_difference")}
        search = GridSearchCV(model, {"clf__tolerance": [0.1]}, cv=2, scoring=scoring,
                              refit="accuracy", error_score="raise")
        search.fit(X, y, sensitive_features=groups)
        assert list(search.best_estimator_[-1].groups_) == [0, 1]
        assert np.isfinite(search.cv_results_["mean_test_dpd"]).all()

        plain = make_scorer(demographic_parity_difference, greater_is_better=False)
        search = GridSearchCV(model, {"clf__tolerance": [0.1]}, cv=2,
                              scoring={"accuracy": "accuracy", "dpd": plain},
                              refit="accuracy", error_score="raise")
        with pytest.raises(UnsetMetadataPassedError, match="set_score_request"):
            search.fit(X, y, sensitive_features=groups)


@pytest.mark.filterwarnings("ignore:Constraints not met:UserWarning")
def test_sensitive_features_with_routing_off():
    """With routing off, ``GridSearchCV.fit(..., sensitive_features=A)``
    passes ``A`` to the estimator's ``fit`` as an old-style fit parameter: a
    Pipeline refuses it (ValueError, or every fit fails), a bare skdp
    estimator trains with it, but the fairness scorer gets no groups: its
    score is NaN with a "Scoring failed" warning (the ValueError with
    ``error_score="raise"``)."""
    X, y, groups = _arrays(n=1500)
    factory, _ = ESTIMATORS["DPRateConstrainedClassifier"]
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference")}
    with sklearn.config_context(enable_metadata_routing=False):
        model = Pipeline([("scale", StandardScaler()), ("clf", factory(max_steps=5))])
        search = GridSearchCV(model, {"clf__tolerance": [0.1]}, cv=2, scoring=scoring,
                              refit="accuracy", error_score="raise")
        with pytest.raises(ValueError, match="does not accept the sensitive_features"):
            search.fit(X, y, sensitive_features=groups)

        search = GridSearchCV(factory(max_steps=5), {"tolerance": [0.1]}, cv=2,
                              scoring=scoring, refit="accuracy")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search.fit(X, y, sensitive_features=groups)
        assert list(search.best_estimator_.groups_) == [0, 1]
        assert np.isnan(search.cv_results_["mean_test_dpd"]).all()
        assert any("Scoring failed" in str(w.message) and "needs the group" in str(w.message)
                   for w in caught)
        search.set_params(error_score="raise")
        with pytest.raises(ValueError, match="needs the group of each test row"):
            search.fit(X, y, sensitive_features=groups)


def test_searches_rst_describes_forgotten_requests():
    """docs/searches.rst must not claim that forgetting set_fit_request
    raises (skdp estimators request the groups by default)."""
    import pathlib

    text = pathlib.Path(__file__).parents[1].joinpath("docs", "searches.rst").read_text()
    flat = " ".join(text.split())
    assert "Forgetting ``set_fit_request`` makes scikit-learn raise" not in flat
    assert "UnsetMetadataPassedError" in flat and "does not accept the sensitive_features" in flat


# ------------------------------------------------ groups unseen at scoring
@pytest.mark.parametrize("routing", [True, False])
def test_group_unseen_in_training_is_scored(routing):
    """A test fold may hold a group the model never saw (and lack one it did):
    predict needs no groups, and the scorer takes the gap over the groups
    present in the fold."""
    X, y = _frame(n=1800)
    groups = X["group"].to_numpy().copy()
    rng = np.random.RandomState(0)
    groups[rng.choice(len(groups), size=150, replace=False)] = "c"
    X["group"] = groups
    numeric = [c for c in X.columns if c != "group"]
    is_c = groups == "c"
    train = np.flatnonzero(~is_c)[:1200]
    rest = np.setdiff1d(np.arange(len(X)), train)
    test_with_c = rest                                   # a, b and unseen c
    test_without_b = rest[groups[rest] != "b"]           # a and unseen c only
    cv = [(train, test_with_c), (train, test_without_b)]
    factory, _ = ESTIMATORS["DPRateConstrainedClassifier"]

    if routing:
        with sklearn.config_context(enable_metadata_routing=True):
            model = Pipeline([
                ("scale", StandardScaler()),
                ("clf", factory(epsilon=2.0).set_fit_request(sensitive_features=True)),
            ])
            dpd = get_fairness_scorer("demographic_parity_difference")
            result = cross_validate(
                model, X[numeric], y, cv=cv,
                scoring={"dpd": dpd.set_score_request(sensitive_features=True)},
                params={"sensitive_features": groups}, return_estimator=True,
                error_score="raise",
            )
        features = X[numeric]
    else:
        model, _ = _column_pipeline("DPRateConstrainedClassifier", numeric)
        model.set_params(clf__epsilon=2.0)
        dpd = get_fairness_scorer("demographic_parity_difference", sensitive_column="group")
        result = cross_validate(model, X, y, cv=cv, scoring={"dpd": dpd},
                                return_estimator=True, error_score="raise")
        features = X

    for fitted, (_, test), stored in zip(result["estimator"], cv, result["test_dpd"]):
        assert list(fitted[-1].groups_) == ["a", "b"]
        gap = demographic_parity_difference(
            y.iloc[test], fitted.predict(features.iloc[test]), sensitive_features=groups[test]
        )
        assert np.isfinite(stored) and -1.0 <= stored <= 0.0
        assert stored == pytest.approx(-gap, abs=1e-12)
