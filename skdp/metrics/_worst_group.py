"""Worst-group metrics for distributionally robust models, and their scorers.

A robust model is judged by how it does on its worst subpopulation, not on
average:

* :func:`~skdp.metrics.worst_group_accuracy` (in :mod:`._fairness`): the
  accuracy of the least accurate group, groups given at scoring time;
* :func:`worst_class_recall`: the recall of the worst class (the groups are
  the classes themselves, so no group labels are needed);
* :func:`worst_group_mean_squared_error`: the mean squared error of the
  worst group, for regression.

:func:`get_worst_group_scorer` wraps them for ``GridSearchCV`` and
``cross_validate``. Group metrics receive the groups like the fairness
scorers: routed ``sensitive_features`` (requested by default when metadata
routing is on) or a ``sensitive_column`` of ``X``.
"""

import numpy as np
from sklearn.metrics import make_scorer
from sklearn.utils import check_consistent_length, column_or_1d

from .._groups import encode_groups
from ._fairness import worst_group_accuracy
from ._scorers import make_fairness_scorer

__all__ = [
    "get_worst_group_scorer",
    "worst_class_recall",
    "worst_group_mean_squared_error",
]


def worst_class_recall(y_true, y_pred, *, sample_weight=None):
    """Recall of the class on which the predictions are worst.

    ``min_c P(y_pred == c | y_true == c)`` over the classes present in
    ``y_true``: the worst-class accuracy of the DRO literature, which needs
    no group labels.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_pred : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    recall : float in [0, 1]

    Examples
    --------
    >>> from skdp.metrics import worst_class_recall
    >>> worst_class_recall([0, 0, 1, 1, 2, 2], [0, 0, 1, 0, 2, 2])
    0.5
    """
    y_true = column_or_1d(y_true)
    y_pred = column_or_1d(y_pred)
    check_consistent_length(y_true, y_pred)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty; worst_class_recall needs samples.")
    weights = _weights(sample_weight, y_true.shape[0])
    classes, codes = np.unique(y_true, return_inverse=True)
    correct = np.bincount(codes, weights=weights * (y_pred == y_true), minlength=len(classes))
    totals = np.bincount(codes, weights=weights, minlength=len(classes))
    present = totals > 0
    return float((correct[present] / totals[present]).min())


def worst_group_mean_squared_error(y_true, y_pred, *, sensitive_features, sample_weight=None):
    """Mean squared error of the group on which the predictions are worst.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Real targets.
    y_pred : array-like of shape (n_samples,)
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each sample (several columns form intersectional groups).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    mse : float
        ``max_z mean((y_true - y_pred)^2 | Z = z)``; lower is better.

    Examples
    --------
    >>> from skdp.metrics import worst_group_mean_squared_error
    >>> worst_group_mean_squared_error([0, 0, 1, 1], [0, 0, 0, 3],
    ...                                sensitive_features=["a", "a", "b", "b"])
    2.5
    """
    y_true = column_or_1d(y_true).astype(np.float64)
    y_pred = column_or_1d(y_pred).astype(np.float64)
    check_consistent_length(y_true, y_pred)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty; worst_group_mean_squared_error needs samples.")
    if not (np.all(np.isfinite(y_true)) and np.all(np.isfinite(y_pred))):
        raise ValueError("y_true and y_pred must be finite.")
    weights = _weights(sample_weight, y_true.shape[0])
    codes, groups = encode_groups(sensitive_features, y_true.shape[0])
    errors = np.bincount(codes, weights=weights * (y_true - y_pred) ** 2, minlength=len(groups))
    totals = np.bincount(codes, weights=weights, minlength=len(groups))
    present = totals > 0
    return float((errors[present] / totals[present]).max())


def _weights(sample_weight, n):
    if sample_weight is None:
        return np.ones(n)
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.shape != (n,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"sample_weight must be {n} finite non-negative weights.")
    if not weights.sum() > 0:
        raise ValueError("sample_weight sums to zero.")
    return weights


_GROUP_METRICS = {
    "worst_group_accuracy": (worst_group_accuracy, True),
    "worst_group_mean_squared_error": (worst_group_mean_squared_error, False),
}


def get_worst_group_scorer(name, *, sensitive_column=None):
    """Scorer for a worst-group metric, usable in ``GridSearchCV``.

    Parameters
    ----------
    name : {"worst_group_accuracy", "worst_class_recall", "worst_group_mean_squared_error"}
        ``"worst_group_mean_squared_error"`` scores as the negated error
        (greater is better), like scikit-learn's ``"neg_mean_squared_error"``.
    sensitive_column : str, int or list, default=None
        Column of ``X`` holding the group, for use without metadata routing
        (ignored by ``"worst_class_recall"``, which needs no groups).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y_true, **metadata)``. The group scorers
        request ``sensitive_features`` by default (see
        :func:`~skdp.metrics.make_fairness_scorer`).

    Examples
    --------
    >>> from skdp.metrics import get_worst_group_scorer
    >>> get_worst_group_scorer("worst_group_accuracy", sensitive_column="group")
    make_fairness_scorer(worst_group_accuracy, sensitive_column='group')
    """
    if name == "worst_class_recall":
        return make_scorer(worst_class_recall)
    if name not in _GROUP_METRICS:
        raise ValueError(
            f"name={name!r} is not a worst-group scorer; use one of "
            f"{sorted([*_GROUP_METRICS, 'worst_class_recall'])}."
        )
    metric, greater = _GROUP_METRICS[name]
    return make_fairness_scorer(metric, sensitive_column=sensitive_column,
                                greater_is_better=greater)
