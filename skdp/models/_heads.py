"""Loss heads: per-sample losses of the logits, with their output gradients.

A head gives both the per-sample loss (for the generic ``torch.func`` path)
and its gradient with respect to the logits in closed form (for the linear
path, where per-sample gradients are ``output_grad ⊗ input``).
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
    def output_grad(logits, onehot):
        """d loss / d logits, shape (batch, n_classes)."""
        return torch.softmax(logits, dim=1).sub_(onehot)
