"""Time to calibrate a noise multiplier: search on the whole-array PLD
replica plus one certifying accountant evaluation, against the search on the
accountant alone (the previous method), in the same run.

For a grid of DP-SGD plans (epsilon, sampling rate, steps), each calibration
starts with cold caches. Prints, per plan and overall, the wall time of both
searches, how many dp-accounting evaluations each made, the ratio of the
multipliers they return, and the accountant's epsilon of the returned
multiplier (it must lie in [0.994, 1] x target). Usage::

    python benchmarks/bench_noise_calibration.py [--plans 40] [--max-steps 100000]
"""

import argparse
import math
import os
import statistics
import time

import numpy as np
from _common import print_table

from skdp.privacy import _accounting, compute_epsilon, poisson_gaussian_event


def calibrate(epsilon, delta, rate, steps, *, replica):
    """(sigma, seconds, accountant evaluations) with cold caches."""
    _accounting._calibrate_noise_cached.cache_clear()
    _accounting._epsilon_cached.cache_clear()
    saved = _accounting.estimated_log_epsilon
    if not replica:
        _accounting.estimated_log_epsilon = lambda *args: None
    try:
        start = time.perf_counter()
        sigma = _accounting.calibrate_noise_multiplier(epsilon, delta, rate, steps)
        seconds = time.perf_counter() - start
    finally:
        _accounting.estimated_log_epsilon = saved
    return sigma, seconds, _accounting._epsilon_cached.cache_info().misses


def plans(count, max_steps, seed=0):
    rng = np.random.default_rng(seed)
    fixed = [(1.0, 1000 / 32561, 320), (1.0, 256 / 2_000_000, 7812),
             (1.0, 1e-3, max_steps)]
    drawn = [(float(10 ** rng.uniform(math.log10(0.3), math.log10(8))),
              float(10 ** rng.uniform(-4, -1)),
              int(10 ** rng.uniform(2, math.log10(max_steps))))
             for _ in range(max(count - len(fixed), 0))]
    return fixed + drawn


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=40)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--delta", type=float, default=1e-5)
    args = parser.parse_args()
    rows, new_times, old_times, worst = [], [], [], 0.0
    for epsilon, rate, steps in plans(args.plans, args.max_steps):
        # warm numpy / scipy once so the first plan is not charged for it
        if not rows:
            calibrate(epsilon, args.delta, rate, steps, replica=True)
        old_sigma, old_s, old_evals = calibrate(epsilon, args.delta, rate, steps, replica=False)
        sigma, new_s, new_evals = calibrate(epsilon, args.delta, rate, steps, replica=True)
        eps = compute_epsilon(poisson_gaussian_event(sigma, rate, steps), args.delta)
        if not 0.994 * epsilon * (1 - 1e-9) <= eps <= epsilon:
            raise AssertionError(f"epsilon {eps} outside the window of {epsilon}")
        worst = max(worst, abs(sigma / old_sigma - 1))
        new_times.append(new_s)
        old_times.append(old_s)
        rows.append([f"{epsilon:.3g}", f"{rate:.2e}", steps, f"{sigma:.4g}", f"{eps / epsilon:.4f}",
                     new_evals, f"{new_s * 1e3:.0f}", old_evals, f"{old_s * 1e3:.0f}",
                     f"{new_s / old_s:.2f}"])
    print_table(
        "Noise calibration (cold caches; replica search + 1 accountant call vs accountant-only "
        "search, same run)",
        ["epsilon", "q", "steps", "sigma", "eps/target", "evals", "ms", "evals (old)",
         "ms (old)", "ratio"], rows)
    print(f"median {statistics.median(new_times) * 1e3:.0f} ms (old "
          f"{statistics.median(old_times) * 1e3:.0f} ms), max {max(new_times) * 1e3:.0f} ms "
          f"(old {max(old_times) * 1e3:.0f} ms), median ratio "
          f"{statistics.median(n / o for n, o in zip(new_times, old_times)):.2f}; "
          f"largest relative change of sigma {worst:.1e}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
