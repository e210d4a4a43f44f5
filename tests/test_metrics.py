"""Tests of the group-fairness metrics (skdp.metrics._fairness)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skdp.metrics import (
    GroupRates,
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equal_opportunity_ratio,
    equalized_odds_difference,
    equalized_odds_ratio,
    false_negative_rate_difference,
    false_positive_rate_difference,
    group_rates,
    selection_rate,
    worst_group_accuracy,
)

GAP_METRICS = [
    demographic_parity_difference,
    equalized_odds_difference,
    equal_opportunity_difference,
    false_negative_rate_difference,
    false_positive_rate_difference,
]
RATIO_METRICS = [demographic_parity_ratio, equalized_odds_ratio, equal_opportunity_ratio]
METHODS = ["between_groups", "one_vs_rest"]
ALL_METHODS = ["between_groups", "to_overall", "one_vs_rest"]

# Two groups of four: selection a 0.5 / b 0.75; TPR a 0.5 / b 1.0;
# FPR a 0.5 / b 0.5; accuracy a 0.5 / b 0.75.
Y_TRUE = [1, 1, 0, 0, 1, 1, 0, 0]
Y_PRED = [1, 0, 1, 0, 1, 1, 1, 0]
GROUPS = ["a"] * 4 + ["b"] * 4


# ------------------------------------------------------------- reference code
def _ref_rate(condition, event, weights):
    denominator = weights[condition].sum()
    return np.nan if denominator == 0 else weights[condition & event].sum() / denominator


def _ref_ratio(a, b):
    return 1.0 if max(a, b) == 0 else min(a, b) / max(a, b)


def _ref_gap(condition, event, groups, weights, method, kind="difference"):
    """Straightforward per-group loop, the definition written out."""
    compare = (lambda a, b: abs(a - b)) if kind == "difference" else _ref_ratio
    worst = max if kind == "difference" else min
    labels = np.unique(groups)
    rates = {z: _ref_rate(condition & (groups == z), event, weights) for z in labels}
    defined = [z for z in labels if not np.isnan(rates[z])]
    if not defined:
        return np.nan
    if method == "between_groups":
        return compare(max(rates[z] for z in defined), min(rates[z] for z in defined))
    gaps = []
    for z in defined:
        others = groups != z if method == "one_vs_rest" else np.ones_like(condition)
        reference = _ref_rate(condition & others, event, weights)
        if not np.isnan(reference):
            gaps.append(compare(rates[z], reference))
    return worst(gaps, default=0.0 if kind == "difference" else 1.0)


def _ref_dp(y_true, y_pred, groups, weights, method):
    everyone = np.ones(len(y_pred), dtype=bool)
    classes = np.union1d(y_true, y_pred)
    return max(_ref_gap(everyone, y_pred == k, groups, weights, method) for k in classes)


def _ref_eo(y_true, y_pred, groups, weights, method, agg):
    classes = np.union1d(y_true, y_pred)
    per_class = [
        max(_ref_gap(y_true == y, y_pred == k, groups, weights, method) for k in classes)
        for y in np.unique(y_true)
    ]
    return max(per_class) if agg == "worst_case" else float(np.mean(per_class))


def _random_problem(seed, n_classes=2, n_groups=3, n=120, weighted=False, every_cell=True):
    """Random labels that depend on the group; optionally every group has every class."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(n_groups, size=n)
    y_true = (rng.random(n) * n_classes + 0.3 * groups).astype(int) % n_classes
    y_pred = np.where(rng.random(n) < 0.7, y_true, rng.integers(n_classes, size=n))
    if every_cell:  # one sample of each (group, true class)
        cells = np.array([(z, y) for z in range(n_groups) for y in range(n_classes)])
        groups = np.concatenate([groups, cells[:, 0]])
        y_true = np.concatenate([y_true, cells[:, 1]])
        y_pred = np.concatenate([y_pred, rng.integers(n_classes, size=len(cells))])
    weights = rng.uniform(0.1, 3.0, size=len(groups)) if weighted else None
    labels = np.array([f"g{z}" for z in range(n_groups)], dtype=object)[groups]
    return y_true, y_pred, labels, weights


# ------------------------------------------------------------- hand fixtures
def test_hand_computed_binary_values():
    kw = {"sensitive_features": GROUPS}
    assert selection_rate(Y_TRUE, Y_PRED) == 0.625
    assert demographic_parity_difference(Y_TRUE, Y_PRED, **kw) == 0.25
    assert equal_opportunity_difference(Y_TRUE, Y_PRED, **kw) == 0.5
    assert false_negative_rate_difference(Y_TRUE, Y_PRED, **kw) == 0.5
    assert false_positive_rate_difference(Y_TRUE, Y_PRED, **kw) == 0.0
    assert equalized_odds_difference(Y_TRUE, Y_PRED, **kw) == 0.5
    assert equalized_odds_difference(Y_TRUE, Y_PRED, agg="mean", **kw) == 0.25
    assert worst_group_accuracy(Y_TRUE, Y_PRED, **kw) == 0.5
    # with two groups, one-vs-rest is the same gap
    for metric in GAP_METRICS:
        assert metric(Y_TRUE, Y_PRED, method="one_vs_rest", **kw) == metric(Y_TRUE, Y_PRED, **kw)


def test_hand_computed_one_vs_rest_three_groups():
    # selection rates: a 2/4, b 1/4, c 2/2
    y_pred = [1, 1, 0, 0, 1, 0, 0, 0, 1, 1]
    groups = ["a"] * 4 + ["b"] * 4 + ["c"] * 2
    y_true = [0] * 10
    between = demographic_parity_difference(y_true, y_pred, sensitive_features=groups)
    assert between == pytest.approx(1.0 - 0.25)
    # a vs rest 3/6: 0; b vs rest 4/6: 5/12; c vs rest 3/8: 5/8
    one_vs_rest = demographic_parity_difference(
        y_true, y_pred, sensitive_features=groups, method="one_vs_rest"
    )
    assert one_vs_rest == pytest.approx(5 / 8)


def test_hand_computed_multiclass():
    groups = ["a"] * 4 + ["b"] * 4
    # P(k | a) = (0, .25, .75), P(k | b) = (.5, .5, 0): largest gap is class 2
    y_pred = [2, 2, 2, 1, 0, 0, 1, 1]
    assert demographic_parity_difference(y_pred, y_pred, sensitive_features=groups) == 0.75
    y_true = [0, 1, 2, 2, 0, 1, 2, 2]
    y_pred = [0, 1, 2, 0, 0, 0, 2, 2]
    # true 0: no gap; true 1: a predicts 1, b predicts 0 -> 1; true 2: 0.5
    kw = {"sensitive_features": groups}
    assert equalized_odds_difference(y_true, y_pred, **kw) == 1.0
    assert equalized_odds_difference(y_true, y_pred, agg="mean", **kw) == pytest.approx(0.5)
    # class 2 versus the rest: TPR a 0.5, b 1.0; FPR 0 in both groups
    assert equal_opportunity_difference(y_true, y_pred, pos_label=2, **kw) == 0.5
    assert false_positive_rate_difference(y_true, y_pred, pos_label=2, **kw) == 0.0
    assert worst_group_accuracy(y_true, y_pred, **kw) == 0.75


def test_string_labels_and_pos_label():
    y_true = np.where(np.array(Y_TRUE) == 1, "yes", "no")
    y_pred = np.where(np.array(Y_PRED) == 1, "yes", "no")
    kw = {"sensitive_features": GROUPS, "pos_label": "yes"}
    assert equal_opportunity_difference(y_true, y_pred, **kw) == 0.5
    assert selection_rate(y_true, y_pred, pos_label="yes") == 0.625
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=GROUPS) == 0.25
    with pytest.raises(ValueError, match=r"pos_label=1 is not a label.*\['no', 'yes'\]"):
        equal_opportunity_difference(y_true, y_pred, sensitive_features=GROUPS)


def test_sample_weight_is_a_replication():
    weights = np.array([2, 1, 1, 3, 1, 2, 1, 1])
    repeated = np.repeat(np.arange(8), weights)
    take = lambda values: np.asarray(values, dtype=object)[repeated]  # noqa: E731
    for metric in GAP_METRICS + [worst_group_accuracy]:
        for method in METHODS if metric is not worst_group_accuracy else [None]:
            extra = {} if method is None else {"method": method}
            weighted = metric(Y_TRUE, Y_PRED, sensitive_features=GROUPS, sample_weight=weights,
                              **extra)
            expanded = metric(np.array(Y_TRUE)[repeated], np.array(Y_PRED)[repeated],
                              sensitive_features=take(GROUPS), **extra)
            assert weighted == pytest.approx(expanded, abs=1e-12)


def test_intersectional_groups_from_dataframe():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"sex": ["f", "f", "m", "m"] * 2, "race": ["x"] * 4 + ["y"] * 4})
    y_pred = [1, 1, 0, 0, 1, 0, 0, 0]
    # groups (f,x) 1, (m,x) 0, (f,y) .5, (m,y) 0
    assert demographic_parity_difference(y_pred, y_pred, sensitive_features=frame) == 1.0
    rates = group_rates(y_pred, y_pred, sensitive_features=frame)
    assert rates.groups.tolist() == [("f", "x"), ("f", "y"), ("m", "x"), ("m", "y")]
    np.testing.assert_allclose(rates.selection_rate, [1.0, 0.5, 0.0, 0.0])
    table = rates.to_frame()
    assert list(table.index.names) == ["sex", "race"]
    assert table.loc[("f", "y"), "count"] == 2


# -------------------------------------------------------------- group_rates
def test_group_rates_values_and_frame():
    pd = pytest.importorskip("pandas")
    rates = group_rates(Y_TRUE, Y_PRED, sensitive_features=pd.Series(GROUPS, name="grp"))
    assert isinstance(rates, GroupRates)
    assert rates.groups.tolist() == ["a", "b"]
    np.testing.assert_array_equal(rates.count, [4, 4])
    np.testing.assert_allclose(rates.selection_rate, [0.5, 0.75])
    np.testing.assert_allclose(rates.true_positive_rate, [0.5, 1.0])
    np.testing.assert_allclose(rates.false_positive_rate, [0.5, 0.5])
    np.testing.assert_allclose(rates.false_negative_rate, [0.5, 0.0])
    np.testing.assert_allclose(rates.accuracy, [0.5, 0.75])
    frame = rates.to_frame()
    assert frame.index.name == "grp"
    assert list(frame.columns) == [
        "count", "selection_rate", "true_positive_rate", "false_positive_rate",
        "false_negative_rate", "accuracy",
    ]
    assert frame.loc["b", "true_positive_rate"] == 1.0


def test_group_rates_nan_for_undefined_rates():
    rates = group_rates([1, 0, 0, 0], [1, 0, 1, 0], sensitive_features=["a", "a", "b", "b"])
    assert np.isnan(rates.true_positive_rate[1])  # b has no positives
    assert rates.false_positive_rate[1] == 0.5


# -------------------------------------------------------- undefined rates
def test_groups_without_positives_are_skipped():
    y_true = [1, 1, 0, 0, 1, 0, 0, 0, 0, 0]
    y_pred = [1, 0, 0, 0, 1, 0, 1, 1, 1, 1]
    groups = ["a"] * 4 + ["b"] * 2 + ["c"] * 4  # c has no positives
    for method in METHODS:
        # TPR a 0.5, b 1.0; c is left out (fairlearn would count it as 0)
        value = equal_opportunity_difference(y_true, y_pred, sensitive_features=groups,
                                             method=method)
        assert value == pytest.approx(0.5)
    # FPR: a 0, b 0.5, c 1.0
    assert false_positive_rate_difference(y_true, y_pred, sensitive_features=groups) == 1.0
    # equalized odds: true class 1 gives 0.5, true class 0 gives 1.0
    assert equalized_odds_difference(y_true, y_pred, sensitive_features=groups,
                                     agg="mean") == pytest.approx(0.75)


def test_single_group_with_samples_gives_zero():
    y_true = [1, 1, 0, 0]
    y_pred = [1, 0, 1, 1]
    groups = ["a", "a", "b", "b"]  # only a has positives
    for method in ALL_METHODS:
        assert equal_opportunity_difference(y_true, y_pred, sensitive_features=groups,
                                            method=method) == 0.0
        assert demographic_parity_difference(y_true, y_pred, sensitive_features=["a"] * 4,
                                             method=method) == 0.0
        assert equal_opportunity_ratio(y_true, y_pred, sensitive_features=groups,
                                       method=method) == 1.0
        assert demographic_parity_ratio(y_true, y_pred, sensitive_features=["a"] * 4,
                                        method=method) == 1.0


def test_hand_computed_ratios_and_to_overall():
    kw = {"sensitive_features": GROUPS}
    # selection a 0.5, b 0.75, overall 0.625
    assert demographic_parity_ratio(Y_TRUE, Y_PRED, **kw) == pytest.approx(2 / 3)
    assert demographic_parity_ratio(Y_TRUE, Y_PRED, method="to_overall", **kw) == 0.8
    assert demographic_parity_difference(Y_TRUE, Y_PRED, method="to_overall", **kw) == 0.125
    # TPR a 0.5, b 1.0 (overall 0.75); FPR a 0.5, b 0.5
    assert equal_opportunity_ratio(Y_TRUE, Y_PRED, **kw) == 0.5
    assert equal_opportunity_ratio(Y_TRUE, Y_PRED, method="to_overall", **kw) == (
        pytest.approx(2 / 3))
    assert equalized_odds_ratio(Y_TRUE, Y_PRED, **kw) == 0.5
    assert equalized_odds_ratio(Y_TRUE, Y_PRED, agg="mean", **kw) == 0.75
    assert equalized_odds_difference(Y_TRUE, Y_PRED, method="to_overall", **kw) == 0.25
    # with two groups, one-vs-rest ratios are the between-groups ratios
    for metric in RATIO_METRICS:
        assert metric(Y_TRUE, Y_PRED, method="one_vs_rest", **kw) == pytest.approx(
            metric(Y_TRUE, Y_PRED, **kw))


def test_ratio_of_zero_rates_is_one():
    # nobody selected: every group has the same (zero) selection rate
    for method in ALL_METHODS:
        assert demographic_parity_ratio(Y_TRUE, [0] * 8, sensitive_features=GROUPS,
                                        method=method) == 1.0
    # string labels need pos_label like the other pos_label metrics
    y_text = np.where(np.array(Y_TRUE) == 1, "yes", "no")
    with pytest.raises(ValueError, match="pos_label=1 is not a label"):
        demographic_parity_ratio(y_text, y_text, sensitive_features=GROUPS)
    assert demographic_parity_ratio(y_text, y_text, sensitive_features=GROUPS,
                                    pos_label="yes") == 1.0


def test_undefined_rates_raise():
    with pytest.raises(ValueError, match="no sample has y_true == pos_label=1"):
        equal_opportunity_difference([0, 0], [1, 0], sensitive_features=["a", "b"])
    with pytest.raises(ValueError, match="no sample has y_true == pos_label=1"):
        false_negative_rate_difference([0, 0], [0, 0], sensitive_features=["a", "b"])
    with pytest.raises(ValueError, match="no sample has y_true != pos_label=1"):
        false_positive_rate_difference([1, 1], [1, 0], sensitive_features=["a", "b"])
    with pytest.raises(ValueError, match="equal_opportunity_ratio is undefined: no sample"):
        equal_opportunity_ratio([0, 0], [1, 0], sensitive_features=["a", "b"])
    # equalized odds keeps whichever of TPR / FPR is defined
    assert equalized_odds_ratio([0, 0], [1, 0], sensitive_features=["a", "b"]) == 0.0


# ----------------------------------------------------------------- errors
@pytest.mark.parametrize("metric", GAP_METRICS + RATIO_METRICS)
def test_bad_method(metric):
    with pytest.raises(ValueError, match="method='pairwise' is not supported.*'to_overall'"):
        metric(Y_TRUE, Y_PRED, sensitive_features=GROUPS, method="pairwise")


def test_bad_inputs():
    kw = {"sensitive_features": GROUPS}
    with pytest.raises(ValueError, match="agg='max' is not supported"):
        equalized_odds_difference(Y_TRUE, Y_PRED, agg="max", **kw)
    with pytest.raises(ValueError, match="y_pred must hold class labels.*non-integer floats"):
        demographic_parity_difference(Y_TRUE, np.linspace(0, 1, 8), **kw)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        demographic_parity_difference(Y_TRUE, Y_PRED[:-1], **kw)
    with pytest.raises(ValueError, match="4 entries but X has 8 rows"):
        demographic_parity_difference(Y_TRUE, Y_PRED, sensitive_features=GROUPS[:4])
    with pytest.raises(ValueError, match="empty"):
        selection_rate([], [])
    with pytest.raises(ValueError, match="non-negative"):
        worst_group_accuracy(Y_TRUE, Y_PRED, sample_weight=[-1] + [1] * 7, **kw)
    with pytest.raises(ValueError, match="sums to zero"):
        worst_group_accuracy(Y_TRUE, Y_PRED, sample_weight=[0] * 8, **kw)
    with pytest.raises(ValueError, match="one weight per sample"):
        worst_group_accuracy(Y_TRUE, Y_PRED, sample_weight=[1] * 7, **kw)
    with pytest.raises(ValueError, match="missing value"):
        demographic_parity_difference(Y_TRUE, Y_PRED, sensitive_features=[None] + GROUPS[1:])


def test_selection_rate_without_positive_label_present():
    # one label only: nobody is selected (sklearn raises only with >= 2 labels present)
    assert selection_rate([0, 0], [0, 0]) == 0.0
    with pytest.raises(ValueError, match="pos_label=1 is not a label"):
        selection_rate(["a", "b"], ["a", "b"])


# ------------------------------------------------- agreement with fairlearn
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_metrics_equal_fairlearn(seed, weighted):
    fl = pytest.importorskip("fairlearn.metrics")
    from sklearn.metrics import accuracy_score

    n_groups = 2 + seed % 4
    y_true, y_pred, groups, w = _random_problem(seed, n_groups=n_groups, weighted=weighted)
    kw = {"sensitive_features": groups, "sample_weight": w}
    assert demographic_parity_difference(y_true, y_pred, **kw) == pytest.approx(
        fl.demographic_parity_difference(y_true, y_pred, **kw), abs=1e-12)
    for agg in ["worst_case", "mean"]:
        assert equalized_odds_difference(y_true, y_pred, agg=agg, **kw) == pytest.approx(
            fl.equalized_odds_difference(y_true, y_pred, agg=agg, **kw), abs=1e-12)
    assert equal_opportunity_difference(y_true, y_pred, **kw) == pytest.approx(
        fl.equal_opportunity_difference(y_true, y_pred, **kw), abs=1e-12)
    assert selection_rate(y_true, y_pred, sample_weight=w) == pytest.approx(
        fl.selection_rate(y_true, y_pred, sample_weight=w), abs=1e-12)

    def frame(metric):
        return fl.MetricFrame(metrics=metric, y_true=y_true, y_pred=y_pred,
                              sensitive_features=groups, sample_params={"sample_weight": w})

    def named(function):  # fairlearn wants a __name__
        def rate(y_true, y_pred, sample_weight=None):
            return function(y_true, y_pred, sample_weight=sample_weight, pos_label=1)

        rate.__name__ = function.__name__
        return rate

    fnr = frame(named(fl.false_negative_rate)).difference()
    fpr = frame(named(fl.false_positive_rate)).difference()
    assert false_negative_rate_difference(y_true, y_pred, **kw) == pytest.approx(fnr, abs=1e-12)
    assert false_positive_rate_difference(y_true, y_pred, **kw) == pytest.approx(fpr, abs=1e-12)
    accuracy = frame(accuracy_score)
    assert worst_group_accuracy(y_true, y_pred, **kw) == pytest.approx(accuracy.group_min(),
                                                                       abs=1e-12)
    rates = group_rates(y_true, y_pred, **kw)
    np.testing.assert_allclose(rates.accuracy, accuracy.by_group.to_numpy(), atol=1e-12)
    np.testing.assert_allclose(
        rates.true_positive_rate,
        frame(named(fl.true_positive_rate)).by_group.to_numpy(), atol=1e-12)


# --------------------------------------------- agreement with the definition
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("method", ALL_METHODS)
def test_multiclass_matches_reference_loops(seed, method):
    y_true, y_pred, groups, w = _random_problem(
        seed, n_classes=3 + seed % 2, n_groups=2 + seed % 3, n=90, weighted=seed % 2 == 1,
        every_cell=seed % 3 != 0,
    )
    weights = np.ones(len(y_true)) if w is None else w
    kw = {"sensitive_features": groups, "sample_weight": w, "method": method}
    assert demographic_parity_difference(y_true, y_pred, **kw) == pytest.approx(
        _ref_dp(y_true, y_pred, groups, weights, method), abs=1e-12)
    for agg in ["worst_case", "mean"]:
        assert equalized_odds_difference(y_true, y_pred, agg=agg, **kw) == pytest.approx(
            _ref_eo(y_true, y_pred, groups, weights, method, agg), abs=1e-12)
    pos = 1
    expected = {
        equal_opportunity_difference: (y_true == pos, y_pred == pos),
        false_negative_rate_difference: (y_true == pos, y_pred != pos),
        false_positive_rate_difference: (y_true != pos, y_pred == pos),
    }
    for metric, (condition, event) in expected.items():
        assert metric(y_true, y_pred, pos_label=pos, **kw) == pytest.approx(
            _ref_gap(condition, event, groups, weights, method), abs=1e-12)
    # ratios: pos_label versus the rest
    everyone = np.ones(len(y_true), dtype=bool)
    tpr = _ref_gap(y_true == pos, y_pred == pos, groups, weights, method, "ratio")
    fpr = _ref_gap(y_true != pos, y_pred == pos, groups, weights, method, "ratio")
    assert demographic_parity_ratio(y_true, y_pred, pos_label=pos, **kw) == pytest.approx(
        _ref_gap(everyone, y_pred == pos, groups, weights, method, "ratio"), abs=1e-12)
    assert equal_opportunity_ratio(y_true, y_pred, pos_label=pos, **kw) == pytest.approx(
        tpr, abs=1e-12)
    assert equalized_odds_ratio(y_true, y_pred, pos_label=pos, **kw) == pytest.approx(
        min(tpr, fpr), abs=1e-12)
    assert equalized_odds_ratio(y_true, y_pred, pos_label=pos, agg="mean", **kw) == (
        pytest.approx((tpr + fpr) / 2, abs=1e-12))


# ------------------------------------------------------------- properties
problems = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n),
    )
)


def _all_values(y_true, y_pred, groups):
    """Gap metrics by METHODS first (as test_methods_agree_with_two_groups slices them)."""
    values = []
    pairs = [(m, k) for m in GAP_METRICS for k in METHODS]
    pairs += [(m, k) for m in GAP_METRICS + RATIO_METRICS for k in ALL_METHODS
              if m in RATIO_METRICS or k == "to_overall"]
    for metric, method in pairs:
        try:
            values.append(metric(y_true, y_pred, sensitive_features=groups, method=method))
        except ValueError:  # undefined (e.g. no positives): must stay undefined
            values.append(None)
    values.append(worst_group_accuracy(y_true, y_pred, sensitive_features=groups))
    return values


@settings(max_examples=50, deadline=None)
@given(problem=problems, seed=st.integers(0, 2**31 - 1))
def test_metrics_invariant_to_row_order_and_group_names(problem, seed):
    y_true, y_pred, groups = map(np.asarray, problem)
    before = _all_values(y_true, y_pred, groups)
    perm = np.random.default_rng(seed).permutation(len(y_true))
    assert _all_values(y_true[perm], y_pred[perm], groups[perm]) == pytest.approx(before)
    renamed = np.array([{"a": "z", "b": "y", "c": "x", "d": "w"}[g] for g in groups])
    assert _all_values(y_true, y_pred, renamed) == pytest.approx(before)


@settings(max_examples=50, deadline=None)
@given(problem=problems)
def test_gaps_lie_in_unit_interval(problem):
    y_true, y_pred, groups = map(np.asarray, problem)
    for value in _all_values(y_true, y_pred, groups):
        assert value is None or 0.0 <= value <= 1.0
    for method in METHODS:
        assert 0.0 <= demographic_parity_difference(
            y_true, y_pred, sensitive_features=groups, method=method) <= 1.0


@settings(max_examples=50, deadline=None)
@given(
    base=st.lists(st.integers(0, 2), min_size=1, max_size=15),
    n_groups=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_demographic_parity_zero_when_predictions_independent_of_group(base, n_groups, seed):
    # every group receives the same multiset of predictions, in a random order
    rng = np.random.default_rng(seed)
    y_pred = np.concatenate([rng.permutation(base) for _ in range(n_groups)])
    groups = np.repeat(np.arange(n_groups), len(base))
    y_true = rng.integers(3, size=len(y_pred))
    for method in METHODS:
        assert demographic_parity_difference(
            y_true, y_pred, sensitive_features=groups, method=method) == 0.0


@settings(max_examples=50, deadline=None)
@given(problem=problems)
def test_methods_agree_with_two_groups(problem):
    y_true, y_pred, groups = map(np.asarray, problem)
    two = np.where(np.isin(groups, ["a", "b"]), "ab", "cd")
    values = _all_values(y_true, y_pred, two)
    between, one_vs_rest = values[0:10:2], values[1:10:2]
    assert between == pytest.approx(one_vs_rest, abs=1e-12)


def test_label_type_errors():
    kw = {"sensitive_features": [0, 1]}
    with pytest.raises(ValueError, match="mix string and number labels"):
        demographic_parity_difference(["a", "b"], [1, 0], **kw)
    with pytest.raises(ValueError, match="mix string and number labels"):
        demographic_parity_difference(np.array(["a", 1], dtype=object), ["a", "a"], **kw)
    with pytest.raises(ValueError, match="y_true has missing values"):
        demographic_parity_difference([1, None], [1, 0], **kw)
    with pytest.raises(ValueError, match="NaN or infinity"):
        demographic_parity_difference([1.0, np.nan], [1, 0], **kw)
    # integer-valued floats are labels, equal to the ints
    assert demographic_parity_difference([1.0, 0.0], [1, 0], **kw) == 1.0
