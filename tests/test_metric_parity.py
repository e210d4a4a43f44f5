"""Agreement of skdp's fairness metrics with fairlearn's on random data.

fairlearn's ``method`` values ("between_groups", "to_overall"), ``agg``
and ``sample_weight`` must give fairlearn's numbers, for one or several
sensitive columns and for groups of a single sample. skdp differs from
fairlearn in two documented places, which the tests spell out:

* a group with no sample meeting a rate's condition (no positives, for a
  true positive rate) is left out of that rate; fairlearn counts its rate as
  0. Where this happens, the reference is fairlearn's own ``MetricFrame``
  ``difference`` / ``ratio`` applied to rates that are NaN for such groups
  (which fairlearn's aggregations skip);
* a ratio of zero rates is 1 in skdp and NaN in fairlearn.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skdp.metrics import (
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equal_opportunity_ratio,
    equalized_odds_difference,
    equalized_odds_ratio,
    false_negative_rate_difference,
    false_positive_rate_difference,
)

fl = pytest.importorskip("fairlearn.metrics")
pd = pytest.importorskip("pandas")

FAIRLEARN_METHODS = ["between_groups", "to_overall"]
# skdp metric -> fairlearn metric, for the functions both libraries have
SAME_NAME = {
    demographic_parity_difference: fl.demographic_parity_difference,
    demographic_parity_ratio: fl.demographic_parity_ratio,
    equalized_odds_difference: fl.equalized_odds_difference,
    equalized_odds_ratio: fl.equalized_odds_ratio,
    equal_opportunity_difference: fl.equal_opportunity_difference,
    equal_opportunity_ratio: fl.equal_opportunity_ratio,
}
TAKES_AGG = (equalized_odds_difference, equalized_odds_ratio)


# ------------------------------------------------------------------- data
def _sensitive(rng, n, kind):
    """Group labels of ``kind``: one column, a 2-column DataFrame or 2-D array."""
    first = rng.choice(["f", "m", "x"], size=n)
    if kind == "one":
        return first
    second = rng.integers(3, size=n)
    if kind == "frame":
        return pd.DataFrame({"sex": first, "race": second})
    return np.column_stack([first, second.astype(str)])


def _take(sensitive, rows):
    return sensitive.iloc[rows] if hasattr(sensitive, "iloc") else sensitive[rows]


def _concat(a, b):
    if hasattr(a, "iloc"):
        return pd.concat([a, b], ignore_index=True)
    return np.concatenate([a, b])


def _problem(seed, kind, *, weighted, singletons=0):
    """Binary labels depending on the group; every group has both classes,
    plus ``singletons`` groups of one sample (which cannot)."""
    rng = np.random.default_rng(seed)
    n = 200
    sensitive = _sensitive(rng, n, kind)
    codes = pd.factorize(pd.Series(list(map(str, np.asarray(sensitive).tolist()))))[0]
    y_true = (rng.random(n) < 0.3 + 0.1 * (codes % 4)).astype(int)
    y_pred = np.where(rng.random(n) < 0.75, y_true, 1 - y_true)
    # one sample of each class in every group present
    first = np.unique(codes, return_index=True)[1]
    extra = np.concatenate([first, first])
    y_true = np.concatenate([y_true, np.repeat([0, 1], len(first))])
    y_pred = np.concatenate([y_pred, rng.integers(2, size=2 * len(first))])
    sensitive = _concat(sensitive, _take(sensitive, extra))
    if singletons:
        lone = _sensitive(rng, singletons, kind)
        lone = (lone.assign(sex=[f"lone{i}" for i in range(singletons)])
                if hasattr(lone, "iloc") else _rename_lone(lone))
        sensitive = _concat(sensitive, lone)
        y_true = np.concatenate([y_true, rng.integers(2, size=singletons)])
        y_pred = np.concatenate([y_pred, rng.integers(2, size=singletons)])
    weights = rng.uniform(0.2, 3.0, size=len(y_true)) if weighted else None
    return y_true, y_pred, sensitive, weights


def _rename_lone(lone):
    lone = lone.astype(object)
    labels = np.array([f"lone{i}" for i in range(len(lone))], dtype=object)
    if lone.ndim == 1:
        return labels
    lone[:, 0] = labels
    return lone


# ------------------------------------------------- fairlearn references
def _nan_aware(rate):
    """fairlearn base rate that is NaN, not 0, where its condition is empty."""

    def metric(y_true, y_pred, sample_weight=None):
        y_true = np.asarray(y_true)
        condition = y_true == 1 if rate in ("tpr", "fnr") else y_true != 1
        weights = np.ones(len(y_true)) if sample_weight is None else np.asarray(sample_weight)
        if weights[condition].sum() == 0:
            return np.nan
        function = {"tpr": fl.true_positive_rate, "fnr": fl.false_negative_rate,
                    "fpr": fl.false_positive_rate}[rate]
        return function(y_true, y_pred, sample_weight=sample_weight, pos_label=1)

    metric.__name__ = rate
    return metric


def _frame(rate, y_true, y_pred, sensitive, weights):
    return fl.MetricFrame(metrics=_nan_aware(rate), y_true=y_true, y_pred=y_pred,
                          sensitive_features=sensitive,
                          sample_params={"sample_weight": weights})


def _reference(frames, rates, kind, method, agg="worst_case"):
    """fairlearn's aggregation of the NaN-aware rates, with skdp's conventions
    for what fairlearn leaves undefined (rates no group has: dropped; ratio
    of zero rates: 1)."""
    values = []
    for rate in rates:
        frame = frames[rate]
        if frame.by_group.isna().all():
            continue  # no group meets the condition: skdp leaves the rate out
        value = frame.difference(method=method) if kind == "difference" else frame.ratio(
            method=method)
        values.append(1.0 if np.isnan(value) else value)
    if agg == "mean":
        return float(np.mean(values))
    return max(values) if kind == "difference" else min(values)


def _kw(sensitive, weights, method):
    return {"sensitive_features": sensitive, "sample_weight": weights, "method": method}


# -------------------------------------------- every group has both classes
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["one", "frame", "array"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("method", FAIRLEARN_METHODS)
def test_same_values_as_fairlearn(seed, kind, weighted, method):
    y_true, y_pred, sensitive, weights = _problem(seed, kind, weighted=weighted)
    kw = _kw(sensitive, weights, method)
    for ours, theirs in SAME_NAME.items():
        for agg in ["worst_case", "mean"] if ours in TAKES_AGG else [None]:
            extra = {} if agg is None else {"agg": agg}
            expected = theirs(y_true, y_pred, **kw, **extra)
            assert np.isfinite(expected)
            assert ours(y_true, y_pred, **kw, **extra) == pytest.approx(expected, abs=1e-12), (
                ours.__name__, agg)
    for ours, rate in [(false_negative_rate_difference, fl.false_negative_rate),
                       (false_positive_rate_difference, fl.false_positive_rate)]:
        frame = fl.MetricFrame(metrics=rate, y_true=y_true, y_pred=y_pred,
                               sensitive_features=sensitive,
                               sample_params={"sample_weight": weights})
        assert ours(y_true, y_pred, **kw) == pytest.approx(
            frame.difference(method=method), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("method", FAIRLEARN_METHODS)
def test_string_labels_with_pos_label(seed, method):
    y_true, y_pred, sensitive, weights = _problem(seed, "one", weighted=True)
    text = np.array(["no", "yes"], dtype=object)
    kw = _kw(sensitive, weights, method)
    for ours in [demographic_parity_ratio, equalized_odds_ratio, equal_opportunity_ratio]:
        assert ours(text[y_true], text[y_pred], pos_label="yes", **kw) == pytest.approx(
            ours(y_true, y_pred, **kw), abs=1e-12)


# ------------------------------------------------------ groups of size 1
@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    kind=st.sampled_from(["one", "frame", "array"]),
    weighted=st.booleans(),
    singletons=st.integers(1, 4),
    method=st.sampled_from(FAIRLEARN_METHODS),
)
def test_groups_of_one_sample(seed, kind, weighted, singletons, method):
    y_true, y_pred, sensitive, weights = _problem(seed, kind, weighted=weighted,
                                                  singletons=singletons)
    kw = _kw(sensitive, weights, method)
    # selection rates are defined for every group: fairlearn's own functions
    for ours in [demographic_parity_difference, demographic_parity_ratio]:
        expected = SAME_NAME[ours](y_true, y_pred, **kw)
        assert ours(y_true, y_pred, **kw) == pytest.approx(expected, abs=1e-12)
    # a group of one sample lacks positives or negatives: rates it cannot
    # define are left out (fairlearn's aggregation of NaN-aware rates)
    cases = [
        (equal_opportunity_difference, ["tpr"], "difference", {}),
        (equal_opportunity_ratio, ["tpr"], "ratio", {}),
        (false_negative_rate_difference, ["fnr"], "difference", {}),
        (false_positive_rate_difference, ["fpr"], "difference", {}),
    ] + [
        (metric, ["tpr", "fpr"], kind_, {"agg": agg})
        for metric, kind_ in [(equalized_odds_difference, "difference"),
                              (equalized_odds_ratio, "ratio")]
        for agg in ["worst_case", "mean"]
    ]
    frames = {rate: _frame(rate, y_true, y_pred, sensitive, weights)
              for rate in ["tpr", "fnr", "fpr"]}
    for ours, rates, kind_, extra in cases:
        expected = _reference(frames, rates, kind_, method, **extra)
        assert ours(y_true, y_pred, **kw, **extra) == pytest.approx(expected, abs=1e-12), (
            ours.__name__, extra)


def test_where_fairlearn_differs():
    # group c has no positives: fairlearn counts its TPR as 0, skdp leaves it out
    y_true = [1, 1, 0, 0, 1, 1, 0, 0, 0, 0]
    y_pred = [1, 0, 1, 0, 1, 1, 1, 0, 1, 0]
    groups = ["a"] * 4 + ["b"] * 4 + ["c"] * 2
    kw = {"sensitive_features": groups}
    assert fl.equal_opportunity_difference(y_true, y_pred, **kw) == 1.0  # c counted as 0
    assert equal_opportunity_difference(y_true, y_pred, **kw) == 0.5
    assert fl.equal_opportunity_ratio(y_true, y_pred, **kw) == 0.0
    assert equal_opportunity_ratio(y_true, y_pred, **kw) == 0.5
    # nobody selected: fairlearn's ratio is NaN, skdp's is 1 (equal rates)
    for method in FAIRLEARN_METHODS:
        assert np.isnan(fl.demographic_parity_ratio(y_true, [0] * 10, method=method, **kw))
        assert demographic_parity_ratio(y_true, [0] * 10, method=method, **kw) == 1.0
