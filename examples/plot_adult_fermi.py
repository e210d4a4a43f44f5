"""
=======================================================
Private fair learning from one and three silos on Adult
=======================================================

Fits :class:`skdp.DPFERMIClassifier` (DP-FERMI / SteFFLe) at epsilon=1 on
UCI Adult for a few values of the fairness weight ``lam``, once with all
records in one silo and once split into three silos by
:func:`skdp.datasets.make_silos` (random silos, ``heterogeneity=0``; each silo
spends its own budget of epsilon=1 on its own records). Prints the test
accuracy and demographic-parity gap of each fit and saves the two
accuracy-vs-gap fronts to ``adult_fermi_fronts.png`` (next to this script
unless ``--output`` says otherwise).

Only ``lam``, ``epsilon`` and ``random_state`` are set: the other
hyperparameters are the defaults. The data comes from
:func:`skdp.datasets.fetch_adult` (the copy embedded in the package, or
``SKDP_DATA`` / ``--data-home``). Runs in well under two minutes.

Run::

    python examples/plot_adult_fermi.py
"""

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

from skdp import DPFERMIClassifier
from skdp.datasets import fetch_adult, make_preprocessor, make_silos
from skdp.metrics import demographic_parity_difference

LAMS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0)


def load(data_home):
    train = fetch_adult(data_home=data_home, subset="train", as_frame=True, drop_missing=False)
    test = fetch_adult(data_home=data_home, subset="test", as_frame=True, drop_missing=False)
    # The scaler and encoder learn from the training data without privacy;
    # see make_preprocessor(bounds=..., categories="schema") for a
    # preprocessing that reads nothing from the data.
    prep = make_preprocessor(train)
    return (prep.fit_transform(train.data), np.asarray(train.target), np.asarray(train.sensitive),
            np.asarray(train.data["age"], dtype=float), prep.transform(test.data),
            np.asarray(test.target), np.asarray(test.sensitive))


def front(X, y, groups, silos, X_test, y_test, g_test, seeds):
    points = []
    for lam in LAMS:
        acc, gap = [], []
        for seed in range(seeds):
            clf = DPFERMIClassifier(lam=lam, epsilon=1.0, random_state=seed)
            clf.fit(X, y, sensitive_features=groups, silo_ids=silos)
            pred = clf.predict(X_test)
            acc.append(np.mean(pred == y_test))
            gap.append(demographic_parity_difference(y_test, pred, sensitive_features=g_test))
        points.append((lam, np.mean(acc), np.mean(gap), clf.epsilon_))
        print(f"  lam={lam:<5g} accuracy {np.mean(acc):.4f}  DP gap {np.mean(gap):.4f}  "
              f"epsilon_ {clf.epsilon_:.3f}")
    return points


def main():
    parser = argparse.ArgumentParser(description="DP-FERMI on Adult, one and three silos")
    parser.add_argument("--data-home", default=os.environ.get("SKDP_DATA") or None)
    here = Path(globals().get("__file__", "plot_adult_fermi.py")).resolve()
    parser.add_argument("--output", default=str(here.with_name("adult_fermi_fronts.png")))
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    start = time.perf_counter()

    X, y, groups, age, X_test, y_test, g_test = load(args.data_home)
    print(f"Adult: {X.shape[0]} training rows, {X.shape[1]} inputs; groups {sorted(set(groups))}")
    fronts = {}
    for n_silos in (1, 3):
        silos = None if n_silos == 1 else make_silos(X, n_silos, attribute=age, random_state=0)
        print(f"\n{n_silos} silo(s), epsilon=1 per silo:")
        fronts[n_silos] = front(X, y, groups, silos, X_test, y_test, g_test, args.seeds)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for n_silos, marker in ((1, "o"), (3, "s")):
        lams, acc, gap, _ = zip(*fronts[n_silos])
        ax.plot(gap, acc, marker=marker, label=f"{n_silos} silo{'s' if n_silos > 1 else ''}")
        for lam, a, g in zip(lams, acc, gap):
            ax.annotate(f"{lam:g}", (g, a), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("test demographic-parity gap")
    ax.set_ylabel("test accuracy")
    ax.set_title("DPFERMIClassifier on Adult, epsilon=1 (labels: lam)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"\nsaved {args.output} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
