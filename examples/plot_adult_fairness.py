"""
================================================
Private and fair income prediction on UCI Adult
================================================

Fits :class:`skdp.DPRateConstrainedClassifier` (RaCO-DP) at epsilon=1 with a
demographic-parity constraint for a few tolerances, and compares it with
unconstrained DP-SGD at the same budget and with non-private
LogisticRegression (``benchmarks/bench_raco_adult.py`` also compares with
fairlearn's ExponentiatedGradient, which takes minutes here). Prints test accuracy, the test demographic-parity gap
the test log-loss (calibration) and the epsilon each model spent, and saves
the accuracy-vs-gap plot to ``adult_fairness_pareto.png`` and a reliability
diagram to ``adult_reliability.png`` (next to this script unless ``--output``
says otherwise).

The data comes from :func:`skdp.datasets.fetch_adult`, which reads the copy
embedded in the package (``SKDP_DATA`` or ``--data-home`` point it to another
folder holding ``adult/adult.data`` and ``adult/adult.test``).

Run::

    python examples/plot_adult_fairness.py
"""

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.datasets import fetch_adult, make_preprocessor
from skdp.metrics import demographic_parity_difference

TOLERANCES = (0.01, 0.02, 0.04, 0.08)


def default_data_home():
    """SKDP_DATA if set, else None: the copy embedded in the package."""
    return os.environ.get("SKDP_DATA") or None


def load(data_home):
    train = fetch_adult(data_home=data_home, subset="train", as_frame=True, drop_missing=False)
    test = fetch_adult(data_home=data_home, subset="test", as_frame=True, drop_missing=False)
    # Note: the scaler and encoder below learn from the training data without
    # privacy; see make_preprocessor(bounds=..., categories="schema") for a
    # preprocessing that reads nothing from the data.
    prep = make_preprocessor(train)
    X_train = prep.fit_transform(train.data)
    X_test = prep.transform(test.data)
    return (X_train, np.asarray(train.target), np.asarray(train.sensitive),
            X_test, np.asarray(test.target), np.asarray(test.sensitive))


def evaluate(model, X, y, groups):
    """Test accuracy, demographic-parity gap and log-loss."""
    pred = model.predict(X)
    return (np.mean(pred == y), demographic_parity_difference(y, pred, sensitive_features=groups),
            log_loss(y, model.predict_proba(X), labels=model.classes_))


def main():
    parser = argparse.ArgumentParser(description="RaCO-DP on Adult at epsilon=1")
    parser.add_argument("--data-home", default=default_data_home())
    here = Path(globals().get("__file__", "plot_adult_fairness.py")).resolve()
    parser.add_argument("--output", default=str(here.with_name("adult_fairness_pareto.png")))
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()

    X_train, y_train, s_train, X_test, y_test, s_test = load(args.data_home)
    print(f"Adult: {X_train.shape[0]} training rows, {X_train.shape[1]} inputs; "
          f"groups {sorted(set(s_train))}\n")
    rows = []

    lr = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    rows.append(("LogisticRegression (non-private)", *evaluate(lr, X_test, y_test, s_test), None))

    dpsgd = [DPSGDClassifier(epsilon=1.0, random_state=s).fit(X_train, y_train)
             for s in range(args.seeds)]
    scores = np.mean([evaluate(m, X_test, y_test, s_test) for m in dpsgd], axis=0)
    rows.append(("DPSGDClassifier, unconstrained", *scores, max(m.epsilon_ for m in dpsgd)))

    nonprivate_points = []
    for tol in TOLERANCES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            clf = DPRateConstrainedClassifier(tolerance=tol, epsilon=None, random_state=0)
            clf.fit(X_train, y_train, sensitive_features=s_train)
        nonprivate_points.append(evaluate(clf, X_test, y_test, s_test)[:2])
        rows.append((f"same, non-private (epsilon=None), tolerance {tol}", *nonprivate_points[-1],
                     evaluate(clf, X_test, y_test, s_test)[2], None))

    fair_points = []
    start = time.perf_counter()
    for tol in TOLERANCES:
        models = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            for seed in range(args.seeds):
                clf = DPRateConstrainedClassifier(
                    constraint="demographic_parity", tolerance=tol, epsilon=1.0, delta=1e-5,
                    random_state=seed,
                )
                models.append(clf.fit(X_train, y_train, sensitive_features=s_train))
        acc, gap, loss = np.mean([evaluate(m, X_test, y_test, s_test) for m in models], axis=0)
        fair_points.append((acc, gap))
        rows.append((f"DPRateConstrainedClassifier, tolerance {tol}", acc, gap, loss,
                     max(m.epsilon_ for m in models)))
        if tol == 0.04:
            calibrated = models[0]
    elapsed = time.perf_counter() - start

    width = max(len(r[0]) for r in rows)
    print(f"{'model'.ljust(width)}  test accuracy  test DP gap  test log-loss  epsilon spent")
    for name, acc, gap, loss, eps in rows:
        spent = "not private" if eps is None else f"{eps:.3f}"
        print(f"{name.ljust(width)}  {acc:13.4f}  {gap:11.4f}  {loss:13.4f}  {spent}")
    print(f"\n{len(TOLERANCES) * args.seeds} private fair fits in {elapsed:.1f} s "
          f"(mean over {args.seeds} seeds per row).")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    gaps = [p[1] for p in fair_points]
    accs = [p[0] for p in fair_points]
    ax.plot(gaps, accs, "o-", label="RaCO-DP, eps=1 (tolerances %s)" % ", ".join(map(str, TOLERANCES)))
    ax.plot([p[1] for p in nonprivate_points], [p[0] for p in nonprivate_points], "x--",
            label="RaCO, non-private (same tolerances)")
    for name, acc, gap, _, eps in rows:
        if name.startswith(("DPRate", "same")):
            continue
        marker = "s" if eps is not None else "D"
        ax.plot([gap], [acc], marker, label=name)
    ax.set_xlabel("demographic parity gap (test)")
    ax.set_ylabel("accuracy (test)")
    ax.set_title("Adult: accuracy vs fairness")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"saved {args.output}")

    # reliability diagram: mean predicted probability against the observed rate
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfectly calibrated")
    for name, model in (("LogisticRegression (non-private)", lr),
                        ("DPSGDClassifier, eps=1", dpsgd[0]),
                        ("DPRateConstrainedClassifier, tol 0.04, eps=1", calibrated)):
        observed, predicted = calibration_curve(y_test, model.predict_proba(X_test)[:, 1],
                                                n_bins=10, strategy="quantile")
        ax.plot(predicted, observed, marker="o", label=name)
    ax.set_xlabel("mean predicted probability of >50K")
    ax.set_ylabel("observed share of >50K")
    ax.set_title("Adult: calibration (test)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    reliability = str(Path(args.output).with_name("adult_reliability.png"))
    fig.savefig(reliability, dpi=120)
    print(f"saved {reliability}")


if __name__ == "__main__":
    main()
