"""Data-parallel training on ``torch.distributed``: one organisation's data
set, its rows spread over processes or machines.

Each rank holds a shard of the rows. The root (rank 0) draws the Poisson
batches of global rows and all the noise, exactly as a single-process fit
would; every rank computes the clipped sums of its own rows; the sums are
all-reduced with the noise added once. The accountant sees the
single-process event, and for a fixed ``random_state`` the batches and the
noise are the single-process fit's. See :ref:`distributed`.

* :func:`fit_data_parallel`: called on every rank of an initialised
  process group (e.g. under ``torchrun``).
* :func:`launch`: one machine, from a plain Python call.
* :class:`TorchCommunicator`: what the trainers use to reach the other
  ranks (see :func:`skdp.privacy.current_communicator`).
"""

from ._communicator import ShardSampler, TorchCommunicator
from ._fit import fit_data_parallel, supported_estimators
from ._launch import launch, run_ranks

__all__ = [
    "ShardSampler",
    "TorchCommunicator",
    "fit_data_parallel",
    "launch",
    "run_ranks",
    "supported_estimators",
]
