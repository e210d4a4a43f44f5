"""The privacy audit as a CI gate: for every estimator, the one-run audit's
lower bound stays at or below the claimed epsilon, and a deliberately
broken copy (no noise, still claiming the planned epsilon) is caught."""

import warnings

import numpy as np
import pytest

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
from skdp.audit import AuditResult, audit_one_run, audit_repeated
from _broken import scaled_noise
from skdp.model_selection import PrivateGridSearchCV, PrivateRandomizedSearchCV
from skdp.preprocessing import (
    DPMinMaxScaler,
    DPOneHotEncoder,
    DPSimpleImputer,
    DPStandardScaler,
)

N, M = 2000, 500
EPSILON = 1.0


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    target = X @ [1.0, -1.0, 0.5, 0.0] + 0.3 * rng.normal(size=n)
    return X, (target > 0).astype(int), target, rng.integers(0, 2, n)


def _encoder_case():
    X = np.round(_data()[0])
    scale = 5.0
    candidates = [np.unique(X[:, j]) for j in range(X.shape[1])]
    candidates += [np.array([0.0, scale])] * M
    return DPOneHotEncoder(epsilon=EPSILON, candidate_categories=candidates), X, None, {
        "canary_scale": scale}


def _case(name):
    X, y, target, groups = _data()
    grid = {"learning_rate": [0.1, 0.5]}
    cases = {
        "DPSGDClassifier": (DPSGDClassifier(epsilon=EPSILON), X, y, {}),
        "DPSGDRegressor": (DPSGDRegressor(epsilon=EPSILON), X, target, {}),
        "DPRateConstrainedClassifier": (DPRateConstrainedClassifier(epsilon=EPSILON), X, y,
                                        {"sensitive_features": groups}),
        "DPFERMIClassifier-1-silo": (DPFERMIClassifier(epsilon=EPSILON), X, y,
                                     {"sensitive_features": groups}),
        "DPFERMIClassifier-3-silos": (DPFERMIClassifier(epsilon=EPSILON), X, y,
                                      {"sensitive_features": groups,
                                       "silo_ids": np.arange(N) % 3}),
        "DPDROClassifier": (DPDROClassifier(epsilon=EPSILON), X, y, {}),
        "DPDRORegressor": (DPDRORegressor(epsilon=EPSILON), X, target, {}),
        "DPBilevelLogisticRegression": (DPBilevelLogisticRegression(epsilon=EPSILON), X, y, {}),
        "DPBilevelRidge": (DPBilevelRidge(epsilon=EPSILON), X, target, {}),
        "PrivateGridSearchCV": (PrivateGridSearchCV(DPSGDClassifier(), grid, epsilon=EPSILON),
                                X, y, {}),
        "PrivateRandomizedSearchCV": (PrivateRandomizedSearchCV(
            DPSGDClassifier(), grid, n_iter=2, epsilon=EPSILON), X, y, {}),
        "DPStandardScaler": (DPStandardScaler(epsilon=EPSILON, bounds=(-100, 100)), X, None, {}),
        "DPSimpleImputer": (DPSimpleImputer(epsilon=EPSILON, bounds=(-100, 100)), X, None,
                            {"canary_scale": 90.0}),
        # the estimated range ignores a small share of each column's records
        # (quantile=0.01): few records per column let one canary move it
        "DPMinMaxScaler": (DPMinMaxScaler(epsilon=EPSILON, data_range=(-100, 100)), X[:60],
                           None, {"canary_scale": 90.0, "n_canaries": 60}),
    }
    if name == "DPOneHotEncoder":
        return _encoder_case()
    return cases[name]


GATE = ["DPSGDClassifier", "DPSGDRegressor", "DPRateConstrainedClassifier",
        "DPFERMIClassifier-1-silo", "DPFERMIClassifier-3-silos", "DPDROClassifier",
        "DPDRORegressor", "DPBilevelLogisticRegression", "DPBilevelRidge",
        "PrivateGridSearchCV", "PrivateRandomizedSearchCV", "DPStandardScaler",
        "DPMinMaxScaler", "DPOneHotEncoder", "DPSimpleImputer"]


def _audit(name, noise_factor):
    estimator, X, y, options = _case(name)
    options = dict(options)
    n_canaries = options.pop("n_canaries", M)
    kwargs = {key: value for key, value in options.items()
              if key in ("sensitive_features", "silo_ids")}
    with warnings.catch_warnings(), scaled_noise(noise_factor):
        warnings.simplefilter("ignore")
        return audit_one_run(estimator, X, y, n_canaries=n_canaries, random_state=0,
                             canary_scale=options.get("canary_scale"), **kwargs)


@pytest.mark.parametrize("name", GATE)
def test_audit_gate(name):
    """The audited lower bound stays at or below the claim, and the same
    audit refutes the claim of a copy without noise."""
    honest = _audit(name, 1.0)
    assert 0 < honest.epsilon_claimed <= EPSILON + 1e-6
    assert honest.epsilon_lower_bound <= honest.epsilon_claimed, honest
    broken = _audit(name, 0.0)
    assert broken.epsilon_claimed == pytest.approx(honest.epsilon_claimed)
    assert broken.claim_refuted, broken


def test_a_tenth_of_the_noise_is_caught_for_dpsgd():
    broken = _audit("DPSGDClassifier", 0.1)
    assert broken.epsilon_lower_bound > 2 * broken.epsilon_claimed


def test_the_noise_patch_is_restored():
    import torch

    from skdp.privacy import _noise, _random, gaussian_noise

    original = _noise.normal_
    assert original is _random.normal_
    with pytest.raises(RuntimeError), scaled_noise(0.0):
        assert float(gaussian_noise(torch.zeros(3), 1.0, torch.Generator()).abs().sum()) == 0
        raise RuntimeError
    assert _noise.normal_ is original
    assert float(gaussian_noise(torch.zeros(3), 1.0, torch.Generator()).abs().sum()) > 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_repeated_audit_bounds_and_catches_a_broken_copy():
    X, y, _, _ = _data(200)
    estimator = DPSGDClassifier(epsilon=EPSILON, batch_size=200, max_steps=5)
    honest = audit_repeated(estimator, X, y, n_fits=80, random_state=0)
    assert honest.method == "repeated" and honest.scores.shape == (80,)
    assert honest.epsilon_lower_bound <= honest.epsilon_claimed
    with scaled_noise(0.0):
        broken = audit_repeated(estimator, X, y, n_fits=80, random_state=0)
    assert broken.claim_refuted, broken


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_result_fields_and_plot():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    X, y, _, _ = _data(1000)
    result = audit_one_run(DPSGDClassifier(epsilon=EPSILON), X, y, n_canaries=200,
                           random_state=0)
    assert isinstance(result, AuditResult)
    assert result.scores.shape == result.included.shape == result.guesses.shape == (200,)
    assert result.n_guesses == np.sum(result.guesses != 0)
    correct = np.sum((result.guesses == 1) & result.included)
    correct += np.sum((result.guesses == -1) & ~result.included)
    assert result.n_correct == correct
    assert result.delta == 1e-5
    assert result.plot() is not None


def test_bad_arguments_are_named():
    X, y, _, _ = _data(100)
    with pytest.raises(ValueError, match="n_canaries"):
        audit_one_run(DPSGDClassifier(), X, y, n_canaries=1)
    with pytest.raises(ValueError, match="one label per row"):
        audit_one_run(DPSGDClassifier(), X, y[:50], n_canaries=10)
    with pytest.raises(ValueError, match="n_fits"):
        audit_repeated(DPSGDClassifier(), X, y, n_fits=2)


def test_the_audit_is_reproducible():
    X, y, _, _ = _data(1000)
    first = audit_one_run(DPSGDClassifier(epsilon=EPSILON), X, y, n_canaries=100,
                          random_state=3)
    second = audit_one_run(DPSGDClassifier(epsilon=EPSILON), X, y, n_canaries=100,
                           random_state=3)
    np.testing.assert_array_equal(first.included, second.included)
    np.testing.assert_allclose(first.scores, second.scores, rtol=1e-6)
