"""``launch``: a data-parallel fit on one machine from a plain Python call.

The launcher starts one process per shard (``torch.multiprocessing`` with
the spawn method), each in a process group on 127.0.0.1 at a free port,
hands each process its contiguous block of rows, and returns rank 0's
fitted estimator. Every process it starts is joined before it returns; when
one fails, the others are terminated and its error is raised here.
"""

import itertools
import os
import pickle
import shutil
import socket
import tempfile
import time
import traceback
from datetime import timedelta
from multiprocessing.connection import wait
from numbers import Integral

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ._fit import _check_device, _check_estimator, fit_data_parallel

#: Fit arguments that hold one value per row of X, split with the rows.
PER_ROW_FIT_PARAMS = ("sample_weight", "sensitive_features", "unit_ids")
BACKENDS = ("gloo", "nccl")
#: Seconds a process waits for the others in a collective before it fails.
DEFAULT_TIMEOUT = 600


def launch(estimator, X, y, *, n_processes=2, backend="gloo", timeout=DEFAULT_TIMEOUT,
           **fit_params):
    """Fit ``estimator`` data-parallel on ``n_processes`` local processes.

    Each process gets a contiguous block of the rows of ``X`` and ``y``
    (and of the per-row fit arguments ``sample_weight``,
    ``sensitive_features`` and ``unit_ids``) and runs
    :func:`fit_data_parallel` on it. With ``unit_ids`` a block ends where a
    unit does (the next block starts with a new id), so units whose records
    are contiguous, e.g. sorted by id, are each on one process. The
    result is the single-process fit of ``X, y``: the same batches and noise
    for a fixed ``random_state``, the same ``dp_event_`` and ``epsilon_``,
    and a model that agrees up to the order of floating-point sums.

    The processes are started with the spawn method, so a script that calls
    ``launch`` must guard its entry point with
    ``if __name__ == "__main__":``. Each process receives a copy of its rows.

    Parameters
    ----------
    estimator : estimator
        One of :func:`supported_estimators`.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    n_processes : int, default=2
        Number of processes (ranks), at most ``n_samples``.
    backend : {"gloo", "nccl"}, default="gloo"
        ``torch.distributed`` backend: gloo on the CPU; nccl with one GPU
        per process (set ``device="cuda"`` on the estimator).
    timeout : float, default=600
        Seconds a process waits for the others in a collective operation
        before it fails.
    **fit_params
        Passed to ``fit`` (per-row arrays are split with the rows).

    Returns
    -------
    estimator
        Rank 0's fitted estimator (a copy of ``estimator``; ``estimator``
        itself is left unfitted).
    """
    n_samples = _n_rows(X)
    if not (isinstance(n_processes, Integral) and 1 <= n_processes <= n_samples):
        raise ValueError(
            f"n_processes must be an integer between 1 and the number of rows ({n_samples}); "
            f"got {n_processes!r}."
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}.")
    _check_estimator(estimator, fit_params)
    _check_device(estimator, backend)
    bounds = np.linspace(0, n_samples, int(n_processes) + 1).round().astype(int)
    if fit_params.get("unit_ids") is not None:
        bounds = _unit_boundaries(bounds, fit_params["unit_ids"])
    shards = []
    for start, stop in itertools.pairwise(bounds):
        rows = slice(int(start), int(stop))
        params = {k: (_rows(v, rows) if k in PER_ROW_FIT_PARAMS and v is not None else v)
                  for k, v in fit_params.items()}
        shards.append((estimator, _rows(X, rows), _rows(y, rows), params))
    return run_ranks(_fit_shard, shards, backend=backend, timeout=timeout)


def _fit_shard(estimator, X, y, fit_params):
    """The work of one rank of :func:`launch`."""
    return fit_data_parallel(estimator, X, y, **fit_params)


def _unit_boundaries(bounds, unit_ids):
    """``bounds`` with every inner cut moved forward to the first row whose
    unit id differs from the row before it (or to the end).

    >>> _unit_boundaries(np.array([0, 3, 6]), ["a", "a", "b", "b", "b", "c"]).tolist()
    [0, 5, 6]
    """
    ids = np.asarray(unit_ids).reshape(len(unit_ids), -1)
    starts = np.flatnonzero((ids[1:] != ids[:-1]).any(axis=1)) + 1  # rows that start a run
    out = bounds.copy()
    for i in range(1, len(out) - 1):
        later = starts[np.searchsorted(starts, out[i]):]
        out[i] = max(out[i - 1], later[0] if len(later) else bounds[-1])
    return out


def _n_rows(values):
    return int(values.shape[0]) if hasattr(values, "shape") else len(values)


def _rows(values, rows):
    """The rows ``rows`` (a slice) of an array, a DataFrame or a list."""
    if hasattr(values, "iloc"):
        return values.iloc[rows]
    if hasattr(values, "shape"):
        return values[rows]
    return np.asarray(values)[rows]


def run_ranks(target, rank_args, *, backend="gloo", timeout=DEFAULT_TIMEOUT):
    """Run ``target(*rank_args[r])`` on rank ``r`` of a local process group.

    One process per entry of ``rank_args``, started with the spawn method;
    each joins a process group on 127.0.0.1 (a free port) before it calls
    ``target``. Returns rank 0's return value. Every process is joined
    before this returns; when one fails, the others are terminated and the
    first error raised in any process is raised here.

    Parameters
    ----------
    target : callable
        A module-level function (it is pickled for the processes).
    rank_args : list of tuple
        The arguments of each rank.
    backend : {"gloo", "nccl"}, default="gloo"
    timeout : float, default=600
        Seconds a process waits in a collective before it fails.

    Returns
    -------
    object
        What ``target`` returned on rank 0.
    """
    world_size = len(rank_args)
    workdir = tempfile.mkdtemp(prefix="skdp-launch-")
    address = f"tcp://127.0.0.1:{_free_port()}"
    threads = max(1, (os.cpu_count() or 1) // world_size)
    context = mp.get_context("spawn")
    processes = [
        context.Process(
            target=_rank_main, daemon=True, name=f"skdp-rank-{rank}",
            args=(rank, world_size, address, backend, timeout, threads, target, args, workdir),
        )
        for rank, args in enumerate(rank_args)
    ]
    try:
        for process in processes:
            process.start()
        _join_all(processes)
        return _result(processes, workdir)
    finally:
        _stop(processes)
        shutil.rmtree(workdir, ignore_errors=True)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _join_all(processes):
    """Wait for every process; stop waiting at the first one that fails."""
    running = list(processes)
    while running:
        wait([p.sentinel for p in running])
        for process in [p for p in running if not p.is_alive()]:
            process.join()
            running.remove(process)
            if process.exitcode != 0:
                return


def _stop(processes):
    """Terminate the processes still running, then join every process."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        if process.pid is None:
            continue
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


def _result(processes, workdir):
    """Rank 0's result, or the earliest error of any rank raised here."""
    errors = []
    for rank in range(len(processes)):
        path = os.path.join(workdir, f"error-{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as handle:
                errors.append(pickle.load(handle))
    if errors:
        _, rank, error, trace = min(errors, key=lambda e: e[0])
        if isinstance(error, Exception):
            raise error from RuntimeError(f"rank {rank} of the data-parallel fit:\n{trace}")
        raise RuntimeError(f"rank {rank} of the data-parallel fit failed:\n{trace}")
    failed = [p for p in processes if p.exitcode not in (0, None)]
    if failed:
        raise RuntimeError(
            f"{failed[0].name} of the data-parallel fit died with exit code "
            f"{failed[0].exitcode} (killed, out of memory?)."
        )
    with open(os.path.join(workdir, "result.pkl"), "rb") as handle:
        return pickle.load(handle)


def _rank_main(rank, world_size, address, backend, timeout, threads, target, args, workdir):
    """The body of one process: join the group, run ``target``, report."""
    try:
        torch.set_num_threads(threads)
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(backend, init_method=address, rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=timeout))
        try:
            result = target(*args)
        finally:
            dist.destroy_process_group()
        if rank == 0:
            _write(os.path.join(workdir, "result.pkl"), result)
    except Exception as exc:  # noqa: BLE001  (reported to the launcher, which re-raises it)
        report = (time.time(), rank, _picklable(exc), traceback.format_exc())
        _write(os.path.join(workdir, f"error-{rank}.pkl"), report)
        raise SystemExit(1) from None


def _picklable(exc):
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001  (any exception that does not survive pickling)
        return None


def _write(path, value):
    """Pickle ``value`` to ``path`` atomically (a complete file or none)."""
    partial_path = f"{path}.part"
    with open(partial_path, "wb") as handle:
        pickle.dump(value, handle)
    os.replace(partial_path, path)
