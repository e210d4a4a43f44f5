"""DP-SGD training loop (torch only, no scikit-learn)."""

import time
from dataclasses import dataclass

import torch

from .._training import (
    TailAverage,
    gradient_noise_stream,
    make_optimizer,
    make_penalty,
    noisy_update,
)
from ..models import CrossEntropyHead
from ..privacy import PoissonSampler


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


@torch.no_grad()
def train_dpsgd(backend, onehot, config, generator):
    """Run DP-SGD on ``backend`` and return a history of private quantities.

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
    onehot : tensor of shape (n_samples, n_outputs)
        Per-sample targets of the head: one-hot labels for cross-entropy,
        a column of targets for the squared loss.
    config : DPSGDConfig
    generator : torch.Generator or SecureGenerator

    Returns
    -------
    dict
        ``"clipped_fraction"``: tensor (n_steps,) of the share of per-sample
        gradients whose norm exceeded ``max_grad_norm`` (non-private debug
        output; only exposed when the estimator's ``verbose`` is on) and
        ``"batch_size"``: realised batch sizes (likewise non-private).
    """
    n_steps, verbose = config.n_steps, config.verbose
    n = onehot.shape[0]
    onehot_t = onehot.T.contiguous()
    expected_batch = config.sampling_rate * n
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
    start = time.perf_counter()
    sampler = PoissonSampler(n, config.sampling_rate, generator)
    for step, idx in enumerate(sampler.batches(n_steps)):
        batch, logits = backend.forward(idx)
        targets = (onehot_t.index_select(1, idx),)
        sums, sq_norms = backend.clipped_grad_sum(idx, batch, logits, head, targets, clip)
        noisy_update(opt, sums, noise_std, expected_batch, noise, penalty)
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
