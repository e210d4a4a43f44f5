"""The server's side of a federated fit, given only public facts."""

import numpy as np


def fit_federated(estimator, transport, *, classes, groups=None, n_features):
    """Fit ``estimator`` (an unfitted :class:`~skdp.DPFERMIClassifier`) on
    remote silos reached through ``transport``.

    The server never sees a record: it knows the public class and group
    lists, the number of features, and what the silos send (their record
    counts, their noisy group counts and their noisy gradient sums).

    Parameters
    ----------
    estimator : DPFERMIClassifier
    transport : SiloTransport
        Already connected (its ``hello`` done).
    classes : sequence
        Labels, in the order of the model's outputs.
    groups : sequence or None
        Sensitive groups, in code order (None: one group, no fairness term).
    n_features : int

    Returns
    -------
    estimator : the fitted estimator
    """
    estimator._validate_params()
    estimator._check_engine()
    estimator.classes_ = np.asarray(classes)
    if len(estimator.classes_) < 2:
        raise ValueError(f"classes must list at least two labels; got {list(classes)}.")
    estimator.groups_ = None if groups is None or len(groups) == 0 else np.asarray(groups)
    estimator.n_features_in_ = int(n_features)
    estimator.silos_ = np.asarray(transport.names)
    estimator.n_silos_ = len(transport.names)
    n_groups = 1 if estimator.groups_ is None else len(estimator.groups_)
    return estimator._train_on_silos(transport, n_groups)
