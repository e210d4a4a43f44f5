"""Splitting a data set into silos of controlled heterogeneity."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .._groups import _is_dataframe


def _attribute_values(X, attribute, n_samples):
    if isinstance(attribute, (str, Integral)) and not isinstance(attribute, bool):
        if _is_dataframe(X):
            column = X[attribute] if isinstance(attribute, str) else X.iloc[:, attribute]
            values = np.asarray(column)
        elif isinstance(attribute, str):
            raise ValueError(
                f"attribute={attribute!r} names a column, but X is not a DataFrame; pass the "
                "attribute values as an array of shape (n_samples,)."
            )
        else:
            values = np.asarray(X)[:, attribute]
    else:
        values = np.asarray(attribute)
    if values.ndim != 1 or values.shape[0] != n_samples:
        raise ValueError(
            f"attribute must have one value per row of X: shape ({n_samples},); got shape "
            f"{values.shape}."
        )
    try:
        values = values.astype(np.float64)
    except (TypeError, ValueError):
        # non-numeric labels sort by their rank in sorted order
        _, values = np.unique(values.astype(str), return_inverse=True)
        values = values.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("attribute holds NaN or infinite values; fill or drop them first.")
    return values


def make_silos(X, n_silos, *, heterogeneity=0.0, attribute=None, random_state=None):
    """Assign records to silos, from identically distributed to sorted.

    Algorithm 3 of Gupta et al. ("A Stochastic Optimization Framework for
    Private and Fair Learning From Decentralized Data", App. E.2.3), with
    ``K = n_silos`` and ``h = heterogeneity``:

    1. sort the records by ``attribute`` (ties in random order) and cut them
       into ``K`` contiguous blocks of equal size (sizes differ by at most
       one when ``K`` does not divide ``n``): the *prior* silo of each record;
    2. each silo ``k`` takes ``floor(h * n_k)`` records drawn without
       replacement from its own block;
    3. the records not taken are shuffled and fill every silo up to ``n_k``.

    ``h = 0`` gives identically distributed random silos and ``h = 1`` silos
    sorted by the attribute (silo 0 holds the smallest values); every silo
    holds ``n // K`` or ``n // K + 1`` records.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        The records (only their number is used, unless ``attribute`` names
        one of their columns).
    n_silos : int
        Number of silos K, between 1 and ``n_samples``.
    heterogeneity : float in [0, 1], default=0.0
        Share of each silo drawn from its own block of the sorted attribute.
    attribute : array-like of shape (n_samples,), str, int or None, default=None
        Values that define the heterogeneity (e.g. age), used only for
        splitting; a column name (DataFrame) or position of ``X`` may be
        given instead. Required when ``heterogeneity > 0``. Non-numeric
        values are sorted as strings.
    random_state : int, RandomState instance or None, default=None
        Draws within blocks, the fill and the order of ties.

    Returns
    -------
    silo_ids : ndarray of shape (n_samples,), dtype int64
        Silo of each record, in ``0 .. n_silos - 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.datasets import make_silos
    >>> age = np.arange(12)
    >>> make_silos(np.zeros((12, 1)), 3, heterogeneity=1.0, attribute=age)
    array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    >>> silos = make_silos(np.zeros((10, 1)), 3, random_state=0)
    >>> np.bincount(silos)
    array([4, 3, 3])
    """
    n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
    valid = isinstance(n_silos, Integral) and not isinstance(n_silos, bool)
    if not valid or not 1 <= n_silos <= n_samples:
        raise ValueError(
            f"n_silos must be an integer between 1 and the number of records ({n_samples}); "
            f"got {n_silos!r}."
        )
    if (
        not isinstance(heterogeneity, Real) or isinstance(heterogeneity, bool)
        or not 0.0 <= heterogeneity <= 1.0
    ):
        raise ValueError(f"heterogeneity must be a number in [0, 1]; got {heterogeneity!r}.")
    if attribute is None and heterogeneity > 0:
        raise ValueError(
            "heterogeneity > 0 needs attribute: the values (e.g. age) whose sorted blocks "
            "make the silos differ."
        )
    rng = check_random_state(random_state)
    n_silos = int(n_silos)
    sizes = np.full(n_silos, n_samples // n_silos)
    sizes[: n_samples % n_silos] += 1
    if attribute is None:
        order = rng.permutation(n_samples)
    else:
        values = _attribute_values(X, attribute, n_samples)
        ties = rng.permutation(n_samples)
        order = ties[np.argsort(values[ties], kind="stable")]
    blocks = np.split(order, np.cumsum(sizes)[:-1])

    silo_ids = np.full(n_samples, -1, dtype=np.int64)
    for k, block in enumerate(blocks):
        own = int(np.floor(heterogeneity * sizes[k] + 1e-9))
        silo_ids[rng.choice(block, size=own, replace=False)] = k
    rest = rng.permutation(np.flatnonzero(silo_ids < 0))
    missing = sizes - np.bincount(silo_ids[silo_ids >= 0], minlength=n_silos)
    silo_ids[rest] = np.repeat(np.arange(n_silos), missing)
    return silo_ids
