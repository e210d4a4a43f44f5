"""
==============================================
Auditing the privacy claim: epsilon from below
==============================================

Every skdp estimator reports the epsilon its accountant certifies, an
*upper* bound proven from the algorithm. :func:`skdp.audit.audit_one_run`
measures a *lower* bound: it plants canaries (records in extra columns of
their own, each added to the training data by a fair coin), fits once,
guesses from the fitted model which canaries were trained on, and turns the
right guesses into an epsilon the training procedure must exceed, at 95 %
confidence.

Here the audit runs on 4,000 Adult records for
:class:`skdp.DPSGDClassifier` and :class:`skdp.DPRateConstrainedClassifier`
at epsilon 0.5 to 8, and once more on a deliberately broken copy of each that
trains with the noise of a budget 16 times larger (a quarter of the noise)
while it reports the smaller one: an estimator that claims less than it
spends. The honest estimators stay below the diagonal (bound <= claim); the
broken copies cross it at the small claims (0.5 to 2, where 2,000 canaries
give the audit enough power), which is what an audit is for. A bound below the
claim does not prove privacy: it only says that this attack found no more
leakage (see :ref:`audit`).
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.audit import audit_one_run
from skdp.datasets import fetch_adult, make_preprocessor

train = fetch_adult(subset="train", as_frame=True)
rows = np.random.default_rng(0).permutation(len(train.target))[:4000]
X = np.asarray(make_preprocessor(train).fit_transform(train.data), dtype=np.float64)[rows]
y = np.asarray(train.target)[rows]
s = np.asarray(train.sensitive)[rows]

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
ESTIMATORS = {
    "DPSGDClassifier": (DPSGDClassifier, {}),
    "DPRateConstrainedClassifier": (DPRateConstrainedClassifier, {"sensitive_features": s}),
}


def overclaiming(estimator_class, factor=16.0):
    """A broken copy of ``estimator_class`` for the demonstration: it trains
    with the budget ``factor`` times larger and reports the one it was given."""

    class Overclaiming(estimator_class):
        def fit(self, X, y, **fit_params):
            claimed = self.epsilon
            self.set_params(epsilon=factor * claimed)
            try:
                super().fit(X, y, **fit_params)
            finally:
                self.set_params(epsilon=claimed)
            self.epsilon_ = claimed  # the false claim
            return self

    Overclaiming.__name__ = f"Overclaiming{estimator_class.__name__}"
    return Overclaiming


# %%
# One audit per estimator, budget and copy
# ----------------------------------------
# 2,000 canaries: with every guess right, the one-run bound (the one valid
# for every mechanism: these subsampled fits are not Gaussian mechanisms)
# can reach about 5; fewer canaries cap it lower.
results = {}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    for name, (estimator, fit_params) in ESTIMATORS.items():
        for copy, make in (("honest", estimator), ("over-claiming", overclaiming(estimator))):
            bounds = []
            for epsilon in EPSILONS:
                result = audit_one_run(make(epsilon=epsilon), X, y, n_canaries=2000,
                                       random_state=0, **fit_params)
                bounds.append((result.epsilon_claimed, result.epsilon_lower_bound))
                print(f"{name:28s} {copy:10s} claimed {result.epsilon_claimed:.2f}  "
                      f"audited >= {result.epsilon_lower_bound:.2f}")
            results[name, copy] = np.array(bounds)

# %%
# Lower bound against claim
# -------------------------
fig, ax = plt.subplots(figsize=(5.5, 4))
styles = {"honest": "-o", "over-claiming": "--x"}
for (name, copy), bounds in results.items():
    ax.plot(bounds[:, 0], bounds[:, 1], styles[copy], label=f"{name} ({copy})")
ax.plot([0, 8.5], [0, 8.5], color="grey", linestyle=":", label="bound = claim")
ax.set_ylim(0, 8.5)
ax.set_xlabel("claimed epsilon (epsilon_)")
ax.set_ylabel("audited lower bound (95 %)")
ax.set_title("One-run audit on Adult (4,000 records, 2,000 canaries)", fontsize=10)
ax.legend(fontsize=7)
fig.tight_layout()

# %%
# The scores behind one bound
# ---------------------------
# Each canary's score is the log-probability the model gives its label.
# Trained-on canaries score higher only as far as the noise lets them.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    result = audit_one_run(DPSGDClassifier(epsilon=8.0), X, y, n_canaries=2000, random_state=0)
result.plot()
plt.tight_layout()
