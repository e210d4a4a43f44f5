"""Poisson subsampling of training rows (or of privacy units, each with all
its kept records), and the split of records into two
parts by a coin per record, driven by a ``torch.Generator`` or a
:class:`~skdp.privacy.SecureGenerator`."""

import math
from collections import deque
from itertools import islice
from numbers import Integral, Real

import numpy as np
import torch

from ._random import uniform_

#: Most candidate positions (geometric gaps, float64) a sampler draws in one
#: chunk of steps: 32 MiB.
CHUNK_VALUES = 2**22


class Batches:
    """The batches of a sampler, one chunk of steps drawn at a time.

    An iterator of index tensors that can also show the batches it has
    already drawn (:meth:`drawn`) without drawing anything: a data feed can
    then gather their rows ahead of time while the random draws keep the
    order they have without it (a chunk is drawn when its first batch is
    asked for, as by a plain loop).

    Parameters
    ----------
    draw_chunk : callable
        ``draw_chunk(n_steps)`` returns the index tensors of ``n_steps``
        batches.
    n_steps : int
        Number of batches in all.
    chunk_steps : int
        Number of batches drawn at once.
    """

    def __init__(self, draw_chunk, n_steps, chunk_steps):
        self._draw_chunk = draw_chunk
        self._left = int(n_steps)
        self._chunk_steps = int(chunk_steps)
        self._drawn = deque()

    def __iter__(self):
        return self

    def __next__(self):
        if not self._drawn:
            if self._left <= 0:
                raise StopIteration
            size = min(self._chunk_steps, self._left)
            self._drawn.extend(self._draw_chunk(size))
            self._left -= size
        return self._drawn.popleft()

    def drawn(self, count):
        """Up to ``count`` next batches among those already drawn (a list;
        the same tensor objects that iteration returns next)."""
        return list(islice(self._drawn, count))


class PoissonSampler:
    """Draw Poisson-subsampled batches of row indices.

    Each of the ``n_samples`` rows enters each batch independently with
    probability ``sampling_rate``, which is the sampling the accountant's
    ``PoissonSampledDpEvent`` assumes. Batches are drawn in chunks of steps as
    the gaps between selected rows (geometric variables), so a step costs
    O(batch size) rather than O(n_samples), and the host synchronises once
    per chunk rather than once per step.

    Parameters
    ----------
    n_samples : int
        Number of rows to sample from.
    sampling_rate : float
        Inclusion probability, in (0, 1].
    generator : torch.Generator or SecureGenerator
        Source of randomness (seeded, or the operating system's CSPRNG); its
        device is the device of the indices.
    chunk_steps : int, default=256
        Number of steps drawn at once; fewer when a chunk would hold more
        than :data:`CHUNK_VALUES` candidate positions (batches above about
        15,000 rows), so that a chunk's memory does not grow with the data.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import PoissonSampler
    >>> sampler = PoissonSampler(1000, 0.1, torch.Generator().manual_seed(0))
    >>> batches = list(sampler.batches(3))
    >>> len(batches), batches[0].dtype
    (3, torch.int64)
    """

    def __init__(self, n_samples, sampling_rate, generator, *, chunk_steps=256):
        if not 0 < sampling_rate <= 1:
            raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}.")
        self.n_samples = int(n_samples)
        self.sampling_rate = float(sampling_rate)
        self.generator = generator
        self.chunk_steps = max(1, min(int(chunk_steps), CHUNK_VALUES // self._width()))

    def batches(self, n_steps):
        """The ``n_steps`` index tensors (int64, sorted, possibly empty), as
        a :class:`Batches` iterator."""
        return Batches(self._chunk, n_steps, self.chunk_steps)

    def _width(self):
        """Geometric gaps drawn per step at once: the expected batch plus six
        standard deviations (more are drawn in the rare case they fall short)."""
        mean = self.n_samples * self.sampling_rate
        return int(mean + 6.0 * math.sqrt(mean * (1.0 - self.sampling_rate)) + 16)

    def padded_batches(self, n_steps):
        """The ``n_steps`` batches at a fixed shape, a chunk of steps at a time.

        Yields, for each chunk of up to ``chunk_steps`` steps, ``indices``
        (int64) and ``mask`` (bool), both of shape ``(steps, width)``: row
        ``i`` holds step ``i``'s batch, its rows where ``mask`` is True (in
        increasing order, first), then padding (the last row, masked out).
        The random draws and the batches are those of :meth:`batches`, in
        the same order; ``width`` is :attr:`padded_width` (public: it
        depends on ``n_samples`` and ``sampling_rate`` only) except in a
        chunk where a batch ran over it, which is wider. A step that
        weights its rows by ``mask`` computes the sums of the Poisson batch
        exactly, at a shape that does not change from step to step (what a
        CUDA graph needs to replay it).

        >>> import torch
        >>> from skdp.privacy import PoissonSampler
        >>> sampler = PoissonSampler(1000, 0.1, torch.Generator().manual_seed(0))
        >>> indices, mask = next(sampler.padded_batches(3))
        >>> indices.shape == mask.shape == (3, sampler.padded_width)
        True
        """
        left = int(n_steps)
        while left > 0:
            size = min(self.chunk_steps, left)
            positions = self._positions(size)
            mask = positions <= self.n_samples
            yield positions.clamp_(max=self.n_samples).long().sub_(1), mask
            left -= size

    @property
    def padded_width(self):
        """The width of :meth:`padded_batches`: the expected batch plus six
        standard deviations and 16 (a batch is wider with probability
        below 1e-9)."""
        return self._width()

    def _chunk(self, n_steps):
        """The index tensors of ``n_steps`` batches: views of the rows of one
        tensor (a batch is a prefix of its step's candidate positions), so a
        chunk is one allocation of fixed size."""
        positions = self._positions(n_steps)
        counts = self._counts(positions)
        indices = positions.long().sub_(1)
        del positions
        return [row[:count] for row, count in zip(indices, counts)]

    def _flat_chunk(self, n_steps):
        """The indices of ``n_steps`` batches, concatenated, and the size of
        each batch (a list: one host synchronisation per chunk)."""
        positions = self._positions(n_steps)
        counts = self._counts(positions)
        return positions[positions <= self.n_samples].long().sub_(1), counts

    def _counts(self, positions):
        """The size of each step's batch (a list: one host synchronisation
        per chunk)."""
        return (positions <= self.n_samples).sum(1).tolist()

    def _positions(self, n_steps):
        """The 1-based candidate positions of ``n_steps`` batches, one row per
        step (increasing; a row's batch is its positions up to
        ``n_samples``)."""
        n = self.n_samples
        device = self.generator.device
        width = self._width()
        # cumulative geometric gaps
        positions = self._geometric_gaps(n_steps, width, device).cumsum_(1)
        while bool((positions[:, -1] <= n).any()):
            more = self._geometric_gaps(n_steps, width, device).cumsum_(1)
            positions = torch.cat([positions, positions[:, -1:] + more], dim=1)
        return positions

    def _geometric_gaps(self, n_steps, width, device):
        """Geometric(q) variables on {1, 2, ...} by inversion, in float64.

        With U uniform on (0, 1], floor(log U / log(1 - q)) + 1 exceeds k with
        probability (1 - q)^k, the gap between successive Bernoulli(q) hits.
        """
        u = torch.empty((n_steps, width), dtype=torch.float64, device=device)
        uniform_(u, self.generator)
        if self.sampling_rate == 1.0:
            return torch.ones_like(u)
        # log U as log1p(U - 1): U - 1 is exact, and this keeps seeded draws
        # bit-identical to taking log1p(-V) of the torch.rand value V = 1 - U.
        gaps = u.sub_(1.0).log1p_()
        return gaps.div_(math.log1p(-self.sampling_rate)).floor_().add_(1.0)


class UnitSampler:
    """Poisson-subsampled batches of privacy units, each with all its kept
    records.

    Each of the ``n_units`` units enters each batch independently with
    probability ``sampling_rate`` (a :class:`PoissonSampler` over units, the
    sampling of the accountant's ``PoissonSampledDpEvent`` with units in
    place of records), and brings every record it kept
    (:func:`~skdp.privacy.bound_units`): the records of a unit are always
    together in a batch. Units are expanded to record indices through a
    CSR layout built once, a chunk of steps at a time, without a Python loop
    over units. Sums are divided by the expected number of *units*,
    ``sampling_rate * n_units``.

    Parameters
    ----------
    units : UnitBounds
        From :func:`~skdp.privacy.bound_units`.
    sampling_rate : float
        Inclusion probability of a unit, in (0, 1].
    generator : torch.Generator or SecureGenerator
    chunk_steps : int, default=256

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import UnitSampler, bound_units
    >>> g = torch.Generator().manual_seed(0)
    >>> units = bound_units([0, 0, 1, 1, 1, 2], 3, 2, g)
    >>> sampler = UnitSampler(units, 0.5, g)
    >>> sampler.n_units, sampler.expected_batch
    (3, 1.5)
    >>> all(b.numel() in (0, 1, 2, 3, 4, 5) for b in sampler.batches(4))
    True
    """

    def __init__(self, units, sampling_rate, generator, *, chunk_steps=256):
        self.units = PoissonSampler(units.n_units, sampling_rate, generator,
                                    chunk_steps=chunk_steps)
        self.n_units = units.n_units
        self.sampling_rate = float(sampling_rate)
        device = generator.device
        kept = np.flatnonzero(units.kept)
        codes = units.codes[kept]
        # the layout covers the units from the smallest code held here to
        # the largest (all units in one process; a rank's range of them in a
        # data-parallel fit, see expand)
        self.first_unit = int(codes.min()) if codes.size else 0
        codes = codes - self.first_unit
        # kept records grouped by unit (stable: record order within a unit)
        records = kept[np.argsort(codes, kind="stable")]
        sizes = np.bincount(codes)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.records = torch.as_tensor(records, dtype=torch.int64, device=device)
        self.sizes = torch.as_tensor(sizes, dtype=torch.int64, device=device)
        self.offsets = torch.as_tensor(offsets, dtype=torch.int64, device=device)

    @property
    def expected_batch(self):
        """The expected number of units in a batch (public)."""
        return self.sampling_rate * self.n_units

    def batches(self, n_steps):
        """The ``n_steps`` index tensors of records (int64, possibly empty),
        as a :class:`Batches` iterator."""
        return Batches(self._chunk, n_steps, self.units.chunk_steps)

    def _chunk(self, n_steps):
        return self.expand(*self.units._flat_chunk(n_steps))

    def expand(self, units, unit_counts):
        """The record batches of unit batches: ``units`` (int64, the sorted
        units of every step, concatenated) and the number of units of each
        step (a list); a unit without kept records here adds none."""
        if self.first_unit or self.sizes.numel() < self.n_units:
            units, unit_counts = batches_in_range(
                units, unit_counts, self.first_unit, self.first_unit + self.sizes.numel())
        lengths = self.sizes.index_select(0, units)
        ends = lengths.cumsum(0)
        # records per step: the sums of the lengths of each step's units
        bounds = torch.as_tensor(np.cumsum([0] + unit_counts), device=units.device)
        padded = torch.cat([ends.new_zeros(1), ends])
        per_step = (padded[bounds[1:]] - padded[bounds[:-1]]).tolist()
        total = int(sum(per_step))
        starts = self.offsets.index_select(0, units)
        # position j of the expansion belongs to unit u(j): its record is
        # records[offsets[u] + j - (ends[u] - lengths[u])]
        shift = torch.repeat_interleave(starts - (ends - lengths), lengths, output_size=total)
        positions = torch.arange(total, device=units.device) + shift
        return self.records.index_select(0, positions).split(per_step)


def batches_in_range(flat, counts, start, stop):
    """The entries of concatenated batches that lie in ``[start, stop)``,
    shifted by ``-start``, and how many each batch keeps.

    ``flat`` holds the batches one after the other, ``counts`` (a list or a
    tensor) their lengths. Used where one part of the rows or units is
    held: a rank's rows in a data-parallel fit, a rank's range of units.

    Returns
    -------
    kept : torch.Tensor
    kept_counts : list of int

    >>> import torch
    >>> from skdp.privacy import batches_in_range
    >>> kept, counts = batches_in_range(torch.tensor([0, 4, 5, 2, 6]), [3, 2], 2, 6)
    >>> kept.tolist(), counts
    ([2, 3, 0], [2, 1])
    """
    device = flat.device
    counts = torch.as_tensor(counts, dtype=torch.int64, device=device)
    mine = (flat >= start) & (flat < stop)
    steps = torch.repeat_interleave(torch.arange(counts.numel(), device=device), counts,
                                    output_size=flat.numel())
    kept_counts = torch.bincount(steps[mine], minlength=counts.numel()).tolist()
    return flat[mine] - start, kept_counts


def make_sampler(n_samples, sampling_rate, generator, units=None):
    """The sampler of a trainer: :class:`PoissonSampler` over the records,
    or :class:`UnitSampler` over the units of ``units`` (a
    :class:`~skdp.privacy.UnitBounds`) when it is not None.

    Returns ``(sampler, expected_batch)``: sums are divided by the expected
    batch, ``sampling_rate * n_samples`` records or ``sampling_rate *
    n_units`` units (public either way).

    >>> import torch
    >>> from skdp.privacy import make_sampler
    >>> sampler, expected = make_sampler(1000, 0.1, torch.Generator().manual_seed(0))
    >>> type(sampler).__name__, expected
    ('PoissonSampler', 100.0)
    """
    if units is None:
        return PoissonSampler(n_samples, sampling_rate, generator), sampling_rate * n_samples
    sampler = UnitSampler(units, sampling_rate, generator)
    return sampler, sampler.expected_batch


def bernoulli_split(n_samples, fraction, generator):
    """Put each record in a part by a coin of its own.

    Record ``i`` is in the part (``mask[i]`` is True) when the ``i``-th
    uniform drawn from ``generator`` is at most ``fraction``: with
    probability ``fraction``, independently of every other record and of
    the data. Adding or removing a record adds or removes its coin and
    changes no other record's part, so the two parts are disjoint by
    construction under add/remove-one neighbours. A split by position (the
    first ``round(fraction * n)`` records of a permutation) has no such
    property: adding a record moves others between the parts. The size of
    the part is random, ``Binomial(n_samples, fraction)``.

    Parameters
    ----------
    n_samples : int
        Number of records, at least 0.
    fraction : float in (0, 1)
        Probability that a record is in the part.
    generator : torch.Generator or SecureGenerator
        Source of the coins: seeded for reproducible experiments, or the
        operating system's CSPRNG. The mask is on its device.

    Returns
    -------
    mask : torch.Tensor of bool, shape (n_samples,)
        True for the records in the part.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import bernoulli_split
    >>> mask = bernoulli_split(10_000, 0.2, torch.Generator().manual_seed(0))
    >>> mask.dtype, tuple(mask.shape)
    (torch.bool, (10000,))
    >>> round(float(mask.double().mean()), 2)
    0.2
    """
    if not (isinstance(n_samples, Integral) and n_samples >= 0):
        raise ValueError(f"n_samples must be an integer >= 0, got {n_samples!r}.")
    if not (isinstance(fraction, Real) and 0 < fraction < 1):
        raise ValueError(f"fraction must be a probability in (0, 1), got {fraction!r}.")
    coins = torch.empty(int(n_samples), dtype=torch.float64, device=generator.device)
    # uniforms on (0, 1]: P(U <= fraction) = fraction
    return uniform_(coins, generator) <= float(fraction)
