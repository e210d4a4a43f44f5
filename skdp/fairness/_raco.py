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

from .._training import TailAverage, make_optimizer, noisy_update
from ..privacy import PoissonSampler, gaussian_noise, laplace_noise
from ._constraints import cell_histogram, cell_weights, constraint_values


class RateConstrainedHead:
    """Per-sample loss ``CE(h, y) + B * <w, softmax(tau * h)>`` of logits ``h``.

    ``w`` is the row of the per-cell weight matrix for the record's cell (zero
    for records outside every cell). Targets are ``(onehot, w)``.
    """

    n_targets = 2

    def __init__(self, temperature, batch_scale):
        self.temperature = temperature
        self.batch_scale = batch_scale

    def loss(self, logits, onehot, weights):
        ce = -(onehot * torch.log_softmax(logits, dim=1)).sum(1)
        soft = torch.softmax(self.temperature * logits, dim=1)
        return ce + self.batch_scale * (weights * soft).sum(1)

    def output_grad(self, logits, onehot, weights):
        grad = torch.softmax(logits, dim=1).sub_(onehot)
        soft = torch.softmax(self.temperature * logits, dim=1)
        # d<w, s>/dh = tau * s * (w - <w, s>)
        centred = weights - (weights * soft).sum(1, keepdim=True)
        return grad.add_(soft.mul_(centred), alpha=self.temperature * self.batch_scale)


@dataclass(frozen=True)
class RacoNoise:
    """Noise scales of one step; ``None`` everywhere for non-private SGDA.

    ``gradient``: Gaussian noise multiplier of the clipped sum (std
    ``gradient * C``). ``histogram``: std (Gaussian) or scale (Laplace) of the
    histogram noise. ``clip_count``: Gaussian std of the clipped-record count.
    """

    gradient: float = None
    histogram: float = None
    histogram_mechanism: str = "gaussian"
    clip_count: float = None

    @property
    def private(self):
        return self.gradient is not None


def _add_histogram_noise(hist, noise, generator):
    if not noise.private:
        return hist
    if noise.histogram_mechanism == "laplace":
        return hist + laplace_noise(hist, noise.histogram, generator)
    return hist + gaussian_noise(hist, noise.histogram, generator)


@torch.no_grad()
def train_raco(
    backend, onehot, cells, constraints, *, n_steps, sampling_rate, max_grad_norm, noise,
    temperature, dual_learning_rate, dual_bound, dual_rates, min_denominator,
    optimizer, learning_rate, momentum, generator, averaging=0.0, verbose=0,
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

    Returns
    -------
    dict of tensors, one row per step: ``"lambda"`` (T, J), ``"constraint_values"``
    (T, J) noisy Γ - γ, ``"batch_size"`` (T,) noisy, ``"clipped_fraction"`` (T,)
    noisy, ``"denominators"`` (T, M) noisy local-set sizes.
    """
    n, n_classes = onehot.shape
    n_cells = constraints.membership.shape[1]
    expected_batch = sampling_rate * n
    clip = max_grad_norm
    grad_std = noise.gradient * max_grad_norm if noise.private else 0.0
    head = RateConstrainedHead(temperature, expected_batch)
    opt = make_optimizer(optimizer, backend.parameters, learning_rate, momentum)
    average = TailAverage(backend.parameters, n_steps, averaging)
    n_constraints = constraints.tolerance.shape[0]
    dtype, device = onehot.dtype, onehot.device
    lam = torch.zeros(n_constraints, dtype=dtype, device=device)
    history = {
        "lambda": torch.zeros((n_steps, n_constraints), dtype=dtype, device=device),
        "constraint_values": torch.zeros((n_steps, n_constraints), dtype=dtype, device=device),
        "batch_size": torch.zeros(n_steps, dtype=dtype, device=device),
        "clipped_fraction": torch.zeros(n_steps, dtype=dtype, device=device),
        "denominators": torch.zeros(
            (n_steps, constraints.membership.shape[0]), dtype=dtype, device=device
        ),
    }
    zero_row = torch.zeros((1, n_classes), dtype=dtype, device=device)
    report_every = max(1, n_steps // 10)
    start = time.perf_counter()
    sampler = PoissonSampler(n, sampling_rate, generator)
    for step, idx in enumerate(sampler.batches(n_steps)):
        batch, logits = backend.forward(idx)
        batch_cells = cells.index_select(0, idx)
        if dual_rates == "hard":
            rows = torch.nn.functional.one_hot(logits.argmax(1), n_classes).to(dtype)
        else:
            rows = torch.softmax(temperature * logits, dim=1)
        hist = _add_histogram_noise(cell_histogram(rows, batch_cells, n_cells + 1), noise, generator)
        used = hist[:n_cells]
        values = constraint_values(used, constraints, min_denominator) - constraints.tolerance
        weights = torch.cat([cell_weights(used, lam, constraints, min_denominator), zero_row])
        targets = (onehot.index_select(0, idx), weights.index_select(0, batch_cells))
        sums, sq_norms = backend.clipped_grad_sum(idx, batch, logits, head, targets, clip)
        clipped = (sq_norms > clip * clip).sum().to(dtype)
        if noise.private:
            clipped = clipped + gaussian_noise(clipped, noise.clip_count, generator)
        noisy_update(opt, backend.parameters, sums, grad_std, expected_batch, generator)
        average.update(step)

        history["lambda"][step] = lam
        history["constraint_values"][step] = values
        total = hist.sum()
        history["batch_size"][step] = total
        history["clipped_fraction"][step] = clipped / total.clamp_min(1.0)
        history["denominators"][step] = constraints.membership @ used.sum(1)

        lam = (lam + dual_learning_rate * values).clamp_(min=0.0)
        if dual_bound is not None:
            lam.clamp_(max=dual_bound)
        if verbose and ((step + 1) % report_every == 0 or step + 1 == n_steps):
            print(
                f"[RaCO-DP] step {step + 1}/{n_steps}  max lambda {float(lam.max()):.3f}  "
                f"max noisy violation {float(values.max()):+.3f}  "
                f"elapsed {time.perf_counter() - start:.2f}s"
            )
    for p in backend.parameters:
        p.grad = None
    average.finalize()
    history["final_lambda"] = lam
    return history
