"""
===========================================================
One epsilon for a whole search: private tuning on UCI Adult
===========================================================

A pipeline of private steps -- a :class:`~skdp.preprocessing.DPStandardScaler`
with public bounds, a :class:`~skdp.preprocessing.DPOneHotEncoder` with the
documented categories, and :class:`skdp.DPSGDClassifier` -- is tuned over 8
candidates (learning rate x epochs) with
:class:`skdp.model_selection.PrivateGridSearchCV`. One budget,
``epsilon=1, delta=1e-5``, covers every candidate's fit, the choice of the
best candidate from noisy validation scores, and the returned model:

* each record goes to a training part or (with probability 0.2) to a
  validation part, by a coin of its own;
* the 8 candidates are fitted on the training part; the search sets their
  steps' epsilons so that the 8 fits compose to epsilon=1;
* their confusion histograms on the validation part are released once with
  Gaussian noise (the validation records are in no candidate's fit, so this
  costs the training records nothing); the best noisy accuracy chooses;
* the chosen candidate is refitted on all the data with half of the budget
  (``refit_share=0.5``, in Gaussian-DP ``mu^2``): every record is then in
  the refit and in either the candidates' fits or the validation histograms.

The example prints the noisy validation scores, the budget split and the
test accuracy, compares with :func:`skdp.model_selection.privacy_spent` of
an ordinary ``GridSearchCV`` over the same grid (training alone costs far
more, and its selection is not covered at all), and saves a plot of the
budget split and the scores to ``private_search.png`` (next to this script
unless ``--output`` says otherwise). It runs in about a minute.

Run::

    python examples/plot_private_search.py
"""

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from skdp import DPSGDClassifier
from skdp.datasets import fetch_adult, make_preprocessor
from skdp.exceptions import PrivacyLeakWarning
from skdp.model_selection import PrivateGridSearchCV, privacy_spent

# Public ranges of the numeric columns (data dictionary, census top-coding).
BOUNDS = {"age": (17, 90), "fnlwgt": (0, 1.5e6), "education-num": (1, 16),
          "capital-gain": (0, 99999), "capital-loss": (0, 5000), "hours-per-week": (1, 99)}
GRID = {"clf__learning_rate": [0.25, 0.5, 1.0, 2.0], "clf__max_epochs": [5, 10]}


def main():
    parser = argparse.ArgumentParser(description="Private grid search on UCI Adult.")
    here = Path(globals().get("__file__", "plot_private_search.py")).resolve()
    parser.add_argument("--output", default=str(here.with_name("private_search.png")))
    parser.add_argument("--no-contrast", action="store_true",
                        help="skip the ordinary GridSearchCV (half the run time)")
    args = parser.parse_args()

    train = fetch_adult(as_frame=True)
    test = fetch_adult(as_frame=True, subset="test")

    # The steps' epsilons only set proportions: the search rescales them.
    pipe = Pipeline([
        ("pre", make_preprocessor(train, bounds=BOUNDS, categories="schema", epsilon=0.1,
                                  random_state=0)),
        ("clf", DPSGDClassifier(random_state=0)),
    ])
    search = PrivateGridSearchCV(pipe, GRID, epsilon=1.0, delta=1e-5, random_state=0)
    start = time.perf_counter()
    search.fit(train.data, train.target)
    print(f"Private search over {search.n_candidates_} candidates: "
          f"{time.perf_counter() - start:.1f} s")

    results = search.cv_results_
    print("\nnoisy validation accuracy (a private release):")
    for params, score in zip(results["params"], results["mean_test_score"]):
        mark = "  <- chosen" if params == search.best_params_ else ""
        print(f"  lr={params['clf__learning_rate']:<5g} epochs={params['clf__max_epochs']:<3}"
              f" {score:.4f}{mark}")

    split = search.budget_split_
    steps = split["candidate_epsilons"][0]
    print("\nbudget split (epsilon=1, delta=1e-5 for everything):")
    print(f"  each candidate: {split['shares']['each_candidate']:.3f} of mu^2 -> "
          f"scaler epsilon {steps['pre__num__epsilon']:.4f}, "
          f"classifier epsilon {steps['clf__epsilon']:.3f}")
    print(f"  selection: {split['shares']['selection']:.3f} of mu^2 -> epsilon "
          f"{split['selection_epsilon']:.3f}, noise std {split['selection_noise_std']:.1f} "
          "counts per histogram cell")
    refit = split["refit_epsilons"]
    print(f"  refit: {split['shares']['refit']:.3f} of mu^2 -> scaler epsilon "
          f"{refit['pre__num__epsilon']:.4f}, classifier epsilon {refit['clf__epsilon']:.3f}")
    print(f"  training part (8 fits + refit): epsilon {split['training_part']['epsilon']:.3f}")
    print(f"  validation part (histograms + refit): epsilon "
          f"{split['validation_part']['epsilon']:.3f}")
    print(f"  search: epsilon_={search.epsilon_:.3f}, delta_={search.delta_:g}")
    print(f"\ntest accuracy of the chosen model: {search.score(test.data, test.target):.4f}")

    contrast = None
    if not args.no_contrast:
        plain = GridSearchCV(pipe, GRID, cv=3).fit(train.data, train.target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            contrast = privacy_spent(plain)
        print(f"ordinary GridSearchCV(cv=3): test accuracy "
              f"{plain.score(test.data, test.target):.4f}; its {contrast.n_fits} fits alone "
              f"spent epsilon <= {contrast.epsilon:.1f} (black-box bound), and its selection "
              "is not covered")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    parts = ["training part\n(8 candidate fits + refit)",
             "validation part\n(noisy histograms + refit)"]
    eps = [split["training_part"]["epsilon"], split["validation_part"]["epsilon"]]
    left.bar(parts, eps, color=["tab:blue", "tab:orange"])
    left.axhline(1.0, color="k", ls="--", lw=1, label="budget epsilon=1")
    for i, value in enumerate(eps):
        left.text(i, value / 2, f"{value:.3f}", ha="center", color="white")
    left.set_ylabel("epsilon (accountant)")
    left.set_title("Each record is in one part: epsilon_ = max")
    left.legend(loc="lower right")
    labels = [f"lr {p['clf__learning_rate']:g}\n{p['clf__max_epochs']} ep"
              for p in results["params"]]
    colors = ["tab:green" if i == search.best_index_ else "tab:gray"
              for i in range(len(labels))]
    right.bar(labels, results["mean_test_score"], color=colors)
    low = float(np.min(results["mean_test_score"]))
    right.set_ylim(low - 0.01, float(np.max(results["mean_test_score"])) + 0.005)
    right.set_ylabel("noisy validation accuracy")
    right.set_title("Candidates (chosen in green)")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
