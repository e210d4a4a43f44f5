"""DP-SGD training loop (torch only, no scikit-learn)."""

import time

import torch

from .._training import gradient_noise_stream, make_optimizer, noisy_update
from ..models import CrossEntropyHead
from ..privacy import PoissonSampler


@torch.no_grad()
def train_dpsgd(
    backend, onehot, *, n_steps, sampling_rate, max_grad_norm, noise_multiplier,
    optimizer, learning_rate, momentum, generator, verbose=0,
):
    """Run DP-SGD on ``backend`` and return a history of private quantities.

    ``noise_multiplier=None`` trains non-privately: clipped but not noised.

    Returns
    -------
    dict
        ``"clipped_fraction"``: tensor (n_steps,) of the share of per-sample
        gradients whose norm exceeded ``max_grad_norm`` (non-private debug
        output; only exposed when the estimator's ``verbose`` is on) and
        ``"batch_size"``: realised batch sizes (likewise non-private).
    """
    n = onehot.shape[0]
    onehot_t = onehot.T.contiguous()
    expected_batch = sampling_rate * n
    private = noise_multiplier is not None
    clip = max_grad_norm
    noise_std = noise_multiplier * max_grad_norm if private else 0.0
    opt = make_optimizer(optimizer, backend.parameters, learning_rate, momentum)
    head = CrossEntropyHead()
    noise = gradient_noise_stream(backend.parameters, generator)
    clipped = torch.zeros(n_steps, device=onehot.device)
    sizes = torch.zeros(n_steps, dtype=torch.long, device=onehot.device)
    report_every = max(1, n_steps // 10)
    start = time.perf_counter()
    sampler = PoissonSampler(n, sampling_rate, generator)
    for step, idx in enumerate(sampler.batches(n_steps)):
        batch, logits = backend.forward(idx)
        targets = (onehot_t.index_select(1, idx),)
        sums, sq_norms = backend.clipped_grad_sum(idx, batch, logits, head, targets, clip)
        noisy_update(opt, sums, noise_std, expected_batch, noise)
        if verbose:
            clipped[step] = (sq_norms > clip**2).float().mean() if idx.numel() else 0.0
            sizes[step] = idx.numel()
            if (step + 1) % report_every == 0 or step + 1 == n_steps:
                print(
                    f"[DP-SGD] step {step + 1}/{n_steps}  "
                    f"elapsed {time.perf_counter() - start:.2f}s"
                )
    return {"clipped_fraction": clipped, "batch_size": sizes}
