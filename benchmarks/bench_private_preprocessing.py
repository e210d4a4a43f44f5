"""Private preprocessing on Adult: what does covering the scaler and the
encoder by the privacy budget cost a downstream DP-SGD model?

``DPSGDClassifier(epsilon=1)`` with its default parameters is trained on the
UCI Adult training split (skdp's embedded copy, rows with missing values
dropped) behind four preprocessings, 5 seeds each, and scored on the test
split:

* ``non-private``: :func:`skdp.datasets.make_preprocessor` (scikit-learn
  ``StandardScaler`` + ``OneHotEncoder`` fitted on the data; not covered by
  any epsilon);
* ``public categories``: ``DPStandardScaler(epsilon=0.1)`` with public
  bounds + ``DPOneHotEncoder`` with the categories of the data dictionary
  (``adult.names``), which costs nothing;
* ``private categories``: ``DPStandardScaler(epsilon=0.05)`` + frequent
  categories selected privately among the ``adult.names`` candidates
  (``epsilon=0.05``, ``min_frequency=None``: 2 noise standard deviations);
* ``unknown categories``: as above without a candidate list (stable
  histogram, ``epsilon=0.05``).

The public bounds are what a practitioner knows without looking at the
data: age in [17, 90] and hours-per-week in [1, 99] (``adult.names`` and the
census top-coding), education-num in [1, 16] (16 education levels),
capital-gain in [0, 99999] (the top-code), capital-loss in [0, 5000] and
fnlwgt in [0, 1.5e6] (round public ranges). Preprocessing steps use
``delta=1e-6``; the total of each pipeline is :func:`skdp.model_selection.spent` (at
the sum of the steps' deltas, and at the classifier's delta 1e-5 alone: the
Gaussian releases compose in GDP, so 0.1 of preprocessing adds far less
than 0.1 to the classifier's epsilon).
Usage::

    python benchmarks/bench_private_preprocessing.py [--seeds 5]
"""

import argparse
import time

import numpy as np
from _common import print_table
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from skdp import DPSGDClassifier
from skdp.datasets import fetch_adult, make_preprocessor
from skdp.preprocessing import DPOneHotEncoder, DPStandardScaler
from skdp.model_selection import spent

BOUNDS = {
    "age": (17, 90), "fnlwgt": (0, 1.5e6), "education-num": (1, 16),
    "capital-gain": (0, 99999), "capital-loss": (0, 5000), "hours-per-week": (1, 99),
}
PRE_EPSILON, PRE_DELTA = 0.1, 1e-6


def private_preprocessor(train, kind, seed):
    numeric, categorical = train.numeric_features, train.categorical_features
    schema = [list(train.categories[name]) for name in categorical]
    if kind == "public categories":
        scaler_eps, encoder = PRE_EPSILON, DPOneHotEncoder(categories=schema)
    else:
        scaler_eps = PRE_EPSILON / 2
        encoder = DPOneHotEncoder(
            categories="private",
            candidate_categories=schema if kind == "private categories" else None,
            epsilon=PRE_EPSILON / 2, delta=PRE_DELTA, random_state=seed,
        )
    scaler = DPStandardScaler(epsilon=scaler_eps, delta=PRE_DELTA,
                              bounds={name: BOUNDS[name] for name in numeric}, random_state=seed)
    return ColumnTransformer([("num", scaler, numeric), ("cat", encoder, categorical)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()

    train = fetch_adult(as_frame=True)
    test = fetch_adult(as_frame=True, subset="test")
    print(f"Adult: {len(train.target)} train / {len(test.target)} test rows")
    kinds = ["non-private", "public categories", "private categories", "unknown categories"]
    results = {kind: [] for kind in kinds}
    for seed in range(args.seeds):
        for kind in kinds:
            pre = (make_preprocessor(train) if kind == "non-private"
                   else private_preprocessor(train, kind, seed))
            pipe = Pipeline([("pre", pre), ("clf", DPSGDClassifier(epsilon=1.0, random_state=seed))])
            start = time.perf_counter()
            pipe.fit(train.data, train.target)
            accuracy = pipe.score(test.data, test.target)
            if kind == "non-private":
                total = (float("inf"), pipe["clf"].delta_, float("inf"))
            else:
                report = spent(pipe)
                total = (report.epsilon, report.delta, spent(pipe, delta=1e-5).epsilon)
            width = pipe["pre"].transform(train.data.head(1)).shape[1]
            results[kind].append((accuracy, *total, width))
            print(f"[seed {seed}] {kind:<19} accuracy {accuracy:.4f}  total epsilon "
                  f"{total[0]:.3f}  inputs {width}  ({time.perf_counter() - start:.1f} s)",
                  flush=True)

    base = np.array([r[0] for r in results["non-private"]])
    rows = []
    for kind in kinds:
        acc = np.array([r[0] for r in results[kind]])
        eps, delta, eps_at, width = results[kind][0][1:]
        rows.append([
            kind, "-" if kind == "non-private" else f"{PRE_EPSILON:g}",
            "inf" if not np.isfinite(eps) else f"{eps:.3f}", f"{delta:.2g}",
            "inf" if not np.isfinite(eps_at) else f"{eps_at:.3f}", width,
            f"{acc.mean():.4f} +- {acc.std():.4f}", f"{(acc - base).mean():+.4f}",
        ])
    print_table(
        f"DPSGDClassifier(epsilon=1) on Adult, {args.seeds} seeds (paired by seed)",
        ["preprocessing", "eps pre", "eps total", "delta total", "eps total @1e-5", "inputs",
         "test accuracy",
         "diff vs non-private"],
        rows,
    )


if __name__ == "__main__":
    main()
