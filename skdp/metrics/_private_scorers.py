"""Private fairness metrics and scorers: each call is one
:class:`~skdp.metrics.DPMetricFrame` release on the evaluation rows."""

import dp_accounting as dpa

from ..privacy import compute_epsilon
from ._frame import DPMetricFrame
from ._scorers import _FairnessScorer, make_fairness_scorer

__all__ = ["dp_fairness_metric", "exact_fairness_scorer", "make_private_fairness_scorer",
           "PRIVATE_FAIRNESS_METRICS"]

#: name -> (the frame metrics it compares, "difference" or "ratio"); the
#: largest difference (smallest ratio) over the metrics, as fairlearn's
#: equalized-odds functions take it.
PRIVATE_FAIRNESS_METRICS = {
    "demographic_parity_difference": (("selection_rate",), "difference"),
    "demographic_parity_ratio": (("selection_rate",), "ratio"),
    "equalized_odds_difference": (("true_positive_rate", "false_positive_rate"), "difference"),
    "equalized_odds_ratio": (("true_positive_rate", "false_positive_rate"), "ratio"),
    "equal_opportunity_difference": (("true_positive_rate",), "difference"),
    "equal_opportunity_ratio": (("true_positive_rate",), "ratio"),
}


def dp_fairness_metric(name, y_true, y_pred, *, sensitive_features, sensitive_groups=None,
                       epsilon=1.0, delta=1e-5, method="between_groups", pos_label=1,
                       random_state=None):
    """A fairness metric of binary predictions, released privately.

    Builds one :class:`~skdp.metrics.DPMetricFrame` of the metrics ``name``
    compares (e.g. the true and false positive rates for
    ``"equalized_odds_difference"``) and returns ``(value, frame)``: the
    largest difference (or smallest ratio) among them, from the noisy
    counts, and the frame (its ``dp_event_``, intervals and verdicts).

    Parameters
    ----------
    name : str
        One of :data:`PRIVATE_FAIRNESS_METRICS`.
    y_true, y_pred, sensitive_features, sensitive_groups, epsilon, delta, pos_label, random_state
        As for :class:`~skdp.metrics.DPMetricFrame`.
    method : {"between_groups", "to_overall"}, default="between_groups"

    Returns
    -------
    value : float
    frame : DPMetricFrame

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.metrics import dp_fairness_metric
    >>> rng = np.random.default_rng(0)
    >>> g = rng.integers(0, 2, 5000); y = rng.integers(0, 2, 5000)
    >>> p = (rng.random(5000) < np.where(g == 1, 0.6, 0.4)).astype(int)
    >>> value, frame = dp_fairness_metric("demographic_parity_difference", y, p,
    ...                                   sensitive_features=g, sensitive_groups=[0, 1],
    ...                                   random_state=0)
    >>> round(value, 1), frame.epsilon_ <= 1.0
    (0.2, True)
    """
    if name not in PRIVATE_FAIRNESS_METRICS:
        raise ValueError(
            f"{name!r} is not a private fairness metric; use one of "
            f"{sorted(PRIVATE_FAIRNESS_METRICS)}."
        )
    names, kind = PRIVATE_FAIRNESS_METRICS[name]
    frame = DPMetricFrame(metrics={m: m for m in names}, y_true=y_true, y_pred=y_pred,
                          sensitive_features=sensitive_features,
                          sensitive_groups=sensitive_groups, pos_label=pos_label,
                          epsilon=epsilon, delta=delta, random_state=random_state)
    if kind == "difference":
        value = float(frame.difference(method).max())
    else:
        value = float(frame.ratio(method).min())
    return value, frame


class _PrivateFairnessScorer(_FairnessScorer):
    """A fairness scorer whose every call is a private release; it keeps
    the events of its calls (in this process), so that
    :func:`~skdp.model_selection.spent` composes them: ``dp_event_``,
    ``epsilon_``, ``delta_`` (the calls' deltas summed) and
    ``event_delta_``."""

    def __init__(self, name, sign, kwargs, sensitive_column=None):
        self.metric_name = name
        self.dp_events = []
        self.deltas = []
        super().__init__(self._release, sign, kwargs, sensitive_column=sensitive_column)

    def _release(self, y_true, y_pred, *, sensitive_features, **kwargs):
        value, frame = dp_fairness_metric(self.metric_name, y_true, y_pred,
                                          sensitive_features=sensitive_features, **kwargs)
        self.dp_events.append(frame.dp_event_)
        self.deltas.append(frame.delta_)
        return value

    @property
    def dp_event_(self):
        if not self.dp_events:
            return dpa.NoOpDpEvent()
        return self.dp_events[0] if len(self.dp_events) == 1 else dpa.ComposedDpEvent(
            list(self.dp_events))

    @property
    def event_delta_(self):
        return float(sum(self.deltas))

    @property
    def delta_(self):
        return self.event_delta_

    @property
    def epsilon_(self):
        if not self.dp_events:
            return 0.0
        return compute_epsilon(self.dp_event_, self.event_delta_)

    privacy_unit_ = "record"

    def __repr__(self):
        parts = [repr(self.metric_name)]
        if self._sensitive_column is not None:
            parts.append(f"sensitive_column={self._sensitive_column!r}")
        parts.extend(f"{key}={value!r}" for key, value in self._kwargs.items())
        return f"make_private_fairness_scorer({', '.join(parts)})"


def make_private_fairness_scorer(metric, *, sensitive_groups, epsilon=1.0, delta=1e-5,
                                 sensitive_column=None, greater_is_better=None,
                                 method="between_groups", random_state=None):
    """A scorer that releases a fairness metric privately on each call.

    Like :func:`~skdp.metrics.make_fairness_scorer` (groups routed as
    metadata, or read from ``sensitive_column``), but every call releases
    the metric from one :class:`~skdp.metrics.DPMetricFrame` of the
    evaluation rows at ``(epsilon, delta)``: the score of a fold on
    sensitive evaluation data is itself private. The scorer keeps the
    events of its calls, so ``spent(scorer)`` (or ``spent([model,
    scorer])``) composes them -- as if every call read the same records,
    an upper bound when they read disjoint folds; inside a
    :meth:`~skdp.privacy.PrivacyLedger.charging` block each call is charged
    (also in worker processes). Use it in ``cross_validate``; in a search
    its noisy scores choose the candidate.

    Parameters
    ----------
    metric : str
        One of :data:`~skdp.metrics.PRIVATE_FAIRNESS_METRICS`.
    sensitive_groups : array-like
        The public list of groups (every fold reports on the same groups).
    epsilon : float, default=1.0
        Budget of each call.
    delta : float, default=1e-5
    sensitive_column : str, int or list, default=None
    greater_is_better : bool, default=None
        None: True for ratios, False for differences (negated scores).
    method : {"between_groups", "to_overall"}, default="between_groups"
    random_state : int or None, default=None
        None draws each call's noise from the operating system's CSPRNG.

    Returns
    -------
    scorer : callable
        A scikit-learn scorer with ``dp_event_``, ``epsilon_`` and
        ``delta_`` of all its calls so far.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.model_selection import cross_validate
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdp.metrics import make_private_fairness_scorer
    >>> from skdp.model_selection import spent
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"x": rng.normal(size=3000), "group": rng.integers(0, 2, 3000)})
    >>> y = (X["x"] + X["group"] > 0.5).astype(int)
    >>> model = make_pipeline(make_column_transformer(("drop", ["group"]),
    ...                                               remainder="passthrough"),
    ...                       LogisticRegression())
    >>> dpd = make_private_fairness_scorer("demographic_parity_difference",
    ...                                    sensitive_groups=[0, 1], sensitive_column="group",
    ...                                    epsilon=0.5)
    >>> scores = cross_validate(model, X, y, cv=3, scoring={"dpd": dpd})
    >>> len(dpd.dp_events), round(spent(dpd).epsilon, 1)
    (3, 0.8)
    """
    if metric not in PRIVATE_FAIRNESS_METRICS:
        raise ValueError(
            f"metric={metric!r} is not a private fairness metric; use one of "
            f"{sorted(PRIVATE_FAIRNESS_METRICS)}."
        )
    if greater_is_better is None:
        greater_is_better = PRIVATE_FAIRNESS_METRICS[metric][1] == "ratio"
    kwargs = {"sensitive_groups": list(sensitive_groups), "epsilon": epsilon, "delta": delta,
              "method": method, "random_state": random_state}
    return _PrivateFairnessScorer(metric, 1 if greater_is_better else -1, kwargs,
                                  sensitive_column=sensitive_column)


def exact_fairness_scorer(scorer):
    """The exact fairness scorer of the same metric as a private one, for a
    search whose own release already privatizes its scores; any other
    scorer unchanged.

    :class:`~skdp.model_selection.PrivateGridSearchCV` computes every score
    from one noisy confusion histogram of its validation part; a private
    scorer given to it is scored that way (its own noise would be spent
    twice).

    >>> from skdp.metrics import exact_fairness_scorer, make_private_fairness_scorer
    >>> exact_fairness_scorer(make_private_fairness_scorer(
    ...     "equalized_odds_difference", sensitive_groups=[0, 1], sensitive_column=0))
    make_fairness_scorer(equalized_odds_difference, sensitive_column=0, method='between_groups')
    """
    if not isinstance(scorer, _PrivateFairnessScorer):
        return scorer
    exact = make_fairness_scorer(scorer.metric_name, sensitive_column=scorer._sensitive_column,
                                 greater_is_better=scorer._sign > 0,
                                 method=scorer._kwargs["method"])
    return exact
