"""DP-FERMI at scale: each silo draws its batches a chunk of rounds at a
time (the host waits for a GPU once per chunk, never inside a round), in an
order every engine follows; the training rows are never copied or
reordered, only gathered a batch (or a block of rows) at a time."""

import collections
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skdp import DPFERMIClassifier
from skdp.fairness.fermi import SiloDraws, protocol
from skdp.fairness.fermi.protocol import (
    SAMPLING_CHUNK_RECORDS,
    SAMPLING_CHUNK_ROUNDS,
    SiloRandomness,
    sampling_chunk_rounds,
    silo_unit_bounds,
)
from skdp.federated import DirectTransport, FermiSilo, SiloPolicy, fit_federated
from skdp.models import LinearBackend
from skdp.privacy import PoissonSampler
from skdp.privacy._random import normal_


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = (X @ np.array([1.0, -1.0, 0.5, 0.0, 0.25]) + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y, rng.integers(0, 2, n)


def _fit(estimator, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(*args, **kwargs)


# ---------------------------------------------------------------- the draws
@settings(max_examples=40, deadline=None)
@given(batch=st.floats(0.0, 1e9), per_unit=st.integers(1, 64))
def test_a_chunk_holds_at_most_the_rounds_and_records_it_may(batch, per_unit):
    rounds = sampling_chunk_rounds(batch, per_unit)
    assert 1 <= rounds <= SAMPLING_CHUNK_ROUNDS
    if rounds > 1:  # only a single round may exceed the records of a chunk
        assert rounds * max(1.0, batch * per_unit) <= SAMPLING_CHUNK_RECORDS


def test_batches_follow_the_documented_order(monkeypatch):
    """Round r's batch is batch r - cK of chunk c = r // K, one chunk of a
    PoissonSampler drawn from the silo's sampling stream c (the last chunk
    shorter); its noise row is the first draw of the round's stream."""
    monkeypatch.setattr(protocol, "SAMPLING_CHUNK_ROUNDS", 4)
    n, q, rounds = 500, 0.05, 10
    draws = SiloDraws(SiloRandomness(3, 1), n, q, rounds)
    assert draws.chunk_rounds == 4
    for r in range(rounds):
        idx, noise = draws.round(r, 6, torch.float64)
        chunk, offset = divmod(r, 4)
        steps = min(4, rounds - 4 * chunk)
        expected = list(PoissonSampler(n, q, SiloRandomness(3, 1).sampling(chunk),
                                       chunk_steps=steps).batches(steps))[offset]
        assert torch.equal(idx, expected)
        assert torch.equal(noise, normal_(torch.empty(6, dtype=torch.float64),
                                          SiloRandomness(3, 1).at(r)))


def test_any_round_can_be_asked_first_and_chunks_are_independent(monkeypatch):
    """A silo that starts afresh (a new process) draws any round alike;
    different chunks and different silos draw different batches."""
    monkeypatch.setattr(protocol, "SAMPLING_CHUNK_ROUNDS", 5)
    draws = SiloDraws(SiloRandomness(0, 0), 2000, 0.1, 20)
    batches = [draws.batch(r) for r in range(20)]
    for r in (17, 3, 12):
        assert torch.equal(SiloDraws(SiloRandomness(0, 0), 2000, 0.1, 20).batch(r), batches[r])
    assert not torch.equal(batches[0], batches[5])
    assert not torch.equal(SiloDraws(SiloRandomness(0, 1), 2000, 0.1, 20).batch(0), batches[0])
    for idx in batches:
        assert idx.dtype == torch.int64 and bool((idx[1:] > idx[:-1]).all())
        assert 0 <= int(idx.min()) and int(idx.max()) < 2000


def test_rows_are_poisson_sampled_at_rate_q_across_chunks(monkeypatch):
    monkeypatch.setattr(protocol, "SAMPLING_CHUNK_ROUNDS", 7)
    n, q, rounds = 400, 0.1, 300
    draws = SiloDraws(SiloRandomness(11, 2), n, q, rounds)
    hits = np.zeros(n)
    sizes = []
    for r in range(rounds):
        idx = draws.batch(r).numpy()
        hits[idx] += 1
        sizes.append(idx.size)
    # every row at rate q; batch sizes Binomial(n, q): mean 40, sd 6
    assert abs(hits.mean() / rounds - q) < 0.005
    assert abs(np.mean(sizes) - n * q) < 1.5 and 4.0 < np.std(sizes) < 8.0


def test_units_are_sampled_whole_in_chunks(monkeypatch):
    monkeypatch.setattr(protocol, "SAMPLING_CHUNK_ROUNDS", 3)
    rng = np.random.default_rng(1)
    codes = np.repeat(np.arange(200), rng.integers(1, 6, 200))
    bounds = silo_unit_bounds(codes, 200, 2, SiloRandomness(0, 0))
    draws = SiloDraws(SiloRandomness(0, 0), 200, 0.2, 10, bounds)
    assert draws.chunk_rounds == 3
    kept = np.bincount(codes[bounds.kept], minlength=200)
    for r in range(10):
        idx = draws.batch(r).numpy()
        present = np.bincount(codes[idx], minlength=200)
        assert bounds.kept[idx].all()
        assert np.array_equal(present[present > 0], kept[present > 0])


def _host_reads(monkeypatch):
    """Count tensor-to-Python conversions (on a GPU each one waits for the
    device), by the line that asks for them."""
    seen = collections.Counter()
    for name in ("__float__", "__int__", "__bool__", "__index__", "item", "tolist"):
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _original=original, _name=name, **kwargs):
            seen[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    return seen


@pytest.mark.parametrize("n_silos", [1, 3])
def test_the_round_loop_reads_nothing_back_from_the_device(monkeypatch, n_silos):
    """Ten times the rounds add only a chunk's reads of the batch sizes: no
    round converts a tensor to a Python number (the CPU stand-in for
    tests/test_cuda.py's count of GPU synchronisations)."""
    X, y, g = _data()
    silos = None if n_silos == 1 else np.arange(len(y)) % n_silos
    seen = _host_reads(monkeypatch)
    counts = []
    for steps in (40, 400):
        seen.clear()
        _fit(DPFERMIClassifier(epsilon=1.0, random_state=0, max_steps=steps), X, y,
             sensitive_features=g, silo_ids=silos)
        counts.append(sum(seen.values()))
    # 400 rounds are one more chunk (256 rounds) per silo than 40
    assert counts[1] - counts[0] <= 4 * n_silos, counts


# ---------------------------------------------------------------- memory
@pytest.mark.parametrize("n_silos", [1, 3])
def test_training_rows_are_never_copied_or_gathered_whole(monkeypatch, n_silos):
    """The backend trains on the caller's float32 rows themselves (silos in
    any order: only an index is sorted), and nothing gathers more rows at
    once than a batch or a block."""
    X, y, g = _data(n=6000)
    rng = np.random.default_rng(0)
    silos = None if n_silos == 1 else rng.integers(0, n_silos, len(y))  # rows out of silo order
    seen = {"data": [], "rows": []}
    make_backend = DPFERMIClassifier._make_backend
    forward = LinearBackend.forward

    def spy_backend(self, X_t, n_outputs, seed):
        seen["data"].append(X_t.data.data_ptr())
        return make_backend(self, X_t, n_outputs, seed)

    def spy_forward(self, idx):
        seen["rows"].append(idx.numel())
        return forward(self, idx)

    monkeypatch.setattr(DPFERMIClassifier, "_make_backend", spy_backend)
    monkeypatch.setattr(LinearBackend, "forward", spy_forward)
    monkeypatch.setattr("skdp.fairness.fermi._trainer._BLOCK_ROWS", 512)
    clf = _fit(DPFERMIClassifier(epsilon=1.0, random_state=0, max_steps=30), X, y,
               sensitive_features=g, silo_ids=silos)
    assert seen["data"] == [X.ctypes.data]
    assert max(seen["rows"]) <= max(512, 2 * clf.batch_size_.sum())


def test_rows_out_of_silo_order_train_the_model_of_sorted_rows():
    """Reading the rows through the silo index instead of reordering them
    trains the same model (the same records, batches and noise)."""
    X, y, g = _data(n=4000)
    silos = np.random.default_rng(2).integers(0, 3, len(y))
    order = np.argsort(silos, kind="stable")
    kw = {"epsilon": 1.0, "random_state": 4, "max_steps": 60}
    shuffled = _fit(DPFERMIClassifier(**kw), X, y, sensitive_features=g, silo_ids=silos)
    ordered = _fit(DPFERMIClassifier(**kw), X[order], y[order], sensitive_features=g[order],
                   silo_ids=silos[order])
    np.testing.assert_allclose(shuffled.coef_, ordered.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(shuffled.history_["loss"], ordered.history_["loss"], rtol=1e-5,
                               atol=1e-6)
    assert shuffled.epsilon_ == ordered.epsilon_


def test_a_silo_keeps_its_float_rows_as_given():
    X, y, g = _data(n=200)
    assert np.shares_memory(FermiSilo(X, y, g).X, X)
    wide = X.astype(np.float64)
    assert np.shares_memory(FermiSilo(wide, y, g).X, wide)
    wide[0, 0] = 1e300
    with pytest.raises(ValueError, match="too large for float32"):
        FermiSilo(wide, y, g)
    wide[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        FermiSilo(wide, y, g)


# ---------------------------------------------------------------- engines
@pytest.mark.parametrize("units", [False, True])
def test_engines_agree_across_chunks(monkeypatch, units):
    """With chunks of 3 rounds, the in-process per-silo pass and silos
    behind a transport give the same model bit for bit (the same code on
    the same draws), and the batched pass the same up to float rounding."""
    monkeypatch.setattr(protocol, "SAMPLING_CHUNK_ROUNDS", 3)
    X, y, g = _data(n=2400)
    silos = (np.arange(len(y)) // 2) % 3  # out of silo order; a unit's two records in one
    unit_ids = np.arange(len(y)) // 2 if units else None
    kw = {"epsilon": 1.0, "random_state": 7, "max_steps": 10}
    local = _fit(DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": False}}), X,
                 y,
                 sensitive_features=g, silo_ids=silos, unit_ids=unit_ids)
    batched = _fit(DPFERMIClassifier(**kw), X, y, sensitive_features=g, silo_ids=silos,
                   unit_ids=unit_ids)
    policy = SiloPolicy.permissive()
    remote = [FermiSilo(X[silos == j], y[silos == j], g[silos == j], silo=j, policy=policy,
                        unit_ids=None if unit_ids is None else unit_ids[silos == j])
              for j in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        federated = fit_federated(DPFERMIClassifier(**kw), DirectTransport(remote),
                                  classes=[0, 1], groups=[0, 1], n_features=X.shape[1])
    np.testing.assert_array_equal(local.coef_, federated.coef_)
    np.testing.assert_array_equal(local.history_["loss"], federated.history_["loss"])
    np.testing.assert_allclose(batched.coef_, local.coef_, rtol=1e-4, atol=1e-5)
    assert local.epsilon_ == federated.epsilon_ == batched.epsilon_
