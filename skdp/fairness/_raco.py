"""RaCO-DP training loop: private stochastic gradient descent-ascent on the
Lagrangian of generalized rate constraints (specs/raco_dp.md §2).

Each step, on one Poisson batch:

1. a histogram of (soft or hard) predictions per cell is released with noise;
2. the per-cell weights ``W`` of the constraint term are computed from the
   noisy histogram and the current multipliers (post-processing);
3. each record's whole gradient of ``loss + B * sum_k W[cell, k] s_k`` (B the
   expected batch size, ``s = softmax(temperature * logits)``) is clipped to
   C, summed, noised and divided by B;
4. the multipliers take a projected ascent step on the noisy constraint
   values (post-processing).

The histogram, the clipped gradient sum and a count of clipped records are
three Gaussian (or Laplace, for the histogram) releases on the same batch;
the estimator accounts them as one mechanism.
"""

import time
from dataclasses import dataclass

import torch

from .._training import TailAverage, gradient_noise_stream, make_optimizer, noisy_update
from ..privacy import NoiseStream, PoissonSampler, gaussian_noise
from ._rates import dual_quantities


def _cross_entropy(logits, onehot):
    """Per-sample cross-entropy of batch-major logits."""
    return -(onehot * torch.log_softmax(logits, dim=1)).sum(1)


class RateConstrainedHead:
    """Per-sample loss ``CE(h, y) + B * <w, softmax(tau * h)>`` of logits ``h``.

    ``w`` is the row of the per-cell weight matrix for the record's cell (zero
    for records outside every cell). Targets are ``(onehot, w)``; ``loss`` is
    batch-major, ``output_grad`` class-major (see :mod:`skdp.models._heads`).
    """

    n_targets = 2

    def __init__(self, temperature, batch_scale):
        self.temperature = temperature
        self.batch_scale = batch_scale

    def loss(self, logits, onehot, weights):
        return _cross_entropy(logits, onehot) + self._constraint_loss(logits, weights)

    def _constraint_loss(self, logits, weights):
        soft = torch.softmax(self.temperature * logits, dim=1)
        return self.batch_scale * (weights * soft).sum(1)

    def output_grad(self, logits_t, onehot_t, weights_t):
        probs = torch.softmax(logits_t, dim=0)
        term = self._soft_term(logits_t, weights_t, probs)
        return (probs - onehot_t).add_(term, alpha=self.temperature * self.batch_scale)

    def _soft_term(self, logits_t, weights_t, probs=None):
        """``s * (w - <w, s>)``: d<w, s>/dh divided by tau, with s the soft rates."""
        if self.temperature == 1.0 and probs is not None:
            soft = probs
        else:
            soft = torch.softmax(self.temperature * logits_t, dim=0)
        return soft * (weights_t - (weights_t * soft).sum(0, keepdim=True))


class _PartHead:
    """The loss part (``"loss"``) or the constraint part (``"constraint"``)
    of a :class:`RateConstrainedHead`, for gradient-norm diagnostics."""

    n_targets = 2

    def __init__(self, head, part):
        self.head = head
        self.part = part

    def loss(self, logits, onehot, weights):
        if self.part == "loss":
            return _cross_entropy(logits, onehot)
        return self.head._constraint_loss(logits, weights)

    def output_grad(self, logits_t, onehot_t, weights_t):
        if self.part == "loss":
            return torch.softmax(logits_t, dim=0) - onehot_t
        term = self.head._soft_term(logits_t, weights_t)
        return term.mul_(self.head.temperature * self.head.batch_scale)


def _mean_gradient_norms(backend, idx, batch, logits_t, head, targets_t):
    """Exact mean per-record gradient norms of the loss and constraint parts
    (non-private debug output)."""
    means = []
    for part in ("loss", "constraint"):
        _, sq_norms = backend.clipped_grad_sum(
            idx, batch, logits_t, _PartHead(head, part), targets_t, float("inf")
        )
        means.append(sq_norms.sqrt().mean() if sq_norms.numel() else sq_norms.new_zeros(()))
    return torch.stack(means)


#: Cap on every Lagrange multiplier, so that no update can overflow.
_MAX_MULTIPLIER = 1e6


@dataclass(frozen=True)
class RacoNoise:
    """Noise scales of one step; ``None`` everywhere for non-private SGDA.

    ``gradient``: Gaussian noise multiplier of the clipped sum (std
    ``gradient * C``). ``histogram``: std (Gaussian) or scale (Laplace) of the
    histogram noise. ``clip_count``: Gaussian std of the clipped-record count.
    ``cell_counts``: std or scale (the histogram's mechanism) of the separate
    per-cell record counts of ``denominator="separate_noisy"``, else None.
    """

    gradient: float = None
    histogram: float = None
    histogram_mechanism: str = "gaussian"
    clip_count: float = None
    cell_counts: float = None

    @property
    def private(self):
        return self.gradient is not None


def project_l1_orthant(values, radius):
    """Euclidean projection onto ``{lam >= 0, sum(lam) <= radius}``.

    Sort-based simplex projection, written without data-dependent branching
    so it needs no host synchronisation.

    Examples
    --------
    >>> import torch
    >>> from skdp.fairness._raco import project_l1_orthant
    >>> project_l1_orthant(torch.tensor([3.0, 1.0, -1.0]), 2.0)
    tensor([2., 0., 0.])
    """
    positive = values.clamp(min=0.0)
    ordered = positive.sort(descending=True).values
    cumulative = ordered.cumsum(0)
    ranks = torch.arange(1, values.shape[0] + 1, dtype=values.dtype, device=values.device)
    active = (ordered - (cumulative - radius) / ranks) > 0  # true, then false
    last = (active.sum() - 1).clamp(min=0).reshape(1)
    shift = (cumulative.gather(0, last) - radius) / (last + 1).to(values.dtype)
    on_simplex = (positive - shift).clamp(min=0.0)
    return torch.where(positive.sum() <= radius, positive, on_simplex)


def batch_histogram(logits_t, cells_t, dual_rates, temperature):
    """Histogram of predictions per cell for one batch, shape (n_cells + 1, K).

    ``cells_t`` is the class-major one-hot cell matrix (n_cells + 1, batch).
    Each record adds one row on the simplex -- its one-hot prediction
    (``"hard"``) or its tempered softmax (``"soft"``) -- to exactly one cell,
    so adding or removing a record moves the histogram by at most 1 in l1.
    """
    if dual_rates == "hard":
        # exactly one 1 per record (max(0) is much faster than argmax(0) here)
        top = logits_t.max(0).indices.unsqueeze(0)
        rows_t = torch.zeros_like(logits_t).scatter_(0, top, 1.0)
    else:
        rows_t = torch.softmax(temperature * logits_t, dim=0)
    return cells_t @ rows_t.T


@torch.no_grad()
def train_raco(
    backend, onehot, cells, constraints, *, n_steps, sampling_rate, max_grad_norm, noise,
    temperature, dual_learning_rate, dual_bound, dual_rates, min_denominator,
    optimizer, learning_rate, momentum, generator, averaging=0.0, dual_optimism=0.0,
    clip_constraint_values=False, dual_update="projected", dual_momentum=0.9,
    dual_bound_type="box", denominator="histogram", fixed_sizes=None,
    freeze_denominators=False, checkpoint_every=None, record_gradient_norms=False, verbose=0,
):
    """Run RaCO-DP and return its history (all noisy releases or their functions).

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
    onehot : tensor (n, K)
    cells : long tensor (n,)
        Cell of each record in ``[0, Q]``; ``Q`` is an extra cell for records
        that no constraint uses (released too, so the histogram total counts
        the batch).
    constraints : compiled constraints as torch tensors (``to_torch``).
    noise : RacoNoise
    averaging : float
        Fraction of final steps whose parameters are averaged into the result.
    denominator : {"histogram", "separate_noisy", "expected"}
        Local-set sizes dividing the histogram sums: from the noisy histogram
        itself, from per-cell record counts released separately with noise
        ``noise.cell_counts``, or the given ``fixed_sizes``.
    fixed_sizes : tensor (M,) or None
        Sizes for ``denominator="expected"`` (expected batch share of noisy
        full-data local-set sizes).
    freeze_denominators : bool
        Keep the first step's sizes for the whole run.
    checkpoint_every : int or None
        Keep a copy of the parameters every this many steps (returned as
        ``"checkpoints"``, a list of (step, parameter list) pairs).
    record_gradient_norms : bool
        Record the exact (non-private) mean per-record gradient norms of the
        loss and constraint parts as ``"gradient_norms"`` (T, 2).

    Returns
    -------
    dict of tensors, one row per step: ``"lambda"`` (T, J), ``"constraint_values"``
    (T, J) noisy Γ - γ, ``"batch_size"`` (T,) noisy, ``"clipped_fraction"`` (T,)
    noisy, ``"denominators"`` (T, M) noisy local-set sizes, ``"histogram"``
    (T, Q + 1, K) the noisy histogram released (last cell: records no
    constraint uses).
    """
    n, n_classes = onehot.shape
    n_cells = constraints.membership.shape[1]
    expected_batch = sampling_rate * n
    clip = max_grad_norm
    grad_std = noise.gradient * max_grad_norm if noise.private else 0.0
    head = RateConstrainedHead(temperature, expected_batch)
    opt = make_optimizer(optimizer, backend.parameters, learning_rate, momentum)
    average = TailAverage(backend.parameters, n_steps, averaging)
    dtype, device = onehot.dtype, onehot.device
    grad_noise = gradient_noise_stream(backend.parameters, generator)
    hist_noise = NoiseStream(
        (n_cells + 1) * n_classes, generator, dtype=dtype, kind=noise.histogram_mechanism
    )
    separate = denominator == "separate_noisy"
    if separate:
        count_noise = NoiseStream(n_cells + 1, generator, dtype=dtype, kind=noise.histogram_mechanism)
    membership = constraints.membership
    step_sizes = None if fixed_sizes is None else fixed_sizes.clamp_min(min_denominator)
    checkpoints, norms_seen = [], []
    # class-major per-record columns gathered once per step: labels, then
    # the one-hot cell (cell n_cells collects records no constraint uses)
    columns = torch.cat(
        [onehot.T, torch.nn.functional.one_hot(cells, n_cells + 1).T.to(dtype)]
    ).contiguous()
    # multiplicative updates cannot leave 0, so they start just above it
    start_value = 1e-3 if dual_update == "exponentiated" else 0.0
    lam = torch.full((constraints.tolerance.shape[0],), start_value, dtype=dtype, device=device)
    previous = torch.zeros_like(lam)
    velocity = torch.zeros_like(lam)
    tolerance = constraints.tolerance
    # per-step releases, stacked at the end (a list append costs nothing)
    lambdas, values_seen, sizes_seen, hists, clipped_counts = [], [], [], [], []
    report_every = max(1, n_steps // 10)
    start = time.perf_counter()
    sampler = PoissonSampler(n, sampling_rate, generator)
    for step, idx in enumerate(sampler.batches(n_steps)):
        batch, logits_t = backend.forward(idx)
        picked = columns.index_select(1, idx)
        onehot_t, cells_t = picked[:n_classes], picked[n_classes:]
        hist = batch_histogram(logits_t, cells_t, dual_rates, temperature)
        if noise.private:
            hist.add_(hist_noise.next().view(hist.shape), alpha=noise.histogram)
        if separate and not (freeze_denominators and step > 0):
            counts = cells_t.sum(1)
            if noise.private:
                counts.add_(count_noise.next(), alpha=noise.cell_counts)
            step_sizes = (membership @ counts[:n_cells]).clamp_min_(min_denominator)
        values, weights, sizes = dual_quantities(
            hist[:n_cells], lam, constraints, min_denominator, clip_constraint_values,
            sizes=step_sizes,
        )
        if freeze_denominators and step == 0:
            step_sizes = sizes
        values -= tolerance
        weights_t = weights.T @ cells_t[:n_cells]
        if record_gradient_norms:
            norms_seen.append(
                _mean_gradient_norms(backend, idx, batch, logits_t, head, (onehot_t, weights_t))
            )
        sums, sq_norms = backend.clipped_grad_sum(
            idx, batch, logits_t, head, (onehot_t, weights_t), clip
        )
        # exact count of clipped records; its noise is added after the loop
        # (independent of everything the loop computes from it: nothing)
        clipped_counts.append((sq_norms > clip * clip).sum())
        noisy_update(opt, sums, grad_std, expected_batch, grad_noise)
        average.update(step)
        if checkpoint_every and (step + 1) % checkpoint_every == 0:
            checkpoints.append((step + 1, [p.clone() for p in backend.parameters]))
        lambdas.append(lam)
        values_seen.append(values)
        sizes_seen.append(sizes)
        hists.append(hist)
        # optimistic ascent: the extra (g_t - g_{t-1}) term damps the cycling
        # of descent-ascent; both are post-processing of noisy releases
        step_dir = values + dual_optimism * (values - previous) if dual_optimism else values
        previous = values
        cap = _MAX_MULTIPLIER if dual_bound is None or dual_bound_type == "l1" else dual_bound
        if dual_update == "exponentiated":
            # noisy rates are unbounded (a floored noisy denominator can make
            # them large), so the multiplicative step is bounded
            step_dir = step_dir.clamp(-1.0, 1.0)
            lam = (lam * torch.exp(dual_learning_rate * step_dir)).clamp_(1e-6, cap)
        elif dual_update == "momentum":
            velocity = velocity.mul_(dual_momentum).add_(step_dir, alpha=dual_learning_rate)
            lam = (lam + velocity).clamp_(0.0, cap)
        else:
            lam = torch.add(lam, step_dir, alpha=dual_learning_rate).clamp_(0.0, cap)
        if dual_bound is not None and dual_bound_type == "l1":
            lam = project_l1_orthant(lam, dual_bound)
        if verbose and ((step + 1) % report_every == 0 or step + 1 == n_steps):
            print(
                f"[RaCO-DP] step {step + 1}/{n_steps}  max lambda {float(lam.max()):.3f}  "
                f"max noisy violation {float(values.max()):+.3f}  "
                f"elapsed {time.perf_counter() - start:.2f}s"
            )
    hist_all = torch.stack(hists)
    batch_size = hist_all.sum((1, 2))
    clipped = torch.stack(clipped_counts).to(dtype)
    if noise.private:
        clipped += gaussian_noise(clipped, noise.clip_count, generator)
    history = {
        "lambda": torch.stack(lambdas),
        "constraint_values": torch.stack(values_seen),
        "denominators": torch.stack(sizes_seen),
        "batch_size": batch_size,
        "clipped_fraction": clipped / batch_size.clamp_min(1.0),
        "histogram": hist_all,
    }
    if record_gradient_norms:
        history["gradient_norms"] = torch.stack(norms_seen)
    if checkpoint_every:
        history["checkpoints"] = checkpoints
    average.finalize()
    history["final_lambda"] = lam
    return history
