"""Scale: fit time, per-step cost and peak memory on a large float32 table.

The issue's target: a 10M x 100 float32 table (4 GB) with peak memory during
fit at most ``data * 1.25 + 0.5 GB`` and an epoch no slower than one epoch of
scikit-learn's ``SGDClassifier(max_iter=1)`` (batch_size=256), 0.4x of it
with the defaults.

The table (``--rows`` x 100 float32, synthetic logistic labels ``y``, a
regression target ``t`` and a binary group ``s`` correlated with a feature)
is built once and cached under ``--cache`` as ``X.npy`` (read fully into
memory by the fits) plus ``X.f32`` (a raw float32 memmap, for ``--memmap``).
With ``--hdf5`` each estimator is also fitted on an HDF5 copy (``X.h5``,
chunks of 1,024 rows; needs h5py), a row store read a batch at a time.
With ``--float64`` every fit gets the same table as float64 instead
(``X64.npy``, written once from ``X.npy``; twice the bytes, and the budget
is computed from them): skdp trains in float32 and converts each batch as
it is read, so no float32 copy of the table is made.

Every fit runs in a FRESH subprocess, so the peak is that fit's own:

* ``peak RSS``: ``VmHWM`` of the subprocess (python + torch + data + fit);
* ``extra``: peak RSS minus the data (``X`` plus labels/groups) minus the
  RSS of the bare interpreter with torch/skdp/sklearn imported (measured
  before the data is loaded);
* ``budget``: ``data * 1.25 + 0.5 GB`` with data = X's bytes; ``ok`` when
  peak RSS is within it;
* ``peak anon``: the largest ``RssAnon`` sampled every 50 ms from a thread
  (with ``--memmap`` the file pages of X do not count as anonymous memory,
  so this says how much the fit copied out of the memmap).

Estimators (defaults but ``epsilon=1``; ``--batch-256``: batch_size=256 for
DPSGDClassifier): DPSGDClassifier, DPSGDRegressor (target ``t``),
DPRateConstrainedClassifier and DPFERMIClassifier (groups ``s``; FERMI in
one process with 1 and with 3 silos via ``silo_ids=``), DPDROClassifier (no
groups), and the peer scikit-learn ``SGDClassifier(max_iter=1, tol=None)``
-- which needs float64, so its subprocess converts X to a float64 copy
first (not timed, but in its peak memory; noted in the table).

Columns: fit seconds (whole ``fit``), steps (``n_steps_``), seconds per
epoch (training time / epochs, epochs = ``max_epochs``), steps per second
(training time), ratio of the epoch to the sklearn epoch.

Usage::

    python benchmarks/bench_scale.py [--rows 10000000] [--cache /tmp/skdp_scale]
        [--estimators dpsgd,fermi1,...] [--batch-256] [--memmap] [--max-epochs E]
        [--device cuda] [--eager-steps] [--float64] [--hdf5]

(``--estimators`` names: dpsgd, dpsgd_reg, raco, fermi1, fermi3, dro,
sklearn; default all. ``--device`` is passed to every skdp estimator as
``device=``; scikit-learn stays on the CPU, so on a GPU the ratio compares
a GPU epoch with a CPU one.)
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

N_FEATURES = 100
GB = 1024.0 ** 3
ESTIMATORS = ("dpsgd", "dpsgd_reg", "raco", "fermi1", "fermi3", "dro", "sklearn")


# ------------------------------------------------------------------ data
def paths(cache, rows):
    folder = Path(cache) / f"n{rows}"
    return {k: folder / f for k, f in (("X", "X.npy"), ("mm", "X.f32"), ("y", "y.npy"),
                                       ("t", "t.npy"), ("s", "s.npy"), ("X64", "X64.npy"),
                                       ("h5", "X.h5"))}


def build_float64_table(cache, rows, block=500_000):
    """``X64.npy``: ``X.npy`` as float64, written in blocks; a no-op when
    cached."""
    p = paths(cache, rows)
    if p["X64"].exists():
        return
    X = np.load(p["X"], mmap_mode="r")
    X64 = np.lib.format.open_memmap(p["X64"], mode="w+", dtype=np.float64, shape=X.shape)
    for start in range(0, rows, block):
        X64[start:start + block] = X[start:start + block]
    X64.flush()


def build_hdf5_table(cache, rows, block=500_000):
    """``X.h5``: ``X.npy`` as an HDF5 dataset ``X`` in chunks of 1,024
    rows, written in blocks; a no-op when cached."""
    import h5py

    p = paths(cache, rows)
    if p["h5"].exists():
        return
    X = np.load(p["X"], mmap_mode="r")
    with h5py.File(p["h5"], "w") as f:
        out = f.create_dataset("X", shape=X.shape, dtype=X.dtype, chunks=(1024, X.shape[1]))
        for start in range(0, rows, block):
            out[start:start + block] = X[start:start + block]


def build_table(cache, rows, seed=0):
    """Write the table in blocks (never more than one float64 block in
    memory); a no-op when cached."""
    p = paths(cache, rows)
    if all(f.exists() for key, f in p.items() if key not in ("X64", "h5")):
        return p
    p["X"].parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=N_FEATURES) / np.sqrt(N_FEATURES) * 2.0
    X = np.lib.format.open_memmap(p["X"], mode="w+", dtype=np.float32, shape=(rows, N_FEATURES))
    y = np.empty(rows, np.int64)
    t = np.empty(rows, np.float64)
    s = np.empty(rows, np.int64)
    block = 500_000
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        xb = rng.standard_normal((stop - start, N_FEATURES), dtype=np.float32)
        z = xb @ w.astype(np.float32)
        y[start:stop] = rng.random(stop - start) < 1.0 / (1.0 + np.exp(-z))
        t[start:stop] = z + 0.5 * rng.standard_normal(stop - start)
        s[start:stop] = (xb[:, 0] + rng.standard_normal(stop - start)) > 0
        X[start:stop] = xb
    X.flush()
    mm = np.memmap(p["mm"], mode="w+", dtype=np.float32, shape=(rows, N_FEATURES))
    for start in range(0, rows, block):
        mm[start:start + block] = X[start:start + block]
    mm.flush()
    del X, mm
    np.save(p["y"], y)
    np.save(p["t"], t)
    np.save(p["s"], s)
    return p


# ------------------------------------------------------------------ memory
def proc_status():
    """``{field: bytes}`` of the memory lines of /proc/self/status."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("Vm", "Rss")):
                key, value = line.split(":", 1)
                parts = value.split()
                if len(parts) == 2 and parts[1] == "kB":
                    out[key] = int(parts[0]) * 1024
    return out


class AnonSampler(threading.Thread):
    """Largest RssAnon / VmRSS seen, sampled every ``interval`` seconds."""

    def __init__(self, interval=0.05):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak_anon = 0
        self.peak_rss = 0
        self._stop_event = threading.Event()

    def sample(self):
        st = proc_status()
        self.peak_anon = max(self.peak_anon, st.get("RssAnon", 0))
        self.peak_rss = max(self.peak_rss, st.get("VmRSS", 0))

    def run(self):
        while not self._stop_event.is_set():
            self.sample()
            time.sleep(self.interval)

    def stop(self):
        self._stop_event.set()
        self.join()
        self.sample()


# ------------------------------------------------------------------ worker
def make_estimator(name, batch_256, max_epochs, device="cpu"):
    from skdp import (
        DPDROClassifier,
        DPFERMIClassifier,
        DPRateConstrainedClassifier,
        DPSGDClassifier,
        DPSGDRegressor,
    )
    extra = {"device": device}
    if max_epochs is not None:
        extra["max_epochs"] = max_epochs
    if name == "dpsgd":
        if batch_256:
            extra["batch_size"] = 256
        return DPSGDClassifier(epsilon=1.0, **extra)
    if name == "dpsgd_reg":
        return DPSGDRegressor(epsilon=1.0, **extra)
    if name == "raco":
        return DPRateConstrainedClassifier(epsilon=1.0, **extra)
    if name in ("fermi1", "fermi3"):
        return DPFERMIClassifier(epsilon=1.0, **extra)
    if name == "dro":
        return DPDROClassifier(epsilon=1.0, **extra)
    raise ValueError(name)


def worker(args):
    """One fit in this (fresh) process; prints one JSON line."""
    import warnings

    import torch  # imported before the baseline
    from sklearn.linear_model import SGDClassifier

    import skdp  # noqa: F401
    from skdp.debug import record_fit_times

    warnings.filterwarnings("ignore")
    if args.eager_steps:
        import skdp._training

        skdp._training.FIXED_SHAPE_STEPS = False
    base = proc_status()["VmRSS"]
    p = paths(args.cache, args.rows)
    if args.hdf5:
        import h5py

        X = h5py.File(p["h5"], "r")["X"]
    elif args.memmap:
        X = np.memmap(p["mm"], mode="r", dtype=np.float32, shape=(args.rows, N_FEATURES))
    elif args.float64:
        X = np.load(p["X64"])
    else:
        X = np.load(p["X"])
    y, t, s = np.load(p["y"]), np.load(p["t"]), np.load(p["s"])
    side = y.nbytes + t.nbytes + s.nbytes
    name = args.worker
    sampler = AnonSampler()
    sampler.start()
    out = {"name": name, "base_rss": base, "data": X.nbytes, "side": side}
    if name == "sklearn":
        start = time.perf_counter()
        X64 = np.asarray(X, dtype=np.float64)  # what sklearn's validation does (no-op on float64)
        out["convert_s"] = time.perf_counter() - start
        clf = SGDClassifier(max_iter=1, tol=None, random_state=0)
        start = time.perf_counter()
        clf.fit(X64, y)
        out["fit_s"] = out["train_s"] = time.perf_counter() - start
        out["steps"] = args.rows  # one record per sklearn step
        out["epochs"] = 1
    else:
        est = make_estimator(name, args.batch_256, args.max_epochs, args.device)
        kw = {}
        target = t if name == "dpsgd_reg" else y
        if name in ("raco", "fermi1", "fermi3"):
            kw["sensitive_features"] = s
        if name == "fermi3":
            kw["silo_ids"] = np.arange(args.rows) % 3
        start = time.perf_counter()
        with record_fit_times() as fit_times:
            est.fit(X, target, **kw)
        out["fit_s"] = time.perf_counter() - start
        out["train_s"] = fit_times[-1]["training"] if fit_times else out["fit_s"]
        out["steps"] = int(getattr(est, "n_steps_", 0))
        out["epochs"] = est.max_epochs if est.max_steps is None else None
        batch = getattr(est, "batch_size_", None)
        if isinstance(batch, np.ndarray):
            batch = float(np.sum(batch))  # FERMI: one per silo, summed
        out["batch"] = None if batch is None else round(batch)
    sampler.stop()
    if args.device.startswith("cuda") and name != "sklearn":
        out["gpu_peak"] = torch.cuda.max_memory_allocated()
    st = proc_status()
    out["peak_rss"] = st["VmHWM"]
    out["peak_anon"] = sampler.peak_anon
    print("RESULT " + json.dumps(out, default=float), flush=True)


# ------------------------------------------------------------------ driver
def run_one(name, args, memmap=False, batch_256=False, hdf5=False, eager=False):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--rows", str(args.rows),
           "--cache", args.cache]
    if eager:
        cmd.append("--eager-steps")
    if memmap:
        cmd.append("--memmap")
    if hdf5:
        cmd.append("--hdf5")
    if batch_256:
        cmd.append("--batch-256")
    if args.max_epochs is not None:
        cmd += ["--max-epochs", str(args.max_epochs)]
    if args.float64:
        cmd.append("--float64")
    if name != "sklearn":
        cmd += ["--device", args.device]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out = json.loads(line[len("RESULT "):])
            out["wall_s"] = wall
            out["label"] = (name + (" (memmap)" if memmap else "") + (" (hdf5)" if hdf5 else "")
                            + (" b=256" if batch_256 else "") + (" eager" if eager else ""))
            return out
    print(f"{name}: failed (rc {proc.returncode})\n{proc.stderr[-3000:]}", file=sys.stderr)
    return None


def row(r, peer_epoch):
    def gb(b):
        return f"{b / GB:.2f}"

    data = r["data"]
    budget = data * 1.25 + 0.5 * GB
    epoch = r["train_s"] / r["epochs"] if r.get("epochs") else float("nan")
    sps = r["steps"] / r["train_s"] if r["train_s"] > 0 else float("nan")
    extra = r["peak_rss"] - data - r["side"] - r["base_rss"]
    ratio = epoch / peer_epoch if peer_epoch else float("nan")
    return [r["label"], f"{r['fit_s']:.1f}", r["steps"], r.get("batch") or "-", f"{epoch:.2f}",
            f"{sps:.0f}", f"{ratio:.2f}", gb(r["peak_rss"]), gb(r["peak_anon"]), gb(extra),
            f"{r['peak_rss'] / data:.2f}", gb(budget), "yes" if r["peak_rss"] <= budget else "NO"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--cache", default="/tmp/skdp_scale")
    parser.add_argument("--estimators", default=",".join(ESTIMATORS))
    parser.add_argument("--batch-256", action="store_true",
                        help="also fit DPSGDClassifier with batch_size=256")
    parser.add_argument("--memmap", action="store_true",
                        help="also fit each estimator on the numpy.memmap")
    parser.add_argument("--hdf5", action="store_true",
                        help="also fit each estimator on an HDF5 copy (a row store; needs h5py)")
    parser.add_argument("--max-epochs", type=int, default=None)
    parser.add_argument("--device", default="cpu",
                        help="torch device of the skdp estimators (sklearn stays on the CPU)")
    parser.add_argument("--float64", action="store_true",
                        help="give every fit the table as float64 (X64.npy) instead of float32")
    parser.add_argument("--eager-steps", action="store_true",
                        help="also fit DPSGDClassifier with its eager step loop (on CUDA the "
                             "default replays fixed-shape steps as a CUDA graph)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    sys.path.insert(0, str(Path(__file__).parent))
    from _common import print_table

    names = [n.strip() for n in args.estimators.split(",") if n.strip()]
    unknown = set(names) - set(ESTIMATORS)
    if unknown:
        parser.error(f"unknown estimators {sorted(unknown)}; choose from {ESTIMATORS}")
    start = time.perf_counter()
    build_table(args.cache, args.rows)
    dtype, itemsize = "float32", 4
    if args.float64:
        build_float64_table(args.cache, args.rows)
        dtype, itemsize = "float64", 8
    print(f"table {args.rows} x {N_FEATURES} {dtype} "
          f"({args.rows * N_FEATURES * itemsize / GB:.2f} GB) "
          f"ready in {time.perf_counter() - start:.1f}s under {args.cache}", flush=True)

    if args.hdf5:
        build_hdf5_table(args.cache, args.rows)
    jobs = [(n, False, False, False, False) for n in names if n != "sklearn"]
    if args.batch_256 and "dpsgd" in names:
        jobs.append(("dpsgd", False, True, False, False))
    if args.eager_steps and "dpsgd" in names:
        jobs += [("dpsgd", False, b256, False, True)
                 for b256 in ((False, True) if args.batch_256 else (False,))]
    if args.memmap:
        jobs += [(n, True, False, False, False) for n in names if n != "sklearn"]
    if args.hdf5:
        jobs += [(n, False, False, True, False) for n in names if n != "sklearn"]
    jobs.append(("sklearn", False, False, False, False))  # the peer, always
    results = []
    for name, memmap, b256, hdf5, eager in jobs:
        r = run_one(name, args, memmap=memmap, batch_256=b256, hdf5=hdf5, eager=eager)
        if r is not None:
            results.append(r)
            gpu = f", GPU peak {r['gpu_peak'] / GB:.2f} GB" if "gpu_peak" in r else ""
            print(f"  {r['label']}: fit {r['fit_s']:.1f}s, peak RSS {r['peak_rss'] / GB:.2f} GB"
                  f"{gpu}", flush=True)
    peer = next((r for r in results if r["name"] == "sklearn"), None)
    peer_epoch = peer["train_s"] if peer else None
    header = ["estimator", "fit s", "steps", "batch", "s/epoch", "steps/s", "x sk epoch",
              "peak RSS GB", "peak anon GB", "extra GB", "peak/data", "budget GB", "ok"]
    print_table(f"Scale: {args.rows:,} x {N_FEATURES} {dtype}, epsilon=1, fresh process per fit, "
                f"skdp on {args.device}",
                header, [row(r, peer_epoch) for r in results])
    if peer:
        copy = ("fits X as given" if args.float64 else
                f"fits a float64 copy of X (conversion {peer['convert_s']:.1f}s, not in its "
                "time but in its peak RSS)")
        print(f"\nsklearn SGDClassifier(max_iter=1, tol=None) {copy}. "
              f"extra = peak RSS - X - labels/groups - interpreter with imports "
              f"({peer['base_rss'] / GB:.2f} GB); budget = X * 1.25 + 0.5 GB.")


if __name__ == "__main__":
    main()
