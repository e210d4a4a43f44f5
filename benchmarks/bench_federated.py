"""Federated DP-FERMI: the cost of each engine.

* per-round time of ``engine="inprocess"``, ``engine="flower-simulation"``
  and a localhost Flower deployment (:class:`skdp.federated.LocalFederation`,
  warm SuperNodes; optionally Flower's stock subprocess isolation) at 3 and
  10 silos, on Adult split by :func:`skdp.datasets.make_silos`: the
  training time of the fit (rounds only) over the rounds, and the start-up
  (Ray, or the SuperLink / SuperNodes / ``flwr run``) apart;
* the whole Adult fit (3 silos, defaults: 150 rounds) in each engine, next
  to the in-process fit; every engine gives the same coefficients (checked).

Usage::

    python benchmarks/bench_federated.py [--rounds 10] [--no-deployment]
        [--no-whole-fit] [--subprocess]
"""

import argparse
import os
import time
import warnings

import numpy as np
from _common import load_adult, print_table

from skdp import DPFERMIClassifier
from skdp.debug import record_fit_times
from skdp.datasets import make_silos

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


def fit_inprocess(data, silos, **kw):
    """In process with one pass per silo, the computation remote silos run,
    so the coefficients can be compared bit for bit."""
    X, y, s = data
    start = time.perf_counter()
    with record_fit_times() as times:
        clf = DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": False}}).fit(
            X, y, sensitive_features=s, silo_ids=silos)
    return clf, time.perf_counter() - start, 0.0, times[-1]


def fit_simulation(data, silos, **kw):
    X, y, s = data
    start = time.perf_counter()
    with record_fit_times() as times:
        clf = DPFERMIClassifier(**kw, solver_options={"engine": "flower-simulation"}).fit(
            X, y, sensitive_features=s, silo_ids=silos)
    total = time.perf_counter() - start
    return clf, total, total - _seconds(times[-1]), times[-1]


def fit_deployment(data, silos, isolation="warm", **kw):
    from skdp.federated import LocalFederation

    X, y, s = data
    parts = [(X[silos == j], y[silos == j], s[silos == j]) for j in np.unique(silos)]
    start = time.perf_counter()
    with LocalFederation(parts, isolation=isolation) as federation:
        up = time.perf_counter() - start
        with record_fit_times() as times:
            clf = federation.fit(DPFERMIClassifier(**kw), classes=np.unique(y),
                                 groups=np.unique(s), n_features=X.shape[1])
    total = time.perf_counter() - start
    return clf, total, total - _seconds(times[-1]), up, times[-1]


def _seconds(times):
    """Calibration and training seconds of one fit's recorded times."""
    return times["calibration"] + times["training"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-deployment", action="store_true")
    parser.add_argument("--no-whole-fit", action="store_true")
    parser.add_argument("--subprocess", action="store_true",
                        help="also Flower's stock SuperNode (3 silos, 3 rounds)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    X, y, s, X_test, y_test, _ = load_adult()
    data = (X, y, s)
    print(f"Adult: {X.shape[0]} rows, {X.shape[1]} inputs; load {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")

    rows, reference, reference_round = [], {}, {}
    for n_silos in (3, 10):
        silos = make_silos(X, n_silos, random_state=0)
        kw = dict(lam=8.0, max_steps=args.rounds, random_state=0)
        engines = [("in process", fit_inprocess), ("Flower simulation", fit_simulation)]
        if not args.no_deployment:
            engines.append(("Flower deployment (warm)", fit_deployment))
        if args.subprocess and n_silos == 3:
            engines.append(("Flower deployment (subprocess)", lambda d, sl, **k: fit_deployment(
                d, sl, isolation="subprocess", **{**k, "max_steps": 3})))
        for name, fit in engines:
            out = fit(data, silos, **kw)
            clf, total, startup, times = *out[:3], out[-1]
            per_round = times["training"] / clf.n_steps_
            same = ""
            if name == "in process":
                reference[n_silos] = clf
                reference_round[n_silos] = per_round
            elif clf.n_steps_ == reference[n_silos].n_steps_:
                same = str(bool(np.array_equal(clf.coef_, reference[n_silos].coef_)))
            rows.append([n_silos, name, clf.n_steps_, f"{per_round * 1e3:.1f}",
                         f"{(per_round - reference_round[n_silos]) * 1e3:.1f}",
                         f"{startup:.1f}", f"{total:.1f}", same])
            print(rows[-1], flush=True)
    print_table("Per round (training time / rounds; start-up = everything else)",
                ["silos", "engine", "rounds", "ms / round", "overhead ms / round",
                 "start-up s", "total s", "same coef"], rows)

    if args.no_whole_fit:
        return
    silos = make_silos(X, 3, random_state=0)
    rows = []
    engines = [("in process", fit_inprocess), ("Flower simulation", fit_simulation)]
    if not args.no_deployment:
        engines.append(("Flower deployment (warm)", fit_deployment))
    base = None
    for name, fit in engines:
        out = fit(data, silos, lam=8.0, random_state=0)
        clf, total, times = out[0], out[1], out[-1]
        base = clf if base is None else base
        accuracy = np.mean(clf.predict(X_test) == y_test)
        rows.append([name, clf.n_steps_, f"{total:.1f}", f"{times['training']:.1f}",
                     f"{accuracy:.4f}", str(bool(np.array_equal(clf.coef_, base.coef_)))])
        print(rows[-1], flush=True)
    print_table("Whole Adult fit, 3 silos, defaults (lam=8, epsilon=1)",
                ["engine", "rounds", "total s", "training s", "test accuracy", "same coef"],
                rows)


if __name__ == "__main__":
    main()
