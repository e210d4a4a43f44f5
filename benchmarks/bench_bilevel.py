"""Private regularisation tuning: DP bilevel tuner against private baselines.

For each data set and total epsilon, compares the held-out loss of

* ``bilevel``: DPBilevelRidge / DPBilevelLogisticRegression (one private fit);
* ``grid8``: private selection among 8 values of alpha with
  ``skdp.model_selection.PrivateGridSearchCV`` over DPSGD* (the same model
  family: ``alpha`` is the tuner's omega) at the same total epsilon, on the
  same training data. Classification: noisy confusion histograms (accuracy).
  Regression: noisy sums of squared validation errors clipped to a public
  ``error_bound`` = one public target standard deviation, ``(high - low) /
  8`` of the public ``y_bounds`` below (set from the data sets' public
  descriptions, not from the data or the test split);
* ``fixed``: DPSGD* at a fixed default alpha (the tuner's ``omega_init``),
  the whole epsilon on one fit;
* ``nonpriv``: RidgeCV / LogisticRegressionCV (no privacy).

Loss: test mean squared error (regression, in units of y^2) or log-loss
(classification). Also checks the non-private mode (``epsilon=None``, exact
inner solves) against a fine grid of non-private fits on the synthetic
ridge task, and the time of a tuning fit against one DPSGD fit.

Usage: ``python benchmarks/bench_bilevel.py [--quick]``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LogisticRegressionCV, Ridge, RidgeCV
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_adult, print_table  # noqa: E402

from skdp import DPSGDClassifier, DPSGDRegressor  # noqa: E402
from skdp.datasets import fetch_german, make_preprocessor  # noqa: E402
from skdp.model_selection import DPBilevelLogisticRegression, DPBilevelRidge  # noqa: E402

try:
    from skdp.model_selection import PrivateGridSearchCV
except ImportError:  # being written in parallel
    PrivateGridSearchCV = None

GRID = np.logspace(-4, 0.5, 8)
OMEGA_INIT = 1e-2

#: Public target bounds of the regression sets: the synthetic generator's
#: y = X w + noise * e with w ~ N(0, I_d) has sd sqrt(d + noise^2), bounds
#: +-4 sd; diabetes: "integer 25 - 346" (sklearn's description).
SYNTH_D, SYNTH_NOISE = 200, 15.0
_SYNTH_SD = float(np.sqrt(SYNTH_D + SYNTH_NOISE**2))
Y_BOUNDS = {"synth-ridge": (-4 * _SYNTH_SD, 4 * _SYNTH_SD), "diabetes": (25.0, 346.0)}


def synthetic_regression(seed, n=10_000, d=SYNTH_D, noise=SYNTH_NOISE):
    rng = np.random.default_rng(1000 + seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + noise * rng.normal(size=n)
    return X, y


def synthetic_classification(seed, n=10_000, d=200):
    rng = np.random.default_rng(2000 + seed)
    X = rng.normal(size=(n, d))
    logits = X @ (rng.normal(size=d) * 0.15)
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(int)
    return X, y


def load(name, seed):
    """Standardised train/test split of a data set (features only scaled
    on the training part; the scaler is public preprocessing here)."""
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        task = "regression"
    elif name == "synth-ridge":
        X, y = synthetic_regression(seed)
        task = "regression"
    elif name == "synth-logistic":
        X, y = synthetic_classification(seed)
        task = "classification"
    elif name == "german":
        data = fetch_german(as_frame=True)
        X = np.asarray(make_preprocessor(data).fit_transform(data.data), dtype=float)
        y = np.asarray(data.target)
        task = "classification"
    elif name == "adult":
        X_train, y_train, _, X_test, y_test, _ = load_adult()
        return "classification", X_train, X_test, y_train, y_test
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed)
    scaler = StandardScaler().fit(X_train)
    return task, scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def test_loss(task, model, X, y):
    if task == "regression":
        return mean_squared_error(y, model.predict(X))
    return log_loss(y, model.predict_proba(X), labels=model.classes_)


def run_one(name, seed, eps):
    task, X_train, X_test, y_train, y_test = load(name, seed)
    regression = task == "regression"
    tuner_cls = DPBilevelRidge if regression else DPBilevelLogisticRegression
    base_cls = DPSGDRegressor if regression else DPSGDClassifier
    out = {}
    start = time.perf_counter()
    tuner = tuner_cls(epsilon=eps, omega_init=OMEGA_INIT, random_state=seed).fit(X_train, y_train)
    out["bilevel_time"] = time.perf_counter() - start
    out["bilevel"] = test_loss(task, tuner, X_test, y_test)
    out["omega"] = tuner.omega_
    start = time.perf_counter()
    fixed = base_cls(epsilon=eps, alpha=OMEGA_INIT, random_state=seed).fit(X_train, y_train)
    out["fixed_time"] = time.perf_counter() - start
    out["fixed"] = test_loss(task, fixed, X_test, y_test)
    if PrivateGridSearchCV is not None:
        extra = {}
        if regression:
            low, high = Y_BOUNDS[name]
            extra = {"scoring": "neg_mean_squared_error", "y_bounds": (low, high),
                     "error_bound": (high - low) / 8.0}
        try:
            start = time.perf_counter()
            search = PrivateGridSearchCV(base_cls(random_state=seed), {"alpha": list(GRID)},
                                         epsilon=eps, random_state=seed, **extra)
            search.fit(X_train, y_train)
            out["grid8_time"] = time.perf_counter() - start
            out["grid8_alpha"] = search.best_params_["alpha"]
            out["grid8"] = test_loss(task, search, X_test, y_test)
        except Exception as exc:  # report, do not hide
            print(f"    PrivateGridSearchCV failed: {type(exc).__name__}: {exc}")
            out["grid8"] = out["grid8_time"] = out["grid8_alpha"] = np.nan
    else:
        out["grid8"] = out["grid8_time"] = out["grid8_alpha"] = np.nan
    out["nonpriv"] = non_private_reference(name, seed)
    return out


_REFERENCE = {}


def non_private_reference(name, seed):
    """Test loss of RidgeCV / LogisticRegressionCV (no privacy), computed
    once per split (Adult's split does not depend on the seed)."""
    key = (name, 0 if name == "adult" else seed)
    if key not in _REFERENCE:
        task, X_train, X_test, y_train, y_test = load(name, seed)
        ref = (RidgeCV(alphas=np.logspace(-3, 4, 30)) if task == "regression"
               else LogisticRegressionCV(Cs=10, max_iter=2000))
        _REFERENCE[key] = test_loss(task, ref.fit(X_train, y_train), X_test, y_test)
    return _REFERENCE[key]


def non_private_check(seeds):
    """omega from epsilon=None (exact inner solves) against a fine grid of
    non-private ridge fits on the same split."""
    rows = []
    for seed in seeds:
        X, y = synthetic_regression(seed)
        tuner = DPBilevelRidge(epsilon=None, n_outer_iter=25, y_bounds=(-100, 100),
                               random_state=seed).fit(X, y)
        rng = np.random.RandomState(seed)
        mask = np.zeros(len(X), bool)
        mask[rng.permutation(len(X))[: int(round(0.2 * len(X)))]] = True
        ys = y / tuner.y_scale_
        grid = np.logspace(-4, 1, 301)
        losses = []
        for omega in grid:
            fit = Ridge(alpha=omega * (~mask).sum()).fit(X[~mask], ys[~mask])
            losses.append(np.mean((fit.predict(X[mask]) - ys[mask]) ** 2))
        best = grid[int(np.argmin(losses))]
        rel = abs(tuner.omega_ - best) / best
        rows.append((seed, f"{best:.4g}", f"{tuner.omega_:.4g}", f"{100 * rel:.1f}%"))
        print(f"  non-private seed {seed}: grid {best:.4g}  tuner {tuner.omega_:.4g}", flush=True)
    print_table("Non-private mode on synthetic ridge (target: within 10%)",
                ["seed", "grid optimum", "tuner omega_", "rel. error"], rows)


DATASETS = ["synth-ridge", "synth-logistic", "german", "adult", "diabetes"]
#: Issue 13's target: the tuner at or below both private baselines on at
#: least 3 of these 4 (diabetes is report-only).
TARGET_SETS = ["adult", "german", "synth-ridge", "synth-logistic"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, epsilon=1 only")
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=DATASETS)
    parser.add_argument("--epsilons", nargs="+", type=float, default=None)
    parser.add_argument("--no-check", action="store_true",
                        help="skip the non-private check on synthetic ridge")
    args = parser.parse_args()
    seeds = range(2) if args.quick else range(5)
    epsilons = args.epsilons or ((1.0,) if args.quick else (1.0, 3.0))
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    if not args.no_check:
        non_private_check(seeds)
    rows, speed, wins = [], [], {}
    for name in args.datasets:
        for eps in epsilons:
            results = []
            for seed in seeds:
                print(f"  {name} eps={eps} seed={seed} ...", flush=True)
                results.append(run_one(name, seed, eps))
                print("    " + "  ".join(f"{k}={v:.4g}" for k, v in results[-1].items()),
                      flush=True)
            mean = {k: np.nanmean([r[k] for r in results]) for k in results[0]}
            sem = {k: np.nanstd([r[k] for r in results]) / np.sqrt(len(results))
                   for k in ("bilevel", "grid8", "fixed")}
            win = bool(mean["bilevel"] <= mean["fixed"] and (
                np.isnan(mean["grid8"]) or mean["bilevel"] <= mean["grid8"]))
            wins[name, eps] = win
            grid = ("pending" if np.isnan(mean["grid8"])
                    else f"{mean['grid8']:.4g} ±{sem['grid8']:.2g}")
            rows.append((name, eps, f"{mean['bilevel']:.4g} ±{sem['bilevel']:.2g}", grid,
                         f"{mean['fixed']:.4g} ±{sem['fixed']:.2g}", f"{mean['nonpriv']:.4g}",
                         f"{mean['omega']:.3g}", f"{mean['grid8_alpha']:.3g}",
                         "yes" if win else "no"))
            speed.append((name, eps, f"{mean['bilevel_time']:.2f}", f"{mean['fixed_time']:.2f}",
                          f"{mean['bilevel_time'] / mean['fixed_time']:.1f}x",
                          f"{mean['grid8_time']:.2f}"))
    print_table(f"Mean test loss over {len(seeds)} seeds, ± standard error (MSE or log-loss; "
                "lower is better)",
                ["data", "eps", "bilevel", "grid8", "fixed", "nonpriv", "omega_",
                 "grid8 alpha (mean)", "best?"], rows)
    print_table("Fit time (s): tuning fit vs one DPSGD fit (target <= 20x)",
                ["data", "eps", "bilevel", "DPSGD", "ratio", "grid8 search"], speed)
    for eps in epsilons:
        done = [name for name in TARGET_SETS if (name, eps) in wins]
        if len(done) == len(TARGET_SETS):
            count = sum(wins[name, eps] for name in done)
            print(f"eps={eps}: tuner <= both private baselines on {count}/4 target data sets "
                  f"({'target met' if count >= 3 else 'target NOT met'})")


if __name__ == "__main__":
    main()
