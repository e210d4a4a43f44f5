"""Gaussian and Laplace noise from a seeded ``torch.Generator`` or a
:class:`~skdp.privacy.SecureGenerator`."""

import torch

from ._random import exponential_, normal_


def gaussian_noise(like, std, generator):
    """Return N(0, std^2) noise shaped like ``like``.

    Parameters
    ----------
    like : torch.Tensor
        Gives shape, dtype and device.
    std : float or torch.Tensor
        Standard deviation (noise multiplier times sensitivity).
    generator : torch.Generator or SecureGenerator
        Seeded torch generator, or the operating system's CSPRNG.

    Returns
    -------
    noise : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import gaussian_noise
    >>> noise = gaussian_noise(torch.zeros(10_000), 2.0, torch.Generator().manual_seed(0))
    >>> round(float(noise.std()), 1)
    2.0
    """
    return normal_(torch.empty_like(like), generator).mul_(std)


def laplace_noise(like, scale, generator):
    """Return Laplace(0, scale) noise shaped like ``like``.

    Drawn as the difference of two unit exponentials times ``scale``.

    Parameters
    ----------
    like : torch.Tensor
        Gives shape, dtype and device.
    scale : float or torch.Tensor
        Laplace scale b (sensitivity over epsilon).
    generator : torch.Generator or SecureGenerator
        Seeded torch generator, or the operating system's CSPRNG.

    Returns
    -------
    noise : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import laplace_noise
    >>> noise = laplace_noise(torch.zeros(100_000), 2.0, torch.Generator().manual_seed(0))
    >>> round(float(noise.abs().mean()), 1)  # E|Lap(b)| = b
    2.0
    """
    first = exponential_(torch.empty_like(like), generator)
    second = exponential_(torch.empty_like(like), generator)
    return first.sub_(second).mul_(scale)


class NoiseStream:
    """Unit-scale noise vectors drawn a block of steps at a time.

    A training loop needs one fresh noise vector per step. Drawing them
    ``block_steps`` at a time costs one generator call per block instead of
    three tensor operations per step; the vectors are independent of the
    data and of each other, exactly as if drawn one by one.

    Parameters
    ----------
    size : int
        Length of each vector.
    generator : torch.Generator or SecureGenerator
        Seeded torch generator, or the operating system's CSPRNG; its
        ``device`` is the device of the vectors.
    dtype : torch.dtype, default=torch.float32
    kind : {"gaussian", "laplace"}, default="gaussian"
        Standard normal, or Laplace of scale 1.
    block_steps : int, default=256
        Vectors per draw; reduced so that a block holds at most 2**22 values.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import NoiseStream
    >>> stream = NoiseStream(3, torch.Generator().manual_seed(0))
    >>> stream.next().shape
    torch.Size([3])
    >>> from skdp.privacy import SecureGenerator
    >>> NoiseStream(3, SecureGenerator(), kind="laplace").next().dtype
    torch.float32
    """

    def __init__(self, size, generator, *, dtype=torch.float32, kind="gaussian", block_steps=256):
        if kind not in ("gaussian", "laplace"):
            raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}.")
        self.size = int(size)
        self.generator = generator
        self.dtype = dtype
        self.kind = kind
        self.block_steps = max(1, min(int(block_steps), 2**22 // max(self.size, 1)))
        self._block = None
        self._used = self.block_steps

    def next(self):
        """Return the next noise vector, shape (size,)."""
        if self._used == self.block_steps:
            shape = torch.empty(
                (self.block_steps, self.size), dtype=self.dtype, device=self.generator.device
            )
            if self.kind == "laplace":
                self._block = laplace_noise(shape, 1.0, self.generator)
            else:
                self._block = normal_(shape, self.generator)
            self._used = 0
        row = self._block[self._used]
        self._used += 1
        return row

    def next_rows(self, count):
        """The next ``count`` vectors as the rows of one tensor of shape
        ``(count, size)``: those ``count`` calls of :meth:`next` would
        return, drawn at the same points of the generator's stream.

        >>> import torch
        >>> from skdp.privacy import NoiseStream
        >>> rows = NoiseStream(3, torch.Generator().manual_seed(0), block_steps=2).next_rows(5)
        >>> one_by_one = NoiseStream(3, torch.Generator().manual_seed(0), block_steps=2)
        >>> torch.equal(rows, torch.stack([one_by_one.next() for _ in range(5)]))
        True
        """
        parts = []
        while count > 0:
            self.next()  # draws a block when the last one is used up
            take = min(count, self.block_steps - self._used + 1)
            parts.append(self._block[self._used - 1:self._used - 1 + take])
            self._used += take - 1
            count -= take
        if not parts:
            return torch.empty((0, self.size), dtype=self.dtype, device=self.generator.device)
        return parts[0] if len(parts) == 1 else torch.cat(parts)
