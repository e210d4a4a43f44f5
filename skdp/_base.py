"""Machinery shared by skdp estimators: privacy parameters, input checks,
label/group encoding, seeding, prediction from stored parameters and tags.

The estimator shell holds no training maths: it validates, converts to
tensors, calls one trainer and stores numpy state plus the privacy report.
"""

import math
import mmap
import os
import time
import warnings
from dataclasses import replace
from numbers import Integral, Real
from types import SimpleNamespace

import numpy as np
import torch
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import softmax
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    _check_y,
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from ._calibration import calibration_counts, fit_score_map
from .debug import report_fit_times
from ._doc_link import DocLinkMixin
from ._groups import _is_dataframe, encode_groups, select_columns
from ._training import training_threads
from .models import is_row_store, make_backend, make_mlp, training_rows
from .privacy import (
    ACCOUNTANTS,
    NEIGHBORING,
    InitialRelease,
    SecureGenerator,
    balanced_class_weights,
    bound_units,
    compose_reports,
    current_communicator,
    gaussian_noise,
    record_weight_factors,
)


def split_sensitive_columns(X, sensitive_columns, *, name="sensitive_columns",
                            argument="sensitive_features"):
    """Take the ``sensitive_columns`` out of ``X``.

    Returns ``(X_without, sensitive)`` where ``sensitive`` is None when
    ``sensitive_columns`` is None. Columns are names of a DataFrame's columns
    or integer positions (see :func:`skdp._groups.select_columns`). ``name``
    and ``argument`` (the parameter and the fit argument that the columns
    stand for) go into error messages.
    """
    if sensitive_columns is None:
        return X, None
    if is_row_store(X):
        raise ValueError(
            f"{name} cannot take columns out of a row store ({type(X).__name__}): that would "
            f"read it whole. Keep those columns out of the store and pass {argument}= to fit."
        )
    columns = _column_list(sensitive_columns)
    if _is_dataframe(X) and columns and all(isinstance(c, str) for c in columns):
        missing = [c for c in columns if c not in X.columns]
        if missing:
            raise ValueError(
                f"{name} {missing} are not columns of X: they are gone (a "
                "preprocessing step dropped them?); X has columns "
                f"{list(X.columns)[:20]}. In a Pipeline, make the preprocessing pass "
                "these columns through (e.g. ColumnTransformer(..., remainder="
                "'passthrough', verbose_feature_names_out=False).set_output("
                f"transform='pandas')), or pass {argument}= to fit."
            )
    sensitive = select_columns(X, columns, name=name)
    return _drop_columns(X, columns), sensitive


def _column_list(columns):
    """A column parameter (one name or position, or several) as a list."""
    if columns is None:
        return []
    return [columns] if isinstance(columns, (str, Integral)) else list(columns)


def _drop_columns(X, columns):
    """``X`` without ``columns`` (names of a DataFrame, or positions)."""
    if _is_dataframe(X):
        labels = columns if isinstance(columns[0], str) else list(X.columns[columns])
        return X.drop(columns=labels)
    X = np.asarray(X) if not hasattr(X, "shape") else X
    keep = np.setdiff1d(np.arange(X.shape[1]), np.mod(columns, X.shape[1]))
    return X[:, keep]


def split_fit_only_columns(X, sensitive_columns, unit_column):
    """Take ``sensitive_columns`` and the ``unit_column`` out of ``X``.

    Both are read from ``X`` as given (so positions refer to the same
    columns whichever is taken first) and dropped together. Returns
    ``(X_without, sensitive, unit_ids)``, None for a parameter that is None.
    """
    if unit_column is None:
        X, sensitive = split_sensitive_columns(X, sensitive_columns)
        return X, sensitive, None
    _, units = split_sensitive_columns(X, unit_column, name="unit_column",
                                       argument="unit_ids")
    _, sensitive = split_sensitive_columns(X, sensitive_columns)
    columns = _column_list(sensitive_columns) + [unit_column]
    if _is_dataframe(X) and not all(isinstance(c, str) for c in columns):
        columns = [X.columns[c] if isinstance(c, Integral) else c for c in columns]
    return _drop_columns(X, columns), sensitive, np.asarray(units).reshape(-1)


#: Default ``max_records_per_unit`` of the estimators that take ``unit_ids``
#: (chosen on held-out persons of benchmarks/bench_units.py, see
#: docs/units.rst; the DP-SGD estimators hold the same value).
MAX_RECORDS_PER_UNIT = 16

#: Parameter constraints of ``max_records_per_unit`` and ``unit_column``.
UNIT_CONSTRAINTS = {
    "max_records_per_unit": [Interval(Integral, 1, None, closed="left")],
    "unit_column": [str, Integral, None],
}


def unit_codes(unit_ids, n_samples):
    """``(codes, n_units)`` of ``unit_ids`` (one hashable id per row of X,
    no missing value), or ``(None, None)`` for None; a ValueError naming
    ``unit_ids`` otherwise."""
    if unit_ids is None:
        return None, None
    if hasattr(unit_ids, "ndim") and unit_ids.ndim > 1 and unit_ids.shape[1:] != (1,):
        raise ValueError(
            f"unit_ids must be one id per row of X (1-D); got shape {unit_ids.shape}.")
    values = np.asarray(unit_ids).reshape(-1) if hasattr(unit_ids, "ndim") else unit_ids
    codes, units = encode_groups(values, n_samples, name="unit_ids")
    comm = current_communicator()
    if comm.distributed:  # data-parallel: codes among the ids of every rank
        labels = comm.union(units)
        codes = np.searchsorted(labels, units)[codes]
        _check_units_on_one_rank(codes, len(labels), comm)
        return codes, len(labels)
    return codes, len(units)


def _check_units_on_one_rank(codes, n_units, comm):
    """A ValueError naming ``unit_ids``, the same on every rank, when a unit
    has records on more than one rank of a data-parallel fit: a unit's
    records are bounded and sampled together, by the rank that holds them."""
    held = torch.zeros(n_units, dtype=torch.int64, device=comm.device)
    held[torch.as_tensor(np.unique(codes), device=comm.device)] = 1
    comm.sum_([held])
    spread = int((held > 1).sum())
    if spread:
        raise ValueError(
            f"unit_ids: {spread} unit(s) have records on more than one rank; a data-parallel "
            "fit needs all records of a unit on one rank. Shard the rows by unit (e.g. sort "
            "them by unit id before cutting them into shards)."
        )


def release_counts(counts, std, generator, device=None):
    """A one-off release of ``counts`` (a float64 ndarray): the counts plus
    N(0, std^2) noise drawn from ``generator`` on ``device``, or exact when
    ``std`` is None.

    In a data-parallel fit (:func:`~skdp.privacy.current_communicator`)
    ``counts`` are this rank's: they are summed over the ranks, the root
    draws the noise once, and every rank gets the same noisy counts.
    """
    noise = None
    if std is not None:
        def noise():
            zeros = torch.zeros(counts.size, dtype=torch.float64, device=device)
            return gaussian_noise(zeros, std, generator).cpu().numpy().reshape(counts.shape)
    return current_communicator().release(counts, noise)


#: Rows per forward pass of a torch module at prediction time.
_PREDICT_BLOCK = 4096
#: Rows per block of a linear model's float64 scores of a float32 ``X``.
_SCORE_BLOCK = 65536


def _is_file_backed(array):
    """Whether ``array``'s memory is a file mapped into memory (a
    ``numpy.memmap``, or a view of one)."""
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


def _validated_store(estimator, X, y, y_numeric=False):
    """``(X, y)`` for a row store ``X``: scikit-learn's checks of the number
    of features (``n_features_in_``) and of ``y`` (``_check_y``), and
    finite values in ``X``, read :data:`_SCORE_BLOCK` rows at a time; ``X``
    is returned as it is."""
    n_rows = int(X.shape[0])
    if n_rows < 1 or int(X.shape[1]) < 1:
        raise ValueError(f"X (a row store) has shape {tuple(X.shape)}; it needs at least "
                         "one row and one column.")
    X, _ = validate_data(estimator, X, y, skip_check_array=True, reset=True)
    y = _check_y(y, y_numeric=y_numeric, estimator=estimator)
    check_consistent_length(np.empty(n_rows, dtype=bool), y)
    for rows in _row_blocks(n_rows):
        block = np.asarray(X[rows])
        if not np.isfinite(block).all():
            raise ValueError(
                f"Input X contains NaN or infinity (rows {rows.start} to "
                f"{min(rows.stop, n_rows) - 1} of the row store); impute or drop them first."
            )
    return X, y


def _row_blocks(n_rows):
    """Slices of at most :data:`_SCORE_BLOCK` rows that cover ``n_rows``."""
    return [slice(start, start + _SCORE_BLOCK) for start in range(0, max(n_rows, 1), _SCORE_BLOCK)]


def _linear_scores(X, coef, intercept):
    """``X @ coef + intercept`` in float64.

    A float32 ``X`` is converted one block of :data:`_SCORE_BLOCK` rows at a
    time, never whole: the scores of a large table (e.g. the model check
    after training) then cost one float64 block of memory, not a float64
    copy of the data. A row store (:func:`~skdp.models.is_row_store`) is
    read a block at a time whatever its dtype. Rows never interact, so a
    row's score does not depend on the block it falls in beyond float64
    rounding.
    """
    in_memory = isinstance(X, np.ndarray)  # not a row store, read a block at a time
    if in_memory and (X.dtype == np.float64 or X.shape[0] <= _SCORE_BLOCK):
        return X @ coef + intercept
    out = np.empty((X.shape[0],) + np.shape(coef)[1:], dtype=np.float64)
    for start in range(0, X.shape[0], _SCORE_BLOCK):
        stop = start + _SCORE_BLOCK
        out[start:stop] = np.asarray(X[start:stop], dtype=np.float64) @ coef + intercept
    return out


class PrivateFitMixin(DocLinkMixin):
    """The privacy side of every skdp ``fit``: the randomness of the fit,
    spending a release plan under ``(epsilon, delta)`` and storing its
    report. Shared by the estimators (:class:`BaseDPEstimator`) and the
    private preprocessing steps.

    Reads ``epsilon``, ``delta`` and ``random_state``, and with ``getattr``
    the optional ``secure_rng`` (False), ``device`` ("cpu"),
    ``noise_multiplier`` (None) and ``verbose`` (0).
    """

    def _make_generator(self):
        """Generator for sampling and noise, seed for module init, and device.

        Returns ``(generator, seed, device)``.

        - ``random_state=None`` (the default): sampling and noise come from a
          :class:`~skdp.privacy.SecureGenerator` (the operating system's
          CSPRNG: no seed, nothing anyone can replay, not even after
          ``np.random.seed``), and the initialisation seed from
          ``os.urandom``.
        - ``random_state`` an int or a ``RandomState``: a torch generator on
          ``device`` seeded from it, for reproducible experiments; with
          ``secure_rng=True`` the privacy randomness still comes from the
          CSPRNG and the seed only initialises the model.
        """
        device = self._checked_device()
        if self.random_state is None:
            seed = int.from_bytes(os.urandom(8), "little") >> 1
            return SecureGenerator(device), seed, device
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        if getattr(self, "secure_rng", False):
            return SecureGenerator(device), seed, device
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        return generator, seed, device

    def _checked_device(self):
        """``torch.device(self.device)``, or a ValueError saying what to use."""
        try:
            device = torch.device(getattr(self, "device", "cpu"))
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ValueError(
                f"device={self.device!r} is not a torch device ({exc}); use 'cpu', or 'cuda' "
                "on a machine with a CUDA build of torch."
            ) from exc
        available = {
            "cuda": torch.cuda.is_available,
            "mps": lambda: torch.backends.mps.is_available(),
        }.get(device.type, lambda: True)
        if not available():
            raise ValueError(
                f"device={self.device!r} is not available here (torch {torch.__version__} "
                f"finds no {device.type} device); use device='cpu'."
            )
        return device

    def _spend(self, plan, *, release="gradient"):
        """Privacy report of ``plan`` under the estimator's budget.

        Without privacy (``epsilon=None``): a report with epsilon inf. With a
        fixed ``noise_multiplier``: release ``release`` gets it and the step
        count is the most the budget affords (up to the planned one).
        Otherwise the plan's noise is calibrated for the planned steps.
        """
        if self.epsilon is None:
            return plan.non_private(self.delta)
        if getattr(self, "noise_multiplier", None) is None:
            return plan.calibrate(self.epsilon, self.delta)
        report = plan.calibrate_steps(
            self.epsilon, self.delta, release=release, noise_multiplier=self.noise_multiplier
        )
        if report.steps[0] < plan.batches[0].steps and getattr(self, "verbose", 0):
            print(
                f"[{type(self).__name__}] budget affords {report.steps[0]} of "
                f"{plan.batches[0].steps} requested steps"
            )
        return report

    def _store_privacy_report(self, report, *, delta=None):
        """Fitted privacy attributes, the same for every estimator and step.

        ``delta`` overrides the report's delta (a step whose fit adds a
        stability delta outside its event)."""
        self.privacy_report_ = report
        self.epsilon_ = report.epsilon
        self.delta_ = report.delta if delta is None else float(delta)
        self.dp_event_ = report.dp_event
        self.accountant_ = report.accountant

    @staticmethod
    def _timed(function, *args, **kwargs):
        """``(function(*args, **kwargs), seconds it took)``, for
        :func:`skdp.debug.record_fit_times`.

        >>> from skdp._base import BaseDPEstimator
        >>> total, seconds = BaseDPEstimator._timed(sum, [1, 2, 3])
        >>> total, seconds >= 0
        (6, True)
        """
        start = time.perf_counter()
        result = function(*args, **kwargs)
        return result, time.perf_counter() - start


class BaseDPEstimator(PrivateFitMixin, BaseEstimator):
    """Machinery shared by every skdp estimator trained with a private torch loop.

    Privacy parameters and their checks, Poisson sampling rate and step
    count, the generator (OS CSPRNG when ``random_state=None``), device,
    model backend, thread policy, spending a release plan and storing its
    privacy report, and the forward pass of a fitted model. Task-specific
    bases add target handling and prediction:
    :class:`BaseDPClassifier` and :class:`BaseDPRegressor`.

    Subclasses tell the base how many model outputs they train with
    ``_n_model_outputs()`` and turn a fitted linear weight matrix into
    ``coef_``/``intercept_`` with ``_set_linear_params(weights)``.

    A ``fit`` validates its inputs and runs :meth:`_fit_private`, the same
    sequence around every trainer (generator, plan, calibration, tensors and
    model, targets, training under the thread policy, stored parameters and
    report); an estimator fills its hooks (:meth:`_plan`, :meth:`_train`,
    :meth:`_store_fitted`, and where it differs :meth:`_calibrate`,
    :meth:`_targets`, :meth:`_make_backend`, :meth:`_store_model`).

    The optional parameters ``sample_rate`` (Poisson rate used instead of
    ``batch_size``), ``secure_rng`` (draw sampling and noise from the OS
    CSPRNG), ``noise_multiplier`` and ``sensitive_columns`` are read with
    ``getattr``, so a subclass without them behaves as if they were None
    (False for ``secure_rng``).
    """

    #: Fitted attributes computed from the noisy releases (covered by
    #: ``epsilon_``); every other fitted attribute is public: a function of n
    #: (and n_units), the classes and groups, the public parameters and the
    #: seed (checked for every estimator by tests/test_fitted_attributes.py).
    _released_attributes = frozenset({"coef_", "intercept_", "module_state_"})

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "max_grad_norm": [Interval(Real, 0, None, closed="right")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "sample_rate": [Interval(Real, 0, 1, closed="right"), None],
        "max_epochs": [Interval(Real, 0, None, closed="neither")],
        "max_steps": [Interval(Integral, 1, None, closed="left"), None],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "optimizer": [StrOptions({"sgd", "adam"})],
        "momentum": [Interval(Real, 0, 1, closed="left")],
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
        "accountant": [StrOptions(set(ACCOUNTANTS))],
        "neighboring": [StrOptions(set(NEIGHBORING))],
        "hidden_layer_sizes": [tuple, list],
        "module": [callable, None],
        "random_state": ["random_state"],
        "secure_rng": ["boolean"],
        "device": [str, torch.device],
        "verbose": ["verbose"],
        "max_sample_weight": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
    }

    # ------------------------------------------------------------------ fit
    @staticmethod
    def _validated_X_y(estimator, X, y, **kwargs):
        """``validate_data(estimator, X, y, ...)`` with a hint for text columns.

        A row store (:func:`~skdp.models.is_row_store`, e.g. an
        ``h5py.Dataset``) is checked a block of rows at a time and returned
        as it is, never read whole (:func:`_validated_store`).
        """
        if is_row_store(X):
            return _validated_store(estimator, X, y, **kwargs)
        try:
            return validate_data(
                estimator, X, y, dtype=[np.float64, np.float32], reset=True, **kwargs
            )
        except ValueError as exc:
            if "could not convert" in str(exc) or "convert" in str(exc) and "float" in str(exc):
                raise ValueError(
                    f"X must be numeric; {exc}. Encode categorical columns first, e.g. "
                    "with a OneHotEncoder in a Pipeline."
                ) from exc
            raise

    def _check_privacy_setup(self, n_samples, batch_size):
        """Check the sampling, clipping and delta against the data; return q.

        The Poisson sampling rate q is ``sample_rate`` when the estimator has
        one set (``batch_size`` is then ignored), else
        ``batch_size / n_samples``.
        """
        if self.epsilon is not None and not np.isfinite(self.max_grad_norm):
            raise ValueError(
                "max_grad_norm=inf turns clipping off, which only a non-private fit "
                "(epsilon=None) can do: the noise scale is proportional to it."
            )
        sample_rate = getattr(self, "sample_rate", None)
        if sample_rate is None:
            q = self._rate_from_batch_size(n_samples, batch_size)
        else:
            q = self._checked_sample_rate(n_samples, sample_rate)
        if self.epsilon is not None and self.delta >= 1.0 / n_samples:
            warnings.warn(
                f"delta={self.delta:g} is not smaller than 1/n_samples={1.0 / n_samples:.3g}; "
                "a mechanism that publishes one random record satisfies such a guarantee. Use "
                "delta well below 1/n_samples.",
                UserWarning,
            )
        return q

    @staticmethod
    def _rate_from_batch_size(n_samples, batch_size):
        if batch_size > n_samples:
            raise ValueError(
                f"batch_size={batch_size} is larger than the number of training samples "
                f"({n_samples}); use batch_size <= {n_samples} (a few percent of the data is "
                "typical for DP-SGD)."
            )
        return batch_size / n_samples

    @staticmethod
    def _checked_sample_rate(n_samples, sample_rate):
        # relative slack so that sample_rate=1/n_samples passes despite rounding
        if sample_rate * n_samples < 1.0 - 1e-9:
            raise ValueError(
                f"sample_rate={sample_rate:g} gives an expected batch of "
                f"{sample_rate * n_samples:.3g} records on {n_samples} training samples, less "
                f"than one; use sample_rate >= 1/n_samples = {1.0 / n_samples:.3g} (a few "
                "percent is typical for DP-SGD), or sample_rate=None and batch_size."
            )
        return float(sample_rate)

    @staticmethod
    def _expected_batch_size(n_samples, sampling_rate):
        """The expected Poisson batch ``sampling_rate * n_samples``, rounded."""
        return max(1, int(round(sampling_rate * n_samples)))

    def _n_steps_requested(self, sampling_rate):
        if self.max_steps is not None:
            return int(self.max_steps)
        return max(1, int(round(self.max_epochs / sampling_rate)))

    #: Factor ``c`` of ``batch_size="auto"``: ``min(n // 4, max(64, c sqrt(n)))``.
    _auto_batch_factor = 6

    def _resolve_batch_size(self, n_samples):
        """``batch_size``, with ``"auto"`` resolved to
        ``min(n // 4, max(64, round(c * sqrt(n))))`` with ``c`` the class's
        :attr:`_auto_batch_factor` (6: about 1000 for 30,000 records; never
        more than a quarter of the data)."""
        if self.batch_size == "auto":
            factor = self._auto_batch_factor
            return int(min(max(n_samples // 4, 1), max(64, round(factor * math.sqrt(n_samples)))))
        return int(self.batch_size)

    def _build_module(self, n_features, n_outputs, seed):
        """User module or MLP, initialised from ``seed``; None for linear."""
        if self.module is None and len(self.hidden_layer_sizes) == 0:
            return None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if self.module is not None:
                module = self.module(n_features, n_outputs)
                if not isinstance(module, torch.nn.Module):
                    raise ValueError(
                        "module must be a callable (n_features, n_classes) -> torch.nn.Module; "
                        f"it returned {type(module).__name__}."
                    )
            else:
                module = make_mlp(n_features, n_outputs, tuple(self.hidden_layer_sizes))
        for layer in module.modules():
            if isinstance(layer, (torch.nn.modules.batchnorm._BatchNorm,
                                  torch.nn.modules.dropout._DropoutNd)):
                raise ValueError(
                    f"module contains {type(layer).__name__}, which per-sample gradient "
                    "clipping cannot handle (BatchNorm mixes the records of a batch; dropout "
                    "draws from an unseeded RNG inside vmap). Use GroupNorm/LayerNorm and no "
                    "dropout."
                )
        return module

    def _to_tensor(self, array, device, dtype=torch.float32):
        """``array``'s rows to train on in ``dtype`` on ``device``: a
        :class:`~skdp.models.TrainingRows`, sharing the array's memory where
        it can.

        A C-contiguous float32 or float64 array on the CPU -- a
        ``numpy.memmap`` too, read-only or not -- is viewed, not copied
        (training only reads the rows), and a float64 one is converted a
        batch at a time as it is read, unless it is small and in memory
        (:func:`~skdp.models.training_rows`); anything else is converted
        once. A row store (:func:`~skdp.models.is_row_store`, e.g. an
        ``h5py.Dataset``) is read a batch or a block of rows at a time.
        Remembers whether the rows are read from a file or a store
        (:attr:`_rows_on_disk`), so that the backend gathers batches ahead
        (:meth:`_make_backend`).
        """
        if is_row_store(array):  # read a batch at a time, in the background
            self._rows_on_disk = True
            self._check_representable(array, dtype)
            return training_rows(array, device, dtype)
        array = np.ascontiguousarray(array)
        self._check_representable(array, dtype)
        self._rows_on_disk = _is_file_backed(array)
        return training_rows(array, device, dtype, convert_once=not self._rows_on_disk)

    @staticmethod
    def _check_representable(array, dtype):
        """A ValueError when ``array`` (an array or a row store, read a
        block at a time) has values beyond ``dtype``'s range."""
        limit = torch.finfo(dtype).max
        source = np.dtype(array.dtype)
        if np.issubdtype(source, np.floating) and float(np.finfo(source).max) <= limit:
            return
        n_rows = int(array.shape[0])
        blocks = [array] if isinstance(array, np.ndarray) else (
            np.asarray(array[rows]) for rows in _row_blocks(n_rows))
        if any(block.size and (block.max() > limit or block.min() < -limit)
               for block in blocks):
            raise ValueError(
                f"X has values too large for {dtype} (|x| > {torch.finfo(dtype).max:.3g}), "
                "which training cannot clip; rescale or clip the features first (e.g. with "
                "a scaler or public bounds)."
            )

    #: Batches gathered ahead on background threads when the training rows
    #: are read from a file (a ``numpy.memmap``): two keep the disk busy
    #: while a step computes.
    _prefetch_from_disk = 2

    def _make_backend(self, X_t, n_outputs, seed):
        module = self._build_module(X_t.shape[1], n_outputs, seed)
        self._is_linear = module is None
        backend = make_backend(X_t, n_outputs, module)
        if getattr(self, "_rows_on_disk", False) and X_t.device.type == "cpu":
            backend.prefetch = self._prefetch_from_disk
        return backend

    def _training_threads(self, device):
        """The thread policy of :func:`skdp._training.training_threads` for
        this fit's model (one thread for linear models on the CPU)."""
        return training_threads(self._is_linear, device)

    #: Training precision of the feature tensor.
    _training_dtype = torch.float32

    def _fit_private(self, X, fit):
        """The fit sequence every estimator shell runs; subclasses fill hooks.

        1. ``self._make_generator()``: the randomness of the fit (nothing
           is drawn yet) and the seed of the model's initialisation;
        2. ``self._plan(X, fit, generator)``: the release plan, from public
           settings (hook; it may draw, e.g. a split by coins);
        3. ``self._calibrate(plan, fit)``: the privacy report, timed as
           the calibration time of :func:`skdp.debug.record_fit_times` (hook;
           default :meth:`_spend`);
        4. ``X`` to a tensor in :attr:`_training_dtype` on the device, and
           the model, ``self._make_backend(X_t, n_outputs, seed)`` (building
           it draws nothing from the generator), with the record weights of
           ``fit.sample_weight`` and ``class_weight`` (:meth:`_weigh_records`;
           ``class_weight="balanced"`` draws the noise of its class counts);
        5. ``self._targets(report, generator, device, X_t, fit)``: the
           per-sample targets (hook; may draw the noise of one-off
           releases, e.g. a private target scale), then, with
           ``warm_start``, the previous fit's parameters
           (:meth:`_load_previous`);
        6. ``self._train(backend, targets, report, generator, fit)`` under
           the thread policy, timed for :func:`skdp.debug.record_fit_times`
           (hook);
        7. ``self._store_model(backend, result)``, the report, and
           ``self._store_fitted(report, result, fit)`` (hook: the
           estimator's own fitted attributes); with ``warm_start``, the
           report composed with the previous fit's
           (:meth:`_compose_with_previous`).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Validated features.
        fit : types.SimpleNamespace
            What the shell validated (labels, groups, a target builder...)
            and what hooks hand to later hooks (the sampling rate, ...).

        Returns
        -------
        self
        """
        generator, seed, device = self._make_generator()
        seed = current_communicator().share(seed)  # data-parallel: the root's model
        self._bound_units(fit, generator)
        plan = self._with_class_counts(self._plan(X, fit, generator))
        after = tuple(release for release in (self._score_calibration_release(),
                                              self._model_check_release())
                      if release is not None)
        if after:
            plan = replace(plan, initial=plan.initial + after)
        report, calibration_time = self._timed(self._calibrate, plan, fit)
        X_t = self._to_tensor(X, device, dtype=self._training_dtype)
        backend = self._make_backend(X_t, getattr(fit, "n_outputs", None)
                                     or self._n_model_outputs(), seed)
        self._weigh_records(backend, fit, report, generator, X_t)
        targets = self._targets(report, generator, device, X_t, fit)
        self._load_previous(backend, fit)
        result = self._run_training(
            lambda: self._train(backend, targets, report, generator, fit), device,
            calibration_time,
        )
        self._store_model(backend, result)
        self._calibrate_scores(X, report, generator, fit)
        self._store_privacy_report(report)
        self._store_fitted(report, result, fit)
        self._compose_with_previous(getattr(fit, "previous", None))
        self._check_model(X, report, generator, fit)
        return self

    def _bound_units(self, fit, generator):
        """Set ``fit.units``: the :class:`~skdp.privacy.UnitBounds` of
        ``fit.unit_codes`` (at most ``max_records_per_unit`` records of each
        unit, drawn from ``generator``), or None without units (nothing
        drawn)."""
        codes = getattr(fit, "unit_codes", None)
        fit.units = None
        if codes is None:
            return
        fit.units = bound_units(codes, fit.n_units, int(self.max_records_per_unit), generator)

    def _validated_unit_ids(self, unit_ids, n_samples):
        """``(codes, n_units)`` of ``unit_ids`` (:func:`unit_codes`)."""
        return unit_codes(unit_ids, n_samples)

    def _plan(self, X, fit, generator):
        """The fit's :class:`~skdp.privacy.ReleasePlan` (hook)."""
        raise NotImplementedError

    def _calibrate(self, plan, fit):
        """The privacy report of ``plan`` (hook; default :meth:`_spend`)."""
        return self._spend(plan)

    def _targets(self, report, generator, device, X_t, fit):
        """Per-sample targets of the trainer (hook; default none)."""
        return None

    def _train(self, backend, targets, report, generator, fit):
        """Run the trainer; its result goes to :meth:`_store_model` and
        :meth:`_store_fitted` (hook)."""
        raise NotImplementedError

    def _store_model(self, backend, result):
        """Keep the trained parameters (hook; default :meth:`_store_backend`)."""
        self._store_backend(backend)

    def _store_fitted(self, report, result, fit):
        """The estimator's own fitted attributes (hook; default none)."""

    def _model_check_release(self):
        """The accounted release that checks the returned model, added to the
        plan (hook; none by default, see :class:`BaseDPClassifier`)."""
        return None

    def _score_calibration_release(self):
        """The accounted release that calibrates the trained model's scores,
        added to the plan (hook; none by default, see
        :class:`BaseDPClassifier`)."""
        return None

    def _calibrate_scores(self, X, report, generator, fit):
        """Calibrate the trained model with the release of
        :meth:`_score_calibration_release` (hook; nothing by default)."""

    def _check_model(self, X, report, generator, fit):
        """Check the returned model with the release of
        :meth:`_model_check_release` (hook; nothing by default)."""

    # ------------------------------------- sample weights and warm start
    def _validated_sample_weight(self, sample_weight, X, y_codes=None):
        """``sample_weight`` validated and clipped to ``max_sample_weight``.

        None stays None. Otherwise scikit-learn's ``_check_sample_weight``:
        one finite, non-negative weight per row of ``X``, not all zero (each
        error names ``sample_weight``); with ``y_codes`` (classifiers), at
        least two classes must keep a positive weight (checked before
        anything is spent; one record can decide it, so the error is a
        diagnostic for the data owner and names no count). Weights above
        ``max_sample_weight`` are clipped to it, with a UserWarning that
        says so but not how many: the warning depends on the weights, so it
        is a non-private diagnostic for whoever runs ``fit`` (the data
        owner); it is emitted before training and nothing of it reaches the
        fitted estimator (see :ref:`privacy-sample-weights`).
        """
        if sample_weight is None:
            return None
        weights = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                       ensure_non_negative=True, copy=True)
        bound = float(self.max_sample_weight)
        if (weights > bound).any():
            warnings.warn(
                f"Some sample weights exceed max_sample_weight={bound:g}; they were clipped "
                "to it. Raise max_sample_weight to the largest weight you need (the privacy "
                "guarantee does not depend on it: each record's contribution is scaled by "
                "weight / max_sample_weight), or rescale the weights.",
                UserWarning,
            )
            weights = np.minimum(weights, bound)
        if y_codes is not None:
            kept = np.unique(y_codes[weights > 0])
            if kept.size < 2:
                raise ValueError(
                    f"sample_weight is zero for every sample but those of one class "
                    f"({self.classes_[kept[0]]!r}); {type(self).__name__} needs samples of "
                    "at least 2 classes with positive weight."
                )
        return weights

    def _weigh_records(self, backend, fit, report, generator, X_t):
        """Set ``fit.record_weights``: the factor of each record, or None.

        The factor is ``min(w_i, max_sample_weight) / max_sample_weight``
        (:func:`~skdp.privacy.record_weight_factors`; ``w_i = 1`` without
        ``sample_weight``) times the record's class factor
        (:meth:`_class_factors`). It multiplies each record's clipped
        contribution, so no sensitivity changes. The backend (when there is
        one) applies it to every clipped gradient sum. None -- the
        unweighted code path, bit for bit -- without ``sample_weight`` and
        ``class_weight`` at ``max_sample_weight=1`` and without units.
        With units (``fit.units``) it is also multiplied by the unit factor
        ``1 / min(|u|, max_records_per_unit)`` (0 for a record the unit did
        not keep), so a whole unit moves each sum by at most one record's
        bound.
        """
        weights = getattr(fit, "sample_weight", None)
        classes = self._class_factors(fit, report, generator)
        bound = float(getattr(self, "max_sample_weight", 1.0))
        units = getattr(fit, "units", None)
        fit.record_weights = None
        if weights is None and classes is None and bound == 1.0 and units is None:
            return
        values = torch.ones(X_t.shape[0], dtype=torch.float64)
        if weights is not None:
            values = torch.as_tensor(weights, dtype=torch.float64)
        factors = record_weight_factors(values, bound)
        if classes is not None:
            factors = factors * torch.as_tensor(classes[fit.y_codes], dtype=torch.float64)
        if units is not None:  # a unit's factors sum to at most 1
            factors = factors * torch.as_tensor(units.factors, dtype=torch.float64)
        fit.record_weights = factors.to(device=X_t.device, dtype=X_t.dtype)
        if backend is not None:
            backend.record_weights = fit.record_weights

    def _with_class_counts(self, plan):
        """``plan`` with the release of :meth:`_class_count_release`, if any."""
        release = self._class_count_release()
        if release is None:
            return plan
        return replace(plan, initial=plan.initial + (release,))

    def _class_count_release(self):
        """The accounted release of the class counts of
        ``class_weight="balanced"`` (hook; none by default, see
        :class:`BaseDPClassifier`)."""

    def _class_factors(self, fit, report, generator):
        """Per-class weight factors in (0, 1], or None (hook; none by
        default, see :class:`BaseDPClassifier`)."""

    def _previous_fit(self):
        """What ``warm_start=True`` continues from, or None.

        None unless ``warm_start`` is set and the estimator is fitted;
        otherwise a snapshot of the fitted parameters and privacy report,
        and of the attributes that validating the new data overwrites (put
        back by :meth:`_check_warm_start` when the data does not match).
        """
        if not getattr(self, "warm_start", False) or not hasattr(self, "privacy_report_"):
            return None
        keep = ("n_features_in_", "feature_names_in_", "classes_", "groups_")
        report = self.privacy_report_
        return SimpleNamespace(
            report=report,
            # a model released outside the accountant (epsilon_ inf) is not private
            private=report.private and math.isfinite(self.epsilon_),
            coef=None if getattr(self, "coef_", None) is None else np.array(self.coef_),
            intercept=(None if getattr(self, "intercept_", None) is None
                       else np.array(self.intercept_)),
            module_state=getattr(self, "module_state_", None),
            attributes={k: getattr(self, k) for k in keep if hasattr(self, k)},
        )

    def _check_warm_start(self, previous, unit_ids=None):
        """A ValueError when the new data does not continue ``previous``:
        other features (count) or other classes, or a privacy unit that does
        not compose with the previous fit's (``unit_ids`` given to one fit
        and not the other, :func:`~skdp.privacy.check_same_privacy_unit`),
        refused before anything is spent. The previous fitted attributes are
        put back first, so the fitted estimator stays usable."""
        if previous is None:
            return
        before = previous.attributes
        problem = None
        if self.n_features_in_ != before["n_features_in_"]:
            problem = (f"X has {self.n_features_in_} features, but {type(self).__name__} was "
                       f"fitted with {before['n_features_in_']} features")
        elif "classes_" in before and not np.array_equal(
                np.asarray(getattr(self, "classes_", [])), np.asarray(before["classes_"])):
            problem = (f"y has the classes {list(self.classes_)}, but {type(self).__name__} "
                       f"was fitted with the classes {list(before['classes_'])}")
        elif previous.private and (previous.report.privacy_unit == "record") != (
                unit_ids is None):
            problem = ("the previous fit was about "
                       + ("records (no unit_ids)" if unit_ids is not None else
                          f"{previous.report.privacy_unit} (unit_ids)")
                       + ", this one about "
                       + ("units (unit_ids)" if unit_ids is not None else "records (no unit_ids)")
                       + "; their epsilons do not compose (see "
                       "skdp.privacy.check_same_privacy_unit)")
        if problem is None:
            return
        for name in ("feature_names_in_", "classes_", "groups_"):
            self.__dict__.pop(name, None)
        self.__dict__.update(before)
        raise ValueError(
            f"warm_start=True continues the previous fit, so the data must match it: "
            f"{problem}. Use warm_start=False (or a fresh estimator) to train on this data."
        )

    def _load_previous(self, backend, fit):
        """With ``warm_start``, put the previous fit's parameters into the
        model (or, without a backend, into ``fit.initial_weights``) so that
        training continues from them. Only the model parameters carry over:
        an algorithm's other state (dual variables, optimizer moments) starts
        afresh."""
        previous = getattr(fit, "previous", None)
        fit.initial_weights = None
        if previous is None:
            return
        linear = previous.module_state is None
        if linear != self._is_linear:
            raise ValueError(
                "warm_start=True continues the previous model, but it was "
                f"{'linear' if linear else 'a torch module'} and the parameters now ask for "
                f"{'a linear model' if self._is_linear else 'a torch module'}; keep "
                "hidden_layer_sizes and module, or use warm_start=False."
            )
        if linear:
            weights = self._linear_weights(previous.coef, previous.intercept)
            if backend is None:
                fit.initial_weights = weights
                return
            with torch.no_grad():
                backend.weights.copy_(torch.as_tensor(weights, dtype=backend.weights.dtype))
            return
        state = {k: torch.as_tensor(v) for k, v in previous.module_state.items()}
        try:
            backend.module.load_state_dict(state)
        except RuntimeError as exc:
            raise ValueError(
                f"warm_start=True cannot load the previous module's parameters ({exc}); keep "
                "hidden_layer_sizes and module, or use warm_start=False."
            ) from exc

    def _linear_weights(self, coef, intercept):
        """The backend's weight matrix (bias last) of ``coef_`` and
        ``intercept_``: the inverse of ``_set_linear_params`` (subclasses)."""
        raise NotImplementedError

    def _compose_with_previous(self, previous):
        """With ``warm_start``, the fitted privacy attributes of both fits
        together (:func:`~skdp.privacy.compose_reports`): ``dp_event_`` the
        composition of the previous and the new event, ``epsilon_`` the
        accountant's for it. Composition assumes the worst case, that both
        fits saw the same records."""
        if previous is None:
            return
        report = self.privacy_report_
        outside = report.private and not math.isfinite(self.epsilon_)
        earlier = previous.report if previous.private else replace(previous.report, dp_event=None)
        self._store_privacy_report(compose_reports(earlier, report), delta=self.delta_)
        if outside:  # the new model was chosen outside the accountant
            self.epsilon_ = np.inf

    def _run_training(self, train, device, calibration_time):
        """Call ``train()`` under :meth:`_training_threads`; report the timings
        to :func:`skdp.debug.record_fit_times` (never a fitted attribute: they
        depend on the data).

        Parameters
        ----------
        train : callable
            Runs the trainer; called once without arguments.
        device : torch.device
            Device of the fit (the thread policy depends on it).
        calibration_time : float
            Seconds spent before training on calibrating the noise.

        Returns
        -------
        result
            What ``train()`` returned (e.g. the trainer's history).
        """
        with self._training_threads(device):
            result, training_time = self._timed(train)
        report_fit_times(self, calibration=calibration_time, training=training_time)
        return result

    def _store_backend(self, backend):
        """Keep fitted parameters as numpy arrays (picklable, clone-safe).

        Linear models go through ``_set_linear_params(weights)`` (weights of
        shape (n_outputs, n_features + 1), bias last); modules keep their
        state dict in ``module_state_``.
        """
        state = backend.state()
        if not all(np.isfinite(v).all() for v in state.values() if np.issubdtype(v.dtype, np.floating)):
            raise ValueError(
                f"{type(self).__name__} diverged: the trained parameters are not finite. "
                "Lower learning_rate (or dual_learning_rate), or raise max_grad_norm less."
            )
        if self._is_linear:
            self._set_linear_params(state["weights"])
            self.module_state_ = None
        else:
            self.module_state_ = state
            self.coef_ = self.intercept_ = None

    def privacy_curve(self, n_points=10):
        """Epsilon spent after each of ``n_points`` step counts up to ``n_steps_``.

        Computed from the fitted privacy report (which depends only on public
        settings), so it releases nothing about the data; one-off releases
        before training are included in every point.

        Parameters
        ----------
        n_points : int, default=10

        Returns
        -------
        curve : ndarray of shape (n_points, 2)
            Columns: step count, epsilon at ``delta_``.
        """
        check_is_fitted(self)
        if self.dp_event_ is None:
            raise ValueError("The estimator was fitted with epsilon=None: nothing was accounted.")
        return self.privacy_report_.privacy_curve(n_points)

    # -------------------------------------------------------------- predict
    def _validate_predict_X(self, X):
        check_is_fitted(self)
        X = self._without_fit_only_columns(X)
        return validate_data(self, X, dtype=[np.float64, np.float32], reset=False)

    def _fit_only_columns(self):
        """Columns of ``X`` that ``fit`` reads and the model does not use
        (``sensitive_columns``, ``unit_column``; DP-FERMI adds
        ``silo_column``)."""
        return (_column_list(getattr(self, "sensitive_columns", None))
                + _column_list(getattr(self, "unit_column", None)))

    def _without_fit_only_columns(self, X):
        """``X`` for prediction, with or without the fit-only columns: named
        columns of a DataFrame are dropped when present; otherwise ``X``
        must have either the model's ``n_features_in_`` columns or those
        plus the fit-only ones (dropped by position)."""
        columns = self._fit_only_columns()
        if not columns:
            return X
        if _is_dataframe(X) and all(isinstance(c, str) for c in columns):
            present = [c for c in columns if c in X.columns]
            return X.drop(columns=present) if present else X
        n_columns = (X.shape if hasattr(X, "shape") else np.shape(X))[1]
        if n_columns == self.n_features_in_:
            return X
        if n_columns != self.n_features_in_ + len(columns):
            raise ValueError(
                f"X has {n_columns} columns; {type(self).__name__} was fitted on "
                f"{self.n_features_in_} features, plus the columns {columns} that only fit "
                f"reads: pass {self.n_features_in_} columns (without them) or "
                f"{self.n_features_in_ + len(columns)} (with them)."
            )
        if not all(isinstance(c, Integral) for c in columns):
            raise ValueError(
                f"X has no column names, so the columns {columns} cannot be found; predict "
                f"on a DataFrame, or on the {self.n_features_in_} model features only."
            )
        if _is_dataframe(X):
            return X.drop(columns=X.columns[np.mod(columns, n_columns)])
        X = np.asarray(X) if not hasattr(X, "shape") else X
        keep = np.setdiff1d(np.arange(n_columns), np.mod(columns, n_columns))
        return X[:, keep]

    def _module_outputs(self, X):
        """Outputs of the fitted torch module on ``X``, shape (n, n_outputs).

        Inference runs on a float64 copy of the module (training may be
        float32): float32 matrix products are blocked differently for
        different numbers of rows, so a row's float32 score would depend on
        the other rows of the call, beyond scikit-learn's 1e-7 tolerance.
        In float64 those differences are near 1e-16.
        """
        module = self._build_module(self.n_features_in_, self._n_model_outputs(), 0)
        module.load_state_dict({k: torch.as_tensor(v) for k, v in self.module_state_.items()})
        module = module.to(torch.float64).eval()
        out = np.empty((X.shape[0], self._n_model_outputs()), dtype=np.float64)
        # blocks of rows keep the activations in cache (about twice as fast
        # as one call on a million rows) and convert X to float64 a block at
        # a time; rows never interact
        with torch.no_grad():
            for start in range(0, X.shape[0], _PREDICT_BLOCK):
                block = torch.as_tensor(
                    np.asarray(X[start:start + _PREDICT_BLOCK], dtype=np.float64))
                out[start:start + _PREDICT_BLOCK] = module(block).numpy()
        return out


class BaseDPClassifier(ClassifierMixin, BaseDPEstimator):
    """Base class for skdp classifiers trained with a private torch loop.

    Subclasses implement ``_fit_private(X, y_codes, groups)`` that trains and
    sets ``self._backend_state``, and the privacy attributes. Everything that
    does not depend on the task lives in :class:`BaseDPEstimator`.
    """

    # With metadata routing on, ``fit`` asks for the groups by default, so
    # ``GridSearchCV(...).fit(X, y, sensitive_features=s)`` needs no
    # ``set_fit_request`` call (as ``GroupKFold`` asks for ``groups``).
    # ``unit_ids`` likewise: an estimator that cannot use them raises, so
    # they are never dropped on the way.
    __metadata_request__fit = {"sensitive_features": True, "unit_ids": True}

    _released_attributes = BaseDPEstimator._released_attributes | {
        "score_calibration_", "check_log_loss_", "check_constant_log_loss_",
        "prediction_counts_", "prediction_shares_", "class_weight_",
    }

    _parameter_constraints = {
        **BaseDPEstimator._parameter_constraints,
        "sensitive_columns": [str, Integral, list, tuple, None],
        "sensitive_groups": ["array-like", None],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "calibration": [StrOptions({"auto"}), None],
    }

    # ------------------------------------------------------------------ fit
    def _validate_training_data(self, X, y, sensitive_features, *, units=False,
                                unit_ids=None):
        """Validate X, y and groups; set classes_, n_features_in_, groups_.

        Returns ``(X, y_codes, group_codes)`` with X a float numpy array and
        group codes None when no sensitive features were given. With
        ``units=True`` the ``unit_column`` is taken out of X too, and a
        fourth value is returned: ``unit_ids`` if given, else that column
        (None without either).
        """
        if units:
            X, from_columns, from_unit_column = split_fit_only_columns(
                X, self.sensitive_columns, getattr(self, "unit_column", None))
            unit_ids = from_unit_column if unit_ids is None else unit_ids
            result = self._validate_split_data(X, y, sensitive_features, from_columns)
            return (*result, unit_ids)
        X, from_columns = split_sensitive_columns(X, self.sensitive_columns)
        return self._validate_split_data(X, y, sensitive_features, from_columns)

    def _validate_split_data(self, X, y, sensitive_features, from_columns):
        """:meth:`_validate_training_data` once the fit-only columns are out
        of ``X`` (``from_columns``: the sensitive columns' values, or None)."""
        if sensitive_features is None:
            sensitive_features = from_columns
        X, y = self._validated_X_y(self, X, y)
        check_classification_targets(y)
        encoder = LabelEncoder()
        y_codes = encoder.fit_transform(y)
        # in a data-parallel fit, the classes of all ranks (a shard may lack some)
        comm = current_communicator()
        self.classes_ = comm.union(encoder.classes_)
        if len(self.classes_) != len(encoder.classes_):
            y_codes = np.searchsorted(self.classes_, encoder.classes_)[y_codes]
        if len(self.classes_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in y; got 1 class "
                f"({self.classes_[0]!r})."
            )
        n = X.shape[0]
        if sensitive_features is None:
            self.groups_ = None
            return X, y_codes, None
        if self.sensitive_groups is None:
            group_codes, self.groups_ = encode_groups(sensitive_features, n)
            groups = comm.union(self.groups_)
            if len(groups) != len(self.groups_):
                group_codes, self.groups_ = encode_groups(sensitive_features, n, groups=groups)
            return X, y_codes, group_codes
        group_codes, domain = encode_groups(sensitive_features, n, groups=self.sensitive_groups)
        if (group_codes < 0).any():
            raise ValueError(
                f"sensitive_features holds {int((group_codes < 0).sum())} value(s) outside "
                f"sensitive_groups={list(domain)[:10]}; list every group there."
            )
        self.groups_ = domain
        return X, y_codes, group_codes

    def _n_model_outputs(self):
        return len(self.classes_)

    def _set_linear_params(self, weights):
        coef, intercept = weights[:, :-1], weights[:, -1]
        if len(self.classes_) == 2:
            # two-logit softmax == one-logit sigmoid on the difference
            coef = coef[1:] - coef[:1]
            intercept = intercept[1:] - intercept[:1]
        self.coef_, self.intercept_ = coef, intercept

    def _linear_weights(self, coef, intercept):
        """Softmax weights (bias last) with the logits of ``coef_`` and
        ``intercept_``; a binary model puts them on the second logit (the
        two-logit softmax only sees the difference)."""
        coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
        intercept = np.atleast_1d(np.asarray(intercept, dtype=np.float64))
        weights = np.column_stack([coef, intercept])
        if len(self.classes_) == 2:
            weights = np.vstack([np.zeros_like(weights), weights])
        return weights

    # ------------------------------------------------------- class weights
    def _class_count_release(self):
        """``class_weight="balanced"``: one Gaussian release of the class
        counts before training (a record adds 1 to one count: l2
        sensitivity 1), with :data:`_CLASS_COUNT_SHARE` of the budget (GDP
        ``mu^2``); None otherwise or without privacy."""
        if self.epsilon is None or not _is_balanced(getattr(self, "class_weight", None)):
            return None
        return InitialRelease("class_counts", sensitivity=1.0, budget_share=_CLASS_COUNT_SHARE)

    def _class_factors(self, fit, report, generator):
        """Each class's weight over the largest class weight, in (0, 1], or
        None without ``class_weight``; sets ``class_weight_``.

        A dict is public; ``"balanced"`` is ``n / (n_classes * count_c)``
        from the noisy class counts of :meth:`_class_count_release` (exact
        without privacy; :func:`~skdp.privacy.balanced_class_weights`:
        floored at one record, within a factor 100 of the largest).
        ``class_weight_`` is the factors times ``max_sample_weight``: the
        largest class weight is the bound, so sensitivities do not change.
        """
        class_weight = getattr(self, "class_weight", None)
        self.class_weight_ = None
        if class_weight is None:
            return None
        n_classes = len(self.classes_)
        if _is_balanced(class_weight):
            counts = np.bincount(fit.y_codes, weights=_unit_factors(fit),
                                 minlength=n_classes).astype(np.float64)
            std = (report.scale("class_counts")
                   if report.private and "class_counts" in report.noise else None)
            weights = balanced_class_weights(release_counts(counts, std, generator))
        else:
            weights = self._class_weight_dict(class_weight)
        factors = weights / weights.max()
        self.class_weight_ = float(getattr(self, "max_sample_weight", 1.0)) * factors
        return factors

    def _class_weight_dict(self, class_weight):
        """The weights of a ``class_weight`` dict in ``classes_`` order (1
        for a class it leaves out)."""
        unknown = [label for label in class_weight if label not in set(self.classes_.tolist())]
        if unknown:
            raise ValueError(
                f"class_weight names the classes {unknown[:10]}, which are not in y (classes "
                f"{list(self.classes_)[:10]})."
            )
        weights = np.array([class_weight.get(label, 1.0) for label in self.classes_.tolist()],
                           dtype=np.float64)
        if not np.all(np.isfinite(weights)) or (weights < 0).any() or not (weights > 0).any():
            raise ValueError(
                "class_weight must map classes to finite, non-negative weights, at least one "
                f"positive; got {class_weight!r}."
            )
        return weights

    # -------------------------------------------------------------- predict
    def _raw_logits(self, X):
        if self.module_state_ is None:
            return _linear_scores(X, self.coef_.T, self.intercept_)
        return self._module_outputs(X)

    def decision_function(self, X):
        """Class scores (logits) for ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for binary problems (score of
        ``classes_[1]`` against ``classes_[0]``), else (n_samples, n_classes).
        """
        return self._decision(self._validate_predict_X(X))

    def _decision(self, X):
        """:meth:`decision_function` of validated ``X``."""
        scores = self._raw_logits(X)
        if len(self.classes_) == 2:
            if scores.shape[1] == 2:
                scores = scores[:, 1:] - scores[:, :1]
            scores = scores[:, 0]
            score_map = getattr(self, "_module_score_map", None)
            if score_map is not None:
                scores = score_map[0] * scores + score_map[1]
        return scores

    @staticmethod
    def _proba_from_scores(scores):
        if scores.ndim == 1:
            positive = expit(scores)
            return np.column_stack([1.0 - positive, positive])
        return softmax(scores.copy())

    def predict_proba(self, X):
        """Class probabilities for ``X``, shape (n_samples, n_classes)."""
        return self._proba_from_scores(self.decision_function(X))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class for each row of ``X``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    # ------------------------------------------------ score calibration
    #: Private calibration of a binary model's scores after training:
    #: ``"platt"`` (scale and shift), ``"temperature"`` (scale only, which
    #: keeps every prediction) or None. See :mod:`skdp._calibration`.
    _score_calibration = "platt"

    def _score_calibration_release(self):
        """One Gaussian release after training of the counts of (score bin,
        true class) of the trained model (:mod:`skdp._calibration`): a record
        adds 1 to one count, l2 sensitivity 1. It spends
        :data:`_CALIBRATION_SHARE` of the budget; None without privacy, for
        multiclass problems, with ``calibration=None``, or when the estimator
        does not calibrate."""
        if (self.epsilon is None or self._score_calibration is None
                or getattr(self, "calibration", "auto") is None or len(self.classes_) != 2):
            return None
        return InitialRelease("score_calibration", sensitivity=1.0,
                              budget_share=_CALIBRATION_SHARE)

    def _calibrate_scores(self, X, report, generator, fit):
        """Map the trained model's scores ``s`` to ``scale * s + shift``
        fitted on the noisy release (post-processing); linear models take the
        map into ``coef_`` and ``intercept_``. Sets ``score_calibration_``,
        the ``(scale, shift)`` applied, or None."""
        self.score_calibration_ = None
        self._module_score_map = None
        if not (report.private and "score_calibration" in report.noise):
            return
        with np.errstate(invalid="ignore", over="ignore"):
            scores = self._decision(X)
        weights = getattr(fit, "record_weights", None)
        if weights is not None:  # calibrate the weighted problem the model was trained on
            weights = weights.detach().cpu().numpy()
        counts = sum(calibration_counts(scores[rows], fit.y_codes[rows],
                                        None if weights is None else weights[rows])
                     for rows in _row_blocks(len(scores)))
        std = report.scale("score_calibration")
        counts = release_counts(counts, std, generator)
        scale, shift = fit_score_map(counts, std,
                                     temperature_only=self._score_calibration == "temperature")
        if self.module_state_ is None:
            self.coef_ = scale * self.coef_
            self.intercept_ = scale * self.intercept_ + shift
        else:
            self._module_score_map = (scale, shift)
        self.score_calibration_ = (scale, shift)

    # ------------------------------------------------------ model check
    def _model_check_release(self):
        """One joint Gaussian release on the training data after training:
        the counts of (group, true class, predicted class) of the *returned*
        model, and the sum of its per-record log-losses clipped to
        :data:`_CHECK_LOSS_BOUND` and divided by it. A record adds 1 to one
        count and at most 1 to the sum: l2 sensitivity sqrt(2). It spends
        :data:`_CHECK_SHARE` of the budget (GDP ``mu^2``); None without
        privacy (the check is then exact)."""
        if self.epsilon is None:
            return None
        return InitialRelease("model_check", sensitivity=math.sqrt(2.0),
                              budget_share=_CHECK_SHARE)

    def _check_model(self, X, report, generator, fit):
        """The private check of the returned model (post-processing of the
        ``"model_check"`` release): ``prediction_counts_``,
        ``prediction_shares_``, ``check_log_loss_`` and
        ``check_constant_log_loss_``, and a warning when the model is (nearly)
        constant or its probabilities are worse than a constant predictor's,
        each only when the noisy figure is beyond the threshold by one noise
        standard deviation (on small data sets the check can then say
        nothing)."""
        y_codes = getattr(fit, "y_codes", None)
        if y_codes is None:
            return
        n_classes = len(self.classes_)
        group_codes = getattr(fit, "group_codes", None)
        n_groups = 1 if self.groups_ is None or group_codes is None else len(self.groups_)
        with np.errstate(invalid="ignore", over="ignore"):
            scores = self._decision(X)
        # with units, a record adds its unit factor: a unit adds at most 1
        unit_factors = _unit_factors(fit)
        counts = np.zeros(n_groups * n_classes * n_classes)
        losses = np.empty(len(y_codes))
        # a block of rows at a time: the per-record temporaries cost one
        # block of memory, not several copies of the scores
        for rows in _row_blocks(len(y_codes)):
            weights = None if unit_factors is None else unit_factors[rows]
            groups = 0 if n_groups == 1 else group_codes[rows]
            counts += self._check_counts(scores[rows], y_codes[rows], groups, weights,
                                         losses[rows], len(counts))
        values = np.concatenate([counts, [losses.sum()]])
        std = None
        if report.private and "model_check" in report.noise:
            std = report.scale("model_check")
        values = release_counts(values, std, generator)
        self.prediction_counts_ = values[:-1].reshape(n_groups, n_classes, n_classes)
        self.check_noise_std_ = std
        self._judge_model(values[-1] * _CHECK_LOSS_BOUND, std)

    def _check_counts(self, scores, y_codes, groups, weights, losses, n_cells):
        """The ``n_cells`` counts of (group, true class, predicted class) of
        rows with ``scores`` (weighted by ``weights`` when not None), and their
        clipped log-losses over :data:`_CHECK_LOSS_BOUND` (times
        ``weights``) written into ``losses``."""
        n_classes = len(self.classes_)
        with np.errstate(invalid="ignore", over="ignore"):
            proba = self._proba_from_scores(scores)
        # an extreme record's overflowing scores must not reach the release
        proba = np.where(np.isfinite(proba), proba, 1.0 / n_classes)
        cells = (groups * n_classes + y_codes) * n_classes + proba.argmax(1)
        p_true = proba[np.arange(len(y_codes)), y_codes]
        bound = _CHECK_LOSS_BOUND
        with np.errstate(divide="ignore", invalid="ignore"):
            losses[:] = np.minimum(-np.log(np.maximum(p_true, 0.0)), bound) / bound
        np.nan_to_num(losses, copy=False, nan=1.0, posinf=1.0)
        if weights is not None:
            losses *= weights
        return np.bincount(cells, weights=weights, minlength=n_cells)

    def _judge_model(self, loss_sum, std):
        """Fitted summaries and warnings from the noisy check (post-processing).

        The verdicts need a total count well above its own noise (four
        standard deviations of the noisy total): with fewer records (or
        units) the shares and the mean log-loss are noise, and the warning
        says that the check cannot judge the model instead of a verdict."""
        counts = self.prediction_counts_  # noisy, may be negative
        n_groups, n_classes, _ = counts.shape
        n = max(float(counts.sum()), 1.0)
        total_std = 0.0 if std is None else std * math.sqrt(counts.size)
        predicted = counts.sum((0, 1))
        true = counts.sum((0, 2))
        self.prediction_shares_ = np.clip(predicted, 0.0, None) / max(
            float(np.clip(predicted, 0.0, None).sum()), 1.0)
        true_shares = np.clip(true / n, 1e-12, 1.0)
        true_shares = true_shares / true_shares.sum()
        self.check_log_loss_ = float(loss_sum) / n
        self.check_constant_log_loss_ = float(-(true_shares * np.log(true_shares)).sum())
        top = int(np.argmax(predicted))
        others = n - predicted[top]
        # one standard deviation of the noisy count of the other predictions
        others_std = 0.0 if std is None else std * math.sqrt(
            n_groups * n_classes * (n_classes - 1))
        label = self.classes_[top]
        label = label.item() if isinstance(label, np.generic) else label
        if n < _CHECK_MIN_SIGNAL * total_std:
            warnings.warn(
                f"{type(self).__name__}: the private check of the returned model cannot "
                "judge it: there are too few records (or units) for the noise of its "
                f"counts at this budget (noisy total {n:.0f}, noise {total_std:.0f}), so "
                "the model may be little better than noise too. Give more data or raise "
                "epsilon.",
                UserWarning,
            )
            return
        if others + others_std < _CONSTANT_MINORITY * n:
            warnings.warn(
                f"{type(self).__name__} predicts class {label!r} for about "
                f"{100 * self.prediction_shares_[top]:.1f}% of the training records "
                "(private check of the returned model, prediction_shares_): it is (nearly) "
                "a constant classifier. Common causes: features on raw scales (amounts in "
                "the thousands or millions make every clipped gradient tiny; scale them, "
                "e.g. with skdp.preprocessing.DPStandardScaler and public bounds), too few "
                "steps or too much noise (raise epsilon or max_epochs), or constraints "
                "that only a constant model meets.",
                UserWarning,
            )
        loss_error = 0.0 if std is None else std * _CHECK_LOSS_BOUND / n
        if self.check_log_loss_ - loss_error > self.check_constant_log_loss_:
            warnings.warn(
                f"{type(self).__name__}'s predicted probabilities are worse than a constant "
                f"predictor's on the training records: mean log-loss about "
                f"{self.check_log_loss_:.3f} against {self.check_constant_log_loss_:.3f} for "
                "predicting the class shares (private check of the returned model, "
                "check_log_loss_). Scale the features, raise epsilon or max_epochs, or do "
                "not use predict_proba as probabilities.",
                UserWarning,
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # DP noise and clipping can cost accuracy on the tiny data sets the
        # generic checks use.
        tags.classifier_tags.poor_score = True
        return tags


#: The model check warns only when its noisy total count is at least this
#: many of its standard deviations (:meth:`BaseDPClassifier._judge_model`).
_CHECK_MIN_SIGNAL = 4.0


def _unit_factors(fit):
    """The unit factors of a fit with units (a float64 array), else None."""
    units = getattr(fit, "units", None)
    return None if units is None else units.factors


#: Share of the budget (GDP ``mu^2``) of the noisy class counts of
#: ``class_weight="balanced"`` (:meth:`BaseDPClassifier._class_count_release`).
_CLASS_COUNT_SHARE = 0.02


def _is_balanced(class_weight):
    return isinstance(class_weight, str) and class_weight == "balanced"


#: Share of the budget (GDP ``mu^2``) of the private check of a fitted
#: classifier (:meth:`BaseDPClassifier._model_check_release`).
_CHECK_SHARE = 0.02
#: Per-record log-loss bound of that check.
_CHECK_LOSS_BOUND = 10.0
#: A classifier whose other predictions are below this share of the records
#: (by one standard deviation of the check's noise) is reported as (nearly)
#: constant.
_CONSTANT_MINORITY = 0.02
#: Share of the budget (GDP ``mu^2``) of the private calibration of a binary
#: classifier's scores (:meth:`BaseDPClassifier._score_calibration_release`).
_CALIBRATION_SHARE = 0.1


#: Exponents k of the log2 bins ``[2**(k-1), 2**k)`` of |y| in the private
#: target-scale histogram; values below (above) fall in the first (last) bin.
_SCALE_EXPONENTS = np.arange(-20, 41)


def _target_histogram(y, weights=None):
    """Counts of ``|y|`` in the bins of :data:`_SCALE_EXPONENTS` (a record
    adds its weight, 1 without ``weights``, to one bin)."""
    magnitude = np.abs(y)
    with np.errstate(divide="ignore"):
        exponents = np.ceil(np.log2(np.where(magnitude > 0, magnitude, np.inf)))
    exponents = np.where(magnitude > 0, exponents, _SCALE_EXPONENTS[0])
    # values exactly at a power of two belong to the bin they top
    bins = np.clip(exponents, _SCALE_EXPONENTS[0], _SCALE_EXPONENTS[-1]) - _SCALE_EXPONENTS[0]
    return np.bincount(bins.astype(int), weights=weights,
                       minlength=len(_SCALE_EXPONENTS)).astype(float)


class BaseDPRegressor(RegressorMixin, BaseDPEstimator):
    """Base class for skdp regressors trained with a private torch loop.

    Adds what regression needs on top of :class:`BaseDPEstimator`: target
    validation, the target scaling that keeps the squared loss's clipped
    gradients useful (public ``y_bounds``, or a private power-of-two scale
    bought with a small share of the budget), and prediction in the units of
    ``y``.

    The model is trained on ``(y - y_offset_) / y_scale_``; ``coef_``,
    ``intercept_`` and predictions are mapped back, so they are in the
    units of ``y``.
    """

    _released_attributes = BaseDPEstimator._released_attributes | {"y_scale_", "y_offset_"}

    _parameter_constraints = {
        **BaseDPEstimator._parameter_constraints,
        "y_bounds": [tuple, list, None],
    }

    #: Share of the budget's GDP mu^2 spent on the private target scale.
    _target_scale_share = 0.04

    def _n_model_outputs(self):
        return 1

    # ------------------------------------------------------------------ fit
    def _validate_regression_data(self, X, y):
        """Validate X and y (numeric, finite, 1-D); return float arrays."""
        try:
            X, y = self._validated_X_y(self, X, y, y_numeric=True)
        except ValueError as exc:
            if "Input y contains" in str(exc):
                raise ValueError(
                    f"y must be finite: {exc}. Drop or impute the rows with missing or "
                    "infinite targets before fitting."
                ) from exc
            raise
        y = np.asarray(y, dtype=np.float64)
        if np.abs(y).max(initial=0.0) > np.finfo(np.float32).max:
            raise ValueError(
                "y has values too large for float32 training (|y| > 3.4e38); rescale the "
                "targets first."
            )
        self._check_y_bounds()
        return X, y

    def _check_y_bounds(self):
        bounds = self.y_bounds
        if bounds is None:
            return None
        if len(bounds) != 2 or not all(isinstance(b, Real) for b in bounds):
            raise ValueError(
                f"y_bounds must be a pair (low, high) of numbers or None; got {bounds!r}."
            )
        low, high = float(bounds[0]), float(bounds[1])
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(
                f"y_bounds must be finite with low < high; got {bounds!r}. They are public "
                "bounds on the target (e.g. from the target's definition), not the range "
                "seen in the data."
            )
        return low, high

    def _target_release(self):
        """The one-off release of the private target scale, or None.

        A histogram of ``log2 |y|`` bins: one record adds 1 to one bin, so
        its l2 sensitivity is 1 under add/remove-one neighbours.
        """
        if self.epsilon is None or self.y_bounds is not None:
            return None
        return InitialRelease("target_scale", sensitivity=1.0,
                              budget_share=self._target_scale_share)

    def _scale_targets(self, y, report, generator, device, weights=None):
        """Set ``y_offset_``/``y_scale_`` and return the scaled targets.

        With ``y_bounds=(low, high)``: y is clipped to the bounds and mapped
        to [-1, 1] (no budget spent). Otherwise ``y_scale_`` is the power of
        two that tops the largest bin of a (noisy, when private) histogram
        of ``log2 |y|`` whose count exceeds 4 noise standard deviations, and
        ``y_offset_`` is 0. ``weights`` (the unit factors of a fit with
        units, or None) weigh each record's histogram row, so that a unit
        adds at most 1.
        """
        bounds = self._check_y_bounds()
        if bounds is not None:
            low, high = bounds
            self.y_offset_ = (low + high) / 2.0
            self.y_scale_ = (high - low) / 2.0
            return (np.clip(y, low, high) - self.y_offset_) / self.y_scale_
        counts = _target_histogram(y, weights)
        threshold, std = 0.0, None
        if report is not None and report.private and "target_scale" in report.noise:
            std = report.scale("target_scale")
            threshold = 4.0 * std
        counts = release_counts(counts, std, generator, device)
        above = np.flatnonzero(counts > threshold)
        if above.size:
            exponent = _SCALE_EXPONENTS[above[-1]]
        else:
            exponent = _SCALE_EXPONENTS[int(np.argmax(counts))]
            if self.verbose:
                print(
                    f"[{type(self).__name__}] no bin of the private target histogram stands "
                    "out from its noise; give y_bounds for a reliable target scale"
                )
        self.y_offset_ = 0.0
        self.y_scale_ = float(2.0 ** exponent)
        return y / self.y_scale_

    def _set_linear_params(self, weights):
        self.coef_ = weights[0, :-1] * self.y_scale_
        self.intercept_ = float(weights[0, -1] * self.y_scale_ + self.y_offset_)

    def _linear_weights(self, coef, intercept):
        """The weights (bias last) of ``coef_`` and ``intercept_`` on the
        scaled targets of this fit (``y_scale_`` and ``y_offset_``)."""
        coef = np.asarray(coef, dtype=np.float64).reshape(-1) / self.y_scale_
        bias = (float(np.asarray(intercept).reshape(-1)[0]) - self.y_offset_) / self.y_scale_
        return np.concatenate([coef, [bias]])[None, :]

    # -------------------------------------------------------------- predict
    def predict(self, X):
        """Predicted targets for ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        X = self._validate_predict_X(X)
        if self.module_state_ is None:
            return _linear_scores(X, self.coef_, self.intercept_)
        return self._module_outputs(X)[:, 0] * self.y_scale_ + self.y_offset_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # DP noise and clipping can cost accuracy on the tiny data sets the
        # generic checks use.
        tags.regressor_tags.poor_score = True
        return tags

