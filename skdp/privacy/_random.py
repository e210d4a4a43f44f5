"""Sources of randomness for the privacy engine.

Every random draw of the engine (Poisson sampling, Gaussian and Laplace
noise) goes through :func:`uniform_`, :func:`normal_` and
:func:`exponential_`. They take either a seeded ``torch.Generator``, and then
call the very torch methods that draw from it (so that seeded training is
reproducible), or a :class:`SecureGenerator`, and then draw from the
operating system's cryptographically secure generator.
"""

import math
import os

import numpy as np
import torch

_MANTISSA_BITS = 53


class SecureGenerator:
    """Randomness from the operating system's CSPRNG (``os.urandom``).

    A stand-in for ``torch.Generator`` in the privacy engine: pass it wherever
    the engine takes a ``generator``. Its draws cannot be predicted from
    earlier outputs or from a seed, because there is no seed; hence they
    cannot be reproduced either. Draws are made on the CPU in float64 and
    then moved to the dtype and device of the tensor being filled.

    Parameters
    ----------
    device : str or torch.device, default="cpu"
        Device of the tensors the engine creates from this generator (for
        example the indices of :class:`~skdp.privacy.PoissonSampler`).

    Attributes
    ----------
    device : torch.device

    Examples
    --------
    >>> from skdp.privacy import SecureGenerator
    >>> generator = SecureGenerator()
    >>> generator.device
    device(type='cpu')
    >>> u = generator.random(5)
    >>> bool(((u > 0) & (u <= 1)).all())
    True
    """

    def __init__(self, device="cpu"):
        self.device = torch.device(device)

    def __repr__(self):
        return f"SecureGenerator(device={str(self.device)!r})"

    def random(self, size):
        """Return ``size`` independent uniforms on (0, 1] as a float64 array.

        Each value is ``(k + 1) / 2**53`` with ``k`` a uniform 53-bit integer
        read from ``os.urandom``, so every value is an exact float64 and none
        is 0.
        """
        size = int(size)
        words = np.frombuffer(os.urandom(8 * size), dtype=np.uint64)
        integers = words >> np.uint64(64 - _MANTISSA_BITS)
        return (integers.astype(np.float64) + 1.0) * 2.0**-_MANTISSA_BITS

    def standard_normal(self, size):
        """Return ``size`` standard normal float64 values (Box--Muller)."""
        size = int(size)
        n_pairs = (size + 1) // 2
        u = self.random(2 * n_pairs).reshape(2, n_pairs)
        # Box-Muller: for U1, U2 uniform on (0, 1], R = sqrt(-2 log U1) and
        # theta = 2 pi U2 give two independent N(0, 1): R cos(theta), R sin(theta).
        radius = np.sqrt(-2.0 * np.log(u[0]))
        angle = 2.0 * math.pi * u[1]
        return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]

    def standard_exponential(self, size):
        """Return ``size`` Exp(1) float64 values, ``-log U`` by inversion."""
        return np.negative(np.log(self.random(size)))


def _fill_(tensor, values):
    """Copy a float64 numpy array into ``tensor`` (any float dtype, device)."""
    if not tensor.is_floating_point():
        raise TypeError(f"random draws need a floating-point tensor, got {tensor.dtype}.")
    return tensor.copy_(torch.from_numpy(values).view(tensor.shape))


def _seeded_fill_(tensor, generator, fill_):
    """Apply ``fill_`` (an in-place draw from the torch ``generator``) to
    ``tensor``; a tensor on another device than the generator (a small host
    release of a CUDA fit) is drawn on the generator's device and copied, so
    the seeded stream is the same wherever the result lives."""
    if tensor.device == generator.device:
        fill_(tensor)
    else:
        draw = torch.empty(tensor.shape, dtype=tensor.dtype, device=generator.device)
        fill_(draw)
        tensor.copy_(draw)


def is_secure(generator):
    """Whether ``generator`` draws from the operating system's CSPRNG.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import SecureGenerator, is_secure
    >>> is_secure(SecureGenerator()), is_secure(torch.Generator())
    (True, False)
    """
    return isinstance(generator, SecureGenerator)


def uniform_(tensor, generator):
    """Fill ``tensor`` in place with uniforms on (0, 1] and return it.

    Parameters
    ----------
    tensor : torch.Tensor
        Floating-point tensor to fill.
    generator : torch.Generator or SecureGenerator
        A ``torch.Generator`` draws ``U`` with ``torch.rand`` and stores
        ``1 - U`` (exact in binary floating point, so the seeded stream is
        unchanged); a :class:`SecureGenerator` draws 53-bit uniforms from
        ``os.urandom`` and casts them, raising any value that the cast would
        round to 0 to the smallest normal number of the dtype.

    Returns
    -------
    tensor : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import SecureGenerator, uniform_
    >>> u = uniform_(torch.empty(1000, dtype=torch.float16), SecureGenerator())
    >>> bool(((u > 0) & (u <= 1)).all())
    True
    """
    if is_secure(generator):
        _fill_(tensor, generator.random(tensor.numel()))
        return tensor.clamp_(min=torch.finfo(tensor.dtype).tiny)
    _seeded_fill_(tensor, generator, lambda out: torch.rand(
        out.shape, dtype=out.dtype, device=out.device, generator=generator, out=out))
    return tensor.neg_().add_(1.0)


def normal_(tensor, generator):
    """Fill ``tensor`` in place with standard normal values and return it.

    A ``torch.Generator`` is used through ``Tensor.normal_``; a
    :class:`SecureGenerator` through Box--Muller on its uniforms, computed in
    float64 and then cast to the tensor's dtype.

    Parameters
    ----------
    tensor : torch.Tensor
    generator : torch.Generator or SecureGenerator

    Returns
    -------
    tensor : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import SecureGenerator, normal_
    >>> z = normal_(torch.empty(100_000), SecureGenerator())
    >>> round(float(z.std()), 1)
    1.0
    """
    if is_secure(generator):
        _fill_(tensor, generator.standard_normal(tensor.numel()))
    else:
        _seeded_fill_(tensor, generator, lambda out: out.normal_(generator=generator))
    return tensor


def exponential_(tensor, generator):
    """Fill ``tensor`` in place with Exp(1) values and return it.

    A ``torch.Generator`` is used through ``Tensor.exponential_``; a
    :class:`SecureGenerator` through ``-log U`` on its uniforms (in float64,
    then cast).

    Parameters
    ----------
    tensor : torch.Tensor
    generator : torch.Generator or SecureGenerator

    Returns
    -------
    tensor : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import SecureGenerator, exponential_
    >>> e = exponential_(torch.empty(100_000), SecureGenerator())
    >>> round(float(e.mean()), 1)
    1.0
    """
    if is_secure(generator):
        _fill_(tensor, generator.standard_exponential(tensor.numel()))
    else:
        _seeded_fill_(tensor, generator, lambda out: out.exponential_(generator=generator))
    return tensor


# ------------------------------------------------- counter-based row streams
#: Uniforms per counter value of the Philox-4x64 generator.
_PHILOX_WORDS = 4


def stream_key(generator):
    """A 124-bit key drawn from the seeded ``generator``, for
    :func:`counter_uniforms` (two int64 draws of 62 bits).

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import stream_key
    >>> key = stream_key(torch.Generator().manual_seed(0))
    >>> key.shape, key.dtype
    (torch.Size([2]), torch.int64)
    """
    if is_secure(generator):
        raise TypeError("stream_key derives seeded streams; a SecureGenerator draws each "
                        "value from the operating system instead.")
    return torch.randint(0, 2**62, (2,), dtype=torch.int64, generator=generator,
                         device=generator.device).cpu()


def counter_uniforms(key, start, count):
    """Uniforms on [0, 1) number ``start`` to ``start + count - 1`` of the
    stream of ``key`` (a float64 ndarray).

    A counter-based stream (Philox-4x64 of ``numpy.random``, its raw 64-bit
    words, 53 bits of each): value ``i`` depends on the key and ``i`` only,
    so a process that holds rows ``start .. start + count - 1`` of a table
    draws their values without drawing, storing or receiving the others',
    and the values are those of one draw over the whole table.

    Parameters
    ----------
    key : tensor of two int64 (:func:`stream_key`)
    start, count : int

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skdp.privacy import counter_uniforms
    >>> key = torch.tensor([3, 7])
    >>> whole = counter_uniforms(key, 0, 10)
    >>> bool(np.array_equal(counter_uniforms(key, 6, 4), whole[6:]))
    True
    """
    first, second = (int(k) for k in key.tolist())
    bits = np.random.Philox(key=(first << 64) | second)
    start, count = int(start), int(count)
    bits.advance(start // _PHILOX_WORDS)
    skip = start % _PHILOX_WORDS
    words = bits.random_raw(skip + count)[skip:]
    return (words >> np.uint64(64 - _MANTISSA_BITS)).astype(np.float64) * 2.0**-_MANTISSA_BITS
