"""Regressors: targets scaled for clipped gradients, and predictions in the
units of ``y``."""

from numbers import Real

import numpy as np
from sklearn.base import RegressorMixin

from .releases import TargetScale
from .rows import linear_scores
from .template import BaseDPEstimator

__all__ = ["BaseDPRegressor"]


class BaseDPRegressor(RegressorMixin, BaseDPEstimator):
    """Base class for skdp regressors trained with a private torch loop.

    Adds what regression needs on top of :class:`BaseDPEstimator`: target
    validation, the target scaling that keeps the squared loss's clipped
    gradients useful (public ``y_bounds``, or a private power-of-two scale
    bought with a small share of the budget: the
    :class:`~skdp._fit.releases.TargetScale` release), and prediction in the
    units of ``y``.

    The model is trained on ``(y - y_offset_) / y_scale_``; ``coef_``,
    ``intercept_`` and predictions are mapped back, so they are in the
    units of ``y``.
    """

    _released_attributes = BaseDPEstimator._released_attributes | {"y_scale_", "y_offset_"}

    _parameter_constraints = {
        **BaseDPEstimator._parameter_constraints,
        "y_bounds": [tuple, list, None],
    }

    #: The one-off release of a private regressor's fit: the target scale,
    #: without public ``y_bounds`` (before training).
    _fit_releases = (TargetScale(),)

    def _n_model_outputs(self):
        return 1

    # ------------------------------------------------------------------ fit
    def _validate_regression_data(self, X, y):
        """Validate X and y (numeric, finite, 1-D); return float arrays."""
        try:
            X, y = self._validated_X_y(self, X, y, y_numeric=True)
        except ValueError as exc:
            if "Input y contains" in str(exc):
                raise ValueError(
                    f"y must be finite: {exc}. Drop or impute the rows with missing or "
                    "infinite targets before fitting."
                ) from exc
            raise
        y = np.asarray(y, dtype=np.float64)
        if np.abs(y).max(initial=0.0) > np.finfo(np.float32).max:
            raise ValueError(
                "y has values too large for float32 training (|y| > 3.4e38); rescale the "
                "targets first."
            )
        self._check_y_bounds()
        return X, y

    def _check_y_bounds(self):
        bounds = self.y_bounds
        if bounds is None:
            return None
        if len(bounds) != 2 or not all(isinstance(b, Real) for b in bounds):
            raise ValueError(
                f"y_bounds must be a pair (low, high) of numbers or None; got {bounds!r}."
            )
        low, high = float(bounds[0]), float(bounds[1])
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(
                f"y_bounds must be finite with low < high; got {bounds!r}. They are public "
                "bounds on the target (e.g. from the target's definition), not the range "
                "seen in the data."
            )
        return low, high

    def _scale_targets(self, y, report, generator, device, weights=None):
        """Set ``y_offset_``/``y_scale_`` and return the scaled targets.

        With ``y_bounds=(low, high)``: y is clipped to the bounds and mapped
        to [-1, 1] (no budget spent). Otherwise ``y_scale_`` is the private
        power of two of the :class:`~skdp._fit.releases.TargetScale` release
        and ``y_offset_`` is 0. ``weights`` (the unit factors of a fit with
        units, or None) weigh each record's histogram row, so that a unit
        adds at most 1.
        """
        bounds = self._check_y_bounds()
        if bounds is not None:
            low, high = bounds
            self.y_offset_ = (low + high) / 2.0
            self.y_scale_ = (high - low) / 2.0
            return (np.clip(y, low, high) - self.y_offset_) / self.y_scale_
        scale, decided = self._fit_release(TargetScale).scale(y, report, generator, device,
                                                                weights)
        if not decided and self.verbose:
            print(
                f"[{type(self).__name__}] no bin of the private target histogram stands "
                "out from its noise; give y_bounds for a reliable target scale"
            )
        self.y_offset_ = 0.0
        self.y_scale_ = scale
        return y / self.y_scale_

    def _set_linear_params(self, weights):
        self.coef_ = weights[0, :-1] * self.y_scale_
        self.intercept_ = float(weights[0, -1] * self.y_scale_ + self.y_offset_)

    def _linear_weights(self, coef, intercept):
        """The weights (bias last) of ``coef_`` and ``intercept_`` on the
        scaled targets of this fit (``y_scale_`` and ``y_offset_``)."""
        coef = np.asarray(coef, dtype=np.float64).reshape(-1) / self.y_scale_
        bias = (float(np.asarray(intercept).reshape(-1)[0]) - self.y_offset_) / self.y_scale_
        return np.concatenate([coef, [bias]])[None, :]

    # -------------------------------------------------------------- predict
    def predict(self, X):
        """Predicted targets for ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        X = self._validate_predict_X(X)
        if self.module_state_ is None:
            return linear_scores(X, self.coef_, self.intercept_)
        return self._module_outputs(X)[:, 0] * self.y_scale_ + self.y_offset_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # DP noise and clipping can cost accuracy on the tiny data sets the
        # generic checks use.
        tags.regressor_tags.poor_score = True
        return tags
