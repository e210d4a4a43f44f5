"""``warm_start=True``: continue from the previous fit, and compose both
fits' privacy."""

import math
from dataclasses import replace

import numpy as np
import torch

from ..privacy import compose_reports
from .state import PreviousFit

__all__ = ["WarmStartMixin"]


class WarmStartMixin:
    """Warm starts of the estimators trained by the fit sequence.

    The previous fit's parameters are loaded into the new model (only the
    model: an algorithm's other state starts afresh), and the fitted privacy
    attributes compose both fits' events (:func:`~skdp.privacy.compose_reports`):
    in the worst case both fits saw the same records. A fit about units after
    one about records (or the reverse) is refused before it spends anything.
    Subclasses turn their fitted ``coef_``/``intercept_`` back into backend
    weights with :meth:`_linear_weights`.
    """

    def _previous_fit(self):
        """What ``warm_start=True`` continues from, or None.

        None unless ``warm_start`` is set and the estimator is fitted;
        otherwise a snapshot of the fitted parameters and privacy report,
        and of the attributes that validating the new data overwrites (put
        back by :meth:`_check_warm_start` when the data does not match).
        """
        if not self.warm_start or not hasattr(self, "privacy_report_"):
            return None
        keep = ("n_features_in_", "feature_names_in_", "classes_", "groups_")
        report = self.privacy_report_
        return PreviousFit(
            report=report,
            # a model released outside the accountant (epsilon_ inf) is not private
            private=report.private and math.isfinite(self.epsilon_),
            coef=None if getattr(self, "coef_", None) is None else np.array(self.coef_),
            intercept=(None if getattr(self, "intercept_", None) is None
                       else np.array(self.intercept_)),
            module_state=getattr(self, "module_state_", None),
            attributes={k: getattr(self, k) for k in keep if hasattr(self, k)},
        )

    def _check_warm_start(self, previous, unit_ids=None):
        """A ValueError when the new data does not continue ``previous``:
        other features (count) or other classes, or a privacy unit that does
        not compose with the previous fit's (``unit_ids`` given to one fit
        and not the other, :func:`~skdp.privacy.check_same_privacy_unit`),
        refused before anything is spent. The previous fitted attributes are
        put back first, so the fitted estimator stays usable."""
        if previous is None:
            return
        before = previous.attributes
        problem = None
        if self.n_features_in_ != before["n_features_in_"]:
            problem = (f"X has {self.n_features_in_} features, but {type(self).__name__} was "
                       f"fitted with {before['n_features_in_']} features")
        elif "classes_" in before and not np.array_equal(
                np.asarray(getattr(self, "classes_", [])), np.asarray(before["classes_"])):
            problem = (f"y has the classes {list(self.classes_)}, but {type(self).__name__} "
                       f"was fitted with the classes {list(before['classes_'])}")
        elif previous.private and (previous.report.privacy_unit == "record") != (
                unit_ids is None):
            problem = ("the previous fit was about "
                       + ("records (no unit_ids)" if unit_ids is not None else
                          f"{previous.report.privacy_unit} (unit_ids)")
                       + ", this one about "
                       + ("units (unit_ids)" if unit_ids is not None else "records (no unit_ids)")
                       + "; their epsilons do not compose (see "
                       "skdp.privacy.check_same_privacy_unit)")
        if problem is None:
            return
        for name in ("feature_names_in_", "classes_", "groups_"):
            self.__dict__.pop(name, None)
        self.__dict__.update(before)
        raise ValueError(
            f"warm_start=True continues the previous fit, so the data must match it: "
            f"{problem}. Use warm_start=False (or a fresh estimator) to train on this data."
        )

    def _load_previous(self, backend, state):
        """With ``warm_start``, put the previous fit's parameters into the
        model (or, without a backend, into ``state.initial_weights``) so that
        training continues from them. Only the model parameters carry over:
        an algorithm's other state (dual variables, optimizer moments) starts
        afresh."""
        previous = state.previous
        state.initial_weights = None
        if previous is None:
            return
        linear = previous.module_state is None
        if linear != self._is_linear:
            raise ValueError(
                "warm_start=True continues the previous model, but it was "
                f"{'linear' if linear else 'a torch module'} and the parameters now ask for "
                f"{'a linear model' if self._is_linear else 'a torch module'}; keep "
                "hidden_layer_sizes and module, or use warm_start=False."
            )
        if linear:
            weights = self._linear_weights(previous.coef, previous.intercept)
            if backend is None:
                state.initial_weights = weights
                return
            with torch.no_grad():
                backend.weights.copy_(torch.as_tensor(weights, dtype=backend.weights.dtype))
            return
        parameters = {k: torch.as_tensor(v) for k, v in previous.module_state.items()}
        try:
            backend.module.load_state_dict(parameters)
        except RuntimeError as exc:
            raise ValueError(
                f"warm_start=True cannot load the previous module's parameters ({exc}); keep "
                "hidden_layer_sizes and module, or use warm_start=False."
            ) from exc

    def _linear_weights(self, coef, intercept):
        """The backend's weight matrix (bias last) of ``coef_`` and
        ``intercept_``: the inverse of ``_set_linear_params`` (subclasses)."""
        raise NotImplementedError

    def _compose_with_previous(self, previous):
        """With ``warm_start``, the fitted privacy attributes of both fits
        together (:func:`~skdp.privacy.compose_reports`): ``dp_event_`` the
        composition of the previous and the new event, ``epsilon_`` the
        accountant's for it. Composition assumes the worst case, that both
        fits saw the same records."""
        if previous is None:
            return
        report = self.privacy_report_
        outside = report.private and not math.isfinite(self.epsilon_)
        earlier = previous.report if previous.private else replace(previous.report, dp_event=None)
        self._store_privacy_report(compose_reports(earlier, report), delta=self.delta_)
        if outside:  # the new model was chosen outside the accountant
            self.epsilon_ = np.inf
