"""The privacy ledger's cost per fit on Adult.

DPSGDClassifier(epsilon=1) fits on Adult, one thread, each with an empty
calibration cache: without a ledger, inside the charging block of a fresh
ledger, and of a ledger that already holds ``--history`` fits of the same
kind (each charge composes every entry with the accountant). Prints the
median fit times, the ledger's own time per charge (reserve and commit)
and its share of the fit; scikit-learn's LogisticRegression in the same
process for scale. Usage::

    python benchmarks/bench_ledger.py [--repeats 5] [--history 10]
"""

import argparse
import os
import tempfile
import time
import warnings

import torch
from _common import load_adult, median, print_table, timed
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from skdp import DPSGDClassifier
from skdp.privacy import PrivacyLedger, _accounting
from skdp.privacy.ledger import _ledger


def fit(X, y, seed, ledger=None):
    _accounting._calibrate_noise_cached.cache_clear()
    _accounting._epsilon_cached.cache_clear()
    clf = DPSGDClassifier(epsilon=1.0, delta=1e-5, random_state=seed)
    if ledger is None:
        return timed(clf.fit, X, y)[1]
    with ledger.charging("bench"):
        return timed(clf.fit, X, y)[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--history", type=int, default=10)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    X, y, *_ = load_adult()
    folder = tempfile.mkdtemp()

    # time spent inside the ledger's own reserve and commit
    spent_in_ledger = []
    for name in ("reserve", "commit"):
        original = getattr(_ledger.PrivacyLedger, name)

        def wrapper(self, *a, _original=original, **k):
            start = time.perf_counter()
            try:
                return _original(self, *a, **k)
            finally:
                spent_in_ledger.append(time.perf_counter() - start)

        setattr(_ledger.PrivacyLedger, name, wrapper)

    with threadpool_limits(1):
        lr = median([timed(LogisticRegression(max_iter=1000).fit, X, y)[1]
                     for _ in range(args.repeats)])
    fit(X, y, 99)  # warm-up

    rows = []
    plain = median([fit(X, y, s) for s in range(args.repeats)])
    rows.append(["no ledger", f"{plain:.3f}", "-", "-"])
    for history in (0, args.history):
        times, own = [], []
        for s in range(args.repeats):
            ledger = PrivacyLedger.create(os.path.join(folder, f"h{history}-{s}"),
                                          max_epsilon=1e3, delta=1e-5)
            for k in range(history):
                fit(X, y, 1000 + k, ledger)
            spent_in_ledger.clear()
            times.append(fit(X, y, s, ledger))
            own.append(sum(spent_in_ledger))
        label = "fresh ledger" if history == 0 else f"ledger holding {history} fits"
        rows.append([label, f"{median(times):.3f}", f"{1e3 * median(own):.1f}",
                     f"{median(own) / plain:.1%}"])
    print_table(
        f"DPSGDClassifier(epsilon=1) on Adult, median of {args.repeats} fits "
        f"(LogisticRegression: {lr:.3f} s)",
        ["", "fit s", "ledger ms", "ledger / fit"], rows,
    )


if __name__ == "__main__":
    main()
