"""Audits of skdp estimators: canaries, fits, scores and the bound."""

import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_array, check_random_state

from ._bounds import (
    clopper_pearson_epsilon_lower_bound,
    epsilon_lower_bound_from_scores,
)
from ._canaries import (
    canary_row_params,
    canary_rows,
    canary_scores,
    canary_targets,
    default_canary_scale,
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
        The epsilon the fitted estimator reported (``epsilon_``; the largest
        over the repeated fits).
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


def _canaries(estimator, X, y, n_canaries, canary_scale, random_state, fit_params):
    """Validated data, the randomness of the audit, and ``n_canaries``
    canaries: their rows, targets and per-record fit parameters."""
    X, y = _validated(X, y)
    rng = check_random_state(random_state)
    generator = np.random.default_rng(rng.randint(2**31))
    n, d = X.shape
    scale = default_canary_scale(X) if canary_scale is None else float(canary_scale)
    rows = canary_rows(d, n_canaries, scale)
    targets = canary_targets(estimator, y, n_canaries, generator)
    real_params, canary_params = canary_row_params(fit_params, n, n_canaries, generator)
    return X, y, d, rng, generator, rows, targets, real_params, canary_params


def _fit(estimator, X, y, fit_params):
    if y is None:
        return estimator.fit(X, **fit_params)
    return estimator.fit(X, y, **fit_params)


def _claim(estimator):
    """``(epsilon_, delta_)`` of a fitted skdp estimator, pipeline or search."""
    for candidate in (estimator, getattr(estimator, "steps", [[None, None]])[-1][1]):
        if candidate is not None and hasattr(candidate, "epsilon_"):
            return float(candidate.epsilon_), float(getattr(candidate, "delta_", 0.0))
    from ..privacy import spent

    report = spent(estimator)
    return float(report.epsilon), float(report.delta)


def audit_one_run(estimator, X, y=None, *, n_canaries=1000, canary_scale=None, k=None,
                  confidence=0.95, random_state=None, **fit_params):
    """Audit ``estimator``'s privacy claim with one fit and many canaries.

    The one-run audit of Steinke, Nasr & Jagielski (2023): ``n_canaries``
    canaries (:mod:`skdp.audit._canaries`: each in its own extra feature
    column) are each added to the training data by an independent fair
    coin; one clone of ``estimator`` is fitted; every canary is scored from
    the fitted estimator alone; the top and bottom k scores are guessed "in"
    and "out"; and the number of right guesses gives a lower bound on the
    epsilon of the training procedure at the estimator's ``delta_``
    (:func:`epsilon_lower_bound_from_scores`). The bound reported is the
    larger of the paper's and the f-DP bound of Mahloujifar, Melis &
    Chaudhuri (2024), each computed at confidence ``1 - beta / 2`` so that
    the larger is valid at ``confidence``.

    A bound above ``epsilon_`` refutes the claim (at that confidence); a
    bound below it proves nothing about privacy: the audit is only as
    strong as its canaries and scores (see :ref:`audit`).

    Parameters
    ----------
    estimator : estimator
        An skdp estimator, a pipeline ending in one, a private search or a
        private preprocessing step (unfitted; it is cloned).
    X : array-like of shape (n_samples, n_features)
        Numeric features (the canary columns are appended to them).
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
    random_state : int, RandomState instance or None, default=None
        Draws the canaries' labels and coins and seeds the estimator (when
        it has a ``random_state`` that is None).
    **fit_params : dict
        Passed to ``fit``; any array with one value per row of ``X``
        (``sensitive_features``, ``silo_ids``, ``sample_weight``...) is
        extended for the canaries with values drawn from its own.

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
    >>> result.epsilon_claimed <= 1.0, result.claim_refuted
    (True, False)
    """
    m = _check_positive_int(n_canaries, "n_canaries", 2)
    X, y, d, rng, generator, rows, targets, real_params, canary_params = _canaries(
        estimator, X, y, m, canary_scale, random_state, fit_params)
    included = generator.random(m) < 0.5
    X_fit = np.vstack([with_canary_columns(X, m), rows[included]])
    y_fit = None if y is None else np.concatenate([y, targets[included]])
    params = dict(real_params)
    for name, values in canary_params.items():
        params[name] = np.concatenate([real_params[name], values[included]])
    model = _seeded_clone(estimator, rng)
    start = time.perf_counter()
    _fit(model, X_fit, y_fit, params)
    fit_time = time.perf_counter() - start
    scores = canary_scores(model, rows, targets, d)
    epsilon, delta = _claim(model)
    bounds = epsilon_lower_bound_from_scores(
        scores, included, delta=delta, confidence=1.0 - (1.0 - confidence) / 2, k=k)
    best_k = bounds.k if bounds.epsilon >= bounds.epsilon_fdp else bounds.k_fdp
    guesses = _top_bottom_guesses(scores, best_k)
    correct = int(np.sum((guesses == 1) & included) + np.sum((guesses == -1) & ~included))
    return AuditResult(
        method="one_run", epsilon_lower_bound=float(max(bounds.epsilon, bounds.epsilon_fdp)),
        epsilon_claimed=epsilon, delta=delta, confidence=confidence, scores=scores,
        included=included, guesses=guesses, n_guesses=int(np.sum(guesses != 0)),
        n_correct=correct, details=bounds, fit_time=fit_time,
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
                   random_state=None, verbose=0, **fit_params):
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
    estimator, X, y, canary_scale, confidence, random_state, **fit_params
        As in :func:`audit_one_run`.
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
    X, y, d, rng, generator, row, target, real_params, canary_params = _canaries(
        estimator, X, y, 1, canary_scale, random_state, fit_params)
    X_real = with_canary_columns(X, 1)
    included = generator.random(n_fits) < 0.5
    scores = np.empty(n_fits)
    claims, delta = [], 0.0
    fit_time = 0.0
    for i in range(n_fits):  # a loop over fits: each is a whole training run
        params = dict(real_params)
        if included[i]:
            X_fit = np.vstack([X_real, row])
            y_fit = None if y is None else np.concatenate([y, target])
            for name, values in canary_params.items():
                params[name] = np.concatenate([real_params[name], values])
        else:
            X_fit, y_fit = X_real, y
        model = _seeded_clone(estimator, rng)
        start = time.perf_counter()
        _fit(model, X_fit, y_fit, params)
        fit_time += time.perf_counter() - start
        scores[i] = canary_scores(model, row, target, d)[0]
        epsilon, delta = _claim(model)
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
