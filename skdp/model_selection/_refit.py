"""Refit rules for ``GridSearchCV(refit=...)`` that trade accuracy for fairness."""

import warnings
from numbers import Real

import numpy as np

from ..exceptions import SelectionWarning
from ._selection import NOISE_ADVICE, NOISE_MARGIN

__all__ = ["best_within"]


class _BestWithin:
    """Callable ``cv_results_ -> index`` built by :func:`best_within`.

    A class rather than a closure so that a search using it can be pickled.
    """

    def __init__(self, fairness, bound, score, greater_is_better):
        self.fairness = fairness
        self.bound = bound
        self.score = score
        self.greater_is_better = greater_is_better

    def __repr__(self):
        extra = ", greater_is_better=True" if self.greater_is_better else ""
        return (
            f"best_within({self.fairness!r}, {self.bound!r}, score={self.score!r}{extra})"
        )

    def _column(self, cv_results, scorer_name, argument):
        key = f"mean_test_{scorer_name}"
        if key not in cv_results:
            available = sorted(
                k[len("mean_test_"):] for k in cv_results if k.startswith("mean_test_")
            )
            raise ValueError(
                f"{argument}={scorer_name!r}: cv_results_ has no {key!r}. Use a key of "
                f"GridSearchCV's scoring dict; the scorers found are {available}."
            )
        return np.asarray(cv_results[key], dtype=np.float64)

    def _fairness_values(self, cv_results):
        """(score, fairness value: the gap, or the fairness score with
        greater_is_better) columns of ``cv_results``."""
        score = self._column(cv_results, self.score, "score")
        stored = self._column(cv_results, self.fairness, "fairness")
        return score, (stored if self.greater_is_better else -stored)

    def within_noise(self, cv_results, score_noise, chosen):
        """A message when the rule's choice ``chosen`` on noisy scores is
        decided by their noise, else None.

        Used by the private searches, whose ``cv_results_`` hold noisy
        scores; ``score_noise`` maps scorer names to their noise
        (``.std`` per candidate and ``.difference_std(i, j)``). The choice is
        within the noise when a candidate whose side of the bound could
        change it is within ``NOISE_MARGIN`` noise standard deviations of the
        bound (the chosen candidate itself, or one with a better score, or
        any when none qualified), or when the chosen candidate's score beats
        the best other qualifying candidate's by less than the noise of
        their difference. Released values and public noise scales only:
        post-processing, no privacy cost.
        """
        score, value = self._fairness_values(cv_results)
        params = cv_results["params"]
        std_fair = np.asarray(score_noise[self.fairness].std, dtype=np.float64)
        noise_score = score_noise[self.score]
        valid = ~np.isnan(score) & ~np.isnan(value)
        qualifies = valid & ((value >= self.bound) if self.greater_is_better
                             else (value <= self.bound))
        near = valid & (np.abs(value - self.bound) < NOISE_MARGIN * std_fair)
        label = "score" if self.greater_is_better else "gap"
        uncertain = [k for k in np.flatnonzero(near)
                     if k == chosen or (not qualifies[k]
                                        and (score[k] > score[chosen] or not qualifies[chosen]))]
        parts = [
            f"candidate {params[k]} ({self.fairness} {label} {value[k]:.4g}, noise std "
            f"{std_fair[k]:.3g}; {self.score} {score[k]:.4g})"
            for k in uncertain
        ]
        reasons = []
        if parts:
            which = "this candidate is on" if len(parts) == 1 else "these candidates are on"
            reasons.append(
                f"which side of the bound {self.bound:g} {which} is within the noise, and "
                f"decides the choice: {'; '.join(parts)}"
            )
        if qualifies[chosen]:
            others = [k for k in np.flatnonzero(qualifies) if k != chosen]
            if others:
                runner_up = max(others, key=lambda k: (score[k], -k))
                gap = score[chosen] - score[runner_up]
                spread = noise_score.difference_std(chosen, runner_up)
                if gap < NOISE_MARGIN * spread:
                    reasons.append(
                        f"among the candidates within the bound, the runner-up "
                        f"{params[runner_up]} has a noisy {self.score} of "
                        f"{score[runner_up]:.4g} against {score[chosen]:.4g}: a difference of "
                        f"{gap:.3g}, below the noise std of the difference, {spread:.3g}"
                    )
        if not reasons:
            return None
        return (
            f"The choice of {self!r} is within the selection noise: it chose candidate "
            f"{params[chosen]} (noisy {self.score} {score[chosen]:.4g}, noise std "
            f"{noise_score.std[chosen]:.3g}; {self.fairness} {label} {value[chosen]:.4g}, "
            f"noise std {std_fair[chosen]:.3g}), but " + "; and ".join(reasons) + ". "
            + NOISE_ADVICE
        )

    def __call__(self, cv_results):
        score = self._column(cv_results, self.score, "score")
        stored = self._column(cv_results, self.fairness, "fairness")
        if self.greater_is_better:
            # The stored value is a fairness score (higher is fairer).
            fairness_value, qualifies = stored, stored >= self.bound
            relation, label = ">=", "score"
        else:
            if np.any(stored > 0):
                raise ValueError(
                    f"mean_test_{self.fairness} has positive values, so it does not hold "
                    "negated gaps: a scorer with greater_is_better=False stores -gap <= 0. "
                    "If it was made with sklearn.metrics.make_scorer(...) and its default "
                    "greater_is_better=True, rebuild it with greater_is_better=False (or use "
                    "skdp.metrics.get_fairness_scorer); if higher values are fairer, pass "
                    "greater_is_better=True to best_within."
                )
            fairness_value, qualifies = -stored, -stored <= self.bound
            relation, label = "<=", "gap"
        valid = ~np.isnan(score) & ~np.isnan(fairness_value)
        if not valid.any():
            raise ValueError(
                f"Every candidate has a NaN mean_test_{self.score} or mean_test_{self.fairness} "
                "(did every fit fail?); there is nothing to refit."
            )
        qualifies &= valid
        # Sort key: primary first; np.lexsort sorts by its last key first.
        fairer = -fairness_value if self.greater_is_better else fairness_value
        if qualifies.any():
            candidates = np.flatnonzero(qualifies)
            order = np.lexsort((fairer[candidates], -score[candidates]))
            return int(candidates[order[0]])
        candidates = np.flatnonzero(valid)
        order = np.lexsort((-score[candidates], fairer[candidates]))
        best = int(candidates[order[0]])
        warnings.warn(
            f"No candidate has a mean {self.fairness} {label} {relation} {self.bound:g}; the "
            f"fairest one ({label} {fairness_value[best]:.4g}, candidate {best}) is refitted "
            "instead. Loosen the bound or widen the search.",
            SelectionWarning,
        )
        return best


def best_within(fairness, bound, *, score="accuracy", greater_is_better=False):
    """Refit rule: the most accurate candidate whose fairness gap is within a bound.

    Returns a callable for ``GridSearchCV(refit=...)`` (or
    ``RandomizedSearchCV``). Given ``cv_results_`` it returns the index of the
    candidate with the highest ``mean_test_<score>`` among those whose mean
    fairness gap is at most ``bound``. If no candidate qualifies, it returns
    the candidate with the smallest gap and warns.

    Sign rule: scikit-learn stores the score of a scorer made with
    ``greater_is_better=False`` negated. ``greater_is_better`` here is the
    flag the fairness scorer was made with:

    * ``False`` (default; every gap scorer of
      :func:`skdp.metrics.get_fairness_scorer`): ``mean_test_<fairness>``
      holds ``-gap`` and a candidate qualifies when
      ``-mean_test_<fairness> <= bound``. Positive stored values cannot be
      negated gaps and raise a ValueError (the usual cause is a scorer from
      ``sklearn.metrics.make_scorer`` left at ``greater_is_better=True``).
    * ``True`` (a fairness *score* where higher is fairer, such as
      ``worst_group_accuracy``): a candidate qualifies when
      ``mean_test_<fairness> >= bound``, and the fallback is the candidate
      with the highest value.

    Ties in score go to the fairer candidate, then to the lower index.
    Candidates with NaN scores (failed fits) are ignored.

    Parameters
    ----------
    fairness : str
        Key of the fairness scorer in ``GridSearchCV``'s ``scoring`` dict.
    bound : float
        Largest acceptable mean gap (or, with ``greater_is_better=True``,
        smallest acceptable mean fairness score).
    score : str, default="accuracy"
        Key of the scorer to maximise in the ``scoring`` dict.
    greater_is_better : bool, default=False
        Whether the fairness scorer was made with ``greater_is_better=True``.

    Returns
    -------
    refit : callable
        ``refit(cv_results) -> int``, picklable.

    Notes
    -----
    As with any callable ``refit``, scikit-learn sets ``best_index_``,
    ``best_params_`` and ``best_estimator_`` but not ``best_score_``, and
    ``search.score`` is not available for multi-metric scoring; score
    ``search.best_estimator_`` with the scorers directly.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skdp.metrics import get_fairness_scorer
    >>> from skdp.model_selection import best_within
    >>> rng = np.random.RandomState(0)
    >>> group = rng.randint(2, size=200)
    >>> X = np.column_stack([rng.normal(size=200) + group, group])
    >>> y = (X[:, 0] + rng.normal(size=200) > 0.5).astype(int)
    >>> search = GridSearchCV(
    ...     LogisticRegression(),
    ...     {"C": [0.01, 1.0]},
    ...     scoring={"accuracy": "accuracy",
    ...              "dpd": get_fairness_scorer("demographic_parity_difference",
    ...                                         sensitive_column=1)},
    ...     refit=best_within("dpd", 0.5),
    ...     cv=3,
    ... ).fit(X, y)
    >>> bool(-search.cv_results_["mean_test_dpd"][search.best_index_] <= 0.5)
    True

    The rule can be tried on a hand-made ``cv_results_``:

    >>> rule = best_within("dpd", 0.1, score="acc")
    >>> rule({"mean_test_acc": [0.9, 0.8, 0.7], "mean_test_dpd": [-0.3, -0.05, -0.01]})
    1
    """
    if not isinstance(fairness, str) or not isinstance(score, str):
        raise ValueError(
            "fairness and score must be keys (str) of GridSearchCV's scoring dict; got "
            f"fairness={fairness!r}, score={score!r}."
        )
    if isinstance(bound, bool) or not isinstance(bound, Real) or not np.isfinite(bound):
        raise ValueError(f"bound must be a finite number; got {bound!r}.")
    if not greater_is_better and bound < 0:
        raise ValueError(
            f"bound={bound!r} is negative, but fairness gaps are >= 0, so no candidate could "
            "qualify; pass a bound >= 0."
        )
    return _BestWithin(fairness, float(bound), score, bool(greater_is_better))
