"""Group-fairness metrics on hard predictions.

Every metric is a gap between groups in a rate ``P(event | condition, group)``:

========================================  ==================  =================
metric                                    condition           event
========================================  ==================  =================
:func:`demographic_parity_difference`     every sample        ``y_pred == k``
:func:`equalized_odds_difference`         ``y_true == y``     ``y_pred == k``
:func:`equal_opportunity_difference`      ``y_true == pos``   ``y_pred == pos``
:func:`false_negative_rate_difference`    ``y_true == pos``   ``y_pred != pos``
:func:`false_positive_rate_difference`    ``y_true != pos``   ``y_pred == pos``
========================================  ==================  =================

The gap of one rate is, by ``method``,

* ``"between_groups"`` (default, fairlearn's default): the largest minus the
  smallest rate over the groups;
* ``"one_vs_rest"`` (the RaCO-DP paper's form): the largest
  ``|rate(Z = z) - rate(Z != z)|`` over groups ``z``, where ``Z != z`` pools
  all the other groups.

Groups with no sample meeting the condition (e.g. no positives, for a true
positive rate) are left out of that rate's gap; a single group with samples
gives a gap of 0. A ValueError is raised only when no group has any.

All counts come from one ``np.bincount`` over (group, condition, event) cells,
so the cost is linear in the number of samples for any number of groups.
"""

from dataclasses import dataclass, fields

import numpy as np
from sklearn.utils import check_consistent_length, column_or_1d

from .._groups import _missing_mask, encode_groups

__all__ = [
    "GroupRates",
    "demographic_parity_difference",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "false_negative_rate_difference",
    "false_positive_rate_difference",
    "group_rates",
    "selection_rate",
    "worst_group_accuracy",
]

_METHODS = ("between_groups", "one_vs_rest")
_AGGS = ("worst_case", "mean")


# ---------------------------------------------------------------- validation
def _check_method(method):
    if method not in _METHODS:
        raise ValueError(
            f"method={method!r} is not supported; use 'between_groups' (largest minus "
            "smallest group rate) or 'one_vs_rest' (largest gap between a group and all "
            "other groups pooled)."
        )


def _check_labels(y, name):
    """1-D array of class labels (sklearn's binary/multiclass targets)."""
    y = column_or_1d(y, warn=True)
    kind = y.dtype.kind
    if kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError(f"{name} contains NaN or infinity; pass class labels.")
        if np.any(y != np.floor(y)):
            raise ValueError(
                f"{name} must hold class labels (binary or multiclass), but it has "
                "non-integer floats. Fairness metrics compare predicted classes: pass "
                "estimator.predict(X), not probabilities or scores."
            )
    elif kind == "O":
        if np.any(_missing_mask(y)):
            raise ValueError(f"{name} has missing values (None/NaN); pass class labels.")
    elif kind not in "biuUS":
        raise ValueError(f"{name} must hold class labels; got an array of dtype {y.dtype}.")
    return y


_MIXED = (
    "y_true and y_pred mix string and number labels; use one type, e.g. "
    "y_pred.astype(str) or the estimator's own classes_."
)


def _union_codes(y_true, y_pred):
    """Sorted union of the labels and the codes of both arrays in it."""
    if y_true.dtype.kind != "O" and y_pred.dtype.kind != "O":
        if (y_true.dtype.kind in "US") != (y_pred.dtype.kind in "US"):
            raise ValueError(_MIXED)
        both = np.concatenate([y_true, y_pred])
    else:
        both = np.concatenate([y_true.astype(object), y_pred.astype(object)])
    try:
        classes, codes = np.unique(both, return_inverse=True)
    except TypeError:
        raise ValueError(_MIXED) from None
    if len({isinstance(c, str) for c in classes.tolist()}) > 1:
        raise ValueError(_MIXED)
    codes = np.ravel(codes)
    n = y_true.shape[0]
    return classes, codes[:n], codes[n:]


def _check_sample_weight(sample_weight, n_samples):
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.ndim != 1 or weights.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight must be 1-D with one weight per sample ({n_samples}); got shape "
            f"{weights.shape}."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("sample_weight must be finite and non-negative.")
    if not weights.sum() > 0:
        raise ValueError("sample_weight sums to zero; at least one sample needs a positive weight.")
    return weights


def _check_targets(y_true, y_pred, sample_weight):
    """Classes (sorted union), label codes and weights of a prediction."""
    y_true = _check_labels(y_true, "y_true")
    y_pred = _check_labels(y_pred, "y_pred")
    check_consistent_length(y_true, y_pred)
    if y_true.shape[0] == 0:
        raise ValueError("y_true and y_pred are empty; fairness metrics need samples.")
    classes, true_codes, pred_codes = _union_codes(y_true, y_pred)
    weights = _check_sample_weight(sample_weight, y_true.shape[0])
    return classes, true_codes, pred_codes, weights


def _positive_index(classes, pos_label):
    """Index of ``pos_label`` in ``classes``; -1 if absent from a one-label problem."""
    matches = [i for i, label in enumerate(classes.tolist()) if label == pos_label]
    if matches:
        return matches[0]
    if len(classes) >= 2:
        raise ValueError(
            f"pos_label={pos_label!r} is not a label of y_true or y_pred, whose labels are "
            f"{classes.tolist()}; pass pos_label= one of them."
        )
    return -1


def _prepare(y_true, y_pred, sensitive_features, sample_weight):
    classes, true_codes, pred_codes, weights = _check_targets(y_true, y_pred, sample_weight)
    group_codes, groups = encode_groups(sensitive_features, true_codes.shape[0])
    return classes, true_codes, pred_codes, group_codes, groups, weights


# ------------------------------------------------------------------ counting
def _crosstab(group_codes, n_groups, condition, n_conditions, event, n_events, weights):
    """Weighted counts of shape (n_groups, n_conditions, n_events)."""
    cells = (group_codes * n_conditions + condition) * n_events + event
    counts = np.bincount(cells, weights=weights, minlength=n_groups * n_conditions * n_events)
    return counts.astype(np.float64, copy=False).reshape(n_groups, n_conditions, n_events)


def _group_rates_table(table):
    """Rates P(event | condition, group) and the mask of defined ones."""
    denominator = table.sum(axis=2)
    has = denominator > 0
    rates = np.divide(
        table,
        denominator[..., None],
        out=np.full(table.shape, np.nan),
        where=has[..., None],
    )
    return rates, denominator, has


def _rate_gaps(table, method):
    """Gap of every rate over groups, shape (n_conditions, n_events).

    NaN marks conditions that no group meets.
    """
    rates, denominator, has = _group_rates_table(table)
    n_with = has.sum(axis=0)
    if method == "between_groups":
        defined = np.broadcast_to(has[..., None], rates.shape)
        high = np.where(defined, rates, -np.inf).max(axis=0)
        low = np.where(defined, rates, np.inf).min(axis=0)
        with np.errstate(invalid="ignore"):
            gaps = high - low
    else:
        # A group's gap needs samples on both sides: in the group and outside it.
        both = has & ((n_with[None, :] - has) > 0)
        rest = table.sum(axis=0)[None] - table
        rest_denominator = np.where(both, denominator.sum(axis=0)[None] - denominator, 1.0)
        rest_rates = rest / rest_denominator[..., None]
        with np.errstate(invalid="ignore"):
            difference = np.abs(rates - rest_rates)
        gaps = np.where(both[..., None], difference, 0.0).max(axis=0)
    gaps[n_with == 0] = np.nan
    return gaps


def _require_defined(value, metric, reason):
    if np.isnan(value):
        raise ValueError(f"{metric} is undefined: {reason}")
    return float(value)


# ------------------------------------------------------------------- metrics
def selection_rate(y_true, y_pred, *, pos_label=1, sample_weight=None):
    """Fraction of samples predicted as ``pos_label``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels; only checked for length and type.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    pos_label : int, float, bool or str, default=1
        The label counted as selected.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    rate : float
        ``P(y_pred == pos_label)``, in [0, 1].

    Examples
    --------
    >>> from skdp.metrics import selection_rate
    >>> selection_rate([0, 1, 1, 0], [1, 1, 0, 0])
    0.5
    """
    classes, _, pred_codes, weights = _check_targets(y_true, y_pred, sample_weight)
    positive = pred_codes == _positive_index(classes, pos_label)
    return float(np.average(positive, weights=weights))


@dataclass(frozen=True)
class GroupRates:
    """Per-group rates returned by :func:`group_rates`.

    Every attribute is an array with one entry per group, in the order of
    ``groups``. Rates that a group cannot define (a true positive rate in a
    group without positives) are NaN.

    Attributes
    ----------
    groups : ndarray of shape (n_groups,)
        Group labels in sorted order (tuples for several sensitive columns).
    count : ndarray of shape (n_groups,)
        Number of samples in each group (not weighted).
    selection_rate : ndarray of shape (n_groups,)
        ``P(y_pred == pos_label | group)``.
    true_positive_rate : ndarray of shape (n_groups,)
        ``P(y_pred == pos_label | y_true == pos_label, group)``.
    false_positive_rate : ndarray of shape (n_groups,)
        ``P(y_pred == pos_label | y_true != pos_label, group)``.
    false_negative_rate : ndarray of shape (n_groups,)
        ``P(y_pred != pos_label | y_true == pos_label, group)``.
    accuracy : ndarray of shape (n_groups,)
        ``P(y_pred == y_true | group)`` over all classes.
    names : list of str or None
        Names of the sensitive columns when they came from pandas.
    """

    groups: np.ndarray
    count: np.ndarray
    selection_rate: np.ndarray
    true_positive_rate: np.ndarray
    false_positive_rate: np.ndarray
    false_negative_rate: np.ndarray
    accuracy: np.ndarray
    names: list = None

    def to_frame(self):
        """The rates as a pandas DataFrame indexed by group.

        Returns
        -------
        frame : pandas.DataFrame
            One row per group and one column per rate (plus ``count``); a
            MultiIndex for several sensitive columns.
        """
        import pandas as pd

        labels = self.groups.tolist()
        if labels and isinstance(labels[0], tuple):
            index = pd.MultiIndex.from_tuples(labels, names=self.names)
        else:
            index = pd.Index(labels, dtype=object, name=self.names[0] if self.names else None)
        columns = [f.name for f in fields(self) if f.name not in ("groups", "names")]
        return pd.DataFrame({name: getattr(self, name) for name in columns}, index=index)


def _column_names(sensitive_features):
    if hasattr(sensitive_features, "columns"):
        return [str(c) for c in sensitive_features.columns]
    name = getattr(sensitive_features, "name", None)
    return None if name is None else [str(name)]


def group_rates(y_true, y_pred, *, sensitive_features, pos_label=1, sample_weight=None):
    """Per-group count, selection rate, TPR, FPR, FNR and accuracy.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    pos_label : int, float, bool or str, default=1
        The positive label; with more than two classes the rates are
        ``pos_label`` versus the rest.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights (the rates are weighted, ``count`` is not).

    Returns
    -------
    rates : GroupRates
        Arrays of per-group rates with attribute access, and ``to_frame()``
        for a pandas DataFrame.

    Examples
    --------
    >>> from skdp.metrics import group_rates
    >>> rates = group_rates([1, 1, 0, 0, 1, 0], [1, 0, 0, 1, 1, 0],
    ...                     sensitive_features=["a", "a", "a", "a", "b", "b"])
    >>> rates.groups
    array(['a', 'b'], dtype=object)
    >>> rates.true_positive_rate
    array([0.5, 1. ])
    >>> rates.to_frame()["accuracy"].tolist()
    [0.5, 1.0]
    """
    classes, true_codes, pred_codes, group_codes, groups, weights = _prepare(
        y_true, y_pred, sensitive_features, sample_weight
    )
    positive = _positive_index(classes, pos_label)
    n_groups = groups.shape[0]
    is_pos_true = (true_codes == positive).astype(np.int64)
    is_pos_pred = (pred_codes == positive).astype(np.int64)
    table = _crosstab(group_codes, n_groups, is_pos_true, 2, is_pos_pred, 2, weights)
    rates, _, _ = _group_rates_table(table)
    total = table.sum(axis=(1, 2))
    correct = np.bincount(
        group_codes,
        weights=(true_codes == pred_codes) * (1.0 if weights is None else weights),
        minlength=n_groups,
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        selection = table[:, :, 1].sum(axis=1) / total
        accuracy = correct / total
    return GroupRates(
        groups=groups,
        count=np.bincount(group_codes, minlength=n_groups),
        selection_rate=selection,
        true_positive_rate=rates[:, 1, 1],
        false_positive_rate=rates[:, 0, 1],
        false_negative_rate=rates[:, 1, 0],
        accuracy=accuracy,
        names=_column_names(sensitive_features),
    )


def demographic_parity_difference(
    y_true, y_pred, *, sensitive_features, method="between_groups", sample_weight=None
):
    """Largest gap between groups in the rate of each predicted class.

    For binary problems this is the gap in selection rate
    ``P(y_pred = 1 | group)`` and equals fairlearn's
    ``demographic_parity_difference``. With more classes it is the largest,
    over predicted classes ``k``, of the gap in ``P(y_pred = k | group)``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels; only checked for length and type.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    method : {"between_groups", "one_vs_rest"}, default="between_groups"
        ``"between_groups"``: largest minus smallest group rate.
        ``"one_vs_rest"``: largest ``|rate(Z = z) - rate(Z != z)|``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    difference : float
        In [0, 1]; 0 means every group has the same prediction rates.

    Examples
    --------
    >>> from skdp.metrics import demographic_parity_difference
    >>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    >>> y_pred = [1, 0, 1, 0, 1, 1, 1, 0]
    >>> groups = ["a"] * 4 + ["b"] * 4
    >>> demographic_parity_difference(y_true, y_pred, sensitive_features=groups)
    0.25
    """
    _check_method(method)
    classes, _, pred_codes, group_codes, groups, weights = _prepare(
        y_true, y_pred, sensitive_features, sample_weight
    )
    condition = np.zeros_like(pred_codes)
    table = _crosstab(group_codes, groups.shape[0], condition, 1, pred_codes, len(classes), weights)
    return float(_rate_gaps(table, method).max())


def equalized_odds_difference(
    y_true,
    y_pred,
    *,
    sensitive_features,
    method="between_groups",
    sample_weight=None,
    agg="worst_case",
):
    """Largest gap between groups in the error rates given the true class.

    For each true class ``y``, ``d_y`` is the largest, over predicted classes
    ``k``, of the gap between groups in ``P(y_pred = k | y_true = y, group)``.
    For binary problems ``d_1`` is the true positive rate gap and ``d_0`` the
    false positive rate gap, so the result equals fairlearn's
    ``equalized_odds_difference``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    method : {"between_groups", "one_vs_rest"}, default="between_groups"
        ``"between_groups"``: largest minus smallest group rate.
        ``"one_vs_rest"``: largest ``|rate(Z = z) - rate(Z != z)|``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.
    agg : {"worst_case", "mean"}, default="worst_case"
        ``"worst_case"``: ``max_y d_y``; ``"mean"``: the mean of ``d_y`` over
        the true classes (for binary problems, the mean of the TPR and FPR
        gaps). Groups without samples of class ``y`` are left out of ``d_y``.

    Returns
    -------
    difference : float
        In [0, 1].

    Examples
    --------
    >>> from skdp.metrics import equalized_odds_difference
    >>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    >>> y_pred = [1, 0, 1, 0, 1, 1, 1, 0]
    >>> groups = ["a"] * 4 + ["b"] * 4
    >>> equalized_odds_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    >>> equalized_odds_difference(y_true, y_pred, sensitive_features=groups, agg="mean")
    0.25
    """
    _check_method(method)
    if agg not in _AGGS:
        raise ValueError(
            f"agg={agg!r} is not supported; use 'worst_case' (largest gap over the true "
            "classes) or 'mean' (mean gap over the true classes)."
        )
    classes, true_codes, pred_codes, group_codes, groups, weights = _prepare(
        y_true, y_pred, sensitive_features, sample_weight
    )
    n_classes = len(classes)
    table = _crosstab(
        group_codes, groups.shape[0], true_codes, n_classes, pred_codes, n_classes, weights
    )
    per_class = _rate_gaps(table, method).max(axis=1)
    per_class = per_class[~np.isnan(per_class)]
    return float(per_class.max() if agg == "worst_case" else per_class.mean())


def _pos_vs_rest_gap(y_true, y_pred, sensitive_features, pos_label, method, sample_weight,
                     condition_positive, event_positive, metric):
    _check_method(method)
    classes, true_codes, pred_codes, group_codes, groups, weights = _prepare(
        y_true, y_pred, sensitive_features, sample_weight
    )
    positive = _positive_index(classes, pos_label)
    condition = (true_codes == positive).astype(np.int64)
    event = (pred_codes == positive).astype(np.int64)
    table = _crosstab(group_codes, groups.shape[0], condition, 2, event, 2, weights)
    gap = _rate_gaps(table, method)[int(condition_positive), int(event_positive)]
    side = "==" if condition_positive else "!="
    return _require_defined(
        gap, metric, f"no sample has y_true {side} pos_label={pos_label!r}; check pos_label."
    )


def equal_opportunity_difference(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Largest gap between groups in the true positive rate.

    The true positive rate (recall) of a group is
    ``P(y_pred = pos_label | y_true = pos_label, group)``; with more than two
    classes the problem is ``pos_label`` versus the rest. Groups without
    positives are left out. Equals fairlearn's ``equal_opportunity_difference``
    for binary problems.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    pos_label : int, float, bool or str, default=1
        The positive (favourable) label.
    method : {"between_groups", "one_vs_rest"}, default="between_groups"
        ``"between_groups"``: largest minus smallest group rate.
        ``"one_vs_rest"``: largest ``|rate(Z = z) - rate(Z != z)|``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    difference : float
        In [0, 1].

    Raises
    ------
    ValueError
        If no sample has ``y_true == pos_label``.

    Examples
    --------
    >>> from skdp.metrics import equal_opportunity_difference
    >>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    >>> y_pred = [1, 0, 1, 0, 1, 1, 1, 0]
    >>> groups = ["a"] * 4 + ["b"] * 4
    >>> equal_opportunity_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    return _pos_vs_rest_gap(
        y_true, y_pred, sensitive_features, pos_label, method, sample_weight,
        condition_positive=True, event_positive=True, metric="equal_opportunity_difference",
    )


def false_negative_rate_difference(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Largest gap between groups in the false negative rate.

    The false negative rate of a group is
    ``P(y_pred != pos_label | y_true = pos_label, group)``, one minus its
    true positive rate, so the value equals
    :func:`equal_opportunity_difference`; it is the name used by rate
    constraints (RaCO-DP's FNR constraint). Groups without positives are
    left out.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    pos_label : int, float, bool or str, default=1
        The positive label; other labels are negatives.
    method : {"between_groups", "one_vs_rest"}, default="between_groups"
        ``"between_groups"``: largest minus smallest group rate.
        ``"one_vs_rest"``: largest ``|rate(Z = z) - rate(Z != z)|``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    difference : float
        In [0, 1].

    Raises
    ------
    ValueError
        If no sample has ``y_true == pos_label``.

    Examples
    --------
    >>> from skdp.metrics import false_negative_rate_difference
    >>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    >>> y_pred = [1, 0, 1, 0, 1, 1, 1, 0]
    >>> groups = ["a"] * 4 + ["b"] * 4
    >>> false_negative_rate_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    return _pos_vs_rest_gap(
        y_true, y_pred, sensitive_features, pos_label, method, sample_weight,
        condition_positive=True, event_positive=False, metric="false_negative_rate_difference",
    )


def false_positive_rate_difference(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Largest gap between groups in the false positive rate.

    The false positive rate of a group is
    ``P(y_pred = pos_label | y_true != pos_label, group)``. Groups without
    negatives are left out.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    pos_label : int, float, bool or str, default=1
        The positive label; other labels are negatives.
    method : {"between_groups", "one_vs_rest"}, default="between_groups"
        ``"between_groups"``: largest minus smallest group rate.
        ``"one_vs_rest"``: largest ``|rate(Z = z) - rate(Z != z)|``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    difference : float
        In [0, 1].

    Raises
    ------
    ValueError
        If no sample has ``y_true != pos_label``.

    Examples
    --------
    >>> from skdp.metrics import false_positive_rate_difference
    >>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    >>> y_pred = [1, 0, 1, 0, 1, 1, 0, 0]
    >>> groups = ["a"] * 4 + ["b"] * 4
    >>> false_positive_rate_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    return _pos_vs_rest_gap(
        y_true, y_pred, sensitive_features, pos_label, method, sample_weight,
        condition_positive=False, event_positive=True, metric="false_positive_rate_difference",
    )


def worst_group_accuracy(y_true, y_pred, *, sensitive_features, sample_weight=None):
    """Accuracy of the group on which the predictions are least accurate.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Predicted labels.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample; several columns form intersectional groups.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights; groups whose weights sum to zero are
        left out.

    Returns
    -------
    accuracy : float
        ``min_z P(y_pred == y_true | Z = z)``, in [0, 1]; higher is better.

    Examples
    --------
    >>> from skdp.metrics import worst_group_accuracy
    >>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    >>> y_pred = [1, 0, 1, 0, 1, 1, 1, 0]
    >>> groups = ["a"] * 4 + ["b"] * 4
    >>> worst_group_accuracy(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    _, true_codes, pred_codes, group_codes, groups, weights = _prepare(
        y_true, y_pred, sensitive_features, sample_weight
    )
    correct = (true_codes == pred_codes).astype(np.int64)
    condition = np.zeros_like(correct)
    table = _crosstab(group_codes, groups.shape[0], condition, 1, correct, 2, weights)
    rates, _, has = _group_rates_table(table)
    return float(rates[has[:, 0], 0, 1].min())
