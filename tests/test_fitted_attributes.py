"""Every fitted attribute is public or a function of the noisy releases.

What ``fit`` leaves on an estimator is what it reveals. An attribute that is
public by construction depends only on public quantities: the number of
records ``n`` (with ``unit_ids``, also the number of units), the classes, the
groups, the silos' sizes, the public parameters and the fit's randomness
(the seed). Everything else must come from the noisy releases that
``epsilon_`` covers, and each estimator lists those attributes in its
``_released_attributes``.

The check is generic: for every estimator (every private step and search),
two data sets with the same public quantities but different values, labels,
groups and -- with units -- different numbers of records per unit are fitted
with the same seed; every fitted attribute that is not listed as released must
come out identical. A new attribute that counts records, sums values or times
the fit fails here until it is made public or released (and listed).
"""

import dataclasses
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, clone

from skdp import (
    DPBilevelLogisticRegression,
    DPBilevelRidge,
    DPDROClassifier,
    DPDRORegressor,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp.model_selection import PrivateGridSearchCV
from skdp.preprocessing import (
    DPMinMaxScaler,
    DPOneHotEncoder,
    DPSimpleImputer,
    DPStandardScaler,
)

N, N_UNITS, N_FEATURES = 900, 150, 4


def _data(seed, units):
    """A data set whose public quantities (n, n_units, classes, groups, the
    unit ids present) are the same for every seed, and whose values, labels,
    groups and records per unit are not."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, N_FEATURES)) * rng.uniform(0.5, 2.0, size=N_FEATURES)
    score = X @ rng.normal(size=N_FEATURES) + 0.5 * rng.normal(size=N)
    y = (score > np.median(score)).astype(int)
    y[:2] = [0, 1]
    target = score + rng.normal(size=N)
    groups = (rng.random(N) < rng.uniform(0.3, 0.7)).astype(int)
    groups[:2] = [0, 1]
    unit_ids = None
    if units:
        # every unit present, with a data-dependent number of records
        sizes = rng.multinomial(N - N_UNITS, rng.dirichlet(np.full(N_UNITS, 0.3))) + 1
        unit_ids = rng.permutation(np.repeat(np.arange(N_UNITS), sizes))
    return X, y, target, groups, unit_ids


FAST = dict(max_steps=20, random_state=0)
BILEVEL = dict(n_outer_iter=2, inner_steps=10, random_state=0)


def _cases():
    """(id, estimator, target kind, extra fit parameters, takes groups)."""
    return [
        ("DPSGDClassifier", DPSGDClassifier(**FAST), "label", {}, True),
        ("DPSGDClassifier-balanced", DPSGDClassifier(class_weight="balanced", **FAST),
         "label", {}, True),
        ("DPSGDClassifier-mlp", DPSGDClassifier(hidden_layer_sizes=(4,), **FAST),
         "label", {}, True),
        ("DPSGDRegressor", DPSGDRegressor(**FAST), "value", {}, False),
        ("DPRateConstrainedClassifier", DPRateConstrainedClassifier(**FAST), "label", {},
         True),
        ("DPRateConstrainedClassifier-eo", DPRateConstrainedClassifier(
            constraint="equalized_odds", **FAST), "label", {}, True),
        ("DPFERMIClassifier", DPFERMIClassifier(**FAST), "label", {}, True),
        ("DPFERMIClassifier-3-silos", DPFERMIClassifier(**FAST), "label",
         {"silo_ids": np.arange(N) % 3}, True),
        ("DPDROClassifier", DPDROClassifier(**FAST), "label", {}, True),
        ("DPDRORegressor", DPDRORegressor(**FAST), "value", {}, False),
        ("DPBilevelLogisticRegression", DPBilevelLogisticRegression(**BILEVEL), "label", {},
         False),
        ("DPBilevelRidge", DPBilevelRidge(**BILEVEL), "value", {}, False),
        ("PrivateGridSearchCV", PrivateGridSearchCV(
            DPSGDClassifier(max_steps=20), {"learning_rate": [0.1, 0.5]}, random_state=0),
         "label", {}, False),
        ("DPStandardScaler", DPStandardScaler(bounds=(-5, 5), random_state=0), None, {},
         False),
        ("DPStandardScaler-estimated", DPStandardScaler(data_range=(-50, 50),
                                                        random_state=0), None, {}, False),
        ("DPMinMaxScaler", DPMinMaxScaler(data_range=(-50, 50), random_state=0), None, {},
         False),
        ("DPSimpleImputer", DPSimpleImputer(bounds=(-5, 5), random_state=0), None, {},
         False),
        ("DPOneHotEncoder", DPOneHotEncoder(random_state=0), "categories", {}, False),
    ]


def _fit(case, seed, units):
    _, estimator, kind, extra, groups_too = case
    X, y, target, groups, unit_ids = _data(seed, units)
    params = dict(extra)
    if groups_too:
        params["sensitive_features"] = groups
    if unit_ids is not None:
        params["unit_ids"] = unit_ids
        if "silo_ids" in params:  # a unit lives in one silo; each silo's units are public
            params["silo_ids"] = unit_ids % 3
    model = clone(estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "label":
            model.fit(X, y, **params)
        elif kind == "value":
            model.fit(X, target, **params)
        elif kind == "categories":
            model.fit(np.floor(np.clip(X, -2, 1.99)).astype(int), **params)
        else:
            model.fit(X, **params)
    return model


def _fitted_attributes(estimator):
    return sorted(k for k in vars(estimator) if k.endswith("_") and not k.startswith("_"))


def _differences(a, b, path):
    """Where ``a`` and ``b`` differ (paths), descending into containers; an
    estimator is compared by its own public attributes only."""
    if isinstance(a, BaseEstimator) and isinstance(b, BaseEstimator):
        return _public_differences(a, b, path)
    if type(a) is not type(b):
        return [f"{path} (types {type(a).__name__} / {type(b).__name__})"]
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return [f"{path} (keys)"]
        return [d for k in a for d in _differences(a[k], b[k], f"{path}[{k!r}]")]
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return [f"{path} (length)"]
        return [d for i, (x, z) in enumerate(zip(a, b)) for d in _differences(x, z, f"{path}[{i}]")]
    if isinstance(a, torch.Tensor):
        a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    if isinstance(a, np.ndarray):
        if a.dtype == object:
            if a.shape != b.shape:
                return [f"{path} (shape)"]
            return [d for i, (x, z) in enumerate(zip(a.ravel(), b.ravel()))
                    for d in _differences(x, z, f"{path}[{i}]")]
        same = a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        return [] if same else [path]
    if isinstance(a, dpa.DpEvent):
        return [] if a == b else [path]
    if dataclasses.is_dataclass(a):
        return [d for f in dataclasses.fields(a)
                for d in _differences(getattr(a, f.name), getattr(b, f.name),
                                      f"{path}.{f.name}")]
    if isinstance(a, float) and np.isnan(a) and np.isnan(b):
        return []
    try:
        return [] if bool(a == b) else [path]
    except Exception:  # noqa: BLE001 (an object without equality: compare its state)
        return _differences(vars(a), vars(b), path)


def _public_differences(a, b, path):
    released = getattr(type(a), "_released_attributes", frozenset())
    found = []
    names = set(_fitted_attributes(a)) | set(_fitted_attributes(b))
    for name in sorted(names - set(released)):
        if name not in vars(a) or name not in vars(b):
            found.append(f"{path}.{name} (set in one fit only)")
            continue
        found.extend(_differences(getattr(a, name), getattr(b, name), f"{path}.{name}"))
    return found


CASES = _cases()


@pytest.mark.parametrize("units", [False, True], ids=["records", "units"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_fitted_attribute_is_public_or_released(case, units):
    first, second = _fit(case, 1, units), _fit(case, 2, units)
    assert _public_differences(first, second, case[0]) == []
