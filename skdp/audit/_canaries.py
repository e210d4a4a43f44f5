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

import numpy as np
from sklearn.base import is_classifier, is_regressor

#: Default size of a canary's entry in its own column, in units of the
#: 99th percentile of the data's row norms (at least 1): beyond nearly every
#: record, so that the canary's gradient is clipped, but not so far that a
#: single step on it overshoots.
CANARY_SCALE_FACTOR = 1.5


def default_canary_scale(X):
    """``CANARY_SCALE_FACTOR`` times the 99th percentile of the row norms of
    ``X`` (at least 1)."""
    typical = float(np.quantile(np.linalg.norm(X, axis=1), 0.99)) if X.size else 1.0
    return CANARY_SCALE_FACTOR * max(typical, 1.0)


def with_canary_columns(X, n_canaries):
    """``X`` with ``n_canaries`` columns of zeros appended."""
    return np.hstack([X, np.zeros((X.shape[0], n_canaries), dtype=X.dtype)])


def canary_rows(n_features, n_canaries, scale, dtype=np.float64):
    """The canaries' features: zero except ``scale`` in each one's column."""
    rows = np.zeros((n_canaries, n_features + n_canaries), dtype=dtype)
    rows[np.arange(n_canaries), n_features + np.arange(n_canaries)] = scale
    return rows


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


def canary_row_params(fit_params, n_samples, n_canaries, rng):
    """Per-record fit parameters (``sensitive_features``, ``silo_ids``,
    ``sample_weight``, a validation mask...) for the canaries: any array of
    length ``n_samples`` is extended by values drawn from its own; anything
    else is passed as it is. Returns ``(real, canaries)`` dicts."""
    real, canaries = {}, {}
    for name, value in fit_params.items():
        array = None if value is None or np.isscalar(value) else np.asarray(value)
        if array is not None and array.ndim >= 1 and array.shape[0] == n_samples:
            real[name] = array
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
    zero = np.zeros((1, rows.shape[1]), dtype=rows.dtype)
    if is_regressor(estimator) or targets is not None:
        # how far the prediction moved from the zero row's towards the
        # canary's target (a step can overshoot the target: the squared
        # error would then rank a trained-on canary low)
        base = float(np.asarray(estimator.predict(zero), dtype=np.float64)[0])
        moved = np.asarray(estimator.predict(rows), dtype=np.float64) - base
        return moved * np.sign(targets - base)
    categories = getattr(estimator, "categories_", None)
    if categories is not None:
        return _encoder_scores(estimator, categories, columns, rows[0, columns[0]])
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
