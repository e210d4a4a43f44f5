"""Privacy invariants of the shared engine: sampling, clipping, noise."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from skdp.models import CrossEntropyHead, LinearBackend, ModuleBackend
from skdp.privacy import (
    PoissonSampler,
    clipped_linear_sum,
    clipped_module_sum,
    gaussian_noise,
    laplace_noise,
)

finite = st.floats(-50, 50, allow_nan=False, width=32)


def _batch(draw_rows, n_features, n_outputs):
    return torch.tensor(draw_rows, dtype=torch.float64).reshape(-1, n_features + n_outputs)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 5),
    k=st.integers(1, 3),
    max_norm=st.floats(0.01, 10.0),
    data=st.data(),
)
def test_linear_clipped_sum_sensitivity(n, d, k, max_norm, data):
    """Adding or removing one example moves the clipped sum by at most C."""
    rows = data.draw(st.lists(finite, min_size=(n + 1) * (d + k), max_size=(n + 1) * (d + k)))
    full = _batch(rows, d, k)
    x, e = full[:, :d], full[:, d:]
    with_all, _ = clipped_linear_sum(x, e.T, max_norm)
    without_last, _ = clipped_linear_sum(x[:-1], e[:-1].T, max_norm)
    assert torch.linalg.norm(with_all - without_last) <= max_norm * (1 + 1e-9) + 1e-12


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 10), max_norm=st.floats(0.05, 5.0), seed=st.integers(0, 10_000))
def test_module_clipped_sum_sensitivity(n, max_norm, seed):
    """Same bound for the generic torch.func path on a small MLP."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=gen, dtype=torch.float64) * 5
    onehot = torch.nn.functional.one_hot(torch.randint(0, 2, (n,), generator=gen), 2).double()
    torch.manual_seed(seed)
    mlp = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    head = CrossEntropyHead()
    full, _ = clipped_module_sum(mlp, head.loss, x, onehot, max_norm=max_norm)
    part, _ = clipped_module_sum(mlp, head.loss, x[1:], onehot[1:], max_norm=max_norm)
    diff = torch.sqrt(sum((full[k] - part[k]).square().sum() for k in full))
    assert diff <= max_norm * (1 + 1e-9)


def test_linear_and_generic_paths_agree():
    """Closed form and torch.func give the same clipped sum on a linear model."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(50, 6, generator=gen, dtype=torch.float64) * 3
    y = torch.randint(0, 3, (50,), generator=gen)
    onehot = torch.nn.functional.one_hot(y, 3).double()
    linear = LinearBackend(X, 3)
    linear.weights.copy_(torch.randn(3, 7, generator=gen, dtype=torch.float64))
    module = torch.nn.Linear(6, 3).double()
    with torch.no_grad():
        module.weight.copy_(linear.weights[:, :-1])
        module.bias.copy_(linear.weights[:, -1])
    generic = ModuleBackend(X, module)
    idx = torch.arange(0, 50, 2)
    head = CrossEntropyHead()
    batch, logits = linear.forward(idx)
    targets = (onehot[idx].T,)  # class-major
    (fast,), sq_fast = linear.clipped_grad_sum(idx, batch, logits, head, targets, 0.7)
    batch, logits = generic.forward(idx)
    (w, b), sq_slow = generic.clipped_grad_sum(idx, batch, logits, head, targets, 0.7)
    torch.testing.assert_close(sq_fast, sq_slow)
    torch.testing.assert_close(fast, torch.cat([w, b[:, None]], dim=1))
    assert (sq_fast > 0.49).any() and (sq_fast < 0.49).any()  # some clipped, some not


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(50, 5000),
    q=st.floats(0.005, 1.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_poisson_sampler_rate(n, q, seed):
    """Batch sizes are Binomial(n, q): mean and spread match; indices valid."""
    steps = 200
    sampler = PoissonSampler(n, q, torch.Generator().manual_seed(seed), chunk_steps=64)
    batches = list(sampler.batches(steps))
    assert len(batches) == steps
    sizes = np.array([len(b) for b in batches])
    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    # the mean of 200 draws lies within 5 standard errors
    assert abs(sizes.mean() - mean) <= 5 * sd / math.sqrt(steps) + 1e-9
    for b in batches[:20]:
        assert b.dtype == torch.int64
        if len(b):
            assert int(b.min()) >= 0 and int(b.max()) < n
            assert len(torch.unique(b)) == len(b)


def test_poisson_sampler_inclusion_is_uniform_and_independent():
    """Every row is included with probability q, independently of the others."""
    n, q, steps = 40, 0.3, 4000
    batches = PoissonSampler(n, q, torch.Generator().manual_seed(1)).batches(steps)
    inclusion = torch.zeros(steps, n)
    for t, b in enumerate(batches):
        inclusion[t, b] = 1.0
    freq = inclusion.mean(0).numpy()
    assert np.all(np.abs(freq - q) < 5 * math.sqrt(q * (1 - q) / steps))
    sizes = inclusion.sum(1).numpy()
    # chi-square goodness of fit of batch sizes to Binomial(n, q)
    counts = np.bincount(sizes.astype(int), minlength=n + 1)
    expected = stats.binom.pmf(np.arange(n + 1), n, q) * steps
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    # first and last rows co-occur as if independent
    both = (inclusion[:, 0] * inclusion[:, -1]).mean().item()
    assert abs(both - q * q) < 5 * math.sqrt(q * q / steps)


def test_sampler_is_reproducible():
    a = list(PoissonSampler(1000, 0.05, torch.Generator().manual_seed(3)).batches(30))
    b = list(PoissonSampler(1000, 0.05, torch.Generator().manual_seed(3)).batches(30))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_sampler_rejects_bad_rate(bad):
    with pytest.raises(ValueError, match="sampling_rate"):
        PoissonSampler(10, bad, torch.Generator())


def test_noise_distributions():
    gen = torch.Generator().manual_seed(0)
    g = gaussian_noise(torch.zeros(200_000, dtype=torch.float64), 3.0, gen).numpy()
    lap = laplace_noise(torch.zeros(200_000, dtype=torch.float64), 2.0, gen).numpy()
    assert stats.kstest(g / 3.0, "norm").pvalue > 1e-3
    assert stats.kstest(lap, "laplace", args=(0.0, 2.0)).pvalue > 1e-3
