"""Fixed-shape DP-SGD steps (skdp._fixed_steps): the padded batches are the
Poisson batches, the noise the eager loop's, and the model the eager loop's
up to the order of floating-point sums. On the CPU they run eagerly (forced);
tests/test_cuda.py checks the CUDA graph that replays them."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import skdp._training as training
from skdp import DPBilevelLogisticRegression, DPSGDClassifier, DPSGDRegressor
from skdp.privacy import NoiseStream, PoissonSampler


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3000), rate=st.floats(1e-3, 1.0), steps=st.integers(1, 40),
       chunk=st.integers(1, 16), seed=st.integers(0, 2**31 - 1))
def test_padded_batches_are_the_poisson_batches(n, rate, steps, chunk, seed):
    """Each padded row holds its step's batch first, then masked padding,
    with the same draws as ``batches`` (so the same privacy)."""
    def sampler():
        return PoissonSampler(n, rate, torch.Generator().manual_seed(seed), chunk_steps=chunk)

    batches = list(sampler().batches(steps))
    padded = list(sampler().padded_batches(steps))
    indices = torch.cat([i for i, _ in padded]) if padded else torch.empty(0)
    masks = torch.cat([m for _, m in padded]) if padded else torch.empty(0)
    assert indices.shape[0] == steps
    for batch, row, mask in zip(batches, indices, masks):
        count = batch.numel()
        assert torch.equal(row[:count], batch)
        assert bool(mask[:count].all()) and not bool(mask[count:].any())
        assert bool(((row >= 0) & (row < n)).all())
    assert all(i.shape[1] >= sampler().padded_width for i, _ in padded)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 20), block=st.integers(1, 7),
       counts=st.lists(st.integers(0, 12), max_size=6))
def test_noise_rows_are_the_vectors_one_by_one(size, block, counts):
    rows = NoiseStream(size, torch.Generator().manual_seed(1), block_steps=block)
    one_by_one = NoiseStream(size, torch.Generator().manual_seed(1), block_steps=block)
    for count in counts:
        got = rows.next_rows(count)
        assert got.shape == (count, size)
        expected = [one_by_one.next() for _ in range(count)]
        if count:
            assert torch.equal(got, torch.stack(expected))


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[0] = 3e38  # an extreme record: finite sums either way
    target = X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
    return X, (target > 0).astype(int), target.clip(-5, 5), rng.uniform(0.2, 1.0, n)


CASES = {
    "classifier": (lambda: DPSGDClassifier(epsilon=1.0, random_state=0), "y", {}),
    "small batches, weights": (
        lambda: DPSGDClassifier(epsilon=1.0, batch_size=32, random_state=0), "y",
        {"sample_weight": True}),
    "penalty, three epochs": (
        lambda: DPSGDClassifier(epsilon=0.5, alpha=1e-2, max_epochs=3, random_state=0), "y", {}),
    "regressor": (lambda: DPSGDRegressor(epsilon=1.0, random_state=0), "t", {}),
    "bilevel": (lambda: DPBilevelLogisticRegression(epsilon=1.0, random_state=0), "y", {}),
}


def _fit(make, X, labels, fit_params, mode, monkeypatch):
    monkeypatch.setattr(training, "FIXED_SHAPE_STEPS", mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make().fit(X, labels, **fit_params)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fixed_shape_steps_learn_the_eager_model(case, monkeypatch):
    make, target, fit_params = CASES[case]
    X, y, t, weights = _data()
    labels = y if target == "y" else t
    if fit_params.get("sample_weight"):
        fit_params = {"sample_weight": weights}
    eager = _fit(make, X, labels, fit_params, False, monkeypatch)
    fixed = _fit(make, X, labels, fit_params, True, monkeypatch)
    assert fixed.epsilon_ == eager.epsilon_
    assert repr(fixed.dp_event_) == repr(eager.dp_event_)
    assert np.all(np.isfinite(fixed.coef_))
    np.testing.assert_allclose(fixed.coef_, eager.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fixed.intercept_, eager.intercept_, rtol=1e-4, atol=1e-5)


def test_a_batch_wider_than_the_padding_runs_at_its_own_width(monkeypatch):
    """With a padded width below the batches (so every chunk runs over it),
    the steps run at each chunk's width and still learn the eager model."""
    X, y, _, _ = _data()
    monkeypatch.setattr(PoissonSampler, "_width", lambda self: 8)
    eager = _fit(CASES["classifier"][0], X, y, {}, False, monkeypatch)
    fixed = _fit(CASES["classifier"][0], X, y, {}, True, monkeypatch)
    np.testing.assert_allclose(fixed.coef_, eager.coef_, rtol=1e-4, atol=1e-5)


def test_auto_keeps_the_eager_loop_off_cuda(monkeypatch):
    """On the CPU the default ("auto") runs the eager loop: the padded steps
    cost more there, and CPU models stay as they were."""
    X, y, _, _ = _data()
    seen = []
    original = training._fixed_shape_mode

    def spy(*args):
        seen.append(original(*args))
        return seen[-1]

    monkeypatch.setattr(training, "_fixed_shape_mode", spy)
    _fit(CASES["classifier"][0], X, y, {}, "auto", monkeypatch)
    assert seen == [None]
    monkeypatch.setattr(training, "FIXED_SHAPE_STEPS", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPSGDClassifier(epsilon=1.0, random_state=0).fit(X, y)
        DPSGDClassifier(epsilon=1.0, random_state=0, verbose=1).fit(X[:500], y[:500])
    # forced: eager fixed-shape steps on the CPU; verbose keeps the eager loop
    assert seen[1:] == ["eager", None]


def test_auto_captures_a_graph_on_cuda_for_long_fits_only():
    """The choice itself (no GPU needed): "graph" on CUDA with momentum SGD
    from GRAPH_MIN_STEPS steps on; the eager loop for shorter fits, other
    optimizers, units, or per-step debug output."""
    from skdp.models import LinearBackend
    from skdp.privacy import LocalCommunicator, UnitSampler, bound_units

    backend = LinearBackend(torch.zeros((100, 3)), 2)
    generator = torch.Generator().manual_seed(0)
    sampler = PoissonSampler(100, 0.1, generator)
    sgd = training.make_optimizer("sgd", backend.parameters, 0.1)
    adam = training.make_optimizer("adam", backend.parameters, 0.1)
    comm = LocalCommunicator()

    def mode(n_steps, optimizer=sgd, device="cuda", verbose=0, chosen=sampler):
        config = training.DPSGDConfig(n_steps=n_steps, sampling_rate=0.1, max_grad_norm=1.0,
                                      verbose=verbose)
        return training._fixed_shape_mode(backend, chosen, optimizer, comm, config, device)

    long = training.GRAPH_MIN_STEPS
    assert mode(long) == "graph"
    assert mode(long - 1) is None
    assert mode(long, device="cpu") is None
    assert mode(long, optimizer=adam) is None
    assert mode(long, verbose=1) is None
    units = UnitSampler(bound_units(np.arange(100) // 2, 50, 2, generator), 0.1, generator)
    assert mode(long, chosen=units) is None
