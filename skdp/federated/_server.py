"""The server's side of a federated fit, given only public facts."""


def fit_federated(estimator, transport, *, classes, groups=None, n_features):
    """Fit ``estimator`` (an unfitted :class:`~skdp.DPFERMIClassifier`) on
    remote silos reached through ``transport``.

    The server never sees a record: it knows the public class and group
    lists, the number of features, and what the silos send (their record
    counts, their noisy group counts and their noisy gradient sums). Silos
    that hold unit ids send their number of units instead of records, and
    the fit is then about units (``n_units_``, ``privacy_report_``).

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
    return estimator.fit_silos(transport, classes=classes, groups=groups,
                               n_features=n_features)
