"""Privacy units (``unit_ids``): contribution bounding, unit sampling, the
report, routing, and the errors of estimators that do not support them."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import sklearn
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

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
from skdp._fit.calibration import calibration_counts
from skdp._fit.checks import ModelCheck
from skdp._fit.releases import target_histogram as _target_histogram
from skdp._fit.state import FitState
from skdp.exceptions import UnitPrivacyNotAvailableError
from skdp.fairness.raco._trainer import RateConstrainedHead, batch_histogram
from skdp.model_selection import PrivateGridSearchCV
from skdp.models import CrossEntropyHead, make_backend
from skdp.preprocessing import DPMinMaxScaler, DPOneHotEncoder, DPStandardScaler
from skdp.model_selection import spent
from skdp.privacy import (
    LocalCommunicator,
    UnitSampler,
    bound_units,
    compute_epsilon,
    make_sampler,
    weigh,
)
from skdp.privacy._clipping import clip_factors
from skdp.robust._divergences import make_divergence
from skdp.robust._losses import CrossEntropyLoss
from skdp.robust._trainer import _clip_scalar, _Problem

FAST = {"max_steps": 30, "random_state": 0}


def _data(n=600, n_units=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    units = rng.integers(0, n_units, n)
    return X, y, units


# ------------------------------------------------ contribution bounding
@st.composite
def panels(draw):
    """Units with 1..300 records (far above k), extreme features, a k, and
    the unit to add or remove."""
    sizes = draw(st.lists(st.integers(1, 300), min_size=2, max_size=5))
    k = draw(st.sampled_from([1, 2, 5]))
    scale = draw(st.sampled_from([1.0, 1e3, 1e12]))
    seed = draw(st.integers(0, 2**16))
    removed = draw(st.integers(0, len(sizes) - 1))
    return sizes, k, scale, seed, removed


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = _data()
    return DPSGDClassifier(epsilon=None, max_steps=20, random_state=0).fit(X, y)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(panels())
def test_one_unit_moves_every_release_by_at_most_its_sensitivity(fitted, panel):
    sizes, k, scale, seed, removed = panel
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    n = len(codes)
    X = rng.normal(size=(n, 3)) * scale
    y = rng.integers(0, 2, n)
    units = bound_units(codes, len(sizes), k, torch.Generator().manual_seed(seed))
    factors = units.factors
    # every unit's factors sum to 1, over at most k records
    assert np.allclose(np.bincount(codes, weights=factors), 1.0)
    assert np.bincount(codes, weights=units.kept).max() <= k
    present = codes != removed  # the neighbour without the unit (others' subsets unchanged)

    # the clipped, weighted gradient sum of a step that samples every unit
    C = 1.5
    backend = make_backend(torch.as_tensor(X, dtype=torch.float32), 2, None)
    with torch.no_grad():
        backend.weights.normal_(generator=torch.Generator().manual_seed(seed))
    backend.record_weights = torch.as_tensor(factors, dtype=torch.float32)
    onehot_t = torch.nn.functional.one_hot(torch.as_tensor(y), 2).float().T

    def grad_sum(idx):
        idx = torch.as_tensor(idx, dtype=torch.int64)
        batch, logits = backend.forward(idx)
        sums, _ = backend.clipped_grad_sum(idx, batch, logits, CrossEntropyHead(),
                                           (onehot_t.index_select(1, idx),), C)
        return torch.cat([s.reshape(-1) for s in sums]).double()

    kept = np.flatnonzero(units.kept)
    diff = grad_sum(kept) - grad_sum(kept[present[kept]])
    assert float(diff.norm()) <= C * (1 + 1e-4)

    # the model check: weighted (group, true, predicted) counts and loss sum
    captured = {}
    check = fitted
    original = check._judge_model
    check._judge_model = lambda loss_sum, std: captured.setdefault("loss", []).append(loss_sum)
    try:
        for mask in (np.ones(n, bool), present):
            sub = FitState(y_codes=y[mask], units=SimpleNamespace(factors=factors[mask]))
            report = SimpleNamespace(private=False, noise={})
            ModelCheck().apply(check, X[mask], sub, report, None)
            captured.setdefault("counts", []).append(check.prediction_counts_.ravel().copy())
    finally:
        check._judge_model = original
    counts_diff = captured["counts"][0] - captured["counts"][1]
    loss_diff = (captured["loss"][0] - captured["loss"][1]) / 10.0  # divided by the loss bound
    assert math.hypot(np.linalg.norm(counts_diff), loss_diff) <= math.sqrt(2) * (1 + 1e-9)

    # the calibration counts and the regressors' target-scale histogram
    scores = X[:, 0]
    cal = calibration_counts(scores, y, factors) - calibration_counts(
        scores[present], y[present], factors[present])
    assert np.linalg.norm(cal) <= 1 + 1e-9
    target = X[:, 1]
    hist = _target_histogram(target, factors) - _target_histogram(target[present], factors[present])
    assert np.linalg.norm(hist) <= 1 + 1e-9


def test_subset_is_random_and_independent_of_values():
    codes = np.zeros(100, np.int64)
    picks = np.zeros(100)
    for seed in range(200):
        picks += bound_units(codes, 1, 10, torch.Generator().manual_seed(seed)).kept
    # each record is kept with probability k / |u| = 0.1
    assert abs(picks.mean() / 200 - 0.1) < 1e-12
    assert picks.min() > 0 and picks.max() < 60


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**62 - 1), st.integers(0, 2**62 - 1), st.integers(0, 200),
       st.integers(0, 50))
def test_counter_stream_values_depend_on_the_key_and_index_only(first, second, start, count):
    from skdp.privacy import counter_uniforms

    key = torch.tensor([first, second])
    whole = counter_uniforms(key, 0, start + count)
    part = counter_uniforms(key, start, count)
    assert np.array_equal(part, whole[start:])
    assert ((part >= 0) & (part < 1)).all()


class _ShardOf(LocalCommunicator):
    """One rank's view of the rows ``offset .. offset + n_rows - 1``, which
    must not receive the other rows' keys."""

    def __init__(self, offset):
        self.offset = offset

    def draw_rows(self, draw, n_rows):
        raise AssertionError("a seeded fit derives its records' keys; nothing is sent")


def test_each_rank_derives_the_keys_of_its_own_records():
    from skdp.privacy import record_keys, using_communicator

    whole = record_keys(1000, torch.Generator().manual_seed(3))
    for offset, size in ((0, 400), (400, 350), (750, 250)):
        with using_communicator(_ShardOf(offset)):
            mine = record_keys(size, torch.Generator().manual_seed(3))
        assert np.array_equal(mine, whole[offset:offset + size])
    # the keys are uniform: a chi-square over 10 bins of 20,000 keys
    keys = record_keys(20_000, torch.Generator().manual_seed(4))
    counts = np.bincount((keys * 10).astype(int), minlength=10)
    assert ((counts - 2000.0) ** 2 / 2000.0).sum() < 27.9  # 0.999 quantile, 9 dof


def test_a_secure_generator_draws_every_key():
    from skdp.privacy import SecureGenerator, record_keys

    keys = record_keys(5000, SecureGenerator())
    assert keys.shape == (5000,) and len(np.unique(keys)) == 5000
    assert ((keys > 0) & (keys <= 1)).all()


# ---------------------------------------------------------------- sampler
def test_unit_sampler_keeps_units_together_and_samples_at_rate_q():
    rng = np.random.default_rng(0)
    n_units, q, steps = 400, 0.1, 300
    codes = np.repeat(np.arange(n_units), rng.integers(1, 20, n_units))
    rng.shuffle(codes)
    units = bound_units(codes, n_units, 4, torch.Generator().manual_seed(0))
    sampler = UnitSampler(units, q, torch.Generator().manual_seed(1), chunk_steps=64)
    assert sampler.expected_batch == pytest.approx(q * n_units)
    kept_count = np.bincount(codes[units.kept], minlength=n_units)
    inclusions = np.zeros(n_units)
    n_batches = 0
    for idx in sampler.batches(steps):
        idx = idx.numpy()
        n_batches += 1
        assert units.kept[idx].all()  # only kept records
        assert len(np.unique(idx)) == len(idx)
        present = np.bincount(codes[idx], minlength=n_units)
        sampled = present > 0
        # a sampled unit brings all its kept records
        assert np.array_equal(present[sampled], kept_count[sampled])
        inclusions += sampled
    assert n_batches == steps
    rate = inclusions / steps
    assert abs(rate.mean() - q) < 0.005
    assert abs(inclusions.sum() / steps - q * n_units) < 2.0


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 12), min_size=3, max_size=40), data=st.data())
def test_a_shard_of_unit_ranges_bounds_and_expands_its_own_units(sizes, data):
    """Rows sorted by unit and cut at unit boundaries: each shard's bounds
    and record batches (from the global unit draws) are the slices of the
    whole, with arrays as long as the shard's own units."""
    from skdp.privacy import using_communicator

    n_units = len(sizes)
    codes = np.repeat(np.arange(n_units), sizes)
    whole = bound_units(codes, n_units, 3, torch.Generator().manual_seed(7))
    whole_sampler = UnitSampler(whole, 0.3, torch.Generator().manual_seed(8))
    drawn, counts = whole_sampler.units._flat_chunk(20)
    batches = whole_sampler.expand(drawn, counts)
    cut = data.draw(st.integers(1, n_units - 1))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for lo, hi in ((0, cut), (cut, n_units)):
        rows = slice(starts[lo], starts[hi])
        with using_communicator(_ShardOf(int(starts[lo]))):
            mine = bound_units(codes[rows], n_units, 3, torch.Generator().manual_seed(7))
        np.testing.assert_array_equal(mine.kept, whole.kept[rows])
        np.testing.assert_array_equal(mine.factors, whole.factors[rows])
        sampler = UnitSampler(mine, 0.3, torch.Generator().manual_seed(8))
        assert sampler.sizes.numel() == hi - lo
        for local, full in zip(sampler.expand(drawn, counts), batches):
            inside = full[(full >= starts[lo]) & (full < starts[hi])]
            np.testing.assert_array_equal(local.numpy() + starts[lo], inside.numpy())


def test_make_sampler_factory():
    g = torch.Generator().manual_seed(0)
    sampler, expected = make_sampler(100, 0.2, g)
    assert type(sampler).__name__ == "PoissonSampler" and expected == pytest.approx(20.0)
    units = bound_units(np.arange(100) % 10, 10, 3, g)
    sampler, expected = make_sampler(100, 0.2, g, units)
    assert isinstance(sampler, UnitSampler) and expected == pytest.approx(2.0)


# ----------------------------------------------------------- estimators
@pytest.mark.parametrize("Estimator", [DPSGDClassifier, DPSGDRegressor])
def test_epsilon_from_event_and_report_names_the_unit(Estimator):
    X, y, units = _data()
    est = Estimator(epsilon=2.0, max_records_per_unit=4, **FAST).fit(X, y, unit_ids=units)
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.dp_event_, est.delta_, "pld"))
    assert est.epsilon_ <= 2.0
    assert est.n_units_ == 60
    assert est.privacy_report_.privacy_unit == "unit (max_records_per_unit=4)"
    assert "one unit (max_records_per_unit=4) with all its records" in est.privacy_report_.summary()
    # "auto" batch size and the rate are over units
    assert est.sampling_rate_ == pytest.approx(est.batch_size_ / 60, rel=0.05)


def test_without_unit_ids_nothing_changes():
    X, y, _ = _data()
    a = DPSGDClassifier(**FAST).fit(X, y)
    b = DPSGDClassifier(max_records_per_unit=1, **FAST).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_) and a.epsilon_ == b.epsilon_
    assert a.privacy_report_.privacy_unit == "record" and a.n_units_ is None
    assert "add or remove one record" in a.privacy_report_.summary()


def test_singleton_units_spend_like_records():
    X, y, _ = _data()
    a = DPSGDClassifier(**FAST).fit(X, y)
    b = DPSGDClassifier(**FAST).fit(X, y, unit_ids=np.arange(len(y)))
    assert a.noise_multiplier_ == b.noise_multiplier_ and a.epsilon_ == b.epsilon_
    assert a.sampling_rate_ == b.sampling_rate_


def test_unit_fit_is_reproducible_and_learns():
    X, y, units = _data(n=2000, n_units=400)
    a = DPSGDClassifier(epsilon=8.0, random_state=0).fit(X, y, unit_ids=units)
    b = DPSGDClassifier(epsilon=8.0, random_state=0).fit(X, y, unit_ids=units)
    assert np.array_equal(a.coef_, b.coef_)
    assert a.score(X, y) > 0.75


def test_warm_start_composes_unit_level_fits():
    X, y, units = _data()
    est = DPSGDClassifier(warm_start=True, **FAST).fit(X, y, unit_ids=units)
    est.fit(X, y, unit_ids=units)
    assert est.privacy_report_.privacy_unit.startswith("unit")
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.dp_event_, est.delta_, "pld"))


def test_balanced_class_weights_with_units():
    X, y, units = _data()
    est = DPSGDClassifier(class_weight="balanced", **FAST).fit(X, y, unit_ids=units)
    assert est.epsilon_ <= 1.0 and np.all(est.class_weight_ > 0)


def test_routing_on_pipeline_and_search():
    X, y, units = _data()
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = Pipeline([("scale", StandardScaler()), ("clf", DPSGDClassifier(**FAST))])
        pipe.fit(X, y, unit_ids=units)
        assert pipe[-1].n_units_ == 60
        search = GridSearchCV(DPSGDClassifier(**FAST), {"max_records_per_unit": [1, 4]}, cv=2)
        search.fit(X, y, unit_ids=units)
        assert search.best_estimator_.n_units_ == 60
        reg = Pipeline([("scale", StandardScaler()), ("reg", DPSGDRegressor(**FAST))])
        reg.fit(X, X[:, 0], unit_ids=units)
        assert reg[-1].n_units_ == 60
        # a private preprocessing step bounds the same units: one unit for
        # the whole pipeline
        pipe = Pipeline([("scale", DPStandardScaler(bounds=(-5, 5))),
                         ("clf", DPSGDClassifier(**FAST))])
        pipe.fit(X, y, unit_ids=units)
        assert pipe[0].n_units_ == pipe[1].n_units_ == 60
        assert spent(pipe).privacy_unit.startswith("unit")


@pytest.mark.parametrize("column", ["person", 1])
def test_routing_off_unit_column(column):
    X, y, units = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame.insert(1, "person", units)
    est = DPSGDClassifier(unit_column=column, **FAST).fit(frame, y)
    assert est.n_units_ == 60 and est.n_features_in_ == 3
    without = frame.drop(columns="person")
    if isinstance(column, str):
        assert list(est.feature_names_in_) == ["a", "b", "c"]
        assert np.array_equal(est.predict(frame), est.predict(without))
    else:
        assert np.array_equal(est.predict(frame.to_numpy()), est.predict(without.to_numpy()))
    reg = DPSGDRegressor(unit_column=column, **FAST).fit(frame, X[:, 0])
    assert reg.n_units_ == 60
    # with sensitive columns too (positions of the original X)
    both = DPSGDClassifier(unit_column=1, sensitive_columns=3, **FAST).fit(frame.to_numpy(), y)
    assert both.n_features_in_ == 2 and both.n_units_ == 60


# ------------------------------------- RaCO and DRO: a unit's contribution
def _unit_panel(panel):
    """Codes, features, labels and bounds of a hypothesis panel, and the
    record indices of a batch with every unit and of one without ``removed``."""
    sizes, k, scale, seed, removed = panel
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(len(sizes)), sizes)
    n = len(codes)
    X = rng.normal(size=(n, 3)) * scale
    y = rng.integers(0, 2, n)
    units = bound_units(codes, len(sizes), k, torch.Generator().manual_seed(seed))
    kept = np.flatnonzero(units.kept)
    without = kept[codes[kept] != removed]
    backend = make_backend(torch.as_tensor(X, dtype=torch.float32), 2, None)
    with torch.no_grad():
        backend.weights.normal_(generator=torch.Generator().manual_seed(seed))
    backend.record_weights = torch.as_tensor(units.factors, dtype=torch.float32)
    return rng, X, y, units, backend, [torch.as_tensor(i, dtype=torch.int64)
                                       for i in (kept, without)]


@settings(max_examples=15, deadline=None)
@given(panels(), st.sampled_from(["hard", "soft"]))
def test_raco_one_unit_moves_every_release_by_at_most_its_sensitivity(panel, dual_rates):
    """Every release of a RaCO-DP step (histogram, cell counts, clipped
    count, clipped gradient sum of the Lagrangian) and the one-off cell
    sizes move by at most one record's sensitivity when a whole unit goes."""
    rng, _, y, _, backend, batches = _unit_panel(panel)
    n, n_cells, C = len(y), 3, 2.0
    cells = torch.as_tensor(rng.integers(0, n_cells + 1, n))  # cell n_cells: no constraint
    onehot_t = torch.nn.functional.one_hot(torch.as_tensor(y), 2).float().T
    cells_all_t = torch.nn.functional.one_hot(cells, n_cells + 1).float().T
    dual = torch.as_tensor(rng.normal(size=(n_cells, 2)) * 5, dtype=torch.float32)
    head = RateConstrainedHead(2.0, 3.0)
    out = []
    for idx in batches:
        batch, logits_t = backend.forward(idx)
        cells_t = cells_all_t.index_select(1, idx)
        w = backend.batch_weights(idx)
        cells_w = weigh(cells_t, w)
        hist = batch_histogram(logits_t, cells_w, dual_rates, 2.0)
        counts = cells_w.sum(1)
        weights_t = dual.T @ cells_t[:n_cells]
        sums, sq = backend.clipped_grad_sum(idx, batch, logits_t, head,
                                            (onehot_t.index_select(1, idx), weights_t), C)
        clipped = weigh((sq > C * C).float(), w).sum()
        sizes = torch.bincount(cells.index_select(0, idx), weights=w.double(),
                               minlength=n_cells + 1)  # as _expected_sizes, before q
        out.append((hist, counts, torch.cat([s.reshape(-1) for s in sums]).double(),
                    clipped, sizes))
    (h0, c0, g0, k0, s0), (h1, c1, g1, k1, s1) = out
    tol = 1 + 1e-5
    assert float((h0 - h1).abs().sum()) <= tol  # l1: Gaussian and Laplace histograms
    assert float((c0 - c1).abs().sum()) <= tol
    assert float((g0 - g1).norm()) <= C * (1 + 1e-4)
    assert abs(float(k0 - k1)) <= tol
    assert float((s0 - s1).abs().sum()) <= tol


@settings(max_examples=15, deadline=None)
@given(panels(), st.sampled_from(["chi2", "kl", "cressie_read"]))
def test_dro_one_unit_moves_every_release_by_at_most_its_sensitivity(panel, divergence):
    """The x statistic (weights up to W), the dual statistics of the three
    algorithms, anchors and differences, move by at most their bounds when a
    whole unit goes."""
    rng, _, y, units, backend, batches = _unit_panel(panel)
    B, lam, C, c_d, clip_x = 3.0, 0.5, 1.5, 1.0, 0.7
    div = make_divergence(divergence, alpha=0.2, k=2.0, max_ratio=10.0)
    W = max(1.0, float(div.weight(torch.tensor(B / lam, dtype=torch.float64))))
    targets = torch.nn.functional.one_hot(torch.as_tensor(y), 2).float()
    problem = _Problem(backend, CrossEntropyLoss(), targets,
                       SimpleNamespace(loss_bound=B, units=units))
    prev = [p + 0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1))
            for p in backend.parameters]
    eta = torch.tensor(float(rng.uniform(0, B)), dtype=torch.float64)
    out = []
    for idx in batches:
        batch, out_t, tgt = problem.batch(idx)
        lt = problem.capped_losses(out_t, tgt)
        prev_lt = problem.capped_losses(backend.forward_at(batch, prev), tgt)
        a = problem.record_weights(idx)
        w = div.weight((lt - eta) / lam)
        w_prev = div.weight((prev_lt - eta) / lam)
        gt = torch.exp((lt - B) / lam)
        stats = {
            "x": problem.grad_sum(idx, batch, out_t, tgt, w, C),
            "x_diff": problem.diff_sum(idx, batch, prev, out_t, backend.forward_at(batch, prev),
                                       tgt, w, w_prev, torch.tensor(clip_x), C),
            "eta": weigh(_clip_scalar(1.0 - w, c_d), a).sum(),
            "s": weigh(gt, a).sum(),
            "u": weigh(_clip_scalar((B - lt) * gt, c_d), a).sum(),
        }
        r = (lt - eta) / lam
        d_eta, d_lam = 1.0 - w, div.conjugate(r) - r * w
        factors = weigh(clip_factors((d_eta.square() + d_lam.square()), c_d).double(), a)
        stats["dual"] = torch.stack([(d_eta * factors).sum(), (d_lam * factors).sum()])
        out.append({k: (torch.cat([t.reshape(-1) for t in v]) if isinstance(v, (list, tuple))
                        else v.reshape(-1)).double() for k, v in stats.items()})
    bounds = {"x": W * C, "x_diff": clip_x, "eta": c_d, "s": 1.0, "u": c_d, "dual": c_d}
    for name, bound in bounds.items():
        moved = float((out[0][name] - out[1][name]).norm())
        assert moved <= bound * (1 + 1e-4), (name, moved, bound)


def _fit_kwargs(Estimator, X, y):
    """Labels and fit arguments of a quick fit of each estimator."""
    if Estimator is DPRateConstrainedClassifier:
        return y, {"sensitive_features": (X[:, 1] > 0).astype(int)}
    if Estimator in (DPDRORegressor, DPSGDRegressor):
        return X[:, 0], {}
    return y, {}


UNIT_ESTIMATORS = [DPRateConstrainedClassifier, DPDROClassifier, DPDRORegressor]


@pytest.mark.parametrize("Estimator", UNIT_ESTIMATORS)
def test_more_estimators_account_for_units(Estimator):
    X, y, units = _data()
    target, kwargs = _fit_kwargs(Estimator, X, y)
    est = Estimator(epsilon=2.0, max_records_per_unit=4, **FAST).fit(
        X, target, unit_ids=units, **kwargs)
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.dp_event_, est.delta_, "pld"))
    assert est.epsilon_ <= 2.0
    assert est.n_units_ == 60
    assert est.privacy_report_.privacy_unit == "unit (max_records_per_unit=4)"
    assert "one unit (max_records_per_unit=4) with all its records" in est.privacy_report_.summary()
    assert est.sampling_rate_ == pytest.approx(est.batch_size_ / 60, rel=0.05)
    plain = Estimator(epsilon=2.0, **FAST).fit(X, target, **kwargs)
    assert plain.n_units_ is None and plain.privacy_report_.privacy_unit == "record"


@pytest.mark.parametrize("Estimator", UNIT_ESTIMATORS)
def test_more_estimators_singleton_units_spend_like_records(Estimator):
    X, y, _ = _data()
    target, kwargs = _fit_kwargs(Estimator, X, y)
    a = Estimator(**FAST).fit(X, target, **kwargs)
    b = Estimator(**FAST).fit(X, target, unit_ids=np.arange(len(y)), **kwargs)
    assert a.epsilon_ == b.epsilon_ and a.sampling_rate_ == b.sampling_rate_
    assert a.privacy_report_.noise == b.privacy_report_.noise
    if Estimator is DPRateConstrainedClassifier:
        # one record per unit, factor 1: the same one-off cell sizes
        assert np.allclose(a.expected_sizes_, b.expected_sizes_, rtol=0.5, atol=5.0)


@pytest.mark.parametrize("settings_", [
    {"solver_options": {"algorithm": "double_spider"}},
    {"solver_options": {"algorithm": "recursive_spider"}, "divergence": "kl"},
    {"solver_options": {"algorithm": "dp_sgd"}, "rho": 0.5, "divergence": "kl"},
    {"solver_options": {"anchor_batch_size": "full", "algorithm": "double_spider"}},
], ids=["double", "recursive", "dual_sgd_constrained", "full_anchors"])
def test_dro_algorithms_with_units(settings_):
    X, y, units = _data()
    est = DPDROClassifier(max_records_per_unit=3, **settings_, **FAST).fit(X, y, unit_ids=units)
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.dp_event_, est.delta_, "pld"))
    assert est.epsilon_ <= 1.0 and est.n_units_ == 60
    full = settings_["solver_options"].get("anchor_batch_size") == "full"
    if est.anchor_sampling_rate_ is not None and full:
        assert est.anchor_sampling_rate_ == 1.0 and est.anchor_batch_size_ == 60


@pytest.mark.parametrize("denominator", ["histogram", "separate_noisy", "expected"])
def test_raco_denominators_with_units(denominator):
    X, y, units = _data()
    s = (X[:, 1] > 0).astype(int)
    est = DPRateConstrainedClassifier(max_records_per_unit=2, **FAST,
                                      solver_options={"denominator": denominator}).fit(X, y, sensitive_features=s, unit_ids=units)
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.dp_event_, est.delta_, "pld"))
    assert est.privacy_report_.privacy_unit.startswith("unit")
    if denominator == "expected":
        # weighted cell sizes: every unit counts at most once in all cells together
        assert est.expected_sizes_.shape[0] > 0


def test_more_estimators_unit_column_and_routing():
    X, y, units = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame.insert(1, "person", units)
    s = (X[:, 1] > 0).astype(int)
    raco = DPRateConstrainedClassifier(unit_column="person", **FAST).fit(
        frame, y, sensitive_features=s)
    assert raco.n_units_ == 60 and raco.n_features_in_ == 3
    assert np.array_equal(raco.predict(frame), raco.predict(frame.drop(columns="person")))
    reg = DPDRORegressor(unit_column=1, **FAST).fit(frame.to_numpy(), X[:, 0])
    assert reg.n_units_ == 60 and reg.n_features_in_ == 3
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = Pipeline([("scale", StandardScaler()), ("reg", DPDRORegressor(**FAST))])
        pipe.fit(X, X[:, 0], unit_ids=units)
        assert pipe[-1].n_units_ == 60
        pipe = Pipeline([("scale", StandardScaler()), ("clf", DPDROClassifier(**FAST))])
        pipe.fit(X, y, unit_ids=units)
        assert pipe[-1].n_units_ == 60


def test_clear_errors():
    X, y, units = _data()
    with pytest.raises(ValueError, match="unit_ids"):
        DPSGDClassifier(**FAST).fit(X, y, unit_ids=units[:-1])
    bad = units.astype(float)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="unit_ids"):
        DPSGDClassifier(**FAST).fit(X, y, unit_ids=bad)
    with pytest.raises(ValueError, match="max_records_per_unit"):
        DPSGDClassifier(max_records_per_unit=0, **FAST).fit(X, y, unit_ids=units)
    with pytest.raises(ValueError, match="unit_column"):
        DPSGDClassifier(unit_column="nope", **FAST).fit(pd.DataFrame(X, columns=list("abc")), y)


@pytest.mark.parametrize("make", [
    lambda: (DPFERMIClassifier(**FAST), "clf"),
    lambda: (DPBilevelLogisticRegression(random_state=0), "clf"),
    lambda: (DPBilevelRidge(random_state=0), "reg"),
    lambda: (DPStandardScaler(random_state=0), "X"),
    lambda: (DPMinMaxScaler(random_state=0), "X"),
    lambda: (DPOneHotEncoder(random_state=0), "X"),
], ids=lambda make: type(make()[0]).__name__)
def test_every_other_estimator_takes_unit_ids(make):
    """The estimators and steps with their own test files for units
    (tests/test_units_*.py) account for units through the same report."""
    X, y, units = _data()
    est, kind = make()
    if kind == "X":
        est.fit(np.round(X) if isinstance(est, DPOneHotEncoder) else X, unit_ids=units)
    else:
        kwargs = {"sensitive_features": (X[:, 1] > 0).astype(int)} \
            if isinstance(est, DPFERMIClassifier) else {}
        est.fit(X, y if kind == "clf" else X[:, 0], unit_ids=units, **kwargs)
    assert est.n_units_ == 60
    assert est.privacy_report_.privacy_unit.startswith("unit")
    # (the encoder's delta_ adds its stability threshold's to the report's)
    delta = est.privacy_report_.delta
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.dp_event_, delta, "pld"), rel=1e-6)


def test_private_search_takes_unit_ids():
    X, y, units = _data()
    search = PrivateGridSearchCV(DPSGDClassifier(**FAST), {"max_records_per_unit": [1, 4]},
                                 random_state=0)
    search.fit(X, y, unit_ids=units)
    assert search.n_units_ == 60 and search.best_estimator_.n_units_ == 60
    assert search.privacy_report_.privacy_unit.startswith("unit")
    assert issubclass(UnitPrivacyNotAvailableError, ValueError)