"""Reading the rows of ``X``: validation, training rows, and scores a block
of rows at a time.

A table may be an array in memory, a ``numpy.memmap`` or a row store (an
``h5py.Dataset`` or anything 2-D that gathers rows a block or a batch at a
time, :func:`~skdp.models.is_row_store`): it is never read whole, copied or
converted to float64 whole.
"""

import mmap

import numpy as np
import torch
from sklearn.utils.validation import (_check_y, assert_all_finite, check_consistent_length,
                                      validate_data)

from ..models import is_row_store, shared_tensor, training_rows

__all__ = ["PREDICT_BLOCK", "PRODUCT_BLOCK", "SCORE_BLOCK", "check_representable", "is_file_backed",
           "check_finite_X", "linear_scores", "module_outputs", "row_blocks", "row_sq_norms",
           "to_training_rows", "validated_X_y", "validated_store"]


#: Rows per forward pass of a torch module at prediction time.
PREDICT_BLOCK = 4096
#: Rows per block when a table is read a block at a time (a row store's
#: validation, the range check, the statistics of the releases after
#: training).
SCORE_BLOCK = 65536
#: Rows per block of a linear model's float64 scores (and rows' norms) of a
#: float32 ``X``: a float64 block of 16,384 rows of 100 features (13 MB)
#: stays in the CPU's caches between its conversion and its product, where
#: one of 65,536 rows did not (a pass over 2M x 100 float32 rows: 0.39 s
#: instead of 0.88 s).
PRODUCT_BLOCK = 16384
#: Bytes of the float64 buffer that :func:`linear_scores` converts an
#: in-memory float32 ``X`` into, a block of rows at a time: the buffer stays
#: in the CPU's second-level caches between the conversion and the product
#: (10M x 100 float32 rows, blocks of 2,621 rows: 0.72 -> 0.52 s).
PRODUCT_BUFFER_BYTES = 2 * 2**20


def is_file_backed(array):
    """Whether ``array``'s memory is a file mapped into memory (a
    ``numpy.memmap``, or a view of one)."""
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


def validated_store(estimator, X, y, y_numeric=False):
    """``(X, y)`` for a row store ``X``: scikit-learn's checks of the number
    of features (``n_features_in_``) and of ``y`` (``_check_y``), and
    finite values in ``X``, read :data:`SCORE_BLOCK` rows at a time; ``X``
    is returned as it is."""
    n_rows = int(X.shape[0])
    if n_rows < 1 or int(X.shape[1]) < 1:
        raise ValueError(f"X (a row store) has shape {tuple(X.shape)}; it needs at least "
                         "one row and one column.")
    X, _ = validate_data(estimator, X, y, skip_check_array=True, reset=True)
    y = _check_y(y, y_numeric=y_numeric, estimator=estimator)
    check_consistent_length(np.empty(n_rows, dtype=bool), y)
    for rows in row_blocks(n_rows):
        block = np.asarray(X[rows])
        if not np.isfinite(block).all():
            raise ValueError(
                f"Input X contains NaN or infinity (rows {rows.start} to "
                f"{min(rows.stop, n_rows) - 1} of the row store); impute or drop them first."
            )
    return X, y


def row_blocks(n_rows):
    """Slices of at most :data:`SCORE_BLOCK` rows that cover ``n_rows``."""
    return [slice(start, start + SCORE_BLOCK) for start in range(0, max(n_rows, 1), SCORE_BLOCK)]


def linear_scores(X, coef, intercept, row_norms=None):
    """``X @ coef + intercept`` in float64.

    A float32 ``X`` is converted a block of rows at a time into one float64
    buffer of :data:`PRODUCT_BUFFER_BYTES` (at most :data:`PRODUCT_BLOCK`
    rows), never whole: the scores of a large table (e.g. the model check
    after training) then cost one float64 block of memory, not a float64
    copy of the data. A row store (:func:`~skdp.models.is_row_store`) is
    read :data:`PRODUCT_BLOCK` rows at a time whatever its dtype. Rows
    never interact, so a row's score does not depend on the block it falls
    in beyond float64 rounding.

    With ``row_norms`` (a float64 array, one value per row), also fill it
    with :func:`row_sq_norms` of ``X`` from the same float64 blocks: one
    pass and one conversion for both, the same values as a separate call.
    """
    in_memory = isinstance(X, np.ndarray)  # not a row store, read a block at a time
    if in_memory and (X.dtype == np.float64 or X.shape[0] <= PRODUCT_BLOCK):
        if row_norms is not None:
            row_norms[:] = row_sq_norms(X)
        return X @ coef + intercept
    out = np.empty((X.shape[0],) + np.shape(coef)[1:], dtype=np.float64)
    # torch converts and multiplies on the process's threads (numpy converts
    # on one); each row's score is one thread's dot product, whatever the
    # number of threads
    coef = torch.as_tensor(np.asarray(coef, dtype=np.float64))
    intercept = torch.as_tensor(np.broadcast_to(
        np.asarray(intercept, dtype=np.float64), out.shape[1:]).copy())
    product = torch.addmv if coef.dim() == 1 else torch.addmm
    scores = torch.from_numpy(out)
    n_rows, n_features = X.shape
    size = PRODUCT_BLOCK
    if in_memory:
        size = max(1, min(size, PRODUCT_BUFFER_BYTES // (8 * max(n_features, 1))))
    buffer = torch.empty((min(size, n_rows), n_features), dtype=torch.float64)
    for start in range(0, n_rows, size):
        stop = start + size
        rows = shared_tensor(np.ascontiguousarray(X[start:stop]))
        block = buffer[: rows.shape[0]].copy_(rows)
        product(intercept, block, coef, out=scores[start:stop])
        if row_norms is not None:
            values = block.numpy()
            row_norms[start:stop] = np.einsum("ij,ij->i", values, values)
    return out



def row_sq_norms(X):
    """Squared l2 norm of each row of ``X`` in float64, a block of
    :data:`PRODUCT_BLOCK` rows at a time (as :func:`linear_scores`)."""
    out = np.empty(X.shape[0], dtype=np.float64)
    for start in range(0, X.shape[0], PRODUCT_BLOCK):
        block = np.asarray(X[start:start + PRODUCT_BLOCK], dtype=np.float64)
        out[start:start + PRODUCT_BLOCK] = np.einsum("ij,ij->i", block, block)
    return out


def validated_X_y(estimator, X, y, *, defer_finite=False, **kwargs):
    """``validate_data(estimator, X, y, ...)`` with a hint for text columns.

    A row store (:func:`~skdp.models.is_row_store`, e.g. an
    ``h5py.Dataset``) is checked a block of rows at a time and returned as it
    is, never read whole (:func:`validated_store`). With ``defer_finite`` the
    finiteness of an array ``X`` is not checked here: the caller must call
    :func:`check_finite_X` (or learn it from the rows' norms) before anything
    reads ``X``'s values; ``y`` is checked as always.
    """
    if is_row_store(X):
        return validated_store(estimator, X, y, **kwargs)
    if defer_finite:
        kwargs["ensure_all_finite"] = False
    try:
        return validate_data(
            estimator, X, y, dtype=[np.float64, np.float32], reset=True, **kwargs
        )
    except ValueError as exc:
        if "could not convert" in str(exc) or "convert" in str(exc) and "float" in str(exc):
            raise ValueError(
                f"X must be numeric; {exc}. Encode categorical columns first, e.g. "
                "with skdp.preprocessing.DPOneHotEncoder in a Pipeline."
            ) from exc
        if "contains NaN" in str(exc) or "contains infinity" in str(exc):
            raise _non_finite_error(exc) from exc
        raise


def _non_finite_error(exc):
    """The error for scikit-learn's ``exc`` about NaN or infinite values in X
    (scikit-learn's advice names its non-private imputer)."""
    return ValueError(
        f"X contains missing or infinite values ({str(exc).splitlines()[0]}). Fill them "
        "privately first, e.g. with skdp.preprocessing.DPSimpleImputer in a Pipeline "
        "(scikit-learn's SimpleImputer would read the fill values from the data without "
        "differential privacy), or drop those rows."
    )


def check_finite_X(estimator, X):
    """The finiteness check of :func:`validated_X_y`, for an ``X`` validated
    with ``defer_finite=True``: scikit-learn's, with the same error."""
    try:
        assert_all_finite(X, estimator_name=type(estimator).__name__, input_name="X")
    except ValueError as exc:
        raise _non_finite_error(exc) from exc


def check_representable(array, dtype):
    """A ValueError when ``array`` (an array or a row store, read a block
    at a time) has values beyond ``dtype``'s range: training could not clip
    them."""
    limit = torch.finfo(dtype).max
    source = np.dtype(array.dtype)
    if np.issubdtype(source, np.floating) and float(np.finfo(source).max) <= limit:
        return
    n_rows = int(array.shape[0])
    blocks = [array] if isinstance(array, np.ndarray) else (
        np.asarray(array[rows]) for rows in row_blocks(n_rows))
    if any(block.size and (block.max() > limit or block.min() < -limit)
           for block in blocks):
        raise ValueError(
            f"X has values too large for {dtype} (|x| > {torch.finfo(dtype).max:.3g}), "
            "which training cannot clip; rescale or clip the features first (e.g. with "
            "a scaler or public bounds)."
        )


def to_training_rows(array, device, dtype=torch.float32, *, check_range=True):
    """``(rows, on_disk)``: ``array``'s rows to train on in ``dtype`` on
    ``device`` (a :class:`~skdp.models.TrainingRows`, sharing the array's
    memory where it can), and whether they are read from a file or a store.

    With ``check_range`` the values are first checked against ``dtype``'s
    range (:func:`check_representable`); without it the caller must make
    that check before anything reads the rows' values, or learn that it
    passes from the rows in ``dtype`` (a value beyond the range becomes an
    infinity there, so rows whose squared norms are finite are in range).

    A C-contiguous float32 or float64 array on the CPU -- a ``numpy.memmap``
    too, read-only or not -- is viewed, not copied (training only reads the
    rows), and a float64 one is converted a batch at a time as it is read,
    unless it is small and in memory (:func:`~skdp.models.training_rows`);
    anything else is converted once. A row store
    (:func:`~skdp.models.is_row_store`, e.g. an ``h5py.Dataset``) is read a
    batch or a block of rows at a time. Rows read from a file or a store are
    gathered ahead by the backend.
    """
    if is_row_store(array):  # read a batch at a time, in the background
        check_representable(array, dtype)
        return training_rows(array, device, dtype), True
    array = np.ascontiguousarray(array)
    if check_range:
        check_representable(array, dtype)
    on_disk = is_file_backed(array)
    return training_rows(array, device, dtype, convert_once=not on_disk), on_disk


def module_outputs(module, X, n_outputs):
    """Outputs of a fitted torch ``module`` on ``X``, shape (n, n_outputs).

    Inference runs on a float64 copy of the module (training may be
    float32): float32 matrix products are blocked differently for different
    numbers of rows, so a row's float32 score would depend on the other rows
    of the call, beyond scikit-learn's 1e-7 tolerance. In float64 those
    differences are near 1e-16.
    """
    module = module.to(torch.float64).eval()
    out = np.empty((X.shape[0], n_outputs), dtype=np.float64)
    # blocks of rows keep the activations in cache (about twice as fast as
    # one call on a million rows) and convert X to float64 a block at a
    # time; rows never interact
    with torch.no_grad():
        for start in range(0, X.shape[0], PREDICT_BLOCK):
            block = torch.as_tensor(
                np.asarray(X[start:start + PREDICT_BLOCK], dtype=np.float64))
            out[start:start + PREDICT_BLOCK] = module(block).numpy()
    return out
