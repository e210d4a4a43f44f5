"""Fingerprints of seeded fits, to prove that a refactoring changes nothing.

Fits a fixed set of estimator configurations (every estimator, linear and
MLP, one and several silos, every DRO algorithm, the private search and the
private preprocessing) with fixed seeds and saves every fitted float array
and the reported epsilons. Run it before and after a change, on the same
machine and thread count, and compare: a pure refactoring gives identical
bits (see docs/privacy.rst, Reproducibility: other machines or thread counts
agree only within a tolerance). Usage::

    OMP_NUM_THREADS=2 python benchmarks/fingerprint_fits.py before.pkl
    ... change the code ...
    OMP_NUM_THREADS=2 python benchmarks/fingerprint_fits.py after.pkl
    python benchmarks/fingerprint_fits.py --compare before.pkl after.pkl
"""

import argparse
import pickle
import sys
import warnings

import numpy as np
from sklearn.pipeline import Pipeline


def configurations():
    from sklearn.pipeline import make_pipeline

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
    from skdp.model_selection import PrivateGridSearchCV
    from skdp.preprocessing import DPMinMaxScaler, DPOneHotEncoder, DPStandardScaler

    mlp = dict(hidden_layer_sizes=(8,), random_state=0)
    return {
        "dpsgd": (DPSGDClassifier(random_state=0), "clf", {}),
        "dpsgd_mlp": (DPSGDClassifier(**mlp), "clf", {}),
        "dpsgd_multiclass": (DPSGDClassifier(random_state=0), "multi", {}),
        "dpsgd_regressor": (DPSGDRegressor(random_state=0), "reg", {}),
        "dpsgd_regressor_mlp": (DPSGDRegressor(**mlp), "reg", {}),
        "raco": (DPRateConstrainedClassifier(random_state=0), "clf", {"groups": True}),
        "raco_mlp": (DPRateConstrainedClassifier(constraint="equalized_odds", **mlp), "clf",
                     {"groups": True}),
        "fermi": (DPFERMIClassifier(random_state=0), "clf", {"groups": True}),
        "fermi_silos": (DPFERMIClassifier(random_state=0), "clf", {"groups": True, "silos": True}),
        "fermi_per_silo_mlp": (DPFERMIClassifier(engine_options={"batched": False}, **mlp),
                               "clf", {"groups": True, "silos": True}),
        "dro_double_spider": (DPDROClassifier(algorithm="double_spider", random_state=0), "clf",
                              {}),
        "dro_dp_sgd": (DPDROClassifier(algorithm="dp_sgd", random_state=0), "clf", {}),
        "dro_recursive_spider": (DPDROClassifier(algorithm="recursive_spider", divergence="kl",
                                                 random_state=0), "clf", {}),
        "dro_regressor": (DPDRORegressor(random_state=0), "reg", {}),
        "bilevel_ridge": (DPBilevelRidge(random_state=0), "reg", {}),
        "bilevel_logistic": (DPBilevelLogisticRegression(random_state=0), "clf", {}),
        "bilevel_dp_sgd": (DPBilevelLogisticRegression(inner_solver="dp_sgd", random_state=0),
                           "clf", {}),
        "search": (PrivateGridSearchCV(DPSGDClassifier(max_epochs=2),
                                       {"learning_rate": [0.3, 1.0]}, random_state=0),
                   "clf", {}),
        "standard_scaler": (DPStandardScaler(bounds=(-4.0, 4.0), random_state=0), "X", {}),
        "minmax_scaler": (DPMinMaxScaler(data_range=(-10.0, 10.0), random_state=0), "X", {}),
        "encoder": (DPOneHotEncoder(random_state=0), "categories", {}),
        "pipeline": (make_pipeline(DPStandardScaler(bounds=(-4.0, 4.0), random_state=0),
                                   DPSGDClassifier(random_state=0)), "clf", {}),
    }


def data():
    from skdp.datasets import make_fair_classification

    X, y, g = make_fair_classification(n_samples=6000, n_features=6, random_state=0)
    rng = np.random.default_rng(0)
    return {
        "X": X, "y": y, "groups": g, "silos": np.arange(len(y)) % 3,
        "multi": (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int),
        "reg": X[:, 0] - 2.0 * X[:, 1] + 0.3 * rng.normal(size=len(y)),
        "categories": rng.choice(np.array(["a", "b", "c"]), size=(len(y), 2)),
    }


def fitted_arrays(estimator):
    """Every float (or float array) fitted attribute, nested ones flattened."""
    out = {}

    def visit(name, value):
        if isinstance(value, Pipeline):
            for step_name, step in value.steps:
                visit(f"{name}.{step_name}", step)
        elif hasattr(value, "get_params") and hasattr(value, "fit"):
            for key, item in vars(value).items():
                if key.endswith("_") and not key.startswith("_"):
                    visit(f"{name}.{key}", item)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(f"{name}[{key!r}]", item)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(f"{name}[{index}]", item)
        elif isinstance(value, (float, np.floating)) or (
                isinstance(value, np.ndarray) and value.dtype.kind == "f"):
            out[name] = np.array(value, dtype=np.float64)

    visit("", estimator)
    # wall-clock times are not fingerprints
    return {k: v for k, v in out.items() if "fit_time_" not in k}


def fingerprint():
    warnings.simplefilter("ignore")
    d = data()
    out = {}
    for name, (estimator, target, options) in configurations().items():
        kwargs = {}
        if options.get("groups"):
            kwargs["sensitive_features"] = d["groups"]
        if options.get("silos"):
            kwargs["silo_ids"] = d["silos"]
        if target == "X":
            estimator.fit(d["X"])
        elif target == "categories":
            estimator.fit(d["categories"])
        else:
            estimator.fit(d["X"], d[target if target != "clf" else "y"], **kwargs)
        out[name] = fitted_arrays(estimator)
        print(f"{name}: {len(out[name])} arrays", flush=True)
    return out


def compare(before, after):
    """Names of the configurations whose fingerprints differ, with the
    first differing attribute."""
    differences = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            differences.append(f"{name}: only in {'after' if a is None else 'before'}")
            continue
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                differences.append(f"{name}: {key} only in {'after' if key not in a else 'before'}")
            elif a[key].shape != b[key].shape or not np.array_equal(a[key], b[key], equal_nan=True):
                differences.append(f"{name}: {key} differs")
    return differences


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    if args.compare:
        before, after = (pickle.load(open(p, "rb")) for p in args.paths)
        differences = compare(before, after)
        print("\n".join(differences) or f"identical: {len(before)} configurations")
        sys.exit(1 if differences else 0)
    with open(args.paths[0], "wb") as fh:
        pickle.dump(fingerprint(), fh)


if __name__ == "__main__":
    main()
