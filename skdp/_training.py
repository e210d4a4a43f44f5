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
