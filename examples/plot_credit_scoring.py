"""
========================================================
A private and fair credit-scoring workflow, one epsilon
========================================================

A raw table as it comes from a lender's CSV: amounts in the thousands to
millions, a categorical column, a few missing values, about a quarter of
defaults, and a binary sensitive attribute. The whole workflow is private
and spends one epsilon:

1. private preprocessing: :class:`~skdp.preprocessing.DPSimpleImputer` (median
   within public bounds), :class:`~skdp.preprocessing.DPStandardScaler`
   (public bounds) and :class:`~skdp.preprocessing.DPOneHotEncoder` (the
   public list of categories, free);
2. a fair private model: :class:`~skdp.DPRateConstrainedClassifier` with a
   demographic-parity constraint;
3. a private search over the tolerance
   (:class:`~skdp.model_selection.PrivateGridSearchCV`), which fits every
   candidate pipeline, chooses privately and refits, and accounts every step;
4. :func:`skdp.model_selection.spent`: the epsilon of everything above.

It prints test accuracy, log-loss (next to scikit-learn's
LogisticRegression and a constant predictor) and the demographic-parity gap,
and draws a reliability diagram: skdp's probabilities are calibrated by
default. The table is generated (a seeded stand-in for a public
consumer-lending table), so the example needs no download.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.calibration import calibration_curve
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from skdp import DPRateConstrainedClassifier
from skdp.metrics import demographic_parity_difference
from skdp.model_selection import PrivateGridSearchCV
from skdp.preprocessing import DPOneHotEncoder, DPSimpleImputer, DPStandardScaler
from skdp.model_selection import spent

EPSILON, DELTA = 1.0, 1e-6


# %%
# A raw lending table
# -------------------
# Income and loan amount on raw scales, age, the purpose of the loan, and
# the sensitive attribute; 3 % of incomes and 2 % of purposes are missing.
def lending_table(n, seed):
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n, p=[0.4, 0.6])
    income = rng.lognormal(10.6, 0.5, n) * np.where(sex == "male", 1.15, 1.0)
    loan = rng.lognormal(11.5, 0.9, n)
    age = rng.integers(18, 80, n).astype(float)
    purpose = rng.choice(["car", "home", "education", "business"], n, p=[0.4, 0.3, 0.2, 0.1])
    risk = (1.4 * np.log(loan / income) - 0.03 * (age - 45)
            + np.select([purpose == "business", purpose == "education"], [0.6, 0.3], 0.0)
            - 2.6)
    default = (rng.random(n) < 1 / (1 + np.exp(-risk))).astype(int)
    table = pd.DataFrame({"income": income, "loan": loan, "age": age, "purpose": purpose,
                          "sex": sex})
    table.loc[rng.random(n) < 0.03, "income"] = np.nan
    table.loc[rng.random(n) < 0.02, "purpose"] = np.nan
    return table, default


train, y_train = lending_table(30_000, seed=0)
test, y_test = lending_table(10_000, seed=1)
print(f"{len(train)} training rows, {y_train.mean():.1%} defaults; first rows:")
print(train.head())

# %%
# Private preprocessing, a fair model, a private search
# ------------------------------------------------------
# Bounds and categories are public knowledge about the columns (what values
# they can take), never read from the data. ``sex`` passes through by name
# and the classifier takes it out as the sensitive column; it is needed in
# fit only.
numeric = ["income", "loan", "age"]
bounds = {"income": (0.0, 500_000.0), "loan": (0.0, 2_000_000.0), "age": (18.0, 80.0)}
preprocess = ColumnTransformer(
    [("num", make_pipeline(DPSimpleImputer(strategy="median", bounds=bounds),
                           DPStandardScaler(bounds=bounds)), numeric),
     ("cat", DPOneHotEncoder(categories=[["car", "home", "education", "business"]]),
      ["purpose"])],
    remainder="passthrough", verbose_feature_names_out=False,
).set_output(transform="pandas")
model = Pipeline([
    ("prep", preprocess),
    ("clf", DPRateConstrainedClassifier(constraint="demographic_parity",
                                        sensitive_columns="sex", delta=DELTA)),
])
search = PrivateGridSearchCV(
    model, {"clf__tolerance": [0.02, 0.05, 0.1]}, epsilon=EPSILON, delta=DELTA,
    random_state=0,
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # the search reports its own noise
    search.fit(train, y_train)
total = spent(search)
print(f"chosen tolerance {search.best_params_['clf__tolerance']}; epsilon of the whole "
      f"workflow {total.epsilon:.3f} at delta {total.delta:.1e}")

# %%
# The fitted search, as a notebook shows it: each skdp step's "?" links to
# its API page.
search

# %%
# Accuracy, log-loss, fairness
# ----------------------------
# The reference is scikit-learn's LogisticRegression on the same columns,
# non-private (its preprocessing reads the data), and a constant predictor
# that always says the training share of defaults.
reference = make_pipeline(
    ColumnTransformer([
        ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["purpose"]),
    ]),
    LogisticRegression(max_iter=2000),
).fit(train, y_train)
proba = {"skdp (private, fair)": search.predict_proba(test)[:, 1],
         "LogisticRegression": reference.predict_proba(test)[:, 1],
         "constant": np.full(len(test), y_train.mean())}
for name, p in proba.items():
    gap = demographic_parity_difference(y_test, (p > 0.5).astype(int),
                                        sensitive_features=test["sex"])
    print(f"{name:22s} accuracy {np.mean((p > 0.5) == y_test):.3f}  "
          f"log-loss {log_loss(y_test, p):.4f}  demographic-parity gap {gap:.3f}")

# %%
# Reliability diagram
# -------------------
# Mean predicted probability against the observed default rate, in ten bins.
fig, ax = plt.subplots(figsize=(5, 5))
ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfectly calibrated")
for name in ("skdp (private, fair)", "LogisticRegression"):
    observed, predicted = calibration_curve(y_test, proba[name], n_bins=10,
                                            strategy="quantile")
    ax.plot(predicted, observed, marker="o", label=name)
ax.set_xlabel("mean predicted probability of default")
ax.set_ylabel("observed default rate")
ax.set_title(f"Calibration on held-out loans (epsilon={total.epsilon:.2f})")
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()
