"""DPMetricFrame: exact parity with fairlearn, sensitivity of its release,
interval coverage, verdicts and accounting."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import (
    MetricFrame,
    count,
    false_negative_rate,
    false_positive_rate,
    selection_rate,
    true_negative_rate,
    true_positive_rate,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, precision_score, recall_score

from skdp.exceptions import PrivacyLeakWarning
from skdp.metrics import FRAME_METRICS, DPMetricFrame
from skdp.privacy import PrivacyLedger, compute_epsilon

FUNCTIONS = [selection_rate, accuracy_score, true_positive_rate, recall_score,
             false_negative_rate, false_positive_rate, true_negative_rate, precision_score,
             count]
ALL = {f.__name__: f for f in FUNCTIONS}


def _exact(y, p, g, metrics=ALL):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = DPMetricFrame(metrics=metrics, y_true=y, y_pred=p, sensitive_features=g,
                             epsilon=None)
        theirs = MetricFrame(metrics=metrics, y_true=y, y_pred=p, sensitive_features=g)
    return ours, theirs


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_without_privacy_the_frame_equals_fairlearn(data):
    n = data.draw(st.integers(2, 60))  # fairlearn refuses a single record
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    p = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    g = np.array(data.draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n,
                                    max_size=n)))
    _assert_same_frames(*_exact(y, p, g))


def _assert_same_frames(ours, theirs):
    """Every value of a DPMetricFrame equals fairlearn's, exactly."""
    def same(a, b):
        check = (pd.testing.assert_frame_equal if isinstance(a, pd.DataFrame)
                 else pd.testing.assert_series_equal)
        check(a, b, check_exact=True, check_dtype=False)

    same(ours.by_group, theirs.by_group)
    same(ours.overall, theirs.overall)
    for method in ("between_groups", "to_overall"):
        same(ours.difference(method), theirs.difference(method))
        same(ours.ratio(method), theirs.ratio(method))
    same(ours.group_min(), theirs.group_min())
    same(ours.group_max(), theirs.group_max())


def test_a_single_metric_gives_scalars_and_series_like_fairlearn():
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    g = rng.choice(["x", "y"], 200)
    ours, theirs = _exact(y, p, g, metrics=selection_rate)
    assert ours.overall == theirs.overall
    pd.testing.assert_series_equal(ours.by_group, theirs.by_group, check_exact=True)
    assert ours.difference() == theirs.difference()


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_one_record_or_unit_moves_the_release_by_at_most_its_sensitivity(data):
    """Adding or removing one record (one unit with unit_ids) moves the
    counts released, before noise, by at most 1 in l2."""
    n = data.draw(st.integers(2, 50))
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    p = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    g = np.array(data.draw(st.lists(st.sampled_from([0, 1, 2]), min_size=n, max_size=n)))
    units = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    by_unit = data.draw(st.booleans())
    gone = units == units[0] if by_unit else np.arange(n) == 0

    def counts(keep):
        kwargs = {}
        if by_unit:  # every unit keeps all its records: the factors are 1 / size
            kwargs = {"unit_ids": units[keep], "max_records_per_unit": n}
        return DPMetricFrame(metrics="selection_rate", y_true=y[keep], y_pred=p[keep],
                             sensitive_features=g[keep], sensitive_groups=[0, 1, 2],
                             epsilon=None, random_state=0, **kwargs).counts_

    moved = np.linalg.norm(counts(np.ones(n, bool)) - counts(~gone)) if (~gone).any() else 0
    assert moved <= 1.0 + 1e-12
    # regression: a count and two sums of errors bounded to [0, 1] after scaling
    errors = np.array(data.draw(st.lists(st.floats(-1e300, 1e300), min_size=n, max_size=n)))

    def sums(keep):
        kwargs = {"unit_ids": units[keep], "max_records_per_unit": n} if by_unit else {}
        return DPMetricFrame(metrics="mean_squared_error", y_true=errors[keep],
                             y_pred=np.zeros(keep.sum()), sensitive_features=g[keep],
                             sensitive_groups=[0, 1, 2], error_bound=2.0, epsilon=None,
                             random_state=0, **kwargs).counts_

    if (~gone).any():
        assert np.linalg.norm(sums(np.ones(n, bool)) - sums(~gone)) <= math.sqrt(3) + 1e-12


def _population(rng, n_groups=3):
    base = rng.uniform(0.3, 0.7, n_groups)  # P(y = 1 | g)
    tpr = rng.uniform(0.5, 0.95, n_groups)
    fpr = rng.uniform(0.05, 0.4, n_groups)
    return base, tpr, fpr


def test_intervals_cover_the_population_values():
    """Over 500 simulated evaluation sets with groups of 20, 60 and 200
    records, the 95 % intervals of the group rates and of the demographic
    parity and equalized-odds differences cover the population's values in
    at least 93 % of runs (epsilon=1)."""
    rng = np.random.default_rng(0)
    sizes = np.array([20, 60, 200])
    base, tpr, fpr = _population(rng)
    true = {"selection_rate": base * tpr + (1 - base) * fpr, "true_positive_rate": tpr,
            "false_positive_rate": fpr}
    true_dp = np.ptp(true["selection_rate"])
    true_eo = max(np.ptp(tpr), np.ptp(fpr))
    covered = {name: [] for name in true}
    covered_small = {name: [] for name in true}
    dp_covered, eo_covered, widths = [], [], []
    groups = np.repeat(np.arange(3), sizes)
    for run in range(500):
        y = (rng.random(groups.size) < base[groups]).astype(int)
        p = (rng.random(groups.size) < np.where(y == 1, tpr[groups], fpr[groups])).astype(int)
        frame = DPMetricFrame(metrics={k: k for k in true}, y_true=y, y_pred=p,
                              sensitive_features=groups, sensitive_groups=[0, 1, 2],
                              epsilon=1.0, random_state=run)
        intervals = frame.by_group_interval
        for name, values in true.items():
            inside = (intervals[(name, "low")] <= values) & (values <= intervals[(name, "high")])
            covered[name].extend(inside.tolist())
            covered_small[name].append(bool(inside.iloc[0]))
        low, high = frame.difference_interval()["selection_rate"]
        dp_covered.append(low <= true_dp <= high)
        widths.append(high - low)
        _, low, high = frame.largest_difference_interval(
            ["true_positive_rate", "false_positive_rate"])
        eo_covered.append(low <= true_eo <= high)
    for name in true:
        assert np.mean(covered[name]) >= 0.93, (name, np.mean(covered[name]))
        assert np.mean(covered_small[name]) >= 0.93, (name, np.mean(covered_small[name]))
    assert np.mean(dp_covered) >= 0.93 and np.mean(eo_covered) >= 0.93
    assert np.median(widths) < 1.0  # the intervals say something


def test_the_release_is_accounted_and_noise_matches_the_budget():
    rng = np.random.default_rng(1)
    y, p, g = rng.integers(0, 2, 500), rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    frame = DPMetricFrame(metrics=ALL, y_true=y, y_pred=p, sensitive_features=g,
                          sensitive_groups=[0, 1], epsilon=0.5, delta=1e-6, random_state=0)
    assert frame.epsilon_ == pytest.approx(compute_epsilon(frame.dp_event_, 1e-6))
    assert 0.99 * 0.5 <= frame.epsilon_ <= 0.5
    assert frame.noise_std_ > 0 and frame.privacy_unit_ == "record"
    exact = DPMetricFrame(metrics=ALL, y_true=y, y_pred=p, sensitive_features=g,
                          sensitive_groups=[0, 1], epsilon=None)
    assert not np.array_equal(frame.counts_, exact.counts_)
    assert exact.noise_std_ == 0.0 and math.isinf(exact.epsilon_)


def test_small_groups_are_undetermined_not_exact():
    rng = np.random.default_rng(2)
    g = np.r_[np.zeros(2000, int), np.ones(3, int)]
    y, p = rng.integers(0, 2, g.size), rng.integers(0, 2, g.size)
    frame = DPMetricFrame(metrics={"sel": "selection_rate"}, y_true=y, y_pred=p,
                          sensitive_features=g, sensitive_groups=[0, 1], epsilon=0.3,
                          random_state=0)
    assert np.isnan(frame.by_group.loc[1, "sel"])
    assert tuple(frame.by_group_interval.loc[1]) == (0.0, 1.0)
    assert frame.within(0.5)["sel"] == "undetermined"
    assert np.isfinite(frame.by_group.loc[0, "sel"])


def test_verdicts_follow_the_interval():
    rng = np.random.default_rng(3)
    g = rng.integers(0, 2, 20000)
    y = rng.integers(0, 2, g.size)
    p = (rng.random(g.size) < np.where(g == 1, 0.6, 0.3)).astype(int)
    frame = DPMetricFrame(metrics={"sel": "selection_rate"}, y_true=y, y_pred=p,
                          sensitive_features=g, sensitive_groups=[0, 1], random_state=0)
    low, high = frame.difference_interval()["sel"]
    assert low < 0.3 < high
    assert frame.within(0.5)["sel"] == "met"
    assert frame.within(0.1)["sel"] == "violated"
    assert frame.within(0.3)["sel"] == "undetermined"


def test_bad_input_is_named():
    y = np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match="cannot derive"):
        DPMetricFrame(metrics=np.mean, y_true=y, y_pred=y, sensitive_features=y,
                      sensitive_groups=[0, 1])
    with pytest.raises(ValueError, match="outside sensitive_groups"):
        DPMetricFrame(metrics="count", y_true=y, y_pred=y, sensitive_features=y,
                      sensitive_groups=[0])
    with pytest.warns(PrivacyLeakWarning, match="sensitive_groups"):
        DPMetricFrame(metrics="count", y_true=y, y_pred=y, sensitive_features=y,
                      random_state=0)
    with pytest.raises(ValueError, match="y_pred has missing values"):
        DPMetricFrame(metrics="count", y_true=y, y_pred=np.array([0, 1, np.nan, 0]),
                      sensitive_features=y, sensitive_groups=[0, 1])
    with pytest.raises(ValueError, match="same length"):
        DPMetricFrame(metrics="count", y_true=y, y_pred=y[:3], sensitive_features=y,
                      sensitive_groups=[0, 1])
    assert set(FRAME_METRICS) >= set(ALL)


def test_a_ledger_charges_the_release(tmp_path):
    ledger = PrivacyLedger.create(tmp_path / "l", max_epsilon=1.5, delta=1e-4)
    y = np.arange(100) % 2
    with ledger.charging("fairness report"):
        frame = DPMetricFrame(metrics="selection_rate", y_true=y, y_pred=y,
                              sensitive_features=y, sensitive_groups=[0, 1], random_state=0)
    [entry] = ledger.entries
    assert entry.what == "DPMetricFrame (fairness report)"
    assert entry.epsilon == pytest.approx(frame.epsilon_)


# ------------------------------------------------------------------ scorers
def _adult_like(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"x": rng.normal(size=n), "group": rng.integers(0, 3, n)})
    y = (X["x"] + 0.5 * X["group"] > 0.5).astype(int)
    return X, y


def test_private_scorers_in_cross_validate_compose_with_spent_and_the_ledger(tmp_path):
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_validate
    from sklearn.pipeline import make_pipeline

    from skdp.metrics import PRIVATE_FAIRNESS_METRICS, make_private_fairness_scorer
    from skdp.model_selection import spent

    X, y = _adult_like()
    model = make_pipeline(make_column_transformer(("drop", ["group"]), remainder="passthrough"),
                          LogisticRegression())
    scorers = {name: make_private_fairness_scorer(name, sensitive_groups=[0, 1, 2],
                                                  sensitive_column="group", epsilon=0.5,
                                                  random_state=0)
               for name in PRIVATE_FAIRNESS_METRICS}
    ledger = PrivacyLedger.create(tmp_path / "l", max_epsilon=100.0, delta=1e-3)
    with ledger.charging("cv"):
        scores = cross_validate(model, X, y, cv=3, scoring=scorers, error_score="raise")
    assert len(ledger.entries) == 3 * len(scorers)
    for name, scorer in scorers.items():
        values = scores[f"test_{name}"]
        assert np.isfinite(values).all()
        assert (values <= 0).all() if name.endswith("difference") else (values >= 0).all()
        assert len(scorer.dp_events) == 3
        total = spent(scorer)
        assert total.epsilon == pytest.approx(compute_epsilon(scorer.dp_event_, 3e-5))
        assert 0.5 < total.epsilon < 1.5
    # a model and its private report compose
    from skdp import DPSGDClassifier

    clf = DPSGDClassifier(max_steps=20, model_check=False, random_state=0).fit(X[["x"]], y)
    frame = DPMetricFrame(metrics="selection_rate", y_true=y, y_pred=clf.predict(X[["x"]]),
                          sensitive_features=X["group"], sensitive_groups=[0, 1, 2],
                          random_state=0)
    both = spent([clf, frame])
    assert both.epsilon > max(clf.epsilon_, frame.epsilon_)
    assert [name for name, _, _ in both.steps] == ["DPSGDClassifier", "DPMetricFrame"]


def test_the_private_metric_is_close_to_the_exact_one_on_large_groups():
    from skdp.metrics import dp_fairness_metric, equalized_odds_difference

    X, y = _adult_like(30000, seed=1)
    pred = (X["x"] > 0).astype(int)
    value, frame = dp_fairness_metric("equalized_odds_difference", y, pred,
                                      sensitive_features=X["group"],
                                      sensitive_groups=[0, 1, 2], random_state=0)
    exact = equalized_odds_difference(y, pred, sensitive_features=X["group"])
    assert abs(value - exact) < 0.05
    _, low, high = frame.largest_difference_interval(["true_positive_rate",
                                                      "false_positive_rate"])
    assert low <= exact <= high


def test_plot_draws_each_group_with_its_interval():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, 3000)
    y, p = rng.integers(0, 2, 3000), rng.integers(0, 2, 3000)
    frame = DPMetricFrame(metrics={"sel": "selection_rate", "tpr": "true_positive_rate"},
                          y_true=y, y_pred=p, sensitive_features=g, sensitive_groups=[0, 1, 2],
                          random_state=0)
    ax = frame.plot("tpr", bound=0.05)
    assert len(ax.get_yticks()) == 3
    [segments] = [c for c in ax.collections if len(c.get_segments()) == 3]
    intervals = frame.by_group_interval
    for i, segment in enumerate(segments.get_segments()):
        assert segment[0][0] == pytest.approx(intervals.loc[i, ("tpr", "low")])
        assert segment[1][0] == pytest.approx(intervals.loc[i, ("tpr", "high")])
    with pytest.raises(ValueError, match="name one of"):
        frame.plot()
    plt.close("all")


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_control_features_equal_fairlearn(data):
    n = data.draw(st.integers(6, 60))
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    p = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    g = np.array(data.draw(st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n)))
    c = np.array(data.draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=n,
                                    max_size=n)))
    g[:6], c[:6] = list("ababab"), list("xxyyzz")  # every (control, group) present
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = DPMetricFrame(metrics=ALL, y_true=y, y_pred=p, sensitive_features=g,
                             control_features=c, epsilon=None)
        theirs = MetricFrame(metrics=ALL, y_true=y, y_pred=p, sensitive_features=g,
                             control_features=c)
    _assert_same_frames(ours, theirs)


def test_control_levels_share_one_release_and_have_their_own_intervals():
    rng = np.random.default_rng(4)
    n = 20000
    c = rng.integers(0, 2, n)
    g = rng.integers(0, 2, n)
    y = rng.integers(0, 2, n)
    # a gap of 0.3 in control level 1, none in level 0
    p = (rng.random(n) < 0.4 + 0.3 * (g == 1) * (c == 1)).astype(int)
    frame = DPMetricFrame(metrics={"sel": "selection_rate"}, y_true=y, y_pred=p,
                          sensitive_features=g, sensitive_groups=[0, 1], control_features=c,
                          control_groups=[0, 1], random_state=0)
    assert frame.counts_.shape == (2, 2, 4)
    intervals = frame.difference_interval()
    assert intervals[0]["sel"][0] < 0.05 < 0.25 < intervals[1]["sel"][0]
    verdicts = frame.within(0.1)
    assert verdicts.loc[0, "sel"] == "met" and verdicts.loc[1, "sel"] == "violated"
    assert frame.by_group_interval.index.names == ["control_feature_0", "sensitive_feature_0"]
    with pytest.raises(ValueError, match="control level"):
        frame.plot("sel")


# --------------------------------------------------------------- regression
def test_regression_metrics_equal_fairlearn_and_cover_population_means():
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    rng = np.random.default_rng(5)
    g = rng.integers(0, 3, 600)
    y = rng.normal(size=600)
    pred = y + rng.normal(scale=np.array([0.5, 1.0, 1.5])[g])
    metrics = {"mae": mean_absolute_error, "mse": mean_squared_error}
    ours = DPMetricFrame(metrics=metrics, y_true=y, y_pred=pred, sensitive_features=g,
                         sensitive_groups=[0, 1, 2], error_bound=1.0, epsilon=None)
    theirs = MetricFrame(metrics=metrics, y_true=y, y_pred=pred, sensitive_features=g)
    pd.testing.assert_frame_equal(ours.by_group, theirs.by_group, check_exact=False,
                                  rtol=1e-12, check_dtype=False, check_index_type=False)
    pd.testing.assert_series_equal(ours.overall, theirs.overall, rtol=1e-12)
    # the release clips errors at the bound: the intervals cover the clipped means
    bound, scales = 3.0, np.array([0.5, 1.0, 1.5])
    draws = rng.normal(size=(200000, 3)) * scales
    clipped_mae = np.minimum(np.abs(draws), bound).mean(0)
    clipped_mse = np.minimum(draws**2, bound**2).mean(0)
    covered = []
    for run in range(300):
        groups = np.repeat(np.arange(3), [30, 100, 400])
        errors = rng.normal(size=groups.size) * scales[groups]
        frame = DPMetricFrame(metrics={"mae": "mean_absolute_error",
                                       "mse": "mean_squared_error"},
                              y_true=errors, y_pred=np.zeros(groups.size),
                              sensitive_features=groups, sensitive_groups=[0, 1, 2],
                              error_bound=bound, epsilon=1.0, random_state=run)
        iv = frame.by_group_interval
        for name, truth in (("mae", clipped_mae), ("mse", clipped_mse)):
            covered.extend(((iv[(name, "low")] <= truth) & (truth <= iv[(name, "high")])).tolist())
    assert np.mean(covered) >= 0.93
    assert frame.noise_std_ == pytest.approx(
        DPMetricFrame(metrics="count", y_true=y, y_pred=y, sensitive_features=g,
                      sensitive_groups=[0, 1, 2], random_state=0).noise_std_ * math.sqrt(3))


def test_regression_needs_a_bound_and_one_kind_of_metric():
    y = np.arange(6.0)
    with pytest.raises(ValueError, match="error_bound"):
        DPMetricFrame(metrics="mean_squared_error", y_true=y, y_pred=y, sensitive_features=y,
                      sensitive_groups=list(y))
    with pytest.raises(ValueError, match="mixes"):
        DPMetricFrame(metrics={"a": "mean_squared_error", "b": "selection_rate"}, y_true=y,
                      y_pred=y, sensitive_features=y, sensitive_groups=list(y),
                      error_bound=1.0)


def test_one_extreme_record_changes_no_output_into_nan_or_an_error():
    rng = np.random.default_rng(6)
    g = rng.integers(0, 2, 500)
    y = rng.normal(size=500)
    y[0], y[1] = 1.7e308, -1.7e308
    pred = -y  # errors past the float range
    frame = DPMetricFrame(metrics={"mse": "mean_squared_error", "mae": "mean_absolute_error"},
                          y_true=y, y_pred=pred, sensitive_features=g, sensitive_groups=[0, 1],
                          error_bound=2.0, random_state=0)
    assert np.isfinite(frame.counts_).all()
    assert np.isfinite(frame.by_group_interval.to_numpy()).all()
    tiny = DPMetricFrame(metrics="selection_rate", y_true=g, y_pred=g,
                         sensitive_features=np.r_[np.zeros(499, int), 1],
                         sensitive_groups=[0, 1], random_state=0)
    assert np.isfinite(tiny.by_group_interval.to_numpy()).all()


# ------------------------------------------------------------------- scores
def test_score_metrics_give_each_groups_calibration_gap_with_intervals():
    rng = np.random.default_rng(7)
    groups = np.repeat(np.arange(3), [40, 200, 2000])
    true_gap = np.array([0.0, 0.1, -0.05])  # the model over- or under-predicts by group
    base = np.array([0.3, 0.5, 0.4])
    covered = []
    for run in range(300):
        y = (rng.random(groups.size) < base[groups]).astype(int)
        scores = np.clip(base[groups] + true_gap[groups] + rng.normal(0, 0.05, groups.size),
                         0, 1)
        frame = DPMetricFrame(metrics={"gap": "calibration_gap", "mean": "mean_score"},
                              y_true=y, y_pred=scores, sensitive_features=groups,
                              sensitive_groups=[0, 1, 2], epsilon=1.0, random_state=run)
        iv = frame.by_group_interval
        covered.extend(((iv[("gap", "low")] <= true_gap) & (true_gap <= iv[("gap", "high")]))
                       .tolist())
    assert np.mean(covered) >= 0.93
    assert abs(frame.by_group.loc[2, "gap"] + 0.05) < 0.03
    exact = DPMetricFrame(metrics={"gap": "calibration_gap", "mean": "mean_score"}, y_true=y,
                          y_pred=scores, sensitive_features=groups, sensitive_groups=[0, 1, 2],
                          epsilon=None)
    for k in range(3):
        rows = groups == k
        assert exact.by_group.loc[k, "mean"] == pytest.approx(scores[rows].mean(), rel=1e-12)
        assert exact.by_group.loc[k, "gap"] == pytest.approx((scores - y)[rows].mean(),
                                                             abs=1e-12)


def test_a_private_search_scores_a_private_scorer_from_its_own_release():
    from skdp import DPSGDClassifier
    from skdp.metrics import make_private_fairness_scorer
    from skdp.model_selection import PrivateGridSearchCV, best_within

    X, y = _adult_like(4000, seed=2)
    dpd = make_private_fairness_scorer("demographic_parity_difference",
                                       sensitive_groups=[0, 1, 2], sensitive_column="group")
    search = PrivateGridSearchCV(
        DPSGDClassifier(max_steps=30, sensitive_columns="group", model_check=False),
        {"alpha": [0.0, 0.1]}, scoring={"accuracy": "accuracy", "dpd": dpd},
        refit=best_within("dpd", 0.5), epsilon=1.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_dpd"]).all()
    assert dpd.dp_events == []  # scored from the search's histogram: nothing spent twice
    assert search.epsilon_ <= 1.0


def test_the_default_noise_comes_from_the_secure_generator():
    y = np.arange(400) % 2
    frames = [DPMetricFrame(metrics="selection_rate", y_true=y, y_pred=y, sensitive_features=y,
                            sensitive_groups=[0, 1]) for _ in range(2)]
    assert not np.array_equal(frames[0].counts_, frames[1].counts_)  # no seed, no replay
    assert all(np.isfinite(f.counts_).all() for f in frames)
