"""Record weights: ``sample_weight``, class weights and unit factors, each a
factor in [0, 1] on a record's clipped contributions (no sensitivity
changes)."""

import warnings

import numpy as np
import torch
from sklearn.utils.validation import _check_sample_weight

from ..privacy import record_weight_factors

__all__ = ["RecordWeightsMixin"]


class RecordWeightsMixin:
    """``sample_weight`` validated and bounded, and each record's factor.

    Reads ``max_sample_weight``; a classifier gives its class factors
    through :meth:`_class_factors`.
    """

    def _validated_sample_weight(self, sample_weight, X, y_codes=None):
        """``sample_weight`` validated and clipped to ``max_sample_weight``.

        None stays None. Otherwise scikit-learn's ``_check_sample_weight``:
        one finite, non-negative weight per row of ``X``, not all zero (each
        error names ``sample_weight``); with ``y_codes`` (classifiers), at
        least two classes must keep a positive weight (checked before
        anything is spent; one record can decide it, so the error is a
        diagnostic for the data owner and names no count). Weights above
        ``max_sample_weight`` are clipped to it, with a UserWarning that
        says so but not how many: the warning depends on the weights, so it
        is a non-private diagnostic for whoever runs ``fit`` (the data
        owner); it is emitted before training and nothing of it reaches the
        fitted estimator (see :ref:`privacy-sample-weights`).
        """
        if sample_weight is None:
            return None
        weights = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                       ensure_non_negative=True, copy=True)
        bound = float(self.max_sample_weight)
        if (weights > bound).any():
            warnings.warn(
                f"Some sample weights exceed max_sample_weight={bound:g}; they were clipped "
                "to it. Raise max_sample_weight to the largest weight you need (the privacy "
                "guarantee does not depend on it: each record's contribution is scaled by "
                "weight / max_sample_weight), or rescale the weights.",
                UserWarning,
            )
            weights = np.minimum(weights, bound)
        if y_codes is not None:
            kept = np.unique(y_codes[weights > 0])
            if kept.size < 2:
                raise ValueError(
                    f"sample_weight is zero for every sample but those of one class "
                    f"({self.classes_[kept[0]]!r}); {type(self).__name__} needs samples of "
                    "at least 2 classes with positive weight."
                )
        return weights

    def _weigh_records(self, backend, state, report, generator, X_t):
        """Set ``state.record_weights``: the factor of each record, or None.

        The factor is ``min(w_i, max_sample_weight) / max_sample_weight``
        (:func:`~skdp.privacy.record_weight_factors`; ``w_i = 1`` without
        ``sample_weight``) times the record's class factor
        (:meth:`_class_factors`, classifiers). It multiplies each record's clipped
        contribution, so no sensitivity changes. The backend (when there is
        one) applies it to every clipped gradient sum. None -- the
        unweighted code path, bit for bit -- without ``sample_weight`` and
        ``class_weight`` at ``max_sample_weight=1`` and without units.
        With units (``state.units``) it is also multiplied by the unit factor
        ``1 / min(|u|, max_records_per_unit)`` (0 for a record the unit did
        not keep), so a whole unit moves each sum by at most one record's
        bound.
        """
        weights = state.sample_weight
        classes = self._class_factors(state, report, generator)
        bound = float(self.max_sample_weight)
        units = state.units
        state.record_weights = None
        if weights is None and classes is None and bound == 1.0 and units is None:
            return
        values = torch.ones(X_t.shape[0], dtype=torch.float64)
        if weights is not None:
            values = torch.as_tensor(weights, dtype=torch.float64)
        factors = record_weight_factors(values, bound)
        if classes is not None:
            factors = factors * torch.as_tensor(classes[state.y_codes], dtype=torch.float64)
        if units is not None:  # a unit's factors sum to at most 1
            factors = factors * torch.as_tensor(units.factors, dtype=torch.float64)
        state.record_weights = factors.to(device=X_t.device, dtype=X_t.dtype)
        if backend is not None:
            backend.record_weights = state.record_weights

    def _class_factors(self, state, report, generator):
        """Per-class weight factors in (0, 1], or None (hook; none by
        default, see :class:`~skdp._fit.classifier.BaseDPClassifier`)."""
        return None
