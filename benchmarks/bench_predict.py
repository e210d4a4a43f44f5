"""Prediction cost: skdp scores in float64 (a row's score never depends on the
other rows of the call), as scikit-learn's own models do.

Fits on Adult (32,561 x 105 after preprocessing), then times
``predict_proba`` on the test rows tiled to ``--rows`` rows, side by side:

* linear: ``DPSGDClassifier()`` against ``LogisticRegression``;
* MLP (one hidden layer of 64): ``DPSGDClassifier(hidden_layer_sizes=(64,))``
  against ``MLPClassifier(hidden_layer_sizes=(64,))``, and against the float32
  forward pass skdp used before (the same module in float32, for the cost of
  the float64 copy).

Median of ``--repeats`` calls; prints seconds and ratios. Usage::

    python benchmarks/bench_predict.py [--rows 1000000] [--repeats 5]
"""

import argparse
import warnings

import numpy as np
import torch
from _common import load_adult, median, print_table, timed
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from skdp import DPSGDClassifier


def float32_forward(clf, X):
    """The float32 forward pass of skdp's fitted module (the old inference)."""
    module = clf._build_module(clf.n_features_in_, clf._n_model_outputs(), 0)
    module.load_state_dict({k: torch.as_tensor(v) for k, v in clf.module_state_.items()})
    with torch.no_grad():
        return torch.softmax(module(torch.as_tensor(X, dtype=torch.float32)), 1).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    X_train, y_train, _, X_test, _, _ = load_adult()
    X = np.tile(X_test, (-(-args.rows // len(X_test)), 1))[: args.rows]
    print(f"Adult: fit on {X_train.shape}, predict_proba on {X.shape}, "
          f"torch threads {torch.get_num_threads()}")

    models = {
        "skdp linear": DPSGDClassifier(random_state=0),
        "sklearn LogisticRegression": LogisticRegression(max_iter=1000),
        "skdp MLP (64)": DPSGDClassifier(hidden_layer_sizes=(64,), random_state=0),
        "sklearn MLPClassifier (64)": MLPClassifier(hidden_layer_sizes=(64,), max_iter=20,
                                                    random_state=0),
    }
    for model in models.values():
        model.fit(X_train, y_train)

    def time_of(fn):
        return median([timed(fn, X)[1] for _ in range(args.repeats)])

    seconds = {name: time_of(model.predict_proba) for name, model in models.items()}
    seconds["skdp MLP (64), float32 forward"] = time_of(
        lambda rows: float32_forward(models["skdp MLP (64)"], rows))
    rows = [
        ["linear", f"{seconds['skdp linear']:.3f}", f"{seconds['sklearn LogisticRegression']:.3f}",
         f"{seconds['skdp linear'] / seconds['sklearn LogisticRegression']:.2f}x", ""],
        ["MLP (64)", f"{seconds['skdp MLP (64)']:.3f}",
         f"{seconds['sklearn MLPClassifier (64)']:.3f}",
         f"{seconds['skdp MLP (64)'] / seconds['sklearn MLPClassifier (64)']:.2f}x",
         f"{seconds['skdp MLP (64)'] / seconds['skdp MLP (64), float32 forward']:.2f}x"],
    ]
    print_table(f"predict_proba on {len(X):,} rows, median of {args.repeats} (seconds)",
                ["model", "skdp (float64)", "scikit-learn", "skdp / sklearn",
                 "float64 / float32 forward"], rows)


if __name__ == "__main__":
    main()
