"""Fingerprints of seeded fits, to prove that a refactoring changes nothing.

Fits a fixed set of estimator configurations (every estimator, linear and
MLP, one and several silos, every DRO algorithm, the private search and the
private preprocessing; every estimator with ``unit_ids``; sample weights and
balanced class weights; a two-fit warm start; the imputer; a memmap and an
HDF5-like row store; a two-process data-parallel fit) with fixed seeds and
saves every fitted float array and the reported epsilons. Run it before and after a change, on the same
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
    from skdp.preprocessing import (
        DPMinMaxScaler,
        DPOneHotEncoder,
        DPSimpleImputer,
        DPStandardScaler,
    )

    mlp = dict(hidden_layer_sizes=(8,), random_state=0)
    seeded = dict(random_state=0)
    units = {
        f"{name}_units": (estimator, target, {**options, "units": True})
        for name, (estimator, target, options) in {
            "dpsgd": (DPSGDClassifier(**seeded), "clf", {}),
            "dpsgd_regressor": (DPSGDRegressor(**seeded), "reg", {}),
            "raco": (DPRateConstrainedClassifier(**seeded), "clf", {"groups": True}),
            "fermi": (DPFERMIClassifier(**seeded), "clf", {"groups": True}),
            "fermi_silos": (DPFERMIClassifier(**seeded), "clf",
                            {"groups": True, "silos": True}),
            "dro": (DPDROClassifier(**seeded), "clf", {}),
            "dro_regressor": (DPDRORegressor(**seeded), "reg", {}),
            "bilevel_ridge": (DPBilevelRidge(**seeded), "reg", {}),
            "bilevel_logistic": (DPBilevelLogisticRegression(**seeded), "clf", {}),
        }.items()
    }
    return {
        **units,
        "dpsgd_weights": (DPSGDClassifier(max_sample_weight=2.0, **seeded), "clf",
                          {"weights": True}),
        "raco_weights": (DPRateConstrainedClassifier(**seeded), "clf",
                         {"groups": True, "weights": True}),
        "dro_regressor_weights": (DPDRORegressor(**seeded), "reg", {"weights": True}),
        "dpsgd_balanced": (DPSGDClassifier(class_weight="balanced", **seeded), "clf", {}),
        "fermi_balanced": (DPFERMIClassifier(class_weight="balanced", **seeded), "clf",
                           {"groups": True}),
        "dro_balanced": (DPDROClassifier(class_weight="balanced", **seeded), "clf", {}),
        "dpsgd_warm": (DPSGDClassifier(warm_start=True, **seeded), "clf", {"warm": True}),
        "raco_warm": (DPRateConstrainedClassifier(warm_start=True, **seeded), "clf",
                      {"groups": True, "warm": True}),
        "bilevel_ridge_warm": (DPBilevelRidge(warm_start=True, **seeded), "reg",
                               {"warm": True}),
        "imputer": (DPSimpleImputer(bounds=(-4.0, 4.0), **seeded), "X_missing", {}),
        "dpsgd_memmap": (DPSGDClassifier(**seeded), "clf", {"memmap": True}),
        "raco_store": (DPRateConstrainedClassifier(**seeded), "clf",
                       {"groups": True, "store": True}),
        "dpsgd_data_parallel": (DPSGDClassifier(**seeded), "clf", {"launch": True}),
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
        "fermi_per_silo_mlp": (DPFERMIClassifier(**mlp,
                                                 solver_options={"engine_options": {"batched": False}}),
                               "clf", {"groups": True, "silos": True}),
        "dro_double_spider": (DPDROClassifier(random_state=0,
                                              solver_options={"algorithm": "double_spider"}), "clf",
                              {}),
        "dro_dp_sgd": (DPDROClassifier(random_state=0, solver_options={"algorithm": "dp_sgd"}),
                       "clf", {}),
        "dro_recursive_spider": (DPDROClassifier(divergence="kl", random_state=0,
                                                 solver_options={"algorithm": "recursive_spider"}), "clf", {}),
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
        "X_missing": np.where(rng.random(X.shape) < 0.1, np.nan, X),
        "units": rng.integers(0, len(y) // 4, len(y)),
        "weights": rng.uniform(0.0, 2.0, len(y)),
    }


class RowStore:
    """A table that answers only what HDF5 answers: a block of rows, or
    increasing row indices (as tests/test_row_stores.py)."""

    def __init__(self, array):
        self.array, self.shape, self.dtype = array, array.shape, array.dtype

    def __getitem__(self, key):
        if not isinstance(key, slice):
            key = np.asarray(key)
            if key.ndim != 1 or key.dtype.kind not in "iu" or (np.diff(key) <= 0).any():
                raise TypeError("indices must be increasing integers")
        return self.array[key]

    def __len__(self):
        return self.shape[0]


def _memmap(X, directory):
    path = f"{directory}/X.f32"
    mapped = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mapped[:] = X
    mapped.flush()
    return np.memmap(path, dtype=np.float32, mode="r", shape=X.shape)


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
    return out


def fingerprint(names=None):
    import tempfile

    warnings.simplefilter("ignore")
    d = data()
    out = {}
    with tempfile.TemporaryDirectory() as directory:
        for name, (estimator, target, options) in configurations().items():
            if names and name not in names:
                continue
            kwargs = {}
            if options.get("groups"):
                kwargs["sensitive_features"] = d["groups"]
            if options.get("silos"):
                kwargs["silo_ids"] = d["silos"]
            if options.get("units"):
                kwargs["unit_ids"] = (d["units"] if not options.get("silos")
                                      else d["units"] - d["units"] % 3 + d["silos"])
            if options.get("weights"):
                kwargs["sample_weight"] = d["weights"]
            X = d["X"]
            if options.get("memmap"):
                X = _memmap(X.astype(np.float32), directory)
            if options.get("store"):
                X = RowStore(X)
            if target in ("X", "X_missing"):
                estimator.fit(d[target])
            elif target == "categories":
                estimator.fit(d["categories"])
            elif options.get("launch"):
                from skdp.distributed import launch

                estimator = launch(estimator, X, d["y"], n_processes=2)
            else:
                y = d[target if target != "clf" else "y"]
                estimator.fit(X, y, **kwargs)
                if options.get("warm"):
                    estimator.fit(X, y, **kwargs)
            out[name] = fitted_arrays(estimator)
            print(f"{name}: {len(out[name])} arrays", flush=True)
    return out


#: Fitted attributes renamed since fingerprints were first taken (issue 33,
#: one name for one concept): old -> new.
RENAMED = {".sampling_rates_": ".sampling_rate_", ".batch_sizes_": ".batch_size_"}
#: Attributes removed on purpose: DRO's and the bilevel tuners' per-release
#: multipliers (every release's is in ``privacy_report_``).
RETIRED = (".noise_multipliers_",)


def _renamed(key):
    for old, new in RENAMED.items():
        if key.startswith(old):
            return new + key[len(old):]
    return key


def compare(before, after):
    """``(differences, new)``: the configurations whose fingerprints differ
    (with the first differing attribute; renamed attributes compared under
    their new names, retired ones skipped), and the attributes only the
    newer fingerprints have."""
    differences, new = [], []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            differences.append(f"{name}: only in {'after' if a is None else 'before'}")
            continue
        a = {_renamed(k): v for k, v in a.items() if not k.startswith(RETIRED)}
        for key in sorted(set(a) | set(b)):
            if key not in a:
                new.append(f"{name}: {key}")
            elif key not in b:
                differences.append(f"{name}: {key} only in before")
            elif a[key].shape != b[key].shape or not np.array_equal(a[key], b[key], equal_nan=True):
                differences.append(f"{name}: {key} differs")
    return differences, new


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--only", nargs="+", help="fit only these configurations")
    args = parser.parse_args()
    if args.compare:
        before, after = (pickle.load(open(p, "rb")) for p in args.paths)
        differences, new = compare(before, after)
        if new:
            print(f"{len(new)} new attributes (not compared), e.g. {new[0]}")
        print("\n".join(differences) or f"identical: {len(before)} configurations")
        sys.exit(1 if differences else 0)
    with open(args.paths[0], "wb") as fh:
        pickle.dump(fingerprint(args.only), fh)


if __name__ == "__main__":
    main()
