"""What every trainer shares: optimizers fed with privatised gradients, the
noisy update, tail averaging, penalties, the thread policy, and the DP-SGD
loop (the trainer of :mod:`skdp.linear_model`, and an inner solver of the
bilevel tuners)."""

import itertools
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ._fixed_steps import FixedShapeSteps
from .models import CrossEntropyHead, LinearBackend
from .privacy import NoiseStream, PoissonSampler, current_communicator, make_sampler

OPTIMIZERS = ("sgd", "adam")

#: Whether DP-SGD runs a linear model's steps at a fixed shape
#: (:mod:`skdp._fixed_steps`): "auto" does so on CUDA, replaying the step as
#: a CUDA graph, when a fit has at least :data:`GRAPH_MIN_STEPS` steps; True
#: forces it wherever it applies (eagerly off CUDA: for tests), False never.
FIXED_SHAPE_STEPS = "auto"
#: Fewest steps for which "auto" captures a CUDA graph: a capture costs
#: about 2 ms and three eager warm-up steps, a replayed step saves 0.07-0.17
#: ms (H200, benchmarks/bench_cuda_steps.py), so a graph pays from about 20
#: steps on.
GRAPH_MIN_STEPS = 32


@contextmanager
def training_threads(linear, device):
    """The thread policy of training: a linear model on the CPU trains on one
    torch thread (its per-step tensors are tiny, so intra-op threads bring
    nothing on an idle machine and stall every op when the cores are
    shared, e.g. under GridSearchCV with n_jobs); anything else keeps the
    process's thread count."""
    if linear and torch.device(device).type == "cpu":
        with one_torch_thread():
            yield
    else:
        yield


@contextmanager
def one_torch_thread():
    """Run the block with one torch intra-op thread; the count is restored after.

    Used where results must not depend on the thread count of the process:
    a float reduction split over threads is summed in an order that depends
    on their number.

    >>> import torch
    >>> from skdp._training import one_torch_thread
    >>> before = torch.get_num_threads()
    >>> with one_torch_thread():
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    previous = torch.get_num_threads()
    if previous == 1:  # nothing to change (and nothing to pay in a step loop)
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class MomentumSGD:
    """SGD with heavy-ball momentum, the update of ``torch.optim.SGD``:
    ``v <- momentum * v + g``, ``p <- p - lr * v``.

    Two in-place ops per parameter; ``torch.optim.SGD.step`` costs about four
    times as much per call on the small tensors of linear models (measured:
    16.5 us against 4.2 us), which matters in a loop of a few hundred steps.
    """

    def __init__(self, params, learning_rate, momentum):
        self.params = params
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.velocity = [torch.zeros_like(p) for p in params] if momentum else None

    def apply(self, grads, scale=1.0):
        """Step along ``scale * grads`` (the scale is folded into the step
        size: momentum is linear, so this saves a pass over the gradients)."""
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if self.velocity is not None:
                g = self.velocity[i].mul_(self.momentum).add_(g)
            p.add_(g, alpha=-self.learning_rate * scale)


class TorchOptimizer:
    """Any ``torch.optim`` optimizer fed with privatised gradients."""

    def __init__(self, optimizer, params):
        self.optimizer = optimizer
        self.params = params

    def apply(self, grads, scale=1.0):
        for p, g in zip(self.params, grads):
            p.grad = g.mul_(scale) if scale != 1.0 else g
        self.optimizer.step()
        for p in self.params:
            p.grad = None


def make_optimizer(name, params, learning_rate, momentum=0.0):
    """Optimizer applied to privatised gradients (post-processing)."""
    if name == "sgd":
        return MomentumSGD(params, learning_rate, momentum)
    if name == "adam":
        return TorchOptimizer(torch.optim.Adam(params, lr=learning_rate), params)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}.")


def noisy_update(optimizer, grad_sums, noise_std, expected_batch, noise, penalty=None,
                 comm=None):
    """Add N(0, noise_std^2) to clipped sums, average by the expected batch, step.

    ``noise`` is a :class:`~skdp.privacy.NoiseStream` of standard normal
    vectors as long as all the sums together (unused when ``noise_std`` is
    0). Dividing by the *expected* Poisson batch size (not the realised one)
    keeps the update a post-processing of the noisy sum. ``penalty`` (an
    :class:`L2Penalty` or None) adds the gradient of a data-independent
    penalty *after* the noise: it depends on the parameters only, so it is
    post-processing and is neither clipped nor noised. ``grad_sums`` are
    consumed (modified in place). ``comm`` (a communicator, see
    :func:`~skdp.privacy.current_communicator`, or None for this process
    alone): in a data-parallel fit ``grad_sums`` are this rank's sums, the
    root adds the noise and the sums are added up over the ranks, so every
    rank takes the same step.
    """
    if noise_std > 0 and (comm is None or comm.is_root):
        row, offset = noise.next(), 0
        for total in grad_sums:
            size = total.numel()
            total.add_(row[offset : offset + size].view(total.shape), alpha=noise_std)
            offset += size
    if comm is not None:
        comm.sum_(grad_sums)
    if penalty is not None:
        penalty.add_gradient(grad_sums, expected_batch)
    optimizer.apply(grad_sums, 1.0 / expected_batch)


class L2Penalty:
    """The penalty ``alpha / 2 * ||w||^2`` on a backend's weights (not biases).

    Weights are the linear backend's coefficient columns (its last column,
    the intercept, is left out) or a module's parameters with two or more
    dimensions (biases and norm scales are left out).

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
    alpha : float
        Penalty strength; the penalised objective is the mean loss plus
        ``alpha / 2 * ||w||^2``.
    """

    def __init__(self, backend, alpha):
        self.alpha = float(alpha)
        self.params = backend.parameters
        self.masks = [self._mask(backend, p) for p in self.params]

    @staticmethod
    def _mask(backend, param):
        if isinstance(backend, LinearBackend):
            mask = torch.ones_like(param)
            mask[:, -1] = 0.0
            return mask
        return None if param.dim() >= 2 else False

    def value(self):
        """``alpha / 2 * ||w||^2`` at the current parameters (a float)."""
        total = 0.0
        for p, mask in zip(self.params, self.masks):
            if mask is False:
                continue
            w = p if mask is None else p * mask
            total += float(w.square().sum())
        return 0.5 * self.alpha * total

    def add_gradient(self, grad_sums, expected_batch):
        """Add ``alpha * w`` to sums that are divided by ``expected_batch`` next."""
        weight = self.alpha * expected_batch
        for total, p, mask in zip(grad_sums, self.params, self.masks):
            if mask is False:
                continue
            total.add_(p if mask is None else p * mask, alpha=weight)


class SmoothedL1Penalty(L2Penalty):
    """The penalty ``alpha * (R_mu(w) + l2 / 2 * ||w||^2)`` on the same
    weights as :class:`L2Penalty`, with the smoothed l1 norm
    ``R_mu(w) = sum_j (sqrt(w_j^2 + mu^2) - mu)``.

    Like :class:`L2Penalty` it depends on the parameters only, so its
    gradient ``alpha * (w / sqrt(w^2 + mu^2) + l2 * w)`` is added after the
    noise (post-processing). ``R_mu`` is convex and ``1 / mu``-smooth but not
    strongly convex; the optional ``l2`` part makes the penalty
    ``alpha * l2``-strongly convex.

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
    alpha : float
        Penalty strength.
    smoothing : float, default=0.01
        The smoothing width ``mu > 0`` (public).
    l2 : float, default=0.0
        Weight of the extra ``||w||^2 / 2`` part.
    """

    def __init__(self, backend, alpha, smoothing=0.01, l2=0.0):
        super().__init__(backend, alpha)
        if not smoothing > 0:
            raise ValueError(f"smoothing must be positive, got {smoothing!r}.")
        self.smoothing = float(smoothing)
        self.l2 = float(l2)

    def _weights(self):
        for p, mask in zip(self.params, self.masks):
            if mask is not False:
                yield p if mask is None else p * mask

    def value(self):
        """The penalty at the current parameters (a float)."""
        mu, total = self.smoothing, 0.0
        for w in self._weights():
            total += float((torch.sqrt(w.square() + mu * mu) - mu).sum())
            total += 0.5 * self.l2 * float(w.square().sum())
        return self.alpha * total

    def add_gradient(self, grad_sums, expected_batch):
        """Add the penalty's gradient to sums divided by ``expected_batch`` next."""
        weight = self.alpha * expected_batch
        mu = self.smoothing
        for total, p, mask in zip(grad_sums, self.params, self.masks):
            if mask is False:
                continue
            w = p if mask is None else p * mask
            grad = w / torch.sqrt(w.square() + mu * mu)
            if self.l2:
                grad = grad + self.l2 * w
            total.add_(grad, alpha=weight)


def make_penalty(backend, alpha):
    """:class:`L2Penalty` for ``alpha > 0``, else None.

    ``alpha`` may also be a factory ``backend -> penalty`` (e.g.
    ``functools.partial(SmoothedL1Penalty, alpha=..., smoothing=...)``),
    which is called on ``backend``.
    """
    if callable(alpha):
        return alpha(backend)
    return L2Penalty(backend, alpha) if alpha else None


def gradient_noise_stream(parameters, generator):
    """Standard normal stream for the noise of all ``parameters`` at once."""
    size = sum(p.numel() for p in parameters)
    return NoiseStream(size, generator, dtype=parameters[0].dtype)


class TailAverage:
    """Running average of parameters over the last ``fraction`` of the steps.

    Averaging iterates is post-processing of the private updates, so it costs
    no privacy; it damps the oscillation of descent-ascent and the noise of
    the last iterate.
    """

    def __init__(self, params, n_steps, fraction):
        self.params = params
        self.start = n_steps - int(round(fraction * n_steps)) if fraction > 0 else n_steps
        self.count = 0
        self.sums = [torch.zeros_like(p) for p in params]

    def update(self, step):
        if step >= self.start:
            self.count += 1
            for total, p in zip(self.sums, self.params):
                total.add_(p)

    def finalize(self):
        """Write the averages into the parameters (no-op without averaging)."""
        if self.count:
            with torch.no_grad():
                for total, p in zip(self.sums, self.params):
                    p.copy_(total / self.count)


# ------------------------------------------------------------ DP-SGD loop
@dataclass(frozen=True)
class DPSGDConfig:
    """Settings of one DP-SGD run, built by the estimator.

    ``noise_multiplier=None`` trains non-privately (clipped, not noised).
    ``alpha`` is the strength of the penalty ``alpha / 2 * ||w||^2`` on the
    weights (not the intercepts), added after the noise (post-processing).
    ``head`` is the loss head (default: softmax cross-entropy).
    ``averaging`` is the fraction of final steps whose iterates are averaged
    into the returned parameters (post-processing; 0 keeps the last iterate).
    """

    n_steps: int
    sampling_rate: float
    max_grad_norm: float
    noise_multiplier: float = None
    optimizer: str = "sgd"
    learning_rate: float = 1.0
    momentum: float = 0.0
    verbose: int = 0
    alpha: float = 0.0
    head: object = None
    averaging: float = 0.0


@torch.inference_mode()
def train_dpsgd(backend, onehot, config, generator, units=None):
    """Run DP-SGD on ``backend`` and return a history of private quantities.

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
    onehot : tensor of shape (n_samples, n_outputs)
        Per-sample targets of the head: one-hot labels for cross-entropy,
        a column of targets for the squared loss.
    config : DPSGDConfig
    generator : torch.Generator or SecureGenerator
    units : UnitBounds or None, default=None
        Privacy units (:func:`~skdp.privacy.bound_units`): batches are
        Poisson samples of units, each with its kept records, and sums are
        divided by the expected number of units (``config.sampling_rate``
        is then a rate over units). The backend's ``record_weights`` must
        hold the units' factors. None: Poisson samples of records.

    Returns
    -------
    dict
        ``"clipped_fraction"``: tensor (n_steps,) of the share of per-sample
        gradients whose norm exceeded ``max_grad_norm`` (non-private debug
        output; only exposed when the estimator's ``verbose`` is on) and
        ``"batch_size"``: realised batch sizes (likewise non-private).

    Notes
    -----
    On CUDA a linear backend's steps run at a fixed shape and are replayed
    as a CUDA graph (:mod:`skdp._fixed_steps`, :data:`FIXED_SHAPE_STEPS`):
    the same batches and noise, drawn in the same order.
    """
    n_steps, verbose = config.n_steps, config.verbose
    # in a data-parallel fit, onehot holds this rank's rows: the root samples
    # all rows and each rank gets the batch indices of its own
    comm = current_communicator()
    n = comm.total(onehot.shape[0])
    sampler, expected_batch = make_sampler(n, config.sampling_rate, generator, units)
    sampler = comm.shard(sampler)
    clip = config.max_grad_norm
    private = config.noise_multiplier is not None
    noise_std = config.noise_multiplier * clip if private else 0.0
    opt = make_optimizer(config.optimizer, backend.parameters, config.learning_rate, config.momentum)
    head = CrossEntropyHead() if config.head is None else config.head
    penalty = make_penalty(backend, config.alpha)
    average = TailAverage(backend.parameters, n_steps, config.averaging)
    noise = gradient_noise_stream(backend.parameters, generator)
    clipped = torch.zeros(n_steps, device=onehot.device)
    sizes = torch.zeros(n_steps, dtype=torch.long, device=onehot.device)
    report_every = max(1, n_steps // 10)
    # class-major targets: a step gathers contiguous (n_outputs, batch)
    # columns (no copy when the caller stores them so, as the estimators do)
    onehot_t = onehot.T.contiguous()
    start = time.perf_counter()
    mode = _fixed_shape_mode(backend, sampler, opt, comm, config, onehot.device)
    if mode is not None:
        steps = FixedShapeSteps(
            backend, onehot_t, head, clip,
            lambda sums, rows: noisy_update(opt, sums, noise_std, expected_batch, rows, penalty),
            width=sampler.padded_width, chunk_steps=sampler.chunk_steps,
            noise_size=noise.size if noise_std > 0 else None, graphed=mode == "graph")
        counter = itertools.count()
        for indices, mask in sampler.padded_batches(n_steps):
            rows = noise.next_rows(indices.shape[0]) if noise_std > 0 else None
            steps.run_chunk(indices, mask, rows, lambda: average.update(next(counter)))
        average.finalize()
        return {"clipped_fraction": clipped, "batch_size": sizes}
    for step, idx in enumerate(backend.feed(sampler.batches(n_steps))):
        batch, logits = backend.forward(idx)
        targets = (onehot_t.index_select(1, idx),)
        sums, sq_norms = backend.clipped_grad_sum(idx, batch, logits, head, targets, clip)
        noisy_update(opt, sums, noise_std, expected_batch, noise, penalty, comm=comm)
        average.update(step)
        if verbose:
            clipped[step] = (sq_norms > clip**2).float().mean() if idx.numel() else 0.0
            sizes[step] = idx.numel()
            if (step + 1) % report_every == 0 or step + 1 == n_steps:
                print(
                    f"[DP-SGD] step {step + 1}/{n_steps}  "
                    f"elapsed {time.perf_counter() - start:.2f}s"
                )
    average.finalize()
    return {"clipped_fraction": clipped, "batch_size": sizes}


def _fixed_shape_mode(backend, sampler, optimizer, comm, config, device):
    """How :func:`train_dpsgd` runs its steps: None (the eager loop over
    Poisson batches), "eager" or "graph" (fixed-shape steps, see
    :mod:`skdp._fixed_steps`; "graph" on CUDA with momentum SGD).

    Fixed-shape steps apply to a linear backend trained on records (not
    units) in one process, with rows gathered on the device and no
    per-step debug output (``verbose``)."""
    if FIXED_SHAPE_STEPS is False:
        return None
    if not (isinstance(backend, LinearBackend) and type(sampler) is PoissonSampler
            and not comm.distributed and not config.verbose and not backend.prefetch
            and not backend.rows.host_gather):
        return None
    graphed = torch.device(device).type == "cuda" and isinstance(optimizer, MomentumSGD)
    if FIXED_SHAPE_STEPS is True:
        return "graph" if graphed else "eager"
    return "graph" if graphed and config.n_steps >= GRAPH_MIN_STEPS else None
