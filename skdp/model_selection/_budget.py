"""Sharing one privacy budget between the fits of a workflow.

Every fit of a private search (each candidate, the final refit) is a
pipeline of skdp steps, each calibrated by its own ``epsilon`` at its own
``delta``. The search sets those epsilons so that the composition of all
fits meets one budget. It shares the budget in units of Gaussian-DP
``mu^2`` (Dong, Roth & Su, 2022): a ``mu``-GDP mechanism is
``(eps(mu, delta), delta)``-DP for every ``delta``, and ``mu``-GDP
mechanisms compose to ``sqrt(sum mu_i^2)``-GDP. Each step whose share is
``mu_i`` is given ``epsilon = eps(mu_i, delta_i)`` at its own ``delta_i``.

This is only a budgeting aid: the search's reported epsilon is always the
dp-accounting accountant's epsilon of the composed ``dp_event_`` of what
was fitted, and the search checks it against the budget before it releases
anything. skdp's mechanisms (Poisson-subsampled Gaussians, one-off Gaussian
releases) compose at least as well as GDP predicts (measured: 8 DP-SGD fits
each calibrated to ``eps(mu / sqrt(8), 1e-5)`` compose to 0.978--0.998 for a
budget of 1), so the check passes in practice; when it does not, the fits
are redone with a smaller share.

The search's ``delta`` must also hold the stability deltas of steps that
choose categories without candidates; :func:`stability_delta_bounds` bounds
them from the steps' parameters, before anything is fitted.
"""

import math

import numpy as np
from scipy import optimize, stats
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import FeatureUnion, Pipeline

from ..privacy._accounting import gdp_mu

__all__ = [
    "gdp_epsilon",
    "leaf_steps",
    "private_steps",
    "set_step_budgets",
    "stability_delta_bounds",
    "step_weights",
]


def gdp_epsilon(mu, delta):
    """Epsilon at which a ``mu``-GDP mechanism is ``(epsilon, delta)``-DP.

    Inverse of :func:`skdp.privacy._accounting.gdp_mu`: solves
    ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` for eps
    (0 when the mechanism is already ``(0, delta)``-DP).

    Examples
    --------
    >>> from skdp.model_selection._budget import gdp_epsilon
    >>> from skdp.privacy._accounting import gdp_mu
    >>> round(gdp_epsilon(gdp_mu(1.0, 1e-5), 1e-5), 6)
    1.0
    """
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu!r}.")
    norm = stats.norm

    def excess(eps):
        second = math.exp(min(eps + norm.logcdf(-eps / mu - mu / 2), 700.0))
        return norm.cdf(-eps / mu + mu / 2) - second - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
        if hi > 1e4:
            raise ValueError(f"mu={mu} is too large to express as an epsilon at delta={delta}.")
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def _children(estimator):
    """``(name, child)`` pairs of a composite scikit-learn estimator."""
    if isinstance(estimator, Pipeline):
        return list(estimator.steps)
    if isinstance(estimator, ColumnTransformer):
        return [(name, step) for name, step, _ in estimator.transformers]
    if isinstance(estimator, FeatureUnion):
        return list(estimator.transformer_list)
    return None


def _is_skdp(estimator):
    """skdp's own steps, or a step whose class opts in with
    ``__skdp_private__ = True`` (it must then report ``dp_event_``,
    ``epsilon_`` and ``delta_`` after ``fit``, as skdp steps do)."""
    return (type(estimator).__module__.split(".")[0] == "skdp"
            or getattr(type(estimator), "__skdp_private__", False) is True)


def _spends(step):
    """Whether fitting ``step`` reads the private data (known public set-ups
    of skdp's preprocessing steps spend nothing)."""
    name = type(step).__name__
    params = step.get_params(deep=False)
    if name == "DPOneHotEncoder" and not isinstance(params.get("categories"), str):
        return False
    if name == "DPMinMaxScaler" and params.get("bounds") is not None:
        return False
    return True


def leaf_steps(estimator, prefix=""):
    """``(path, step)`` of every leaf step of an unfitted ``estimator``.

    ``path`` is the scikit-learn parameter prefix of the step (``"clf"``,
    ``"pre__num"``; ``""`` for a bare estimator). Nested ``Pipeline``,
    ``ColumnTransformer`` and ``FeatureUnion`` are walked; ``"drop"`` and
    ``"passthrough"`` are skipped.
    """
    if estimator is None or isinstance(estimator, str):
        return []
    children = _children(estimator)
    if children is None:
        return [(prefix, estimator)]
    found = []
    for name, child in children:
        found.extend(leaf_steps(child, f"{prefix}__{name}" if prefix else name))
    return found


def private_steps(estimator, prefix=""):
    """``(path, step)`` of every unfitted skdp step of ``estimator`` that
    spends privacy and whose budget is its ``epsilon`` parameter.

    Paths and walk as in :func:`leaf_steps`. Steps that read nothing from
    the data (``DPOneHotEncoder`` with public categories, ``DPMinMaxScaler``
    with public bounds) are left out.
    """
    return [
        (path, step) for path, step in leaf_steps(estimator, prefix)
        if _is_skdp(step) and "epsilon" in step.get_params(deep=False) and _spends(step)
    ]


def _selects_categories(step):
    """A ``DPOneHotEncoder`` that chooses its categories privately without
    candidates (a thresholded histogram with a stability delta)."""
    params = step.get_params(deep=False)
    return (type(step).__name__ == "DPOneHotEncoder" and params.get("categories") == "private"
            and params.get("candidate_categories") is None and params.get("epsilon") is not None)


def stability_delta_bounds(estimator):
    """``(path, bound)`` of the steps whose fit adds a stability delta.

    A :class:`~skdp.preprocessing.DPOneHotEncoder` that chooses its
    categories without candidates may release a category that only one
    record holds, with probability ``selection_delta_ = delta / (2
    exp(epsilon))``; ``bound`` is ``delta / 2``, which holds for every
    epsilon a search can give it. Other steps add none.

    Examples
    --------
    >>> from sklearn.pipeline import Pipeline
    >>> from skdp import DPSGDClassifier
    >>> from skdp.model_selection._budget import stability_delta_bounds
    >>> from skdp.preprocessing import DPOneHotEncoder
    >>> pipe = Pipeline([("enc", DPOneHotEncoder(delta=1e-8)), ("clf", DPSGDClassifier())])
    >>> stability_delta_bounds(pipe)
    [('enc', 5e-09)]
    """
    return [(path, float(step.get_params(deep=False)["delta"]) / 2.0)
            for path, step in leaf_steps(estimator) if _selects_categories(step)]


def _param(path, name):
    return f"{path}__{name}" if path else name


def step_weights(steps, step_shares=None):
    """Relative shares (summing to 1, in GDP ``mu^2``) of the private steps.

    Without ``step_shares``, each step's configured ``(epsilon, delta)`` sets
    its weight ``gdp_mu(epsilon, delta)^2``: the search rescales the
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


def set_step_budgets(estimator, steps, weights, mu):
    """Give each private step of ``estimator`` its share of a ``mu``-GDP budget.

    Step ``i`` gets ``epsilon = gdp_epsilon(mu * sqrt(weights[i]), delta_i)``
    at its own ``delta_i``. Returns the ``{param: epsilon}`` that were set.
    """
    values = {}
    for (path, step), weight in zip(steps, weights):
        delta = float(step.get_params(deep=False).get("delta", 1e-5))
        values[_param(path, "epsilon")] = gdp_epsilon(mu * math.sqrt(weight), delta)
    if values:
        estimator.set_params(**values)
    return values
