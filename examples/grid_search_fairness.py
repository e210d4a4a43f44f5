"""
=====================================================================
Choosing a fair, private model with GridSearchCV on UCI Adult
=====================================================================

This example tunes :class:`skdp.DPRateConstrainedClassifier` (logistic
regression trained with RaCO-DP under (epsilon=1, delta=1e-5)-differential
privacy, subject to a demographic-parity constraint on ``sex``) with
scikit-learn's :class:`~sklearn.model_selection.GridSearchCV`:

* the grid is the constraint's ``tolerance`` (the allowed gap in positive
  rates between women and men, as enforced during training);
* every candidate is scored on 3 folds with two scorers, accuracy and the
  demographic-parity gap (:func:`skdp.metrics.get_fairness_scorer`, stored
  as ``-gap`` since smaller gaps are better);
* the model refitted on all the training data is chosen by
  :func:`skdp.model_selection.best_within`: the most accurate candidate
  whose mean cross-validated gap is at most 0.03 (or, if none is, the
  fairest one, with a warning).

The group of every record has to reach both the estimator (to train under
the constraint) and the fairness scorer (to measure the gap on each fold's
test rows). The example shows the two ways to get it there:

1. **Metadata routing on**: ``search.fit(X, y, sensitive_features=sex)``;
   skdp estimators and fairness scorers request ``sensitive_features`` by
   default, so no ``set_fit_request`` / ``set_score_request`` call is
   needed, and scikit-learn splits ``sex`` by fold. Routing is switched on only inside a
   ``sklearn.config_context`` block, so the setting does not leak.
2. **Routing off** (scikit-learn's default): ``sex`` stays a column of the
   DataFrame ``X``; the ``ColumnTransformer`` passes it through with pandas
   output, the estimator takes it out of its inputs with
   ``sensitive_columns="sex"`` (also at prediction time), and the scorer
   reads it with ``sensitive_column="sex"``.

Both give the same folds, the same groups and the same seeds, hence the same
scores and the same choice.

Privacy accounting. Each fit is (epsilon, delta)-DP with respect to its own
training rows, and reports what it spent in ``epsilon_``. A search runs
k candidates x 3 folds fits plus one refit, and every record is in the
training rows of 2 of the 3 folds, so under basic composition the search as
a whole spends up to (2k + 1) x epsilon on each record, not epsilon. Two
more caveats: the cross-validated scores used to choose the candidate are
computed exactly (not privately), and the ``StandardScaler`` and
``OneHotEncoder`` learn their means, scales and categories from the data
without privacy; an end-to-end guarantee needs private hyperparameter
selection and public preprocessing (see :func:`skdp.datasets.make_preprocessor`).

To keep the run short (under a minute and a half on 2 CPU cores), the search
uses a random subsample of 10,000 of the 30,162 training rows; the chosen
model is evaluated on the full UCI test split (15,060 rows).

The data is the copy of Adult embedded in the package (``$SKDP_DATA/adult``
when ``SKDP_DATA`` is set).
"""

import os
import time

import numpy as np
import sklearn
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from skdp import DPRateConstrainedClassifier
from skdp.datasets import fetch_adult
from skdp.metrics import demographic_parity_difference, get_fairness_scorer
from skdp.model_selection import best_within

EPSILON = 1.0
BOUND = 0.03
TOLERANCES = [0.01, 0.03, 0.1]
N_FOLDS = 3
N_TRAIN = 10_000
SEED = 0


def data_home():
    """``$SKDP_DATA`` if set, else None: the copy embedded in the package."""
    return os.environ.get("SKDP_DATA") or None


def load():
    home = data_home()
    train = fetch_adult(data_home=home, subset="train", as_frame=True,
                        include_sensitive_in_features=True)
    test = fetch_adult(data_home=home, subset="test", as_frame=True,
                       include_sensitive_in_features=True)
    rows = np.sort(np.random.RandomState(SEED).choice(len(train.target), N_TRAIN, replace=False))
    X = train.data.iloc[rows].reset_index(drop=True)
    y = train.target.iloc[rows].reset_index(drop=True)
    return train, X, y, test


def estimator(**extra):
    return DPRateConstrainedClassifier(
        constraint="demographic_parity", epsilon=EPSILON, delta=1e-5,
        max_epochs=5, random_state=SEED, **extra,
    )


def epsilon_spent(fitted, X, y):
    """A 'scorer' that records the privacy spent by the fit it is given."""
    return fitted[-1].epsilon_


def report(title, search, X_test, y_test, sex_test):
    results = search.cv_results_
    print(f"\n{title}")
    print(f"{'':2}{'tolerance':>9}  {'accuracy (CV)':>15}  {'DP gap (CV)':>13}  "
          f"{'epsilon spent per fold':>24}")
    for i, params in enumerate(results["params"]):
        mark = "*" if i == search.best_index_ else " "
        spent = [results[f"split{k}_test_epsilon"][i] for k in range(N_FOLDS)]
        print(f"{mark:2}{params['classifier__tolerance']:>9g}  "
              f"{results['mean_test_accuracy'][i]:>8.4f} ± {results['std_test_accuracy'][i]:.3f}  "
              f"{-results['mean_test_dpd'][i]:>6.4f} ± {results['std_test_dpd'][i]:.3f}  "
              f"{'  '.join(f'{e:.4f}' for e in spent):>24}")
    best = search.best_estimator_
    y_pred = best.predict(X_test)
    gap = demographic_parity_difference(y_test, y_pred, sensitive_features=sex_test)
    n_fits = len(results["params"]) * N_FOLDS
    print(f"* chosen by best_within('dpd', {BOUND}): tolerance="
          f"{search.best_params_['classifier__tolerance']:g}")
    print(f"  refitted on all {N_TRAIN} sampled training rows: epsilon_ = "
          f"{best[-1].epsilon_:.4f} (requested {EPSILON}), groups_ = {list(best[-1].groups_)}")
    accuracy = np.mean(y_pred == np.asarray(y_test))
    print(f"  test set ({len(y_test)} rows): accuracy = {accuracy:.4f}, DP gap = {gap:.4f}")
    print(f"  privacy: {n_fits} CV fits + 1 refit, each spending epsilon <= {EPSILON}; every "
          f"record is in {N_FOLDS - 1} of {N_FOLDS} training folds, so by basic composition this "
          f"search spends up to {(N_FOLDS - 1) * len(results['params']) + 1} x {EPSILON} = "
          f"{((N_FOLDS - 1) * len(results['params']) + 1) * EPSILON:g} per record, not {EPSILON}.")


def main():
    start = time.perf_counter()
    train, X, y, test = load()
    sex = X["sex"].astype(object)
    numeric = list(train.numeric_features)
    categorical = [c for c in train.categorical_features if c != "sex"]
    print(f"UCI Adult: {len(train.target)} training rows, of which a random {N_TRAIN} are used "
          f"for the search (to keep the run short); {len(test.target)} test rows.")
    print("Positive rate by sex in the sample: "
          + ", ".join(f"{g} {y[sex == g].mean():.3f}" for g in sorted(set(sex))))
    cv = StratifiedKFold(N_FOLDS, shuffle=True, random_state=SEED)
    grid = {"classifier__tolerance": TOLERANCES}

    # ---------------------------------------------------- 1. routing on
    with sklearn.config_context(enable_metadata_routing=True):
        preprocess = ColumnTransformer([
            ("num", StandardScaler(), numeric),
            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
        ])  # remainder="drop": "sex" is not a model input
        model = Pipeline([
            ("preprocess", preprocess),
            ("classifier", estimator()),  # requests sensitive_features by default
        ])
        dpd = get_fairness_scorer("demographic_parity_difference")
        routed = GridSearchCV(
            model, grid, cv=cv, refit=best_within("dpd", BOUND),
            scoring={"accuracy": "accuracy", "dpd": dpd, "epsilon": epsilon_spent},
        )
        routed.fit(X, y, sensitive_features=sex)
    report("Part 1 - metadata routing ON (sensitive_features=sex passed to fit)",
           routed, test.data, test.target, test.sensitive)

    # --------------------------------------------------- 2. routing off
    preprocess = ColumnTransformer(
        [
            ("num", StandardScaler(), numeric),
            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
        ],
        remainder="passthrough",  # "sex" goes through to the classifier...
        verbose_feature_names_out=False,
    ).set_output(transform="pandas")
    model = Pipeline([
        ("preprocess", preprocess),
        ("classifier", estimator(sensitive_columns="sex")),  # ...which drops it
    ])
    dpd = get_fairness_scorer("demographic_parity_difference", sensitive_column="sex")
    by_column = GridSearchCV(
        model, grid, cv=cv, refit=best_within("dpd", BOUND),
        scoring={"accuracy": "accuracy", "dpd": dpd, "epsilon": epsilon_spent},
    )
    by_column.fit(X, y)
    report('Part 2 - routing OFF (sensitive_columns="sex", scorer sensitive_column="sex")',
           by_column, test.data, test.target, test.sensitive)

    same = all(
        np.allclose(routed.cv_results_[f"mean_test_{k}"], by_column.cv_results_[f"mean_test_{k}"])
        for k in ("accuracy", "dpd")
    ) and routed.best_index_ == by_column.best_index_
    print(f"\nParts 1 and 2 give the same scores and the same choice: {same}")
    print("Both searches ran on the same records, so together they spent up to "
          f"{2 * ((N_FOLDS - 1) * len(TOLERANCES) + 1) * EPSILON:g} (basic composition) on each "
          "of them; the choice itself used exact (non-private) validation scores.")
    print(f"Total time: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
