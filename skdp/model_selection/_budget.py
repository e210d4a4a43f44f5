"""Sharing one privacy budget between the fits and the steps of a workflow.

A private search (:class:`~skdp.model_selection.PrivateGridSearchCV`) fits
every candidate and a refit, each a pipeline of skdp steps calibrated by its
own ``epsilon`` at its own ``delta``, and releases a noisy selection. It
shares the budget in units of Gaussian-DP ``mu^2`` (Dong, Roth & Su, 2022):
a ``mu``-GDP mechanism is ``(gdp_epsilon(mu, delta), delta)``-DP for every
``delta``, and ``mu``-GDP mechanisms compose to ``sqrt(sum mu_i^2)``-GDP.
:func:`plan_search_budget` splits the budget between the parts of a search;
:func:`share_budget` gives each private step of one fit its share.

This is only a budgeting aid: reported epsilons are always the accountant's
epsilon of the composed ``dp_event_`` of what was fitted. skdp's mechanisms
(Poisson-subsampled Gaussians, one-off Gaussian releases) compose at least
as well as GDP predicts (measured: 8 DP-SGD fits each calibrated to
``eps(mu / sqrt(8), 1e-5)`` compose to 0.978--0.998 for a budget of 1).

Which step reads the data, and what stability delta it may add, is each
step's own answer (``_skdp_reads_data()``, ``_skdp_stability_delta()``),
read here; :func:`leaf_steps` is the one walk over ``Pipeline``,
``ColumnTransformer`` and ``FeatureUnion`` that skdp uses (also by
:func:`~skdp.model_selection.spent`).
"""

import math
from dataclasses import dataclass

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import FeatureUnion, Pipeline

from ..privacy import gdp_epsilon, gdp_mu


# ------------------------------------------------------------- the walk
def _children(estimator, fitted):
    """``(name, child)`` pairs of a composite scikit-learn estimator (the
    fitted ``transformers_`` of a fitted ColumnTransformer with
    ``fitted=True``), or None for a leaf."""
    if isinstance(estimator, Pipeline):
        return list(estimator.steps)
    if isinstance(estimator, ColumnTransformer):
        transformers = estimator.transformers
        if fitted:
            transformers = getattr(estimator, "transformers_", transformers)
        return [(name, step) for name, step, _ in transformers]
    if isinstance(estimator, FeatureUnion):
        return list(estimator.transformer_list)
    return None


def leaf_steps(estimator, prefix="", *, fitted=False):
    """``(path, step)`` of every leaf step of ``estimator``.

    ``path`` is the scikit-learn parameter prefix of the step (``"clf"``,
    ``"pre__num"``; ``""`` for a bare estimator). Nested ``Pipeline``,
    ``ColumnTransformer`` and ``FeatureUnion`` are walked; ``"drop"`` and
    ``"passthrough"`` are skipped. ``fitted=True`` walks a fitted
    ColumnTransformer's ``transformers_`` (the fitted clones).

    Examples
    --------
    >>> from sklearn.pipeline import Pipeline
    >>> from skdp import DPSGDClassifier
    >>> from skdp.preprocessing import DPStandardScaler
    >>> from skdp.model_selection._budget import leaf_steps
    >>> pipe = Pipeline([("scale", DPStandardScaler()), ("clf", DPSGDClassifier())])
    >>> [path for path, _ in leaf_steps(pipe)]
    ['scale', 'clf']
    """
    if estimator is None or isinstance(estimator, str):
        return []
    children = _children(estimator, fitted)
    if children is None:
        return [(prefix, estimator)]
    found = []
    for name, child in children:
        found.extend(leaf_steps(child, f"{prefix}__{name}" if prefix else name, fitted=fitted))
    return found


def param_path(path, name):
    """The parameter name of ``name`` on the step at ``path``.

    >>> from skdp.model_selection._budget import param_path
    >>> param_path("pre__num", "epsilon"), param_path("", "epsilon")
    ('pre__num__epsilon', 'epsilon')
    """
    return f"{path}__{name}" if path else name


def _is_skdp(estimator):
    """skdp's own steps, or a step whose class opts in with
    ``__skdp_private__ = True`` (it must then report ``dp_event_``,
    ``epsilon_`` and ``delta_`` after ``fit``, as skdp steps do)."""
    return (type(estimator).__module__.split(".")[0] == "skdp"
            or getattr(type(estimator), "__skdp_private__", False) is True)


def _reads_data(step):
    """The step's own answer to whether fitting it reads the private data
    (skdp preprocessing with public settings reads none); True by default."""
    answer = getattr(step, "_skdp_reads_data", None)
    return True if answer is None else bool(answer())


def private_steps(estimator, prefix=""):
    """``(path, step)`` of every unfitted skdp step of ``estimator`` that
    spends privacy and whose budget is its ``epsilon`` parameter.

    Paths and walk as in :func:`leaf_steps`. Steps that read nothing from the
    data (e.g. ``DPOneHotEncoder`` with public categories, ``DPMinMaxScaler``
    with public bounds) are left out.
    """
    return [
        (path, step) for path, step in leaf_steps(estimator, prefix)
        if _is_skdp(step) and "epsilon" in step.get_params(deep=False) and _reads_data(step)
    ]


def stability_delta_bounds(estimator):
    """``(path, bound)`` of the steps whose fit may add a stability delta.

    A step answers with ``_skdp_stability_delta()``: an upper bound, from its
    parameters alone, on the stability delta its fit adds outside its
    event, for every epsilon a search can give it (a
    :class:`~skdp.preprocessing.DPOneHotEncoder` choosing categories without
    candidates: ``delta / 2``). Steps without that method add none.

    Examples
    --------
    >>> from sklearn.pipeline import Pipeline
    >>> from skdp import DPSGDClassifier
    >>> from skdp.preprocessing import DPOneHotEncoder
    >>> from skdp.model_selection._budget import stability_delta_bounds
    >>> pipe = Pipeline([("enc", DPOneHotEncoder(delta=1e-8)), ("clf", DPSGDClassifier())])
    >>> stability_delta_bounds(pipe)
    [('enc', 5e-09)]
    """
    found = []
    for path, step in leaf_steps(estimator):
        answer = getattr(step, "_skdp_stability_delta", None)
        bound = 0.0 if answer is None else float(answer())
        if bound > 0:
            found.append((path, bound))
    return found


# --------------------------------------------------------- step budgets
def step_weights(steps, step_shares=None):
    """Relative shares (summing to 1, in GDP ``mu^2``) of the private steps.

    Without ``step_shares``, each step's configured ``(epsilon, delta)`` sets
    its weight ``gdp_mu(epsilon, delta)^2``: a search rescales the
    pipeline's epsilons and keeps their proportions. ``step_shares`` maps
    step paths (``"clf"``, ``"pre__num"``) to weights instead.
    """
    paths = [path for path, _ in steps]
    if step_shares is not None:
        unknown = sorted(set(step_shares) - set(paths))
        missing = [p for p in paths if p not in step_shares]
        if unknown or missing:
            raise ValueError(
                f"step_shares must give a weight to every private step of the estimator and "
                f"to no other; the private steps are {paths}, missing {missing}, unknown "
                f"{unknown}."
            )
        weights = np.array([float(step_shares[p]) for p in paths])
        if not (np.isfinite(weights).all() and (weights > 0).all()):
            raise ValueError(f"step_shares must be positive finite numbers, got {step_shares!r}.")
    else:
        weights = []
        for path, step in steps:
            params = step.get_params(deep=False)
            eps, delta = params["epsilon"], params.get("delta", 1e-5)
            if eps is None:
                raise ValueError(
                    f"Step {path or type(step).__name__!r} ({type(step).__name__}) has "
                    "epsilon=None, i.e. trains without privacy; a private search needs every "
                    "step that reads the data to be private. Give it an epsilon (only its "
                    "proportion to the other steps' matters) or public parameters."
                )
            weights.append(gdp_mu(float(eps), float(delta)) ** 2)
        weights = np.asarray(weights)
    return weights / weights.sum()


def share_budget(estimator, steps, mu, step_shares=None):
    """Give each private step of ``estimator`` its share of a ``mu``-GDP budget.

    Step ``i`` gets ``epsilon = gdp_epsilon(mu * sqrt(w_i), delta_i)`` at its
    own ``delta_i``, with ``w`` from :func:`step_weights`. Sets the
    parameters and returns the ``{param: epsilon}`` that were set.

    Examples
    --------
    >>> from sklearn.pipeline import Pipeline
    >>> from skdp import DPSGDClassifier
    >>> from skdp.preprocessing import DPStandardScaler
    >>> from skdp.model_selection import share_budget
    >>> from skdp.model_selection._budget import private_steps
    >>> from skdp.privacy import gdp_mu
    >>> pipe = Pipeline([("scale", DPStandardScaler(epsilon=0.1)),
    ...                  ("clf", DPSGDClassifier(epsilon=1.0))])
    >>> budgets = share_budget(pipe, private_steps(pipe), gdp_mu(2.0, 1e-5))
    >>> sorted(budgets), budgets["clf__epsilon"] > 10 * budgets["scale__epsilon"]
    (['clf__epsilon', 'scale__epsilon'], True)
    """
    weights = step_weights(steps, step_shares)
    values = {}
    for (path, step), weight in zip(steps, weights):
        delta = float(step.get_params(deep=False).get("delta", 1e-5))
        values[param_path(path, "epsilon")] = gdp_epsilon(mu * math.sqrt(weight), delta)
    if values:
        estimator.set_params(**values)
    return values


# ----------------------------------------------------------- a search
@dataclass(frozen=True)
class SearchBudget:
    """The GDP shares of a private search's parts.

    The records are split into a training part (every candidate fit, then
    the refit on all records) and a validation part (the noisy selection,
    then the refit); each part composes its mechanisms and the search is
    as private as the worse part (parallel composition).

    Attributes
    ----------
    mu : float
        The whole budget, ``gdp_mu(epsilon, delta)``.
    candidate, selection, refit : float
        The ``mu`` of each candidate fit, of the selection and of the
        refit: ``n_candidates * candidate^2 + refit^2 = selection^2 +
        refit^2 = mu^2``.
    """

    mu: float
    candidate: float
    selection: float
    refit: float

    def epsilon(self, part, delta):
        """The epsilon of a part's ``mu`` at ``delta`` (0 for an empty part)."""
        mu = getattr(self, part)
        return gdp_epsilon(mu, delta) if mu > 0 else 0.0


def plan_search_budget(epsilon, delta, n_candidates, refit_share=0.0):
    """Split an ``(epsilon, delta)`` budget between the parts of a private
    search: ``n_candidates`` fits on the training part, a selection on the
    validation part, and a refit on all records with ``refit_share`` of the
    budget (in GDP ``mu^2``).

    Returns
    -------
    SearchBudget

    Examples
    --------
    >>> from skdp.model_selection import plan_search_budget
    >>> plan = plan_search_budget(1.0, 1e-5, n_candidates=4, refit_share=0.2)
    >>> round(4 * plan.candidate**2 + plan.refit**2 - plan.mu**2, 12)
    0.0
    >>> plan.epsilon("selection", 1e-5) < 1.0
    True
    """
    mu = gdp_mu(epsilon, delta)
    return SearchBudget(
        mu=mu,
        candidate=mu * math.sqrt((1.0 - refit_share) / n_candidates),
        selection=mu * math.sqrt(1.0 - refit_share),
        refit=mu * math.sqrt(refit_share),
    )
