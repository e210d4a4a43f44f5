"""The statistics of the private check of a returned classifier.

One implementation for every engine: the estimators' check after training
(:class:`~skdp._fit.checks.ModelCheck`) and DP-FERMI's silos, which check
the model on their own records, compute the same vector.
"""

import torch

__all__ = ["CHECK_LOSS_BOUND", "CHECK_SHARE", "check_sums", "check_terms", "top_class"]

#: Per-record bound of the log-loss the check sums (it sums the clipped loss
#: over this bound, so that one record adds at most 1).
CHECK_LOSS_BOUND = 10.0

#: Share of a fit's budget (GDP ``mu^2``) that the check spends.
CHECK_SHARE = 0.02


def top_class(logits, dim=1):
    """What ``logits.argmax(dim)`` returns -- the index of the largest logit,
    the first on ties, a NaN counted largest -- computed faster: for two
    classes one comparison, else ``max``'s indices (``argmax`` over a short
    dimension is several times slower in torch on the CPU).

    Examples
    --------
    >>> import torch
    >>> from skdp.models import top_class
    >>> logits = torch.tensor([[0.0, 1.0], [2.0, 2.0], [float("nan"), 0.0], [0.0, float("nan")]])
    >>> top_class(logits).tolist(), logits.argmax(1).tolist()
    ([1, 0, 0, 1], [1, 0, 0, 1])
    """
    if logits.shape[dim] != 2:
        return logits.max(dim).indices
    first, second = logits.unbind(dim)
    # second wins when larger, or when it alone is NaN
    return (second > first).logical_or_(second.isnan().logical_and_(first.isnan().logical_not_())).long()


def check_sums(logits, y_codes, groups, n_groups, weights=None):
    """The exact check vector of some records: the counts of (group, true
    class, predicted class), flattened, then the sum of the per-record
    log-losses clipped to :data:`CHECK_LOSS_BOUND` and divided by it.

    One record moves the vector by at most ``sqrt(2)`` (1 in one count, at
    most 1 in the sum); with ``weights`` (each in [0, 1], e.g. the unit
    factors of a fit with units) a record adds its weight. A non-finite
    logit (an extreme record) is predicted class 0 when NaN, and its loss is
    the bound: nothing one record does reaches the vector unbounded.

    Parameters
    ----------
    logits : tensor of shape (n_records, n_classes)
        The returned model's logits (any float dtype; computed in float64).
    y_codes, groups : long tensors of shape (n_records,)
    n_groups : int
    weights : tensor of shape (n_records,) or None

    Returns
    -------
    tensor of shape (n_groups * n_classes**2 + 1,), float64

    Examples
    --------
    >>> import torch
    >>> from skdp.models import check_sums
    >>> logits = torch.tensor([[0.0, 2.0], [0.0, -1.0], [0.0, 3.0]])
    >>> sums = check_sums(logits, torch.tensor([1, 1, 0]), torch.tensor([0, 0, 1]), 2)
    >>> sums[:-1].reshape(2, 2, 2).tolist()
    [[[0.0, 0.0], [1.0, 1.0]], [[0.0, 1.0], [0.0, 0.0]]]
    """
    counts, losses = check_terms(logits, y_codes, groups, n_groups, weights)
    return torch.cat([counts, (losses.sum() / CHECK_LOSS_BOUND)[None]])


def check_terms(logits, y_codes, groups, n_groups, weights=None):
    """The terms of :func:`check_sums`: ``(counts, losses)``, the counts of
    (group, true class, predicted class) and each record's log-loss clipped
    to :data:`CHECK_LOSS_BOUND` (times its weight), both float64; for a
    caller that sums the losses of several blocks of records at once (and
    divides the sum by the bound)."""
    n_classes = logits.shape[1]
    logits = logits.double().nan_to_num(nan=0.0)
    if n_classes == 2:
        # class-major (no copy when the caller's logits are so stored):
        # torch's log_softmax and top_class's comparison run about twice as
        # fast along a first dimension of two as along a last one, and a
        # softmax over two terms has one order of summation: the same values
        logits_t = logits.T.contiguous()
        log_p = torch.log_softmax(logits_t, dim=0).T
        predicted = top_class(logits_t, dim=0)
    else:
        log_p = torch.log_softmax(logits, dim=1)
        predicted = top_class(logits)
    cells = (groups * n_classes + y_codes) * n_classes + predicted
    weights = None if weights is None else weights.double()
    counts = torch.bincount(cells, weights=weights,
                            minlength=n_groups * n_classes * n_classes).double()
    losses = (-log_p.gather(1, y_codes[:, None])[:, 0]).nan_to_num(
        nan=CHECK_LOSS_BOUND, posinf=CHECK_LOSS_BOUND).clamp(0.0, CHECK_LOSS_BOUND)
    if weights is not None:
        losses = losses * weights
    return counts, losses
