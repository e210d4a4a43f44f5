"""Group-fairness metrics on hard predictions.

Every metric compares, across groups, a rate ``P(event | condition, group)``:

==============================================  ==================  ===================
rate                                            condition           event
==============================================  ==================  ===================
per-class prediction rate (demographic parity)  every sample        ``y_pred == k``
per-class odds (equalized odds)                 ``y_true == y``     ``y_pred == k``
selection rate                                  every sample        ``y_pred == pos``
true positive rate (equal opportunity)          ``y_true == pos``   ``y_pred == pos``
false negative rate                             ``y_true == pos``   ``y_pred != pos``
false positive rate                             ``y_true != pos``   ``y_pred == pos``
accuracy                                        every sample        ``y_pred == y_true``
==============================================  ==================  ===================

All of them are read off one table: the weighted confusion matrix of every
group, counted with a single ``np.bincount`` (linear in the number of samples
for any number of groups). A metric is then a rate from ``_RATES``, a kind
(``"difference"`` or ``"ratio"``) and a ``method`` saying what each group's
rate is compared with:

* ``"between_groups"`` (default): the other groups; the difference is the
  largest minus the smallest group rate, the ratio the smallest over the
  largest;
* ``"to_overall"``: the rate of all samples together; the difference is the
  largest ``|rate(Z = z) - rate|``, the ratio the smallest
  ``min(rate(Z = z), rate) / max(rate(Z = z), rate)``;
* ``"one_vs_rest"`` (the RaCO-DP paper's form): the rate of the other groups
  pooled, ``rate(Z != z)``, in place of ``rate``.

The first two are fairlearn's ``method`` values, with fairlearn's formulas.
Two choices differ from fairlearn where it gives no number or a misleading
one:

* groups with no sample meeting a rate's condition (no positives, for a true
  positive rate) are left out of that rate, where fairlearn counts their
  rate as 0; a single group with samples gives a difference of 0 and a ratio
  of 1, and a ValueError is raised only when no group has any;
* a ratio of two zero rates is 1 (the rates are equal), where fairlearn gives
  NaN.
"""

import inspect
from dataclasses import dataclass, fields

import numpy as np
from sklearn.utils import check_consistent_length, column_or_1d

from .._groups import _missing_mask, encode_groups
from ._docstrings import BLOCKS, fill_doc

_METHODS = {
    "between_groups": "compare each group with the others",
    "to_overall": "compare each group with all samples",
    "one_vs_rest": "compare each group with all the other groups pooled",
}
_AGGS = {
    "worst_case": "the worst of the compared rates",
    "mean": "their mean",
}


# ---------------------------------------------------------------- validation
def _check_option(name, value, options):
    if value not in options:
        hints = ", ".join(f"{key!r} ({meaning})" for key, meaning in options.items())
        raise ValueError(f"{name}={value!r} is not supported; use one of {hints}.")


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


# ------------------------------------------------------------------ counting
@dataclass(frozen=True)
class _Confusion:
    """Weighted confusion matrix of every group: ``counts[group, y_true, y_pred]``."""

    counts: np.ndarray
    classes: np.ndarray
    group_codes: np.ndarray
    groups: np.ndarray


def _group_confusion(y_true, y_pred, sensitive_features, sample_weight):
    classes, true_codes, pred_codes, weights = _check_targets(y_true, y_pred, sample_weight)
    group_codes, groups = encode_groups(sensitive_features, true_codes.shape[0])
    n_groups, n_classes = groups.shape[0], len(classes)
    cells = (group_codes * n_classes + true_codes) * n_classes + pred_codes
    counts = np.bincount(cells, weights=weights, minlength=n_groups * n_classes**2)
    counts = counts.astype(np.float64, copy=False).reshape(n_groups, n_classes, n_classes)
    return _Confusion(counts, classes, group_codes, groups)


# Tables of weighted counts, shape (n_groups, n_conditions, n_events): the
# rate P(event | condition, group) is table[g, c, e] / table[g, c].sum().
def _class_table(confusion, pos_label):
    """Condition: every sample; event: ``y_pred == k`` for every class ``k``."""
    return confusion.counts.sum(axis=1, keepdims=True)


def _class_given_true_table(confusion, pos_label):
    """Condition: ``y_true == y``; event: ``y_pred == k``, for every pair of classes."""
    return confusion.counts


def _positive_given_true_table(confusion, pos_label):
    """Condition: ``y_true`` is [not, is] ``pos_label``; event: same for ``y_pred``."""
    positive = np.arange(len(confusion.classes)) == _positive_index(confusion.classes, pos_label)
    by_truth = np.stack(
        [confusion.counts[:, ~positive].sum(axis=1), confusion.counts[:, positive].sum(axis=1)],
        axis=1,
    )
    return np.stack([by_truth[..., ~positive].sum(axis=2), by_truth[..., positive].sum(axis=2)],
                    axis=2)


def _positive_table(confusion, pos_label):
    """Condition: every sample; event: ``y_pred`` is [not, is] ``pos_label``."""
    return _positive_given_true_table(confusion, pos_label).sum(axis=1, keepdims=True)


def _correct_table(confusion, pos_label):
    """Condition: every sample; event: ``y_pred`` [differs from, equals] ``y_true``."""
    diagonal = np.eye(len(confusion.classes), dtype=bool)
    counts = confusion.counts
    return np.stack([counts[:, ~diagonal].sum(axis=1), counts[:, diagonal].sum(axis=1)],
                    axis=1)[:, None, :]


# name: (table, the (condition, event) cells it compares; None for all of them)
_RATES = {
    "class_rates": (_class_table, None),
    "class_odds": (_class_given_true_table, None),
    "selection_rate": (_positive_table, [(0, 1)]),
    "true_positive_rate": (_positive_given_true_table, [(1, 1)]),
    "false_positive_rate": (_positive_given_true_table, [(0, 1)]),
    "false_negative_rate": (_positive_given_true_table, [(1, 0)]),
    "odds": (_positive_given_true_table, [(1, 1), (0, 1)]),
    "accuracy": (_correct_table, [(0, 1)]),
}

# public metric: (rate, kind)
_DISPARITIES = {
    "demographic_parity_difference": ("class_rates", "difference"),
    "demographic_parity_ratio": ("selection_rate", "ratio"),
    "equalized_odds_difference": ("class_odds", "difference"),
    "equalized_odds_ratio": ("odds", "ratio"),
    "equal_opportunity_difference": ("true_positive_rate", "difference"),
    "equal_opportunity_ratio": ("true_positive_rate", "ratio"),
    "false_negative_rate_difference": ("false_negative_rate", "difference"),
    "false_positive_rate_difference": ("false_positive_rate", "difference"),
}


def _divide(numerator, denominator):
    """Elementwise ratio, NaN where the denominator is not positive."""
    shape = np.broadcast_shapes(np.shape(numerator), np.shape(denominator))
    return np.divide(numerator, denominator, out=np.full(shape, np.nan), where=denominator > 0)


def _group_rates(table):
    """Rates P(event | condition, group) and the mask of the defined ones."""
    denominator = table.sum(axis=2)
    return _divide(table, denominator[..., None]), denominator > 0


# ------------------------------------------------------------------ comparing
def _rate_pairs(table, method):
    """The rates each comparison is made between, and where it is defined.

    Returns ``(rates, references, valid)``, broadcastable to shape
    ``(n_comparisons, n_conditions, n_events)`` (``valid`` without the last
    axis).
    """
    rates, has = _group_rates(table)
    if method == "between_groups":
        defined = has[..., None]
        high = np.where(defined, rates, -np.inf).max(axis=0, keepdims=True)
        low = np.where(defined, rates, np.inf).min(axis=0, keepdims=True)
        return high, low, has.any(axis=0, keepdims=True)
    if method == "to_overall":
        overall, _ = _group_rates(table.sum(axis=0, keepdims=True))
        return rates, overall, has
    rest, _ = _group_rates(table.sum(axis=0, keepdims=True) - table)
    others_have = (has.sum(axis=0) - has) > 0
    return rates, np.clip(rest, 0.0, 1.0), has & others_have


def _compare_groups(table, method, kind):
    """Difference (largest) or ratio (smallest) of every rate across groups.

    Returns an array of shape ``(n_conditions, n_events)``; NaN marks the
    conditions that no group meets.
    """
    rates, references, valid = _rate_pairs(table, method)
    with np.errstate(invalid="ignore"):
        if kind == "difference":
            values, neutral = np.abs(rates - references), 0.0
        else:
            high, low = np.maximum(rates, references), np.minimum(rates, references)
            values = np.divide(low, high, out=np.ones_like(high), where=high > 0)
            neutral = 1.0
    values = np.where(valid[..., None], values, neutral)
    values = values.max(axis=0) if kind == "difference" else values.min(axis=0)
    values[table.sum(axis=(0, 2)) <= 0] = np.nan
    return values


def _summarize(values, cells, kind, agg):
    """One number from the compared rates: worst over events, then ``agg`` over conditions."""
    if cells is not None:
        keep = np.zeros(values.shape, dtype=bool)
        keep[tuple(np.transpose(cells))] = True
        values = np.where(keep, values, np.nan)
    worst = np.fmax if kind == "difference" else np.fmin  # both skip NaN
    per_condition = worst.reduce(values, axis=1)
    per_condition = per_condition[~np.isnan(per_condition)]
    if per_condition.size == 0:
        return np.nan
    return float(worst.reduce(per_condition) if agg == "worst_case" else per_condition.mean())


def _required_condition(rate):
    """``"=="`` or ``"!="`` if ``rate`` needs samples with ``y_true`` (not) ``pos_label``."""
    make_table, cells = _RATES[rate]
    conditions = {condition for condition, _ in cells or ()}
    if make_table is not _positive_given_true_table or len(conditions) != 1:
        return None
    return "==" if conditions == {1} else "!="


def _disparity(metric, y_true, y_pred, sensitive_features, *, method, sample_weight,
               pos_label=1, agg="worst_case"):
    """Value of the public metric ``metric`` (a key of ``_DISPARITIES``)."""
    _check_option("method", method, _METHODS)
    _check_option("agg", agg, _AGGS)
    rate, kind = _DISPARITIES[metric]
    make_table, cells = _RATES[rate]
    confusion = _group_confusion(y_true, y_pred, sensitive_features, sample_weight)
    values = _compare_groups(make_table(confusion, pos_label), method, kind)
    value = _summarize(values, cells, kind, agg)
    if np.isnan(value):
        raise ValueError(
            f"{metric} is undefined: no sample has y_true {_required_condition(rate)} "
            f"pos_label={pos_label!r}; check pos_label."
        )
    return value


def _disparity_doc(function):
    """Fill the ``{sections}`` and ``{examples}`` lines of a disparity metric.

    The Parameters section follows the function's signature, and the
    Returns and Raises sections its entry in ``_DISPARITIES``.
    """
    name = function.__name__
    rate, kind = _DISPARITIES[name]
    prediction_only = _RATES[rate][0] in (_class_table, _positive_table)
    keys = {"y_true": "y_true_unused" if prediction_only else "y_true",
            "method": f"method_{kind}", "agg": f"agg_{kind}"}
    parameters = [BLOCKS[keys.get(p, p)] for p in inspect.signature(function).parameters]
    sections = ["Parameters\n----------", *parameters, "", BLOCKS[f"returns_{kind}"]]
    condition = _required_condition(rate)
    if condition is not None:
        sections += ["", BLOCKS["raises"].format(condition=condition)]
    return fill_doc(function, sections="\n".join(sections),
                    examples=BLOCKS["examples"].format(name=name))


def _rate_by_group(confusion, rate, pos_label):
    make_table, [(condition, event)] = _RATES[rate]
    rates, _ = _group_rates(make_table(confusion, pos_label))
    return rates[:, condition, event]


# ------------------------------------------------------------------- metrics
@fill_doc
def selection_rate(y_true, y_pred, *, pos_label=1, sample_weight=None):
    """Fraction of samples predicted as ``pos_label``.

    Parameters
    ----------
    {y_true_unused}
    {y_pred}
    pos_label : int, float, bool or str, default=1
        The label counted as selected.
    {sample_weight}

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


@fill_doc
def group_rates(y_true, y_pred, *, sensitive_features, pos_label=1, sample_weight=None):
    """Per-group count, selection rate, TPR, FPR, FNR and accuracy.

    Parameters
    ----------
    {y_true}
    {y_pred}
    {sensitive_features}
    {pos_label}
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
    confusion = _group_confusion(y_true, y_pred, sensitive_features, sample_weight)
    rates = ("selection_rate", "true_positive_rate", "false_positive_rate",
             "false_negative_rate", "accuracy")
    return GroupRates(
        groups=confusion.groups,
        count=np.bincount(confusion.group_codes, minlength=confusion.groups.shape[0]),
        **{name: _rate_by_group(confusion, name, pos_label) for name in rates},
        names=_column_names(sensitive_features),
    )


@_disparity_doc
def demographic_parity_difference(
    y_true, y_pred, *, sensitive_features, method="between_groups", sample_weight=None
):
    """Largest difference between groups in the rate of each predicted class.

    For binary problems this is the difference in selection rate
    ``P(y_pred = 1 | group)`` and equals fairlearn's
    ``demographic_parity_difference``. With more classes it is the largest,
    over predicted classes ``k``, of the difference in
    ``P(y_pred = k | group)``.

    {sections}

    See Also
    --------
    demographic_parity_ratio : The selection rates compared by ratio.

    {examples}
    >>> demographic_parity_difference(y_true, y_pred, sensitive_features=groups)
    0.25
    >>> demographic_parity_difference(y_true, y_pred, sensitive_features=groups,
    ...                               method="to_overall")
    0.125
    """
    return _disparity("demographic_parity_difference", y_true, y_pred, sensitive_features,
                      method=method, sample_weight=sample_weight)


@_disparity_doc
def demographic_parity_ratio(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Smallest ratio between groups of the selection rate.

    The selection rate of a group is ``P(y_pred = pos_label | group)``.
    Equals fairlearn's ``demographic_parity_ratio`` (which has
    ``pos_label=1``), except that it is 1 rather than NaN when no group has
    any selected sample.

    {sections}

    See Also
    --------
    demographic_parity_difference : The class rates compared by difference.

    {examples}
    >>> round(demographic_parity_ratio(y_true, y_pred, sensitive_features=groups), 4)
    0.6667
    >>> demographic_parity_ratio(y_true, y_pred, sensitive_features=groups,
    ...                          method="to_overall")
    0.8
    """
    return _disparity("demographic_parity_ratio", y_true, y_pred, sensitive_features,
                      pos_label=pos_label, method=method, sample_weight=sample_weight)


@_disparity_doc
def equalized_odds_difference(
    y_true, y_pred, *, sensitive_features, method="between_groups", sample_weight=None,
    agg="worst_case",
):
    """Largest difference between groups in the error rates given the true class.

    For each true class ``y``, ``d_y`` is the largest, over predicted classes
    ``k``, of the difference between groups in
    ``P(y_pred = k | y_true = y, group)``. For binary problems ``d_1`` is the
    true positive rate difference and ``d_0`` the false positive rate
    difference, so the result equals fairlearn's
    ``equalized_odds_difference``. Groups without samples of class ``y`` are
    left out of ``d_y``.

    {sections}

    See Also
    --------
    equalized_odds_ratio : The true and false positive rates compared by ratio.

    {examples}
    >>> equalized_odds_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    >>> equalized_odds_difference(y_true, y_pred, sensitive_features=groups, agg="mean")
    0.25
    """
    return _disparity("equalized_odds_difference", y_true, y_pred, sensitive_features,
                      method=method, sample_weight=sample_weight, agg=agg)


@_disparity_doc
def equalized_odds_ratio(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None, agg="worst_case",
):
    """Smallest ratio between groups of the true and false positive rates.

    The true positive rate ``P(y_pred = pos | y_true = pos, group)`` and the
    false positive rate ``P(y_pred = pos | y_true != pos, group)`` are each
    compared by ratio; the result is the smaller ratio (or their mean).
    Equals fairlearn's ``equalized_odds_ratio`` for binary problems when
    every group has positives and negatives; a group without positives
    (negatives) is left out of the true (false) positive rate.

    {sections}

    See Also
    --------
    equalized_odds_difference : The class rates compared by difference.

    {examples}
    >>> equalized_odds_ratio(y_true, y_pred, sensitive_features=groups)
    0.5
    >>> equalized_odds_ratio(y_true, y_pred, sensitive_features=groups, agg="mean")
    0.75
    """
    return _disparity("equalized_odds_ratio", y_true, y_pred, sensitive_features,
                      pos_label=pos_label, method=method, sample_weight=sample_weight, agg=agg)


@_disparity_doc
def equal_opportunity_difference(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Largest difference between groups in the true positive rate.

    The true positive rate (recall) of a group is
    ``P(y_pred = pos_label | y_true = pos_label, group)``. Groups without
    positives are left out. Equals fairlearn's
    ``equal_opportunity_difference`` for binary problems.

    {sections}

    See Also
    --------
    equal_opportunity_ratio : The same rates compared by ratio.

    {examples}
    >>> equal_opportunity_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    return _disparity("equal_opportunity_difference", y_true, y_pred, sensitive_features,
                      pos_label=pos_label, method=method, sample_weight=sample_weight)


@_disparity_doc
def equal_opportunity_ratio(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Smallest ratio between groups of the true positive rate.

    The true positive rate of a group is
    ``P(y_pred = pos_label | y_true = pos_label, group)``. Groups without
    positives are left out. Equals fairlearn's ``equal_opportunity_ratio``
    for binary problems in which every group has positives.

    {sections}

    See Also
    --------
    equal_opportunity_difference : The same rates compared by difference.

    {examples}
    >>> equal_opportunity_ratio(y_true, y_pred, sensitive_features=groups,
    ...                         method="to_overall")
    0.6666666666666666
    """
    return _disparity("equal_opportunity_ratio", y_true, y_pred, sensitive_features,
                      pos_label=pos_label, method=method, sample_weight=sample_weight)


@_disparity_doc
def false_negative_rate_difference(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Largest difference between groups in the false negative rate.

    The false negative rate of a group is
    ``P(y_pred != pos_label | y_true = pos_label, group)``, one minus its
    true positive rate, so the value equals
    :func:`equal_opportunity_difference`; it is the name used by rate
    constraints (RaCO-DP's FNR constraint). Groups without positives are
    left out.

    {sections}

    {examples}
    >>> false_negative_rate_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    return _disparity("false_negative_rate_difference", y_true, y_pred, sensitive_features,
                      pos_label=pos_label, method=method, sample_weight=sample_weight)


@_disparity_doc
def false_positive_rate_difference(
    y_true, y_pred, *, sensitive_features, pos_label=1, method="between_groups",
    sample_weight=None,
):
    """Largest difference between groups in the false positive rate.

    The false positive rate of a group is
    ``P(y_pred = pos_label | y_true != pos_label, group)``. Groups without
    negatives are left out.

    {sections}

    {examples}
    >>> false_positive_rate_difference(y_true, y_pred, sensitive_features=groups)
    0.0
    >>> y_pred = [1, 0, 1, 0, 1, 1, 0, 0]
    >>> false_positive_rate_difference(y_true, y_pred, sensitive_features=groups)
    0.5
    """
    return _disparity("false_positive_rate_difference", y_true, y_pred, sensitive_features,
                      pos_label=pos_label, method=method, sample_weight=sample_weight)


@fill_doc
def worst_group_accuracy(y_true, y_pred, *, sensitive_features, sample_weight=None):
    """Accuracy of the group on which the predictions are least accurate.

    Parameters
    ----------
    {y_true}
    {y_pred}
    {sensitive_features}
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
    confusion = _group_confusion(y_true, y_pred, sensitive_features, sample_weight)
    accuracy = _rate_by_group(confusion, "accuracy", pos_label=None)
    return float(accuracy[~np.isnan(accuracy)].min())
