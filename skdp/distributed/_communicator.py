"""The communicator of a data-parallel fit on ``torch.distributed``.

Every rank holds a contiguous block of the global rows, in rank order: rank
``r`` holds the rows ``offset_r <= i < offset_r + n_r``. The root (rank 0)
draws the Poisson batches of global row indices with the fit's sampler, a
chunk of steps at a time, exactly when a single-process fit would, and
broadcasts each chunk; every rank keeps the indices of its own rows. Sums
are all-reduced, and the root adds the noise of a release once (see
:mod:`skdp.privacy._communicator` for the rules).
"""

from functools import partial
from itertools import islice

import numpy as np
import torch
import torch.distributed as dist

from ..privacy import Batches, LocalCommunicator, UnitSampler, batches_in_range

#: The rank that draws the fit's randomness.
ROOT = 0


class TorchCommunicator(LocalCommunicator):
    """The ranks of a ``torch.distributed`` process group, each holding a
    contiguous shard of the training rows.

    Creating it is a collective call: every rank of ``group`` must create
    one, with its own row count.

    Parameters
    ----------
    n_rows : int
        Number of training rows of this rank's shard.
    group : ProcessGroup or None, default=None
        The process group (None: the default group).

    Attributes
    ----------
    rank, world_size : int
    n_total : int
        The number of rows over all ranks.
    offset : int
        Global index of this rank's first row.
    device : torch.device
        Where host values travel: the CPU for gloo, the current CUDA device
        for nccl.
    """

    distributed = True

    def __init__(self, n_rows, *, group=None):
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        nccl = dist.get_backend(group) == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else \
            torch.device("cpu")
        self.n_rows = int(n_rows)
        counts = torch.zeros(self.world_size, dtype=torch.int64, device=self.device)
        counts[self.rank] = self.n_rows
        dist.all_reduce(counts, group=group)
        self.row_counts = counts.cpu().tolist()
        self.n_total = int(sum(self.row_counts))
        self.offset = int(sum(self.row_counts[:self.rank]))

    @property
    def is_root(self):
        return self.rank == ROOT

    def total(self, n_rows):
        if int(n_rows) != self.n_rows:
            raise ValueError(
                f"rank {self.rank} holds {self.n_rows} rows, but the fit asked for the total "
                f"of {n_rows}; a data-parallel fit must train on the shard it was set up with."
            )
        return self.n_total

    def shard(self, sampler):
        if isinstance(sampler, UnitSampler):
            return ShardUnitSampler(sampler, self)
        if getattr(sampler, "n_samples", None) != self.n_total:
            raise ValueError(
                f"{type(sampler).__name__} cannot be sharded: data-parallel training samples "
                f"records (a PoissonSampler over all {self.n_total} rows) or units (a "
                "UnitSampler)."
            )
        return ShardSampler(sampler, self)

    def draw_rows(self, draw, n_rows):
        if int(n_rows) != self.n_rows:
            raise ValueError(f"rank {self.rank} holds {self.n_rows} rows, not {n_rows}.")
        values = draw(self.n_total).to(self.device).contiguous() if self.is_root else None
        dtype = [values.dtype if self.is_root else None]
        dist.broadcast_object_list(dtype, ROOT, group=self.group)
        if not self.is_root:
            values = torch.empty(self.n_total, dtype=dtype[0], device=self.device)
        dist.broadcast(values, ROOT, group=self.group)
        return values[self.offset:self.offset + self.n_rows]

    def sum_(self, tensors):
        if len({t.dtype for t in tensors}) == 1 and len(tensors) > 1:
            flat = torch.cat([t.reshape(-1) for t in tensors])
            dist.all_reduce(flat, group=self.group)
            offset = 0
            for t in tensors:
                t.copy_(flat[offset:offset + t.numel()].view(t.shape))
                offset += t.numel()
            return tensors
        for t in tensors:
            dist.all_reduce(t, group=self.group)
        return tensors

    def release(self, values, noise=None):
        total = self._summed(values)
        if self.is_root and noise is not None:
            total = total + noise()
        return self.share(total)

    def share(self, value):
        if torch.is_tensor(value):
            out = value.to(self.device).contiguous()
            dist.broadcast(out, ROOT, group=self.group)
            return out.to(value.device)
        if isinstance(value, np.ndarray) and value.dtype != object:
            out = torch.from_numpy(np.ascontiguousarray(value)).to(self.device)
            dist.broadcast(out, ROOT, group=self.group)
            return out.cpu().numpy()
        box = [value]
        dist.broadcast_object_list(box, ROOT, group=self.group)
        return box[0]

    def union(self, labels):
        gathered = self.gather_objects(np.asarray(labels))
        if gathered[0].dtype != object:
            return np.unique(np.concatenate(gathered))
        merged = sorted(set().union(*(g.tolist() for g in gathered)))
        out = np.empty(len(merged), dtype=object)
        out[:] = merged
        return out

    def gather_objects(self, value):
        """Every rank's ``value`` (picklable), in rank order."""
        out = [None] * self.world_size
        dist.all_gather_object(out, value, group=self.group)
        return out

    def _summed(self, values):
        """``values`` (an ndarray or a tensor) summed over the ranks."""
        if torch.is_tensor(values):
            out = values.to(self.device).contiguous().clone()
            dist.all_reduce(out, group=self.group)
            return out.to(values.device)
        array = np.ascontiguousarray(values)
        out = torch.from_numpy(array.copy()).to(self.device)
        dist.all_reduce(out, group=self.group)
        return out.cpu().numpy()


class ShardSampler:
    """The batches of a sampler over all rows, restricted to one rank's rows.

    The root draws each chunk of batches from ``sampler`` when the first
    batch of the chunk is asked for (as a single-process loop would), and
    broadcasts the batch sizes and the concatenated global indices; every
    rank keeps the indices in its own row range, shifted to its local rows.
    The batches of all ranks together are the root's batches.

    Parameters
    ----------
    sampler : PoissonSampler
        Over all ``comm.n_total`` rows; drawn from on the root only.
    comm : TorchCommunicator
    """

    def __init__(self, sampler, comm):
        self.sampler = sampler
        self.comm = comm
        self.chunk_steps = sampler.chunk_steps
        self.sampling_rate = sampler.sampling_rate
        self.n_samples = sampler.n_samples

    def batches(self, n_steps):
        """The ``n_steps`` local index tensors (int64, sorted, possibly
        empty), as a :class:`~skdp.privacy.Batches` iterator."""
        source = self.sampler.batches(n_steps) if self.comm.is_root else None
        return Batches(partial(self._local_chunk, source), n_steps, self.chunk_steps)

    def _local_chunk(self, source, n_steps):
        comm = self.comm
        index_dtype = torch.int32 if comm.n_total < 2**31 else torch.int64
        if comm.is_root:
            drawn = list(islice(source, n_steps))
            counts = torch.tensor([b.numel() for b in drawn], dtype=torch.int64)
            flat = torch.cat(drawn).to(index_dtype) if drawn else torch.zeros(0, dtype=index_dtype)
        else:
            counts = torch.zeros(n_steps, dtype=torch.int64)
        counts = comm.share(counts)
        total = int(counts.sum())
        if comm.is_root:
            flat = flat.to(comm.device)
        else:
            flat = torch.zeros(total, dtype=index_dtype, device=comm.device)
        if total:
            dist.broadcast(flat, ROOT, group=comm.group)
        flat = flat.to(device=self.sampler.generator.device, dtype=torch.int64)
        local, local_counts = batches_in_range(flat, counts, comm.offset,
                                               comm.offset + comm.n_rows)
        return local.split(local_counts)


class ShardUnitSampler:
    """The batches of a :class:`~skdp.privacy.UnitSampler`, restricted to
    one rank's records.

    Every unit's records are on one rank (the fit checks it). The root draws
    each chunk of unit batches from the sampler's Poisson sampler over the
    units, when a single-process loop would, and broadcasts the batch sizes
    and the concatenated unit indices; every rank expands them into the
    records it holds (``sampler`` was built from this rank's
    :class:`~skdp.privacy.UnitBounds`, so a unit held elsewhere brings no
    record here). The batches of all ranks together are the single-process
    batches.

    Parameters
    ----------
    sampler : UnitSampler
        Over this rank's kept records, with the global unit codes; its
        Poisson sampler over the units is drawn from on the root only.
    comm : TorchCommunicator
    """

    def __init__(self, sampler, comm):
        self.sampler = sampler
        self.comm = comm
        self.chunk_steps = sampler.units.chunk_steps
        self.sampling_rate = sampler.sampling_rate
        self.n_units = sampler.n_units

    @property
    def expected_batch(self):
        return self.sampler.expected_batch

    def batches(self, n_steps):
        """The ``n_steps`` local index tensors of records (int64, possibly
        empty), as a :class:`~skdp.privacy.Batches` iterator."""
        return Batches(self._local_chunk, n_steps, self.chunk_steps)

    def _local_chunk(self, n_steps):
        comm = self.comm
        if comm.is_root:
            units, counts = self.sampler.units._flat_chunk(n_steps)
            counts = torch.tensor(counts, dtype=torch.int64)
        else:
            units, counts = None, torch.zeros(n_steps, dtype=torch.int64)
        counts = comm.share(counts)
        total = int(counts.sum())
        device = self.sampler.records.device
        flat = (units.to(comm.device) if comm.is_root
                else torch.zeros(total, dtype=torch.int64, device=comm.device))
        if total:
            dist.broadcast(flat, ROOT, group=comm.group)
        return self.sampler.expand(flat.to(device), counts.tolist())
