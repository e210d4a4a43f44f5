"""Scorers for fairness metrics, usable in ``GridSearchCV`` and ``cross_validate``.

A fairness scorer needs the group of every test row, which a plain scorer
``scorer(estimator, X, y_true)`` does not get. It can come two ways:

* **Metadata routing on** (``sklearn.set_config(enable_metadata_routing=True)``):
  pass ``sensitive_features=A`` to ``GridSearchCV.fit`` or
  ``cross_validate(..., params={"sensitive_features": A})``; scikit-learn
  splits ``A`` by fold and hands the test part to the scorer. The scorers
  request ``sensitive_features`` by default (a class-level
  ``__metadata_request__score``, as ``GroupKFold`` does for ``groups``), so
  no ``set_score_request`` call is needed.
* **Routing off** (scikit-learn's default): keep the group in a column of
  ``X`` and name it with ``sensitive_column``; the scorer reads it from the
  test rows of ``X``. If routed ``sensitive_features`` arrive as well, they
  win.

A scorer that gets no groups either way raises a ValueError that says both
ways. scikit-learn's searches catch every exception of a scorer: with the
default ``error_score=np.nan`` the score becomes NaN and the explanation is in
the "Scoring failed" warning; ``error_score="raise"`` raises it.

The scorers are scikit-learn scorers: the class extends
``sklearn.metrics._scorer._Scorer`` (what :func:`sklearn.metrics.make_scorer`
returns) and changes only how the metric's arguments are gathered, so
``set_score_request``, ``get_metadata_routing``, the shared prediction cache
of multi-metric scoring and ``sample_weight`` handling are scikit-learn's own.
It relies on two private but long-stable hooks of that class (the constructor
and ``_score``), exercised by the tests against ``GridSearchCV`` and
``cross_validate``.
"""

import inspect

from sklearn.metrics._scorer import _Scorer
from sklearn.utils.metadata_routing import _raise_for_params, _routing_enabled

from .._groups import select_columns
from . import _fairness

__all__ = ["get_fairness_scorer", "get_fairness_scorer_names", "make_fairness_scorer"]

# name -> (metric, greater_is_better): every disparity metric (differences are
# losses, ratios scores) and the worst group's accuracy
_METRICS = {
    name: (getattr(_fairness, name), kind == "ratio")
    for name, (_, kind) in _fairness._DISPARITIES.items()
}
_METRICS["worst_group_accuracy"] = (_fairness.worst_group_accuracy, True)


def _call_response(estimator, response_method, X, pos_label=None):
    """Method caller for direct calls: fairness metrics use hard predictions."""
    return getattr(estimator, response_method)(X)


def needs_sensitive_features(scorer):
    """Whether ``scorer`` is a fairness scorer of :mod:`skdp.metrics`, whose
    metric also receives each test row's group.

    >>> from skdp.metrics import make_fairness_scorer, needs_sensitive_features
    >>> from skdp.metrics import demographic_parity_difference
    >>> needs_sensitive_features(make_fairness_scorer(demographic_parity_difference))
    True
    """
    return isinstance(scorer, _FairnessScorer)


class _FairnessScorer(_Scorer):
    """Scorer whose metric also receives each test row's group.

    The group comes from routed ``sensitive_features`` when present, else
    from ``sensitive_column`` of ``X``. With metadata routing on, the scorer
    requests ``sensitive_features`` unless told otherwise.
    """

    # Default request, read by scikit-learn's _get_metadata_request through
    # _get_class_level_metadata_request_values (the way GroupKFold requests
    # ``groups``); set_score_request(sensitive_features=False) opts out.
    __metadata_request__score = {"sensitive_features": True}

    def __init__(self, score_func, sign, kwargs, sensitive_column=None):
        super().__init__(score_func, sign, kwargs, response_method="predict")
        self._sensitive_column = sensitive_column

    def _groups_from_X(self, X):
        if self._sensitive_column is not None:
            return select_columns(X, self._sensitive_column, name="sensitive_column")
        if _routing_enabled():
            how = (
                "Metadata routing is enabled, but no sensitive_features reached this scorer: "
                "pass sensitive_features=A to GridSearchCV.fit / cross_validate(params=...) "
                "(the scorer requests it by default; if its request was changed, call "
                "scorer.set_score_request(sensitive_features=True)), or name the column of X "
                "holding the group with sensitive_column=."
            )
        else:
            how = (
                "Metadata routing is off, so scikit-learn cannot pass sensitive_features to "
                "a scorer. Either (a) enable metadata routing with "
                "sklearn.set_config(enable_metadata_routing=True) and pass "
                "sensitive_features=A to GridSearchCV.fit / cross_validate(params=...) (the "
                "scorer requests it by default, as after "
                "scorer.set_score_request(sensitive_features=True)); or (b) keep the group in "
                "a column of X and pass sensitive_column=<column name or position> to "
                "make_fairness_scorer / get_fairness_scorer."
            )
        raise ValueError(f"{self!r} needs the group of each test row and got none. {how}")

    def set_score_request(self, **kwargs):
        """Set the metadata requested by the scorer, keeping the other requests.

        Unlike scikit-learn's scorers, which start again from nothing on
        every call, only the parameters named here change, so that
        ``set_score_request(sample_weight=True)`` keeps the default request
        of ``sensitive_features``. Only available with metadata routing
        enabled.

        Parameters
        ----------
        **kwargs : dict
            ``param=alias``, with alias one of ``True``, ``False``, ``None``
            or a string.

        Returns
        -------
        self : object
            The scorer.
        """
        kept = {}
        if _routing_enabled():  # otherwise scikit-learn raises its RuntimeError
            current = self.get_metadata_routing().score.requests
            kept = {p: a for p, a in current.items() if a is not None and p not in kwargs}
        return super().set_score_request(**kept, **kwargs)

    def _score(self, method_caller, estimator, X, y_true, **kwargs):
        if kwargs.get("sensitive_features") is None:
            kwargs["sensitive_features"] = self._groups_from_X(X)
        return super()._score(method_caller, estimator, X, y_true, **kwargs)

    def __call__(self, estimator, X, y_true, *, sensitive_features=None, sample_weight=None,
                 **kwargs):
        """Score ``estimator`` on ``X`` against ``y_true``.

        Parameters
        ----------
        estimator : object
            Fitted estimator with ``predict``; it is given the full ``X``.
        X : array-like or DataFrame of shape (n_samples, n_features)
            Test data.
        y_true : array-like of shape (n_samples,)
            True labels.
        sensitive_features : array-like of shape (n_samples,), default=None
            Groups of the rows; when None they are read from
            ``sensitive_column`` of ``X``. May be passed by hand whether or
            not metadata routing is enabled.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights, if the metric accepts them.
        **kwargs : dict
            Other metadata, only with metadata routing enabled.

        Returns
        -------
        score : float
            The metric, negated when ``greater_is_better=False``.
        """
        _raise_for_params(kwargs, self, None)
        if sensitive_features is not None:
            kwargs["sensitive_features"] = sensitive_features
        if sample_weight is not None:
            kwargs["sample_weight"] = sample_weight
        return self._score(_call_response, estimator, X, y_true, **kwargs)

    def __repr__(self):
        name = getattr(self._score_func, "__name__", repr(self._score_func))
        parts = [name]
        if self._sensitive_column is not None:
            parts.append(f"sensitive_column={self._sensitive_column!r}")
        if self._sign > 0 and _METRICS.get(name, (None, False))[1] is False:
            parts.append("greater_is_better=True")
        if self._sign < 0 and _METRICS.get(name, (None, False))[1] is True:
            parts.append("greater_is_better=False")
        parts.extend(f"{key}={value!r}" for key, value in self._kwargs.items())
        return f"make_fairness_scorer({', '.join(parts)})"


def _resolve_metric(metric):
    if isinstance(metric, str):
        if metric not in _METRICS:
            raise ValueError(
                f"metric={metric!r} is not a known fairness metric; use one of "
                f"{sorted(_METRICS)} or pass a callable "
                "metric(y_true, y_pred, *, sensitive_features, ...)."
            )
        return _METRICS[metric]
    if not callable(metric):
        raise ValueError(
            "metric must be a fairness metric name or a callable "
            f"metric(y_true, y_pred, *, sensitive_features, ...); got {metric!r}."
        )
    for function, greater in _METRICS.values():
        if metric is function:
            return function, greater
    return metric, False


def make_fairness_scorer(metric, *, sensitive_column=None, greater_is_better=None,
                         **metric_kwargs):
    """Make a scorer from a fairness metric.

    The scorer is called as ``scorer(estimator, X, y_true)``: it predicts
    with ``estimator.predict(X)`` on the full ``X`` and computes
    ``metric(y_true, y_pred, sensitive_features=groups, **metric_kwargs)``.
    The groups come from metadata routing or from a column of ``X``:

    * **Routing on**: with ``sklearn.set_config(enable_metadata_routing=True)``
      pass ``sensitive_features=A`` to ``GridSearchCV.fit`` or
      ``cross_validate(..., params={"sensitive_features": A})``; scikit-learn
      gives the scorer the test rows of ``A`` for every fold. The scorer
      requests ``sensitive_features`` by default;
      ``scorer.set_score_request(sensitive_features=False)`` opts out and
      ``set_score_request(sensitive_features="alias")`` renames it.
    * **Routing off** (the default): pass ``sensitive_column``; the scorer
      reads the groups from that column of the test ``X``. The estimator
      still sees that column, so it must drop it: skdp estimators do so with
      their ``sensitive_columns`` parameter (set it to the same column), and
      a scikit-learn Pipeline with a ``ColumnTransformer`` that drops it.

    Routed ``sensitive_features`` take precedence over ``sensitive_column``.
    With neither, the scorer raises a ValueError saying how to provide the
    groups; inside a search with the default ``error_score=np.nan`` that
    error becomes a NaN score and a "Scoring failed" warning carrying the
    message, so pass ``error_score="raise"`` to see it as an exception.

    Parameters
    ----------
    metric : str or callable
        A name from :func:`get_fairness_scorer_names`, or a callable
        ``metric(y_true, y_pred, *, sensitive_features, ...)`` returning a
        float.
    sensitive_column : str, int or list of str or int, default=None
        Column name (DataFrame ``X``) or position (array or DataFrame ``X``)
        of the group in ``X``; a list gives intersectional groups. Used when
        no ``sensitive_features`` are routed.
    greater_is_better : bool, default=None
        Whether higher metric values are better. ``None``: True for
        ``worst_group_accuracy`` and the ratio metrics, False for the
        difference metrics and for callables you supply. When False, the
        scorer returns the negated metric (as scikit-learn does for losses),
        so ``cv_results_`` holds ``-difference``.
    **metric_kwargs : dict
        Fixed extra arguments of the metric, e.g. ``method="to_overall"``
        or ``pos_label="yes"``.

    Returns
    -------
    scorer : callable
        A scikit-learn scorer ``scorer(estimator, X, y_true, **metadata)``
        with ``set_score_request``; it requests ``sensitive_features``.

    See Also
    --------
    get_fairness_scorer : Ready-made scorers by name.
    skdp.model_selection.best_within : Refit rule for the most accurate
        candidate whose fairness gap is within a bound.

    Examples
    --------
    Routing off: the group is a column of ``X`` that the pipeline drops.

    >>> import numpy as np, pandas as pd
    >>> from sklearn.compose import ColumnTransformer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_validate
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdp.metrics import make_fairness_scorer
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame({"x": rng.normal(size=60), "group": rng.randint(2, size=60)})
    >>> y = (X["x"] + X["group"] > 0.5).astype(int)
    >>> model = make_pipeline(
    ...     ColumnTransformer([("drop_group", "drop", ["group"])], remainder="passthrough"),
    ...     LogisticRegression())
    >>> dpd = make_fairness_scorer("demographic_parity_difference", sensitive_column="group")
    >>> scores = cross_validate(model, X, y, cv=3, scoring={"acc": "accuracy", "dpd": dpd})
    >>> bool((scores["test_dpd"] <= 0).all())
    True

    Routing on: the groups travel as metadata, requested by default.

    >>> import sklearn
    >>> with sklearn.config_context(enable_metadata_routing=True):
    ...     dpd = make_fairness_scorer("demographic_parity_difference")
    ...     scores = cross_validate(LogisticRegression(), X[["x"]], y, cv=3,
    ...                             scoring={"dpd": dpd},
    ...                             params={"sensitive_features": X["group"]})
    >>> scores["test_dpd"].shape
    (3,)
    """
    function, default_greater = _resolve_metric(metric)
    if greater_is_better is None:
        greater_is_better = default_greater
    if "sensitive_features" in metric_kwargs:
        raise ValueError(
            "sensitive_features cannot be fixed in a scorer, because every fold has its own "
            "rows; route it (with metadata routing enabled the scorer requests it) or name "
            "the column of X with sensitive_column=."
        )
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        parameters = None
    if parameters is not None:
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        if not takes_any:
            if "sensitive_features" not in parameters:
                raise ValueError(
                    f"metric {function!r} has no sensitive_features parameter; a fairness "
                    "metric is called as metric(y_true, y_pred, *, sensitive_features, ...)."
                )
            unknown = sorted(set(metric_kwargs) - set(parameters))
            if unknown:
                raise ValueError(
                    f"{unknown} are not parameters of {getattr(function, '__name__', function)}; "
                    f"it takes {[p for p in parameters if p not in ('y_true', 'y_pred')]}."
                )
    sign = 1 if greater_is_better else -1
    return _FairnessScorer(function, sign, metric_kwargs, sensitive_column=sensitive_column)


def get_fairness_scorer_names():
    """Names of the ready-made fairness scorers.

    Returns
    -------
    names : list of str
        Accepted by :func:`get_fairness_scorer` and
        :func:`make_fairness_scorer`.

    Examples
    --------
    >>> from skdp.metrics import get_fairness_scorer_names
    >>> "demographic_parity_difference" in get_fairness_scorer_names()
    True
    """
    return sorted(_METRICS)


def get_fairness_scorer(name, *, sensitive_column=None):
    """Ready-made fairness scorer by name.

    Every call builds a new scorer, so ``set_score_request`` on one does not
    affect others. The difference metrics score as ``-difference`` (greater
    is better is False); the ratio metrics and ``"worst_group_accuracy"``
    score as themselves.

    Parameters
    ----------
    name : str
        One of :func:`get_fairness_scorer_names`:
        ``"demographic_parity_difference"``, ``"demographic_parity_ratio"``,
        ``"equalized_odds_difference"``, ``"equalized_odds_ratio"``,
        ``"equal_opportunity_difference"``, ``"equal_opportunity_ratio"``,
        ``"false_negative_rate_difference"``,
        ``"false_positive_rate_difference"``, ``"worst_group_accuracy"``.
    sensitive_column : str, int or list of str or int, default=None
        Column of ``X`` holding the group, for use without metadata routing
        (see :func:`make_fairness_scorer`).

    Returns
    -------
    scorer : callable
        A scikit-learn scorer with the metric's default arguments; use
        :func:`make_fairness_scorer` for others (e.g. ``method``).

    Examples
    --------
    >>> from skdp.metrics import get_fairness_scorer
    >>> get_fairness_scorer("worst_group_accuracy", sensitive_column="group")
    make_fairness_scorer(worst_group_accuracy, sensitive_column='group')
    """
    if not isinstance(name, str) or name not in _METRICS:
        raise ValueError(
            f"name={name!r} is not a fairness scorer; use one of {sorted(_METRICS)}."
        )
    return make_fairness_scorer(name, sensitive_column=sensitive_column)
