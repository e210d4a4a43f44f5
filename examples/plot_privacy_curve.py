"""
========================================================
Privacy spent over training, and positive rates by group
========================================================

Fits :class:`skdp.DPSGDClassifier` and :class:`skdp.DPRateConstrainedClassifier`
(demographic parity, tolerance 0.02) on UCI Adult at epsilon=1 and shows two
things a user checks before shipping a private, fair model:

* the **privacy curve**: the epsilon the accountant certifies after each
  number of training steps (:meth:`~skdp.DPSGDClassifier.privacy_curve`); it
  is computed from the fitted privacy report alone, so it costs no privacy;
* the **positive rate per group** on the test split, for both models and for
  non-private logistic regression: the constraint closes the gap between
  women and men that the unconstrained models keep.

The data is the copy of Adult embedded in the package.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.datasets import fetch_adult, make_preprocessor

train = fetch_adult(subset="train", as_frame=True)
test = fetch_adult(subset="test", as_frame=True)
prep = make_preprocessor(train)
X_train, X_test = prep.fit_transform(train.data), prep.transform(test.data)
y_train, y_test = np.asarray(train.target), np.asarray(test.target)
s_train, s_test = np.asarray(train.sensitive), np.asarray(test.sensitive)

models = {
    "LogisticRegression (non-private)": LogisticRegression(max_iter=1000),
    "DPSGDClassifier, eps=1": DPSGDClassifier(epsilon=1.0, random_state=0),
    "DPRateConstrainedClassifier, eps=1, DP tol 0.02": DPRateConstrainedClassifier(
        tolerance=0.02, epsilon=1.0, random_state=0),
}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    for name, model in models.items():
        if isinstance(model, DPRateConstrainedClassifier):
            model.fit(X_train, y_train, sensitive_features=s_train)
        else:
            model.fit(X_train, y_train)

# %%
# The privacy curve
# -----------------
# ``privacy_curve`` recomputes epsilon from the fitted ``dp_event_`` for a
# range of step counts. RaCO-DP's steps release a gradient, a histogram and
# a count on the same batch; they are accounted as one mechanism, so its
# curve has the shape of plain DP-SGD's.
fig, ax = plt.subplots(figsize=(6, 3.5))
for name in list(models)[1:]:
    curve = models[name].privacy_curve(n_points=25)
    ax.plot(curve[:, 0], curve[:, 1], label=name)
    print(f"{name}: {models[name].n_steps_} steps, epsilon_ = {models[name].epsilon_:.3f}")
ax.axhline(1.0, color="grey", linestyle=":", label="budget")
ax.set_xlabel("training steps")
ax.set_ylabel("epsilon (delta = 1e-5)")
ax.set_title("Privacy spent during training")
ax.legend(fontsize=8)
fig.tight_layout()

# %%
# Positive rate per group
# -----------------------
groups = sorted(set(s_test))
width = 0.8 / len(models)
fig, ax = plt.subplots(figsize=(6, 3.5))
for i, (name, model) in enumerate(models.items()):
    pred = model.predict(X_test)
    rates = [np.mean(pred[s_test == g] == 1) for g in groups]
    ax.bar(np.arange(len(groups)) + i * width, rates, width, label=name)
    print(f"{name}: accuracy {np.mean(pred == y_test):.4f}, positive rates "
          + ", ".join(f"{g} {r:.3f}" for g, r in zip(groups, rates)))
ax.set_xticks(np.arange(len(groups)) + width * (len(models) - 1) / 2, groups)
ax.set_ylabel("P(predicted >50K)")
ax.set_title("Positive rate by group (test split)")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()
