"""Private hyperparameter search: one (epsilon, delta) for every fit, the
selection and the refit.

Mechanism (held-out selection with parallel composition):

1. Each record is put in the **validation part** with probability
   ``validation_fraction``, independently of everything else (a coin drawn
   from the search's generator, :func:`~skdp.privacy.bernoulli_split`),
   else in the **training part**. Adding or removing a record adds or
   removes its coin and changes no other record's part, so the parts are
   disjoint by construction.
2. Every candidate is fitted on the training part, with its private steps'
   epsilons set to its share of the budget, and every step of every fit
   (the refit too) seeded on its own from the search's randomness, so that
   no two fits share noise.
3. The candidates' confusion histograms on the validation part (for a
   regressor: their sums of clipped validation errors, and the count) are
   released once with Gaussian noise (:mod:`._selection`); every score in
   ``cv_results_`` is computed from them and the best candidate (or the one a
   callable ``refit`` rule picks) is chosen from those released scores: this
   is report-noisy-max on noisy validation scores of bounded sensitivity
   (Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*,
   2014, Sec. 3.3 and 3.5; Chaudhuri & Vinterbo, *A stability-based
   validation procedure for differentially private machine learning*,
   NeurIPS 2013, for private validation on a held-out set).
4. Optionally, the chosen candidate is refitted on all the data with a share
   of the budget; otherwise the candidate fitted on the training part is
   kept.

Privacy. A training-part record affects the candidates' fits (and the
refit); the released histograms (or error sums) and the choice depend on it only through
the fitted candidates (post-processing). A validation-part record affects
only the histograms (and the refit). By parallel composition over the
disjoint parts (McSherry, *Privacy integrated queries*, SIGMOD 2009), and
since the event of a record's coin mixes the two cases (joint convexity of
the hockey-stick divergence), the search is ``(epsilon_, delta_)``-DP with
``epsilon_`` the larger of the two parts' accountant epsilons. Each part is
the sequential composition of its mechanisms, accounted by dp-accounting at
``event_delta_``. Steps that choose categories without candidates
(``DPOneHotEncoder``) add stability deltas outside the events; the search
reserves them within ``delta`` before anything is fitted, so that
``delta_ = event_delta_ + exp(epsilon_) * selection_delta_ <= delta``.

Privacy units. With ``unit_ids`` (or the estimator's ``unit_column``) the
same argument holds with units in place of records, and ``epsilon_`` is
about adding or removing a whole unit with all its records: the coins of
step 1 are drawn per unit (a unit's records all go to one part, and
``validation_fraction`` counts units); every fit gets the unit ids of its
records, and each of its private steps must report a unit-level event
(``n_units_``), or the search refuses it; the selection release weighs each
validation record by its unit factor (:func:`~skdp.privacy.bound_units`
with the search's ``max_records_per_unit``), so one unit moves it by at
most one record's sensitivity (:mod:`._selection`). The fits bound units by
their own ``max_records_per_unit``, which may differ from the search's and
between candidates (a grid may search over it): each fit's event is about
one unit whatever its bound, and unit-level events compose into a
unit-level event, so no bound needs to match.
"""

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass
from numbers import Integral, Real

import dp_accounting as dpa
import numpy as np
import torch
from scipy.stats import rankdata
from sklearn.base import (
    BaseEstimator,
    MetaEstimatorMixin,
    clone,
    is_classifier,
    is_regressor,
)
from sklearn.model_selection import ParameterGrid, ParameterSampler
from sklearn.utils import check_random_state, get_tags
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import (
    _check_method_params,
    check_is_fitted,
    column_or_1d,
    indexable,
)

from .._fit.units import MAX_RECORDS_PER_UNIT, UNIT_CONSTRAINTS
from .._fit.units import unit_codes as validated_unit_codes
from .._doc_link import DocLinkMixin
from .._groups import select_columns
from ..exceptions import SelectionWarning, UnitPrivacyNotAvailableError
from ..privacy.ledger import charge_budget, charged_elsewhere
from ..privacy import (
    PrivacyBudgetError,
    PrivacyReport,
    SecureGenerator,
    bernoulli_split,
    bound_units,
    check_budget,
    compute_epsilon,
    gdp_epsilon,
)
from ._budget import (
    leaf_steps,
    param_path,
    plan_search_budget,
    private_steps,
    share_budget,
    stability_delta_bounds,
)
from ._spent import _is_fitted, _learns_nothing
from ._refit import _BestWithin
from ._selection import (
    LOSS_RELEASES,
    MOMENTS,
    NOISE_ADVICE,
    NOISE_MARGIN,
    RELEASE,
    confusion_histograms,
    error_sums,
    group_codes,
    histogram_score_noise,
    histogram_scores,
    loss_score_noise,
    loss_scores,
    release_error_sums,
    release_histograms,
    resolve_scoring,
)

__all__ = ["PrivateGridSearchCV", "PrivateRandomizedSearchCV"]

#: Smallest per-step epsilon the search hands out.
_MIN_STEP_EPSILON = 1e-4
#: Times the fits are redone with a smaller share if the accountant's
#: epsilon of what was fitted exceeds the budget (not seen in practice).
_MAX_ATTEMPTS = 3


def _best_has(attr):
    def check(self):
        check_is_fitted(self, "best_estimator_")
        getattr(self.best_estimator_, attr)
        return True

    return check


def _index(values, mask):
    if values is None:
        return None
    if hasattr(values, "iloc"):
        return values.iloc[np.flatnonzero(mask)]
    return np.asarray(values)[mask] if not hasattr(values, "shape") else values[mask]


def _seed_steps(estimator, seed):
    """Give every step of an unfitted fit that has a ``random_state`` a seed
    of its own, derived from the fit's ``seed``; with ``seed=None``,
    ``random_state=None`` (unpredictable randomness)."""
    paths = [param_path(path, "random_state") for path, step in leaf_steps(estimator)
             if "random_state" in step.get_params(deep=False)]
    if not paths:
        return
    if seed is None:
        estimator.set_params(**dict.fromkeys(paths))
    else:
        seeds = np.random.SeedSequence(seed).generate_state(len(paths))
        estimator.set_params(**{path: int(s) for path, s in zip(paths, seeds)})


def _refuse_diagnostic(step, setting, in_grid, fix):
    """The ValueError of a step set (``setting``) to keep exact, non-private
    diagnostics of its training data."""
    source = "the grid sets it" if in_grid else "the estimator sets it"
    raise ValueError(
        f"{setting} ({source}) makes {type(step).__name__} keep exact, non-private "
        "diagnostics of the training data in the fitted model, which the search would "
        f"release beyond its epsilon_. {fix} in a private search; look at the diagnostics "
        "in a fit of its own that is not released."
    )


#: Settings that turn off a step's own judging of its model (its score
#: calibration and model check): the search's validation judges candidates.
_CANDIDATE_CHECKS_OFF = {"calibration": None, "model_check": False}


def _without_own_checks(candidate, steps, params):
    """Turn off the score calibration and the model check of the private
    ``steps`` of ``candidate``, except where the grid sets them."""
    settings = {}
    for path, step in steps:
        own = step.get_params(deep=False)
        for name, off in _CANDIDATE_CHECKS_OFF.items():
            full = param_path(path, name)
            if name in own and full not in params:
                settings[full] = off
    if settings:
        candidate.set_params(**settings)


def _fit_candidate(estimator, params, seed, mu, step_shares, X, y, fit_params,
                   check_candidates=True):
    """Clone, seed every step from ``seed``, give the private steps their
    budget (and, unless ``check_candidates``, turn off their own score
    calibration and model check), fit; return the fitted candidate and the
    epsilons it was given."""
    candidate = clone(estimator).set_params(**params)
    _seed_steps(candidate, seed)
    steps = private_steps(candidate)
    if not steps:
        raise ValueError(
            f"The candidate with parameters {params} has no skdp step that learns from the "
            "data privately; a private search needs skdp estimators or pipelines of skdp "
            "steps (e.g. DPStandardScaler, DPOneHotEncoder, DPSGDClassifier)."
        )
    for path, step in steps:
        relation = step.get_params(deep=False).get("neighboring", "add_remove")
        if relation != "add_remove":
            raise ValueError(
                f"Step {path or type(step).__name__!r} uses neighboring={relation!r}; a private "
                "search accounts every release under add/remove-one neighbours."
            )
    if not check_candidates:
        _without_own_checks(candidate, steps, params)
    budgets = share_budget(candidate, steps, mu, step_shares)
    small = {k: v for k, v in budgets.items() if v < _MIN_STEP_EPSILON}
    if small:
        raise PrivacyBudgetError(
            f"The budget leaves {small} to steps of one fit; raise epsilon, or search fewer "
            "candidates."
        )
    try:
        candidate.fit(X, y, **fit_params)
    except UnitPrivacyNotAvailableError as exc:
        raise UnitPrivacyNotAvailableError(
            f"The candidate with parameters {params} cannot bound the records of a unit, so "
            f"the search cannot be private per unit: {exc}"
        ) from exc
    return candidate, budgets


def _fit_recording(*args):
    """:func:`_fit_candidate` that also returns the warnings its fit raised,
    as ``(category, message)`` in order, without repeats: they are re-emitted
    by the search's process, naming the candidate (:func:`_reemit`), also
    when the fit ran in a worker process, whose warnings joblib does not
    pass on. The caller's warning filters apply to the original messages
    (scikit-learn's ``Parallel`` carries them to the workers): a filter that
    ignores a message drops it here, one that turns it into an error raises
    here."""
    with warnings.catch_warnings(record=True) as caught:
        result = _fit_candidate(*args)
    seen = []
    for w in caught:
        entry = (w.category, str(w.message))
        if entry not in seen:
            seen.append(entry)
    return result, seen


def _reemit(caught, label, params):
    """Re-emit a fit's warnings, prefixed with ``[<label> <params>]``, in
    their own category."""
    for category, message in caught:
        text = f"[{label} {params!r}] {message}"
        try:
            warnings.warn(text, category, stacklevel=4)
        except TypeError:  # a category that cannot be built from a message
            warnings.warn(f"{text} ({category.__name__})", UserWarning, stacklevel=4)


def _events(fitted):
    """dp event of a fitted candidate (every private step's ``dp_event_``,
    as :func:`skdp.model_selection.spent` collects them) and the sum of its steps'
    ``selection_delta_`` (private category choices without candidates).

    Raises a ValueError naming a step that learnt from the data without
    privacy.
    """
    events, selection_delta = [], 0.0
    for path, step in leaf_steps(fitted, fitted=True):
        name = path or type(step).__name__
        if not _is_fitted(step):
            continue
        if hasattr(step, "dp_event_"):
            if step.dp_event_ is None or not math.isfinite(step.epsilon_):
                raise ValueError(
                    f"A candidate is not differentially private: step {name!r} "
                    f"({type(step).__name__}) was fitted without privacy."
                )
            events.append(step.dp_event_)
            selection_delta += float(getattr(step, "selection_delta_", 0.0))
        elif not _learns_nothing(step):
            raise ValueError(
                f"A candidate is not differentially private: step {name!r} "
                f"({type(step).__name__}) learnt from the data without differential privacy. "
                "Use private steps (skdp.preprocessing) or stateless transformers."
            )
    return _compose(events), selection_delta


def _check_unit_level(fitted, n_units):
    """Every private step of every fit in ``fitted`` must have been fitted
    on ``n_units`` units (``n_units_``): a step fitted per record (e.g. a
    Pipeline step that got no ``unit_ids`` with routing off) would make the
    search's epsilon about records."""
    for fit in fitted:
        for path, step in leaf_steps(fit, fitted=True):
            event = getattr(step, "dp_event_", None)
            if not _is_fitted(step) or event is None or event == dpa.NoOpDpEvent():
                continue
            name = path or type(step).__name__
            got = getattr(step, "n_units_", None)
            if got is None:
                raise UnitPrivacyNotAvailableError(
                    f"Step {name!r} ({type(step).__name__}) was fitted per record: the "
                    "search was given unit ids, so every private step must bound the "
                    "records of a unit. With routing off, pass them to every private step "
                    f"('{param_path(path, 'unit_ids')}=...'), or enable metadata routing; "
                    "steps that cannot take unit_ids (see 'Records or persons?') cannot "
                    "be part of a per-unit search."
                )
            if got != n_units:
                raise ValueError(
                    f"Step {name!r} ({type(step).__name__}) was fitted on {got} units, but "
                    f"the search split {n_units} units to it: give the search and every "
                    "step the same unit ids (one unit_ids argument, or the estimator's "
                    "unit_column)."
                )


def _check_stability(measured, bounds):
    """Each fit's stability delta must be within the bound the search
    reserved for it before anything was released."""
    for value, bound in zip(measured, bounds):
        if value > bound * (1 + 1e-9):
            raise PrivacyBudgetError(
                f"A fit added a stability delta of {value:.3g}, above the {bound:.3g} the "
                "search reserved for it from its steps' parameters; only DPOneHotEncoder "
                "steps without candidate categories are expected to add one."
            )


def _compose(events):
    """One event for ``events`` (no-ops dropped); identical events are
    grouped as ``SelfComposedDpEvent`` so that a search over candidates
    with the same privacy is one cached accountant call."""
    events = [e for e in events if e is not None and e != dpa.NoOpDpEvent()]
    groups = []
    for event in events:
        for i, (seen, count) in enumerate(groups):
            if seen == event:
                groups[i] = (seen, count + 1)
                break
        else:
            groups.append((event, 1))
    parts = [e if c == 1 else dpa.SelfComposedDpEvent(e, c) for e, c in groups]
    if not parts:
        return dpa.NoOpDpEvent()
    return parts[0] if len(parts) == 1 else dpa.ComposedDpEvent(parts)


def _tied_with_best(results, score_noise, key):
    """Mask of the candidates tied with the best by the noisy ``key``
    scores: the best, and every candidate whose score is below it by less
    than ``NOISE_MARGIN`` standard deviations of the noise of their
    difference. Reads released values and public noise scales only
    (post-processing)."""
    scores = np.asarray(results[f"mean_test_{key}"], dtype=np.float64)
    tied = np.zeros(scores.shape[0], dtype=bool)
    valid = np.flatnonzero(~np.isnan(scores))
    if valid.shape[0] == 0:
        return tied
    best = int(valid[np.argmax(scores[valid])])
    noise = score_noise[key]
    for i in valid:  # a loop over the candidates, not over records
        tied[i] = i == best or scores[best] - scores[i] < NOISE_MARGIN * noise.difference_std(
            best, int(i))
    return tied


def _choice_within_noise(results, score_noise, key):
    """A message when other candidates are tied with the best by the noisy
    ``key`` scores (:func:`_tied_with_best`), naming the rule that chose,
    else None (post-processing)."""
    tied = np.flatnonzero(_tied_with_best(results, score_noise, key))
    if tied.shape[0] < 2:
        return None
    scores = np.asarray(results[f"mean_test_{key}"], dtype=np.float64)
    best = int(tied[np.argmax(scores[tied])])
    runner_up = int(max((i for i in tied if i != best), key=lambda i: scores[i]))
    noise = score_noise[key]
    spread = noise.difference_std(best, runner_up)
    params = results["params"]
    chosen = int(tied[0])
    return (
        f"The search cannot tell its best candidates apart: by the noisy scores of scorer "
        f"{key!r} (the one that chooses), {tied.shape[0]} candidates are within the "
        f"selection noise of the best, {params[best]} at {scores[best]:.4g} (noise std "
        f"{noise.std[best]:.3g}); e.g. the runner-up {params[runner_up]} scores "
        f"{scores[runner_up]:.4g} (noise std {noise.std[runner_up]:.3g}), a difference of "
        f"{scores[best] - scores[runner_up]:.3g} against a noise std of the difference of "
        f"{spread:.3g}. Among tied candidates the search takes the first in the grid's "
        f"order: {params[chosen]} (cv_results_['within_noise_of_best'] marks them; put the "
        "candidate you prefer when they cannot be told apart, e.g. the simplest or the most "
        "constrained, first). " + NOISE_ADVICE
    )


def _dropped_constraints(fitted):
    """Per fitted candidate, the number of fairness constraints its steps
    left out as too noisy (``excluded_constraints_``, a released choice) and
    the number they enforce; None when no step has constraints."""
    dropped, enforced, any_constrained = [], [], False
    for estimator, _ in fitted:
        steps = [step for _, step in private_steps(estimator)
                 if hasattr(step, "excluded_constraints_")]
        any_constrained = any_constrained or bool(steps)
        dropped.append(sum(len(step.excluded_constraints_) for step in steps))
        enforced.append(sum(len(step.constraint_names_) for step in steps))
    if not any_constrained:
        return None
    return np.asarray(dropped), np.asarray(enforced)


def _search_report(epsilon, event_delta, event, selection_report, units):
    """The search's :class:`~skdp.privacy.PrivacyReport`: its epsilon and
    event (read at ``event_delta``), the selection's noise, and the privacy
    unit (the fits' own reports hold their noise and steps)."""
    return PrivacyReport(
        epsilon=float(epsilon), delta=float(event_delta), dp_event=event,
        accountant=selection_report.accountant, neighboring=selection_report.neighboring,
        noise=dict(selection_report.noise), steps=(), sampling_rates=(),
        privacy_unit="record" if units is None else units.description,
    )


@dataclass
class _Task:
    """What a search knows before anything random happens: candidates,
    scoring, refit and stability budgets, and the validated data."""

    candidates: list
    metrics: dict
    multimetric: bool
    regression: bool
    error_bound: object
    y_bounds: object
    do_refit: bool
    share_refit: float
    stability_bounds: list
    refit_bound: float
    plan_delta: float
    X: object
    y: object
    n: int
    fit_params: dict
    groups: object
    group_labels: object
    y_values: object
    classes: object
    y_codes: object
    unit_codes: object = None
    n_units: int = None

    @property
    def n_candidates(self):
        return len(self.candidates)

    def units_in(self, mask):
        """Number of units with records in ``mask`` (None without units)."""
        if self.unit_codes is None:
            return None
        return int(np.unique(self.unit_codes[mask]).shape[0])


@dataclass
class _CandidateFits:
    """The candidates' fits on the training part and their accounting."""

    fitted: list
    event: object
    epsilon: float
    event_delta: float
    stability: float
    scale: float


@dataclass
class _Selection:
    """The noisy validation scores, the noise they carry, and the release
    behind them."""

    scores: dict
    score_noise: dict
    report: object
    std: float
    noise: dict


@dataclass
class _Refit:
    """The two parts' events and epsilons once the final model is known."""

    train_event: object
    val_event: object
    eps_train: float
    eps_val: float
    stability: float
    budgets: dict
    mu: float


class BasePrivateSearchCV(DocLinkMixin, MetaEstimatorMixin, BaseEstimator):
    """Shared machinery of the private searches; see :class:`PrivateGridSearchCV`."""

    #: Fitted attributes computed from the noisy releases (covered by
    #: ``epsilon_``); every other fitted attribute is public. The refitted
    #: ``best_estimator_`` is checked by its own list.
    _released_attributes = frozenset({"cv_results_", "best_index_", "best_params_",
                                      "best_score_"})

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"])],
        "scoring": [str, callable, list, tuple, dict, None],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "error_bound": [Interval(Real, 0, None, closed="neither"), None],
        "y_bounds": [tuple, list, None],
        "refit": ["boolean", str, callable],
        "refit_share": [Interval(Real, 0, 1, closed="left")],
        "step_shares": [dict, None],
        "max_records_per_unit": UNIT_CONSTRAINTS["max_records_per_unit"],
        "check_candidates": ["boolean"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # ------------------------------------------------------------ routing
    def get_metadata_routing(self):
        """Metadata routing: ``fit`` params go to the candidates' ``fit``
        and to the scorers (which use ``sensitive_features``)."""
        router = MetadataRouter(owner=self.__class__.__name__)
        router.add(estimator=self.estimator,
                   method_mapping=MethodMapping().add(caller="fit", callee="fit"))
        metrics, _ = resolve_scoring(self.estimator, self.scoring)
        for name, metric in metrics.items():
            router.add(**{f"scorer_{name}": metric.scorer},
                       method_mapping=MethodMapping().add(caller="fit", callee="score"))
        return router

    def _route(self, X, params, metrics):
        """(fit params of the candidates, {scorer name: groups or None})."""
        if _routing_enabled():
            routed = process_routing(self, "fit", **params)
            fit_params = dict(routed.estimator.fit)
            groups = {name: getattr(routed, f"scorer_{name}").score.get("sensitive_features")
                      for name in metrics}
        else:
            fit_params, groups = dict(params), {name: None for name in metrics}
        return fit_params, groups

    # --------------------------------------------------------------- fit
    def _candidate_params(self):
        raise NotImplementedError

    def _randomness(self, n_fits):
        """The search's generator (split and selection noise) and a seed for
        each of ``n_fits`` fits: derived from the search's seed, or None
        (unpredictable randomness) with ``random_state=None``."""
        if self.random_state is None:
            return SecureGenerator(), [None] * n_fits
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        fit_seeds = np.random.SeedSequence(seed).generate_state(n_fits)
        return torch.Generator().manual_seed(seed), [int(s) for s in fit_seeds]

    def _check_grid_params(self, candidates):
        for params in candidates:
            for key in params:
                if key == "epsilon" or key.endswith("__epsilon"):
                    raise ValueError(
                        f"The grid sets {key!r}; a private search sets every step's epsilon "
                        "from its own budget. Remove it from the grid (use step_shares to "
                        "change how a fit's budget is shared between its steps)."
                    )
                if key == "unit_column" or key.endswith("__unit_column"):
                    raise ValueError(
                        f"The grid sets {key!r}; the search splits the data by unit, so every "
                        "candidate must read its units from the same place. Set unit_column "
                        "on the estimator, or pass unit_ids to fit."
                    )
                if key == "random_state" or key.endswith("__random_state"):
                    raise ValueError(
                        f"The grid sets {key!r}; a private search gives every step of every "
                        "fit a seed of its own, derived from the search's random_state (or "
                        "unpredictable randomness with random_state=None). Remove it from "
                        "the grid."
                    )

    @staticmethod
    def _check_diagnostics(fits, candidates):
        """Refuse steps set to store exact, non-private diagnostics of the
        training data (the parameters a step's class lists in
        ``__skdp_non_private_params__``, the solver options in
        ``__skdp_non_private_options__``): the search would release them."""
        for fit, params in zip(fits, candidates):
            for path, step in leaf_steps(fit):
                values = step.get_params(deep=False)
                for name in getattr(type(step), "__skdp_non_private_params__", ()):
                    if values.get(name):
                        param = param_path(path, name)
                        _refuse_diagnostic(step, f"{param}={values[name]!r}", param in params,
                                           f"Use {param}=False")
                for name in getattr(type(step), "__skdp_non_private_options__", ()):
                    if step._option(name):
                        param = param_path(path, "solver_options")
                        _refuse_diagnostic(step, f"{param}[{name!r}]={step._option(name)!r}",
                                           param in params,
                                           f"Leave {name!r} out of {param}")

    def _stability_budget(self, fits, do_refit):
        """``(bounds, refit_bound, plan_delta)``: upper bounds on the
        stability deltas of each candidate's fit and of the refit (the
        largest of the candidates'), and the delta left to the events when
        every bound is reached. Raises a ValueError when nothing is left."""
        bounds, paths = [], set()
        for fit in fits:
            found = stability_delta_bounds(fit)
            bounds.append(sum(bound for _, bound in found))
            paths.update(path for path, _ in found)
        refit_bound = max(bounds) if do_refit else 0.0
        reserved = math.exp(self.epsilon) * (sum(bounds) + refit_bound)
        if reserved >= self.delta:
            params = ", ".join(param_path(path, "delta") for path in sorted(paths))
            n_fits = len(bounds) + do_refit
            raise ValueError(
                f"delta={self.delta:g} cannot hold the stability deltas of the steps that "
                f"choose their categories without candidates ({params}): each of the "
                f"{n_fits} fits may release a category that one record holds with "
                "probability up to that step's delta / 2, which adds up to exp(epsilon) * "
                f"{sum(bounds) + refit_bound:.3g} = {reserved:.3g}. Lower {params} (e.g. to "
                f"{self.delta / (10 * n_fits):.1g}), give those steps candidate_categories or "
                "public categories, or raise delta."
            )
        return bounds, refit_bound, self.delta - reserved

    def _regression_bounds(self, regression, metrics):
        """``(error_bound, y_bounds)`` checked against the task: public
        bounds a regressor's selection needs, and that a classifier's
        ignores (so they must not be set)."""
        if not regression:
            if self.error_bound is not None or self.y_bounds is not None:
                raise ValueError(
                    "error_bound and y_bounds bound a regressor's validation errors; the "
                    "estimator is a classifier (scored by a noisy confusion histogram). Leave "
                    "them None."
                )
            return None, None
        y_bounds = self.y_bounds
        if y_bounds is not None:
            if (len(y_bounds) != 2 or not all(isinstance(b, Real) for b in y_bounds)
                    or not (math.isfinite(y_bounds[0]) and math.isfinite(y_bounds[1]))
                    or not y_bounds[0] < y_bounds[1]):
                raise ValueError(
                    f"y_bounds must be a pair (low, high) of finite numbers with low < high; "
                    f"got {y_bounds!r}. They are public bounds on the target, not its range "
                    "in the data."
                )
            y_bounds = (float(y_bounds[0]), float(y_bounds[1]))
        needs_moments = [name for name, m in metrics.items() if m.needs_moments]
        if needs_moments and y_bounds is None:
            raise ValueError(
                f"scoring {needs_moments} needs the variance of the validation targets, "
                "released from targets clipped to public bounds: give y_bounds=(low, high), "
                "or score with 'neg_mean_squared_error'."
            )
        bound = self.error_bound
        if bound is None:
            if y_bounds is None:
                raise ValueError(
                    f"{type(self).__name__} of a regressor releases sums of validation errors "
                    "clipped to a public bound: give error_bound (the largest error that "
                    "counts, in units of y) or public y_bounds=(low, high) (then the bound "
                    "is high - low)."
                )
            bound = y_bounds[1] - y_bounds[0]
        elif y_bounds is not None:
            bound = min(float(bound), y_bounds[1] - y_bounds[0])
        return float(bound), y_bounds

    def _refit_metric(self, multimetric):
        if multimetric and self.refit is True:
            raise ValueError(
                "For multi-metric scoring, refit must be the name of the scorer used to pick "
                "the best candidate, a callable (e.g. skdp.model_selection.best_within), or "
                "False."
            )
        if not multimetric and isinstance(self.refit, str):
            raise ValueError(
                f"refit={self.refit!r} names a scorer, but scoring is a single metric; use "
                "refit=True or a dict of scorers."
            )

    def _select(self, results, multimetric, score_noise):
        """The chosen candidate: the refit callable's, or the first in the
        grid's order among those tied with the best noisy score
        (:func:`_tied_with_best`)."""
        if callable(self.refit):
            index = self.refit(results)
            if not (isinstance(index, (Integral, np.integer)) and 0 <= index < len(results["params"])):
                raise ValueError(
                    f"The refit callable returned {index!r}; it must return the index of a "
                    "candidate in cv_results_."
                )
            return int(index)
        key = "score" if not multimetric else self.refit
        if f"mean_test_{key}" not in results:
            raise ValueError(
                f"refit={key!r} is not a key of scoring; the scorers are "
                f"{sorted(k[len('mean_test_'):] for k in results if k.startswith('mean_test_'))}."
            )
        scores = np.asarray(results[f"mean_test_{key}"], dtype=np.float64)
        if np.isnan(scores).all():
            raise ValueError(f"Every candidate has a NaN noisy {key!r} score.")
        return int(np.flatnonzero(_tied_with_best(results, score_noise, key))[0])

    def fit(self, X, y, **params):
        """Fit every candidate, choose one privately, refit it.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **params : dict
            With metadata routing on, routed to the candidates' ``fit`` and
            to the scorers (``sensitive_features=A`` reaches both, split
            like ``X``). With routing off, passed to the candidates' ``fit``
            (e.g. ``clf__sensitive_features=A`` for a Pipeline).
            ``unit_ids`` (routed, or under the prefix of every private step
            with routing off, e.g. ``clf__unit_ids``) make the search
            private per unit: ``epsilon_`` is about adding or removing all
            records of one unit. The data are split by unit, every fit gets
            the unit ids of its records and the selection bounds each
            unit's contribution (see :ref:`units`). Without them, an
            estimator's ``unit_column`` (routing off) names the column of
            ``X`` that holds the ids. Candidates whose private steps cannot
            bound units raise
            :class:`~skdp.exceptions.UnitPrivacyNotAvailableError`.

        Returns
        -------
        self : object
        """
        self._validate_params()
        task = self._prepare(X, y, params)
        # a privacy ledger is charged the whole budget before the first fit;
        # the candidate fits inside are covered by it and charge nothing
        charge = charge_budget(type(self).__name__, self.epsilon, self.delta,
                               "record" if task.n_units is None else "unit")
        with charged_elsewhere():
            generator, fit_seeds = self._randomness(task.n_candidates + 1)
            train = self._split(task, generator)
            units = self._bound_units(task, generator)
            budget = plan_search_budget(self.epsilon, task.plan_delta, task.n_candidates,
                                        task.share_refit)
            fits = self._fit_candidates(task, train, budget, fit_seeds)
            selection = self._select_privately(task, ~train, fits, budget, generator, units)
            self._store_results(task, selection, fits)
            refit = self._refit_best(task, fits, selection, budget, fit_seeds[-1])
            self._store_privacy(task, budget, fits, selection, refit, units)
        if charge is not None:
            charge.commit(event=self.dp_event_, epsilon=self.epsilon_, delta=self.delta_,
                          extra_delta=self.delta_ - self.event_delta_)
        return self

    # the steps of fit, in order
    def _prepare(self, X, y, params):
        """Check the search's settings, the candidates and the data: a
        :class:`_Task` (nothing random, nothing fitted)."""
        check_budget(self.epsilon, self.delta)
        regression = is_regressor(self.estimator)
        if not (regression or is_classifier(self.estimator)):
            raise ValueError(
                f"{type(self).__name__} needs a classifier or a regressor (or a pipeline ending "
                "in one): its private scores come from a noisy confusion histogram "
                "(classifiers) or noisy sums of clipped errors (regressors)."
            )
        metrics, multimetric = resolve_scoring(self.estimator, self.scoring)
        error_bound, y_bounds = self._regression_bounds(regression, metrics)
        if self.refit is not False:
            self._refit_metric(multimetric)
        candidates = list(self._candidate_params())
        if not candidates:
            raise ValueError("The parameter grid is empty; give at least one candidate.")
        self._check_grid_params(candidates)
        do_refit = self.refit is not False and self.refit_share > 0
        fits = [clone(self.estimator).set_params(**params) for params in candidates]
        self._check_diagnostics(fits, candidates)
        stability_bounds, refit_bound, plan_delta = self._stability_budget(fits, do_refit)
        X, y = indexable(X, y)
        y_array = column_or_1d(y, warn=True)
        if not hasattr(y, "iloc"):
            y = y_array
        n = y_array.shape[0]
        if n < 3:
            raise ValueError(
                f"n_samples={n}: a private search needs at least 3 samples (training and "
                "validation parts)."
            )
        fit_params, routed_groups = self._route(X, params, metrics)
        fit_params = _check_method_params(X, fit_params)
        unit_ids = self._unit_ids(X, params)
        unit_codes, n_units = (None, None) if unit_ids is None else validated_unit_codes(unit_ids, n)
        groups, group_labels = group_codes(metrics, X, routed_groups, n)
        y_values = classes = y_codes = None
        if regression:
            try:
                y_values = np.asarray(y_array, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"y must be numeric for a regressor search: {exc}") from exc
            if not np.isfinite(y_values).all():
                raise ValueError(
                    "y must be finite: drop or impute the rows with missing or infinite "
                    "targets before the search."
                )
        else:
            classes, y_codes = np.unique(y_array, return_inverse=True)
            if classes.shape[0] < 2:
                raise ValueError("y has 1 class; a classifier search needs at least two.")
        return _Task(
            candidates=candidates, metrics=metrics, multimetric=multimetric,
            regression=regression, error_bound=error_bound, y_bounds=y_bounds,
            do_refit=do_refit, share_refit=self.refit_share if do_refit else 0.0,
            stability_bounds=stability_bounds, refit_bound=refit_bound, plan_delta=plan_delta,
            X=X, y=y, n=n, fit_params=fit_params, groups=groups, group_labels=group_labels,
            y_values=y_values, classes=classes, y_codes=y_codes, unit_codes=unit_codes,
            n_units=n_units,
        )

    def _unit_ids(self, X, params):
        """The unit id of each row, or None without units: the ``unit_ids``
        passed to ``fit`` (routed, or under step prefixes with routing off,
        then the same for every step), else the estimator's ``unit_column``
        of ``X``."""
        given = [(key, value) for key, value in params.items()
                 if (key == "unit_ids" or key.endswith("__unit_ids")) and value is not None]
        if given:
            (first_key, first), *rest = given
            for key, value in rest:
                if not np.array_equal(np.asarray(first, dtype=object).reshape(-1),
                                      np.asarray(value, dtype=object).reshape(-1)):
                    raise ValueError(
                        f"fit got different unit ids in {first_key!r} and {key!r}; a search "
                        "is private about one unit, so every step must get the same ids."
                    )
            return first
        columns = [(path, step.get_params(deep=False).get("unit_column"))
                   for path, step in leaf_steps(self.estimator)]
        columns = [(path, column) for path, column in columns if column is not None]
        if not columns:
            return None
        path, column = columns[0]
        if path:
            raise ValueError(
                f"Step {path!r} reads its unit ids from unit_column={column!r} of the data "
                "that reaches it, which the search cannot read to split the data by unit. "
                f"Pass the ids to fit: '{param_path(path, 'unit_ids')}=...' (routing off) "
                "or unit_ids=... (routing on)."
            )
        return select_columns(X, column, name="unit_column")

    def _split(self, task, generator):
        """The training part: each record (each unit, with units) joins the
        validation part on a coin of its own
        (:func:`~skdp.privacy.bernoulli_split`); a unit's records follow its
        coin."""
        if task.unit_codes is None:
            validation = bernoulli_split(task.n, self.validation_fraction, generator).numpy()
            coins, what = validation, "records"
        else:
            coins = bernoulli_split(task.n_units, self.validation_fraction, generator).numpy()
            validation, what = coins[task.unit_codes], "units"
        train = ~validation
        n_validation, n_train = int(coins.sum()), int((~coins).sum())
        if n_validation < 1 or n_train < 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves {n_train} "
                f"training and {n_validation} validation {what}; use more data or "
                "another fraction."
            )
        return train

    def _bound_units(self, task, generator):
        """The search's :class:`~skdp.privacy.UnitBounds` (the factors that
        bound each validation unit in the selection release), or None
        without units (nothing drawn)."""
        if task.unit_codes is None:
            return None
        return bound_units(task.unit_codes, task.n_units, int(self.max_records_per_unit),
                           generator)

    def _fit_candidates(self, task, train, budget, fit_seeds):
        """Fit every candidate on the training part with its share of the
        budget; redone with a smaller share if the accountant finds the GDP
        split too optimistic (nothing is released before)."""
        X_train, y_train = _index(task.X, train), _index(task.y, train)
        train_params = _check_method_params(task.X, task.fit_params, np.flatnonzero(train))
        growth = math.exp(self.epsilon)
        scale = 1.0
        for attempt in range(_MAX_ATTEMPTS):
            # scikit-learn's Parallel carries the configuration (metadata
            # routing) and the warning filters to worker processes
            recorded = Parallel(n_jobs=self.n_jobs)(
                delayed(_fit_recording)(self.estimator, p, seed, budget.candidate * scale,
                                        self.step_shares, X_train, y_train, train_params,
                                        self.check_candidates)
                for p, seed in zip(task.candidates, fit_seeds)
            )
            fitted = [result for result, _ in recorded]
            if task.unit_codes is not None:
                _check_unit_level([est for est, _ in fitted], task.units_in(train))
            spent_ = [_events(est) for est, _ in fitted]
            _check_stability([extra for _, extra in spent_], task.stability_bounds)
            event = _compose([event for event, _ in spent_])
            stability = sum(extra for _, extra in spent_)
            # the events get what the stability terms leave of delta (the
            # refit's at their bound: it is fitted after the selection)
            event_delta = self.delta - growth * (stability + task.refit_bound)
            epsilon = compute_epsilon(event, event_delta)
            if epsilon <= self.epsilon:
                break
            # GDP split too optimistic for these mechanisms: shrink and redo
            # (the events do not depend on the data, so nothing is released)
            scale *= 0.98 * self.epsilon / epsilon
        else:
            raise PrivacyBudgetError(
                f"The candidates' fits compose to epsilon={epsilon:.4g} > "
                f"{self.epsilon}; lower the number of candidates or raise epsilon."
            )
        # the warnings of the fits kept (not of attempts redone), naming the candidate
        for params, (_, caught) in zip(task.candidates, recorded):
            _reemit(caught, "candidate", params)
        if self.verbose:
            print(f"[{type(self).__name__}] fitted {task.n_candidates} candidates on "
                  f"{int(train.sum())} records: epsilon {epsilon:.4f} (training part)")
        return _CandidateFits(fitted=fitted, event=event, epsilon=epsilon,
                              event_delta=event_delta, stability=stability, scale=scale)

    def _select_privately(self, task, validation, fits, budget, generator, units):
        """The candidates' noisy scores on the validation part: one noisy
        release of their confusion histograms (classifiers) or clipped
        error sums (regressors); with ``units``, each record counts with its
        unit factor."""
        X_val = _index(task.X, validation)
        weights = None if units is None else units.factors[validation]
        privacy_unit = "record" if units is None else units.description
        eps_selection = budget.epsilon("selection", fits.event_delta)
        models = [est for est, _ in fits.fitted]
        if task.regression:
            predictions = np.stack([
                np.asarray(est.predict(X_val), dtype=np.float64).reshape(-1) for est in models
            ])
            losses = sorted({m.loss for m in task.metrics.values()}, reverse=True)
            moments = any(m.needs_moments for m in task.metrics.values())
            sums, stats = error_sums(predictions, task.y_values[validation], losses,
                                     task.error_bound, task.y_bounds, moments, weights)
            noisy_sums, noisy_stats, report = release_error_sums(
                sums, stats, task.error_bound, eps_selection, fits.event_delta, generator,
                privacy_unit)
            scores = loss_scores(noisy_sums, noisy_stats, task.metrics, task.y_bounds)
            noise = {LOSS_RELEASES[loss]: report.scale(LOSS_RELEASES[loss]) for loss in losses}
            noise[MOMENTS] = report.scale(MOMENTS)
            std = noise[LOSS_RELEASES[losses[0]]]
            # released values and public noise scales only: post-processing
            score_noise = loss_score_noise(noisy_sums, noisy_stats, task.metrics, noise,
                                           task.y_bounds)
        else:
            predictions = np.stack([
                np.searchsorted(task.classes, np.asarray(est.predict(X_val))) for est in models
            ])
            n_groups = 1 if task.group_labels is None else len(task.group_labels)
            counts = confusion_histograms(
                predictions, task.y_codes[validation],
                None if task.groups is None else task.groups[validation], len(task.classes),
                n_groups, weights,
            )
            noisy, report = release_histograms(counts, eps_selection, fits.event_delta,
                                               generator, privacy_unit)
            scores = histogram_scores(noisy, task.classes, task.metrics)
            std = report.scale(RELEASE)
            noise = {RELEASE: std}
            # released values and public noise scales only: post-processing
            score_noise = histogram_score_noise(noisy, task.classes, task.metrics, std)
        return _Selection(scores=scores, score_noise=score_noise, report=report, std=std,
                          noise=noise)

    def _store_results(self, task, selection, fits):
        """``cv_results_`` from the noisy scores (and the constraints each
        candidate dropped), and the choice."""
        results = self._results(task.candidates, selection.scores, selection.score_noise)
        dropped = _dropped_constraints(fits.fitted)
        if dropped is not None:
            results["dropped_constraints"], results["enforced_constraints"] = dropped
        self.cv_results_ = results
        self.multimetric_ = task.multimetric
        self.n_candidates_ = task.n_candidates
        if self.refit is not False or not task.multimetric:
            if not callable(self.refit):
                key = "score" if not task.multimetric else self.refit
                results["within_noise_of_best"] = _tied_with_best(
                    results, selection.score_noise, key)
            self.best_index_ = self._select(results, task.multimetric, selection.score_noise)
            self.best_params_ = task.candidates[self.best_index_]
            if not callable(self.refit):
                self.best_score_ = float(results[f"mean_test_{key}"][self.best_index_])
            self._warn_if_within_noise(results, selection.score_noise, task.multimetric)
        self._warn_if_all_dropped(dropped)

    def _warn_if_all_dropped(self, dropped):
        """One plain warning when every candidate left out all its fairness
        constraints: the search then compared unconstrained models."""
        if dropped is None:
            return
        n_dropped, n_enforced = dropped
        if (n_dropped > 0).all() and (n_enforced == 0).all():
            warnings.warn(
                "Every candidate of the search dropped all its fairness constraints: at each "
                "candidate's share of the budget its groups were too small for the noise "
                "(cv_results_['dropped_constraints']). The search compared unconstrained "
                "models, so its choice says nothing about the constraints. The refit, with a "
                "larger budget, may enforce them: read best_estimator_'s constraints_met_ and "
                "constraint_verdicts_, and check the constraints on held-out data. To choose "
                "among constrained candidates: fewer candidates, a larger epsilon, or larger "
                "(merged) groups.",
                SelectionWarning, stacklevel=4,
            )

    def _warn_if_within_noise(self, results, score_noise, multimetric):
        """Warn when the released scores that decided the choice differ by
        less than their noise. It reads only released values (the noisy
        scores) and the noise's public scales, so it is post-processing and
        costs no privacy."""
        if isinstance(self.refit, _BestWithin):
            message = self.refit.within_noise(results, score_noise, self.best_index_)
        elif callable(self.refit):
            return  # a rule of the user's: what decides its choice is unknown
        else:
            key = "score" if not multimetric else self.refit
            message = _choice_within_noise(results, score_noise, key)
        if message is not None:
            warnings.warn(message, SelectionWarning, stacklevel=4)

    def _refit_best(self, task, fits, selection, budget, seed):
        """The final model: the chosen candidate refitted on every record
        with ``refit_share`` of the budget (or, without a refit share, the
        chosen candidate's fit on the training part); the events of both
        parts with it."""
        refit = _Refit(train_event=fits.event, val_event=selection.report.dp_event,
                       eps_train=fits.epsilon, eps_val=float(selection.report.epsilon),
                       stability=0.0, budgets={}, mu=budget.refit)
        if task.do_refit:
            mu = budget.refit
            for attempt in range(_MAX_ATTEMPTS):
                (best, budgets), caught = _fit_recording(
                    self.estimator, self.best_params_, seed, mu, self.step_shares,
                    task.X, task.y, task.fit_params,
                )
                if task.unit_codes is not None:
                    _check_unit_level([best], task.n_units)
                event, stability = _events(best)
                _check_stability([stability], [task.refit_bound])
                train_event = _compose([fits.event, event])
                val_event = _compose([selection.report.dp_event, event])
                eps_train = compute_epsilon(train_event, fits.event_delta)
                eps_val = compute_epsilon(val_event, fits.event_delta)
                worst = max(eps_train, eps_val)
                if worst <= self.epsilon:
                    break
                mu *= 0.98 * self.epsilon / worst
            else:
                raise PrivacyBudgetError(
                    f"The refit does not fit in the budget (epsilon {worst:.4g} > "
                    f"{self.epsilon}); lower refit_share."
                )
            _reemit(caught, "refit", self.best_params_)
            self.best_estimator_ = best
            refit = _Refit(train_event=train_event, val_event=val_event, eps_train=eps_train,
                           eps_val=eps_val, stability=stability, budgets=budgets, mu=mu)
        elif self.refit is not False:
            self.best_estimator_ = fits.fitted[self.best_index_][0]
        return refit

    def _store_privacy(self, task, budget, fits, selection, refit, units):
        """``epsilon_``, ``delta_``, ``dp_event_``, ``privacy_report_``,
        ``n_units_`` and ``budget_split_``: the larger of the two parts."""
        # stability deltas of private category choices (DPOneHotEncoder
        # without candidates) add exp(epsilon) times their sum; the training
        # part holds every fit's, so its sum bounds both parts'
        event_delta = fits.event_delta
        stability_train = fits.stability + refit.stability
        delta_train = event_delta + math.exp(refit.eps_train) * stability_train
        delta_val = event_delta + math.exp(refit.eps_val) * refit.stability
        binding = "training" if refit.eps_train >= refit.eps_val else "validation"
        self.epsilon_ = max(refit.eps_train, refit.eps_val)
        self.event_delta_ = event_delta
        self.selection_delta_ = stability_train
        self.delta_ = event_delta + math.exp(self.epsilon_) * stability_train
        self.dp_event_ = refit.train_event if binding == "training" else refit.val_event
        self.n_units_ = task.n_units
        self.privacy_report_ = _search_report(self.epsilon_, event_delta, self.dp_event_,
                                              selection.report, units)
        K, share_refit = task.n_candidates, task.share_refit
        self.budget_split_ = {
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "gdp_mu": budget.mu,
            "n_candidates": K,
            "validation_fraction": float(self.validation_fraction),
            "refit": bool(task.do_refit),
            "shares": {  # of the budget, in GDP mu^2
                "candidates": 1.0 - share_refit,
                "each_candidate": (1.0 - share_refit) / K,
                "selection": 1.0 - share_refit,
                "refit": share_refit,
            },
            "candidate_epsilons": [dict(budgets) for _, budgets in fits.fitted],
            "candidate_epsilon": gdp_epsilon(budget.candidate * fits.scale, event_delta),
            "selection_epsilon": float(selection.report.epsilon),
            "selection_noise_std": float(selection.std),
            "selection_noise_stds": {k: float(v) for k, v in selection.noise.items()},
            "error_bound": task.error_bound,
            "refit_epsilons": dict(refit.budgets),
            "refit_epsilon": gdp_epsilon(refit.mu, event_delta) if task.do_refit else 0.0,
            "event_delta": event_delta,
            "training_part": {"epsilon": refit.eps_train, "delta": delta_train,
                              "stability_delta": stability_train,
                              "dp_event": refit.train_event},
            "validation_part": {"epsilon": refit.eps_val, "delta": delta_val,
                                "stability_delta": refit.stability,
                                "dp_event": refit.val_event},
            "binding_part": binding,
        }
        if self.verbose:
            print(f"[{type(self).__name__}] epsilon_={self.epsilon_:.4f} (training part "
                  f"{refit.eps_train:.4f}, validation part {refit.eps_val:.4f})")

    def _results(self, candidates, scores, score_noise):
        results = defaultdict(list)
        results["params"] = candidates
        keys = sorted({k for p in candidates for k in p})
        for key in keys:
            column = np.ma.MaskedArray(np.empty(len(candidates), dtype=object),
                                       mask=[key not in p for p in candidates])
            for i, p in enumerate(candidates):
                if key in p:
                    column[i] = p[key]
            results[f"param_{key}"] = column
        for name, values in scores.items():
            results[f"split0_test_{name}"] = values
            results[f"mean_test_{name}"] = values
            filled = np.where(np.isnan(values), -np.inf, values)
            results[f"rank_test_{name}"] = rankdata(-filled, method="min").astype(np.int32)
            results[f"std_noise_test_{name}"] = score_noise[name].std
        return dict(results)

    # ------------------------------------------------------- delegation
    @property
    def classes_(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.classes_

    @property
    def n_features_in_(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.n_features_in_

    @available_if(_best_has("predict"))
    def predict(self, X):
        """Predict with the chosen model."""
        return self.best_estimator_.predict(X)

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the chosen model."""
        return self.best_estimator_.predict_proba(X)

    @available_if(_best_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the chosen model."""
        return self.best_estimator_.decision_function(X)

    def score(self, X, y, **params):
        """Score of the chosen model on (public or test) data with the
        refit scorer (by default accuracy for a classifier, negative mean
        squared error for a regressor)."""
        check_is_fitted(self, "best_estimator_")
        metrics, multimetric = resolve_scoring(self.estimator, self.scoring)
        if multimetric and not isinstance(self.refit, str):
            raise AttributeError(
                "score needs refit to name a scorer; with a callable refit, score "
                "best_estimator_ with the scorers directly."
            )
        metric = metrics["score" if not multimetric else self.refit]
        return metric.scorer(self.best_estimator_, X, y, **params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = sub.classifier_tags
        tags.regressor_tags = sub.regressor_tags
        tags.input_tags = sub.input_tags
        tags.non_deterministic = self.random_state is None
        return tags


_DOC_PARAMS = """
    estimator : estimator
        A skdp classifier or regressor, or a Pipeline of skdp steps ending in
        one. Every
        step that learns from the data must be private (skdp preprocessing
        and estimators); the search sets their ``epsilon``.
{search_params}
    scoring : str, callable, list, dict or None, default=None
        Scorers of hard predictions that accept ``sample_weight``:
        ``"accuracy"`` (None), ``"balanced_accuracy"``, ``"precision"``,
        ``"recall"``, ``"f1"``, scorers from ``make_scorer`` of such
        metrics, and skdp's fairness scorers
        (:func:`skdp.metrics.get_fairness_scorer`). Every score is computed
        from the released noisy confusion histogram, so extra scorers cost
        no privacy. For a regressor: ``"neg_mean_squared_error"`` (None),
        ``"neg_root_mean_squared_error"``, ``"neg_mean_absolute_error"`` (a
        second noisy sum) or ``"r2"`` (needs ``y_bounds``), computed from
        noisy sums of clipped errors.
    epsilon : float, default=1.0
        Budget of the whole search: candidate fits, selection and refit.
        About adding or removing one record, or with ``fit(unit_ids=...)`` one
        unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
        Total delta of the search. Steps that choose their categories
        without candidates (``DPOneHotEncoder(categories="private")``)
        may each release a category that one record holds with probability
        up to their own ``delta / 2``; ``exp(epsilon)`` times these, for
        every fit, must fit within ``delta`` (else ``fit`` raises a
        ``ValueError``), and the events get the rest.
    validation_fraction : float in (0, 1), default=0.2
        Probability that a record goes to the validation part (an
        independent coin per record, :func:`~skdp.privacy.bernoulli_split`;
        per unit, with units: all records of a unit go to one part).
    error_bound : float or None, default=None
        Regressors only: public bound ``b`` (in units of ``y``) to which each
        validation error ``|prediction - y|`` is clipped before the sums are
        released; one record then moves each candidate's sum of squared
        errors by at most ``b**2``. The noise grows with ``b**2`` and the
        clipping biases scores when ``b`` is below typical errors: a few
        times the expected error of a good model is a reasonable choice.
        None: ``high - low`` of ``y_bounds``.
    y_bounds : tuple (low, high) or None, default=None
        Regressors only: public bounds on the target; validation targets and
        predictions are clipped to them. Needed for ``"r2"`` (its total sum
        of squares is released from the clipped targets) or when
        ``error_bound`` is None.
    refit : bool, str or callable, default=True
        As in ``GridSearchCV``: the scorer whose best noisy score picks the
        candidate (True for a single metric), a callable
        ``cv_results_ -> index`` (e.g. :func:`best_within`), or False (no
        final model).
    refit_share : float in [0, 1), default=0.5
        Share of the budget (in GDP ``mu^2``) for refitting the chosen
        candidate on all the data; the candidates share the rest. 0 keeps
        the chosen candidate as it was fitted on the training part (no
        refit, the candidates get the whole budget). On Adult, 0.5 matched
        0 for DP-SGD and beat it for RaCO-DP (see :ref:`workflow`).
    step_shares : dict or None, default=None
        How one fit's budget is shared between its private steps, by step
        path (``{{"clf": 0.9, "pre__num": 0.1}}``, in GDP ``mu^2``). None
        keeps the proportions of the steps' configured epsilons.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)`` (or the estimator's ``unit_column``): the
        public bound k on the validation records of one unit that the
        selection uses; each unit keeps at most k of them (drawn at random)
        and each weighs ``1 / min(|u|, k)`` in the released histograms or
        error sums, so a unit moves them as one record does (see
        :ref:`units`). The fits bound units by their own
        ``max_records_per_unit``, which may differ (and may be searched
        over). Unused without units.
    check_candidates : bool, default=False
        Fit the candidates with their own private score calibration and
        model check (``calibration`` and ``model_check`` of their steps).
        By default they are turned off for the candidates, whose budget then
        goes to training: the search's validation scores judge them; the
        refit keeps the estimator's settings. A grid that sets them is
        followed.
    n_jobs : int or None, default=None
        Candidates fitted in parallel (joblib, through scikit-learn's
        ``Parallel``, which carries the configuration, e.g. metadata
        routing, and the warning filters to the workers). The warnings of
        each fit, also from worker processes, are re-emitted by ``fit``
        prefixed with ``[candidate <params>]`` (``[refit <params>]`` for
        the refit), in their own category.
    random_state : int, RandomState or None, default=None
        Seeds the split and the selection noise (and the parameter sampler
        of the randomized search), and every fit: each step of each
        candidate's fit and of the refit gets a seed of its own derived from
        it, whatever its own ``random_state`` (so that no two fits share
        noise; the grid may not set ``random_state``). None draws all of
        them from the operating system's CSPRNG (the fits' steps get
        ``random_state=None``).
    verbose : int, default=0
"""

_DOC_ATTRIBUTES = """
    Attributes
    ----------
    cv_results_ : dict
        ``params``, ``param_<name>``, and for every scorer
        ``mean_test_<name>`` (= ``split0_test_<name>``: one held-out split),
        ``rank_test_<name>`` and ``std_noise_test_<name>``. Every score is a
        private release (from the noisy histogram or error sums).
        ``std_noise_test_<name>`` (one value per candidate) is the standard
        deviation of the selection noise in that score, by the delta method
        at the released values (the metric's gradient with respect to the
        noisy counts or sums, times their public noise scale): it reads
        released values only, so it costs no privacy. It is a first-order
        figure (rough where a group or class has few validation records,
        and above the truth at a gap near 0). When the scores that decide
        the choice (the refit scorer's best and runner-up; for
        :func:`best_within`, also the candidates whose side of the bound
        decides it) differ by less than their noise, ``fit`` warns
        (:class:`~skdp.exceptions.SelectionWarning`), and
        ``within_noise_of_best`` marks the candidates tied with the best
        noisy score (by less than the noise std of their difference): the
        search takes the first of them in the grid's order, so put first the
        candidate you prefer when they cannot be told apart (the simplest,
        the most constrained). With fairness steps, ``dropped_constraints``
        and ``enforced_constraints`` count each candidate's constraints left
        out as too noisy and kept; when every candidate dropped all of them,
        ``fit`` says so in one ``SelectionWarning``. Fit and score times are not reported (they are
        side channels on the data): there is no ``refit_time_``, unlike
        ``GridSearchCV`` (no skdp estimator stores its fit times; see
        :func:`skdp.debug.record_fit_times`).
    best_index_, best_params_ : int, dict
    best_score_ : float
        Noisy score of the chosen candidate (not with a callable refit).
    best_estimator_ : estimator
        The chosen candidate: refitted on all the data (``refit_share > 0``)
        or as fitted on the training part.
    epsilon_, delta_ : float
        Privacy of everything the search released: the larger of the
        training part's and the validation part's epsilons (parallel
        composition), each the accountant's epsilon of that part's events at
        ``event_delta_``; ``delta_ = event_delta_ + exp(epsilon_) *
        selection_delta_ <= delta``.
    event_delta_ : float
        The delta at which the events are read: ``delta`` less
        ``exp(epsilon)`` times the stability deltas (the refit's at their
        bound, ``delta / 2`` of each such step); ``delta`` when no step
        chooses categories without candidates.
    selection_delta_ : float
        Sum of the stability deltas of every fit (the training part's, which
        holds every fit; 0 without such steps), as in
        :class:`~skdp.preprocessing.DPOneHotEncoder`.
    dp_event_ : dp_accounting.DpEvent
        The composed event of the part whose epsilon is ``epsilon_``
        (``budget_split_["binding_part"]``). Each record is in one part, so
        to compose the search with other releases on the same records,
        compose each part's event (in ``budget_split_``) and take the larger.
    budget_split_ : dict
        How the budget was shared: GDP ``mu^2`` shares, each candidate's
        step epsilons, the selection's epsilon and noise (``selection_noise_std``:
        of the histograms or of the squared-error sums; ``selection_noise_stds``:
        of every selection release; ``error_bound``: regressors' clip bound),
        the refit's, ``event_delta``, and each part's epsilon, delta,
        stability delta and event.
    privacy_report_ : skdp.privacy.PrivacyReport
        ``epsilon_`` and ``dp_event_`` (read at ``event_delta_``), the
        selection's noise, and ``privacy_unit``: ``"record"``, or ``"unit
        (max_records_per_unit=k)"`` (with the search's k) when ``fit`` was
        given units; then every epsilon of the search is about adding or
        removing one unit with all its records. The fits' own reports (on
        ``best_estimator_``) hold their noise and steps.
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public, like the number of
        records), None without.
    n_candidates_ : int
    multimetric_ : bool
"""


class PrivateGridSearchCV(BasePrivateSearchCV):
    __doc__ = (
        """Differentially private exhaustive search over a parameter grid.

    One ``(epsilon, delta)`` covers every candidate's fit, the choice of the
    best candidate from private validation scores, and the final model.
    Candidates are fitted on a random training part of the data and scored
    on the disjoint validation part through one noisy confusion histogram per
    candidate, or for regressors noisy sums of clipped errors (Gaussian
    mechanism); the best noisy score (or a refit rule
    such as :func:`best_within` applied to the noisy ``cv_results_``)
    chooses. See :ref:`workflow`.

    Parameters
    ----------"""
        + _DOC_PARAMS.format(search_params=(
            "    param_grid : dict or list of dict\n"
            "        As in ``GridSearchCV``; it may not set any ``epsilon``."))
        + _DOC_ATTRIBUTES
        + """
    See Also
    --------
    PrivateRandomizedSearchCV : Sampled candidates.
    privacy_spent : What an ordinary search over skdp estimators spent on training.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp import DPSGDClassifier
    >>> from skdp.model_selection import PrivateGridSearchCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 3))
    >>> y = (X[:, 0] + 0.5 * rng.normal(size=4000) > 0).astype(int)
    >>> search = PrivateGridSearchCV(
    ...     DPSGDClassifier(batch_size=200, max_epochs=2, random_state=0),
    ...     {"learning_rate": [0.1, 1.0]}, epsilon=1.0, random_state=0,
    ... ).fit(X, y)
    >>> bool(search.epsilon_ <= 1.0)
    True
    >>> search.budget_split_["shares"]
    {'candidates': 0.5, 'each_candidate': 0.25, 'selection': 0.5, 'refit': 0.5}
    """
    )

    _parameter_constraints = {
        **BasePrivateSearchCV._parameter_constraints,
        "param_grid": [dict, list],
    }

    def __init__(
        self, estimator, param_grid, *, scoring=None, epsilon=1.0, delta=1e-5,
        validation_fraction=0.2, error_bound=None, y_bounds=None, refit=True, refit_share=0.5,
        step_shares=None, max_records_per_unit=MAX_RECORDS_PER_UNIT, check_candidates=False,
        n_jobs=None, random_state=None, verbose=0,
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.epsilon = epsilon
        self.delta = delta
        self.validation_fraction = validation_fraction
        self.error_bound = error_bound
        self.y_bounds = y_bounds
        self.refit = refit
        self.refit_share = refit_share
        self.step_shares = step_shares
        self.max_records_per_unit = max_records_per_unit
        self.check_candidates = check_candidates
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _candidate_params(self):
        return ParameterGrid(self.param_grid)


class PrivateRandomizedSearchCV(BasePrivateSearchCV):
    __doc__ = (
        """Differentially private search over sampled parameter settings.

    As :class:`PrivateGridSearchCV`, with ``n_iter`` candidates sampled from
    ``param_distributions`` (``ParameterSampler``; the sampling uses no data).

    Parameters
    ----------"""
        + _DOC_PARAMS.format(search_params=(
            "    param_distributions : dict or list of dict\n"
            "        As in ``RandomizedSearchCV``; it may not set any ``epsilon``.\n"
            "    n_iter : int, default=10\n"
            "        Number of candidates; each gets ``1 / n_iter`` of the candidates' share."))
        + _DOC_ATTRIBUTES
    )

    _parameter_constraints = {
        **BasePrivateSearchCV._parameter_constraints,
        "param_distributions": [dict, list],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self, estimator, param_distributions, *, n_iter=10, scoring=None, epsilon=1.0,
        delta=1e-5, validation_fraction=0.2, error_bound=None, y_bounds=None, refit=True,
        refit_share=0.5, step_shares=None, max_records_per_unit=MAX_RECORDS_PER_UNIT,
        check_candidates=False, n_jobs=None, random_state=None, verbose=0,
    ):
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.n_iter = n_iter
        self.scoring = scoring
        self.epsilon = epsilon
        self.delta = delta
        self.validation_fraction = validation_fraction
        self.error_bound = error_bound
        self.y_bounds = y_bounds
        self.refit = refit
        self.refit_share = refit_share
        self.step_shares = step_shares
        self.max_records_per_unit = max_records_per_unit
        self.check_candidates = check_candidates
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _candidate_params(self):
        return ParameterSampler(self.param_distributions, self.n_iter,
                                random_state=self.random_state)
