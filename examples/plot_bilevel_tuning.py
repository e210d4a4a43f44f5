"""
================================================
Tuning a ridge penalty privately, without a grid
================================================

:class:`~skdp.model_selection.DPBilevelRidge` updates the penalty strength
omega on the fly from two privately trained models per iteration. This
example shows the omega path against the validation-optimal omega of a fine
grid of non-private fits, and compares the test loss of the tuned private
model with a private model at a fixed default omega and with non-private
:class:`~sklearn.linear_model.RidgeCV`.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.metrics import mean_squared_error

from skdp import DPSGDRegressor
from skdp.model_selection import DPBilevelRidge

# %%
# A regression task with an interior validation-optimal penalty
rng = np.random.default_rng(0)
n, d = 8000, 200
X = rng.normal(size=(n, d))
y = X @ rng.normal(size=d) + 15 * rng.normal(size=n)
X_train, y_train, X_test, y_test = X[:6000], y[:6000], X[6000:], y[6000:]

# %%
# The non-private tuner (exact inner solves) and the private one
exact = DPBilevelRidge(epsilon=None, n_outer_iter=15, y_bounds=(-100, 100),
                       random_state=0).fit(X_train, y_train)
paths = {"non-private": exact.omega_path_}
models = {}
for eps in (1.0, 3.0):
    models[eps] = DPBilevelRidge(epsilon=eps, random_state=0).fit(X_train, y_train)
    paths[f"epsilon={eps:g}"] = models[eps].omega_path_

# %%
# The validation-optimal omega of a fine grid (same split as the tuner)
mask = np.zeros(len(X_train), bool)
mask[np.random.RandomState(0).permutation(len(X_train))[:1200]] = True
grid = np.logspace(-4, 1, 60)
val = [mean_squared_error(y_train[mask], Ridge(alpha=w * (~mask).sum())
                          .fit(X_train[~mask], y_train[~mask]).predict(X_train[mask]))
       for w in grid]
best = grid[int(np.argmin(val))]

fig, ax = plt.subplots(figsize=(6, 3.5))
for label, path in paths.items():
    ax.plot(path, marker="o", label=label)
ax.axhline(best, color="k", ls="--", label="grid optimum")
ax.set(yscale="log", xlabel="outer iteration", ylabel="omega", title="omega path")
ax.legend()
plt.tight_layout()

# %%
# Test loss: tuned private model against a fixed default and RidgeCV
for eps, model in models.items():
    fixed = DPSGDRegressor(epsilon=eps, alpha=1e-2, random_state=0).fit(X_train, y_train)
    print(f"epsilon={eps:g}: tuned {mean_squared_error(y_test, model.predict(X_test)):.1f}  "
          f"fixed {mean_squared_error(y_test, fixed.predict(X_test)):.1f}  "
          f"(omega_={model.omega_:.3g}, spent {model.epsilon_:.3f})")
ridge = RidgeCV(alphas=np.logspace(-2, 4, 30)).fit(X_train, y_train)
print(f"non-private RidgeCV: {mean_squared_error(y_test, ridge.predict(X_test)):.1f}")
plt.show()
