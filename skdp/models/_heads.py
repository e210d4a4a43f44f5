"""Loss heads: per-sample losses of the logits, with their output gradients.

A head gives both the per-sample loss (for the generic ``torch.func`` path,
batch-major: logits and targets of shape (batch, n_classes)) and its gradient
with respect to the logits in closed form (for the linear path, where
per-sample gradients are ``output_grad ⊗ input``), class-major: logits and
targets of shape (n_classes, batch), the layout in which softmax over few
classes is fast.
"""

import torch


def one_hot(codes, n_classes, dtype, device=None):
    """One-hot rows of integer class ``codes``, shape (n, n_classes), in
    ``dtype``: a transposed view of a class-major (n_classes, n) tensor,
    the layout in which the trainers gather a batch's targets (so their
    ``.T.contiguous()`` is free), written once in ``dtype``
    (``torch.nn.functional.one_hot`` builds int64 rows and converts them:
    twice the time, and a transposed copy after it).

    Examples
    --------
    >>> import torch
    >>> from skdp.models import one_hot
    >>> rows = one_hot([1, 0, 1], 2, torch.float32)
    >>> rows.tolist(), rows.T.is_contiguous()
    ([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], True)
    """
    codes = torch.as_tensor(codes, device=device).reshape(1, -1)
    table = torch.zeros((n_classes, codes.shape[1]), dtype=dtype, device=codes.device)
    return table.scatter_(0, codes, 1.0).T


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


class SquaredLossHead:
    """Half squared error ``(output - y)**2 / 2`` of one output against a target.

    Targets have the outputs' shape: (batch, 1) on the ``torch.func`` path,
    (1, batch) class-major on the linear path, where the per-sample gradient
    with respect to the output is the residual ``output - y`` (so a linear
    model's per-sample gradient is ``(prediction - y) * [x, 1]``).
    """

    n_targets = 1

    @staticmethod
    def loss(outputs, targets):
        """Per-sample loss, shape (batch,)."""
        return 0.5 * (outputs - targets).square().sum(1)

    @staticmethod
    def output_grad(outputs_t, targets_t):
        """d loss / d outputs, class-major: shape (1, batch)."""
        return outputs_t - targets_t


class WeightedHead:
    """A head whose per-sample losses are multiplied by per-sample weights.

    The weights travel as the last target column (batch-major) or row
    (class-major), so one targets tensor serves both gradient paths. Used for
    objectives that mix parts of the data at different weights, such as the
    bilevel tuner's ``train loss + validation loss / penalty``; each record's
    *weighted* gradient is what gets clipped.

    Parameters
    ----------
    head : CrossEntropyHead or SquaredLossHead
    """

    def __init__(self, head):
        self.head = head
        self.n_targets = head.n_targets

    def loss(self, outputs, targets):
        """Per-sample weighted loss, shape (batch,)."""
        return self.head.loss(outputs, targets[:, :-1]) * targets[:, -1]

    def output_grad(self, outputs_t, targets_t):
        """Weighted d loss / d outputs, class-major."""
        return self.head.output_grad(outputs_t, targets_t[:-1]) * targets_t[-1]
