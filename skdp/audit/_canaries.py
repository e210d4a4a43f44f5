"""Canaries for auditing skdp estimators, and how to score them.

A canary is a record built to be noticed: the audit puts it in the
training data or not by a fair coin and asks, from the fitted estimator
alone, which it was. skdp's canaries live in *their own feature column*:
the data get ``m`` extra columns of zeros, and canary ``i`` is a record
that is zero everywhere except ``canary_scale`` in column ``d + i`` (its
"Dirac" column), with a label (and group, silo, weight...) drawn at random
from the data's. No real record and no other canary touches that column,
so whatever the fitted model does with it comes from canary ``i`` and the
noise alone: the strongest input-space canary for a model that gives each
feature its own parameter (linear models, the first layer of an MLP),
and, for DP-SGD-style training, the same as a gradient-space canary, since
its clipped gradient points along its own coordinate. Any (epsilon,
delta)-DP training procedure must keep the canaries' inclusion hidden on
*every* data set, the augmented one included, so a bound computed this way
is a bound on the procedure.

A ``pandas.DataFrame`` keeps its columns: the canary columns are appended
with names of their own (``skdp_canary_0``, ...), and a canary's other
columns are 0 where they are numeric and the column's most frequent value
where they are not (a category any record may hold).

With ``unit_ids`` (person-level privacy), each canary is a *person* of its
own: a fresh id that no record of the data holds, and ``records_per_canary``
identical records. A person-level claim must hide the whole person.

Scores (higher means "more likely trained on"):

* classifiers: the log-probability of the canary's label;
* regressors: how far the canary's prediction moved from the all-zero
  row's towards its target;
* transformers: minus the canary's own transformed value: a canary at the
  top of its column raises that column's released location and scale (a
  scaler's mean and standard deviation, or its estimated maximum), which
  moves the canary's transformed value down;
  for :class:`~skdp.preprocessing.DPSimpleImputer`, the released fill value
  of the canary's column (a canary at the top raises its mean or median);
  for :class:`~skdp.preprocessing.DPOneHotEncoder`, the released noisy
  count of the canary's category (``candidate_categories`` given; audit
  the encoder with ``[0, canary_scale]`` as each canary column's
  candidates), or else whether the category was released.
"""

import numbers

import numpy as np
from sklearn.base import is_classifier, is_regressor

#: Default size of a canary's entry in its own column, in units of the
#: 99th percentile of the data's row norms (at least 1): beyond nearly every
#: record, so that the canary's gradient is clipped, but not so far that a
#: single step on it overshoots.
CANARY_SCALE_FACTOR = 1.5

#: Prefix of the canary columns' names when ``X`` is a DataFrame.
CANARY_PREFIX = "skdp_canary_"


def _is_frame(X):
    return hasattr(X, "columns") and hasattr(X, "iloc")


def _numeric(X):
    """The numeric columns of ``X`` as a float64 array."""
    if _is_frame(X):
        return X.select_dtypes("number").to_numpy(dtype=np.float64)
    return np.asarray(X, dtype=np.float64)


def default_canary_scale(X):
    """``CANARY_SCALE_FACTOR`` times the 99th percentile of the row norms of
    ``X`` (its numeric columns; at least 1)."""
    values = _numeric(X)
    typical = (float(np.quantile(np.linalg.norm(values, axis=1), 0.99))
               if values.size else 1.0)
    return CANARY_SCALE_FACTOR * max(typical, 1.0)


def canary_names(X, n_canaries):
    """Names of the canary columns of a DataFrame ``X`` (None for an array)."""
    if not _is_frame(X):
        return None
    taken = {str(c) for c in X.columns}
    prefix = CANARY_PREFIX
    while any(name.startswith(prefix) for name in taken):
        prefix = "_" + prefix
    return [f"{prefix}{i}" for i in range(n_canaries)]


def with_canary_columns(X, n_canaries):
    """``X`` with ``n_canaries`` columns of zeros appended (named ones for a
    DataFrame)."""
    if _is_frame(X):
        import pandas as pd

        names = canary_names(X, n_canaries)
        zeros = pd.DataFrame(np.zeros((X.shape[0], n_canaries)), columns=names, index=X.index)
        return pd.concat([X, zeros], axis=1)
    return np.hstack([X, np.zeros((X.shape[0], n_canaries), dtype=X.dtype)])


def canary_rows(X, n_canaries, scale):
    """The canaries' features, in the form of ``with_canary_columns(X, m)``:
    ``scale`` in each one's column, 0 in the other numeric columns, and a
    DataFrame's non-numeric columns at their most frequent value."""
    n_features = X.shape[1]
    diagonal = np.zeros((n_canaries, n_canaries))
    diagonal[np.arange(n_canaries), np.arange(n_canaries)] = scale
    if not _is_frame(X):
        return np.hstack([np.zeros((n_canaries, n_features), dtype=np.float64), diagonal])
    import pandas as pd

    real = {}
    for column in X.columns:
        values = X[column]
        if pd.api.types.is_numeric_dtype(values):
            real[column] = np.zeros(n_canaries, dtype=values.dtype)
        else:
            real[column] = np.repeat(values.mode(dropna=True).iloc[0], n_canaries)
    frame = pd.DataFrame(real, columns=X.columns).astype(X.dtypes.to_dict())
    canaries = pd.DataFrame(diagonal, columns=canary_names(X, n_canaries))
    return pd.concat([frame, canaries], axis=1)


def take_rows(rows, index):
    """Rows ``index`` of an array or a DataFrame (a fresh 0..k-1 index)."""
    if _is_frame(rows):
        return rows.iloc[index].reset_index(drop=True)
    return rows[index]


def stack_rows(top, bottom):
    """``top`` over ``bottom`` (arrays or DataFrames with the same columns)."""
    if _is_frame(top):
        import pandas as pd

        return pd.concat([top.reset_index(drop=True), bottom.reset_index(drop=True)],
                         ignore_index=True)
    return np.vstack([top, bottom])


def canary_targets(estimator, y, n_canaries, rng):
    """The canaries' labels: drawn uniformly from the classes of ``y`` for a
    classifier; for a regressor, ``+-T`` with a random sign, ``T`` the
    largest absolute deviation of ``y`` from its median; None for a
    transformer (``y`` None)."""
    if y is None:
        return None
    y = np.asarray(y)
    if is_classifier(estimator):
        return rng.choice(np.unique(y), n_canaries)
    centre = float(np.median(y))
    spread = max(float(np.max(np.abs(y - centre))), 1.0)
    return centre + spread * rng.choice([-1.0, 1.0], n_canaries)


def fresh_unit_ids(unit_ids, n_canaries):
    """``n_canaries`` unit ids that none of ``unit_ids`` holds: integers
    above the largest when the ids are integers, else strings."""
    ids = np.asarray(unit_ids)
    if ids.dtype.kind in "iu" or (ids.dtype == object and all(
            isinstance(v, numbers.Integral) for v in ids.tolist())):
        start = int(np.max(ids)) + 1 if ids.size else 0
        return np.arange(start, start + n_canaries, dtype=np.int64)
    taken = {str(v) for v in ids.tolist()}
    prefix = CANARY_PREFIX
    while any(v.startswith(prefix) for v in taken):
        prefix = "_" + prefix
    return np.array([f"{prefix}{i}" for i in range(n_canaries)], dtype=object)


def canary_row_params(fit_params, n_samples, n_canaries, rng):
    """Per-record fit parameters (``sensitive_features``, ``silo_ids``,
    ``sample_weight``, a validation mask...) for the canaries: any array of
    length ``n_samples`` is extended by values drawn from its own, except
    ``unit_ids``, where each canary is a person of its own (a fresh id).
    Anything else is passed as it is. Returns ``(real, canaries)`` dicts."""
    real, canaries = {}, {}
    for name, value in fit_params.items():
        array = None if value is None or np.isscalar(value) else np.asarray(value)
        if array is not None and array.ndim >= 1 and array.shape[0] == n_samples:
            real[name] = array
            if name == "unit_ids":
                canaries[name] = fresh_unit_ids(array, n_canaries)
            else:
                canaries[name] = array[rng.integers(0, n_samples, n_canaries)]
        else:
            real[name] = value
    return real, canaries


def canary_scores(estimator, rows, targets, n_features):
    """Score each canary on the fitted ``estimator`` (higher = more likely
    included); see the module's docstring."""
    n_canaries = rows.shape[0]
    columns = n_features + np.arange(n_canaries)
    if is_classifier(estimator) or hasattr(estimator, "predict_proba"):
        proba = estimator.predict_proba(rows)
        classes = list(estimator.classes_)
        index = np.array([classes.index(t) for t in targets])
        with np.errstate(divide="ignore"):
            return np.log(np.clip(proba[np.arange(n_canaries), index], 1e-300, None))
    if is_regressor(estimator) or targets is not None:
        # how far the prediction moved from the canary-free row's towards
        # the canary's target (a step can overshoot the target: the squared
        # error would then rank a trained-on canary low)
        zero = take_rows(rows, [0])
        if _is_frame(zero):
            zero.iloc[0, n_features:] = 0.0
        else:
            zero = np.zeros_like(zero)
        base = float(np.asarray(estimator.predict(zero), dtype=np.float64)[0])
        moved = np.asarray(estimator.predict(rows), dtype=np.float64) - base
        return moved * np.sign(targets - base)
    categories = getattr(estimator, "categories_", None)
    if categories is not None:
        scale = float(np.asarray(rows.iloc[0, columns[0]] if _is_frame(rows)
                                 else rows[0, columns[0]]))
        return _encoder_scores(estimator, categories, columns, scale)
    statistics = getattr(estimator, "statistics_", None)
    if statistics is not None:  # an imputer: the released fill value of the column
        return np.asarray(statistics, dtype=np.float64)[columns]
    transformed = np.asarray(estimator.transform(rows), dtype=np.float64)
    return -transformed[np.arange(n_canaries), columns]


def _encoder_scores(encoder, categories, columns, value):
    """A one-hot encoder's canary scores: the released noisy count of the
    canary's category when the encoder releases candidates' counts
    (``noisy_counts_``), else whether the category was released."""
    noisy_counts = getattr(encoder, "noisy_counts_", None)
    scores = np.zeros(len(columns))
    for j, column in enumerate(columns):  # a loop over canary columns, not records
        if noisy_counts is not None:
            candidates = np.asarray(encoder.candidate_categories[column], dtype=np.float64)
            scores[j] = float(np.sum(np.where(candidates == value, noisy_counts[column], 0.0)))
        else:
            released = np.asarray(categories[column], dtype=np.float64)
            scores[j] = float(np.any(released == value))
    return scores
