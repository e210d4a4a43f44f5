"""Loss heads: per-sample losses of the logits, with their output gradients.

A head gives both the per-sample loss (for the generic ``torch.func`` path,
batch-major: logits and targets of shape (batch, n_classes)) and its gradient
with respect to the logits in closed form (for the linear path, where
per-sample gradients are ``output_grad ⊗ input``), class-major: logits and
targets of shape (n_classes, batch), the layout in which softmax over few
classes is fast.
"""

import torch


class CrossEntropyHead:
    """Softmax cross-entropy of logits against one-hot targets.

    Targets are one-hot rows so the same tensor serves both paths.
    """

    n_targets = 1

    @staticmethod
    def loss(logits, onehot):
        """Per-sample loss, shape (batch,)."""
        return -(onehot * torch.log_softmax(logits, dim=1)).sum(1)

    @staticmethod
    def output_grad(logits_t, onehot_t):
        """d loss / d logits, class-major: shape (n_classes, batch)."""
        return torch.softmax(logits_t, dim=0).sub_(onehot_t)
