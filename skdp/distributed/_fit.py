"""``fit_data_parallel``: one skdp fit over the shards of a process group."""

import re

import numpy as np
import torch.distributed as dist

from ..bilevel import DPBilevelLogisticRegression, DPBilevelRidge
from ..fairness import DPFERMIClassifier, DPRateConstrainedClassifier
from ..linear_model import DPSGDClassifier, DPSGDRegressor
from ..privacy import using_communicator
from ..robust import DPDROClassifier, DPDRORegressor
from ._communicator import TorchCommunicator

#: The public estimators; those with ``_data_parallel`` set train data-parallel.
_ESTIMATORS = (DPSGDClassifier, DPSGDRegressor, DPRateConstrainedClassifier, DPFERMIClassifier,
               DPDROClassifier, DPDRORegressor, DPBilevelLogisticRegression, DPBilevelRidge)


def supported_estimators():
    """Names of the skdp estimators that :func:`fit_data_parallel` trains.

    >>> from skdp.distributed import supported_estimators
    >>> "DPSGDClassifier" in supported_estimators()
    True
    """
    return sorted(estimator.__name__ for estimator in _ESTIMATORS
                  if getattr(estimator, "_data_parallel", False))


def fit_data_parallel(estimator, X, y, *, group=None, **fit_params):
    """Fit ``estimator`` on the rows of every rank of a process group.

    Call it on every rank of an initialised ``torch.distributed`` process
    group (e.g. under ``torchrun``), each with its own shard of the rows;
    the global data set is the shards in rank order. The fit is the
    single-process fit of the concatenated data: the root (rank 0) draws the
    Poisson batches of global rows and all the noise, in the order a single
    process would; each rank computes the clipped sums of its rows; the sums
    are all-reduced with the noise added once. For a fixed ``random_state``
    the sampled batches and the noise are those of the single-process fit,
    and ``dp_event_`` and ``epsilon_`` are the same; the model agrees with
    it up to the order of floating-point sums. The one-off releases of the
    fit (class counts, target histogram, DP-FERMI's group and class counts,
    score calibration, model check) are summed over the ranks before the
    root adds their noise.

    Parameters
    ----------
    estimator : estimator
        An unfitted or fitted (``warm_start``) skdp estimator with the same
        parameters on every rank; one of :func:`supported_estimators`.
    X : array-like of shape (n_rows, n_features)
        This rank's rows (at least one), with the same columns on every
        rank.
    y : array-like of shape (n_rows,)
        This rank's labels or targets.
    group : ProcessGroup or None, default=None
        The process group (None: the default group).
    **fit_params
        Passed to ``estimator.fit`` (per-row arrays such as
        ``sample_weight``, ``sensitive_features`` and ``unit_ids`` for this
        rank's rows). With ``unit_ids`` the fit protects units (see
        :ref:`units`): every unit's records must be on one rank (a
        ValueError says so otherwise), the units are numbered as one
        process would number them (ranks holding ranges of the ids, e.g.
        rows sorted by unit id, exchange only the ends of their ranges and
        their counts; interleaved ids are shared), each rank derives the
        random keys that choose which of its records each unit keeps from a
        stream keyed by the root (:func:`skdp.privacy.record_keys`), and the
        root draws the unit batches.

    Returns
    -------
    estimator
        The fitted estimator, the same on every rank: an ordinary skdp
        estimator (it predicts, pickles and has the single-process privacy
        report).
    """
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "fit_data_parallel needs an initialised torch.distributed process group: call "
            "torch.distributed.init_process_group(...) on every rank first (torchrun sets "
            "up its environment), or train on one machine with skdp.distributed.launch."
        )
    _check_estimator(estimator, fit_params)
    _check_device(estimator, dist.get_backend(group))
    comm_facts = _shard_facts(estimator, X, y, fit_params)
    gathered = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, comm_facts, group=group)
    _check_shards(gathered)
    comm = TorchCommunicator(comm_facts["n_rows"], group=group)
    with using_communicator(comm):
        return estimator.fit(X, y, **fit_params)


def _check_estimator(estimator, fit_params):
    """A ValueError for an estimator or a fit argument that data-parallel
    training does not support."""
    name = type(estimator).__name__
    if not getattr(estimator, "_data_parallel", False):
        raise ValueError(
            f"{name} cannot be trained data-parallel; fit_data_parallel supports "
            f"{', '.join(supported_estimators())}. Fit it in one process instead."
        )
    _check_one_silo(estimator, fit_params)


def _check_device(estimator, backend):
    """A ValueError for a backend that cannot carry the estimator's tensors:
    nccl moves CUDA tensors only."""
    device = str(getattr(estimator, "device", "cpu"))
    if backend == "nccl" and not device.startswith("cuda"):
        raise ValueError(
            f"backend='nccl' needs a CUDA estimator: {type(estimator).__name__} has "
            f"device={device!r}. Set device='cuda' on the estimator (one GPU per process), "
            "or use backend='gloo' on the CPU."
        )


def _check_one_silo(estimator, fit_params):
    """A ValueError for the silo settings of DP-FERMI: a data-parallel fit
    trains one silo spread over the ranks, in process."""
    name = type(estimator).__name__
    if fit_params.get("silo_ids") is not None or getattr(estimator, "silo_column", None) is not None:
        raise ValueError(
            f"silo_ids (or silo_column) are not supported in data-parallel fits: "
            f"fit_data_parallel trains {name} on one silo whose rows are spread over the "
            "ranks. Drop silo_ids, or train several silos with a federated engine "
            "(skdp.federated) or in one process."
        )
    options = getattr(estimator, "solver_options", None) or {}
    engine = options.get("engine", "inprocess")
    if engine != "inprocess":
        raise ValueError(
            f"solver_options['engine']={engine!r} is not supported in data-parallel fits: the "
            f"ranks exchange the sums themselves; leave 'engine' out of {name}'s "
            "solver_options, or train the silos with the federated engine without "
            "fit_data_parallel."
        )


def _shard_facts(estimator, X, y, fit_params):
    """What the ranks compare before they train: the estimator's class and
    parameters, the fit arguments given, and the shape and columns of the
    shard."""
    shape = X.shape if hasattr(X, "shape") else np.shape(X)
    columns = getattr(X, "columns", None)
    return {
        "estimator": type(estimator).__name__,
        "params": {k: _comparable(v) for k, v in estimator.get_params(deep=False).items()},
        "n_rows": int(shape[0]) if len(shape) else 0,
        "n_features": int(shape[1]) if len(shape) == 2 else None,
        "columns": None if columns is None else [str(c) for c in columns],
        "n_labels": len(y) if hasattr(y, "__len__") else None,
        "fit_params": sorted(k for k, v in fit_params.items() if v is not None),
    }


def _comparable(value):
    """A value that is equal on two ranks when the parameter is the same
    (a function by its name, an object without its memory address).

    >>> import numpy as np
    >>> from skdp.distributed._fit import _comparable
    >>> _comparable(np.random.RandomState(0)) == _comparable(np.random.RandomState(0))
    True
    """
    if callable(value) and not isinstance(value, type):
        name = getattr(value, "__qualname__", None)
        if name is not None:
            return f"{getattr(value, '__module__', '')}.{name}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _check_shards(facts):
    """A ValueError, the same on every rank, when the shards or the
    estimators of the ranks disagree."""
    first = facts[0]
    for rank, other in enumerate(facts):
        if other["estimator"] != first["estimator"]:
            raise ValueError(
                f"rank {rank} fits a {other['estimator']} and rank 0 a {first['estimator']}; "
                "every rank must call fit_data_parallel with the same estimator."
            )
        differ = sorted(k for k in first["params"]
                        if other["params"].get(k) != first["params"][k])
        if differ:
            raise ValueError(
                f"the estimator's parameters {differ} differ between rank {rank} and rank 0; "
                "every rank must fit an estimator with the same parameters."
            )
        if other["fit_params"] != first["fit_params"]:
            raise ValueError(
                f"rank {rank} passes the fit arguments {other['fit_params']} and rank 0 "
                f"{first['fit_params']}; every rank must pass the same ones (for its rows)."
            )
        if other["n_features"] is None:
            raise ValueError(
                f"X on rank {rank} is not 2-D; every rank's X must be an array-like of shape "
                "(n_rows, n_features)."
            )
        if other["n_features"] != first["n_features"] or other["columns"] != first["columns"]:
            raise ValueError(
                f"X has {other['n_features']} features on rank {rank} but "
                f"{first['n_features']} on rank 0 (or other column names): every rank's "
                "shard must have the same columns, in the same order."
            )
        if other["n_rows"] < 1:
            raise ValueError(
                f"rank {rank} holds no rows; give every rank at least one row (or use fewer "
                "processes)."
            )
        if other["n_labels"] is not None and other["n_labels"] != other["n_rows"]:
            raise ValueError(
                f"rank {rank} holds {other['n_rows']} rows of X but {other['n_labels']} "
                "labels in y; give each rank the labels of its own rows."
            )
