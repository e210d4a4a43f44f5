"""Rates of compiled rate constraints: pure tensor functions (specs/raco_dp.md §1.4, §2.3-2.7).

Everything here works on a *compiled* constraint set (see
:func:`skdp.fairness.make_constraints`), given either as a
:class:`CompiledConstraints` (numpy) or, inside a training loop, as the
:class:`TorchConstraints` returned by ``CompiledConstraints.to_torch`` (convert
once per fit). With ``S`` the ``(M, Q)`` membership matrix of local sets over
cells, ``A`` the ``(J, M, K)`` coefficient tensor and ``H`` a ``(Q, K)``
histogram of (soft, hard or noisy) predictions per cell:

* ``N = S H`` are the prediction sums per local set and
  ``n = max(N 1_K, min_denominator)`` their (clamped) sizes;
* ``Gamma_j = sum_{m,k} A[j, m, k] N[m, k] / n[m]`` are the constraint values
  (:func:`constraint_values`, the post-processed ``Gamma^post`` of the spec);
* ``W = S^T diag(1 / n) sum_j lambda_j A[j]`` are the per-cell weights
  (:func:`cell_weights`): the gradient of ``sum_j lambda_j Gamma_j`` with the
  denominators held fixed is ``sum_x sum_k W[cell(x), k] grad softmax_k(x)``.

None of these functions loops over samples or synchronises with the host, so
they run on any device inside a step loop.
"""

from dataclasses import dataclass
from numbers import Real

import numpy as np
import torch

__all__ = [
    "TorchConstraints",
    "cell_histogram",
    "cell_weights",
    "constraint_values",
    "dual_quantities",
    "evaluate_constraints",
    "evaluate_hard_constraints",
    "local_set_sizes",
]


@dataclass(frozen=True, eq=False)
class TorchConstraints:
    """Compiled constraint arrays as torch tensors on one device and dtype.

    Returned by ``CompiledConstraints.to_torch``; accepted by
    :func:`constraint_values`, :func:`cell_weights` and
    :func:`local_set_sizes`.

    Attributes
    ----------
    membership : torch.Tensor of shape (n_local_sets, n_cells)
        ``S``: 1 where the cell belongs to the local set, else 0.
    coefficients : torch.Tensor of shape (n_constraints, n_local_sets, n_classes)
        ``A``: coefficient of the rate of predicting class ``k`` on local set
        ``m`` in constraint ``j``.
    tolerance : torch.Tensor of shape (n_constraints,)
        ``gamma``: right-hand sides.
    atom_cell : torch.LongTensor of shape (n_classes, n_groups)
        Cell of each (label, group) pair, -1 when no constraint uses it.
    """

    membership: torch.Tensor
    coefficients: torch.Tensor
    tolerance: torch.Tensor
    atom_cell: torch.Tensor

    @property
    def n_cells(self):
        """Number of cells Q."""
        return self.membership.shape[1]

    @property
    def n_constraints(self):
        """Number of constraints J."""
        return self.coefficients.shape[0]


def _as_tensors(constraints, like):
    """TorchConstraints on ``like``'s device and dtype (converts compiled numpy)."""
    if isinstance(constraints, TorchConstraints):
        return constraints
    if hasattr(constraints, "to_torch"):
        return constraints.to_torch(device=like.device, dtype=like.dtype)
    raise ValueError(
        "constraints must be a CompiledConstraints (from make_constraints) or the "
        f"TorchConstraints from its to_torch(); got {type(constraints).__name__}."
    )


def _check_min_denominator(min_denominator):
    if isinstance(min_denominator, Real) and not min_denominator > 0:
        raise ValueError(
            f"min_denominator must be > 0, got {min_denominator}; it floors noisy local-set "
            "sizes (use e.g. 1.0)."
        )


def _check_histogram(histogram, tensors):
    if histogram.ndim != 2 or tuple(histogram.shape) != (
        tensors.membership.shape[1],
        tensors.coefficients.shape[2],
    ):
        raise ValueError(
            f"histogram must have shape (n_cells, n_classes) = ({tensors.membership.shape[1]}, "
            f"{tensors.coefficients.shape[2]}), got {tuple(histogram.shape)}."
        )


def cell_histogram(probs, cells, n_cells):
    """Sum the rows of ``probs`` per cell.

    ``H[q, k] = sum_{i : cells[i] = q} probs[i, k]`` (spec Eq. 8). Rows whose
    cell is -1 (records that no constraint uses) are ignored. Each record adds
    one row, so when rows lie on the simplex (softmax outputs or one-hot
    predictions) adding or removing a record moves ``H`` by at most 1 in l1.

    Differentiable in ``probs``; one ``index_add``, no loop.

    Parameters
    ----------
    probs : torch.Tensor of shape (n_samples, n_classes)
        Soft (probabilities) or hard (one-hot) predictions.
    cells : torch.Tensor of int of shape (n_samples,)
        Cell of each row, in ``[-1, n_cells)``. Values ``>= n_cells`` are an
        error (raised on CPU; a device-side assert on CUDA).
    n_cells : int
        Number of cells Q.

    Returns
    -------
    histogram : torch.Tensor of shape (n_cells, n_classes)
        Same dtype and device as ``probs``.

    Examples
    --------
    >>> import torch
    >>> from skdp.fairness._rates import cell_histogram
    >>> probs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [1.0, 0.0]])
    >>> cell_histogram(probs, torch.tensor([0, 1, 1, -1]), 2)
    tensor([[0.9000, 0.1000],
            [0.7000, 1.3000]])
    """
    if probs.ndim != 2:
        raise ValueError(
            f"probs must be 2-D (n_samples, n_classes), got shape {tuple(probs.shape)}."
        )
    if cells.ndim != 1 or cells.shape[0] != probs.shape[0]:
        raise ValueError(
            f"cells must be 1-D with one entry per row of probs ({probs.shape[0]}), "
            f"got shape {tuple(cells.shape)}."
        )
    if cells.dtype != torch.long:
        cells = cells.long()
    # Unused records go to a spare row that is dropped.
    index = cells.masked_fill(cells < 0, n_cells)
    out = probs.new_zeros((n_cells + 1, probs.shape[1]))
    return out.index_add(0, index, probs)[:n_cells]


def local_set_sizes(histogram, constraints, min_denominator=1.0):
    """Clamped sizes ``n = max(S H 1_K, min_denominator)`` of the local sets.

    For a histogram of rows on the simplex, ``H 1_K`` counts the records per
    cell, so ``n[m]`` is the (noisy, if ``H`` is) number of records in local
    set ``m``. The floor guards against the non-positive sizes that noise can
    produce (spec §2.7).

    Parameters
    ----------
    histogram : torch.Tensor of shape (n_cells, n_classes)
    constraints : CompiledConstraints or TorchConstraints
    min_denominator : float, default=1.0
        Floor of each size; must be > 0.

    Returns
    -------
    sizes : torch.Tensor of shape (n_local_sets,)

    Examples
    --------
    >>> import torch
    >>> from skdp.fairness import make_constraints
    >>> from skdp.fairness._rates import local_set_sizes
    >>> compiled = make_constraints("demographic_parity", 0.1, n_classes=2, n_groups=2)
    >>> local_set_sizes(torch.tensor([[3.0, 1.0], [-0.5, 0.2]]), compiled)
    tensor([4., 1.])
    """
    _check_min_denominator(min_denominator)
    tensors = _as_tensors(constraints, histogram)
    _check_histogram(histogram, tensors)
    return (tensors.membership @ histogram.sum(1)).clamp_min(min_denominator)


def _sizes(histogram, tensors, min_denominator, denominators):
    if denominators is None:
        return (tensors.membership @ histogram.sum(1)).clamp_min(min_denominator)
    if denominators.shape != (tensors.membership.shape[0],):
        raise ValueError(
            f"denominators must have shape (n_local_sets,) = ({tensors.membership.shape[0]},), "
            f"got {tuple(denominators.shape)}."
        )
    return denominators.clamp_min(min_denominator)


def constraint_values(
    histogram, constraints, min_denominator=1.0, *, denominators=None, clip_rates=False
):
    """Constraint values ``Gamma_j`` from a histogram of predictions per cell.

    ``Gamma_j = sum_m sum_k A[j, m, k] * N[m, k] / n[m]`` with ``N = S H`` and
    ``n = max(N 1_K, min_denominator)`` (spec Eq. 12, ``Gamma^post``). With an
    exact one-hot histogram these are the hard constraint values; with
    softmax rows, the soft ones; with a noisy histogram, the private estimate
    used by the dual ascent (post-processing). Subtract ``tolerance`` to get
    the dual gradient.

    Differentiable in ``histogram`` (and ``denominators``).

    Parameters
    ----------
    histogram : torch.Tensor of shape (n_cells, n_classes)
        Sums of prediction rows per cell, e.g. from :func:`cell_histogram`,
        possibly noisy.
    constraints : CompiledConstraints or TorchConstraints
        A ``CompiledConstraints`` is converted to the histogram's device and
        dtype on each call; pass ``compiled.to_torch(...)`` in a loop.
    min_denominator : float, default=1.0
        Floor of the local-set sizes; must be > 0.
    denominators : torch.Tensor of shape (n_local_sets,), default=None
        Local-set sizes to divide by instead of the ones implied by
        ``histogram`` (e.g. separately released counts, expected sizes, or
        sizes held fixed for differentiation). Also floored at
        ``min_denominator``.
    clip_rates : bool, default=False
        Clip each per-set rate ``N[m, k] / n[m]`` to ``[0, 1]`` before
        combining; noise can push it outside.

    Returns
    -------
    values : torch.Tensor of shape (n_constraints,)

    Examples
    --------
    Demographic parity, two groups: group 0 predicts class 1 at rate 1/4 and
    group 1 at rate 3/4.

    >>> import torch
    >>> from skdp.fairness import make_constraints
    >>> from skdp.fairness._rates import constraint_values
    >>> compiled = make_constraints("demographic_parity", 0.1, n_classes=2, n_groups=2)
    >>> compiled.names
    ('DP[group=0, class=0]', 'DP[group=0, class=1]', 'DP[group=1, class=0]', 'DP[group=1, class=1]')
    >>> hist = torch.tensor([[3.0, 1.0], [1.0, 3.0]])
    >>> constraint_values(hist, compiled)
    tensor([ 0.5000, -0.5000, -0.5000,  0.5000])
    """
    _check_min_denominator(min_denominator)
    tensors = _as_tensors(constraints, histogram)
    _check_histogram(histogram, tensors)
    sums = tensors.membership @ histogram
    sizes = _sizes(histogram, tensors, min_denominator, denominators)
    rates = sums / sizes[:, None]
    if clip_rates:
        rates = rates.clamp(0.0, 1.0)
    return torch.einsum("jmk,mk->j", tensors.coefficients, rates)


def cell_weights(histogram, lambdas, constraints, min_denominator=1.0, *, denominators=None):
    """Per-cell weights ``W = S^T diag(1/n) sum_j lambda_j A[j]`` (spec §2.4).

    With the denominators ``n`` held fixed, the gradient of
    ``sum_j lambda_j Gamma_j`` equals the gradient of the per-sample sum
    ``sum_x sum_k W[cell(x), k] * softmax(h(x))_k``, so one per-sample gradient
    pass of the modified loss ``loss(x) + B * <W[cell(x)], softmax(h(x))>``
    gives the constraint part of RaCO-DP's per-sample gradient (Eq. 10).
    Records in no cell (cell -1) get weight 0.

    The trainer treats ``W`` as a constant (it is computed from the noisy
    histogram); the function itself is differentiable.

    Parameters
    ----------
    histogram : torch.Tensor of shape (n_cells, n_classes)
        Supplies the local-set sizes when ``denominators`` is None.
    lambdas : torch.Tensor of shape (n_constraints,)
        Lagrange multipliers.
    constraints : CompiledConstraints or TorchConstraints
    min_denominator : float, default=1.0
        Floor of the local-set sizes; must be > 0.
    denominators : torch.Tensor of shape (n_local_sets,), default=None
        Local-set sizes to use instead of those implied by ``histogram``.

    Returns
    -------
    weights : torch.Tensor of shape (n_cells, n_classes)

    Examples
    --------
    Demographic parity with two groups of (noisy) sizes 4 and 2: the weight of
    a group-0 record's class-1 probability is ``lambda_01/4 - lambda_11/4``
    from the two constraints on class 1 that involve group 0.

    >>> import torch
    >>> from skdp.fairness import make_constraints
    >>> from skdp.fairness._rates import cell_weights
    >>> compiled = make_constraints("demographic_parity", 0.1, n_classes=2, n_groups=2)
    >>> hist = torch.tensor([[3.0, 1.0], [1.0, 1.0]])
    >>> lambdas = torch.tensor([0.0, 2.0, 0.0, 1.0])
    >>> cell_weights(hist, lambdas, compiled)
    tensor([[ 0.0000,  0.2500],
            [ 0.0000, -0.5000]])
    """
    _check_min_denominator(min_denominator)
    tensors = _as_tensors(constraints, histogram)
    _check_histogram(histogram, tensors)
    if lambdas.shape != (tensors.coefficients.shape[0],):
        raise ValueError(
            f"lambdas must have shape (n_constraints,) = ({tensors.coefficients.shape[0]},), "
            f"got {tuple(lambdas.shape)}."
        )
    sizes = _sizes(histogram, tensors, min_denominator, denominators)
    combined = torch.einsum("j,jmk->mk", lambdas, tensors.coefficients)
    return tensors.membership.T @ (combined / sizes[:, None])


def _codes(values, name, upper, n):
    arr = np.asarray(values)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        shape = "(n_samples,)" if n is None else f"({n},)"
        raise ValueError(f"{name} must be 1-D of shape {shape}, got shape {arr.shape}.")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.number) and np.all(arr == np.round(arr))):
            raise ValueError(f"{name} must hold integer codes, got dtype {arr.dtype}.")
        arr = arr.astype(np.int64)
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= upper):
        raise ValueError(
            f"{name} must hold integer codes in [0, {upper}), got values in "
            f"[{arr.min()}, {arr.max()}]; encode labels and groups first."
        )
    return arr


def evaluate_constraints(constraints, y_true, y_pred, groups, *, zero_division=0.0):
    """Exact constraint values on labelled data (non-private).

    Counts every record, so this is for diagnostics and tests, not for
    anything released during private training.

    Parameters
    ----------
    constraints : CompiledConstraints
    y_true : array-like of int of shape (n_samples,)
        True label codes in ``[0, n_classes)``.
    y_pred : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted label codes (hard rates) or rows of class probabilities
        (soft rates).
    groups : array-like of int of shape (n_samples,)
        Group codes in ``[0, n_groups)``.
    zero_division : float, default=0.0
        Rate used for a local set with no records (its rates are undefined);
        ``np.nan`` makes every constraint that uses such a set NaN.

    Returns
    -------
    values : ndarray of shape (n_constraints,)

    Examples
    --------
    >>> from skdp.fairness import make_constraints
    >>> from skdp.fairness._rates import evaluate_constraints
    >>> compiled = make_constraints("false_negative_rate", 0.2, n_classes=2, n_groups=1)
    >>> y_true = [1, 1, 1, 1, 0]
    >>> y_pred = [1, 0, 1, 1, 0]
    >>> evaluate_constraints(compiled, y_true, y_pred, [0, 0, 0, 0, 0]).tolist()
    [0.25]
    """
    atom_cell = np.asarray(constraints.atom_cell)
    n_classes, n_groups = atom_cell.shape
    n_cells = constraints.n_cells
    y = _codes(y_true, "y_true", n_classes, None)
    g = _codes(groups, "groups", n_groups, y.shape[0])
    pred = np.asarray(y_pred)
    cells = atom_cell[y, g]
    keep = cells >= 0
    cells = cells[keep]
    if pred.ndim == 2:
        if pred.shape != (y.shape[0], n_classes):
            raise ValueError(
                f"y_pred of probabilities must have shape ({y.shape[0]}, {n_classes}), "
                f"got {pred.shape}."
            )
        if not np.all(np.isfinite(pred)):
            raise ValueError("y_pred contains NaN or infinite probabilities.")
        rows = pred[keep].astype(np.float64)
        hist = np.stack(
            [np.bincount(cells, weights=rows[:, k], minlength=n_cells) for k in range(n_classes)],
            axis=1,
        ) if n_cells else np.zeros((0, n_classes))
    else:
        p = _codes(pred, "y_pred", n_classes, y.shape[0])[keep]
        hist = np.bincount(cells * n_classes + p, minlength=n_cells * n_classes).astype(
            np.float64
        ).reshape(n_cells, n_classes)
    membership = np.asarray(constraints.membership, dtype=np.float64)
    sums = membership @ hist
    sizes = membership @ np.bincount(cells, minlength=n_cells).astype(np.float64)
    rates = np.full(sums.shape, float(zero_division))
    np.divide(sums, sizes[:, None], out=rates, where=sizes[:, None] > 0)
    coef = np.asarray(constraints.coefficients, dtype=np.float64)
    # 0 * nan must stay 0 for local sets a constraint does not use
    return np.where(coef != 0, coef * rates[None], 0.0).sum(axis=(1, 2))


def evaluate_hard_constraints(constraints, y_true, y_pred, groups, *, zero_division=0.0):
    """Exact hard (0-1) constraint values from predicted label codes (non-private).

    Same as :func:`evaluate_constraints` with 1-D ``y_pred``.

    Parameters
    ----------
    constraints : CompiledConstraints
    y_true, y_pred, groups : array-like of int of shape (n_samples,)
        True label, predicted label and group codes.
    zero_division : float, default=0.0
        Rate used for a local set with no records.

    Returns
    -------
    values : ndarray of shape (n_constraints,)

    Examples
    --------
    >>> from skdp.fairness import make_constraints
    >>> from skdp.fairness._rates import evaluate_hard_constraints
    >>> compiled = make_constraints("demographic_parity", 0.1, n_classes=2, n_groups=2)
    >>> evaluate_hard_constraints(compiled, [0, 1, 0, 1], [1, 0, 1, 1], [0, 0, 1, 1]).tolist()
    [0.5, -0.5, -0.5, 0.5]
    """
    if np.asarray(y_pred).ndim != 1:
        raise ValueError(
            "y_pred must be 1-D predicted label codes; use evaluate_constraints for "
            "probabilities."
        )
    return evaluate_constraints(constraints, y_true, y_pred, groups, zero_division=zero_division)


def dual_quantities(histogram, lambdas, tensors, min_denominator=1.0, clip_rates=False,
                    sizes=None):
    """Constraint values, per-cell weights and local-set sizes in one pass.

    The fused form of :func:`constraint_values`, :func:`cell_weights` and
    :func:`local_set_sizes` for the training loop: no validation, the sizes
    computed once, and the coefficient tensor used as a (J, M*K) matrix.
    ``clip_rates`` clips each noisy per-set rate to [0, 1] before combining
    (affects the values only, as in :func:`constraint_values`). ``sizes``,
    when given, are the (already floored) local-set sizes to divide by
    instead of the histogram's.

    Returns
    -------
    values : torch.Tensor of shape (n_constraints,)
        ``Gamma_j`` (tolerance not subtracted).
    weights : torch.Tensor of shape (n_cells, n_classes)
        ``W = S^T diag(1/n) sum_j lambda_j A[j]``.
    sizes : torch.Tensor of shape (n_local_sets,)
        Floored local-set sizes ``n``.
    """
    n_sets, n_classes = tensors.membership.shape[0], histogram.shape[1]
    coefficients = tensors.coefficients.reshape(tensors.coefficients.shape[0], n_sets * n_classes)
    sums = tensors.membership @ histogram
    if sizes is None:
        sizes = sums.sum(1).clamp_min_(min_denominator)
    inverse = sizes.reciprocal()[:, None]
    rates = sums * inverse
    if clip_rates:
        rates = rates.clamp_(0.0, 1.0)
    values = coefficients @ rates.reshape(-1)
    mixed = (lambdas @ coefficients).reshape(n_sets, n_classes) * inverse
    return values, tensors.membership.T @ mixed, sizes
