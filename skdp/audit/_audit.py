"""Audits of skdp estimators: canaries, fits, scores and the bound."""

import time
import warnings
from dataclasses import dataclass, field

import dp_accounting as dpa
import numpy as np
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.utils import check_array, check_random_state

from ..model_selection import spent
from ._bounds import (
    clopper_pearson_epsilon_lower_bound,
    epsilon_lower_bound_from_scores,
)
from ._canaries import (
    CANARY_PREFIX,
    _is_frame,
    canary_row_params,
    canary_rows,
    canary_scores,
    canary_targets,
    default_canary_scale,
    stack_rows,
    take_rows,
    with_canary_columns,
)


@dataclass
class AuditResult:
    """What an audit found.

    Attributes
    ----------
    method : {"one_run", "repeated"}
    epsilon_lower_bound : float
        The audited lower bound on the training procedure's epsilon at
        ``delta``, valid at ``confidence``.
    epsilon_claimed : float
        The epsilon the fitted estimator claims (``epsilon_``, or
        :func:`~skdp.model_selection.spent`'s for a pipeline; the largest over the
        repeated fits).
    delta : float
        The delta of the claim (``delta_``).
    confidence : float
    scores : ndarray
        One-run: each canary's score. Repeated: the canary's score in each
        fit.
    included : ndarray of bool
        Whether each canary (one-run) or the canary in each fit (repeated)
        was trained on.
    guesses : ndarray of int
        +1 guessed "in", -1 guessed "out", 0 no guess (one-run: at the k that
        gave the bound; repeated: on the held-out half of the fits).
    n_guesses, n_correct : int
    details : object
        The bound's own record (:class:`OneRunAuditResult`, or the
        threshold and error counts of the repeated audit).
    fit_time : float
        Seconds spent fitting.
    estimator : estimator or None
        The fitted clone (one-run audits; None for repeated ones): the
        claim is ``epsilon_claimed``, its ``epsilon_`` or, for a pipeline,
        ``skdp.model_selection.spent(estimator)``.
    gaussian : bool
        Whether the f-DP bound for Gaussian mechanisms was computed and the
        larger of the two one-run bounds reported (the claimed mechanism
        is a composition of Gaussian mechanisms without subsampling, or
        ``gaussian=True`` was given); otherwise only the bound valid for
        every mechanism. False for a repeated audit.
    """

    method: str
    epsilon_lower_bound: float
    epsilon_claimed: float
    delta: float
    confidence: float
    scores: np.ndarray = field(repr=False)
    included: np.ndarray = field(repr=False)
    guesses: np.ndarray = field(repr=False)
    n_guesses: int = 0
    n_correct: int = 0
    details: object = field(default=None, repr=False)
    fit_time: float = 0.0
    estimator: object = field(default=None, repr=False)
    gaussian: bool = False

    @property
    def claim_refuted(self):
        """Whether the lower bound exceeds the claimed epsilon: at the
        stated confidence, the procedure is not as private as it says."""
        return bool(self.epsilon_lower_bound > self.epsilon_claimed)

    def plot(self, ax=None):
        """Histogram of the scores of included and excluded canaries, with
        the bound and the claim in the title. Returns the matplotlib axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.2))
        scores = np.asarray(self.scores, dtype=np.float64)
        finite = np.isfinite(scores)
        bins = np.histogram_bin_edges(scores[finite], bins=30) if finite.any() else 10
        for mask, label in ((self.included, "trained on"), (~self.included, "left out")):
            ax.hist(scores[mask & finite], bins=bins, alpha=0.55, label=label)
        ax.set_xlabel("canary score (higher: guessed trained on)")
        ax.set_ylabel("canaries" if self.method == "one_run" else "fits")
        ax.set_title(f"{self.method} audit: epsilon >= {self.epsilon_lower_bound:.2f} "
                     f"(claimed {self.epsilon_claimed:.2f})", fontsize=10)
        ax.legend(fontsize=8)
        return ax


def _validated(X, y):
    """``X`` (a DataFrame kept as it is, anything else as float64) and
    ``y`` of the same length."""
    if not _is_frame(X):
        X = check_array(X, dtype=np.float64)
    if y is not None:
        y = np.asarray(y)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}; give one "
                             "label per row.")
    return X, y


def _check_positive_int(value, name, minimum):
    if not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


@dataclass
class _Canaries:
    """The canaries of one audit: features (in the form of ``X`` with the
    canary columns), targets, per-canary fit parameters, and how many
    records each canary has."""

    n_features: int
    scale: float
    rows: object
    targets: np.ndarray
    params: dict
    records: int

    def training_data(self, X, y, real_params, included):
        """``X``, ``y`` and the fit parameters with the canaries ``included``
        (a boolean mask) appended, each ``records`` times."""
        index = np.repeat(np.flatnonzero(included), self.records)
        X_fit = stack_rows(X, take_rows(self.rows, index))
        y_fit = None if y is None else np.concatenate([y, self.targets[index]])
        params = dict(real_params)
        for name, values in self.params.items():
            params[name] = np.concatenate([real_params[name], values[index]])
        return X_fit, y_fit, params


def _canaries(estimator, X, y, n_canaries, canary_scale, records_per_canary, generator,
              fit_params):
    """Validated data with the canary columns, the real records' fit
    parameters, and ``n_canaries`` canaries."""
    X, y = _validated(X, y)
    records = _check_positive_int(records_per_canary, "records_per_canary", 1)
    if records > 1 and fit_params.get("unit_ids") is None:
        raise ValueError(
            f"records_per_canary={records} makes each canary a person with several records, "
            "which only a person-level claim protects: pass unit_ids (the persons of X), or "
            "use records_per_canary=1."
        )
    n = X.shape[0]
    scale = default_canary_scale(X) if canary_scale is None else float(canary_scale)
    targets = canary_targets(estimator, y, n_canaries, generator)
    real_params, canary_params = canary_row_params(fit_params, n, n_canaries, generator)
    canaries = _Canaries(
        n_features=X.shape[1], scale=scale, rows=canary_rows(X, n_canaries, scale),
        targets=targets, params=canary_params, records=records,
    )
    return with_canary_columns(X, n_canaries), y, real_params, canaries


def _fit(estimator, X, y, fit_params):
    if y is None:
        return estimator.fit(X, **fit_params)
    return estimator.fit(X, y, **fit_params)


def _is_workflow(estimator):
    return isinstance(estimator, (Pipeline, ColumnTransformer, FeatureUnion))


def _claim(estimator):
    """``(epsilon, delta, dp_event)`` a fitted estimator claims: its own
    ``epsilon_``, or for a pipeline, ``ColumnTransformer`` or
    ``FeatureUnion`` the composition of every step's release that
    :func:`~skdp.model_selection.spent` certifies (each record goes through every
    step)."""
    if hasattr(estimator, "epsilon_") and not _is_workflow(estimator):
        return (float(estimator.epsilon_), float(getattr(estimator, "delta_", 0.0)),
                getattr(estimator, "dp_event_", None))
    report = spent(estimator)
    return float(report.epsilon), float(report.delta), report.dp_event


def is_gaussian_event(event):
    """Whether ``event`` is a Gaussian mechanism, or a composition of them
    without subsampling: a mechanism whose trade-off curve is exactly
    Gaussian (mu-GDP with ``mu = sqrt(sum 1 / sigma_i^2)``), for which the
    f-DP one-run bound is valid.

    Subsampled Gaussians (DP-SGD's steps) are not: their trade-off curve is
    not Gaussian, and the Gaussian curve with the same epsilon at delta can
    lie below theirs elsewhere, so a bound on the Gaussian ``mu`` can exceed
    their epsilon. Neither are Laplace or randomized response.

    Examples
    --------
    >>> import dp_accounting as dpa
    >>> from skdp.audit import is_gaussian_event
    >>> is_gaussian_event(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 10))
    True
    >>> is_gaussian_event(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)))
    False
    >>> is_gaussian_event(dpa.LaplaceDpEvent(1.0))
    False
    """
    if isinstance(event, dpa.GaussianDpEvent):
        return True
    if isinstance(event, dpa.NoOpDpEvent):
        return True
    if isinstance(event, dpa.SelfComposedDpEvent):
        return is_gaussian_event(event.event)
    if isinstance(event, dpa.ComposedDpEvent):
        return all(is_gaussian_event(e) for e in event.events)
    if isinstance(event, dpa.PoissonSampledDpEvent):
        return event.sampling_probability >= 1.0 and is_gaussian_event(event.event)
    return False


def one_run_bound(scores, included, *, delta, confidence=0.95, k=None, gaussian=False):
    """The one-run lower bound that holds for the mechanism audited.

    Any ``(epsilon, delta)``-DP mechanism: the bound of Steinke, Nasr &
    Jagielski at ``confidence``. A Gaussian one (``gaussian=True``, see
    :func:`is_gaussian_event`): the larger of that bound and the f-DP bound
    of Mahloujifar, Melis & Chaudhuri, each at ``1 - beta / 2`` so that the
    larger holds at ``confidence``. The f-DP bound assumes a Gaussian
    trade-off curve; for another mechanism (randomized response, Laplace, a
    subsampled Gaussian) it can exceed the true epsilon, so it is not
    reported there.

    Parameters
    ----------
    scores, included, delta, confidence, k
        As in :func:`~skdp.audit.epsilon_lower_bound_from_scores`.
    gaussian : bool, default=False

    Returns
    -------
    bound : float
    k : int
        Guesses per side that gave ``bound``.
    details : OneRunAuditResult
        The bounds computed, at the confidence each was computed at
        (``epsilon_fdp`` NaN unless ``gaussian``).

    Examples
    --------
    Randomized response at epsilon 1 (each canary's score its released bit),
    not a Gaussian mechanism: only the general bound is computed (the f-DP
    one would be infinite at ``delta=0``, since no Gaussian curve is 0-DP).

    >>> import numpy as np
    >>> from skdp.audit import one_run_bound
    >>> rng = np.random.default_rng(1)
    >>> included = rng.random(1000) < 0.5
    >>> truthful = rng.random(1000) < np.exp(1) / (1 + np.exp(1))
    >>> bound, k, details = one_run_bound(np.where(truthful, included, ~included), included,
    ...                                   delta=0.0)
    >>> round(bound, 2), details.epsilon_fdp
    (0.89, nan)
    """
    each = confidence if not gaussian else 1.0 - (1.0 - confidence) / 2
    details = epsilon_lower_bound_from_scores(scores, included, delta=delta, confidence=each,
                                              k=k, fdp=gaussian)
    if gaussian and details.epsilon_fdp > details.epsilon:
        return float(details.epsilon_fdp), details.k_fdp, details
    return float(details.epsilon), details.k, details


def _widened_for_canaries(model, X, n_canaries, scale):
    """``model`` (to be fitted on ``X``, whose last ``n_canaries`` columns
    are the canaries') with every per-feature public range or category list of
    its skdp steps extended to the canary columns (``[0, scale]``, or the
    categories ``[0, scale]``), so that a pipeline with per-feature
    ``bounds`` accepts the audit's extra columns. Ranges given as scalars
    apply to every column already."""
    columns = [str(c) for c in X.columns] if _is_frame(X) else None
    n_features = X.shape[1] - n_canaries
    updates = {}
    for key, value in model.get_params(deep=True).items():
        last = key.rsplit("__", 1)[-1]
        if last in ("bounds", "data_range"):
            widened = _widened_range(value, n_features, n_canaries, scale, columns)
        elif last in ("candidate_categories", "categories"):
            widened = _widened_categories(value, n_features, n_canaries, scale)
        else:
            continue
        if widened is not None:
            updates[key] = widened
    return model.set_params(**updates) if updates else model


def _widened_range(value, n_features, n_canaries, scale, columns):
    """A range of every feature extended to the canary columns; None for a
    range that is not per feature, or (a dict by name) not of every
    feature: its step sees only some columns (a ColumnTransformer's)."""
    if isinstance(value, dict):
        if columns is None or not set(columns[:n_features]) <= set(map(str, value)):
            return None
        return {**value, **{name: (0.0, scale) for name in columns[n_features:]}}
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    lower, upper = (np.asarray(v, dtype=np.float64) for v in value)
    if lower.ndim == 0 and upper.ndim == 0:
        return None
    lower, upper = np.broadcast_to(lower, n_features), np.broadcast_to(upper, n_features)
    return (np.r_[lower, np.zeros(n_canaries)], np.r_[upper, np.full(n_canaries, scale)])


def _widened_categories(value, n_features, n_canaries, scale):
    if isinstance(value, str) or value is None or len(value) != n_features:
        return None
    return list(value) + [np.array([0.0, scale])] * n_canaries


def _warn_if_unreachable(estimator, rows):
    """Warn when the fitted ``estimator`` gives every canary row the same
    output: the rows differ only in their canary column, so the canaries
    did not reach the model and the audit has no power."""
    for method in ("predict_proba", "decision_function", "predict", "transform"):
        if hasattr(estimator, method):
            outputs = np.asarray(getattr(estimator, method)(rows), dtype=np.float64)
            break
    else:
        return
    outputs = outputs.reshape(outputs.shape[0], -1)
    if np.all(outputs == outputs[:1]):
        warnings.warn(
            f"Every canary gets the same output from the fitted {type(estimator).__name__}: "
            "the canary columns did not reach the model (a ColumnTransformer drops the "
            "columns it does not select; use remainder='passthrough' or select the columns "
            f"named '{CANARY_PREFIX}*'), so this audit has no power: its bound is about 0 "
            "whatever the mechanism.",
            UserWarning,
        )


def audit_one_run(estimator, X, y=None, *, n_canaries=1000, canary_scale=None, k=None,
                  confidence=0.95, gaussian="auto", records_per_canary=1, random_state=None,
                  **fit_params):
    """Audit ``estimator``'s privacy claim with one fit and many canaries.

    The one-run audit of Steinke, Nasr & Jagielski (2023): ``n_canaries``
    canaries (:mod:`skdp.audit._canaries`: each in its own extra feature
    column) are each added to the training data by an independent fair
    coin; one clone of ``estimator`` is fitted; every canary is scored from
    the fitted estimator alone; the top and bottom k scores are guessed "in"
    and "out"; and the number of right guesses gives a lower bound on the
    epsilon of the training procedure at the claim's delta
    (:func:`one_run_bound`). The bound holds for any ``(epsilon,
    delta)``-DP mechanism; when the claimed mechanism is Gaussian without
    subsampling (:func:`is_gaussian_event`), the f-DP bound of Mahloujifar,
    Melis & Chaudhuri (2024) is computed too and the larger reported, each
    at confidence ``1 - beta / 2``.

    The claim audited is the fitted estimator's ``epsilon_`` (a search's:
    every fit, the selection and the refit), or for a ``Pipeline``,
    ``ColumnTransformer`` or ``FeatureUnion`` the composition of every
    step's release (:func:`~skdp.model_selection.spent`): each record goes through
    every step.

    A bound above the claim refutes it (at that confidence); a bound below
    it proves nothing about privacy: the audit is only as strong as its
    canaries and scores (see :ref:`audit`).

    Parameters
    ----------
    estimator : estimator
        An skdp estimator, a pipeline ending in one (per-feature public
        ``bounds``, ``data_range`` and category lists of its steps are
        extended to the canary columns), a private search or a private
        preprocessing step (unfitted; it is cloned).
    X : array-like or DataFrame of shape (n_samples, n_features)
        Features (the canary columns are appended to them; a DataFrame
        keeps its columns, and the canary columns are named
        ``skdp_canary_0``, ...: a ``ColumnTransformer`` must pass them on,
        e.g. with ``remainder="passthrough"``).
    y : array-like of shape (n_samples,) or None
        Targets; None for a transformer.
    n_canaries : int, default=1000
        More canaries give a tighter bound (at most about ``log(m)`` with
        every guess right) and a larger fit.
    canary_scale : float or None, default=None
        A canary's value in its own column; None uses 1.5 times the 99th
        percentile of the row norms of ``X`` (at least 1.5). For a scaler,
        put it at the top of the public range.
    k : int, sequence of int or None, default=None
        Guesses per side; None sweeps a public grid (paid for).
    confidence : float, default=0.95
    gaussian : bool or "auto", default="auto"
        Whether the claimed mechanism's trade-off curve is Gaussian, which
        the f-DP bound needs. ``"auto"``: when the claimed ``dp_event`` is
        a composition of Gaussian mechanisms without subsampling
        (:func:`is_gaussian_event`); a subsampled fit (DP-SGD and every
        skdp trainer) is audited with the bound valid for any mechanism.
        ``True`` on anything else can refute a correct mechanism.
    records_per_canary : int, default=1
        Records of each canary. Above 1 each canary is a *person* with that
        many identical records, for a person-level claim (``unit_ids`` in
        ``fit_params``; each canary person gets a fresh unit id).
    random_state : int, RandomState instance or None, default=None
        Draws the canaries' labels and coins and seeds the estimator (when
        it has a ``random_state`` that is None).
    **fit_params : dict
        Passed to ``fit``; any array with one value per row of ``X``
        (``sensitive_features``, ``silo_ids``, ``sample_weight``...) is
        extended for the canaries with values drawn from its own, and
        ``unit_ids`` with a fresh id per canary.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> import numpy as np
    >>> from skdp import DPSGDClassifier
    >>> from skdp.audit import audit_one_run
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 4)); y = (X[:, 0] > 0).astype(int)
    >>> result = audit_one_run(DPSGDClassifier(epsilon=1.0), X, y, n_canaries=200,
    ...                        random_state=0)
    >>> result.epsilon_claimed <= 1.0, result.claim_refuted, result.gaussian
    (True, False, False)
    """
    m = _check_positive_int(n_canaries, "n_canaries", 2)
    if not (gaussian == "auto" or isinstance(gaussian, (bool, np.bool_))):
        raise ValueError(f"gaussian must be True, False or 'auto'; got {gaussian!r}.")
    rng = check_random_state(random_state)
    generator = np.random.default_rng(rng.randint(2**31))
    X_real, y, real_params, canaries = _canaries(
        estimator, X, y, m, canary_scale, records_per_canary, generator, fit_params)
    included = generator.random(m) < 0.5
    X_fit, y_fit, params = canaries.training_data(X_real, y, real_params, included)
    model = _widened_for_canaries(_seeded_clone(estimator, rng), X_real, m, canaries.scale)
    start = time.perf_counter()
    _fit(model, X_fit, y_fit, params)
    fit_time = time.perf_counter() - start
    scores = canary_scores(model, canaries.rows, canaries.targets, canaries.n_features)
    _warn_if_unreachable(model, canaries.rows)
    epsilon, delta, event = _claim(model)
    gaussian = is_gaussian_event(event) if gaussian == "auto" else bool(gaussian)
    bound, best_k, details = one_run_bound(scores, included, delta=delta,
                                           confidence=confidence, k=k, gaussian=gaussian)
    guesses = _top_bottom_guesses(scores, best_k)
    correct = int(np.sum((guesses == 1) & included) + np.sum((guesses == -1) & ~included))
    return AuditResult(
        method="one_run", epsilon_lower_bound=bound, epsilon_claimed=epsilon, delta=delta,
        confidence=confidence, scores=scores, included=included, guesses=guesses,
        n_guesses=int(np.sum(guesses != 0)), n_correct=correct, details=details,
        fit_time=fit_time, estimator=model, gaussian=gaussian,
    )


def _seeded_clone(estimator, rng):
    model = clone(estimator)
    params = model.get_params(deep=False)
    if "random_state" in params and params["random_state"] is None:
        model.set_params(random_state=int(rng.randint(2**31)))
    return model


def _top_bottom_guesses(scores, k):
    """+1 for the k highest scores, -1 for the k lowest, 0 elsewhere (ties
    broken by canary order, as in :func:`epsilon_lower_bound_from_scores`)."""
    guesses = np.zeros(scores.size, dtype=np.int64)
    if k <= 0:
        return guesses
    order = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")
    guesses[order[:k]] = 1
    guesses[order[-k:]] = -1
    return guesses


def audit_repeated(estimator, X, y=None, *, n_fits=200, canary_scale=None, confidence=0.95,
                   records_per_canary=1, random_state=None, verbose=0, **fit_params):
    """Audit ``estimator``'s privacy claim by refitting with and without one
    canary.

    The repeated-fit audit (Jagielski, Ullman & Oprea 2020; Nasr et al.
    2021): ``n_fits`` clones are fitted, each on the data with one canary
    (:mod:`skdp.audit._canaries`, in its own extra column) added by a fair
    coin; the canary is scored in every fit. The first half of the fits
    chooses the threshold (the one with the best bound there); on the
    second half, the false-positive and false-negative rates of "score
    above the threshold means trained on" give a Clopper-Pearson lower
    bound on epsilon (:func:`clopper_pearson_epsilon_lower_bound`). It needs
    many fits: use it in a small, powerful setting (few records, few
    full-batch steps).

    Parameters
    ----------
    estimator, X, y, canary_scale, confidence, records_per_canary, random_state, **fit_params
        As in :func:`audit_one_run` (the claim audited is also the same).
    n_fits : int, default=200
        Number of fits (at least 4).
    verbose : int, default=0
        Print progress every tenth of the fits when positive.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> import numpy as np
    >>> from skdp import DPSGDClassifier
    >>> from skdp.audit import audit_repeated
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> clf = DPSGDClassifier(epsilon=1.0, batch_size=200, max_steps=5)
    >>> result = audit_repeated(clf, X, y, n_fits=40, random_state=0)
    >>> result.claim_refuted
    False
    """
    n_fits = _check_positive_int(n_fits, "n_fits", 4)
    rng = check_random_state(random_state)
    generator = np.random.default_rng(rng.randint(2**31))
    X_real, y, real_params, canary = _canaries(
        estimator, X, y, 1, canary_scale, records_per_canary, generator, fit_params)
    included = generator.random(n_fits) < 0.5
    scores = np.empty(n_fits)
    claims, delta = [], 0.0
    fit_time = 0.0
    for i in range(n_fits):  # a loop over fits: each is a whole training run
        X_fit, y_fit, params = canary.training_data(X_real, y, real_params, included[i:i + 1])
        model = _widened_for_canaries(_seeded_clone(estimator, rng), X_real, 1, canary.scale)
        start = time.perf_counter()
        _fit(model, X_fit, y_fit, params)
        fit_time += time.perf_counter() - start
        scores[i] = canary_scores(model, canary.rows, canary.targets, canary.n_features)[0]
        epsilon, delta, _ = _claim(model)
        claims.append(epsilon)
        if verbose > 0 and (i + 1) % max(1, n_fits // 10) == 0:
            print(f"[audit_repeated] {i + 1}/{n_fits} fits, {fit_time:.1f} s")
    half = n_fits // 2
    threshold = _best_threshold(scores[:half], included[:half], delta, confidence)
    test_scores, test_in = scores[half:], included[half:]
    guessed_in = test_scores > threshold
    false_positives = int(np.sum(guessed_in & ~test_in))
    false_negatives = int(np.sum(~guessed_in & test_in))
    bound = clopper_pearson_epsilon_lower_bound(
        false_positives, int(np.sum(~test_in)), false_negatives, int(np.sum(test_in)),
        delta=delta, confidence=confidence)
    guesses = np.zeros(n_fits, dtype=np.int64)
    guesses[half:] = np.where(guessed_in, 1, -1)
    return AuditResult(
        method="repeated", epsilon_lower_bound=float(bound), epsilon_claimed=float(max(claims)),
        delta=delta, confidence=confidence, scores=scores, included=included, guesses=guesses,
        n_guesses=n_fits - half, n_correct=int(np.sum(guessed_in == test_in)),
        details={"threshold": float(threshold), "false_positives": false_positives,
                 "false_negatives": false_negatives},
        fit_time=fit_time,
    )


def _best_threshold(scores, included, delta, confidence):
    """The threshold, among the scores of the first half of the fits, whose
    Clopper-Pearson bound is largest there (it only chooses; the bound is
    computed on the other half)."""
    candidates = np.unique(scores[np.isfinite(scores)])
    if candidates.size == 0 or included.all() or not included.any():
        return np.inf
    n_in, n_out = int(included.sum()), int((~included).sum())
    above = scores[None, :] > candidates[:, None]
    false_positives = (above & ~included).sum(1)
    false_negatives = (~above & included).sum(1)
    bounds = [clopper_pearson_epsilon_lower_bound(int(fp), n_out, int(fn), n_in, delta=delta,
                                                  confidence=confidence)
              for fp, fn in zip(false_positives, false_negatives)]
    return float(candidates[int(np.argmax(bounds))])
