"""Data-parallel DP-SGD (skdp.distributed) on an N x 100 float32 table.

Fits ``DPSGDClassifier(epsilon=1)`` (defaults otherwise; ``--batch-size``
to fix the expected batch) on 1, 2 and 4 processes with gloo on 127.0.0.1,
each process holding a contiguous block of the rows, beside the
single-process fit in this process (``fit``, not the launcher), in the same
run. The table (synthetic logistic labels) is built once and cached as a
``.npy`` file under ``--cache``; each rank reads its own block of rows from
it, so no process holds more than its block (plus this process's copy for
the single-process fit).

Printed per setting: steps, seconds of training (``skdp.debug.record_fit_times``
of rank 0), milliseconds per step, seconds per epoch (training time over
``max_epochs``), the whole fit in seconds (process group set up, not the
process start), epsilon, and the accuracy on the table. On a machine with
fewer cores than processes, more processes cannot be faster: the script
says so.

Usage::

    python benchmarks/bench_distributed.py [--rows 10000000] [--processes 1,2,4]
        [--max-epochs 1] [--batch-size N] [--cache /tmp/skdp_distributed]
"""

import argparse
import itertools
import os
import time
from pathlib import Path

import numpy as np

from skdp import DPSGDClassifier
from skdp.debug import record_fit_times
from skdp.distributed import fit_data_parallel, run_ranks

N_FEATURES = 100


def build_table(cache, rows, seed=0):
    """``(X path, y path)`` of the cached table, written in blocks."""
    folder = Path(cache) / f"n{rows}"
    X_path, y_path = folder / "X.npy", folder / "y.npy"
    if X_path.exists() and y_path.exists():
        return X_path, y_path
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=N_FEATURES) * 2.0 / np.sqrt(N_FEATURES)
    X = np.lib.format.open_memmap(X_path, mode="w+", dtype=np.float32,
                                  shape=(rows, N_FEATURES))
    y = np.empty(rows, np.int64)
    block = 1_000_000
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        part = rng.standard_normal((stop - start, N_FEATURES), dtype=np.float32)
        X[start:stop] = part
        p = 1.0 / (1.0 + np.exp(-(part @ w)))
        y[start:stop] = rng.random(stop - start) < p
    X.flush()
    np.save(y_path, y)
    return X_path, y_path


def make_estimator(args):
    params = {"epsilon": 1.0, "delta": min(1e-5, 0.1 / args.rows), "max_epochs": args.max_epochs,
              "random_state": 0}
    if args.batch_size:
        params["batch_size"] = args.batch_size
    return DPSGDClassifier(**params)


def fit_rank(X_path, y_path, start, stop, estimator):
    """The work of one rank: read its rows, fit, report rank 0's figures."""
    import torch.distributed as dist

    X = np.array(np.load(X_path, mmap_mode="r")[start:stop])
    y = np.load(y_path, mmap_mode="r")[start:stop]
    began = time.perf_counter()
    with record_fit_times() as times:
        fitted = fit_data_parallel(estimator, X, y)
    seconds = time.perf_counter() - began
    if dist.get_rank() != 0:
        return None
    return summary(fitted, seconds, times[-1]["training"])


def summary(fitted, seconds, training):
    return {"steps": fitted.n_steps_, "training": training,
            "fit": seconds, "epsilon": fitted.epsilon_, "model": fitted}


def accuracy(fitted, X, y):
    return float((fitted.predict(X) == y).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--max-epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--cache", default="/tmp/skdp_distributed")
    args = parser.parse_args()
    counts = [int(p) for p in args.processes.split(",")]
    X_path, y_path = build_table(args.cache, args.rows)
    X = np.load(X_path)
    y = np.load(y_path)
    cores = os.cpu_count() or 1
    print(f"{args.rows:,} x {N_FEATURES} float32, DPSGDClassifier(epsilon=1, "
          f"max_epochs={args.max_epochs:g}"
          + (f", batch_size={args.batch_size}" if args.batch_size else "") + f"); {cores} cores")

    rows = []
    began = time.perf_counter()
    with record_fit_times() as times:
        single = make_estimator(args).fit(X, y)
    rows.append(("single process (fit)", summary(single, time.perf_counter() - began,
                                                 times[-1]["training"])))
    for n in counts:
        bounds = np.linspace(0, args.rows, n + 1).round().astype(int)
        rank_args = [(X_path, y_path, int(lo), int(hi), make_estimator(args))
                     for lo, hi in itertools.pairwise(bounds)]
        result = run_ranks(fit_rank, rank_args, timeout=3600)
        rows.append((f"{n} process{'es' if n > 1 else ''} (gloo)", result))

    print(f"{'setting':<22} {'steps':>7} {'train s':>9} {'ms/step':>8} {'s/epoch':>9} "
          f"{'fit s':>8} {'epsilon':>8} {'accuracy':>9}")
    for name, r in rows:
        per_step = 1e3 * r["training"] / max(r["steps"], 1)
        per_epoch = r["training"] / args.max_epochs
        print(f"{name:<22} {r['steps']:>7} {r['training']:>9.2f} {per_step:>8.3f} "
              f"{per_epoch:>9.2f} {r['fit']:>8.2f} {r['epsilon']:>8.4f} "
              f"{accuracy(r['model'], X, y):>9.4f}")
    if max(counts) > cores:
        print(f"note: this machine has {cores} cores, so {max(counts)} processes cannot "
              f"train faster than {cores}: they share the cores (and every step waits for "
              "the slowest process).")


if __name__ == "__main__":
    main()
