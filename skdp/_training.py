"""Pieces of a private training step shared by every trainer."""

import torch

from .privacy import gaussian_noise

OPTIMIZERS = ("sgd", "adam")


def make_optimizer(name, params, learning_rate, momentum=0.0):
    """Torch optimizer applied to privatised gradients (post-processing)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=learning_rate, momentum=momentum)
    if name == "adam":
        return torch.optim.Adam(params, lr=learning_rate)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}.")


def noisy_update(optimizer, params, grad_sums, noise_std, expected_batch, generator):
    """Add N(0, noise_std^2) to clipped sums, average by the expected batch, step.

    Dividing by the *expected* Poisson batch size (not the realised one) keeps
    the update a post-processing of the noisy sum.
    """
    with torch.no_grad():
        for p, total in zip(params, grad_sums):
            if noise_std > 0:
                total = total + gaussian_noise(total, noise_std, generator)
            p.grad = total.div_(expected_batch)
        optimizer.step()
