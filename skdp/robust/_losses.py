"""Per-sample losses for the DRO trainers (class-major and batch-major).

The DRO trainers need each record's loss *value* (to weight it) as well as
its gradient. A head here gives:

* ``losses_t(outputs_t, *targets_t)``: per-sample losses from class-major
  outputs (n_outputs, batch), the linear path's layout;
* ``loss(outputs, *targets)`` and ``output_grad(outputs_t, *targets_t)``:
  the interface of :mod:`skdp.models._heads` used by the clipped sums.

:class:`WeightedHead` multiplies a head's per-sample loss by a per-sample
weight passed as an extra target (class-major shape (1, batch)), so the
engine's clipped sums give ``sum_i clip(w_i grad l_i)``.
"""

import torch


class CrossEntropyLoss:
    """Softmax cross-entropy against one-hot targets."""

    @staticmethod
    def losses_t(logits_t, onehot_t):
        return torch.logsumexp(logits_t, dim=0) - (onehot_t * logits_t).sum(0)

    @staticmethod
    def loss(logits, onehot):
        return -(onehot * torch.log_softmax(logits, dim=1)).sum(1)

    @staticmethod
    def output_grad(logits_t, onehot_t):
        return torch.softmax(logits_t, dim=0).sub_(onehot_t)


class SquaredLoss:
    """Half squared error ``(f - y)^2 / 2`` of a single output."""

    @staticmethod
    def losses_t(outputs_t, y_t):
        return 0.5 * (outputs_t[0] - y_t[0]).square()

    @staticmethod
    def loss(outputs, y):
        return 0.5 * (outputs[:, 0] - y[:, 0]).square()

    @staticmethod
    def output_grad(outputs_t, y_t):
        return outputs_t - y_t


class WeightedHead:
    """``w_i * loss_i``: the last target is the per-sample weight."""

    def __init__(self, base):
        self.base = base

    def loss(self, outputs, *targets):
        *targets, weights = targets
        return weights[:, 0] * self.base.loss(outputs, *targets)

    def output_grad(self, outputs_t, *targets_t):
        *targets_t, weights_t = targets_t
        return self.base.output_grad(outputs_t, *targets_t).mul_(weights_t)
