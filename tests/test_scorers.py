"""Tests of the fairness scorers with GridSearchCV and cross_validate.

Routing on: groups arrive as metadata. Routing off: groups are a column of X
that a ColumnTransformer drops before the classifier.
"""

import pickle
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.utils.metadata_routing import get_routing_for_object

from skdp import DPSGDClassifier
from skdp.metrics import (
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equal_opportunity_ratio,
    equalized_odds_difference,
    equalized_odds_ratio,
    get_fairness_scorer,
    get_fairness_scorer_names,
    make_fairness_scorer,
    worst_group_accuracy,
)

pd = pytest.importorskip("pandas")

GRID = {"logisticregression__C": [0.01, 10.0]}


def _data(n=150, seed=0):
    rng = np.random.RandomState(seed)
    group = rng.choice(["a", "b", "c"], size=n)
    x1 = rng.normal(size=n) + 1.5 * (group == "a")
    x2 = rng.normal(size=n)
    y = (x1 + 0.5 * x2 + rng.normal(scale=0.5, size=n) > 0.5).astype(int)
    X = pd.DataFrame({"x1": x1, "x2": x2, "group": group})
    return X, y


def _drop_group_model(columns=("group",)):
    return make_pipeline(
        ColumnTransformer([("drop_group", "drop", list(columns))], remainder="passthrough"),
        LogisticRegression(),
    )


def _splits(X, y):
    return list(KFold(3, shuffle=True, random_state=0).split(X, y))


def _by_hand(model, params, X, y, groups, splits, metric, **metric_kwargs):
    """Fit every fold by hand and compute the metric on its test rows."""
    values = []
    for train, test in splits:
        fitted = clone(model).set_params(**params).fit(X.iloc[train], y[train])
        y_pred = fitted.predict(X.iloc[test])
        values.append(metric(y[test], y_pred, sensitive_features=groups[test], **metric_kwargs))
    return np.array(values)


def _check_fold_scores(search, model, X, y, groups, splits, name, metric, sign=-1, **kw):
    for index, params in enumerate(search.cv_results_["params"]):
        expected = _by_hand(model, params, X, y, groups, splits, metric, **kw)
        stored = [search.cv_results_[f"split{i}_test_{name}"][index] for i in range(len(splits))]
        np.testing.assert_allclose(stored, sign * expected, atol=1e-12)


# -------------------------------------------------------------- routing off
def test_grid_search_routing_off_reads_group_column():
    X, y = _data()
    splits = _splits(X, y)
    model = _drop_group_model()
    scoring = {
        "acc": "accuracy",
        "dpd": get_fairness_scorer("demographic_parity_difference", sensitive_column="group"),
        "eod": make_fairness_scorer(equalized_odds_difference, sensitive_column="group",
                                    method="one_vs_rest", agg="mean"),
        "wga": get_fairness_scorer("worst_group_accuracy", sensitive_column="group"),
    }
    search = GridSearchCV(model, GRID, scoring=scoring, refit=False, cv=splits).fit(X, y)
    groups = X["group"].to_numpy()
    _check_fold_scores(search, model, X, y, groups, splits, "dpd", demographic_parity_difference)
    _check_fold_scores(search, model, X, y, groups, splits, "eod", equalized_odds_difference,
                       method="one_vs_rest", agg="mean")
    _check_fold_scores(search, model, X, y, groups, splits, "wga", worst_group_accuracy, sign=1)
    assert np.all(search.cv_results_["mean_test_dpd"] <= 0)
    assert np.any(search.cv_results_["mean_test_dpd"] < 0)  # a real, nonzero gap


def test_cross_validate_routing_off_and_intersectional_columns():
    X, y = _data(seed=1)
    X["sex"] = np.where(np.arange(len(X)) % 2 == 0, "f", "m")
    splits = _splits(X, y)
    model = _drop_group_model(["group", "sex"])
    scorer = make_fairness_scorer("demographic_parity_difference",
                                  sensitive_column=["group", "sex"])
    scores = cross_validate(model, X, y, cv=splits, scoring={"dpd": scorer, "acc": "accuracy"})
    expected = _by_hand(model, {}, X, y, X[["group", "sex"]].to_numpy(), splits,
                        demographic_parity_difference)
    np.testing.assert_allclose(scores["test_dpd"], -expected, atol=1e-12)
    # single-metric scoring goes through scorer.__call__
    single = cross_val_score(model, X, y, cv=splits, scoring=scorer)
    np.testing.assert_allclose(single, -expected, atol=1e-12)


def test_routing_off_numpy_X_with_column_position_and_sample_weight():
    X, y = _data(seed=2)
    codes = X["group"].map({"a": 0, "b": 1, "c": 2}).to_numpy()
    X_array = np.column_stack([X[["x1", "x2"]].to_numpy(), codes])
    weights = np.random.RandomState(0).uniform(0.5, 2.0, size=len(y))
    splits = _splits(X_array, y)
    scorer = get_fairness_scorer("equal_opportunity_difference", sensitive_column=2)
    search = GridSearchCV(LogisticRegression(), {"C": [0.1, 1.0]}, cv=splits, refit=False,
                          scoring={"acc": "accuracy", "eop": scorer})
    search.fit(X_array, y, sample_weight=weights)
    for index, params in enumerate(search.cv_results_["params"]):
        for i, (train, test) in enumerate(splits):
            fitted = LogisticRegression(**params).fit(X_array[train], y[train],
                                                      sample_weight=weights[train])
            expected = equal_opportunity_difference(
                y[test], fitted.predict(X_array[test]), sensitive_features=codes[test],
                sample_weight=weights[test])
            assert search.cv_results_[f"split{i}_test_eop"][index] == pytest.approx(
                -expected, abs=1e-12)


def test_routing_off_without_column_explains_both_ways():
    X, y = _data()
    scorer = get_fairness_scorer("demographic_parity_difference")
    with pytest.raises(ValueError) as info:
        cross_validate(_drop_group_model(), X, y, cv=3, scoring={"dpd": scorer},
                       error_score="raise")
    message = str(info.value)
    assert "enable_metadata_routing=True" in message
    assert "set_score_request(sensitive_features=True)" in message
    assert "sensitive_column" in message


def test_direct_call_with_sensitive_features_by_hand():
    X, y = _data()
    model = _drop_group_model().fit(X, y)
    groups = X["group"].to_numpy()
    expected = demographic_parity_difference(y, model.predict(X), sensitive_features=groups)
    scorer = get_fairness_scorer("demographic_parity_difference")
    assert scorer(model, X, y, sensitive_features=groups) == pytest.approx(-expected)
    with_column = get_fairness_scorer("demographic_parity_difference", sensitive_column="group")
    assert with_column(model, X, y) == pytest.approx(-expected)
    with pytest.raises(ValueError, match="only supported if enable_metadata_routing=True"):
        scorer(model, X, y, sensitive_features=groups, other=1)


# --------------------------------------------------------------- routing on
def test_grid_search_routing_on_receives_sensitive_features():
    X, y = _data(seed=3)
    groups = X["group"].to_numpy()
    X_numeric = X[["x1", "x2"]]
    splits = _splits(X, y)
    model = make_pipeline(LogisticRegression())
    with sklearn.config_context(enable_metadata_routing=True):
        dpd = get_fairness_scorer("demographic_parity_difference")
        dpd.set_score_request(sensitive_features=True)
        eop = make_fairness_scorer("equal_opportunity_difference", method="one_vs_rest")
        eop.set_score_request(sensitive_features=True)
        search = GridSearchCV(model, GRID, cv=splits, refit=False,
                              scoring={"acc": "accuracy", "dpd": dpd, "eop": eop})
        search.fit(X_numeric, y, sensitive_features=groups)
    _check_fold_scores(search, model, X_numeric, y, groups, splits, "dpd",
                       demographic_parity_difference)
    _check_fold_scores(search, model, X_numeric, y, groups, splits, "eop",
                       equal_opportunity_difference, method="one_vs_rest")


def test_cross_validate_routing_on_routed_wins_over_column():
    X, y = _data(seed=4)
    groups = X["group"].to_numpy()
    X_decoy = X[["x1", "x2"]].assign(decoy="same")  # one group: gap 0 if it were used
    model = _drop_group_model(["decoy"])
    splits = _splits(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_fairness_scorer("demographic_parity_difference", sensitive_column="decoy")
        scorer.set_score_request(sensitive_features=True)
        scores = cross_validate(model, X_decoy, y, cv=splits, scoring={"dpd": scorer},
                                params={"sensitive_features": groups})
        single = cross_val_score(model, X_decoy, y, cv=splits, scoring=scorer,
                                 params={"sensitive_features": groups})
    expected = _by_hand(model, {}, X_decoy, y, groups, splits, demographic_parity_difference)
    assert np.any(expected > 0)
    np.testing.assert_allclose(scores["test_dpd"], -expected, atol=1e-12)
    np.testing.assert_allclose(single, -expected, atol=1e-12)


def test_routing_on_column_still_works_without_metadata():
    X, y = _data(seed=5)
    splits = _splits(X, y)
    model = _drop_group_model()
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = get_fairness_scorer("demographic_parity_difference", sensitive_column="group")
        scores = cross_validate(model, X, y, cv=splits, scoring={"dpd": scorer})
    expected = _by_hand(model, {}, X, y, X["group"].to_numpy(), splits,
                        demographic_parity_difference)
    np.testing.assert_allclose(scores["test_dpd"], -expected, atol=1e-12)


def test_routing_on_errors():
    X, y = _data()
    groups = X["group"].to_numpy()
    X_numeric = X[["x1", "x2"]]
    with sklearn.config_context(enable_metadata_routing=True):
        opted_out = get_fairness_scorer("demographic_parity_difference")
        opted_out.set_score_request(sensitive_features=False)
        # metadata passed, but nobody requests it: sklearn refuses
        with pytest.raises(TypeError, match="sensitive_features.*not routed to any object"):
            cross_validate(LogisticRegression(), X_numeric, y, cv=3,
                           scoring={"dpd": opted_out}, params={"sensitive_features": groups},
                           error_score="raise")
        # nothing passed and no column: our message
        default = get_fairness_scorer("demographic_parity_difference")
        with pytest.raises(ValueError, match="Metadata routing is enabled, but no "
                                             "sensitive_features reached this scorer"):
            cross_validate(LogisticRegression(), X_numeric, y, cv=3, scoring={"dpd": default},
                           error_score="raise")


def test_metadata_routing_requests():
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = get_fairness_scorer("equalized_odds_difference")
        default = get_routing_for_object(scorer).score.requests
        assert default["sensitive_features"] is True  # requested by default
        assert default["sample_weight"] is None  # sklearn's default for the rest
        assert scorer.set_score_request(sensitive_features=True) is scorer
        assert get_routing_for_object(scorer).score.requests["sensitive_features"] is True
        # setting another request keeps the groups' request (sklearn would reset it)
        scorer.set_score_request(sample_weight=True)
        requests = scorer.get_metadata_routing().score.requests
        assert requests["sensitive_features"] is True and requests["sample_weight"] is True
        scorer.set_score_request(sensitive_features="groups")  # an alias
        requests = scorer.get_metadata_routing().score.requests
        assert requests["sensitive_features"] == "groups" and requests["sample_weight"] is True
        scorer.set_score_request(sensitive_features=False)
        assert scorer.get_metadata_routing().score.requests["sensitive_features"] is False
        # a fresh scorer is not affected
        fresh = get_fairness_scorer("equalized_odds_difference")
        assert get_routing_for_object(fresh).score.requests["sensitive_features"] is True
    with pytest.raises(RuntimeError, match="metadata routing is enabled"):
        get_fairness_scorer("equalized_odds_difference").set_score_request(
            sensitive_features=True)


def test_alias_routing_in_grid_search():
    X, y = _data(seed=6)
    groups = X["group"].to_numpy()
    splits = _splits(X, y)
    model = make_pipeline(LogisticRegression())
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = get_fairness_scorer("demographic_parity_difference").set_score_request(
            sensitive_features="protected")
        search = GridSearchCV(model, GRID, cv=splits, refit=False, scoring={"dpd": scorer})
        search.fit(X[["x1", "x2"]], y, protected=groups)
    _check_fold_scores(search, model, X[["x1", "x2"]], y, groups, splits, "dpd",
                       demographic_parity_difference)


# ---------------------------------------------------------- construction
def test_scorer_signs_and_kwargs():
    X, y = _data()
    model = _drop_group_model().fit(X, y)
    groups = X["group"].to_numpy()
    y_pred = model.predict(X)
    wga = get_fairness_scorer("worst_group_accuracy", sensitive_column="group")
    assert wga(model, X, y) == pytest.approx(
        worst_group_accuracy(y, y_pred, sensitive_features=groups))
    flipped = make_fairness_scorer("worst_group_accuracy", greater_is_better=False,
                                   sensitive_column="group")
    assert flipped(model, X, y) == pytest.approx(-wga(model, X, y))
    eod = make_fairness_scorer("equalized_odds_difference", sensitive_column="group",
                               method="one_vs_rest", agg="mean")
    assert eod(model, X, y) == pytest.approx(-equalized_odds_difference(
        y, y_pred, sensitive_features=groups, method="one_vs_rest", agg="mean"))


def test_string_labels_need_pos_label():
    X, y = _data()
    y_text = np.where(y == 1, "yes", "no")
    model = _drop_group_model().fit(X, y_text)
    scorer = make_fairness_scorer("equal_opportunity_difference", sensitive_column="group",
                                  pos_label="yes")
    expected = equal_opportunity_difference(y_text, model.predict(X), pos_label="yes",
                                            sensitive_features=X["group"])
    assert scorer(model, X, y_text) == pytest.approx(-expected)


def test_custom_metric_callable():
    def max_group_error(y_true, y_pred, *, sensitive_features):
        return 1.0 - worst_group_accuracy(y_true, y_pred, sensitive_features=sensitive_features)

    X, y = _data()
    model = _drop_group_model().fit(X, y)
    scorer = make_fairness_scorer(max_group_error, sensitive_column="group")
    expected = max_group_error(y, model.predict(X), sensitive_features=X["group"])
    assert scorer(model, X, y) == pytest.approx(-expected)
    assert "max_group_error" in repr(scorer)


def test_construction_errors():
    with pytest.raises(ValueError, match="not a known fairness metric"):
        make_fairness_scorer("accuracy")
    with pytest.raises(ValueError, match="must be a fairness metric name or a callable"):
        make_fairness_scorer(3)
    with pytest.raises(ValueError, match="has no sensitive_features parameter"):
        make_fairness_scorer(lambda y_true, y_pred: 0.0)
    with pytest.raises(ValueError, match=r"\['metod'\] are not parameters"):
        make_fairness_scorer("demographic_parity_difference", metod="one_vs_rest")
    with pytest.raises(ValueError, match="cannot be fixed in a scorer"):
        make_fairness_scorer("demographic_parity_difference", sensitive_features=[0, 1])
    with pytest.raises(ValueError, match="is not a fairness scorer"):
        get_fairness_scorer("dpd")


def test_bad_sensitive_column_message():
    X, y = _data()
    model = _drop_group_model().fit(X, y)
    scorer = get_fairness_scorer("demographic_parity_difference", sensitive_column="sex")
    with pytest.raises(ValueError, match=r"sensitive_column='sex': \['sex'\] not among"):
        scorer(model, X, y)


def test_names_repr_and_fresh_instances():
    names = get_fairness_scorer_names()
    assert set(names) >= {
        "demographic_parity_difference", "equalized_odds_difference",
        "equal_opportunity_difference", "false_negative_rate_difference",
        "false_positive_rate_difference", "worst_group_accuracy",
        "demographic_parity_ratio", "equalized_odds_ratio", "equal_opportunity_ratio",
    }
    assert get_fairness_scorer(names[0]) is not get_fairness_scorer(names[0])
    scorer = make_fairness_scorer("equalized_odds_difference", sensitive_column="g", agg="mean")
    assert repr(scorer) == (
        "make_fairness_scorer(equalized_odds_difference, sensitive_column='g', agg='mean')"
    )


def test_scorer_pickles_and_clones_inside_search():
    X, y = _data()
    scorer = get_fairness_scorer("demographic_parity_difference", sensitive_column="group")
    model = _drop_group_model().fit(X, y)
    restored = pickle.loads(pickle.dumps(scorer))
    assert restored(model, X, y) == scorer(model, X, y)
    search = GridSearchCV(_drop_group_model(), GRID, scoring={"dpd": scorer}, refit="dpd")
    assert clone(search).scoring["dpd"](model, X, y) == scorer(model, X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        requested = get_fairness_scorer("demographic_parity_difference").set_score_request(
            sensitive_features=True)
        copy = pickle.loads(pickle.dumps(requested))
        assert get_routing_for_object(copy).score.requests["sensitive_features"] is True


# ---------------------------------------------- default request (routing on)
def test_grid_search_routing_on_without_set_score_request():
    X, y = _data(seed=7)
    groups = X["group"].to_numpy()
    X_numeric = X[["x1", "x2"]]
    splits = _splits(X, y)
    model = make_pipeline(LogisticRegression())
    with sklearn.config_context(enable_metadata_routing=True):
        scoring = {
            "acc": "accuracy",
            "dpd": get_fairness_scorer("demographic_parity_difference"),
            "dpr": get_fairness_scorer("demographic_parity_ratio"),
            "eor": make_fairness_scorer("equalized_odds_ratio", method="to_overall"),
        }
        search = GridSearchCV(model, GRID, cv=splits, refit="dpr", scoring=scoring)
        search.fit(X_numeric, y, sensitive_features=groups)
        # a single fairness scorer, no dict
        single = GridSearchCV(model, GRID, cv=splits, scoring=scoring["dpd"])
        single.fit(X_numeric, y, sensitive_features=groups)
    _check_fold_scores(search, model, X_numeric, y, groups, splits, "dpd",
                       demographic_parity_difference)
    _check_fold_scores(search, model, X_numeric, y, groups, splits, "dpr",
                       demographic_parity_ratio, sign=1)
    _check_fold_scores(search, model, X_numeric, y, groups, splits, "eor",
                       equalized_odds_ratio, sign=1, method="to_overall")
    np.testing.assert_allclose(single.cv_results_["mean_test_score"],
                               search.cv_results_["mean_test_dpd"], atol=1e-12)
    assert np.all(search.cv_results_["mean_test_dpr"] < 1)  # real disparities


def test_cross_validate_default_request_with_skdp_estimator():
    X, y = _data(seed=8)
    groups = X["group"].to_numpy()
    X_numeric = X[["x1", "x2"]].to_numpy()
    splits = _splits(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = DPSGDClassifier(epsilon=None, batch_size=32, max_steps=20, random_state=0)
        clf.set_fit_request(sensitive_features=True)
        scores = cross_validate(
            clf, X_numeric, y, cv=splits, return_estimator=True,
            scoring={"eop": get_fairness_scorer("equal_opportunity_ratio")},
            params={"sensitive_features": groups},
        )
    for fitted, (_, test), stored in zip(scores["estimator"], splits, scores["test_eop"]):
        expected = equal_opportunity_ratio(y[test], fitted.predict(X_numeric[test]),
                                           sensitive_features=groups[test])
        assert stored == pytest.approx(expected, abs=1e-12)


def test_default_request_survives_other_requests_in_search():
    X, y = _data(seed=9)
    groups = X["group"].to_numpy()
    weights = np.random.RandomState(1).uniform(0.5, 2.0, size=len(y))
    splits = _splits(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = get_fairness_scorer("demographic_parity_difference")
        scorer.set_score_request(sample_weight=True)
        model = LogisticRegression().set_fit_request(sample_weight=False)
        scores = cross_validate(model, X[["x1", "x2"]], y, cv=splits,
                                scoring={"dpd": scorer}, return_estimator=True,
                                params={"sensitive_features": groups, "sample_weight": weights})
    unweighted = []
    for fitted, (_, test), stored in zip(scores["estimator"], splits, scores["test_dpd"]):
        y_pred = fitted.predict(X[["x1", "x2"]].iloc[test])
        expected = demographic_parity_difference(
            y[test], y_pred, sensitive_features=groups[test], sample_weight=weights[test])
        assert stored == pytest.approx(-expected, abs=1e-12)
        unweighted.append(-demographic_parity_difference(y[test], y_pred,
                                                         sensitive_features=groups[test]))
    assert not np.allclose(unweighted, scores["test_dpd"])  # the weights did reach it


# ------------------------------------------- no groups with routing off
def _assert_explains_routing_off(message):
    assert "Metadata routing is off" in message
    assert "enable_metadata_routing=True" in message
    assert "sensitive_column=" in message


def test_routing_off_no_groups_direct_call_raises():
    X, y = _data()
    model = _drop_group_model().fit(X, y)
    for name in get_fairness_scorer_names():
        with pytest.raises(ValueError) as info:
            get_fairness_scorer(name)(model, X, y)
        _assert_explains_routing_off(str(info.value))
        assert name in str(info.value)  # the message names the scorer


@pytest.mark.parametrize("multimetric", [False, True])
def test_routing_off_no_groups_in_grid_search(multimetric):
    """scikit-learn catches every exception of a scorer: with the default
    error_score=np.nan the score is NaN and the "Scoring failed" warning holds
    our explanation; error_score="raise" raises our ValueError itself."""
    X, y = _data()
    scorer = get_fairness_scorer("demographic_parity_difference")
    scoring = {"acc": "accuracy", "dpd": scorer} if multimetric else scorer
    refit = "acc" if multimetric else False
    key = "mean_test_dpd" if multimetric else "mean_test_score"
    search = GridSearchCV(_drop_group_model(), GRID, cv=3, scoring=scoring, refit=refit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y)
    failed = [str(w.message) for w in caught if "Scoring failed" in str(w.message)]
    assert len(failed) == 3 * len(GRID["logisticregression__C"])
    for message in failed:
        _assert_explains_routing_off(message)
    assert np.all(np.isnan(search.cv_results_[key]))
    with pytest.raises(ValueError, match="Metadata routing is off(.|\n)*sensitive_column="):
        search.set_params(error_score="raise").fit(X, y)
