"""Private hyperparameter search on Adult: one epsilon for the whole search.

On the UCI Adult training split (skdp's embedded copy, rows with missing
values dropped; sex is the group and not an input), scored on the test split:

* the pipeline is ``make_preprocessor(..., epsilon=0.1)`` (private
  ``DPStandardScaler`` with public bounds + ``DPOneHotEncoder`` with the
  documented categories) followed by ``DPSGDClassifier`` or
  ``DPRateConstrainedClassifier(tolerance=0.03)`` (demographic parity);
* ``PrivateGridSearchCV(epsilon=1, delta=1e-5)`` over 8 candidates (default
  ``refit_share=0.5``): the whole search (8 fits, the private selection, the
  refit) is covered by epsilon=1; the step epsilons above only set proportions. DP-SGD is
  chosen by noisy accuracy, RaCO-DP by ``best_within("dpd", 0.03)`` on noisy
  accuracy and demographic-parity gap (the groups are routed as metadata);
* the single fit of the pipeline at epsilon=1 with default hyperparameters
  (no search) as the reference;
* skdp's usual non-private-selection route for contrast: scikit-learn
  ``GridSearchCV(cv=3)`` over the same grid, each fit at epsilon=1, and
  :func:`skdp.model_selection.privacy_spent` of it (training only, a
  black-box bound; the selection is not covered at all);
* time: the private search against (one default fit's time) x (number of
  fits).

Usage::

    python benchmarks/bench_private_search.py [--seeds 5] [--quick]
"""

import argparse
import time
import warnings

import numpy as np
import sklearn
from _common import print_table
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.datasets import fetch_adult, make_preprocessor
from skdp.exceptions import PrivacyLeakWarning
from skdp.metrics import demographic_parity_difference, get_fairness_scorer
from skdp.model_selection import PrivateGridSearchCV, best_within, privacy_spent

EPSILON, DELTA, TOLERANCE = 1.0, 1e-5, 0.03
BOUNDS = {"age": (17, 90), "fnlwgt": (0, 1.5e6), "education-num": (1, 16),
          "capital-gain": (0, 99999), "capital-loss": (0, 5000), "hours-per-week": (1, 99)}
GRIDS = {
    "DP-SGD": {"clf__learning_rate": [0.25, 0.5, 1.0, 2.0], "clf__max_epochs": [5, 10]},
    "RaCO-DP": {"clf__learning_rate": [0.1, 0.2, 0.4, 0.8], "clf__max_epochs": [5, 10]},
}


def pipeline(train, model, seed):
    clf = (DPSGDClassifier(epsilon=EPSILON, delta=DELTA, random_state=seed) if model == "DP-SGD"
           else DPRateConstrainedClassifier(tolerance=TOLERANCE, epsilon=EPSILON, delta=DELTA,
                                            random_state=seed))
    pre = make_preprocessor(train, bounds=BOUNDS, categories="schema", epsilon=0.1,
                            random_state=seed)
    return Pipeline([("pre", pre), ("clf", clf)])


def scoring_for(model):
    if model == "DP-SGD":
        return None, True
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference")}
    return scoring, best_within("dpd", TOLERANCE)


def evaluate(estimator, test):
    pred = estimator.predict(test.data)
    return (float(np.mean(pred == test.target)),
            float(demographic_parity_difference(test.target, pred,
                                                sensitive_features=test.sensitive)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, and the GridSearchCV contrast for one seed only")
    args = parser.parse_args()
    seeds = 2 if args.quick else args.seeds
    warnings.simplefilter("ignore", PrivacyLeakWarning)

    train = fetch_adult(as_frame=True)
    test = fetch_adult(as_frame=True, subset="test")
    print(f"Adult: {len(train.target)} train / {len(test.target)} test rows; "
          f"search epsilon={EPSILON}, delta={DELTA}, 8 candidates", flush=True)
    rows, time_rows, split_rows = [], [], []
    for model in ("DP-SGD", "RaCO-DP"):
        grid = GRIDS[model]
        scoring, refit = scoring_for(model)
        single, private, ordinary, fit_times, search_times = [], [], [], [], []
        eps_private, eps_ordinary = [], []
        for seed in range(seeds):
            with sklearn.config_context(enable_metadata_routing=True):
                pipe = pipeline(train, model, seed)
                start = time.perf_counter()
                pipe.fit(train.data, train.target, sensitive_features=train.sensitive)
                fit_times.append(time.perf_counter() - start)
                single.append(evaluate(pipe, test))

                search = PrivateGridSearchCV(pipeline(train, model, seed), grid, scoring=scoring,
                                             refit=refit, epsilon=EPSILON, delta=DELTA,
                                             random_state=seed)
                start = time.perf_counter()
                search.fit(train.data, train.target, sensitive_features=train.sensitive)
                search_times.append(time.perf_counter() - start)
                private.append(evaluate(search.best_estimator_, test))
                eps_private.append(search.epsilon_)
                print(f"[{model} seed {seed}] single fit acc {single[-1][0]:.4f} gap "
                      f"{single[-1][1]:.4f} ({fit_times[-1]:.1f} s) | private search acc "
                      f"{private[-1][0]:.4f} gap {private[-1][1]:.4f} eps {search.epsilon_:.3f} "
                      f"chose {search.best_params_} ({search_times[-1]:.1f} s)", flush=True)
                if seed == 0:
                    split = search.budget_split_
                    split_rows.append([
                        model, f"{split['shares']['each_candidate']:.3f}",
                        f"{split['candidate_epsilon']:.3f}",
                        f"{split['candidate_epsilons'][0]['pre__num__epsilon']:.4f}",
                        f"{split['selection_epsilon']:.3f}",
                        f"{split['selection_noise_std']:.1f}",
                        f"{split['shares']['refit']:.2f}",
                        f"{split['refit_epsilons'].get('clf__epsilon', 0.0):.3f}",
                        f"{split['training_part']['epsilon']:.3f}",
                        f"{split['validation_part']['epsilon']:.3f}",
                    ])
                if seed == 0 or not args.quick:
                    plain = GridSearchCV(pipeline(train, model, seed), grid, scoring=scoring,
                                         refit=refit, cv=3)
                    plain.fit(train.data, train.target, sensitive_features=train.sensitive)
                    ordinary.append(evaluate(plain.best_estimator_, test))
                    eps_ordinary.append(privacy_spent(plain).epsilon)
                    print(f"[{model} seed {seed}] GridSearchCV acc {ordinary[-1][0]:.4f} gap "
                          f"{ordinary[-1][1]:.4f}, training alone spent eps "
                          f"{eps_ordinary[-1]:.1f} (selection not covered)", flush=True)
        for label, values, eps in (
            ("single fit, defaults", single, f"{EPSILON:g}"),
            ("PrivateGridSearchCV", private, f"{max(eps_private):.3f}"),
            ("GridSearchCV (cv=3)", ordinary,
             f"fits <= {max(eps_ordinary):.1f}; selection uncovered (inf)"),
        ):
            acc, gap = np.array(values).T
            rows.append([model, label, len(values), f"{acc.mean():.4f} +- {acc.std():.4f}",
                         f"{gap.mean():.4f} +- {gap.std():.4f}", eps])
        n_fits = len(search.cv_results_["params"]) + int(search.budget_split_["refit"])
        ratio = np.median(search_times) / (np.median(fit_times) * n_fits)
        time_rows.append([model, f"{np.median(fit_times):.2f}", n_fits,
                          f"{np.median(search_times):.1f}", f"{ratio:.2f}"])

    print_table("Test accuracy and demographic-parity gap of the selected model",
                ["model", "method", "seeds", "test accuracy", "test DP gap", "epsilon"], rows)
    print_table("Budget split of the private search (seed 0; shares in GDP mu^2)",
                ["model", "share/cand.", "eps/cand.", "eps pre/cand.", "eps selection",
                 "noise std (counts)", "share refit", "eps clf refit", "eps training part",
                 "eps validation part"], split_rows)
    print_table("Time: private search vs (one default fit) x (number of fits); target < 10",
                ["model", "one fit (s)", "fits", "search (s)", "ratio"], time_rows)


if __name__ == "__main__":
    main()
