"""DP-FERMI / SteFFLe training: noisy stochastic gradient descent-ascent on
``loss + lam * ERMI`` from one or several data silos (specs/fair_fl.md §2.5).

The loop is split the way a federated deployment splits it:

* :func:`silo_step` -- what a silo computes from the broadcast state (the
  model, the dual tensor ``W`` and the ERMI tables) and its own Poisson
  batch: clipped per-record sums of the model gradient, of the W-gradient
  and of a monitoring vector, each plus the silo's own Gaussian noise,
  divided by the silo's expected batch size. Several silos are computed in
  one tensor pass (per-silo sums through a silo one-hot matrix, per-silo
  noise rows); a federated engine calls it with one silo's batch.
* :func:`server_step` -- the server's size-weighted average of the messages,
  a descent step on the model and a projected ascent step on ``W``.

Data-parallel (:mod:`skdp.distributed`, one silo whose rows are spread over
the ranks): the root draws the silo's batches of global positions and its
noise; each rank computes the sums of its own sampled records, and the
messages, group counts and model check are summed over the ranks with the
root's noise in them once (:class:`InProcessSilos`).

Sample weights (in process): the records' weight factors (in [0, 1],
:class:`SiloData`) multiply every per-record term after it is bounded -- the clipped
model gradient, the clipped W-gradient, the monitoring terms and the group
counts -- so no sensitivity changes.

Privacy units (``unit_ids``, a unit's records all in one silo): each silo
keeps at most ``max_records_per_unit`` records of each of its units
(:func:`~skdp.fairness.fermi.protocol.silo_unit_bounds`), whose unit factors
``1 / min(|u|, k)`` join the record weights (and weigh the model check), and
Poisson-samples its *units*, each with all its kept records
(:class:`~skdp.privacy.UnitSampler`); sums are divided by the expected
number of units. A unit then moves every release as one record does.

Memory: the rows are never copied. The backend gathers each round's batch;
the silos' records need not be contiguous rows (:class:`SiloData` maps a
record to its row), and whatever touches every record (the input norms,
the model check) runs a block of rows at a time. Each silo draws its
batches a chunk of rounds at a time (:class:`SiloDraws`): on a GPU the
host waits for the device once per chunk, never inside a round.

Nothing here imports Flower or scikit-learn; noise scales come from the
silos' release plans (:mod:`.protocol`).
"""

import copy
import math
import time
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from ..._training import TailAverage, make_optimizer, one_torch_thread
from ...models import LinearBackend, check_sums, make_backend, top_class
from ...privacy import (
    LocalCommunicator,
    PoissonSampler,
    UnitSampler,
    clip_factors,
    current_communicator,
    gaussian_noise,
    normal_,
    weigh,
)
from ._ermi import project_frobenius, w_gradient_from_sums
from .protocol import (
    CHECK_ROUND,
    PRIORS_ROUND,
    Broadcast,
    FermiNoise,
    SiloMessages,
    sampling_chunk_rounds,
    theta_noise_factor,
)

SCHEDULES = ("constant", "cosine", "step")

#: The communicator of a silo whose records are all in this process.
_LOCAL = LocalCommunicator()


# ------------------------------------------------------------------ config
@dataclass(frozen=True)
class FermiConfig:
    """Settings of one DP-FERMI run, built by the estimator.

    Attributes
    ----------
    n_rounds : int
        Communication rounds; one noisy gradient step each.
    silo_sizes : tuple of int
        Public size of each silo: its records, or its privacy units with
        ``unit_ids``. Records of silo ``j`` are rows
        ``sum(record_sizes[:j]) ...`` of the data.
    sampling_rates : tuple of float
        Poisson sampling rate of each silo (expected batch ``q_j * n_j``,
        records or units).
    lam : float
        Weight of the ERMI term.
    max_grad_norm : float
        Clipping bound C of each record's model gradient.
    w_clip : float
        Clipping bound of each record's W-gradient (the bound computed from
        the released priors and ``w_radius``).
    w_radius : float
        Frobenius radius of each stratum's dual matrix.
    privacy_unit : {"record", "sensitive_attribute"}
        ``"record"``: each record's whole model gradient (loss and ERMI
        parts) is clipped and noised. ``"sensitive_attribute"``: the loss
        and ERMI parts of each record's gradient are clipped separately and
        their sum ``loss + lam * psi`` is noised with ``max(lam, 1)`` times
        the psi scale, so the noise never vanishes (not at ``lam = 0``
        either) and no record's gradient leaves unclipped or unnoised.
    noise : FermiNoise
    learning_rate : float
        Model step size.
    schedule : {"constant", "cosine", "step"}
        Step-size schedule over rounds: constant, cosine decay to 0, or
        times 0.8 after every tenth of the rounds.
    momentum : float
    optimizer : {"sgd", "adam"}
    w_learning_rate : float
        Ascent step size of ``W`` on the mean W-gradient of ``psi`` (not
        scaled by ``lam``: the maximizer of ``lam * psi`` does not depend on
        ``lam``).
    averaging : float
        Fraction of final rounds whose model parameters are averaged.
    loss_bound, psi_bound : float
        Per-record clamps of the monitored loss and ``psi`` values.
    verbose : int
    record_sizes : tuple of int or None
        Records per silo when the silos' sizes count units (in process, the
        layout of the rows), or this rank's records of the one silo in a
        data-parallel fit (the silo's size counts every rank's); None when
        they count the records held here.
    """

    n_rounds: int
    silo_sizes: tuple
    sampling_rates: tuple
    lam: float
    max_grad_norm: float
    w_clip: float
    w_radius: float
    privacy_unit: str = "record"
    noise: FermiNoise = FermiNoise()
    learning_rate: float = 1.0
    schedule: str = "constant"
    momentum: float = 0.0
    optimizer: str = "sgd"
    w_learning_rate: float = 0.5
    averaging: float = 0.0
    loss_bound: float = 5.0
    psi_bound: float = 2.0
    verbose: int = 0
    record_sizes: tuple = None

    @property
    def n_silos(self):
        return len(self.silo_sizes)

    @property
    def rows_per_silo(self):
        """Records of each silo: contiguous blocks of rows, in silo order."""
        return self.silo_sizes if self.record_sizes is None else self.record_sizes

    @property
    def expected_batches(self):
        return tuple(q * n for q, n in zip(self.sampling_rates, self.silo_sizes))

    @property
    def silo_weights(self):
        """Server weights ``n_j / n`` (public silo sizes: records or units)."""
        total = float(sum(self.silo_sizes))
        return tuple(n / total for n in self.silo_sizes)


#: Rows per block when a silo's per-record tables or its model check are
#: computed over all its records (a block of rows at a time, never a copy
#: of the whole table).
_BLOCK_ROWS = 16384


def _blocks(start, stop):
    """``(a, b)`` ranges that cover ``start .. stop - 1``, at most
    :data:`_BLOCK_ROWS` long."""
    return [(a, min(stop, a + _BLOCK_ROWS)) for a in range(start, stop, _BLOCK_ROWS)]


@dataclass
class SiloData:
    """Per-record tensors of the silos' records, in silo order (silo ``j``'s
    records are positions ``sum(record_sizes[:j]) ...``).

    ``records`` (2 + l, n): squared norm of each record's model input (what
    multiplies the linear weights, the bias input included; 0 for other
    models), 1 for records in a stratum, one-hot label rows.
    ``cells`` (n,): ERMI cell of each record.
    ``weights`` (n,) or None: factors in [0, 1] of the records (sample
    weights, class and unit factors) that multiply every clipped term.
    ``rows`` (n,) long or None: the row of the backend's data that holds
    each record (the silos' records need not be contiguous in the data, so
    that it is never reordered); None when record ``i`` is row ``i``.
    """

    records: torch.Tensor
    cells: torch.Tensor
    weights: torch.Tensor = None
    rows: torch.Tensor = None

    @classmethod
    def build(cls, backend, onehot, cells, n_cells, weights=None, rows=None):
        """The tables of records whose one-hot labels are ``onehot``: the
        input norms are computed a block of records at a time from the
        backend's own batches (no copy of its data)."""
        n = onehot.shape[0]
        records = onehot.new_empty((2 + onehot.shape[1], n))
        records[0] = 0.0
        data = cls(records, cells, weights, rows)
        if isinstance(backend, LinearBackend):
            for a, b in _blocks(0, n):
                positions = torch.arange(a, b, device=cells.device)
                batch, _ = backend.forward(data.backend_rows(positions))
                records[0, a:b] = (batch * batch).sum(1)
        records[1] = cells < n_cells
        records[2:] = onehot.T
        return data

    def backend_rows(self, idx):
        """The backend's rows of the records at positions ``idx``."""
        return idx if self.rows is None else self.rows.index_select(0, idx)

    def batch_weights(self, idx):
        """The weight factors of the records at positions ``idx``, or None."""
        return None if self.weights is None else self.weights.index_select(0, idx)


class SiloContext:
    """Constants of the silo step for a run: ``1 / b_j`` and each release's
    noise standard deviation per silo, as tensors (built once)."""

    def __init__(self, config, n_theta_parts, dtype, device):
        def tensor(values):
            return torch.tensor(values, dtype=dtype, device=device)

        self.inv_batches = tensor([1.0 / b for b in config.expected_batches])
        noise = config.noise
        self.stds = None
        if noise.private:
            theta = noise.theta
            if config.privacy_unit != "record":
                theta = tuple(theta_noise_factor(config.privacy_unit, config.lam) * s
                              for s in theta)
            self.stds = [tensor(theta)] * n_theta_parts + [tensor(noise.w), tensor(noise.monitor)]


class SiloDraws:
    """One silo's random draws in a run: its Poisson batches, drawn a chunk
    of rounds at a time, and each round's noise row.

    The order is fixed, so that every engine draws the same: the batches of
    rounds ``c K .. c K + K - 1`` (``K`` from
    :func:`~skdp.fairness.fermi.protocol.sampling_chunk_rounds`, fewer in
    the last chunk) are one chunk of a
    :class:`~skdp.privacy.PoissonSampler` (or a
    :class:`~skdp.privacy.UnitSampler` over the silo's units) drawn from
    ``randomness.sampling(c)`` when one of its rounds is first asked for;
    the noise row of round ``r`` is the first draw from
    ``randomness.at(r)``. On a GPU the host then waits for the device once
    per chunk, not once per round.

    Parameters
    ----------
    randomness : SiloRandomness
    size : int
        The silo's records, or its units with ``units``.
    sampling_rate : float
    n_rounds : int
    units : skdp.privacy.UnitBounds or None
        The silo's privacy units: each batch is a Poisson sample of units,
        each with all its kept records (grouped by unit).
    comm : LocalCommunicator or None, default=None
        In a data-parallel fit (one silo spread over the ranks), the
        communicator: the root draws each chunk of batches of global
        positions and every rank keeps those of its own records. None: the
        silo's records are all here.

    Examples
    --------
    >>> import torch
    >>> from skdp.fairness.fermi._trainer import SiloDraws
    >>> from skdp.fairness.fermi.protocol import SiloRandomness
    >>> draws = SiloDraws(SiloRandomness(0, 0), 1000, 0.05, n_rounds=3)
    >>> idx, noise = draws.round(2, noise_size=4, dtype=torch.float64)
    >>> idx.dtype, tuple(noise.shape), draws.chunk_rounds
    (torch.int64, (4,), 3)
    >>> again, _ = SiloDraws(SiloRandomness(0, 0), 1000, 0.05, n_rounds=3).round(2, 0, None)
    >>> bool(torch.equal(idx, again))
    True
    """

    def __init__(self, randomness, size, sampling_rate, n_rounds, units=None, comm=None):
        self.randomness = randomness
        self.comm = _LOCAL if comm is None else comm
        self.size = int(size)
        self.sampling_rate = float(sampling_rate)
        self.n_rounds = int(n_rounds)
        per_unit = 1 if units is None else int(units.max_records)
        self.chunk_rounds = max(1, min(self.n_rounds, sampling_chunk_rounds(
            self.sampling_rate * self.size, per_unit)))
        self._units = None
        if units is not None:  # the layout of the units' records, built once
            self._units = UnitSampler(units, sampling_rate, randomness.sampling(0))
        self._chunk, self._batches = None, []

    def batch(self, round_index):
        """The sorted positions (grouped by unit with units) of round
        ``round_index``'s Poisson batch."""
        chunk, offset = divmod(int(round_index), self.chunk_rounds)
        if chunk != self._chunk:
            self._batches = self._draw_chunk(chunk)
            self._chunk = chunk
        return self._batches[offset]

    def _draw_chunk(self, chunk):
        generator = self.randomness.sampling(chunk)
        steps = min(self.chunk_rounds, self.n_rounds - chunk * self.chunk_rounds)
        if steps < 1:
            raise ValueError(f"round {chunk * self.chunk_rounds} is beyond the run's "
                             f"{self.n_rounds} rounds.")
        if self._units is None:
            sampler = self.comm.shard(
                PoissonSampler(self.size, self.sampling_rate, generator, chunk_steps=steps))
        else:
            sampler = copy.copy(self._units)
            sampler.units = PoissonSampler(self._units.n_units, self.sampling_rate, generator,
                                           chunk_steps=steps)
            sampler = self.comm.shard(sampler)
        return list(sampler.batches(steps))

    def round(self, round_index, noise_size, dtype):
        """Round ``round_index``'s batch and standard normal noise row of
        length ``noise_size`` (None when it is 0: non-private, and on the
        ranks of a data-parallel fit other than the root)."""
        idx = self.batch(round_index)
        if not noise_size or not self.comm.is_root:
            return idx, None
        generator = self.randomness.at(round_index)
        row = torch.empty(int(noise_size), dtype=dtype, device=generator.device)
        return idx, normal_(row, generator)


# ------------------------------------------------------------------ priors
def silo_group_counts(cells, silo_sizes, n_cells, noise_std, randomness, weights=None,
                      comm=None):
    """Each silo's histogram of records per cell, plus its own Gaussian noise.

    Parameters
    ----------
    cells : long tensor of shape (n,)
        Cell of each record (``n_cells`` for records in no stratum, not
        counted); silos are contiguous blocks of rows.
    silo_sizes : sequence of int
    n_cells : int
    noise_std : float or None
        Standard deviation of the noise on each count (None: exact).
    randomness : list of SiloRandomness, one per silo
        Each silo draws its noise from its generator at ``PRIORS_ROUND``.
    weights : tensor of shape (n,) or None
        Sample-weight (and unit) factors in [0, 1] (weighted counts:
        sensitivity 1 still); None counts records.
    comm : LocalCommunicator or None, default=None
        In a data-parallel fit (one silo), the communicator: the counts of
        the ranks' records are summed and the root adds the noise once.

    Returns
    -------
    tensor of shape (n_silos, n_cells)
    """
    comm = _LOCAL if comm is None else comm
    rows = []
    blocks = [None] * len(silo_sizes) if weights is None else weights.split(list(silo_sizes))
    for block, rng, block_weights in zip(cells.split(list(silo_sizes)), randomness, blocks):
        counts = torch.bincount(block, weights=block_weights,
                                minlength=n_cells + 1)[:n_cells].to(torch.float64)
        noise = None
        if noise_std is not None:
            noise = partial(_noise_like, counts, noise_std, rng.at(PRIORS_ROUND))
        rows.append(comm.release(counts, noise))
    return torch.stack(rows)


def _noise_like(values, std, generator):
    """Gaussian noise of standard deviation ``std`` from ``generator``,
    shaped like the tensor ``values`` and on its device."""
    return gaussian_noise(values, std, generator).to(values.device)


def priors_from_counts(counts, n_strata, n_groups, floor=1.0):
    """Server side: group priors per stratum from the silos' (noisy) counts.

    Counts are summed over silos, floored at ``floor`` (noise can make them
    negative) and normalized within each stratum.

    Returns
    -------
    ndarray of shape (n_strata, n_groups)
    """
    total = np.asarray(counts, dtype=np.float64).reshape(-1, n_strata, n_groups).sum(0)
    total = np.maximum(total, floor)
    return total / total.sum(1, keepdims=True)


def theorem_3_3_noise(epsilon, delta, n_rounds, silo_size, batch_size, min_prior,
                      lipschitz, w_entry_bound):
    """Noise of Theorem 3.3 (Gupta et al.), as standard deviations on *sums*.

    The paper adds ``N(0, sigma^2)`` to batch means, with
    ``sigma_w^2 = 16 T ln(1/delta) / (epsilon^2 n^2 rho)`` and
    ``sigma_theta^2 = L^2 D^2 sigma_w^2``; skdp noises sums that are then
    divided by the expected batch, so both are multiplied by ``batch_size``.
    Reproduction only: the accountant does not certify these values
    (specs/fair_fl.md §3.5).

    Returns
    -------
    (theta_std, w_std) : tuple of float

    Examples
    --------
    >>> from skdp.fairness.fermi._trainer import theorem_3_3_noise
    >>> t, w = theorem_3_3_noise(1.0, 1e-5, 100, 1000, 100, 0.25, 1.0, 2.0)
    >>> round(w / 100, 4), round(t / w, 4)
    (0.2714, 2.0)
    """
    sigma_w = 4.0 * math.sqrt(n_rounds * math.log(1.0 / delta)) / (
        epsilon * silo_size * math.sqrt(min_prior)
    )
    sigma_theta = lipschitz * w_entry_bound * sigma_w
    return sigma_theta * batch_size, sigma_w * batch_size


# ---------------------------------------------------------- per-record sums
def _silo_onehot_t(batch_silo, n_silos, dtype):
    """(N, B) indicator of each record's silo; None for one silo."""
    if n_silos == 1:
        return None
    return torch.nn.functional.one_hot(batch_silo, n_silos).T.to(dtype)


def _per_silo(values_t, segments, rows):
    """Per-silo sums of outer products ``values_t[:, i] ⊗ rows[i]``.

    ``values_t`` (l, B), ``rows`` (B, d); the batch holds the silos' records
    in contiguous ``segments`` (lengths; None for one silo). Returns (N, l, d)
    from one product per silo over its own columns (no masking, so the cost
    does not grow with N).
    """
    if segments is None:
        return (values_t @ rows).unsqueeze(0)
    out = values_t.new_empty((len(segments), values_t.shape[0], rows.shape[1]))
    start = 0
    for j, length in enumerate(segments):
        torch.mm(values_t[:, start:start + length], rows[start:start + length], out=out[j])
        start += length
    return out


def _finite(values):
    return values.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)


def _linear_theta_sums(batch, sq_x, e_loss, e_psi, config, segments, weights=None):
    """Clipped per-silo model-gradient sums of a linear model (closed form).

    A record's gradient of a loss of the logits is ``e ⊗ x`` with ``e`` the
    output gradient (class-major columns), so its norm is ``|e| |x|``.
    Returns ``(sums (N, l, d+1), squared norms of the clipped part (B,))``:
    of the whole gradient (``"record"``), of the psi part
    (``"sensitive_attribute"``, whose loss part is clipped on its own).
    ``weights`` (sample-weight factors, or None) multiply the clipped
    gradients.
    """
    lam, clip = config.lam, config.max_grad_norm
    if config.privacy_unit == "record":
        e = e_loss.add_(e_psi, alpha=lam) if lam else e_loss
        sq = (e * e).sum(0).mul_(sq_x)
        scaled = _finite(e.mul_(weigh(clip_factors(sq, clip), weights)))
    else:
        sq = (e_psi * e_psi).sum(0).mul_(sq_x)
        sq_loss = (e_loss * e_loss).sum(0).mul_(sq_x)
        scaled = _finite(e_loss.mul_(weigh(clip_factors(sq_loss, clip), weights))).add_(
            _finite(e_psi * weigh(clip_factors(sq, clip), weights)), alpha=lam)
    return _per_silo(scaled, segments, batch), sq


def _module_theta_sums(module, names, batch, onehot, coef, config, silo_onehot_t,
                       weights=None):
    """Clipped per-silo model-gradient sums of any module (``torch.func``).

    Returns ``(sums: list of (N, *shape) aligned with names, squared norms
    of the clipped part (B,))``; ``weights`` (sample-weight factors, or
    None) multiply the clipped gradients.
    """
    lam, clip = config.lam, config.max_grad_norm
    params = {name: p.detach() for name, p in module.named_parameters() if name in names}
    frozen = {name: p.detach() for name, p in module.named_parameters() if name not in names}
    buffers = {name: b.detach() for name, b in module.named_buffers()}

    def logits_of(params, x):
        return functional_call(module, ({**params, **frozen}, buffers), (x.unsqueeze(0),))[0]

    def loss_part(params, x, y, c):
        return -(y * torch.log_softmax(logits_of(params, x), 0)).sum()

    def psi_part(params, x, y, c):
        return (torch.softmax(logits_of(params, x), 0) * c).sum()

    def record_part(params, x, y, c):
        return loss_part(params, x, y, c) + lam * psi_part(params, x, y, c)

    n_silos = 1 if silo_onehot_t is None else silo_onehot_t.shape[0]
    if batch.shape[0] == 0:
        zeros = [params[n].new_zeros((n_silos, *params[n].shape)) for n in names]
        return zeros, batch.new_zeros(0)
    in_dims = (None, 0, 0, 0)
    silo_t = batch.new_ones((1, batch.shape[0])) if silo_onehot_t is None else silo_onehot_t
    clipped_fn = record_part if config.privacy_unit == "record" else psi_part
    per_sample = vmap(grad(clipped_fn), in_dims=in_dims)(params, batch, onehot, coef)
    sq = sum(g.flatten(1).square().sum(1) for g in per_sample.values())
    finite = torch.isfinite(sq)
    weights_t = silo_t * weigh(clip_factors(sq, clip), weights)
    sums = []
    for name in names:
        g = per_sample[name]
        keep = finite.view(-1, *([1] * (g.dim() - 1)))
        sums.append(torch.tensordot(weights_t, torch.where(keep, g, 0.0), dims=1))
    if config.privacy_unit != "record":
        # the loss part is clipped on its own: no record's gradient unclipped
        loss_grads = vmap(grad(loss_part), in_dims=in_dims)(params, batch, onehot, coef)
        sq_loss = sum(g.flatten(1).square().sum(1) for g in loss_grads.values())
        finite_loss = torch.isfinite(sq_loss)
        loss_t = silo_t * weigh(clip_factors(sq_loss, clip), weights)
        sums = [
            torch.tensordot(
                loss_t,
                torch.where(finite_loss.view(-1, *([1] * (loss_grads[name].dim() - 1))),
                            loss_grads[name], 0.0),
                dims=1,
            ).add_(total, alpha=lam)
            for name, total in zip(names, sums)
        ]
    return sums, sq


def _silo_sums(values_t, batch_silo, n_silos):
    """Per-silo sums of per-record columns ``values_t`` (c, B): (N, c)."""
    if n_silos == 1:
        return values_t.sum(1).unsqueeze(0)
    sums = values_t.new_zeros((values_t.shape[0], n_silos))
    return sums.index_add_(1, batch_silo, values_t).T


# ---------------------------------------------------------------- the steps
def silo_step(backend, idx, batch_silo, data, broadcast, config, context, noise_rows=None,
              segments=None):
    """Noisy messages of the silos whose Poisson batches are ``idx``.

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
        Holds the broadcast model parameters and the silos' feature rows.
    idx : long tensor of shape (B,)
        Positions of the sampled records in ``data``: the silos' batches,
        concatenated in silo order.
    batch_silo : long tensor of shape (B,) or None
        Silo of each sampled record, in ``0 .. N - 1`` (None for one silo).
    data : SiloData
        The silos' per-record tensors (labels, cells, weights) and where
        their rows are in the backend's data.
    broadcast : Broadcast
        ``W`` and the ERMI tables sent by the server.
    config : FermiConfig
        For the ``N`` silos computed here; a federated engine passes one
        silo's config.
    context : SiloContext
    noise_rows : tensor of shape (N, P + M*k*l + 3) or None
        Each silo's standard normal noise for this round, drawn from its own
        generator (None: non-private).
    segments : list of int or None
        Number of sampled records of each silo (None for one silo).

    Returns
    -------
    SiloMessages
    """
    n_silos = config.n_silos
    if n_silos > 1 and segments is None:
        segments = torch.bincount(batch_silo, minlength=n_silos).tolist()
    W = broadcast.W
    n_strata, n_groups, n_classes = W.shape
    n_cells = n_strata * n_groups
    batch, logits_t = backend.forward(data.backend_rows(idx))
    # an extreme record's logits may overflow: keep them finite (NaN -> 0,
    # +-inf -> the largest float) so that its probabilities, W-gradient and
    # monitor terms are finite and bounded like everyone else's
    logits_t = logits_t.nan_to_num(nan=0.0)
    dtype = logits_t.dtype
    record_weights = data.batch_weights(idx)  # sample, class and unit factors, or None
    records = data.records.index_select(1, idx)
    sq_x, inside, onehot_t = records[0], records[1], records[2:]
    cells = data.cells.index_select(0, idx)
    tables = broadcast.tables.index_select(1, cells)
    coef_t, w_sq_t = tables[:n_classes], tables[n_classes:]

    probs_t = torch.softmax(logits_t, dim=0)
    mean_coef = (probs_t * coef_t).sum(0)
    e_psi = probs_t * (coef_t - mean_coef)
    p_true = (probs_t * onehot_t).sum(0)

    # model gradient: clipped per-record sums per silo
    if isinstance(backend, LinearBackend):
        theta, sq = _linear_theta_sums(batch, sq_x, probs_t - onehot_t, e_psi, config, segments,
                                       record_weights)
        theta_sums = [theta]
    else:
        names = [n for n, p in backend.module.named_parameters() if p.requires_grad]
        theta_sums, sq = _module_theta_sums(
            backend.module, names, batch, onehot_t.T, coef_t.T, config,
            _silo_onehot_t(batch_silo, n_silos, dtype), record_weights,
        )

    # W-gradient: per-record norms in closed form, clipped, summed per cell
    sq_w = (probs_t * probs_t * w_sq_t).sum(0).mul_(4.0)
    weighted = probs_t * weigh(clip_factors(sq_w, config.w_clip), record_weights)  # (l, B)
    if n_silos == 1:
        silo_cells = cells
    else:
        silo_cells = torch.where(cells < n_cells, batch_silo * n_cells + cells, n_silos * n_cells)
    sums = weighted.new_zeros((n_classes, n_silos * n_cells + 1))
    sums.index_add_(1, silo_cells, weighted)
    cell_sums = sums[:, :-1].reshape(n_classes, n_silos, n_strata, n_groups).permute(1, 2, 3, 0)
    w_sums = w_gradient_from_sums(cell_sums, W, broadcast.inv_sqrt)

    # monitoring vector: clamped loss, clamped psi, clipped indicator
    loss_bound, psi_bound = config.loss_bound, config.psi_bound
    monitor_t = torch.stack([
        p_true.clamp_(min=math.exp(-loss_bound)).log_().div_(-loss_bound),
        (mean_coef - inside).clamp_(-psi_bound, psi_bound).div_(psi_bound),
        (sq > config.max_grad_norm**2).to(dtype),
    ])
    monitor_t = weigh(monitor_t, record_weights)
    monitor_sums = _silo_sums(monitor_t, batch_silo, n_silos)

    parts = theta_sums + [w_sums, monitor_sums]
    if noise_rows is not None:
        offset = 0
        for total, std in zip(parts, context.stds):
            size = total[0].numel()
            shape = (n_silos,) + (1,) * (total.dim() - 1)
            total.addcmul_(noise_rows[:, offset:offset + size].view(total.shape), std.view(shape))
            offset += size
    for total in parts:
        total.mul_(context.inv_batches.view((n_silos,) + (1,) * (total.dim() - 1)))
    return SiloMessages(theta=theta_sums, w=w_sums, monitor=monitor_sums)


def check_vector(logits_t, y_codes, groups, n_groups, std, generator, weights=None):
    """One silo's check of the returned model on its records: the counts of
    (group, true class, predicted class), flattened, then the sum of the
    per-record log-losses clipped to ``CHECK_LOSS_BOUND`` and divided by it,
    plus Gaussian noise of standard deviation ``std`` (None: exact), in
    float64. One record moves it by at most ``sqrt(2)``; with ``weights``
    (the unit factors of a fit with units, summing to at most 1 over a
    unit) each record adds its factor, so one unit does too.

    Parameters
    ----------
    logits_t : tensor of shape (n_classes, n_records)
        Class-major logits of the returned model.
    y_codes, groups : long tensors of shape (n_records,)
    n_groups : int
    std : float or None
    generator : torch.Generator or SecureGenerator
    weights : tensor of shape (n_records,) or None

    Returns
    -------
    ndarray of shape (n_groups * n_classes**2 + 1,)
    """
    return _noisy(check_sums(logits_t.T, y_codes, groups, n_groups, weights), std, generator)


def silo_check(backend, data, start, stop, groups, n_groups, std, generator, weights=None,
               comm=None):
    """:func:`check_vector` of the records at positions ``start .. stop - 1``
    of ``data`` under the backend's model, computed a block of records at a
    time (``groups`` of those records; ``weights`` their unit factors or
    None). In a data-parallel fit (``comm``, one silo) the ranks' sums are
    added before the root's noise."""
    n_classes = data.records.shape[0] - 2
    values = torch.zeros(n_groups * n_classes * n_classes + 1, dtype=torch.float64,
                         device=data.records.device)
    for a, b in _blocks(start, stop):
        positions = torch.arange(a, b, device=data.records.device)
        logits_t = backend.forward(data.backend_rows(positions))[1]
        labels = top_class(data.records[2:, a:b], dim=0)
        values += check_sums(logits_t.T, labels, groups[a - start:b - start], n_groups,
                              None if weights is None else weights[a - start:b - start])
    return _noisy(values, std, generator, comm)


def _noisy(values, std, generator, comm=None):
    """``values`` (summed over the ranks of ``comm``, if any) plus Gaussian
    noise of standard deviation ``std`` (None: none), as a numpy array."""
    noise = None if std is None else partial(_noise_like, values, std, generator)
    return (_LOCAL if comm is None else comm).release(values, noise).cpu().numpy()


def message_size(parameters, W):
    """Length of one silo's noise row: model, W-gradient and monitor."""
    return sum(p.numel() for p in parameters) + W.numel() + 3


class FermiServer:
    """Server state: the model optimizer, ``W``, the schedule and weights."""

    def __init__(self, backend, broadcast, config):
        self.backend = backend
        self.broadcast = broadcast
        self.config = config
        self.optimizer = make_optimizer(
            config.optimizer, backend.parameters, config.learning_rate, config.momentum
        )
        self.weights = torch.tensor(
            config.silo_weights, dtype=broadcast.W.dtype, device=broadcast.W.device
        )

    def learning_rate(self, step):
        cfg = self.config
        if cfg.schedule == "cosine":
            return cfg.learning_rate * 0.5 * (1.0 + math.cos(math.pi * step / cfg.n_rounds))
        if cfg.schedule == "step":
            return cfg.learning_rate * 0.8 ** (10 * step // max(cfg.n_rounds, 1))
        return cfg.learning_rate


def _set_learning_rate(optimizer, value):
    if hasattr(optimizer, "optimizer"):  # torch optimizer wrapper
        for group in optimizer.optimizer.param_groups:
            group["lr"] = value
    else:
        optimizer.learning_rate = value


def server_step(server, messages, step):
    """Average the silos' messages (weights ``n_j / n``), step the model down
    and ``W`` up (projected), and refresh the broadcast tables.

    Returns
    -------
    tensor of shape (3,)
        The weighted monitoring vector (normalized loss, psi, clipped share).
    """
    weights = server.weights
    cfg = server.config
    if cfg.n_silos == 1:  # weight 1
        grads = [m[0] for m in messages.theta]
        w_step, monitor = messages.w[0], messages.monitor[0]
    else:
        grads = [torch.tensordot(weights, m, dims=1) for m in messages.theta]
        w_step, monitor = torch.tensordot(weights, messages.w, dims=1), weights @ messages.monitor
    lr = server.learning_rate(step)
    _set_learning_rate(server.optimizer, lr)
    server.optimizer.apply(grads, 1.0)
    W = server.broadcast.W
    W.add_(w_step, alpha=cfg.w_learning_rate)
    project_frobenius(W, cfg.w_radius)
    server.broadcast.refresh()
    return monitor


# ------------------------------------------------------------------ the loop
class SiloWorker:
    """One silo's side of a round: the one function every engine runs.

    The in-process per-silo pass (``InProcessSilos(batched=False)``) and a
    remote silo (:class:`skdp.federated.FermiSilo`, in a Flower simulation
    or deployment) both hold one worker per silo and call :meth:`round`.
    The worker reads its records' rows where they are (a batch is gathered
    into a fresh tensor each round, so the caller's memory layout does not
    matter and the data is never copied), owns its parameters, rebuilds the
    broadcast tables from ``W`` and the priors itself, and computes under
    one torch thread, so on one machine a silo's messages are the same bits
    in every engine (a float reduction split over threads is summed in an
    order that depends on their number).

    Parameters
    ----------
    X : tensor of shape (n_rows, n_features)
        Features: the silo's records (read, not copied), or a larger table
        that holds them at ``rows``.
    onehot : tensor of shape (n_records, n_classes)
        One-hot labels.
    cells : long tensor of shape (n_records,)
        ERMI cell of each record.
    n_cells : int
    module : torch.nn.Module or None
        The model's module (None: linear); the worker keeps its own copy.
    groups : array-like of shape (n_records,) or None
    weights : tensor of shape (n_records,) or None
        Factors in [0, 1] of the silo's records: sample weights (in process)
        times the unit factors of ``units``.
    units : skdp.privacy.UnitBounds or None
        The silo's privacy units (its own codes), with the records each
        keeps: the model check weighs each record by its unit factor (the
        batches come from the caller's :class:`SiloDraws`).
    rows : long tensor of shape (n_records,) or None
        The row of ``X`` of each record; None: record ``i`` is row ``i``.
    """

    def __init__(self, X, onehot, cells, n_cells, module, groups=None, weights=None,
                 units=None, rows=None):
        with one_torch_thread():
            module = None if module is None else copy.deepcopy(module)
            self.backend = make_backend(X, onehot.shape[1], module)
            self.data = SiloData.build(self.backend, onehot, cells, n_cells,
                                       weights=weights, rows=rows)
            self.groups = (torch.zeros(onehot.shape[0], dtype=torch.long, device=X.device)
                           if groups is None else torch.as_tensor(groups, device=X.device))
        self.n_records = int(onehot.shape[0])
        self.dtype, self.device = X.dtype, X.device
        self.units = units
        self.unit_factors = None
        if units is not None:
            self.unit_factors = torch.as_tensor(units.factors, dtype=torch.float64,
                                                device=X.device)

    def _set_parameters(self, params):
        for p, value in zip(self.backend.parameters, params, strict=True):
            p.copy_(torch.as_tensor(value, dtype=self.dtype, device=self.device))

    @torch.inference_mode()
    def check(self, generator, params, n_groups, std, comm=None):
        """This silo's noisy check of the returned model ``params``: see
        :func:`check_vector`; noise of standard deviation ``std`` (None:
        exact) drawn from ``generator`` (in a data-parallel fit, ``comm``:
        by the root, once, on the sum over the ranks)."""
        with one_torch_thread():
            self._set_parameters(params)
            return silo_check(self.backend, self.data, 0, self.n_records, self.groups, n_groups,
                              std, generator, self.unit_factors, comm)

    @torch.inference_mode()
    def round(self, draws, round_index, params, W, priors, config):
        """The silo's noisy messages of one round.

        Parameters
        ----------
        draws : SiloDraws
            The silo's draws in this run: round ``round_index``'s batch and
            noise.
        round_index : int
        params : sequence of tensors or arrays
            The broadcast model parameters, aligned with the backend's.
        W : tensor or array of shape (M, k, l)
        priors : tensor or array of shape (M, k)
        config : FermiConfig
            This silo's config (one silo).

        Returns
        -------
        SiloMessages
            With a leading silo axis of length 1.
        """
        def tensor(value):
            return torch.as_tensor(value, dtype=self.dtype, device=self.device)

        with one_torch_thread():
            self._set_parameters(params)
            broadcast = Broadcast(tensor(W).clone(), tensor(priors).rsqrt()).refresh()
            context = SiloContext(config, len(self.backend.parameters), self.dtype, self.device)
            size = message_size(self.backend.parameters, broadcast.W) if config.noise.private else 0
            idx, row = draws.round(round_index, size, self.dtype)
            return silo_step(self.backend, idx, None, self.data, broadcast, config, context,
                             None if row is None else row[None])


class InProcessSilos:
    """All silos in this process: each silo draws its batches and noise
    from its own :class:`SiloRandomness` (through a :class:`SiloDraws`).

    With ``batched=True`` (the default) the silos' messages are computed in
    one tensor pass over their concatenated batches, each silo with its own
    noise row, on the server's own tensors (no copy); the result equals
    separate per-silo passes up to float rounding. With ``batched=False`` each silo is a :class:`SiloWorker`, the
    code a remote silo runs, so in-process and federated fits on one machine
    give bit-identical models by construction.

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
        The server's model (shared: the silos read the parameters the server
        has just updated) on the rows ``X``.
    onehot : tensor of shape (n, l)
        One-hot labels of the records, silos in contiguous blocks
        (``config.rows_per_silo``).
    cells : long tensor of shape (n,)
    n_cells : int
    config : FermiConfig
    randomness : list of SiloRandomness, one per silo
    batched : bool, default=True
    priors : tensor or array of shape (M, k) or None
        The broadcast group priors; needed with ``batched=False``.
    groups : long tensor of shape (n,) or None
    units : list of skdp.privacy.UnitBounds or None
        Each silo's privacy units (codes of its own records): batches are
        Poisson samples of units (``config.silo_sizes`` count units,
        ``config.record_sizes`` records), and the model check weighs each
        record by its unit factor.
    weights : tensor of shape (n,) or None
        Factors in [0, 1] of the records (sample weights, class and unit
        factors).
    rows : long tensor of shape (n,) or None
        The row of the backend's data (and of ``X``) of each record; None:
        record ``i`` is row ``i``.
    X : tensor of shape (n_rows, n_features) or None
        The rows the backend was built on; needed with ``batched=False``
        (each worker reads its records there).

    Notes
    -----
    In a data-parallel fit (:func:`~skdp.privacy.current_communicator`) the
    one silo's records are spread over the ranks: ``config.silo_sizes``
    counts all of them, ``config.record_sizes`` this rank's. The root draws
    the batches of global positions and the noise; each rank computes the
    clipped sums of its own sampled records, and the messages are summed
    over the ranks with the root's noise in them once, so every rank gets
    the same messages.
    """

    def __init__(self, backend, onehot, cells, n_cells, config, randomness, batched=True,
                 priors=None, groups=None, units=None, weights=None, rows=None, X=None):
        self.backend = backend
        self.config = config
        self.randomness = randomness
        self.dtype = onehot.dtype
        self.groups = (torch.zeros(onehot.shape[0], dtype=torch.long, device=onehot.device)
                       if groups is None else groups)
        self.batched = batched
        self.noise_size = None
        self.comm = _data_parallel_communicator(config)
        self.unit_factors = [None] * config.n_silos
        units = [None] * config.n_silos if units is None else units
        if units[0] is not None:
            self.unit_factors = [torch.as_tensor(u.factors, dtype=torch.float64,
                                                 device=onehot.device) for u in units]
        self.draws = [SiloDraws(rng, n, q, config.n_rounds, silo_units, self.comm)
                      for rng, n, q, silo_units in zip(randomness, config.silo_sizes,
                                                       config.sampling_rates, units)]
        self.bounds = np.concatenate([[0], np.cumsum(config.rows_per_silo)]).tolist()
        if self.batched:
            # all silos in one tensor pass: each still draws its batch and
            # noise from its own generator; only the arithmetic is shared
            self.all_data = SiloData.build(backend, onehot, cells, n_cells, weights, rows)
            self.all_context = SiloContext(config, len(backend.parameters), self.dtype,
                                           onehot.device)
            return
        if priors is None or X is None:
            raise ValueError("InProcessSilos(batched=False) needs the broadcast priors and "
                             "the rows X.")
        self.priors = priors
        module = getattr(backend, "module", None)
        self.workers = []
        for a, b, silo_units in zip(self.bounds[:-1], self.bounds[1:], units):
            silo_X, silo_rows = (X[a:b], None) if rows is None else (X, rows[a:b])
            self.workers.append(SiloWorker(
                silo_X, onehot[a:b], cells[a:b], n_cells, module, groups=self.groups[a:b],
                weights=None if weights is None else weights[a:b], units=silo_units,
                rows=silo_rows))
        self.configs = [_silo_config(config, j) for j in range(config.n_silos)]
        if not self.comm.is_root:  # the root adds the noise
            self.configs = [replace(one, noise=FermiNoise()) for one in self.configs]

    @torch.inference_mode()
    def check(self, n_groups, stds):
        """Each silo's noisy check of the returned model (the server's
        current parameters), from its own randomness at ``CHECK_ROUND``:
        a list of vectors (see :func:`check_vector`); ``stds`` per silo."""
        draws = [rng.at(CHECK_ROUND) for rng in self.randomness]
        if not self.batched:
            return [worker.check(gen, self.backend.parameters, n_groups, std, self.comm)
                    for worker, gen, std in zip(self.workers, draws, stds)]
        bounds = self.bounds
        return [silo_check(self.backend, self.all_data, a, b, self.groups[a:b], n_groups, std,
                           gen, factors, self.comm)
                for a, b, gen, std, factors in zip(bounds[:-1], bounds[1:], draws, stds,
                                                   self.unit_factors)]

    def __call__(self, step, broadcast):
        messages = self._messages(step, broadcast)
        if self.comm.distributed:  # every rank's sums, the root's noise once
            self.comm.sum_([*messages.theta, messages.w, messages.monitor])
        return messages

    def _messages(self, step, broadcast):
        """The silos' messages of round ``step`` from the records held here."""
        if not self.batched:
            messages = [
                worker.round(draws, step, self.backend.parameters, broadcast.W, self.priors, one)
                for worker, one, draws in zip(self.workers, self.configs, self.draws)
            ]
            return stack_messages(messages)
        config = self.config
        if self.noise_size is None:
            self.noise_size = (
                message_size(self.backend.parameters, broadcast.W) if config.noise.private else 0
            )
        drawn = [draws.round(step, self.noise_size, self.dtype) for draws in self.draws]
        noise_rows = None if drawn[0][1] is None else torch.stack([d[1] for d in drawn])
        if config.n_silos == 1:
            return silo_step(self.backend, drawn[0][0], None, self.all_data, broadcast, config,
                             self.all_context, noise_rows)
        idx = torch.cat([d[0] + offset for d, offset in zip(drawn, self.bounds)])
        segments = [d[0].numel() for d in drawn]
        # the silo of each sampled record, from the (host-side) batch sizes
        batch_silo = torch.cat([torch.full((count,), j, dtype=torch.long, device=idx.device)
                                for j, count in enumerate(segments)])
        return silo_step(self.backend, idx, batch_silo, self.all_data, broadcast, config,
                         self.all_context, noise_rows, segments)


def _data_parallel_communicator(config):
    """The fit's communicator; a ValueError when a data-parallel fit has
    more than one silo."""
    comm = current_communicator()
    if comm.distributed and config.n_silos != 1:
        raise ValueError(
            "a data-parallel DP-FERMI fit trains one silo spread over the ranks; fit "
            "several silos (silo_ids) in one process, or with a federated engine."
        )
    return comm


def stack_messages(messages):
    """One :class:`SiloMessages` from the messages of single silos, in order."""
    if len(messages) == 1:
        return messages[0]
    return SiloMessages(
        theta=[torch.cat(parts) for parts in zip(*(m.theta for m in messages))],
        w=torch.cat([m.w for m in messages]),
        monitor=torch.cat([m.monitor for m in messages]),
    )


def _silo_config(config, j):
    """The config silo ``j`` computes with: its own size, rate and noise."""
    noise = config.noise
    if noise.private:
        noise = FermiNoise(theta=(noise.theta[j],), w=(noise.w[j],), monitor=(noise.monitor[j],))
    records = None if config.record_sizes is None else (config.record_sizes[j],)
    return replace(config, silo_sizes=(config.silo_sizes[j],), record_sizes=records,
                   sampling_rates=(config.sampling_rates[j],), noise=noise)


@torch.inference_mode()
def run_rounds(backend, priors, n_classes, config, exchange):
    """The server's loop: ``n_rounds`` times, get the silos' messages from
    ``exchange`` and apply :func:`server_step`.

    Parameters
    ----------
    backend : LinearBackend or ModuleBackend
        The model, updated in place (its rows, if any, are not used here).
    priors : tensor of shape (M, k)
        Released (or public) group priors per stratum.
    n_classes : int
    config : FermiConfig
    exchange : callable ``(step, broadcast) -> SiloMessages``
        Moves the model (``backend.parameters``) and ``broadcast`` to the
        silos and returns their messages, stacked in silo order: an
        :class:`InProcessSilos`, or a federated engine.

    Returns
    -------
    dict
        Per round: ``"loss"``, ``"fairness"`` (mean psi), ``"clipped_fraction"``
        (all from the silos' noisy monitoring releases), ``"w_norm"``
        (Frobenius norm of W, post-processing) and ``"learning_rate"``; plus
        ``"W"``, the final dual tensor.
    """
    params = backend.parameters
    dtype, device = params[0].dtype, params[0].device
    n_rounds = config.n_rounds
    n_strata, n_groups = priors.shape
    W = torch.zeros((n_strata, n_groups, n_classes), dtype=dtype, device=device)
    broadcast = Broadcast(W, priors.to(dtype).rsqrt()).refresh()
    server = FermiServer(backend, broadcast, config)
    average = TailAverage(params, n_rounds, config.averaging)
    bounds = torch.tensor([config.loss_bound, config.psi_bound, 1.0], dtype=dtype, device=device)
    monitors, w_norms, rates = [], [], []
    report_every = max(1, n_rounds // 10)
    start = time.perf_counter()
    for step in range(n_rounds):
        messages = exchange(step, broadcast)
        # the server's arithmetic on one thread, so that the model does not
        # depend on the thread count of the process the server runs in
        with one_torch_thread():
            monitors.append(server_step(server, messages, step))
            w_norms.append(broadcast.W.norm())
            average.update(step)
        rates.append(server.learning_rate(step))
        if config.verbose and ((step + 1) % report_every == 0 or step + 1 == n_rounds):
            last = monitors[-1] * bounds
            print(
                f"[DP-FERMI] round {step + 1}/{n_rounds}  noisy loss {float(last[0]):.4f}  "
                f"noisy psi {float(last[1]):+.4f}  |W| {float(w_norms[-1]):.3f}  "
                f"elapsed {time.perf_counter() - start:.2f}s"
            )
    with one_torch_thread():
        average.finalize()
    stacked = torch.stack(monitors) * bounds if monitors else torch.zeros((0, 3), dtype=dtype)
    return {
        "loss": stacked[:, 0],
        "fairness": stacked[:, 1],
        "clipped_fraction": stacked[:, 2],
        "w_norm": torch.stack(w_norms) if w_norms else torch.zeros(0, dtype=dtype),
        "learning_rate": torch.tensor(rates, dtype=dtype),
        "W": broadcast.W.clone(),
    }
