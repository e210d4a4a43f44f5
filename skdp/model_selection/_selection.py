"""Private validation scores: a noisy confusion histogram per candidate.

Every candidate predicts the labels of the validation records. Their counts
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
"""

import inspect
import math

import numpy as np
import torch
from sklearn.metrics import check_scoring, get_scorer
from sklearn.metrics._scorer import _Scorer

from .._groups import encode_groups, select_columns
from ..metrics._scorers import _FairnessScorer
from ..privacy import BatchReleases, Release, ReleasePlan, gaussian_noise

__all__ = ["HistogramMetric", "confusion_histograms", "histogram_scores", "release_histograms",
           "resolve_scoring"]

RELEASE = "validation_histograms"


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
        self.needs_groups = isinstance(scorer, _FairnessScorer) or "sensitive_features" in parameters
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

    ``None`` means accuracy (the ``score`` of a classifier). A string, a
    scorer, or a list / tuple / dict of them as in ``GridSearchCV``; every
    scorer must work on hard predictions (``response_method="predict"``).
    """
    if scoring is None or isinstance(scoring, str) or callable(scoring):
        scorer = get_scorer("accuracy") if scoring is None else check_scoring(estimator, scoring)
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
                "can only release scores of hard predictions (a noisy confusion histogram). "
                "Use accuracy, balanced_accuracy, precision, recall, f1 or a fairness scorer."
            )
        metrics[name] = HistogramMetric(name, scorer)
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


def confusion_histograms(predictions, y_codes, groups, n_classes, n_groups):
    """Counts of shape (K, n_groups, n_classes, n_classes) by (candidate,
    group, true label, predicted label); ``predictions`` holds class codes,
    shape (K, m)."""
    predictions = np.asarray(predictions, dtype=np.int64)
    n_candidates, m = predictions.shape
    groups = np.zeros(m, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    cell = (groups * n_classes + y_codes)[None, :] * n_classes + predictions
    offsets = np.arange(n_candidates)[:, None] * (n_groups * n_classes * n_classes)
    counts = np.bincount((cell + offsets).ravel(),
                         minlength=n_candidates * n_groups * n_classes * n_classes)
    return counts.reshape(n_candidates, n_groups, n_classes, n_classes).astype(np.float64)


def histogram_plan(n_candidates):
    """The release plan of the stacked histograms of ``n_candidates``."""
    return ReleasePlan(BatchReleases(
        [Release(RELEASE, sensitivity=math.sqrt(n_candidates))],
        steps=1, sampling_rate=1.0, name="selection",
    ))


def release_histograms(counts, epsilon, delta, generator):
    """Noisy counts and the plan's report (Gaussian noise, ``(epsilon,
    delta)``-DP with respect to the validation records)."""
    report = histogram_plan(counts.shape[0]).calibrate(epsilon, delta)
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
