"""Scale on one machine (issue 25): no copy of the training rows, fits on a
``numpy.memmap`` with batches gathered ahead, and blockwise scoring.

Equalities asserted exactly here hold by construction: the memmap and the
in-memory fit gather the same rows (an exact copy) and run the same
operations on them; prefetching changes when a batch is gathered, never
what is gathered or the order of the random draws.
"""

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import skdp._fit.rows as fit_rows
import skdp.models._rows as rows_module
from skdp import (
    DPDROClassifier,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp._training import DPSGDConfig, train_dpsgd
from skdp.datasets import make_fair_classification
from skdp.models import CrossEntropyHead, LinearBackend, ModuleBackend
from skdp.privacy import PoissonSampler, UnitSampler, bound_units
from skdp.robust._trainer import _AnchoredBatches


def _table(n=3000, d=6, seed=0):
    X, y, groups = make_fair_classification(n_samples=n, n_features=d, random_state=seed)
    return np.ascontiguousarray(X, dtype=np.float32), y, groups


@pytest.fixture
def memmap_table(tmp_path):
    X, y, groups = _table()
    path = tmp_path / "X.f32"
    writer = np.memmap(path, mode="w+", dtype=np.float32, shape=X.shape)
    writer[:] = X
    writer.flush()
    del writer
    return np.memmap(path, mode="r", dtype=np.float32, shape=X.shape), X, y, groups


# ---------------------------------------------------------------- no copies
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [torch.float32, torch.float64])
def test_to_tensor_views_a_c_contiguous_array(dtype, training, monkeypatch):
    monkeypatch.setattr(rows_module, "CONVERT_ONCE_BYTES", 0)  # a large table
    X = np.arange(60, dtype=dtype).reshape(20, 3) / 7
    X_t = DPSGDClassifier()._to_tensor(X, torch.device("cpu"), dtype=training)
    assert X_t.data.data_ptr() == X.ctypes.data
    assert X_t.dtype == training and X_t.shape == X.shape
    idx = torch.tensor([4, 0, 19])
    assert torch.equal(X_t.index_select(0, idx), torch.from_numpy(X[[4, 0, 19]]).to(training))
    assert torch.equal(X_t.block(3, 9), torch.from_numpy(X[3:9]).to(training))
    assert torch.equal(torch.cat(list(X_t.blocks(7))), torch.from_numpy(X).to(training))


def test_small_tables_in_another_dtype_are_converted_once(monkeypatch, tmp_path):
    X = np.arange(60, dtype=np.float64).reshape(20, 3) / 7
    monkeypatch.setattr(rows_module, "CONVERT_ONCE_BYTES", 20 * 3 * 4)
    X_t = DPSGDClassifier()._to_tensor(X, torch.device("cpu"))
    assert X_t.data.dtype == torch.float32 and torch.equal(X_t.data, torch.from_numpy(X).float())
    monkeypatch.setattr(rows_module, "CONVERT_ONCE_BYTES", 20 * 3 * 4 - 1)
    assert DPSGDClassifier()._to_tensor(X, torch.device("cpu")).data.dtype == torch.float64
    # rows read from a file are never copied into memory
    monkeypatch.setattr(rows_module, "CONVERT_ONCE_BYTES", 2**30)
    disk = np.memmap(tmp_path / "X.f64", mode="w+", dtype=np.float64, shape=X.shape)
    disk[:] = X
    X_t = DPSGDClassifier()._to_tensor(disk, torch.device("cpu"))
    assert X_t.data.data_ptr() == disk.ctypes.data and X_t.dtype == torch.float32


def test_to_tensor_views_a_read_only_memmap_without_warning(memmap_table):
    X, *_ = memmap_table
    assert not X.flags.writeable
    estimator = DPSGDClassifier()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X_t = estimator._to_tensor(X, torch.device("cpu"))
    assert X_t.data.data_ptr() == X.ctypes.data
    assert estimator._rows_on_disk
    in_memory = DPSGDClassifier()
    in_memory._to_tensor(np.array(X), torch.device("cpu"))
    assert not in_memory._rows_on_disk


def test_linear_backend_holds_no_copy_of_the_rows():
    X = torch.randn(500, 7)
    backend = LinearBackend(X, 3)
    idx = torch.arange(0, 500, 7)
    batch, logits_t = backend.forward(idx)
    backend.clipped_grad_sum(idx, batch, logits_t, CrossEntropyHead(),
                             (torch.ones(3, len(idx)) / 3,), 1.0)
    assert backend.rows.data is X
    held = [v for v in vars(backend).values() if torch.is_tensor(v) and v is not X]
    # the weights and one squared norm per row
    assert sorted(t.numel() for t in held) == [3 * 8, 500]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 49), max_size=20, unique=True))
def test_linear_batch_is_the_rows_with_a_bias_column(rows):
    X = torch.randn(50, 4, generator=torch.Generator().manual_seed(1))
    backend = LinearBackend(X, 2)
    idx = torch.tensor(sorted(rows), dtype=torch.long)
    batch, logits_t = backend.forward(idx)
    expected = torch.cat([X[idx], torch.ones(len(rows), 1)], dim=1)
    assert torch.equal(batch, expected)
    assert logits_t.shape == (2, len(rows))
    assert backend._row_sq_norms is None  # computed when a clipped sum needs them
    norms = backend._sq_norms.index_select(0, idx)
    torch.testing.assert_close(norms, X[idx].square().sum(1) + 1.0)


def test_step_loop_reuses_one_batch_tensor():
    X = torch.randn(400, 5)
    backend = LinearBackend(X, 2)
    batches = PoissonSampler(400, 0.1, torch.Generator().manual_seed(0)).batches(6)
    pointers = set()
    for idx in backend.feed(batches):
        batch, _ = backend.forward(idx)
        assert torch.equal(batch, torch.cat([X[idx], torch.ones(len(idx), 1)], dim=1))
        pointers.add(batch.data_ptr())
    assert len(pointers) <= 2  # grown at most once
    # outside a step loop every batch is a tensor of its own
    first, _ = backend.forward(torch.tensor([1, 2]))
    second, _ = backend.forward(torch.tensor([3, 4]))
    assert first.data_ptr() != second.data_ptr()
    assert torch.equal(first[:, :-1], X[1:3])


def test_linear_backend_on_a_column_view():
    # the bilevel solvers hand the backend a view that skips a column
    full = torch.randn(40, 6)
    backend = LinearBackend(full[:, :-1], 2)
    idx = torch.tensor([0, 3, 39])
    batch, _ = backend.forward(idx)
    assert torch.equal(batch[:, :-1], full[idx, :-1])


# ------------------------------------------------------ batches and prefetch
def test_drawn_draws_nothing_and_shows_what_comes_next():
    generator = torch.Generator().manual_seed(0)
    batches = PoissonSampler(1000, 0.05, generator, chunk_steps=4).batches(10)
    assert batches.drawn(3) == []  # nothing drawn before the first batch
    first = next(batches)
    state = generator.get_state()
    ahead = batches.drawn(5)
    assert torch.equal(generator.get_state(), state)
    assert len(ahead) == 3  # the rest of the first chunk of 4
    assert all(next(batches) is upcoming for upcoming in ahead)
    assert batches.drawn(2) == []  # the second chunk is drawn on demand only
    assert len([first, *ahead, *batches]) == 10


def test_batches_are_those_of_the_former_generator():
    # the same draws, in the same order, as drawing chunk by chunk
    n, q, steps = 2000, 0.03, 9
    sampler = PoissonSampler(n, q, torch.Generator().manual_seed(5), chunk_steps=4)
    reference = PoissonSampler(n, q, torch.Generator().manual_seed(5), chunk_steps=4)
    expected = [b for size in (4, 4, 1) for b in reference._chunk(size)]
    got = list(sampler.batches(steps))
    assert len(got) == steps
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_unit_batches_show_what_comes_next():
    generator = torch.Generator().manual_seed(0)
    units = bound_units(np.repeat(np.arange(50), 3), 50, 2, generator)
    batches = UnitSampler(units, 0.2, generator, chunk_steps=3).batches(6)
    next(batches)
    ahead = batches.drawn(4)
    assert len(ahead) == 2
    assert all(next(batches) is upcoming for upcoming in ahead)


def test_anchored_batches_show_the_next_batches_in_step_order():
    config = SimpleNamespace(n_steps=7, epoch_size=3, anchor_rate=0.2, diff_rate=0.05,
                             units=None)
    batches = _AnchoredBatches(200, config, torch.Generator().manual_seed(0))
    reference = _AnchoredBatches(200, config, torch.Generator().manual_seed(0))
    shown = 0
    for _ in range(config.n_steps):
        ahead = batches.drawn(4)
        idx = next(batches)
        assert torch.equal(idx, next(reference))
        if ahead:
            assert idx is ahead[0]
            shown += 1
    assert shown >= 2
    with pytest.raises(StopIteration):
        next(batches)


def _recording_fill_ahead(backend):
    """Record the batches ``backend`` fills on a background thread."""
    recorded, original = [], backend._fill_ahead

    def fill_ahead(idx, batch):
        recorded.append(idx)
        return original(idx, batch)

    backend._fill_ahead = fill_ahead
    return recorded


@pytest.mark.parametrize("make", [
    lambda X: LinearBackend(X, 2),
    lambda X: ModuleBackend(X, torch.nn.Sequential(torch.nn.Linear(X.shape[1], 4),
                                                   torch.nn.Tanh(), torch.nn.Linear(4, 2))),
])
def test_prefetching_gathers_ahead_and_changes_no_result(make):
    X, y, _ = _table(n=2000, d=5)
    X_t = torch.from_numpy(X)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(y), 2).float()
    config = DPSGDConfig(n_steps=40, sampling_rate=0.05, max_grad_norm=1.0,
                         noise_multiplier=1.0, averaging=0.5)
    results = []
    for prefetch in (0, 3):
        torch.manual_seed(0)
        backend = make(X_t)
        backend.prefetch = prefetch
        gathered_ahead = _recording_fill_ahead(backend)
        train_dpsgd(backend, onehot, config, torch.Generator().manual_seed(3))
        assert bool(gathered_ahead) == bool(prefetch)
        assert backend._pending is None
        results.append([p.clone() for p in backend.parameters])
    assert all(torch.equal(a, b) for a, b in zip(*results))


# ------------------------------------------------------------ memmap fits
def _fitted(estimator):
    names = ("coef_", "intercept_", "epsilon_", "n_steps_", "noise_multiplier_",
             "prediction_counts_", "check_log_loss_", "score_calibration_")
    return {k: getattr(estimator, k) for k in names if hasattr(estimator, k)}


def _assert_same_fit(a, b):
    fa, fb = _fitted(a), _fitted(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        assert np.array_equal(np.asarray(fa[key], dtype=float),
                              np.asarray(fb[key], dtype=float), equal_nan=True), key
    assert str(a.dp_event_) == str(b.dp_event_)


@pytest.mark.parametrize("make, labels", [
    (lambda: DPSGDClassifier(random_state=0, max_epochs=3), "y"),
    (lambda: DPSGDRegressor(random_state=0, max_epochs=3), "target"),
    (lambda: DPRateConstrainedClassifier(random_state=0, max_epochs=3), "groups"),
    (lambda: DPDROClassifier(random_state=0, max_epochs=3), "y"),
])
def test_memmap_fit_is_the_in_memory_fit(memmap_table, make, labels):
    X_disk, X, y, groups = memmap_table
    target = X[:, 0] - X[:, 1] if labels == "target" else y
    kwargs = {"sensitive_features": groups} if labels == "groups" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        on_disk = make().fit(X_disk, target, **kwargs)
        in_memory = make().fit(X, target, **kwargs)
    assert on_disk._rows_on_disk and not in_memory._rows_on_disk
    _assert_same_fit(on_disk, in_memory)
    assert np.array_equal(on_disk.predict(X_disk), in_memory.predict(X))


def test_float64_memmap_fit_is_the_in_memory_fit(tmp_path):
    # in memory the small float64 table is converted once; on disk each
    # gathered batch is converted: the same float32 rows either way
    X, y, _ = _table(n=2000, d=5)
    X = X.astype(np.float64) + np.random.default_rng(1).normal(scale=1e-5, size=X.shape)
    disk = np.memmap(tmp_path / "X.f64", mode="w+", dtype=np.float64, shape=X.shape)
    disk[:] = X
    disk.flush()
    on_disk = DPSGDClassifier(random_state=0, max_epochs=3).fit(disk, y)
    in_memory = DPSGDClassifier(random_state=0, max_epochs=3).fit(X, y)
    assert on_disk._rows_on_disk and not in_memory._rows_on_disk
    _assert_same_fit(on_disk, in_memory)


def test_memmap_fit_gathers_ahead(memmap_table, monkeypatch):
    X_disk, _, y, _ = memmap_table
    ahead = []
    original = LinearBackend._fill_ahead
    monkeypatch.setattr(LinearBackend, "_fill_ahead",
                        lambda self, idx, batch: ahead.append(idx) or original(self, idx, batch))
    DPSGDClassifier(random_state=0, max_epochs=2).fit(X_disk, y)
    assert ahead


# ---------------------------------------------------------- float64 tables
def _trained(estimator):
    """What training produced: the parameters and the privacy statistics
    (not the check and calibration, which score the rows as given)."""
    names = ("coef_", "intercept_", "W_", "n_steps_", "epsilon_", "noise_multiplier_")
    out = {k: np.asarray(getattr(estimator, k), dtype=float) for k in names
           if getattr(estimator, k, None) is not None}
    for key, value in (getattr(estimator, "module_state_", None) or {}).items():
        out["module_state_." + key] = np.asarray(value, dtype=float)
    out["dp_event_"] = str(estimator.dp_event_)
    return out


_FLOAT64_FITS = {
    "dpsgd": (lambda: DPSGDClassifier(random_state=0, max_epochs=2), {}),
    "mlp": (lambda: DPSGDClassifier(random_state=0, max_epochs=2, hidden_layer_sizes=(8,)), {}),
    "regressor": (lambda: DPSGDRegressor(random_state=0, max_epochs=2), {}),
    "raco": (lambda: DPRateConstrainedClassifier(random_state=0, max_epochs=2), {"groups": 1}),
    "dro": (lambda: DPDROClassifier(random_state=0, max_epochs=2), {}),
    "fermi": (lambda: DPFERMIClassifier(random_state=0, max_epochs=2), {"groups": 1}),
    "fermi_silos": (lambda: DPFERMIClassifier(random_state=0, max_epochs=2),
                    {"groups": 1, "silos": 3}),
}


def _fit_table(name, X, y, groups):
    make, how = _FLOAT64_FITS[name]
    target = np.asarray(y, dtype=float) if name == "regressor" else y
    kwargs = {}
    if how.get("groups"):
        kwargs["sensitive_features"] = groups
    if how.get("silos"):
        kwargs["silo_ids"] = np.arange(len(y)) % how["silos"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make().fit(X, target, **kwargs)


@pytest.mark.parametrize("name", sorted(_FLOAT64_FITS))
def test_float64_table_trains_as_its_float32_copy_without_one(name, monkeypatch):
    monkeypatch.setattr(rows_module, "CONVERT_ONCE_BYTES", 0)  # as a large table
    X, y, groups = _table(n=1500, d=5)
    X64 = X.astype(np.float64) + np.random.default_rng(0).normal(scale=1e-5, size=X.shape)
    if name == "regressor":
        y = X64[:, 0] - 0.5 * X64[:, 1]
    assert not np.array_equal(X64.astype(np.float32).astype(np.float64), X64)
    start, stop = X64.ctypes.data, X64.ctypes.data + X64.nbytes
    viewed = []
    for backend in (LinearBackend, ModuleBackend):
        original = backend.__init__

        def init(self, rows, *args, _original=original, **kwargs):
            _original(self, rows, *args, **kwargs)
            held = self.rows if isinstance(self, LinearBackend) else self.inputs
            viewed.append(start <= held.data.data_ptr() < stop and held.data.dtype == torch.float64)

        monkeypatch.setattr(backend, "__init__", init)
    from_float64 = _fit_table(name, X64, y, groups)
    assert viewed and all(viewed)  # every model read the float64 rows themselves
    from_float32 = _fit_table(name, X64.astype(np.float32), y, groups)
    got, expected = _trained(from_float64), _trained(from_float32)
    assert got.keys() == expected.keys()
    for key in got:  # float64 -> float32 rounds each value alone: the same batches
        assert np.array_equal(got[key], expected[key]) if key != "dp_event_" \
            else got[key] == expected[key], key


# ------------------------------------------------------- blockwise scoring
def test_check_and_calibration_in_blocks_are_exact(monkeypatch):
    # float64 rows: the scores are computed whole either way, so blocks only
    # split the per-record counts (integers) and the losses (summed whole)
    X, y, _ = _table(n=1500)
    X = X.astype(np.float64)
    whole = DPSGDClassifier(random_state=0, max_epochs=2).fit(X, y)
    monkeypatch.setattr(fit_rows, "SCORE_BLOCK", 97)
    blocks = DPSGDClassifier(random_state=0, max_epochs=2).fit(X, y)
    _assert_same_fit(whole, blocks)


def test_check_in_blocks_with_groups_and_many_classes(monkeypatch):
    X, _, groups = _table(n=1200)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    X = X.astype(np.float64)
    fit = {"sensitive_features": groups}
    # a budget at which 1,200 records are enough for the check of 3 classes
    whole = DPSGDClassifier(epsilon=50.0, random_state=1, max_epochs=2).fit(X, y, **fit)
    monkeypatch.setattr(fit_rows, "SCORE_BLOCK", 50)
    blocks = DPSGDClassifier(epsilon=50.0, random_state=1, max_epochs=2).fit(X, y, **fit)
    _assert_same_fit(whole, blocks)
    assert whole.prediction_counts_.shape == (len(whole.groups_), 3, 3)


def test_row_blocks_cover_every_row_once():
    for n in (0, 1, 96, 97, 98, 1000):
        covered = np.concatenate([np.arange(n)[rows] for rows in fit_rows.row_blocks(n)])
        assert np.array_equal(covered, np.arange(n))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_memmap_fit_on_cuda(memmap_table):
    # on a GPU the rows are copied to the device (no gathering from disk)
    X_disk, X, y, _ = memmap_table
    on_disk = DPSGDClassifier(random_state=0, max_epochs=2, device="cuda").fit(X_disk, y)
    in_memory = DPSGDClassifier(random_state=0, max_epochs=2, device="cuda").fit(X, y)
    assert on_disk.epsilon_ == in_memory.epsilon_
    assert on_disk.n_steps_ == in_memory.n_steps_
    np.testing.assert_allclose(on_disk.coef_, in_memory.coef_, rtol=1e-5, atol=1e-6)


def test_scores_and_row_norms_share_one_pass_with_the_same_values():
    """The model check's pass also gives the clipped share its row norms:
    the same float64 blocks, so the same values as a separate pass."""
    from skdp._fit.rows import PRODUCT_BLOCK, linear_scores, row_sq_norms

    rng = np.random.default_rng(0)
    for n in (100, PRODUCT_BLOCK + 1000):
        X = rng.normal(size=(n, 7)).astype(np.float32)
        coef, intercept = rng.normal(size=(7, 2)), rng.normal(size=2)
        norms = np.empty(n)
        scores = linear_scores(X, coef, intercept, row_norms=norms)
        assert np.array_equal(scores, linear_scores(X, coef, intercept))
        assert np.array_equal(norms, row_sq_norms(X))


def test_one_scoring_pass_after_training(monkeypatch):
    """Score calibration, model check and clipped share read the rows once
    after training; the check sees the calibrated model's scores."""
    from skdp._fit import classifier as fit_classifier
    from skdp._fit.checks import ModelCheck

    X, y, _ = _table(n=3000)
    X = X.astype(np.float32)
    passes, seen = [], []
    original_scores = fit_classifier.linear_scores
    monkeypatch.setattr(fit_classifier, "linear_scores",
                        lambda *a, **k: passes.append(1) or original_scores(*a, **k))
    original_apply = ModelCheck.apply

    def spy(self, estimator, X, state, report, generator):
        seen.append(state.returned_scores)
        return original_apply(self, estimator, X, state, report, generator)

    monkeypatch.setattr(ModelCheck, "apply", spy)
    # a budget at which 3,000 records are enough for the calibration
    model = DPSGDClassifier(epsilon=30.0, random_state=0, max_epochs=2).fit(X, y)
    assert model.score_calibration_ is not None and model.clipped_share_ is not None
    assert model.prediction_counts_ is not None
    assert len(passes) == 1
    np.testing.assert_allclose(seen[0], model.decision_function(X), rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-800.0, 800.0), min_size=1, max_size=30), st.randoms())
def test_binary_gradient_norms_are_those_of_the_softmax(scores, random):
    from skdp._fit.checks import ClippedShare

    scores = np.array(scores)
    y = np.array([random.randint(0, 1) for _ in scores])
    logits = np.column_stack([np.zeros(len(scores)), scores])
    logits -= logits.max(1, keepdims=True)
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    proba[np.arange(len(y)), y] -= 1.0
    # the softmax's p_y - 1 cancels for large scores (absolute error ~1e-16);
    # the closed form does not
    np.testing.assert_allclose(ClippedShare._output_sq_norms(scores, y),
                               (proba**2).sum(1), rtol=1e-9, atol=1e-14)
