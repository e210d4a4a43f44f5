"""Per-rank cost of privacy units in a data-parallel fit: numbering the
units, choosing the records each keeps and laying out the unit sampler.

Two layouts of the same unit ids over the ranks (gloo on 127.0.0.1, each
rank its own process holding ``--rows / processes`` records of
``--records`` records per unit):

* ``ranges``: the rows sorted by unit id, so each rank holds a range of the
  ids (what ``skdp.distributed.launch`` gives rows sorted by unit). The
  ranks exchange the ends of their ranges and their counts only.
* ``interleaved``: unit ``u`` on rank ``u % processes``, so every rank's ids
  span all of them. The ranks share the sorted list of every id and an
  ``n_units``-long check that no unit is on two ranks (skdp's only path
  before the range path).

Printed per layout: seconds of rank 0 (unit codes, ``bound_units``, the
``UnitSampler`` layout), and the growth of the peak resident memory of every
rank over what it held after building its ids. Usage::

    python benchmarks/bench_distributed_units.py [--rows 4000000] [--records 4]
        [--processes 2] [--ids int|str]
"""

import argparse
import resource
import time

import numpy as np
import torch

from skdp._fit.units import unit_codes
from skdp.distributed import TorchCommunicator, run_ranks
from skdp.privacy import UnitSampler, bound_units, using_communicator


def _shard_ids(layout, rank, world, rows_per_rank, records, kind):
    if layout == "ranges":
        units = (rank * rows_per_rank + np.arange(rows_per_rank)) // records
    else:
        units = (np.arange(rows_per_rank) // records) * world + rank
    if kind == "str":
        return np.char.add("person-", np.char.zfill(units.astype(str), 10))
    return units


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rank_cost(layout, world, rows_per_rank, records, kind):
    rank = torch.distributed.get_rank()
    ids = _shard_ids(layout, rank, world, rows_per_rank, records, kind)
    comm = TorchCommunicator(len(ids))
    comm.gather_objects(None)  # every rank has built its ids
    before = _peak_mib()
    start = time.perf_counter()
    with using_communicator(comm):
        codes, n_units = unit_codes(ids, len(ids))
        units = bound_units(codes, n_units, 16, torch.Generator().manual_seed(0))
        sampler = UnitSampler(units, 0.001, torch.Generator().manual_seed(1))
    seconds = time.perf_counter() - start
    grown = _peak_mib() - before
    costs = comm.gather_objects((seconds, grown, sampler.sizes.numel()))
    return costs if comm.is_root else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--records", type=int, default=4)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--ids", choices=("int", "str"), default="int")
    args = parser.parse_args()
    world = args.processes
    per_rank = args.rows // world
    n_units = args.rows // args.records
    print(f"{args.rows} records, {n_units} units ({args.ids} ids), {world} ranks of "
          f"{per_rank} records")
    print(f"{'layout':12s} {'rank 0 s':>9s} {'peak growth MiB per rank':>28s} "
          f"{'sampler units per rank':>24s}")
    for layout in ("ranges", "interleaved"):
        costs = run_ranks(_rank_cost, [(layout, world, per_rank, args.records, args.ids)] * world,
                          timeout=600)
        grown = ", ".join(f"{c[1]:.0f}" for c in costs)
        held = ", ".join(str(c[2]) for c in costs)
        print(f"{layout:12s} {costs[0][0]:9.2f} {grown:>28s} {held:>24s}")


if __name__ == "__main__":
    main()
