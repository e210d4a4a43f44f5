"""Model backends: parameters, forward pass and clipped gradient sums.

A trainer talks to a backend only; the backend chooses the per-sample
gradient path. :class:`LinearBackend` keeps one ``(n_classes, n_features + 1)``
weight matrix (bias in the last column) and uses the closed form;
:class:`ModuleBackend` wraps any ``torch.nn.Module`` and uses ``torch.func``.

Both may hold ``record_weights``: the factors ``w_i / max_sample_weight`` in
[0, 1] of a weighted fit (:func:`skdp.privacy.record_weight_factors`), one
per row. Every clipped gradient sum then multiplies each record's clipped
gradient by its factor (clip, then weight), so trainers get sample weights
without knowing about them and every sensitivity stays the clipping bound.
With ``record_weights=None`` (the default) the unweighted code runs.
"""

import torch

from ..privacy import clipped_linear_sum, clipped_module_sum
from ..privacy._clipping import (
    clip_factors,
    clipped_linear_diff_sum,
    clipped_module_diff_sum,
    weighted_clipped_module_sum,
)


class _RecordWeights:
    """The per-record weight factors a backend applies to its clipped sums."""

    #: Factors in [0, 1], one per row, or None (unweighted).
    record_weights = None

    def batch_weights(self, idx, weights=None):
        """The record weights of rows ``idx``, times ``weights`` when given;
        ``weights`` itself when the backend holds no record weights."""
        if self.record_weights is None:
            return weights
        own = self.record_weights.index_select(0, idx)
        return own if weights is None else weights * own.to(weights.dtype)


class LinearBackend(_RecordWeights):
    """Linear/softmax model ``logits = [x, 1] @ weights.T`` on a fixed dataset.

    Parameters
    ----------
    X : torch.Tensor of shape (n_samples, n_features)
    n_outputs : int
    """

    def __init__(self, X, n_outputs):
        ones = torch.ones((X.shape[0], 1), dtype=X.dtype, device=X.device)
        self._rows = torch.cat([X, ones], dim=1)
        self._sq_norms = self._rows.square().sum(1)
        self.weights = torch.zeros(
            (n_outputs, self._rows.shape[1]), dtype=X.dtype, device=X.device
        )
        self.parameters = [self.weights]

    def forward(self, idx):
        """Return ``(batch, logits_t)`` for the rows ``idx``; logits class-major."""
        batch = self._rows.index_select(0, idx)
        return batch, self.weights @ batch.T

    def clipped_grad_sum(self, idx, batch, logits_t, head, targets_t, max_norm):
        """Clipped per-sample gradient sum (list aligned with ``parameters``).

        ``targets_t`` are class-major per-sample tensors (n_classes, batch).
        With ``record_weights``, each clipped gradient is multiplied by its
        record's factor.
        """
        if self.record_weights is not None:
            return self.clipped_weighted_grad_sum(idx, batch, logits_t, head, targets_t, None,
                                                  max_norm)
        out_grad = head.output_grad(logits_t, *targets_t)
        total, sq_norms = clipped_linear_sum(
            batch, out_grad, max_norm, input_sq_norms=self._sq_norms.index_select(0, idx)
        )
        return [total], sq_norms

    def forward_at(self, batch, params):
        """Class-major logits of ``batch`` (from :meth:`forward`) under other
        ``params`` (a list aligned with ``parameters``)."""
        return params[0] @ batch.T

    def clipped_weighted_grad_sum(self, idx, batch, logits_t, head, targets_t, weights,
                                  max_norm):
        """``sum_i w_i clip(g_i, max_norm)`` (clip, then weight): the norms
        are those of the unweighted per-sample gradients ``|e_i| |x_i|``, in
        closed form; one record moves the sum by at most ``max(w) max_norm``.
        The backend's ``record_weights`` multiply ``weights`` (or replace
        them when None).
        """
        weights = self.batch_weights(idx, weights)
        out_grad = head.output_grad(logits_t, *targets_t)
        sq_norms = (out_grad * out_grad).sum(0) * self._sq_norms.index_select(0, idx)
        factors = clip_factors(sq_norms, max_norm) * weights.to(out_grad.dtype)
        scaled = (out_grad * factors).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        return [scaled @ batch], sq_norms

    def clipped_grad_diff_sum(self, idx, batch, previous, head, targets_t, previous_targets_t,
                              max_norm, *, inner_norm=None, logits_t=None,
                              previous_logits_t=None, weights=None, previous_weights=None):
        """Clipped sum of per-sample gradient differences between the current
        parameters and ``previous`` (list aligned with ``parameters``) on the
        same batch; with ``weights``, each gradient is clipped to
        ``inner_norm`` *then* weighted (the backend's ``record_weights``
        multiply both sides); see
        :func:`skdp.privacy._clipping.clipped_linear_diff_sum`.
        """
        weights = self.batch_weights(idx, weights)
        previous_weights = self.batch_weights(idx, previous_weights)
        if logits_t is None:
            logits_t = self.weights @ batch.T
        if previous_logits_t is None:
            previous_logits_t = previous[0] @ batch.T
        total, sq_norms = clipped_linear_diff_sum(
            batch, head.output_grad(logits_t, *targets_t),
            head.output_grad(previous_logits_t, *previous_targets_t), max_norm,
            inner_norm=inner_norm, input_sq_norms=self._sq_norms.index_select(0, idx),
            weights=weights, previous_weights=previous_weights,
        )
        return [total], sq_norms

    def predict_logits(self, X):
        return X @ self.weights[:, :-1].T + self.weights[:, -1]

    def state(self):
        return {"weights": self.weights.detach().cpu().numpy().astype("float64")}


class ModuleBackend(_RecordWeights):
    """Any ``torch.nn.Module`` mapping a batch of rows to logits."""

    def __init__(self, X, module):
        self.inputs = X
        self.module = module.to(device=X.device, dtype=X.dtype)
        self.parameters = [p for p in self.module.parameters() if p.requires_grad]
        self._names = [n for n, p in self.module.named_parameters() if p.requires_grad]

    def forward(self, idx):
        batch = self.inputs.index_select(0, idx)
        with torch.no_grad():
            return batch, self.module(batch).T.contiguous()

    def clipped_grad_sum(self, idx, batch, logits_t, head, targets_t, max_norm):
        if self.record_weights is not None:
            return self.clipped_weighted_grad_sum(idx, batch, logits_t, head, targets_t, None,
                                                  max_norm)
        sums, sq_norms = clipped_module_sum(
            self.module, head.loss, batch, *(t.T for t in targets_t), max_norm=max_norm
        )
        return [sums[name] for name in self._names], sq_norms

    def forward_at(self, batch, params):
        """Class-major outputs of ``batch`` under other ``params`` (list
        aligned with ``parameters``)."""
        named = dict(zip(self._names, params))
        with torch.no_grad():
            return torch.func.functional_call(self.module, named, (batch,)).T.contiguous()

    def clipped_weighted_grad_sum(self, idx, batch, logits_t, head, targets_t, weights,
                                  max_norm):
        """``sum_i w_i clip(g_i, max_norm)`` (clip, then weight; ``torch.func``);
        see :func:`skdp.privacy._clipping.weighted_clipped_module_sum`; the
        backend's ``record_weights`` multiply ``weights``."""
        weights = self.batch_weights(idx, weights)
        sums, sq_norms = weighted_clipped_module_sum(
            self.module, head.loss, batch, [t.T for t in targets_t], weights, max_norm=max_norm
        )
        return [sums[name] for name in self._names], sq_norms

    def clipped_grad_diff_sum(self, idx, batch, previous, head, targets_t, previous_targets_t,
                              max_norm, *, inner_norm=None, logits_t=None,
                              previous_logits_t=None, weights=None, previous_weights=None):
        """Clipped sum of per-sample gradient differences (``torch.func``);
        see :func:`skdp.privacy._clipping.clipped_module_diff_sum`."""
        weights = self.batch_weights(idx, weights)
        previous_weights = self.batch_weights(idx, previous_weights)
        sums, sq_norms = clipped_module_diff_sum(
            self.module, head.loss, batch, [t.T for t in targets_t],
            dict(zip(self._names, previous)), [t.T for t in previous_targets_t],
            max_norm=max_norm, inner_norm=inner_norm, weights=weights,
            previous_weights=previous_weights,
        )
        return [sums[name] for name in self._names], sq_norms

    def predict_logits(self, X):
        with torch.no_grad():
            return self.module(X)

    def state(self):
        return {k: v.detach().cpu().numpy() for k, v in self.module.state_dict().items()}


def make_backend(X, n_outputs, module=None):
    """Linear backend when ``module`` is None, else a module backend."""
    if module is None:
        return LinearBackend(X, n_outputs)
    return ModuleBackend(X, module)
