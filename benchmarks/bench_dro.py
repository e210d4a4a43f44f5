"""DPDROClassifier / DPDRORegressor against DP-SGD at the same epsilon.

Tasks (groups are never given to the models, only used to score):

1. Adult: groups race x sex x label.
2. Synthetic rare subpopulation (100k rows, 5 % rare, shifted threshold).
3. Imbalanced digits (the "-ST" construction; worst-class recall), also at
   epsilon 3 and 8.

For each task and epsilon in {1, 3}: DPDROClassifier (defaults, ``lam`` over
the grid ``LAMS``) vs DPSGDClassifier (defaults), worst-group (worst-class)
and mean test accuracy over 5 seeds, delta = 1e-5; references: non-private
DRO (``epsilon=None``) and scikit-learn's LogisticRegression. A second
table follows the best-lam gain as epsilon grows (30, 100, 1000, no noise)
to show how much of the non-private gain the noise leaves. Then the
regressor on the synthetic regression task (worst-group MSE against
DPSGDRegressor), every divergence and algorithm on the synthetic task, and
speed (one epoch of double SPIDER against one of DP-SGD; a whole Adult fit
against LogisticRegression, one thread).

Usage: ``python benchmarks/bench_dro.py [--quick] [--ceiling-only]``
(``--quick``: 2 seeds, 20k synthetic rows, epsilon 1 only).
"""

import argparse
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from _common import load_adult, print_table  # noqa: E402
from skdp import DPDROClassifier, DPDRORegressor, DPSGDClassifier, DPSGDRegressor
from skdp.datasets import fetch_adult, make_imbalanced_digits, make_rare_subpopulation
from skdp.debug import record_fit_times
from skdp.metrics import worst_class_recall, worst_group_accuracy, worst_group_mean_squared_error

#: The documented grid of penalties (smaller = more robust).
LAMS = (0.1, 0.3, 1.0)
#: The regressor's grid (squared loss is on another scale; default lam=3).
REG_LAMS = (0.3, 1.0, 3.0)
DELTA = 1e-5


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def adult_task():
    X_tr, y_tr, _, X_te, y_te, _ = load_adult()
    race_te = np.asarray(fetch_adult(subset="test", sensitive_attribute="race",
                                     drop_missing=False).sensitive)
    sex_te = np.asarray(fetch_adult(subset="test", drop_missing=False).sensitive)
    groups = np.char.add(np.char.add(race_te.astype(str), "|" + sex_te.astype(str)),
                         "|" + np.asarray(y_te).astype(str))
    return X_tr, y_tr, X_te, y_te, groups


def synthetic_task(n, task="classification"):
    X, y, g = make_rare_subpopulation(n, task=task, random_state=0)
    X_tr, X_te, y_tr, y_te, _, g_te = train_test_split(X, y, g, test_size=0.3, random_state=0)
    return X_tr, y_tr, X_te, y_te, g_te


def digits_task():
    d = make_imbalanced_digits(keep_fraction=0.1, random_state=0)
    scaler = StandardScaler().fit(d.X_train)  # pixel scale is public ([0, 1]); kept simple
    return scaler.transform(d.X_train), d.y_train, scaler.transform(d.X_test), d.y_test, None


#: Groups with fewer test records are left out of the worst group (on Adult,
#: e.g. "Other|Female|>50K" has a handful of test rows and 0 % accuracy for
#: every model, including LogisticRegression).
MIN_GROUP = 100


def worst(y_te, pred, groups):
    if groups is None:
        return worst_class_recall(y_te, pred)
    labels, counts = np.unique(groups, return_counts=True)
    keep = np.isin(groups, labels[counts >= MIN_GROUP])
    return worst_group_accuracy(y_te[keep], pred[keep], sensitive_features=groups[keep])


def evaluate(make, data, seeds):
    X_tr, y_tr, X_te, y_te, groups = data
    wg, acc = [], []
    for seed in seeds:
        est = make(seed).fit(X_tr, y_tr)
        pred = est.predict(X_te)
        wg.append(worst(y_te, pred, groups))
        acc.append(np.mean(pred == y_te))
    return np.mean(wg), np.std(wg), np.mean(acc)


def fmt(m, s=None):
    return f"{100 * m:.1f}" + ("" if s is None else f"±{100 * s:.1f}")


def classification_tables(tasks, epsilons, seeds):
    summary = []
    for name, data, eps_list in tasks:
        rows = []
        for eps in eps_list:
            log(f"{name}: epsilon={eps}")
            base = evaluate(lambda s: DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=s),
                            data, seeds)
            rows.append([eps, "DPSGDClassifier", "-", fmt(*base[:2]), fmt(base[2])])
            best = None
            for lam in LAMS:
                res = evaluate(lambda s: DPDROClassifier(epsilon=eps, delta=DELTA, lam=lam,
                                                         random_state=s), data, seeds)
                rows.append([eps, "DPDROClassifier", lam, fmt(*res[:2]), fmt(res[2])])
                if best is None or res[0] > best[1][0]:
                    best = (lam, res)
                log(f"  lam={lam}: worst {fmt(res[0])} mean {fmt(res[2])}")
            summary.append([name, eps, best[0], fmt(best[1][0] - base[0]),
                            fmt(best[1][2] - base[2])])
        X_tr, y_tr, X_te, y_te, groups = data
        for lam in LAMS[:1]:
            res = evaluate(lambda s: DPDROClassifier(epsilon=None, lam=lam, random_state=s),
                           data, seeds[:1])
            rows.append(["None", "DPDROClassifier (non-private)", lam, fmt(res[0]), fmt(res[2])])
        lr = LogisticRegression(max_iter=2000).fit(X_tr, y_tr)
        pred = lr.predict(X_te)
        rows.append(["None", "LogisticRegression", "-", fmt(worst(y_te, pred, groups)),
                     fmt(np.mean(pred == y_te))])
        print_table(f"{name}: worst-group and mean test accuracy (%), {len(seeds)} seeds",
                    ["epsilon", "model", "lam", "worst group", "mean"], rows)
    print_table("Best lam: worst-group gain and mean-accuracy change vs DP-SGD (points)",
                ["task", "epsilon", "lam", "worst-group gain", "mean change"], summary)


def ceiling_table(tasks, seeds):
    """Best-lam worst-group gain of DRO over DP-SGD as the privacy budget grows.

    Both models use their defaults at each epsilon (None: no noise). It shows
    how much of the non-private DRO gain survives the noise: the weighted
    gradient's sensitivity is ``W C``, so every record's noise grows by the
    weight bound ``W`` while no record's signal grows by more.
    """
    rows = []
    for name, data, eps_list in tasks:
        for eps in eps_list:
            log(f"ceiling: {name}, epsilon={eps}")
            base = evaluate(lambda s: DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=s),
                            data, seeds)
            best = max(((lam, evaluate(lambda s: DPDROClassifier(
                epsilon=eps, delta=DELTA, lam=lam, random_state=s), data, seeds))
                for lam in LAMS), key=lambda item: item[1][0])
            rows.append([name, "None" if eps is None else eps, fmt(base[0]), best[0],
                         fmt(best[1][0]), fmt(best[1][0] - base[0])])
    print_table(f"Worst-group gain against the budget (%, {len(seeds)} seeds, best lam)",
                ["task", "epsilon", "DP-SGD", "lam", "DRO", "gain"], rows)


def regression_table(n, seeds):
    log("synthetic regression")
    X_tr, y_tr, X_te, y_te, g_te = synthetic_task(n, "regression")
    rows = []
    for name, make in [
        ("DPSGDRegressor", lambda s: DPSGDRegressor(epsilon=1.0, delta=DELTA, random_state=s)),
        *[(f"DPDRORegressor lam={lam}",
           (lambda lam: lambda s: DPDRORegressor(epsilon=1.0, delta=DELTA, lam=lam,
                                                 random_state=s))(lam)) for lam in REG_LAMS],
    ]:
        mses, means = [], []
        for seed in seeds:
            pred = make(seed).fit(X_tr, y_tr).predict(X_te)
            mses.append(worst_group_mean_squared_error(y_te, pred, sensitive_features=g_te))
            means.append(np.mean((pred - y_te) ** 2))
        rows.append([name, f"{np.mean(mses):.3f}", f"{np.mean(means):.3f}"])
    print_table("Synthetic regression, epsilon=1: worst-group and mean test MSE",
                ["model", "worst-group MSE", "mean MSE"], rows)


def algorithm_table(data, seeds):
    log("divergences x algorithms")
    rows = []
    configs = [(div, alg) for div in ("chi2", "kl_cvar", "cressie_read") for alg in
               ("double_spider", "dp_sgd")]
    configs += [("kl", "recursive_spider"), ("kl", "double_spider"), ("kl", "dp_sgd")]
    for div, alg in configs:
        res = evaluate(lambda s: DPDROClassifier(divergence=div, epsilon=1.0, delta=DELTA,
                                                 random_state=s, solver_options={"algorithm": alg}), data, seeds)
        rows.append([div, alg, fmt(*res[:2]), fmt(res[2])])
    for alg in ("recursive_spider", "dp_sgd"):
        res = evaluate(lambda s: DPDROClassifier(divergence="kl", rho=0.5, epsilon=1.0,
                                                 delta=DELTA, random_state=s, solver_options={"algorithm": alg}), data, seeds)
        rows.append(["kl (constrained)", alg, fmt(*res[:2]), fmt(res[2])])
    print_table("Synthetic classification, epsilon=1: every divergence and algorithm",
                ["divergence", "algorithm", "worst group", "mean"], rows)


def training_time(estimator, X, y):
    """Seconds of the trainer's loop in one fit (skdp.debug.record_fit_times)."""
    with record_fit_times() as times:
        estimator.fit(X, y)
    return times[-1]["training"]


def speed_table(adult):
    log("speed")
    X_tr, y_tr = adult[0], adult[1]
    with threadpool_limits(1):
        dro = DPDROClassifier(epsilon=1.0, delta=DELTA, max_epochs=1, random_state=0,
                              solver_options={"algorithm": "double_spider"})
        dpsgd = DPSGDClassifier(epsilon=1.0, delta=DELTA, max_epochs=1, random_state=0)
        for est in (dro, dpsgd):  # warm up
            est.fit(X_tr[:2000], y_tr[:2000])
        t_dro = min(training_time(dro, X_tr, y_tr) for _ in range(3))
        t_sgd = min(training_time(dpsgd, X_tr, y_tr) for _ in range(3))
        start = time.perf_counter()
        DPDROClassifier(epsilon=1.0, delta=DELTA, random_state=0).fit(X_tr, y_tr)
        t_fit = time.perf_counter() - start
        start = time.perf_counter()
        LogisticRegression(max_iter=1000).fit(X_tr, y_tr)
        t_lr = time.perf_counter() - start
    print_table("Speed on Adult (one thread)", ["measure", "seconds", "ratio"], [
        ["double SPIDER epoch / DP-SGD epoch", f"{t_dro:.3f} / {t_sgd:.3f}", f"{t_dro / t_sgd:.2f}"],
        ["DPDROClassifier fit (defaults) / LogisticRegression fit", f"{t_fit:.2f} / {t_lr:.2f}",
         f"{t_fit / t_lr:.2f}"],
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ceiling-only", action="store_true",
                        help="only the gain-against-budget table")
    args = parser.parse_args()
    seeds = range(2) if args.quick else range(5)
    n_synth = 20_000 if args.quick else 100_000
    epsilons = (1.0,) if args.quick else (1.0, 3.0)
    log("loading data")
    adult = adult_task()
    synth = synthetic_task(n_synth)
    digits = digits_task()
    tasks = [("Adult (race x sex x label)", adult, epsilons),
             (f"Synthetic rare subpopulation ({n_synth} rows)", synth, epsilons),
             ("Imbalanced digits (worst-class recall)", digits,
              epsilons if args.quick else (1.0, 3.0, 8.0))]
    ladder = (30.0, 1000.0, None) if args.quick else (30.0, 100.0, 1000.0, None)
    ceiling = [(name, data, ladder) for name, data, _ in tasks]
    if args.ceiling_only:
        ceiling_table(ceiling, list(seeds))
        return
    classification_tables(tasks, epsilons, list(seeds))
    ceiling_table(ceiling, list(seeds))
    regression_table(n_synth, list(seeds))
    algorithm_table(synth, list(seeds))
    speed_table(adult)


if __name__ == "__main__":
    main()
