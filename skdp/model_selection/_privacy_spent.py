"""What an ordinary search or cross-validation over skdp estimators spent on
training -- and what it does not cover."""

import math
import warnings
from typing import NamedTuple

import dp_accounting as dpa
import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from sklearn.base import clone

from ..exceptions import PrivacyLeakWarning
from ..privacy import PLD_DISCRETIZATION, compute_epsilon
from ._budget import leaf_steps, private_steps
from ._spent import spent

__all__ = ["TrainingSpent", "privacy_spent"]


class TrainingSpent(NamedTuple):
    """Privacy of the fits of a search or a cross-validation.

    Attributes
    ----------
    epsilon : float
        Accountant's epsilon of all fits together at ``delta``; inf when a
        fit was not private.
    delta : float
    dp_event : dp_accounting.DpEvent or None
        ``ComposedDpEvent`` of the fits' events (cross-validation results);
        None for a search, whose fold fits are not kept (their budgets are
        composed as black boxes, see :func:`privacy_spent`).
    n_fits : int
    exact : bool
        Whether the fits' own events were composed (True) or only their
        ``(epsilon, delta)`` budgets (False).
    """

    epsilon: float
    delta: float
    dp_event: object
    n_fits: int
    exact: bool


_UNCOVERED = (
    "privacy_spent covers the training of the fits only. The validation scores, the choice "
    "of the best candidate and the scores reported in cv_results_ (or by cross_validate) "
    "are computed on the private data without noise and are NOT covered by this epsilon. "
    "For one epsilon that covers the selection too, use "
    "skdp.model_selection.PrivateGridSearchCV."
)


def _search_budgets(search):
    """``(epsilon, delta)`` of every private step of every fit of a fitted
    ``GridSearchCV`` / ``RandomizedSearchCV``."""
    results = search.cv_results_
    n_splits = int(search.n_splits_)
    pairs = []
    for params in results["params"]:
        candidate = clone(search.estimator).set_params(**params)
        steps = private_steps(candidate)
        if not steps:
            raise ValueError(
                f"The search's candidate {params} has no private skdp step; privacy_spent "
                "needs a search over skdp estimators or pipelines of skdp steps."
            )
        for path, step in steps:
            eps = step.get_params(deep=False)["epsilon"]
            delta = step.get_params(deep=False).get("delta", 1e-5)
            if eps is None:
                return None
            pairs.extend([(float(eps), float(delta))] * n_splits)
    best = getattr(search, "best_estimator_", None)
    refit_events = []
    if best is not None:
        refit_events.append(best)
    return pairs, refit_events


def _training_size(fitted):
    """Number of records a fitted skdp estimator (or pipeline) was trained
    on, from what it already exposes: a Poisson-sampled step's expected batch
    ``batch_size_`` over its sampling rate ``sampling_rate_`` (exact when
    ``batch_size`` was given, within ``0.5 / sampling_rate_`` records when
    ``sample_rate`` was). None when no step tells."""
    for _, step in leaf_steps(fitted, fitted=True):
        batch, rate = getattr(step, "batch_size_", None), getattr(step, "sampling_rate_", None)
        if batch is not None and rate is not None and 0 < rate <= 1:
            return int(round(batch / rate))
    return None


def _records_seen(search_or_cv_results):
    """``(n, exact)``: the number of records the search or cross-validation
    was run on (``exact=True``), a lower bound on it (``exact=False``), or
    ``(None, False)`` when it cannot be told.

    * cross-validation results with ``indices`` (``return_indices=True``):
      the records of the splits, exactly;
    * a search with a refitted ``best_estimator_``: the records it was
      refitted on (all of them), from :func:`_training_size`;
    * cross-validation results without indices: the largest training fold,
      a lower bound.
    """
    if isinstance(search_or_cv_results, dict):
        indices = search_or_cv_results.get("indices")
        if indices is not None:
            parts = list(indices.get("train", [])) + list(indices.get("test", []))
            if parts:
                return int(np.unique(np.concatenate([np.asarray(p) for p in parts])).size), True
        sizes = [_training_size(est) for est in search_or_cv_results["estimator"]]
        sizes = [n for n in sizes if n is not None]
        return (max(sizes), False) if sizes else (None, False)
    best = getattr(search_or_cv_results, "best_estimator_", None)
    if best is not None and getattr(search_or_cv_results, "refit", False) is not False:
        n = _training_size(best)
        if n is not None:
            return n, True
    return None, False


def _check_delta(delta, n, exact):
    """Warn when ``delta >= 1/n`` (certain with a lower bound on ``n``)."""
    if n is None or not n > 0 or delta < 1.0 / n:
        return
    size = f"n = {n}" if exact else f"n >= {n} (the largest training fold)"
    warnings.warn(
        f"privacy_spent: the total delta {delta:.2g} of the fits is not below 1/n, with "
        f"{size} the records they were trained on (1/n = {1.0 / n:.2g}). A mechanism "
        "that publishes one random record in full has delta = 1/n, so this guarantee "
        "does not rule it out. Lower each fit's delta (to well below 1 / (n x the number "
        "of fits)), or fit fewer models.",
        UserWarning,
        stacklevel=3,
    )


def _black_box_epsilon(pairs, events, delta):
    """Epsilon at ``delta`` of ``(eps_i, delta_i)``-DP black boxes composed
    with the given events (PLD: the worst case of each pair, composed)."""
    total = None
    for eps, d in pairs:
        pld = pld_lib.from_privacy_parameters(
            pld_common.DifferentialPrivacyParameters(eps, d),
            value_discretization_interval=PLD_DISCRETIZATION,
        )
        total = pld if total is None else total.compose(pld)
    for event in events:
        accountant = dpa.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
        accountant.compose(event)
        pld = accountant._pld  # the accountant's own PLD of the event
        total = pld if total is None else total.compose(pld)
    return float(total.get_epsilon_for_delta(delta))


def privacy_spent(search_or_cv_results, *, delta=None, warn=True, n_samples=None):
    """Total privacy of the fits of a search or cross-validation over skdp estimators.

    An ordinary ``GridSearchCV`` fits every candidate on every fold and
    refits the best one; ``cross_validate`` fits one model per fold. Each fit
    reports its own ``epsilon_``; together they spend more. This function
    composes them with dp-accounting's PLD accountant. Every fit is counted
    for every record (sequential composition): with scikit-learn's
    index-based folds, adding or removing a record moves other records
    between folds, so the folds are not disjoint by construction.

    * ``cross_validate(..., return_estimator=True)`` results: the fitted
      estimators' ``dp_event_`` (through :func:`skdp.model_selection.spent`, so
      pipelines of private steps count every step) are composed exactly.
    * A fitted ``GridSearchCV`` / ``RandomizedSearchCV``: it keeps only the
      refitted ``best_estimator_``, whose event is composed exactly; the
      ``n_candidates x n_splits`` fold fits are not kept, so each private
      step of each is composed as a black-box ``(epsilon, delta)``-DP
      mechanism at the budget it was given (its worst-case privacy loss
      distribution). That is an upper bound, looser than composing events.

    Neither covers the **selection**: the validation scores and the choice of
    the best candidate are computed without noise on the private data, so
    the search as a whole has no finite guarantee. A
    :class:`~skdp.exceptions.PrivacyLeakWarning` says so (``warn=False``
    silences it).

    A ``UserWarning`` says when the total ``delta`` is not below ``1/n``,
    ``n`` the number of records (a guarantee that allows publishing one
    record in full). ``n`` is ``n_samples`` if given; else it is read from
    what the results already expose: the folds' indices of
    ``cross_validate(..., return_indices=True)``; the refitted
    ``best_estimator_`` of a search (trained on every record: its expected
    batch over its sampling rate); for cross-validation without indices,
    the largest training fold, a lower bound (then only a delta above ``1 /``
    that fold is certain to be too large and warned about). Without a refit
    and without ``n_samples``, ``n`` is unknown and nothing is checked.

    Parameters
    ----------
    search_or_cv_results : GridSearchCV, RandomizedSearchCV or dict
        A fitted search over skdp estimators or pipelines, or the dict
        returned by ``cross_validate(..., return_estimator=True)``.
    delta : float or None, default=None
        Target delta. None: the sum of the fits' deltas (cross-validation),
        plus once more the sum of the black boxes' deltas (search: a
        black-box ``(epsilon_i, delta_i)`` pair may fail with probability
        ``delta_i``, which uses up that much of the target).
    warn : bool, default=True
        Warn that the selection is not covered (``PrivacyLeakWarning``). The
        check of ``delta`` against ``1/n`` warns whatever ``warn``.
    n_samples : int or None, default=None
        Number of records the search or cross-validation was run on, for
        the check of ``delta`` against ``1/n``. None: read from the results
        where they tell (see above).

    Returns
    -------
    TrainingSpent
        ``(epsilon, delta, dp_event, n_fits, exact)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import cross_validate
    >>> from skdp import DPSGDClassifier
    >>> from skdp.model_selection import privacy_spent
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 2)); y = (X[:, 0] > 0).astype(int)
    >>> clf = DPSGDClassifier(epsilon=1.0, batch_size=60, max_epochs=1, random_state=0)
    >>> cv = cross_validate(clf, X, y, cv=3, return_estimator=True)
    >>> total = privacy_spent(cv, warn=False)
    >>> total.n_fits, bool(1.0 < total.epsilon < 3.0)
    (3, True)
    """
    if delta is not None and not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1) or None, got {delta!r}.")
    if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(
            n_samples, (int, np.integer)) or n_samples < 1):
        raise ValueError(f"n_samples must be a positive integer or None, got {n_samples!r}.")
    if isinstance(search_or_cv_results, dict):
        if "estimator" not in search_or_cv_results:
            raise ValueError(
                "privacy_spent needs the fitted estimators: call cross_validate(..., "
                "return_estimator=True), or pass a fitted GridSearchCV."
            )
        fitted = list(search_or_cv_results["estimator"])
        if not fitted:
            raise ValueError("The cross-validation results hold no estimator.")
        reports = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            for est in fitted:
                reports.append(spent(est))
        if any(not math.isfinite(r.epsilon) for r in reports):
            result = TrainingSpent(math.inf, float(delta or sum(r.delta for r in reports)),
                                   None, len(fitted), True)
        else:
            events = [r.dp_event for r in reports if r.dp_event != dpa.NoOpDpEvent()]
            target = float(delta) if delta is not None else float(sum(r.delta for r in reports))
            event = dpa.ComposedDpEvent(events) if events else dpa.NoOpDpEvent()
            eps = compute_epsilon(event, target) if events else 0.0
            result = TrainingSpent(eps, target, event, len(fitted), True)
    elif hasattr(search_or_cv_results, "cv_results_") and hasattr(search_or_cv_results,
                                                                 "n_splits_"):
        search = search_or_cv_results
        found = _search_budgets(search)
        n_fits = len(search.cv_results_["params"]) * int(search.n_splits_)
        if found is None:
            result = TrainingSpent(math.inf, float(delta or 0.0), None, n_fits, False)
        else:
            pairs, refits = found
            events, deltas = [], [d for _, d in pairs]
            for best in refits:
                report = spent(best)
                if not math.isfinite(report.epsilon):
                    pairs = None
                    break
                if report.dp_event != dpa.NoOpDpEvent():
                    events.append(report.dp_event)
                    deltas.append(report.delta)
            n_fits += len(refits)
            if pairs is None:
                result = TrainingSpent(math.inf, float(delta or 0.0), None, n_fits, False)
            else:
                # the black boxes' catastrophic mass takes up to sum(delta_i):
                # by default read the composition at twice their deltas
                target = (float(delta) if delta is not None
                          else float(sum(deltas) + sum(d for _, d in pairs)))
                result = TrainingSpent(_black_box_epsilon(pairs, events, target), target, None,
                                       n_fits, False)
    else:
        raise ValueError(
            "privacy_spent takes a fitted GridSearchCV / RandomizedSearchCV or the dict "
            f"returned by cross_validate(..., return_estimator=True); got "
            f"{type(search_or_cv_results).__name__}."
        )
    if n_samples is not None:
        n, exact = int(n_samples), True
    else:
        n, exact = _records_seen(search_or_cv_results)
    _check_delta(result.delta, n, exact)
    if warn:
        warnings.warn(_UNCOVERED, PrivacyLeakWarning, stacklevel=2)
    return result
