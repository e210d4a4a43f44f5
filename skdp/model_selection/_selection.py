"""Private validation scores: a noisy confusion histogram (classifiers) or
noisy sums of clipped errors (regressors) per candidate.

**Classifiers.** Every candidate predicts the labels of the validation records. Their counts
by (group, true label, predicted label) form one histogram per candidate; a
validation record adds 1 to one cell of each candidate's histogram, so the
stacked histograms of ``K`` candidates have l2 sensitivity ``sqrt(K)``
under add/remove-one neighbours. They are released once with Gaussian noise
calibrated by a :class:`~skdp.privacy.ReleasePlan` (Gaussian mechanism;
Dwork & Roth, 2014, Thm. A.1 for the noise-to-privacy relation, accounted
exactly by dp-accounting). Every metric of hard predictions that accepts
``sample_weight`` -- accuracy, balanced accuracy, precision, recall, F1,
and every skdp fairness metric (demographic parity, equalized odds, ...,
worst-group accuracy) -- is then a function of the noisy histogram: it is
evaluated on the histogram's cells weighted by their noisy counts (negative
counts set to 0), which is post-processing. So are the choice of the best
candidate (report noisy max over released scores) and any refit rule such
as :func:`~skdp.model_selection.best_within`.

**Regressors.** Each validation record's error ``|prediction - y|`` under
every candidate is clipped to a public ``error_bound`` b (with public
``y_bounds``, the target and the predictions are first clipped to them, and
b defaults to their width; a non-finite prediction counts as error b). For
``K`` candidates the released statistics are

* the sums over the validation records of the clipped squared errors (one
  per candidate): one record moves each by at most ``b**2``, so the vector
  has l2 sensitivity ``sqrt(K) * b**2``;
* the sums of the clipped absolute errors (only for
  ``neg_mean_absolute_error``): sensitivity ``sqrt(K) * b``;
* the count of validation records and, for ``r2``, the sums of ``u`` and
  ``u**2`` with ``u = (clip(y) - mid) / half`` in [-1, 1] the target mapped
  from ``y_bounds``: one record adds ``(1, u, u**2)``, sensitivity
  ``sqrt(3)`` (1 for the count alone).

They are computed from the same records, so they are one Gaussian
mechanism of one :class:`~skdp.privacy.ReleasePlan` batch (GDP
``mu^2`` composes over its releases); the count and moments get
``_MOMENT_SHARE`` of it, the error sums split the rest. The mean squared
error is the noisy sum over the noisy count, RMSE its square root, MAE
likewise, and ``r2 = 1 - SSE / SST`` with ``SST`` from the noisy moments
(post-processing). The count and ``SST`` are common to all candidates, so
the chosen candidate is the argmin of the noisy error sums:
report-noisy-max (here min) over Gaussian-noised losses of bounded
sensitivity.

**Noise of the scores.** Every score comes with the standard deviation of
the selection noise it carries (:class:`ScoreNoise`), by the delta method:
the noise is Gaussian with a public standard deviation per released value,
and the score's gradient with respect to the released values, taken at the
released (noisy) values, propagates it to first order. This reads released
values and public noise scales only, so it is post-processing and costs no
privacy. For a histogram score the gradient is taken by central finite
differences of the metric itself (so it is exactly the function that made
the score, whatever the metric); a cell whose noisy count was clipped to 0
counts with its one-sided derivative, as if its noise could move it up
(conservative: its noise is then counted in full). The regression scores
are explicit ratios, differentiated analytically; their count and target
moments are common to all candidates, and :meth:`ScoreNoise.difference_std`
lets that shared noise cancel in a comparison of two candidates. It is a
first-order figure: good when a score's noise is small against the counts
it is made of, rough when a group or class has a handful of validation
records (tests check it against a Monte Carlo over the noise).

**Privacy units.** With ``unit_ids`` the search's neighbours add or remove
a whole unit (a person with all their records). Each validation record
then counts with its unit factor ``a_i = 1 / min(|u|, k)`` (0 for a record
beyond the ``k`` its unit keeps; :func:`~skdp.privacy.bound_units`): it
adds ``a_i`` to one cell of each candidate's histogram, ``a_i`` times its
clipped errors to the error sums and ``a_i (1, u, u**2)`` to the count and
moments (the ``weights`` of :func:`confusion_histograms` and
:func:`error_sums`). A unit's factors sum to at most 1, so by the triangle
inequality a whole unit moves every statistic by at most one record's
bound: every sensitivity above holds with units in place of records, and
the plans name the unit in their reports. The scores are then per-unit
weighted: each validation unit weighs as much as one record did.
"""

import inspect
import math
import warnings

import numpy as np
import torch
from sklearn.base import is_regressor
from sklearn.metrics import (
    check_scoring,
    get_scorer,
    mean_absolute_error,
    mean_squared_error,
    r2_score,
    root_mean_squared_error,
)
from sklearn.metrics._scorer import _Scorer

from .._groups import encode_groups, select_columns
from ..metrics import exact_fairness_scorer, needs_sensitive_features
from ..privacy import BatchReleases, Release, ReleasePlan, gaussian_noise

__all__ = ["HistogramMetric", "LossMetric", "ScoreNoise", "confusion_histograms", "error_sums",
           "histogram_score_noise", "histogram_scores", "loss_score_noise", "loss_scores",
           "regression_plan", "release_error_sums", "release_histograms", "resolve_scoring"]

RELEASE = "validation_histograms"
#: Release names of the regression statistics.
LOSS_RELEASES = {"squared": "validation_squared_errors", "absolute": "validation_absolute_errors"}
MOMENTS = "validation_moments"
#: Share (of the selection's GDP mu^2) of the count and target moments; the
#: error sums, which decide the choice, get the rest.
_MOMENT_SHARE = 0.1
#: Regression metrics and what they are computed from:
#: score function -> (statistic, error sums it needs, needs target moments).
_REGRESSION_METRICS = {
    mean_squared_error: ("mse", "squared", False),
    root_mean_squared_error: ("rmse", "squared", False),
    mean_absolute_error: ("mae", "absolute", False),
    r2_score: ("r2", "squared", True),
}
REGRESSION_SCORERS = ("neg_mean_squared_error", "neg_root_mean_squared_error",
                      "neg_mean_absolute_error", "r2")


class HistogramMetric:
    """A scorer evaluated on a (noisy) confusion histogram.

    Parameters
    ----------
    name : str
    scorer : sklearn scorer
        Made by ``make_scorer`` / ``get_scorer`` with
        ``response_method="predict"``, or a skdp fairness scorer.
    """

    def __init__(self, name, scorer):
        self.name = name
        self.scorer = scorer
        self.func = scorer._score_func
        self.sign = scorer._sign
        self.kwargs = dict(scorer._kwargs)
        try:
            parameters = inspect.signature(self.func).parameters
        except (TypeError, ValueError):  # builtins without a signature
            parameters = {}
        self.needs_groups = (needs_sensitive_features(scorer)
                             or "sensitive_features" in parameters)
        if "sample_weight" not in parameters and not any(
            p.kind is p.VAR_KEYWORD for p in parameters.values()
        ):
            raise ValueError(
                f"scoring[{name!r}]: its metric {getattr(self.func, '__name__', self.func)!r} "
                "takes no sample_weight, so it cannot be computed from the released noisy "
                "confusion histogram. Use a metric of hard predictions that accepts "
                "sample_weight (accuracy, balanced_accuracy, precision, recall, f1, or a "
                "skdp.metrics fairness scorer)."
            )

    @property
    def sensitive_column(self):
        return getattr(self.scorer, "_sensitive_column", None)

    def __call__(self, y_true, y_pred, groups, weights):
        if not weights.sum() > 0:
            return math.nan
        kwargs = dict(self.kwargs)
        if self.needs_groups:
            kwargs["sensitive_features"] = groups
        return self.sign * float(self.func(y_true, y_pred, sample_weight=weights, **kwargs))


def resolve_scoring(estimator, scoring):
    """``({name: HistogramMetric}, multimetric)`` for the ``scoring`` parameter.

    ``None`` means accuracy for a classifier and negative mean squared error
    for a regressor. A string, a scorer, or a list / tuple / dict of them as
    in ``GridSearchCV``; every scorer must work on hard predictions
    (``response_method="predict"``). A regressor's scorers become
    :class:`LossMetric` (one of :data:`REGRESSION_SCORERS`), a classifier's
    :class:`HistogramMetric`.
    """
    regression = is_regressor(estimator)
    if scoring is None or isinstance(scoring, str) or callable(scoring):
        default = "neg_mean_squared_error" if regression else "accuracy"
        scorer = get_scorer(default) if scoring is None else check_scoring(estimator, scoring)
        scorers, multimetric = {"score": scorer}, False
    elif isinstance(scoring, (list, tuple, set)):
        if not scoring or not all(isinstance(s, str) for s in scoring):
            raise ValueError(
                f"scoring as a list must be a non-empty list of scorer names; got {scoring!r}."
            )
        scorers, multimetric = {s: get_scorer(s) for s in scoring}, True
    elif isinstance(scoring, dict):
        if not scoring:
            raise ValueError("scoring is an empty dict; give at least one scorer.")
        scorers = {k: (get_scorer(v) if isinstance(v, str) else v) for k, v in scoring.items()}
        multimetric = True
    else:
        raise ValueError(
            "scoring must be None, a scorer name, a scorer, or a list or dict of them; got "
            f"{scoring!r}."
        )
    # a private fairness scorer is scored from the search's own noisy histogram
    scorers = {name: exact_fairness_scorer(scorer) for name, scorer in scorers.items()}
    metrics = {}
    for name, scorer in scorers.items():
        if not isinstance(scorer, _Scorer):
            raise ValueError(
                f"scoring[{name!r}] = {scorer!r} is not a scikit-learn scorer made by "
                "make_scorer/get_scorer or skdp.metrics.make_fairness_scorer. A private search "
                "computes scores from a noisy confusion histogram, so it needs the metric "
                "behind the scorer; wrap your metric with sklearn.metrics.make_scorer."
            )
        if scorer._response_method != "predict":
            raise ValueError(
                f"scoring[{name!r}] needs {scorer._response_method!r}, but a private search "
                "can only release scores of hard predictions (a noisy confusion histogram or "
                "noisy error sums). "
                + (f"Use one of {list(REGRESSION_SCORERS)}." if regression else
                   "Use accuracy, balanced_accuracy, precision, recall, f1 or a fairness scorer.")
            )
        metrics[name] = LossMetric(name, scorer) if regression else HistogramMetric(name, scorer)
    return metrics, multimetric


def group_codes(metrics, X, routed, n_samples):
    """Group code of every row (or None when no scorer needs groups) and the
    group labels, from routed ``sensitive_features`` or the scorers'
    ``sensitive_column`` of ``X``.

    ``routed`` maps scorer names to the group array each was routed (None
    when it got none).
    """
    sources = {}
    for name, metric in metrics.items():
        if not metric.needs_groups:
            continue
        groups = routed.get(name)
        if groups is None and metric.sensitive_column is not None:
            groups = select_columns(X, metric.sensitive_column, name="sensitive_column")
        if groups is None:
            raise ValueError(
                f"scoring[{name!r}] needs the group of each validation row and got none: "
                "with metadata routing on, pass sensitive_features=A to fit; with routing off, "
                "make the scorer with sensitive_column=<column of X>."
            )
        sources[name] = groups
    if not sources:
        return None, None
    encoded = {name: encode_groups(groups, n_samples) for name, groups in sources.items()}
    (first, (codes, domain)), *rest = encoded.items()
    for name, (other, _) in rest:
        if not np.array_equal(codes, other):
            raise ValueError(
                f"scoring[{first!r}] and scoring[{name!r}] get different groups; a private "
                "search releases one histogram by group, so every fairness scorer must use "
                "the same sensitive features."
            )
    return codes, domain


def confusion_histograms(predictions, y_codes, groups, n_classes, n_groups, weights=None):
    """Counts of shape (K, n_groups, n_classes, n_classes) by (candidate,
    group, true label, predicted label); ``predictions`` holds class codes,
    shape (K, m).

    ``weights`` (shape (m,), factors in [0, 1] such as the unit factors of
    :func:`~skdp.privacy.bound_units`) make each record add its factor
    instead of 1; None counts every record once.
    """
    predictions = np.asarray(predictions, dtype=np.int64)
    n_candidates, m = predictions.shape
    groups = np.zeros(m, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    cell = (groups * n_classes + y_codes)[None, :] * n_classes + predictions
    offsets = np.arange(n_candidates)[:, None] * (n_groups * n_classes * n_classes)
    if weights is not None:
        weights = np.tile(np.asarray(weights, dtype=np.float64), n_candidates)
    counts = np.bincount((cell + offsets).ravel(), weights=weights,
                         minlength=n_candidates * n_groups * n_classes * n_classes)
    return counts.reshape(n_candidates, n_groups, n_classes, n_classes).astype(np.float64)


def histogram_plan(n_candidates, privacy_unit="record"):
    """The release plan of the stacked histograms of ``n_candidates``
    (``privacy_unit`` as in :class:`~skdp.privacy.ReleasePlan`)."""
    return ReleasePlan(BatchReleases(
        [Release(RELEASE, sensitivity=math.sqrt(n_candidates))],
        steps=1, sampling_rate=1.0, name="selection",
    ), privacy_unit=privacy_unit)


def release_histograms(counts, epsilon, delta, generator, privacy_unit="record"):
    """Noisy counts and the plan's report (Gaussian noise, ``(epsilon,
    delta)``-DP with respect to the validation records, or units)."""
    report = histogram_plan(counts.shape[0], privacy_unit).calibrate(epsilon, delta)
    values = torch.as_tensor(counts, dtype=torch.float64)
    noisy = values + gaussian_noise(values, report.scale(RELEASE), generator)
    return noisy.numpy(), report


def histogram_scores(noisy, classes, metrics):
    """``{name: array of K scores}`` of every metric on every candidate's
    noisy histogram (counts below 0 count as 0)."""
    n_candidates, n_groups, n_classes, _ = noisy.shape
    g, t, p = np.meshgrid(np.arange(n_groups), np.arange(n_classes), np.arange(n_classes),
                          indexing="ij")
    y_true, y_pred, groups = classes[t.ravel()], classes[p.ravel()], g.ravel()
    weights = np.clip(noisy.reshape(n_candidates, -1), 0.0, None)
    return {
        name: np.array([metric(y_true, y_pred, groups, w) for w in weights])
        for name, metric in metrics.items()
    }


class ScoreNoise:
    """Noise standard deviation of one scorer's K noisy scores.

    A score's selection noise, to first order, is the sum of a part of its
    own (independent between candidates: each candidate's histogram or
    error sum has noise of its own) and a part common to every candidate
    (the regressors' noisy count and target moments).

    Parameters
    ----------
    own : ndarray of shape (K,)
        Standard deviation of each score's own noise.
    shared : ndarray of shape (K, m) or None
        Loadings of each score on ``m`` independent standard-normal noises
        shared by every candidate (None: none).
    """

    def __init__(self, own, shared=None):
        self.own = np.asarray(own, dtype=np.float64)
        k = self.own.shape[0]
        self.shared = (np.zeros((k, 0)) if shared is None
                       else np.asarray(shared, dtype=np.float64).reshape(k, -1))

    @property
    def std(self):
        """ndarray of shape (K,): standard deviation of each score's noise."""
        return np.sqrt(self.own**2 + np.sum(self.shared**2, axis=1))

    def difference_std(self, i, j):
        """Standard deviation of the noise of ``score[i] - score[j]`` (the
        shared noise cancels to first order)."""
        if i == j:
            return 0.0
        return float(math.sqrt(self.own[i] ** 2 + self.own[j] ** 2
                               + np.sum((self.shared[i] - self.shared[j]) ** 2)))


#: A choice is "within the noise" when the released scores that decide it
#: differ by less than this many standard deviations of their noise.
NOISE_MARGIN = 1.0
NOISE_ADVICE = (
    "Another draw of the selection noise could well choose differently. To separate the "
    "candidates: give the selection more validation records (more data or a larger "
    "validation_fraction), a larger epsilon, or fewer candidates (their scores share the "
    "selection's budget); the noise std of every score is in "
    "cv_results_['std_noise_test_<scorer>']."
)

#: Finite-difference step of the histogram scores' gradients, relative to
#: the largest noisy count of the histogram (a ratio of counts moves by
#: ~1e-4 of itself: far below any noise, far above rounding).
_FD_STEP = 1e-4


def histogram_score_noise(noisy, classes, metrics, std):
    """``{name: ScoreNoise}`` of every metric's K scores from noisy
    histograms with independent Gaussian noise of standard deviation ``std``
    per cell (delta method at the released histogram; post-processing).

    The gradient of each score with respect to the cells is taken by
    central differences of the metric on the clipped noisy counts (the
    weights the score was computed from); a cell at 0 uses the forward
    difference.
    """
    n_candidates, n_groups, n_classes, _ = noisy.shape
    g, t, p = np.meshgrid(np.arange(n_groups), np.arange(n_classes), np.arange(n_classes),
                          indexing="ij")
    y_true, y_pred, groups = classes[t.ravel()], classes[p.ravel()], g.ravel()
    weights = np.clip(noisy.reshape(n_candidates, -1), 0.0, None)
    n_cells = weights.shape[1]
    noise = {}
    with warnings.catch_warnings():
        # metrics of perturbed histograms repeat the warnings of the scores
        warnings.simplefilter("ignore")
        for name, metric in metrics.items():
            own = np.empty(n_candidates)
            for k, w in enumerate(weights):
                h = _FD_STEP * max(float(w.max()), 1.0)
                base = metric(y_true, y_pred, groups, w)
                grad = np.empty(n_cells)
                for c in range(n_cells):
                    up = w.copy()
                    up[c] += h
                    f_up = metric(y_true, y_pred, groups, up)
                    if w[c] >= h:
                        down = w.copy()
                        down[c] -= h
                        grad[c] = (f_up - metric(y_true, y_pred, groups, down)) / (2 * h)
                    else:  # clipped at (or near) 0: one-sided
                        grad[c] = (f_up - base) / h
                own[k] = float(std) * float(np.sqrt(np.sum(grad**2)))
            noise[name] = ScoreNoise(own)
    return noise


# ------------------------------------------------------------------ regression
class LossMetric:
    """A regression scorer evaluated on noisy sums of clipped errors.

    Parameters
    ----------
    name : str
    scorer : sklearn scorer
        ``get_scorer`` of one of :data:`REGRESSION_SCORERS`, or
        ``make_scorer`` of ``mean_squared_error``,
        ``root_mean_squared_error``, ``mean_absolute_error`` or ``r2_score``
        without extra arguments.
    """

    needs_groups = False
    sensitive_column = None

    def __init__(self, name, scorer):
        self.name = name
        self.scorer = scorer
        self.sign = scorer._sign
        func = scorer._score_func
        found = _REGRESSION_METRICS.get(func)
        if found is None or scorer._kwargs:
            what = getattr(func, "__name__", func)
            extra = f" with arguments {scorer._kwargs}" if found is not None else ""
            raise ValueError(
                f"scoring[{name!r}]: a private search of a regressor computes scores from noisy "
                f"sums of clipped errors and cannot compute {what!r}{extra}. Use one of "
                f"{list(REGRESSION_SCORERS)}."
            )
        self.statistic, self.loss, self.needs_moments = found

    def __call__(self, sums, moments, y_bounds):
        """Scores of the K candidates from the noisy ``sums`` ({loss: (K,)})
        and ``moments`` (count[, sum u, sum u**2])."""
        count = max(float(moments[0]), 1.0)
        mean = sums[self.loss] / count
        if self.statistic == "rmse":
            value = np.sqrt(np.clip(mean, 0.0, None))
        elif self.statistic == "r2":
            low, high = y_bounds
            half = (high - low) / 2.0
            sst = half**2 * (float(moments[2]) - float(moments[1]) ** 2 / count)
            # a noisy SST <= 0 keeps the ranking (it is common to all)
            sst = max(sst, 1e-12 * half**2 * count)
            value = 1.0 - sums["squared"] / sst
        else:
            value = mean
        return self.sign * value


def error_sums(predictions, y, losses, error_bound, y_bounds=None, moments=False,
               weights=None):
    """Exact statistics of the validation records (before noise).

    Parameters
    ----------
    predictions : ndarray of shape (K, m)
    y : ndarray of shape (m,)
    losses : iterable of {"squared", "absolute"}
    error_bound : float
        Public clip bound b on each error ``|prediction - y|``.
    y_bounds : (low, high) or None
        Public target bounds; targets and predictions are clipped to them.
    moments : bool
        Also the sums of ``u`` and ``u**2`` (``u`` the target mapped from
        ``y_bounds`` to [-1, 1]), for ``r2``.
    weights : ndarray of shape (m,) or None
        Factors in [0, 1] (e.g. the unit factors of
        :func:`~skdp.privacy.bound_units`) that multiply each record's
        clipped errors and its ``(1, u, u**2)``; None weighs every record 1.

    Returns
    -------
    sums : dict {loss: ndarray of shape (K,)}
    stats : ndarray of shape (1,) or (3,)
        The count of records, then the target sums.
    """
    predictions = np.asarray(predictions, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y_bounds is not None:
        low, high = y_bounds
        y = np.clip(y, low, high)
        predictions = np.clip(predictions, low, high)  # keeps NaN
    errors = np.abs(predictions - y[None, :])
    errors = np.where(np.isfinite(errors), np.minimum(errors, error_bound), error_bound)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
    sums = {}
    for loss in losses:
        per_record = errors**2 if loss == "squared" else errors
        sums[loss] = _total(per_record, weights)
    stats = [float(y.shape[0]) if weights is None else float(weights.sum())]
    if moments:
        low, high = y_bounds
        u = (y - (low + high) / 2.0) / ((high - low) / 2.0)
        stats += [float(_total(u, weights)), float(_total(np.square(u), weights))]
    return sums, np.asarray(stats)


def _total(values, weights):
    """Sum over the records (the last axis), each times its weight when
    ``weights`` is given."""
    return values.sum(axis=-1) if weights is None else values @ weights


def regression_plan(n_candidates, losses, error_bound, n_moments, privacy_unit="record"):
    """One Gaussian batch: the error sums of ``n_candidates`` (l2
    sensitivity ``sqrt(K) b**2`` squared, ``sqrt(K) b`` absolute) and the
    count and target moments (``sqrt(n_moments)``); ``privacy_unit`` as in
    :class:`~skdp.privacy.ReleasePlan`."""
    losses = list(losses)
    root = math.sqrt(n_candidates)
    releases = [
        Release(LOSS_RELEASES[loss],
                sensitivity=root * (error_bound**2 if loss == "squared" else error_bound),
                share=(1.0 - _MOMENT_SHARE) / len(losses))
        for loss in losses
    ]
    releases.append(Release(MOMENTS, sensitivity=math.sqrt(n_moments), share=_MOMENT_SHARE))
    return ReleasePlan(BatchReleases(releases, steps=1, sampling_rate=1.0, name="selection"),
                       privacy_unit=privacy_unit)


def release_error_sums(sums, stats, error_bound, epsilon, delta, generator,
                       privacy_unit="record"):
    """Noisy ``sums`` and ``stats`` and the plan's report (``(epsilon,
    delta)``-DP with respect to the validation records, or units)."""
    n_candidates = len(next(iter(sums.values())))
    plan = regression_plan(n_candidates, list(sums), error_bound, len(stats), privacy_unit)
    report = plan.calibrate(epsilon, delta)
    noisy = {}
    for loss, values in sums.items():
        values = torch.as_tensor(values, dtype=torch.float64)
        noise = gaussian_noise(values, report.scale(LOSS_RELEASES[loss]), generator)
        noisy[loss] = (values + noise).numpy()
    stats_t = torch.as_tensor(stats, dtype=torch.float64)
    noisy_stats = (stats_t + gaussian_noise(stats_t, report.scale(MOMENTS), generator)).numpy()
    return noisy, noisy_stats, report


def loss_score_noise(noisy_sums, noisy_stats, metrics, noise, y_bounds=None):
    """``{name: ScoreNoise}`` of every :class:`LossMetric`'s K scores (delta
    method at the released values; post-processing).

    ``noise`` maps the release names (:data:`LOSS_RELEASES` values and
    :data:`MOMENTS`) to their noise standard deviations. A score's own noise
    comes from its candidate's error sum; the noisy count and target moments
    are shared by every candidate.
    """
    stats = np.asarray(noisy_stats, dtype=np.float64)
    sigma_m = float(noise[MOMENTS])
    result = {}
    for name, metric in metrics.items():
        total = np.asarray(noisy_sums[metric.loss], dtype=np.float64)
        sigma = float(noise[LOSS_RELEASES[metric.loss]])
        # d count / d (noisy count): the count is floored at 1
        count = max(float(stats[0]), 1.0)
        dcount = 1.0 if float(stats[0]) > 1.0 else 0.0
        shared = np.zeros((total.shape[0], stats.shape[0]))
        if metric.statistic == "r2":
            low, high = y_bounds
            half2 = ((high - low) / 2.0) ** 2
            m1, m2 = float(stats[1]), float(stats[2])
            raw = half2 * (m2 - m1**2 / count)
            floor = 1e-12 * half2 * count
            sst = max(raw, floor)
            # value = 1 - total / sst
            own = sigma / sst * np.ones_like(total)
            dvalue_dsst = total / sst**2
            if raw > floor:
                dsst = np.array([half2 * m1**2 / count**2 * dcount, -2.0 * half2 * m1 / count,
                                 half2])
            else:
                dsst = np.array([1e-12 * half2 * dcount, 0.0, 0.0])
            shared = dvalue_dsst[:, None] * dsst[None, :] * sigma_m
        else:
            mean = total / count
            own = sigma / count * np.ones_like(total)
            shared[:, 0] = -total / count**2 * dcount * sigma_m
            if metric.statistic == "rmse":
                # d sqrt(m) / dm = 1 / (2 sqrt(m)); at a mean at or below its
                # own noise the root is floored there (a rough figure)
                scale = np.sqrt(own**2 + shared[:, 0] ** 2)
                slope = 1.0 / (2.0 * np.sqrt(np.maximum(mean, scale)))
                own, shared = own * slope, shared * slope[:, None]
        result[name] = ScoreNoise(np.abs(own), metric.sign * shared)
    return result


def loss_scores(noisy_sums, noisy_stats, metrics, y_bounds=None):
    """``{name: array of K scores}`` of every :class:`LossMetric`."""
    return {name: np.asarray(metric(noisy_sums, noisy_stats, y_bounds), dtype=np.float64)
            for name, metric in metrics.items()}
