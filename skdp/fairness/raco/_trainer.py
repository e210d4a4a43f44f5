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

With sample weights (the backend's ``record_weights``, factors in [0, 1]),
every per-record term is multiplied by the record's factor after it is
bounded: its row of the histogram and of the cell counts, its clipped
gradient (loss and Lagrangian terms together) and its clipped-record
indicator; the rates are then weighted rates and no sensitivity changes.
"""

import time
from dataclasses import dataclass

import torch

from ..._training import (
    TailAverage,
    gradient_noise_stream,
    make_optimizer,
    noisy_update,
)
from ...privacy import NoiseStream, current_communicator, gaussian_noise, make_sampler, weigh
from .._rates import dual_quantities


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


class _StepRows:
    """One tensor per step, written into row ``step`` of a tensor of
    ``n_steps`` rows (allocated at the first step, with its shape and
    dtype): what ``torch.stack`` of the steps' tensors would give."""

    def __init__(self, n_steps):
        self.n_steps = n_steps
        self.tensor = None

    def put(self, step, value):
        if self.tensor is None:
            self.tensor = value.new_empty((self.n_steps,) + tuple(value.shape))
        self.tensor[step] = value


def _onehot_cells_t(cells, n_columns, dtype):
    """Class-major one-hot rows of ``cells``, shape (n_columns, len(cells))
    (cell ``n_columns - 1`` collects records no constraint uses)."""
    onehot_t = torch.zeros((n_columns, cells.numel()), dtype=dtype, device=cells.device)
    return onehot_t.scatter_(0, cells[None], 1.0)


#: Largest class-major one-hot cell table (bytes) built once for a fit; a
#: larger one (many records and cells) is built per batch instead.
_CELL_TABLE_BYTES = 64 * 2**20


class _BatchCells:
    """The class-major one-hot cells of a batch's records: gathered from a
    table built once when it is small, else built per batch (the same
    values either way)."""

    def __init__(self, cells, n_columns, dtype):
        self.cells, self.n_columns, self.dtype = cells, n_columns, dtype
        size = n_columns * cells.numel() * torch.empty((), dtype=dtype).element_size()
        self.table = (_onehot_cells_t(cells, n_columns, dtype)
                      if size <= _CELL_TABLE_BYTES else None)

    def __call__(self, idx):
        if self.table is not None:
            return self.table.index_select(1, idx)
        return _onehot_cells_t(self.cells.index_select(0, idx), self.n_columns, self.dtype)


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

    @property
    def histogram_std(self):
        """Standard deviation of the noise on each histogram count (None
        without privacy): the Gaussian std, or ``sqrt(2)`` times the Laplace
        scale."""
        if self.histogram is None:
            return None
        factor = 2.0**0.5 if self.histogram_mechanism == "laplace" else 1.0
        return self.histogram * factor


def project_l1_orthant(values, radius):
    """Euclidean projection onto ``{lam >= 0, sum(lam) <= radius}``.

    Sort-based simplex projection, written without data-dependent branching
    so it needs no host synchronisation.

    Examples
    --------
    >>> import torch
    >>> from skdp.fairness.raco._trainer import project_l1_orthant
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


@dataclass(frozen=True)
class RacoConfig:
    """Settings of one RaCO-DP run, built by the estimator.

    Attributes
    ----------
    n_steps : int
    sampling_rate : float
        Poisson sampling rate q (the expected batch is ``q * n``).
    max_grad_norm : float
        Clipping bound C of each record's whole gradient.
    noise : RacoNoise
        Noise of the releases (from the estimator's privacy report).
    temperature : float
        Temperature tau of the soft rates.
    dual_learning_rate, dual_bound, dual_bound_type, dual_update, dual_momentum,
    dual_optimism, dual_rates, clip_constraint_values, min_denominator
        Multiplier updates (see :class:`~skdp.DPRateConstrainedClassifier`).
    optimizer, learning_rate, momentum
        Primal optimizer.
    averaging : float
        Fraction of final steps whose parameters are averaged into the result.
    denominator : {"histogram", "separate_noisy", "expected"}
        Local-set sizes dividing the histogram sums: from the noisy histogram
        itself, from per-cell record counts released separately with noise
        ``noise.cell_counts``, or the ``fixed_sizes`` given to
        :func:`train_raco`.
    freeze_denominators : bool
        Keep the first step's sizes for the whole run.
    checkpoint_every : int or None
        Keep a copy of the parameters every this many steps (returned as
        ``"checkpoints"``, a list of (step, parameter list) pairs).
    record_gradient_norms : bool
        Record the exact (non-private) mean per-record gradient norms of the
        loss and constraint parts as ``"gradient_norms"`` (T, 2).
    verbose : int
    """

    n_steps: int
    sampling_rate: float
    max_grad_norm: float
    noise: RacoNoise = RacoNoise()
    temperature: float = 2.0
    dual_learning_rate: float = 0.3
    dual_bound: float = None
    dual_bound_type: str = "box"
    dual_update: str = "projected"
    dual_momentum: float = 0.9
    dual_optimism: float = 0.0
    dual_rates: str = "hard"
    clip_constraint_values: bool = False
    min_denominator: float = 1.0
    optimizer: str = "sgd"
    learning_rate: float = 0.2
    momentum: float = 0.5
    averaging: float = 0.0
    denominator: str = "histogram"
    freeze_denominators: bool = False
    checkpoint_every: int = None
    record_gradient_norms: bool = False
    verbose: int = 0


@torch.inference_mode()
def train_raco(backend, onehot, cells, constraints, config, generator, fixed_sizes=None,
               units=None):
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
    config : RacoConfig
    generator : torch.Generator or SecureGenerator
    fixed_sizes : tensor (M,) or None
        Sizes for ``denominator="expected"`` (expected batch share of noisy
        full-data local-set sizes).
    units : UnitBounds or None, default=None
        Privacy units (:func:`~skdp.privacy.bound_units`): batches are
        Poisson samples of units, each with its kept records, and every sum
        is divided by the expected number of units (``config.sampling_rate``
        is then a rate over units). The backend's ``record_weights`` must
        hold the units' factors (they weigh the gradient, the histogram rows,
        the cell counts and the clipped-record count). None: Poisson samples
        of records.

    Returns
    -------
    dict of tensors, one row per step: ``"lambda"`` (T, J), ``"constraint_values"``
    (T, J) noisy Γ - γ, ``"batch_size"`` (T,) noisy, ``"clipped_fraction"`` (T,)
    noisy count of clipped records over the expected batch size, clamped to
    [0, 1], ``"clipped_count"`` (T,) the noisy count itself,
    ``"denominators"`` (T, M) noisy local-set sizes, ``"histogram"``
    (T, Q + 1, K) the noisy histogram released (last cell: records no
    constraint uses).
    """
    n, n_classes = onehot.shape
    n_cells = constraints.membership.shape[1]
    # data-parallel: this rank's rows; the root samples all rows and adds
    # every noise value, and each release is summed over the ranks
    comm = current_communicator()
    sampler, expected_batch = make_sampler(comm.total(n), config.sampling_rate, generator,
                                           units)
    sampler = comm.shard(sampler)
    clip, noise = config.max_grad_norm, config.noise
    grad_std = noise.gradient * clip if noise.private else 0.0
    head = RateConstrainedHead(config.temperature, expected_batch)
    opt = make_optimizer(config.optimizer, backend.parameters, config.learning_rate, config.momentum)
    average = TailAverage(backend.parameters, config.n_steps, config.averaging)
    dtype, device = onehot.dtype, onehot.device
    grad_noise = gradient_noise_stream(backend.parameters, generator)
    hist_noise = NoiseStream(
        (n_cells + 1) * n_classes, generator, dtype=dtype, kind=noise.histogram_mechanism
    )
    separate = config.denominator == "separate_noisy"
    if separate:
        count_noise = NoiseStream(n_cells + 1, generator, dtype=dtype, kind=noise.histogram_mechanism)
    membership = constraints.membership
    step_sizes = None if fixed_sizes is None else fixed_sizes.clamp_min(config.min_denominator)
    checkpoints, norms_seen = [], []
    # multiplicative updates cannot leave 0, so they start just above it
    start_value = 1e-3 if config.dual_update == "exponentiated" else 0.0
    lam = torch.full((constraints.tolerance.shape[0],), start_value, dtype=dtype, device=device)
    previous = torch.zeros_like(lam)
    velocity = torch.zeros_like(lam)
    tolerance = constraints.tolerance
    # per-step releases, stacked at the end (a list append costs nothing)
    # per-step releases written into tensors allocated once: a small tensor
    # kept from every step would fragment the heap between the batches
    lambdas, values_seen, sizes_seen, hists = (_StepRows(config.n_steps) for _ in range(4))
    clipped_counts = torch.empty(config.n_steps, dtype=dtype, device=device)
    report_every = max(1, config.n_steps // 10)
    # class-major targets and cells: a step gathers contiguous columns
    onehot_cm = onehot.T.contiguous()
    batch_cells = _BatchCells(cells, n_cells + 1, dtype)
    start = time.perf_counter()
    for step, idx in enumerate(backend.feed(sampler.batches(config.n_steps))):
        batch, logits_t = backend.forward(idx)
        onehot_t = onehot_cm.index_select(1, idx)
        cells_t = batch_cells(idx)
        record_weights = backend.batch_weights(idx)
        # each record's cell row, times its weight factor (when weighted)
        cells_w = weigh(cells_t, record_weights)
        hist = batch_histogram(logits_t, cells_w, config.dual_rates, config.temperature)
        if noise.private and comm.is_root:
            hist.add_(hist_noise.next().view(hist.shape), alpha=noise.histogram)
        comm.sum_([hist])
        if separate and not (config.freeze_denominators and step > 0):
            counts = cells_w.sum(1)
            if noise.private and comm.is_root:
                counts.add_(count_noise.next(), alpha=noise.cell_counts)
            comm.sum_([counts])
            step_sizes = (membership @ counts[:n_cells]).clamp_min_(config.min_denominator)
        values, weights, sizes = dual_quantities(
            hist[:n_cells], lam, constraints, config.min_denominator, config.clip_constraint_values,
            sizes=step_sizes,
        )
        if config.freeze_denominators and step == 0:
            step_sizes = sizes
        values -= tolerance
        weights_t = weights.T @ cells_t[:n_cells]
        if config.record_gradient_norms:
            norms_seen.append(
                _mean_gradient_norms(backend, idx, batch, logits_t, head, (onehot_t, weights_t))
            )
        sums, sq_norms = backend.clipped_grad_sum(
            idx, batch, logits_t, head, (onehot_t, weights_t), clip
        )
        # exact count of clipped records; its noise is added after the loop
        # (independent of everything the loop computes from it: nothing)
        over = sq_norms > clip * clip
        if record_weights is not None:
            over = weigh(over.to(dtype), record_weights)
        clipped_counts[step] = over.sum()
        noisy_update(opt, sums, grad_std, expected_batch, grad_noise, comm=comm)
        average.update(step)
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0:
            checkpoints.append((step + 1, [p.clone() for p in backend.parameters]))
        lambdas.put(step, lam)
        values_seen.put(step, values)
        sizes_seen.put(step, sizes)
        hists.put(step, hist)
        # optimistic ascent: the extra (g_t - g_{t-1}) term damps the cycling
        # of descent-ascent; both are post-processing of noisy releases
        optimism = config.dual_optimism
        step_dir = values + optimism * (values - previous) if optimism else values
        previous = values
        cap = config.dual_bound
        if cap is None or config.dual_bound_type == "l1":
            cap = _MAX_MULTIPLIER
        if config.dual_update == "exponentiated":
            # noisy rates are unbounded (a floored noisy denominator can make
            # them large), so the multiplicative step is bounded
            step_dir = step_dir.clamp(-1.0, 1.0)
            lam = (lam * torch.exp(config.dual_learning_rate * step_dir)).clamp_(1e-6, cap)
        elif config.dual_update == "momentum":
            velocity = velocity.mul_(config.dual_momentum)
            velocity.add_(step_dir, alpha=config.dual_learning_rate)
            lam = (lam + velocity).clamp_(0.0, cap)
        else:
            lam = torch.add(lam, step_dir, alpha=config.dual_learning_rate).clamp_(0.0, cap)
        if config.dual_bound is not None and config.dual_bound_type == "l1":
            lam = project_l1_orthant(lam, config.dual_bound)
        if config.verbose and ((step + 1) % report_every == 0 or step + 1 == config.n_steps):
            print(
                f"[RaCO-DP] step {step + 1}/{config.n_steps}  max lambda {float(lam.max()):.3f}  "
                f"max noisy violation {float(values.max()):+.3f}  "
                f"elapsed {time.perf_counter() - start:.2f}s"
            )
    hist_all = hists.tensor
    batch_size = hist_all.sum((1, 2), dtype=torch.float64)
    clipped = clipped_counts
    clipped = comm.release(clipped, (lambda: gaussian_noise(clipped, noise.clip_count, generator))
                           if noise.private else None)
    history = {
        "lambda": lambdas.tensor,
        "constraint_values": values_seen.tensor,
        "denominators": sizes_seen.tensor,
        "batch_size": batch_size,
        # noisy count over the (public) expected batch size, not over the
        # noisy one: a ratio of two noisy counts can leave [0, 1] by far
        "clipped_fraction": (clipped / expected_batch).clamp(0.0, 1.0),
        "clipped_count": clipped,
        "histogram": hist_all,
    }
    if config.record_gradient_norms:
        history["gradient_norms"] = torch.stack(norms_seen)
    if config.checkpoint_every:
        history["checkpoints"] = checkpoints
    average.finalize()
    history["final_lambda"] = lam
    return history
