"""``device="cuda"`` end to end: training, prediction, pickling, the private
search and a pipeline with private preprocessing, for every estimator; the
step loop makes no host synchronisation. Every test skips without a GPU."""

import pickle
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
import torch.distributed as dist
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

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
import skdp._training as training
from _broken import scaled_noise
from skdp._fixed_steps import FixedShapeSteps
from skdp.distributed import launch
from skdp.model_selection import PrivateGridSearchCV
from skdp.preprocessing import DPStandardScaler

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

N = 3000


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 5)).astype(np.float32)
    target = X @ np.array([1.0, -1.0, 0.5, 0.0, 0.25], dtype=np.float32)
    target = target + 0.3 * rng.normal(size=N).astype(np.float32)
    return X, (target > 0).astype(int), target, rng.integers(0, 2, N)


def _case(name, device):
    X, y, target, groups = _data()
    common = {"epsilon": 1.0, "random_state": 0, "device": device}
    cases = {
        "DPSGDClassifier": (DPSGDClassifier(**common), y, {}),
        "DPSGDClassifier-mlp": (DPSGDClassifier(hidden_layer_sizes=(16,), **common), y, {}),
        "DPSGDRegressor": (DPSGDRegressor(**common), target, {}),
        "DPRateConstrainedClassifier": (DPRateConstrainedClassifier(**common), y,
                                        {"sensitive_features": groups}),
        "DPFERMIClassifier-1-silo": (DPFERMIClassifier(**common), y,
                                     {"sensitive_features": groups}),
        "DPFERMIClassifier-3-silos": (DPFERMIClassifier(**common), y,
                                      {"sensitive_features": groups,
                                       "silo_ids": np.arange(N) % 3}),
        "DPDROClassifier": (DPDROClassifier(**common), y, {}),
        "DPDRORegressor": (DPDRORegressor(**common), target, {}),
        "DPBilevelLogisticRegression": (DPBilevelLogisticRegression(**common), y, {}),
        "DPBilevelRidge": (DPBilevelRidge(**common), target, {}),
    }
    estimator, labels, fit_params = cases[name]
    return estimator, X, labels, fit_params


NAMES = ["DPSGDClassifier", "DPSGDClassifier-mlp", "DPSGDRegressor",
         "DPRateConstrainedClassifier", "DPFERMIClassifier-1-silo",
         "DPFERMIClassifier-3-silos", "DPDROClassifier", "DPDRORegressor",
         "DPBilevelLogisticRegression", "DPBilevelRidge"]


def _quiet_fit(estimator, X, y, fit_params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(X, y, **fit_params)


@pytest.mark.parametrize("name", NAMES)
def test_fit_predict_pickle_on_cuda(name):
    """A CUDA fit spends the CPU fit's epsilon, predicts on host arrays and
    pickles; with the noise switched off it learns as well as the CPU fit
    (so a difference is the device's, not one seed's noise)."""
    gpu, X, y, fit_params = _case(name, "cuda")
    cpu, _, _, _ = _case(name, "cpu")
    _quiet_fit(gpu, X, y, fit_params)
    _quiet_fit(cpu, X, y, fit_params)
    assert gpu.epsilon_ == pytest.approx(cpu.epsilon_, rel=1e-9)
    assert gpu.delta_ == cpu.delta_
    assert repr(gpu.dp_event_) == repr(cpu.dp_event_)
    predictions = gpu.predict(X)
    assert isinstance(predictions, np.ndarray) and predictions.shape == (N,)
    if hasattr(gpu, "predict_proba"):
        proba = gpu.predict_proba(X)
        assert isinstance(proba, np.ndarray) and np.all(np.isfinite(proba))
    restored = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(restored.predict(X[:100]), predictions[:100], rtol=1e-5,
                               atol=1e-6)
    with scaled_noise(0.0):
        _quiet_fit(gpu, X, y, fit_params)
        _quiet_fit(cpu, X, y, fit_params)
    assert gpu.score(X, y) >= cpu.score(X, y) - 0.05


def test_private_search_on_cuda():
    X, y, _, _ = _data()
    search = PrivateGridSearchCV(DPSGDClassifier(device="cuda"),
                                 {"learning_rate": [0.1, 0.5]}, epsilon=1.0, random_state=0)
    _quiet_fit(search, X, y, {})
    assert search.best_estimator_.device == "cuda"
    assert search.score(X, y) > 0.7
    assert 0 < search.epsilon_ <= 1.0 + 1e-6


def test_pipeline_with_private_preprocessing_on_cuda():
    X, y, _, _ = _data()
    pipe = make_pipeline(DPStandardScaler(epsilon=0.5, bounds=(-10, 10), random_state=0),
                         DPSGDClassifier(epsilon=1.0, device="cuda", random_state=0))
    _quiet_fit(pipe, X, y, {})
    assert pipe.score(X, y) > 0.7


def _sync_sites(name, max_steps):
    """Host synchronisations during one CUDA fit, counted per source line."""
    estimator, X, y, fit_params = _case(name.removesuffix("-eager"), "cuda")
    estimator.set_params(max_steps=max_steps)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            estimator.fit(X, y, **fit_params)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return Counter(f"{w.filename}:{w.lineno}" for w in caught
                   if "synchroniz" in str(w.message))


@pytest.mark.parametrize("name", ["DPSGDClassifier", "DPSGDClassifier-eager",
                                  "DPSGDClassifier-mlp", "DPSGDRegressor",
                                  "DPRateConstrainedClassifier", "DPFERMIClassifier-1-silo",
                                  "DPDROClassifier"])
def test_step_loop_makes_no_host_synchronisation(name, monkeypatch):
    """Ten times the steps, no more synchronisations than a chunk of steps
    accounts for: the loop itself never waits for the GPU (DP-SGD's linear
    fits replay their steps as a CUDA graph, "-eager" runs its eager loop)."""
    if name.endswith("-eager"):
        monkeypatch.setattr(training, "FIXED_SHAPE_STEPS", False)
    few = _sync_sites(name, 40)
    many = _sync_sites(name, 400)
    growing = (many - few).most_common(5)
    # the samplers draw a chunk of up to 256 steps at a time (a few
    # synchronisations per chunk); 400 steps are at most 2 chunks more
    assert sum(many.values()) - sum(few.values()) <= 8, growing


@pytest.mark.skipif(not (torch.cuda.is_available() and dist.is_nccl_available()),
                    reason="needs a CUDA device and nccl")
@pytest.mark.parametrize("name", ["DPSGDClassifier", "DPRateConstrainedClassifier"])
def test_nccl_launch_fits_like_one_process(name):
    """A data-parallel fit over nccl (one rank per GPU, at most two; one GPU
    gives a one-rank group, whose sums still go through nccl) spends the
    single-process fit's epsilon and learns its model."""
    estimator, X, y, fit_params = _case(name, "cuda")
    n_processes = min(2, torch.cuda.device_count())
    fitted = launch(estimator, X, y, n_processes=n_processes, backend="nccl", timeout=120,
                    **fit_params)
    single = _quiet_fit(clone(estimator), X, y, fit_params)
    assert fitted.device == "cuda"
    assert fitted.epsilon_ == single.epsilon_
    assert repr(fitted.dp_event_) == repr(single.dp_event_)
    np.testing.assert_allclose(fitted.coef_, single.coef_, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["DPSGDClassifier", "DPSGDRegressor"])
@pytest.mark.parametrize("batch_size", [32, 128])
def test_cuda_graph_steps_learn_the_eager_model(name, batch_size, monkeypatch):
    """A CUDA fit that replays its fixed-shape step as a CUDA graph spends
    the eager fit's epsilon and learns its model (the padded batches' sums
    differ only in the order of their terms)."""
    made = []
    init = FixedShapeSteps.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(FixedShapeSteps, "__init__", recording_init)
    monkeypatch.setattr(training, "GRAPH_MIN_STEPS", 1)
    estimator, X, y, fit_params = _case(name, "cuda")
    estimator.set_params(batch_size=batch_size, max_epochs=4)
    graphed = _quiet_fit(clone(estimator), X, y, fit_params)
    assert len(made) == 1 and made[0].graph is not None
    monkeypatch.setattr(training, "FIXED_SHAPE_STEPS", False)
    eager = _quiet_fit(clone(estimator), X, y, fit_params)
    assert len(made) == 1
    assert graphed.epsilon_ == eager.epsilon_
    np.testing.assert_allclose(graphed.coef_, eager.coef_, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(graphed.intercept_, eager.intercept_, rtol=1e-3, atol=1e-4)
