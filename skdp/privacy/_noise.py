"""Gaussian and Laplace noise drawn from a ``torch.Generator``."""

import torch


def gaussian_noise(like, std, generator):
    """Return N(0, std^2) noise shaped like ``like``.

    Parameters
    ----------
    like : torch.Tensor
        Gives shape, dtype and device.
    std : float or torch.Tensor
        Standard deviation (noise multiplier times sensitivity).
    generator : torch.Generator

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import gaussian_noise
    >>> noise = gaussian_noise(torch.zeros(10_000), 2.0, torch.Generator().manual_seed(0))
    >>> round(float(noise.std()), 1)
    2.0
    """
    noise = torch.empty_like(like).normal_(generator=generator)
    return noise.mul_(std)


def laplace_noise(like, scale, generator):
    """Return Laplace(0, scale) noise shaped like ``like``.

    Drawn as the difference of two unit exponentials times ``scale``.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import laplace_noise
    >>> noise = laplace_noise(torch.zeros(100_000), 2.0, torch.Generator().manual_seed(0))
    >>> round(float(noise.abs().mean()), 1)  # E|Lap(b)| = b
    2.0
    """
    first = torch.empty_like(like).exponential_(generator=generator)
    second = torch.empty_like(like).exponential_(generator=generator)
    return first.sub_(second).mul_(scale)
