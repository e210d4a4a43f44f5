"""Calibration with the default settings: test log-loss of skdp's
classifiers against scikit-learn's LogisticRegression and a constant
predictor (the training class shares), on Adult, COMPAS and German credit.

Every estimator is fitted with its defaults and ``epsilon`` (1 and 3),
``--seeds`` times; prints the median test log-loss, the ratio to
LogisticRegression (fitted in the same run) and whether the model beats the
constant predictor. The target: within 5 % of LogisticRegression on Adult at
epsilon=1 for DPSGDClassifier, DPBilevelLogisticRegression and
DPDROClassifier, and never worse than the constant predictor. Usage::

    python benchmarks/bench_calibration.py [--seeds 5] [--datasets adult compas german]
"""

import argparse
import os
import statistics
import warnings

import numpy as np
from _common import data_home, print_table
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from skdp import (
    DPBilevelLogisticRegression,
    DPDROClassifier,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
)
from skdp.datasets import fetch_adult, fetch_compas, fetch_german, make_preprocessor

ESTIMATORS = {
    "DPSGDClassifier": (DPSGDClassifier, False),
    "DPBilevelLogisticRegression": (DPBilevelLogisticRegression, False),
    "DPDROClassifier": (DPDROClassifier, False),
    "DPRateConstrainedClassifier": (DPRateConstrainedClassifier, True),
    "DPFERMIClassifier": (DPFERMIClassifier, True),
}


def load(name):
    """``X_train, y_train, s_train, X_test, y_test``: Adult's own split; a
    seeded 70/30 split of the others. Preprocessing from public schemas."""
    home = data_home()
    if name == "adult":
        train = fetch_adult(data_home=home, subset="train", as_frame=True, drop_missing=False)
        test = fetch_adult(data_home=home, subset="test", as_frame=True, drop_missing=False)
        prep = make_preprocessor(train)
        return (np.asarray(prep.fit_transform(train.data), float), np.asarray(train.target),
                np.asarray(train.sensitive, dtype=str),
                np.asarray(prep.transform(test.data), float), np.asarray(test.target))
    bunch = (fetch_compas if name == "compas" else fetch_german)(data_home=home, as_frame=True)
    X = np.asarray(make_preprocessor(bunch).fit_transform(bunch.data), float)
    y, s = np.asarray(bunch.target), np.asarray(bunch.sensitive, dtype=str)
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(0.7 * len(y))
    a, b = order[:cut], order[cut:]
    return X[a], y[a], s[a], X[b], y[b]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", default=["adult", "compas", "german"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 3.0])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for name in args.datasets:
        X, y, s, X_test, y_test = load(name)
        reference = log_loss(y_test, LogisticRegression(max_iter=5000).fit(X, y).predict_proba(X_test))
        classes, counts = np.unique(y, return_counts=True)
        constant = log_loss(y_test, np.tile(counts / counts.sum(), (len(y_test), 1)),
                            labels=classes)
        rows.append([name, "LogisticRegression", "-", f"{reference:.4f}", "1.000", "yes"])
        rows.append([name, "constant (class shares)", "-", f"{constant:.4f}",
                     f"{constant / reference:.3f}", "-"])
        for label, (estimator, grouped) in ESTIMATORS.items():
            for epsilon in args.epsilons:
                losses = []
                for seed in range(args.seeds):
                    kwargs = {"sensitive_features": s} if grouped else {}
                    model = estimator(epsilon=epsilon, random_state=seed).fit(X, y, **kwargs)
                    losses.append(log_loss(y_test, model.predict_proba(X_test),
                                           labels=model.classes_))
                loss = statistics.median(losses)
                rows.append([name, label, epsilon, f"{loss:.4f}", f"{loss / reference:.3f}",
                             "yes" if loss < constant else "NO"])
                print(rows[-1], flush=True)
    print_table(f"Test log-loss, median of {args.seeds} seeds (defaults; LogisticRegression "
                "in the same run)", ["data", "model", "epsilon", "log-loss",
                                     "/ LogisticRegression", "beats constant"], rows)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
