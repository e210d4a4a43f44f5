"""Tests of the best_within refit rule (skdp.model_selection)."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skdp.metrics import demographic_parity_difference, get_fairness_scorer
from skdp.model_selection import best_within

pd = pytest.importorskip("pandas")


def _results(acc, dpd):
    return {"mean_test_acc": np.array(acc, dtype=float), "mean_test_dpd": np.array(dpd, float),
            "params": [{} for _ in acc]}


def test_picks_most_accurate_within_bound():
    rule = best_within("dpd", 0.1, score="acc")
    # gaps 0.3, 0.05, 0.1, 0.01: candidates 1, 2, 3 qualify; 2 is the most accurate
    results = _results([0.95, 0.8, 0.85, 0.7], [-0.3, -0.05, -0.1, -0.01])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rule(results) == 2


def test_ties_go_to_the_fairer_then_the_first():
    rule = best_within("dpd", 0.2, score="acc")
    assert rule(_results([0.8, 0.8, 0.8], [-0.15, -0.05, -0.05])) == 1
    assert rule(_results([0.8, 0.8], [-0.1, -0.1])) == 0


def test_fallback_to_smallest_gap_warns():
    rule = best_within("dpd", 0.01, score="acc")
    results = _results([0.9, 0.7, 0.8], [-0.3, -0.05, -0.05])
    with pytest.warns(UserWarning, match=r"No candidate has a mean dpd gap <= 0\.01.*gap 0\.05"):
        # candidates 1 and 2 are the fairest; 2 is more accurate
        assert rule(results) == 2


def test_greater_is_better_fairness_score():
    rule = best_within("wga", 0.6, score="acc", greater_is_better=True)
    results = {"mean_test_acc": np.array([0.9, 0.85, 0.8]),
               "mean_test_wga": np.array([0.5, 0.65, 0.7])}
    assert rule(results) == 1
    with pytest.warns(UserWarning, match=r"score >= 0\.8"):
        assert best_within("wga", 0.8, score="acc", greater_is_better=True)(results) == 2


def test_positive_stored_values_are_not_negated_gaps():
    rule = best_within("dpd", 0.1, score="acc")
    with pytest.raises(ValueError, match="does not hold negated gaps.*greater_is_better=False"):
        rule(_results([0.9, 0.8], [0.2, 0.05]))


def test_nan_candidates_are_ignored():
    rule = best_within("dpd", 0.1, score="acc")
    assert rule(_results([np.nan, 0.8, 0.7], [-0.01, np.nan, -0.05])) == 2
    with pytest.raises(ValueError, match="NaN"):
        rule(_results([np.nan, 0.8], [-0.01, np.nan]))


def test_missing_key_lists_available_scorers():
    rule = best_within("fairness", 0.1, score="acc")
    with pytest.raises(ValueError, match=r"fairness='fairness'.*\['acc', 'dpd'\]"):
        rule(_results([0.9], [-0.1]))
    with pytest.raises(ValueError, match="score='accuracy'"):
        best_within("dpd", 0.1)(_results([0.9], [-0.1]))


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("dpd", -0.1), {}, "negative"),
        (("dpd", float("nan")), {}, "finite number"),
        (("dpd", "0.1"), {}, "finite number"),
        ((3, 0.1), {}, "keys"),
        (("dpd", 0.1), {"score": None}, "keys"),
    ],
)
def test_argument_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        best_within(*args, **kwargs)


def test_repr_and_pickle():
    rule = best_within("dpd", 0.05, score="acc")
    assert repr(rule) == "best_within('dpd', 0.05, score='acc')"
    restored = pickle.loads(pickle.dumps(rule))
    results = _results([0.9, 0.8], [-0.1, -0.01])
    assert restored(results) == rule(results) == 1


def test_grid_search_refit_with_best_within():
    rng = np.random.RandomState(0)
    n = 240
    group = rng.choice(["a", "b"], size=n)
    x = rng.normal(size=n) + 1.0 * (group == "a")
    y = (x + rng.normal(scale=0.7, size=n) > 0.5).astype(int)
    X = pd.DataFrame({"x": x, "noise": rng.normal(size=n), "group": group})
    model = make_pipeline(
        ColumnTransformer([("drop_group", "drop", ["group"])], remainder="passthrough"),
        LogisticRegression(),
    )
    grid = {"logisticregression__C": [1e-4, 1e-2, 1.0, 100.0]}
    scoring = {
        "accuracy": "accuracy",
        "dpd": get_fairness_scorer("demographic_parity_difference", sensitive_column="group"),
    }
    search = GridSearchCV(model, grid, scoring=scoring, cv=3, refit="accuracy").fit(X, y)
    gaps = -search.cv_results_["mean_test_dpd"]
    accuracy = search.cv_results_["mean_test_accuracy"]
    bound = float(np.median(gaps))
    qualified = np.flatnonzero(gaps <= bound)
    expected = qualified[np.argmax(accuracy[qualified])]

    fair = clone(search).set_params(refit=best_within("dpd", bound)).fit(X, y)
    assert fair.best_index_ == expected
    assert fair.best_index_ != search.best_index_  # the bound changed the choice
    assert gaps[fair.best_index_] <= bound
    assert fair.best_params_ == search.cv_results_["params"][expected]
    # the refitted model is usable and its training gap can be measured
    y_pred = fair.predict(X)
    assert 0.0 <= demographic_parity_difference(y, y_pred, sensitive_features=group) <= 1.0
    assert pickle.loads(pickle.dumps(fair)).best_index_ == expected
