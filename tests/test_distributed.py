"""Data-parallel training (skdp.distributed): 2 gloo processes on 127.0.0.1
against the single-process fit of the same data and seed."""

import itertools
import multiprocessing
import pickle
import time
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification, make_regression

from skdp import (
    DPBilevelRidge,
    DPDROClassifier,
    DPDRORegressor,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp.datasets import make_fair_classification
from skdp.distributed import (
    TorchCommunicator,
    fit_data_parallel,
    launch,
    run_ranks,
    supported_estimators,
)
from skdp.privacy import LocalCommunicator, PoissonSampler

pytestmark = pytest.mark.skipif(not torch.distributed.is_available()
                                or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo is needed")

N_RANKS = 2


# ------------------------------------------------------------ rank side
def _sampled_batches(n_rows, seed, rate, n_steps):
    """Every rank's batches of a sharded sampler, in global row indices
    (on rank 0; None elsewhere)."""
    comm = TorchCommunicator(n_rows)
    sampler = PoissonSampler(comm.n_total, rate, torch.Generator().manual_seed(seed),
                             chunk_steps=7)
    local = [b + comm.offset for b in comm.shard(sampler).batches(n_steps)]
    gathered = comm.gather_objects(local)
    return gathered if comm.is_root else None


def _fit(estimator, X, y, fit_params):
    return fit_data_parallel(estimator, X, y, **fit_params)


def _models_of_every_rank(estimator, X, y):
    """Fit, then gather every rank's fitted parameters (on every rank)."""
    fitted = fit_data_parallel(estimator, X, y)
    out = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, fitted.module_state_)
    return out


def _refused(estimator, X, y, fit_params=None):
    """The message of the ValueError that fit_data_parallel raises, or None."""
    try:
        fit_data_parallel(estimator, X, y, **(fit_params or {}))
    except ValueError as exc:
        return str(exc)
    return None


def _unit_numbering(ids):
    """Every rank's unit codes among all ids (in rank order), the number of
    units, and whether the ranks had to share their lists of ids."""
    from skdp._fit.units import unit_codes
    from skdp.privacy import using_communicator

    comm = TorchCommunicator(len(ids))
    shared = []
    union = comm.union
    comm.union = lambda labels: shared.append(True) or union(labels)
    with using_communicator(comm):
        codes, n_units = unit_codes(ids, len(ids))
    return np.concatenate(comm.gather_objects(codes)), n_units, bool(shared)


def _rank_jobs(jobs):
    """Run the jobs of one rank in order; rank 0 returns their results."""
    results = [globals()[name](*args) for name, args in jobs]
    return results if torch.distributed.get_rank() == 0 else None


def _fail_or_wait(rank):
    """Rank 1 fails at once; rank 0 would wait for a minute."""
    if rank == 1:
        raise ValueError("rank 1 refuses its shard")
    time.sleep(60)


# ------------------------------------------------------------ data
def _classification():
    X, y = make_classification(n_samples=4000, n_features=6, n_informative=4, random_state=0)
    return X.astype(np.float32), y


def _regression():
    X, y = make_regression(n_samples=1200, n_features=5, noise=5.0, random_state=1)
    return X.astype(np.float32), y


def _halves(*arrays):
    """The contiguous row blocks of each rank (as the launcher cuts them)."""
    n = len(arrays[0])
    bounds = np.linspace(0, n, N_RANKS + 1).round().astype(int)
    return [tuple(a[lo:hi] for a in arrays) for lo, hi in itertools.pairwise(bounds)]


def _classifier(**params):
    return DPSGDClassifier(epsilon=1.0, batch_size=200, max_epochs=5, random_state=0, **params)


def _regressor():
    return DPSGDRegressor(epsilon=1.0, batch_size=80, max_epochs=3, random_state=0)


def _sorted_by_label():
    """Rank 0 (the first half) sees only class 1."""
    X, y = _classification()
    order = np.argsort(-y, kind="stable")
    return X[order], y[order]


def _one_group_on_rank_0():
    """Groups "a" and "b", with "b" only in the last quarter (rank 1)."""
    X, y = _classification()
    groups = np.where(np.arange(len(y)) % 2 & (np.arange(len(y)) >= 3000), "b", "a")
    return X, y, groups


def _fair():
    X, y, groups = make_fair_classification(n_samples=4000, label_group_correlation=0.8,
                                            random_state=0)
    return X.astype(np.float32), y, groups


def _fermi():
    return DPFERMIClassifier(epsilon=1.0, class_weight="balanced", random_state=0)


def _dro(algorithm, divergence="chi2"):
    return DPDROClassifier(epsilon=1.0, divergence=divergence, random_state=0,
                           solver_options={"algorithm": algorithm})


def _persons(n_rows, records=4):
    """String unit ids of ``records`` contiguous rows each, numbered out of
    row order (so that their sorted order is not the rows' order)."""
    n_units = -(-n_rows // records)
    names = np.random.default_rng(5).permutation(n_units)
    return np.array([f"person-{u}" for u in names])[np.arange(n_rows) // records]


def _sorted_persons(n_rows, records=4):
    """String unit ids of ``records`` contiguous rows each, in increasing
    order (rows sorted by unit id, so each rank holds a range of ids)."""
    return np.array([f"person-{u:05d}" for u in np.arange(n_rows) // records])


def _with_units(data, persons=_persons):
    """``data`` (X, y and optionally groups) with unit ids as fit arguments."""
    X, y, *groups = data()
    params = {"unit_ids": persons(len(y))}
    if groups:
        params["sensitive_features"] = groups[0]
    return X, y, params


#: The fits run data-parallel in one launch of two processes, by name:
#: (estimator, data: X, y and optionally the sensitive features or a dict
#: of fit arguments).
CASES = {
    "regressor": (_regressor, _regression),
    "mlp": (lambda: _classifier(hidden_layer_sizes=(8,)), _classification),
    "balanced, a rank without class 0": (lambda: _classifier(class_weight="balanced"),
                                         _sorted_by_label),
    "a rank without group b": (_classifier, _one_group_on_rank_0),
    "raco": (lambda: DPRateConstrainedClassifier(tolerance=0.2, epsilon=1.0, random_state=0),
             _fair),
    "dro, dual sgd": (lambda: _dro("dp_sgd"), lambda: _fair()[:2]),
    "dro, double spider": (lambda: _dro("double_spider"), lambda: _fair()[:2]),
    "dro, recursive spider": (lambda: _dro("recursive_spider", "kl"), lambda: _fair()[:2]),
    "dro regressor": (lambda: DPDRORegressor(epsilon=1.0, random_state=0), _regression),
    "fermi, one silo, balanced": (_fermi, _fair),
    "units": (lambda: _classifier(max_records_per_unit=3), lambda: _with_units(_classification)),
    "units, raco": (lambda: DPRateConstrainedClassifier(tolerance=0.2, epsilon=1.0,
                                                        random_state=0),
                    lambda: _with_units(_fair)),
    "units, dro double spider": (lambda: _dro("double_spider"),
                                 lambda: _with_units(lambda: _fair()[:2])),
    "units, regressor": (_regressor, lambda: _with_units(_regression)),
    "units, fermi": (_fermi, lambda: _with_units(_fair)),
    "units, sorted ids": (lambda: _classifier(max_records_per_unit=3),
                          lambda: _with_units(_classification, _sorted_persons)),
    "units, fermi, sorted ids": (_fermi, lambda: _with_units(_fair, _sorted_persons)),
}

#: Unit ids of each numbering case, whole: cut in halves, the first two give
#: each rank a range of ids (the second with the larger ids on rank 0), the
#: last interleaves them.
NUMBERINGS = {
    "ranges": _sorted_persons(2000),
    "ranges, reversed": _sorted_persons(2000)[::-1].copy(),
    "interleaved": _persons(2000),
}


def _case_data(name):
    """``(X, y, fit_params)`` of a case, whole."""
    X, y, *rest = CASES[name][1]()
    if rest and isinstance(rest[0], dict):
        return X, y, rest[0]
    return X, y, {"sensitive_features": rest[0]} if rest else {}


def _case_shards(name):
    """``(X, y, fit_params)`` of each rank."""
    X, y, params = _case_data(name)
    columns = [X, y, *params.values()]
    return [(X_r, y_r, dict(zip(params, rest))) for X_r, y_r, *rest in _halves(*columns)]


@pytest.fixture(scope="module")
def parallel():
    """One launch of two processes that runs every rank-side check."""
    jobs = [[] for _ in range(N_RANKS)]
    for rank, (n_rows,) in enumerate(_halves(np.arange(1000))):
        jobs[rank].append(("_sampled_batches", (len(n_rows), 3, 0.05, 20)))
    for name, (make, _) in CASES.items():
        for rank, (X, y, params) in enumerate(_case_shards(name)):
            jobs[rank].append(("_fit", (make(), X, y, params)))
    X, y = _classification()
    for rank, (X_r, y_r) in enumerate(_halves(X, y)):
        secure = DPSGDClassifier(hidden_layer_sizes=(8,), max_epochs=1, random_state=None)
        jobs[rank].append(("_models_of_every_rank", (secure, X_r, y_r)))
    jobs[0].append(("_refused", (_classifier(), X[:2000], y[:2000])))
    jobs[1].append(("_refused", (_classifier(), X[2000:, :5], y[2000:])))
    for ids in NUMBERINGS.values():
        for rank, (ids_r,) in enumerate(_halves(ids)):
            jobs[rank].append(("_unit_numbering", (ids_r,)))
    spread = np.arange(len(y)) // 3  # unit 666 has rows 1998-2000, on both ranks
    for rank, (X_r, y_r, units) in enumerate(_halves(X, y, spread)):
        jobs[rank].append(("_refused", (_classifier(), X_r, y_r, {"unit_ids": units})))
    results = run_ranks(_rank_jobs, [(j,) for j in jobs], timeout=120)
    batches, *fits, secure, refused = results[:len(CASES) + 3]
    numberings = results[len(CASES) + 3:-1]
    return {"batches": batches, "fits": dict(zip(CASES, fits)), "secure": secure,
            "refused": refused, "numberings": dict(zip(NUMBERINGS, numberings)),
            "spread_refused": results[-1]}


# ------------------------------------------------------------ tests
@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=8),
       shift=st.floats(-10, 10))
def test_local_communicator_is_the_identity(values, shift):
    comm = LocalCommunicator()
    values = np.asarray(values)
    assert comm.total(len(values)) == len(values)
    assert comm.release(values) is values
    np.testing.assert_array_equal(comm.release(values, lambda: np.full_like(values, shift)),
                                  values + shift)
    tensors = [torch.as_tensor(values)]
    assert comm.sum_(tensors)[0] is tensors[0]
    sampler = PoissonSampler(10, 0.5, torch.Generator().manual_seed(0))
    assert comm.shard(sampler) is sampler


def test_sharded_batches_are_the_single_process_batches(parallel):
    single = PoissonSampler(1000, 0.05, torch.Generator().manual_seed(3), chunk_steps=7)
    expected = list(single.batches(20))
    per_rank = parallel["batches"]
    assert len(per_rank) == N_RANKS
    for step, batch in enumerate(expected):
        parts = [rank_batches[step] for rank_batches in per_rank]
        # each rank keeps its own rows: rank 0 the first half, rank 1 the rest
        assert all((p < 500).all() for p in parts[0:1]) and all((p >= 500).all() for p in parts[1:])
        np.testing.assert_array_equal(torch.cat(parts).numpy(), batch.numpy())


@pytest.fixture(scope="module")
def single_fits():
    """The single-process fit of each case (warnings about the models are
    the same as the data-parallel fits' and not under test here)."""
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name, (make, _) in CASES.items():
            X, y, params = _case_data(name)
            fits[name] = make().fit(X, y, **params)
    return fits


def _single_and_parallel(name, parallel, single_fits):
    X, y, _ = _case_data(name)
    return single_fits[name], parallel["fits"][name], X, y


def _steps(fitted):
    return fitted.n_steps_


def _batch(fitted):
    """The expected batch size (DP-FERMI: of each silo)."""
    batch = fitted.batch_size_
    return batch.tolist() if isinstance(batch, np.ndarray) else batch


@pytest.mark.parametrize("name", list(CASES))
def test_same_privacy_as_the_single_process_fit(name, parallel, single_fits):
    single, dist_fit, _, _ = _single_and_parallel(name, parallel, single_fits)
    assert dist_fit.epsilon_ == single.epsilon_
    assert repr(dist_fit.dp_event_) == repr(single.dp_event_)
    assert _steps(dist_fit) == _steps(single)
    assert _batch(dist_fit) == _batch(single)
    assert dist_fit.privacy_report_.summary() == single.privacy_report_.summary()


@pytest.mark.parametrize("name", list(CASES))
def test_same_batches_and_noise_give_the_same_model(name, parallel, single_fits):
    """Batches and noise are the single-process fit's, so the models differ
    only by the order of floating-point sums over the ranks."""
    single, dist_fit, X, _ = _single_and_parallel(name, parallel, single_fits)
    if single.module_state_ is None:
        np.testing.assert_allclose(dist_fit.coef_, single.coef_, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(dist_fit.intercept_, single.intercept_, rtol=1e-4, atol=1e-5)
    else:
        for key, value in single.module_state_.items():
            np.testing.assert_allclose(dist_fit.module_state_[key], value, rtol=1e-4, atol=1e-5)
    if hasattr(single, "classes_"):
        np.testing.assert_array_equal(dist_fit.classes_, single.classes_)
        assert (dist_fit.predict(X) == single.predict(X)).mean() > 0.99
        if single.prediction_counts_ is None:  # too few records for the check
            assert dist_fit.prediction_counts_ is None
        else:
            np.testing.assert_allclose(dist_fit.prediction_counts_, single.prediction_counts_,
                                       atol=5.0)
    else:
        assert dist_fit.y_scale_ == single.y_scale_
        np.testing.assert_allclose(dist_fit.predict(X), single.predict(X), rtol=1e-4, atol=1e-3)


def test_a_rank_without_a_class_learns_every_class(parallel, single_fits):
    single, dist_fit, _, _ = _single_and_parallel("balanced, a rank without class 0",
                                              parallel, single_fits)
    np.testing.assert_array_equal(dist_fit.classes_, [0, 1])
    # the noisy class counts are the single-process release: same weights
    np.testing.assert_allclose(dist_fit.class_weight_, single.class_weight_, rtol=1e-12)


def test_a_rank_without_a_group_checks_every_group(parallel, single_fits):
    single, dist_fit, _, _ = _single_and_parallel("a rank without group b", parallel,
                                              single_fits)
    assert list(dist_fit.groups_) == ["a", "b"]
    assert dist_fit.prediction_counts_.shape == single.prediction_counts_.shape == (2, 2, 2)


def test_fermi_releases_are_the_single_process_releases(parallel, single_fits):
    """One silo over the ranks: one public size, the single-process noisy
    priors and class counts, and per round the same noisy monitor (so the
    same batches and noise)."""
    single, dist_fit, _, _ = _single_and_parallel("fermi, one silo, balanced", parallel,
                                              single_fits)
    np.testing.assert_array_equal(dist_fit.silo_sizes_, [4000])
    np.testing.assert_allclose(dist_fit.group_priors_, single.group_priors_, rtol=1e-12)
    np.testing.assert_allclose(dist_fit.class_weight_, single.class_weight_, rtol=1e-12)
    for key in ("loss", "fairness", "clipped_fraction"):
        np.testing.assert_allclose(dist_fit.history_[key], single.history_[key], rtol=1e-4,
                                   atol=1e-5)
    np.testing.assert_allclose(dist_fit.W_, single.W_, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_utility_within_noise_of_the_single_process_fit(name, parallel, single_fits):
    single, dist_fit, X, y = _single_and_parallel(name, parallel, single_fits)
    assert dist_fit.score(X, y) == pytest.approx(single.score(X, y), abs=0.02)


def test_the_fitted_estimator_is_ordinary(parallel):
    fitted = parallel["fits"]["mlp"]
    copy = pickle.loads(pickle.dumps(fitted))
    X, _ = _classification()
    np.testing.assert_array_equal(copy.predict_proba(X), fitted.predict_proba(X))
    assert fitted.privacy_curve(3).shape == (3, 2)


def test_secure_randomness_gives_every_rank_the_same_model(parallel):
    """With random_state=None the root's CSPRNG draws batches and noise and
    its seed initialises the MLP: the ranks end with the same parameters."""
    first, second = parallel["secure"]
    assert first.keys() == second.keys()
    for key in first:
        np.testing.assert_allclose(first[key], second[key], rtol=1e-6, atol=1e-7)


def test_a_shard_with_other_features_is_refused(parallel):
    message = parallel["refused"]
    assert message is not None
    assert "5 features on rank 1 but 6 on rank 0" in message
    assert "same columns" in message


def test_units_are_the_single_process_units(parallel, single_fits):
    """Unit ids numbered over the ranks, the root's choice of each unit's
    records and unit batches: the single-process fit about units."""
    for name in ("units", "units, raco", "units, dro double spider", "units, regressor",
                 "units, fermi"):
        single, dist_fit, _, _ = _single_and_parallel(name, parallel, single_fits)
        n_units = 300 if name == "units, regressor" else 1000  # 4 records each
        assert dist_fit.n_units_ == single.n_units_ == n_units
        assert dist_fit.privacy_report_.summary() == single.privacy_report_.summary()
        assert "unit" in dist_fit.privacy_report_.summary()


@pytest.mark.parametrize("name", list(NUMBERINGS))
def test_units_are_numbered_as_in_one_process(name, parallel):
    """Ranks holding ranges of ids number their units from the ranges'
    ends and counts alone; interleaved ids are shared. Either way the codes
    are those of one process holding every row."""
    from skdp._fit.units import unit_codes

    expected, n_expected = unit_codes(NUMBERINGS[name], len(NUMBERINGS[name]))
    codes, n_units, shared = parallel["numberings"][name]
    assert n_units == n_expected == 500
    np.testing.assert_array_equal(codes, expected)
    assert shared == (name == "interleaved")


def test_sorted_ids_fit_the_single_process_units(parallel, single_fits):
    for name in ("units, sorted ids", "units, fermi, sorted ids"):
        single, dist_fit, _, _ = _single_and_parallel(name, parallel, single_fits)
        assert dist_fit.n_units_ == single.n_units_ == 1000


def test_a_unit_on_two_ranks_is_refused(parallel):
    message = parallel["spread_refused"]
    assert message is not None
    assert "unit_ids: 1 unit(s) have records on more than one rank" in message
    assert "Shard the rows by unit" in message


def test_launch_keeps_each_unit_on_one_process():
    X, y = _regression()
    units = np.arange(len(y)) // 7  # the middle cut (row 600) falls inside unit 85
    fitted = launch(_regressor(), X, y, n_processes=N_RANKS, timeout=120, unit_ids=units)
    single = _regressor().fit(X, y, unit_ids=units)
    assert fitted.n_units_ == single.n_units_ == 172
    assert repr(fitted.dp_event_) == repr(single.dp_event_)
    np.testing.assert_allclose(fitted.coef_, single.coef_, rtol=1e-4, atol=1e-5)


def test_launch_fits_like_one_process_and_cleans_up():
    X, y = _classification()
    weights = np.linspace(0.5, 1.0, len(y))
    fitted = launch(_classifier(), X, y, n_processes=N_RANKS, timeout=120,
                    sample_weight=weights)
    assert multiprocessing.active_children() == []
    single = _classifier().fit(X, y, sample_weight=weights)
    assert fitted.epsilon_ == single.epsilon_
    assert repr(fitted.dp_event_) == repr(single.dp_event_)
    np.testing.assert_allclose(fitted.coef_, single.coef_, rtol=1e-4, atol=1e-5)
    assert not hasattr(_classifier(), "coef_")


def test_launch_raises_the_first_error_and_stops_every_process():
    start = time.perf_counter()
    with pytest.raises(ValueError, match="rank 1 refuses its shard"):
        run_ranks(_fail_or_wait, [(0,), (1,)], timeout=120)
    assert time.perf_counter() - start < 45
    assert multiprocessing.active_children() == []


def test_unsupported_estimators_and_arguments_are_refused():
    assert set(supported_estimators()) == {
        "DPDROClassifier", "DPDRORegressor", "DPFERMIClassifier", "DPRateConstrainedClassifier",
        "DPSGDClassifier", "DPSGDRegressor"}
    X, y = _regression()
    with pytest.raises(ValueError, match="initialised torch.distributed process group"):
        fit_data_parallel(_regressor(), X, y)
    with pytest.raises(ValueError, match="n_processes must be an integer"):
        launch(_regressor(), X[:1], y[:1], n_processes=2)
    with pytest.raises(ValueError, match="backend must be one of"):
        launch(_regressor(), X, y, backend="mpi")
    with pytest.raises(ValueError, match=r"backend='nccl' needs a CUDA estimator: "
                                         r"DPSGDRegressor has device='cpu'"):
        launch(_regressor(), X, y, backend="nccl")
    with pytest.raises(ValueError, match="DPBilevelRidge cannot be trained data-parallel; "
                                         "fit_data_parallel supports DPDROClassifier"):
        launch(DPBilevelRidge(), X, y)


@pytest.mark.parametrize(("params", "fit_params", "match"), [
    ({}, {"silo_ids": np.arange(4000) % 2}, "silo_ids .* are not supported in data-parallel"),
    ({"silo_column": 0}, {}, "silo_ids .*silo_column.* are not supported in data-parallel"),
    ({"solver_options": {"engine": "flower-simulation"}}, {},
     r"solver_options\['engine'\]='flower-simulation' is not supported"),
])
def test_fermi_trains_one_silo_in_process(params, fit_params, match):
    X, y, groups = _fair()
    with pytest.raises(ValueError, match=match):
        launch(DPFERMIClassifier(**params), X, y, sensitive_features=groups, **fit_params)
