"""One epsilon for a fitted workflow: compose every step's ``dp_event_``.

Every step of a pipeline that learnt something from the training data
releases it, and each record goes through every step (also through the
transformers of a ``ColumnTransformer`` that see other columns of the same
record), so the guarantee of the whole workflow is the sequential,
adaptive composition of the steps' mechanisms. :func:`spent` walks a fitted
estimator -- recursing into ``Pipeline``, ``ColumnTransformer`` and
``FeatureUnion`` -- collects the ``dp_event_`` of every skdp step and asks a
fresh accountant for the epsilon of their ``ComposedDpEvent``.

Composition needs one privacy unit: every step's epsilon must be about the
same neighbouring datasets. A step fitted with ``unit_ids`` is private for
adding or removing one unit with all its records, a step without them only
for one record, so :func:`spent` refuses to compose the two (and unit-level
steps fitted on different numbers of units), and names the unit of a
workflow whose steps all used units.
"""

import math
import warnings
from typing import NamedTuple

import dp_accounting as dpa
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.exceptions import NotFittedError
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

from ..exceptions import PrivacyLeakWarning
from ..privacy import ACCOUNTANTS, compute_epsilon
from ._budget import _children, leaf_steps

#: Fitted attributes that only describe the input's schema (public).
_SCHEMA_ATTRIBUTES = {"n_features_in_", "feature_names_in_"}


# ---------------------------------------------- data-independent scikit-learn steps
# An allow-list, kept short and explicit: scikit-learn configurations whose
# fitted state depends only on the input's schema (number, names and dtypes
# of the columns) and on public parameters, never on the values. Each entry
# maps an exact class (a subclass may learn more) to a function returning
# None when the configuration is data-independent, or a sentence saying what
# it learns and how to make it free. Everything else that has fitted
# attributes beyond the schema counts as learnt without privacy. Each entry
# has a test in tests/test_spent.py.


def _function_transformer(step):
    # Stateless: ``func`` is applied to each call's input and fit stores only
    # the schema. (Its optional ``check_inverse`` test runs on the fit data,
    # but only warns at fit time; nothing of it is stored.)
    return None


def _simple_imputer(step):
    # strategy="constant": statistics_ is the public fill_value (or its
    # default for the dtype, 0 or "missing_value") in every column, and the
    # fitted dtypes are the input's. Two settings read the values, though:
    # with keep_empty_features=False (scikit-learn's default) a column that
    # is entirely missing in fit gets NaN in statistics_ and is dropped by
    # transform -- one record decides that -- and add_indicator=True fits a
    # MissingIndicator(features="missing-only"), which keeps the columns that
    # had missing values.
    if step.strategy != "constant":
        return (f"learnt its strategy={step.strategy!r} statistics from the data without "
                "differential privacy; use skdp.preprocessing.DPSimpleImputer with public "
                "bounds, or strategy='constant'")
    if not step.keep_empty_features:
        return ("drops the columns that are entirely missing in fit (which one record can "
                "decide); strategy='constant' is free only with keep_empty_features=True")
    if step.add_indicator:
        return ("keeps the indicator columns that had missing values in fit; use "
                "add_indicator=False (and MissingIndicator(features='all') or "
                "DPSimpleImputer(add_indicator=True) for the indicator)")
    return None


def _missing_indicator(step):
    # features="all": features_ is every column (the schema). "missing-only"
    # (the default) keeps the columns that had missing values in fit.
    if step.features == "all":
        return None
    return ("kept the columns that had missing values in fit; use features='all' for an "
            "indicator of every column")


_DATA_INDEPENDENT = {
    FunctionTransformer: _function_transformer,
    SimpleImputer: _simple_imputer,
    MissingIndicator: _missing_indicator,
}


def _column_choice(container):
    """None when a fitted ColumnTransformer chose its columns from the schema
    alone, else why not.

    Lists, slices and masks of columns are public, and so is the remainder
    (the columns left over). ``make_column_selector`` picks columns by dtype
    and name pattern, reading only the schema (dtypes count as schema when
    they are fixed by the data owner, not inferred from the values; e.g.
    ``pandas.read_csv`` makes an integer column with one missing value
    float). Any other callable may read the values.
    """
    for name, _, columns in container.transformers:
        if callable(columns) and type(columns) is not make_column_selector:
            return (f"chooses the columns of {name!r} with a callable that may read their "
                    "values; give the columns as a list, or use "
                    "sklearn.compose.make_column_selector (dtypes and names only)")
    return None


def _column_choices(estimator, prefix=""):
    """``(path, container, why)`` of every fitted ColumnTransformer inside
    ``estimator`` whose column choice may depend on the data."""
    found = []
    if isinstance(estimator, ColumnTransformer) and _is_fitted(estimator):
        why = _column_choice(estimator)
        if why is not None:
            found.append((prefix or type(estimator).__name__, estimator, why))
    children = None if estimator is None or isinstance(estimator, str) else _children(
        estimator, fitted=True)
    for name, child in children or ():
        found.extend(_column_choices(child, f"{prefix}__{name}" if prefix else name))
    return found


class _SpentFields(NamedTuple):
    epsilon: float
    delta: float
    dp_event: object
    steps: tuple


class Spent(_SpentFields):
    """The privacy of a fitted workflow, as returned by :func:`spent`.

    A named tuple ``(epsilon, delta, dp_event, steps)``, which also says
    what epsilon is about (``privacy_unit``, an attribute beside the four
    fields, so that the tuple unpacks as before).

    Attributes
    ----------
    epsilon : float
        Accountant's epsilon of ``dp_event`` at the target delta; inf when a
        step learnt from the data without privacy.
    delta : float
        Total delta: the target delta of the composed event, plus
        ``exp(epsilon)`` times the stability deltas (``selection_delta_``) of
        the steps that select categories without a candidate list (see
        :class:`~skdp.preprocessing.DPOneHotEncoder`, and a private search
        whose fits hold such steps).
    dp_event : dp_accounting.DpEvent
        ``ComposedDpEvent`` of the steps' events (``NoOpDpEvent`` when no
        step spent anything; a ``NonPrivateDpEvent`` is included for every
        non-private step).
    steps : tuple of (str, float, float)
        ``(name, epsilon_, delta_)`` of every step that reads the data, in
        the order they were visited; names follow scikit-learn's parameter
        paths (``"preprocess__num"``).
    privacy_unit : str
        What epsilon is about: ``"record"``, or the unit of the steps when
        every step that spends budget was fitted with ``unit_ids`` (their
        ``privacy_report_.privacy_unit``, e.g. ``"unit
        (max_records_per_unit=16)"``; ``"unit"`` when the steps' bounds
        differ).
    """

    def __new__(cls, epsilon, delta, dp_event, steps, privacy_unit="record"):
        spent = super().__new__(cls, epsilon, delta, dp_event, steps)
        spent.privacy_unit = privacy_unit
        return spent

    def __getnewargs__(self):
        return (*self, self.privacy_unit)

    def _replace(self, **changes):
        unit = changes.pop("privacy_unit", self.privacy_unit)
        return Spent(*super()._replace(**changes), privacy_unit=unit)

    def __repr__(self):
        return f"{super().__repr__()[:-1]}, privacy_unit={self.privacy_unit!r})"


def _is_fitted(estimator):
    if not hasattr(estimator, "fit"):  # a release (DPMetricFrame, a private scorer)
        return hasattr(estimator, "dp_event_")
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _event_delta(step):
    """Delta at which a fitted step's ``dp_event_`` is read: the delta of its
    privacy report (skdp estimators and preprocessing), or a private
    search's ``event_delta_``. Neither includes the stability deltas, which
    are no part of the event."""
    report = getattr(step, "privacy_report_", None)
    if report is not None:
        return float(report.delta)
    return float(getattr(step, "event_delta_", step.delta_))


def _privacy_unit(step):
    """What a fitted step's epsilon is about: its ``privacy_report_``'s
    ``privacy_unit`` (``"record"`` for a step without a report)."""
    report = getattr(step, "privacy_report_", None)
    return getattr(report, "privacy_unit", "record")


def _unit_key(step):
    """``(unit-level, n_units_)`` of a fitted step: two steps compose only
    when their keys are equal. The bound ``max_records_per_unit`` may
    differ: each step is private for adding or removing one unit whatever
    its bound."""
    if _privacy_unit(step) == "record":
        return (False, None)
    return (True, getattr(step, "n_units_", None))


def _describe_unit(step):
    unit = _privacy_unit(step)
    if unit == "record":
        return "about records (fitted without unit_ids)"
    return f"about {unit} with n_units_={getattr(step, 'n_units_', None)}"


def _common_unit(spending):
    """The privacy unit of the steps ``spending`` (``(name, step)`` pairs of
    the steps that spent budget), or a ValueError naming each step's unit
    when they differ."""
    keys = {_unit_key(step) for _, step in spending}
    if len(keys) > 1:
        listing = "; ".join(f"{name!r} ({type(step).__name__}) {_describe_unit(step)}"
                            for name, step in spending)
        raise ValueError(
            "spent() composes the steps' epsilons, which must all be about the same privacy "
            f"unit, but they are not: {listing}. Fit every private step with the same "
            "unit_ids: with metadata routing on, Pipeline.fit(X, y, unit_ids=ids) passes them "
            "to every step; with routing off, pass <step>__unit_ids=ids to Pipeline.fit for "
            "each private step (or fit every step without unit_ids, about records)."
        )
    units = {_privacy_unit(step) for _, step in spending}
    if not units or units == {"record"}:
        return "record"
    return units.pop() if len(units) == 1 else "unit"


def _what_it_learnt(estimator):
    """None for a step that learns nothing from the values (an allow-listed
    scikit-learn configuration, or an estimator whose fitted attributes only
    describe the input's schema), else what it learnt."""
    known = _DATA_INDEPENDENT.get(type(estimator))
    if known is not None:
        return known(estimator)
    fitted = {k for k in vars(estimator) if k.endswith("_") and not k.startswith("__")}
    if fitted <= _SCHEMA_ATTRIBUTES:
        return None
    return "learnt from the data without differential privacy"


def _learns_nothing(estimator):
    """Whether a fitted step without ``dp_event_`` learnt nothing from the
    data's values (see :func:`_what_it_learnt`)."""
    return _what_it_learnt(estimator) is None


def spent(estimator, *, delta=None, accountant="pld", non_private="warn"):
    """Total privacy of a fitted skdp estimator or workflow.

    Composes the ``dp_event_`` of every fitted step -- skdp estimators and
    private preprocessing steps, inside any nesting of ``Pipeline``,
    ``ColumnTransformer`` and ``FeatureUnion`` -- into one
    ``ComposedDpEvent`` and returns the epsilon a fresh accountant gives it.

    Target delta: by default the **sum** of the steps' deltas (the deltas of
    their events). Basic composition makes the steps together
    ``(sum epsilon_i, sum delta_i)``-DP, and the accountant's epsilon of the
    composed event at ``sum delta_i`` is never larger than that bound (the
    PLD accountant is tight, up to its pessimistic discretization), so the
    total never exceeds the sum of the budgets the steps were given, and is
    usually well below it. Pass ``delta`` to read the composed event at
    another target instead. Stability deltas (``selection_delta_``: private
    category choices without candidates) are no part of any event: they are
    added to the total delta, times ``exp(epsilon)``. A fitted private
    search (:class:`~skdp.model_selection.PrivateGridSearchCV`) is a step
    like any other: its event is read at its ``event_delta_``, so that
    ``spent`` of it alone gives its own ``(epsilon_, delta_)``.

    Steps that learn nothing from the data's values are free:
    ``"passthrough"``, ``"drop"``, unfitted steps (e.g. a
    ``ColumnTransformer`` block with no columns), estimators whose fitted
    attributes only describe the input's schema (``n_features_in_``,
    ``feature_names_in_``), and a short allow-list of scikit-learn
    configurations whose fitted state depends only on the schema and public
    parameters:

    - a ``FunctionTransformer`` (stateless);
    - ``SimpleImputer(strategy="constant", keep_empty_features=True,
      add_indicator=False)``: with scikit-learn's default
      ``keep_empty_features=False`` a column entirely missing in fit is
      dropped, which depends on the data, and ``add_indicator=True`` keeps
      the columns that had missing values;
    - ``MissingIndicator(features="all")`` (``"missing-only"`` keeps the
      columns that had missing values);
    - a ``ColumnTransformer`` choosing its columns by list, slice, mask or
      ``make_column_selector`` (dtypes and name patterns); another callable
      may read the values and counts as a leak.

    A step fitted on the data without differential privacy (a scikit-learn
    ``StandardScaler``, a skdp estimator fitted with ``epsilon=None``, a
    plain ``GridSearchCV``) makes the whole workflow non-private: by default
    a :class:`~skdp.exceptions.PrivacyLeakWarning` names the step, says what
    it learnt and how to avoid it, and epsilon is inf.

    One privacy unit for the whole workflow: the steps that spend budget
    must all be about records, or all about the same units (fitted with
    ``unit_ids``, on the same number of units ``n_units_``); the total is
    then about that unit (``Spent.privacy_unit``). Free steps (public
    bounds or categories) hold for any unit.

    Parameters
    ----------
    estimator : estimator, release, or list of them
        A fitted skdp estimator, ``Pipeline``, ``ColumnTransformer`` or
        ``FeatureUnion``; a private release on evaluation data
        (:class:`~skdp.metrics.DPMetricFrame`, a scorer from
        :func:`~skdp.metrics.make_private_fairness_scorer`); or a list of
        these, composed together (e.g. a model and the fairness report of
        it on the same records).
    delta : float or None, default=None
        Target delta of the composed event; None sums the steps' deltas.
    accountant : {"pld", "rdp"}, default="pld"
    non_private : {"warn", "raise"}, default="warn"
        What to do with a step fitted without privacy: warn and report
        epsilon inf, or raise a ``ValueError`` naming it.

    Returns
    -------
    Spent
        Named tuple ``(epsilon, delta, dp_event, steps)``, with the
        ``privacy_unit`` it is about.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not fitted.
    ValueError
        If the steps that spend budget used different privacy units: some
        fitted with ``unit_ids`` and some without, or with different numbers
        of units. Fit every private step with the same ``unit_ids``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdp import DPSGDClassifier
    >>> from skdp.preprocessing import DPStandardScaler
    >>> from skdp.model_selection import spent
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 10, size=(2000, 3))
    >>> y = (X[:, 0] > 5).astype(int)
    >>> pipe = make_pipeline(
    ...     DPStandardScaler(epsilon=0.1, bounds=(0, 10), random_state=0),
    ...     DPSGDClassifier(epsilon=1.0, delta=1e-5, batch_size=200, random_state=0),
    ... ).fit(X, y)
    >>> total = spent(pipe)
    >>> total.delta  # 1e-5 for each step
    2e-05
    >>> bool(total.epsilon <= sum(eps for _, eps, _ in total.steps))
    True
    >>> [name for name, _, _ in total.steps]
    ['dpstandardscaler', 'dpsgdclassifier']
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}.")
    if non_private not in ("warn", "raise"):
        raise ValueError(f"non_private must be 'warn' or 'raise', got {non_private!r}.")
    if delta is not None and not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1) or None, got {delta!r}.")
    parts = list(estimator) if isinstance(estimator, (list, tuple)) else [estimator]
    for part in parts:
        if not _is_fitted(part):
            raise NotFittedError(
                f"spent() needs a fitted estimator; this {type(part).__name__} is not fitted."
            )
    walked = [step for part in parts for step in leaf_steps(part, fitted=True)]

    events, deltas, selection_delta, steps, leaks, spending = [], [], 0.0, [], [], []
    for path, step in walked:
        name = path or type(step).__name__
        if not _is_fitted(step):
            continue
        if hasattr(step, "dp_event_"):
            steps.append((name, float(step.epsilon_), float(step.delta_)))
            event = step.dp_event_
            if event is None or not math.isfinite(step.epsilon_):
                leaks.append((name, step, "was fitted without privacy (epsilon_ is inf)"))
                continue
            if event == dpa.NoOpDpEvent():
                continue
            events.append(event)
            spending.append((name, step))
            deltas.append(_event_delta(step))
            selection_delta += float(getattr(step, "selection_delta_", 0.0))
        elif (why := _what_it_learnt(step)) is not None:
            steps.append((name, math.inf, 0.0))
            leaks.append((name, step, why))
    for path, container, why in (c for part in parts for c in _column_choices(part)):
        steps.append((path, math.inf, 0.0))
        leaks.append((path, container, why))

    for name, step, why in leaks:
        message = (
            f"Step {name!r} ({type(step).__name__}) {why}, so the workflow is not "
            "differentially private. Use a private step (skdp.preprocessing), public "
            "parameters, or a data-independent transformer instead."
        )
        if non_private == "raise":
            raise ValueError(message)
        warnings.warn(message, PrivacyLeakWarning, stacklevel=2)
    privacy_unit = _common_unit(spending)

    target = float(delta) if delta is not None else float(sum(deltas))
    if leaks:
        event = dpa.ComposedDpEvent(events + [dpa.NonPrivateDpEvent()] * len(leaks))
        return Spent(math.inf, target, event, tuple(steps), privacy_unit)
    if not events:
        return Spent(0.0, 0.0 if delta is None else target, dpa.NoOpDpEvent(), tuple(steps),
                     privacy_unit)
    event = events[0] if len(events) == 1 else dpa.ComposedDpEvent(events)
    epsilon = compute_epsilon(event, target, accountant)
    total_delta = target + math.exp(epsilon) * selection_delta
    return Spent(epsilon, total_delta, event, tuple(steps), privacy_unit)
