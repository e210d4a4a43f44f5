"""Synthetic classification data with groups, for tests and examples."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_fair_classification"]


def _check_int(value, name, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value}.")
    return int(value)


def _check_real(value, name, low, high, *, high_open=False):
    valid = (
        not isinstance(value, (bool, np.bool_))
        and isinstance(value, Real)
        and np.isfinite(value)
        and low <= value
        and (value < high if high_open else value <= high)
    )
    if not valid:
        interval = f"[{low}, {high})" if high_open else f"[{low}, {high}]"
        raise ValueError(f"{name} must be a real number in {interval}; got {value!r}.")
    return float(value)


def _allocate(n, proportions):
    """Split ``n`` into integer counts proportional to ``proportions``.

    Largest-remainder rounding: each count is ``floor(n * p)`` and the units
    left over go to the largest fractional parts (the lowest index first on
    ties). The counts sum to ``n`` and each is within 1 of ``n * p``.
    """
    exact = n * np.asarray(proportions, dtype=np.float64)
    counts = np.floor(exact).astype(np.int64)
    remainder = n - counts.sum()
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:remainder]] += 1
    return counts


def _simplex(n_vertices):
    """Vertices of a regular simplex centred at 0, with unit norm.

    Returns an array of shape (n_vertices, n_vertices - 1); for one vertex,
    shape (1, 0).
    """
    if n_vertices == 1:
        return np.zeros((1, 0))
    centred = np.eye(n_vertices) - 1.0 / n_vertices
    basis, _ = np.linalg.qr(centred[:, :-1])  # orthonormal basis of the sum-zero subspace
    vertices = centred @ basis
    return vertices * np.sqrt(n_vertices / (n_vertices - 1))


def make_fair_classification(
    n_samples=1000,
    n_features=10,
    *,
    n_groups=2,
    group_weights=None,
    n_classes=2,
    label_group_correlation=0.5,
    feature_group_correlation=0.5,
    class_sep=1.0,
    random_state=None,
    return_frame=False,
):
    """Generate a classification problem whose samples belong to groups.

    Gaussian classes, in which the dependence between the label and the group
    and the amount of information the features carry about the group are set
    separately. Meant for tests and examples of fairness-constrained
    estimators.

    The generative model, with ``K = n_classes``, ``G = n_groups``,
    ``d = n_features``, ``rho = label_group_correlation`` and
    ``tau = feature_group_correlation``:

    1. **Groups.** Group ``g`` gets ``n_g`` samples, ``n_samples`` split in
       proportion to ``group_weights`` by largest-remainder rounding (each
       ``n_g`` is within 1 of ``n_samples * w_g``).
    2. **Labels.** Within group ``g`` the class distribution is
       ``pi[g, k] = (1 - rho) / K + rho * [k == g mod K]``: group ``g``
       over-represents class ``g mod K``. The counts of each class in the
       group are ``n_g * pi[g]`` rounded in the same way. For two classes,
       ``P(y=1 | g=1) - P(y=1 | g=0) = rho``, and with two equally weighted
       groups ``rho`` is exactly the correlation between ``y`` and ``g``.
    3. **Features.** ``x = class_sep * c[y] + gamma * h[g] + e`` with
       ``e ~ N(0, I_d)`` and ``gamma = tau / sqrt(1 - tau**2)``. The class
       centres ``c[0..K-1]`` are the vertices of a regular simplex centred
       at the origin with unit norm (for two classes, ``+u`` and ``-u``),
       likewise the group offsets ``h[0..G-1]``; the two simplices lie in
       mutually orthogonal subspaces of a random orientation (drawn from
       ``random_state``), so the group offsets carry no information about
       the class and vice versa. With two classes and no group effect, the
       Bayes accuracy is ``Phi(class_sep)`` (0.84 for ``class_sep=1``).
       With two equally weighted groups, the projection of ``x`` on the
       group direction has correlation exactly ``tau`` with the group coded
       as -1/+1, and the best accuracy in predicting the group from ``x``
       alone (when ``rho = 0``) is ``Phi(gamma)``.
    4. The rows are shuffled.

    When ``rho > 0`` the features also reveal the group through the label,
    even with ``tau = 0``.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples.
    n_features : int, default=10
        Number of features; at least ``(n_classes - 1) + (n_groups - 1)``,
        the dimensions used by the class centres and the group offsets. The
        other directions are pure noise.
    n_groups : int, default=2
        Number of groups; ``groups`` holds the integers ``0 .. n_groups-1``.
    group_weights : array-like of shape (n_groups,), default=None
        Relative sizes of the groups (non-negative, normalized to sum to 1).
        None means equal sizes.
    n_classes : int, default=2
        Number of classes; ``y`` holds the integers ``0 .. n_classes-1``.
    label_group_correlation : float in [0, 1], default=0.5
        ``rho`` above: how far the class distribution of each group moves
        towards its favoured class. 0 makes ``y`` independent of the group
        (up to rounding); 1 makes each group hold only its favoured class.
    feature_group_correlation : float in [0, 1), default=0.5
        ``tau`` above: how far apart the group offsets are, hence how well
        the group can be recovered from the features. 0 means no offset.
    class_sep : float, default=1.0
        Distance of each class centre from the origin, in units of the noise
        standard deviation. Larger values make the task easier.
    random_state : int, RandomState instance or None, default=None
        Determines the orientation of the centres, the noise and the
        shuffle. Pass an int for reproducible output across multiple
        function calls.
    return_frame : bool, default=False
        If True, return ``X`` as a pandas DataFrame with columns ``x0``,
        ``x1``, ... and ``y`` and ``groups`` as Series named ``"y"`` and
        ``"group"``. Requires pandas.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features) or DataFrame
        The features.
    y : ndarray of shape (n_samples,) of int or Series
        The labels.
    groups : ndarray of shape (n_samples,) of int or Series
        The group of each sample, in ``0 .. n_groups-1``.

    See Also
    --------
    sklearn.datasets.make_classification : Without groups.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.datasets import make_fair_classification
    >>> X, y, groups = make_fair_classification(
    ...     n_samples=1000, group_weights=[0.8, 0.2], label_group_correlation=0.4,
    ...     random_state=0)
    >>> X.shape
    (1000, 10)
    >>> np.bincount(groups)
    array([800, 200])
    >>> [float(y[groups == g].mean()) for g in (0, 1)]
    [0.3, 0.7]
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_features = _check_int(n_features, "n_features", 1)
    n_groups = _check_int(n_groups, "n_groups", 1)
    n_classes = _check_int(n_classes, "n_classes", 2)
    rho = _check_real(label_group_correlation, "label_group_correlation", 0.0, 1.0)
    tau = _check_real(
        feature_group_correlation, "feature_group_correlation", 0.0, 1.0, high_open=True
    )
    class_sep = _check_real(class_sep, "class_sep", 0.0, np.inf, high_open=True)
    if not isinstance(return_frame, (bool, np.bool_)):
        raise ValueError(f"return_frame must be True or False; got {return_frame!r}.")
    n_directions = (n_classes - 1) + (n_groups - 1)
    if n_features < n_directions:
        raise ValueError(
            f"n_features must be at least (n_classes - 1) + (n_groups - 1) = {n_directions} "
            f"to place {n_classes} class centres and {n_groups} group offsets in orthogonal "
            f"subspaces; got n_features={n_features}."
        )
    if group_weights is None:
        weights = np.full(n_groups, 1.0 / n_groups)
    else:
        weights = np.asarray(group_weights, dtype=np.float64)
        if weights.shape != (n_groups,):
            raise ValueError(
                f"group_weights must have one weight per group ({n_groups}); got shape "
                f"{weights.shape}."
            )
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError(
                "group_weights must be finite and non-negative with a positive sum; got "
                f"{group_weights!r}."
            )
        weights = weights / weights.sum()

    rng = check_random_state(random_state)

    group_sizes = _allocate(n_samples, weights)
    class_probs = np.full((n_groups, n_classes), (1.0 - rho) / n_classes)
    class_probs[np.arange(n_groups), np.arange(n_groups) % n_classes] += rho
    groups = np.repeat(np.arange(n_groups), group_sizes)
    y = np.concatenate(
        [
            np.repeat(np.arange(n_classes), _allocate(size, class_probs[g]))
            for g, size in enumerate(group_sizes)
        ]
    )

    # A random orthonormal frame: the first n_classes - 1 columns carry the
    # class centres, the next n_groups - 1 the group offsets.
    frame, upper = np.linalg.qr(rng.standard_normal(size=(n_features, n_features)))
    frame = frame * np.sign(np.diag(upper))  # uniform (Haar) orientation
    class_basis = frame[:, : n_classes - 1]
    group_basis = frame[:, n_classes - 1 : n_directions]
    gamma = tau / np.sqrt(1.0 - tau**2)
    class_centres = class_sep * _simplex(n_classes) @ class_basis.T
    group_offsets = gamma * _simplex(n_groups) @ group_basis.T

    X = class_centres[y] + group_offsets[groups] + rng.standard_normal(size=(n_samples, n_features))
    order = rng.permutation(n_samples)
    X, y, groups = X[order], y[order], groups[order]

    if return_frame:
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - pandas is installed in tests
            raise ImportError("return_frame=True requires pandas.") from exc
        X = pd.DataFrame(X, columns=[f"x{j}" for j in range(n_features)])
        y = pd.Series(y, name="y")
        groups = pd.Series(groups, name="group")
    return X, y, groups
