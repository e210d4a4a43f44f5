"""Privacy audit of every skdp estimator on Adult: the one-run lower bound
against the claimed epsilon, honest and broken.

For each estimator and epsilon in ``--epsilons`` (1 and 8 by default): one
fit on ``--rows`` Adult training records (standardised, sex as the group)
with ``--canaries`` canaries (skdp.audit: one extra column each, included by
a fair coin), the one-run lower bound at confidence 0.95 and the claimed
``epsilon_``; then the same audit on broken copies whose noise is a tenth of
the planned size and zero (tests/_broken.py; they still claim the planned
epsilon). The claim of a pipeline is spent()'s; the person-level case
audits a DPSGDClassifier fitted with unit_ids against canary persons of 10
records each. The bound is the one valid for every mechanism (every fit
here is subsampled: see skdp.audit.is_gaussian_event). A correct
estimator keeps the honest bound at or below the claim; the broken copies
should exceed it. Usage::

    python benchmarks/bench_audit.py [--rows 5000] [--canaries 1000] [--epsilons 1 8]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from _common import load_adult, print_table
from sklearn.pipeline import make_pipeline

# the broken copies' noise patch is a test helper, not part of the package
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from _broken import scaled_noise  # noqa: E402

from skdp import (
    DPBilevelLogisticRegression,
    DPBilevelRidge,
    DPDROClassifier,
    DPDRORegressor,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp.audit import audit_one_run
from skdp.model_selection import PrivateGridSearchCV
from skdp.preprocessing import DPStandardScaler


def estimators(epsilon, d):
    """(name, estimator, target kind, fit options) of every audited estimator
    (``d`` features)."""
    grid = {"learning_rate": [0.1, 0.5]}
    return [
        ("DPSGDClassifier", DPSGDClassifier(epsilon=epsilon), "label", {}),
        ("DPSGDRegressor", DPSGDRegressor(epsilon=epsilon), "value", {}),
        ("DPRateConstrainedClassifier", DPRateConstrainedClassifier(epsilon=epsilon), "label",
         {"groups": True}),
        ("DPFERMIClassifier (1 silo)", DPFERMIClassifier(epsilon=epsilon), "label",
         {"groups": True}),
        ("DPFERMIClassifier (3 silos)", DPFERMIClassifier(epsilon=epsilon), "label",
         {"groups": True, "silos": 3}),
        ("DPDROClassifier", DPDROClassifier(epsilon=epsilon), "label", {}),
        ("DPDRORegressor", DPDRORegressor(epsilon=epsilon), "value", {}),
        ("DPBilevelLogisticRegression", DPBilevelLogisticRegression(epsilon=epsilon), "label",
         {}),
        ("DPBilevelRidge", DPBilevelRidge(epsilon=epsilon), "value", {}),
        ("PrivateGridSearchCV(DPSGDClassifier)",
         PrivateGridSearchCV(DPSGDClassifier(), grid, epsilon=epsilon), "label", {}),
        ("DPStandardScaler", DPStandardScaler(epsilon=epsilon, bounds=(-20, 20)), None, {}),
        ("Pipeline(DPStandardScaler, DPSGDClassifier), claim: spent()",
         make_pipeline(DPStandardScaler(epsilon=epsilon, bounds=(np.full(d, -20.0),
                                                                 np.full(d, 20.0))),
                       DPSGDClassifier(epsilon=epsilon)), "label", {}),
        ("DPSGDClassifier, persons (canaries of 10 records)", DPSGDClassifier(epsilon=epsilon),
         "label", {"persons": True}),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 8.0])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    X, y, s, _, _, _ = load_adult()
    rows = np.random.default_rng(0).permutation(len(y))[: args.rows]
    X, y, s = X[rows], (y[rows] == np.unique(y)[1]).astype(int), s[rows]
    value = X[:, 0]  # a numeric column as the regression target (age, standardised)
    X = np.delete(X, 0, axis=1)
    table = []
    for epsilon in args.epsilons:
        for name, estimator, kind, options in estimators(epsilon, X.shape[1]):
            target = {"label": y, "value": value, None: None}[kind]
            params = {}
            if options.get("groups"):
                params["sensitive_features"] = s
            if options.get("silos"):
                params["silo_ids"] = np.arange(len(y)) % options["silos"]
            if options.get("persons"):  # about 5 records a person; canary persons of 10
                params["unit_ids"] = np.random.default_rng(1).integers(0, len(y) // 5, len(y))
                params["records_per_canary"] = 10
            bounds = []
            start = time.perf_counter()
            for factor in (1.0, 0.1, 0.0):
                with scaled_noise(factor):
                    result = audit_one_run(estimator, X, target, n_canaries=args.canaries,
                                           random_state=0, **params)
                bounds.append(result.epsilon_lower_bound)
            table.append([name, epsilon, f"{result.epsilon_claimed:.3f}",
                          f"{bounds[0]:.2f}", "yes" if bounds[0] <= result.epsilon_claimed
                          else "NO", f"{bounds[1]:.2f}", f"{bounds[2]:.2f}",
                          "yes" if bounds[2] > result.epsilon_claimed else "no",
                          f"{time.perf_counter() - start:.1f}"])
            print(table[-1], flush=True)
    print_table(
        f"One-run audit on {args.rows} Adult records with {args.canaries} canaries "
        "(lower bounds at confidence 0.95)",
        ["estimator", "epsilon", "claimed", "bound", "bound <= claim", "bound (noise/10)",
         "bound (no noise)", "broken caught", "seconds"], table)


if __name__ == "__main__":
    main()
