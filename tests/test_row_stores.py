"""Fits on row stores (issue 25): tables read a batch or a block of rows at
a time (an ``h5py.Dataset``, a zarr array, ...), never whole.

A store's rows are the same numbers as the array it holds, gathered by
other code; the trainers then run the same operations on the same batches,
so a fit on a store is the fit on the array, bit for bit (the scoring after
training reads one block of the same shape as the in-memory product when
the table has at most one block of rows).
"""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import skdp._fit.rows as rows_module
import skdp.models._backends as backends
from skdp import (
    DPDROClassifier,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp.datasets import make_fair_classification
from skdp.models import StoreRows, gather_store_rows, is_row_store, training_rows


class RowStore:
    """A table that answers only what HDF5 answers: a block of rows, or
    strictly increasing row indices. It records every read and refuses to
    be converted to an array whole."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self.reads = []

    def __getitem__(self, key):
        if isinstance(key, slice):
            rows = self.array[key]
        else:
            key = np.asarray(key)
            if key.ndim != 1 or key.dtype.kind not in "iu" or (np.diff(key) <= 0).any():
                raise TypeError("indices must be increasing integers")
            rows = self.array[key]
        self.reads.append(len(rows))
        return rows

    def __len__(self):
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        raise AssertionError("the row store was read whole")


def _table(n=1800, d=5, seed=0, dtype=np.float64):
    X, y, groups = make_fair_classification(n_samples=n, n_features=d, random_state=seed)
    X = X + np.random.default_rng(seed).normal(scale=1e-5, size=X.shape)
    return np.ascontiguousarray(X, dtype=dtype), y, groups


def _fit(make, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make().fit(X, y, **kwargs)


def _fitted(estimator):
    names = ("coef_", "intercept_", "W_", "epsilon_", "n_steps_", "prediction_counts_",
             "check_log_loss_", "score_calibration_", "n_units_")
    out = {k: np.asarray(getattr(estimator, k), dtype=float) for k in names
           if getattr(estimator, k, None) is not None}
    for key, value in (getattr(estimator, "module_state_", None) or {}).items():
        out["module_state_." + key] = np.asarray(value, dtype=float)
    return out


def _assert_same_fit(a, b):
    fa, fb = _fitted(a), _fitted(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        assert np.array_equal(fa[key], fb[key], equal_nan=True), key
    assert repr(a.dp_event_) == repr(b.dp_event_)


CASES = {
    "dpsgd": (lambda: DPSGDClassifier(random_state=0, max_epochs=3), {}),
    "mlp": (lambda: DPSGDClassifier(random_state=0, max_epochs=2, hidden_layer_sizes=(6,)), {}),
    "regressor": (lambda: DPSGDRegressor(random_state=0, max_epochs=3), {}),
    "raco": (lambda: DPRateConstrainedClassifier(random_state=0, max_epochs=3),
             {"groups": True}),
    "dro": (lambda: DPDROClassifier(random_state=0, max_epochs=3), {}),
    "fermi": (lambda: DPFERMIClassifier(random_state=0, max_epochs=2), {"groups": True}),
    "fermi, 3 silos": (lambda: DPFERMIClassifier(random_state=0, max_epochs=2),
                       {"groups": True, "silos": 3}),
    "units": (lambda: DPSGDClassifier(random_state=0, max_epochs=3, max_records_per_unit=2),
              {"units": True}),
}


def _arguments(name, X, y, groups):
    _, how = CASES[name]
    target = X[:, 0] - 0.5 * X[:, 1] if name == "regressor" else y
    kwargs = {}
    if how.get("groups"):
        kwargs["sensitive_features"] = groups
    if how.get("silos"):
        kwargs["silo_ids"] = np.random.default_rng(1).integers(0, how["silos"], len(y))
    if how.get("units"):  # unit batches are grouped by unit, not sorted
        kwargs["unit_ids"] = np.random.default_rng(2).integers(0, 500, len(y))
    return target, kwargs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CASES))
def test_a_store_fit_is_the_in_memory_fit(name, dtype):
    X, y, groups = _table(dtype=dtype)
    target, kwargs = _arguments(name, X, y, groups)
    store = RowStore(X)
    make = CASES[name][0]
    from_store = _fit(make, store, target, **kwargs)
    in_memory = _fit(make, X, target, **kwargs)
    _assert_same_fit(from_store, in_memory)
    assert from_store._rows_on_disk  # gathered ahead in the background
    assert np.array_equal(from_store.predict(X), in_memory.predict(X))
    assert max(store.reads) <= max(rows_module.SCORE_BLOCK, len(y) // 2)  # never the whole table


def test_a_store_is_never_read_whole(monkeypatch):
    monkeypatch.setattr(rows_module, "SCORE_BLOCK", 256)  # validation, range check
    monkeypatch.setattr(rows_module, "PRODUCT_BLOCK", 256)  # scoring
    monkeypatch.setattr(backends, "_NORM_BLOCK", 256)  # the rows' squared norms
    X, y, _ = _table(n=3000, dtype=np.float32)
    store = RowStore(X)
    clf = _fit(lambda: DPSGDClassifier(random_state=0, max_epochs=2, batch_size=100), store, y)
    assert max(store.reads) <= 256
    assert sum(store.reads) >= 3 * len(y)  # validation, range check, norms, batches, scoring
    assert clf.n_features_in_ == 5


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 39), max_size=25, unique=True))
def test_gathered_rows_come_back_in_the_order_asked(rows):
    X = np.arange(80, dtype=np.float64).reshape(40, 2)
    store = RowStore(X)
    np.testing.assert_array_equal(gather_store_rows(store, np.array(rows, dtype=np.int64)),
                                  X[rows].reshape(-1, 2))
    gathered = StoreRows(store, torch.float32, "cpu").index_select(0, torch.tensor(rows,
                                                                                   dtype=torch.long))
    assert torch.equal(gathered, torch.from_numpy(X[rows].reshape(-1, 2)).float())


def test_store_rows_read_blocks_and_convert():
    X = np.arange(30, dtype=np.float64).reshape(10, 3) / 7
    rows = training_rows(RowStore(X), "cpu", torch.float32)
    assert isinstance(rows, StoreRows) and rows.shape == (10, 3) and rows.dtype == torch.float32
    assert torch.equal(torch.cat(list(rows.blocks(4))), torch.from_numpy(X).float())
    assert torch.equal(rows.tensor(), torch.from_numpy(X).float())
    with pytest.raises(ValueError, match="rows only"):
        rows.index_select(1, torch.tensor([0]))


def test_what_is_and_is_not_a_row_store():
    X = np.zeros((4, 2))
    assert is_row_store(RowStore(X))
    assert not is_row_store(X)
    assert not is_row_store(np.memmap)  # a class, not a table
    assert not is_row_store(torch.zeros(4, 2))
    assert not is_row_store([[0.0, 1.0]])
    assert not is_row_store(RowStore(X.astype(int)))  # integer tables are converted
    assert not is_row_store(RowStore(np.zeros(4)))  # not 2-D


def test_bad_stores_get_clear_errors():
    X, y, groups = _table(n=300)
    bad = X.copy()
    bad[123, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(rows 0 to 299 of the row store\)"):
        DPSGDClassifier().fit(RowStore(bad), y)
    huge = X.copy()
    huge[5, 0] = 1e300
    with pytest.raises(ValueError, match="too large for torch.float32"):
        DPSGDClassifier().fit(RowStore(huge), y)
    with pytest.raises(ValueError, match="sensitive_columns cannot take columns out of a row "
                                         "store .* pass sensitive_features= to fit"):
        DPRateConstrainedClassifier(sensitive_columns=0).fit(RowStore(X), y)
    with pytest.raises(ValueError, match="unit_column cannot take columns out of a row store"):
        DPSGDClassifier(unit_column=0).fit(RowStore(X), y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        DPSGDClassifier().fit(RowStore(X), y[:-1])
    with pytest.raises(ValueError, match="at least one row"):
        DPSGDClassifier().fit(RowStore(X[:0]), y[:0])


def test_hdf5_dataset(tmp_path):
    h5py = pytest.importorskip("h5py")
    X, y, _ = _table(n=1500, dtype=np.float32)
    with h5py.File(tmp_path / "table.h5", "w") as f:
        f.create_dataset("X", data=X, chunks=(256, X.shape[1]))
    with h5py.File(tmp_path / "table.h5", "r") as f:
        from_file = _fit(lambda: DPSGDClassifier(random_state=0, max_epochs=2), f["X"], y)
    _assert_same_fit(from_file, _fit(lambda: DPSGDClassifier(random_state=0, max_epochs=2),
                                     X, y))
