"""CUDA: DP-SGD's fixed-shape steps replayed as a CUDA graph against the
eager step loop, and what a capture costs.

A ``--rows`` x 100 float32 table (default 1M) is moved to the GPU once;
``DPSGDClassifier(epsilon=1, device="cuda")`` is fitted with each batch size
and number of steps, with the eager loop (``skdp._training.FIXED_SHAPE_STEPS
= False``) and with the fixed-shape steps replayed as a graph (captured
whatever the number of steps), in alternating rounds after a warm-up fit;
the table gives the median training time of ``--repeats`` fits (the
``training`` part of :func:`skdp.debug.record_fit_times`), the time per
step and the capture itself (the call that captures and replays once,
synchronised before and after): where a graph pays.

Usage::

    python benchmarks/bench_cuda_steps.py [--rows 1000000] [--repeats 3]
"""

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import skdp._training as training
from skdp import DPSGDClassifier
from skdp._fixed_steps import GRAPH_WARMUP, FixedShapeSteps
from skdp.debug import record_fit_times

sys.path.insert(0, str(Path(__file__).parent))
from _common import print_table  # noqa: E402

CAPTURES = []


def _timed_capture(step):
    def graphed_step(self):
        if self.graph is None and self._warm >= GRAPH_WARMUP:
            torch.cuda.synchronize()
            start = time.perf_counter()
            step(self)
            torch.cuda.synchronize()
            CAPTURES.append(time.perf_counter() - start)
        else:
            step(self)
    return graphed_step


def _training_time(X, y, batch_size, steps, mode):
    training.FIXED_SHAPE_STEPS = mode
    estimator = DPSGDClassifier(epsilon=1.0, batch_size=batch_size, max_steps=steps,
                                device="cuda", random_state=0)
    with warnings.catch_warnings(), record_fit_times() as times:
        warnings.simplefilter("ignore")
        estimator.fit(X, y)
    return times[-1]["training"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_cuda_steps: no CUDA device; nothing to measure.")
        return
    FixedShapeSteps._graphed_step = _timed_capture(FixedShapeSteps._graphed_step)
    training.GRAPH_MIN_STEPS = 1
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, 100), dtype=np.float32)
    y = (X[:, :10].sum(1) + rng.standard_normal(args.rows) > 0).astype(int)
    _training_time(X, y, 1024, 50, "auto")  # warm-up: CUDA, cuBLAS, the calibration cache
    rows = []
    for batch_size in (256, 4096, 65536):
        for steps in (100, 1000):
            times = {False: [], "auto": []}
            CAPTURES.clear()
            for _ in range(args.repeats):
                for mode in times:
                    times[mode].append(_training_time(X, y, batch_size, steps, mode))
            eager, graph = (statistics.median(times[m]) for m in (False, "auto"))
            rows.append([batch_size, steps, f"{eager:.3f}", f"{graph:.3f}",
                         f"{eager / steps * 1e6:.0f}", f"{graph / steps * 1e6:.0f}",
                         f"{statistics.median(CAPTURES) * 1e3:.1f}", f"{graph / eager:.2f}"])
    print_table(f"DPSGDClassifier on {torch.cuda.get_device_name()}, {args.rows:,} x 100 float32, "
                f"median of {args.repeats}",
                ["batch", "steps", "eager s", "graph s", "eager us/step", "graph us/step",
                 "capture ms", "graph/eager"], rows)


if __name__ == "__main__":
    main()
