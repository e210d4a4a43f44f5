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
at epsilon 0.5 to 8, and once more on a deliberately broken copy of each
whose noise is a tenth of its planned size while it still reports the
planned epsilon (a test-only hook of the engine, not an option of any
estimator). The honest estimators stay below the diagonal (bound <= claim);
the broken copies cross it, which is what an audit is for. A bound below the
claim does not prove privacy: it only says that this attack found no more
leakage (see :ref:`audit`).
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.audit import audit_one_run
from skdp.audit._broken import scaled_noise
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

# %%
# One audit per estimator, budget and copy
# ----------------------------------------
# 2,000 canaries: with every guess right, the one-run bound can reach about
# 8; fewer canaries cap it lower.
results = {}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    for name, (estimator, fit_params) in ESTIMATORS.items():
        for copy, factor in (("honest", 1.0), ("noise / 10", 0.1)):
            bounds = []
            for epsilon in EPSILONS:
                with scaled_noise(factor):
                    result = audit_one_run(estimator(epsilon=epsilon), X, y, n_canaries=2000,
                                           random_state=0, **fit_params)
                bounds.append((result.epsilon_claimed, result.epsilon_lower_bound))
                print(f"{name:28s} {copy:10s} claimed {result.epsilon_claimed:.2f}  "
                      f"audited >= {result.epsilon_lower_bound:.2f}")
            results[name, copy] = np.array(bounds)

# %%
# Lower bound against claim
# -------------------------
fig, ax = plt.subplots(figsize=(5.5, 4))
styles = {"honest": "-o", "noise / 10": "--x"}
for (name, copy), bounds in results.items():
    ax.plot(bounds[:, 0], bounds[:, 1], styles[copy], label=f"{name} ({copy})")
ax.plot([0, 8.5], [0, 8.5], color="grey", linestyle=":", label="bound = claim")
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
