"""Data sets for distributionally robust learning.

* :func:`make_imbalanced_digits`: the paper's "-ST" construction on
  scikit-learn's bundled digits (no download): keep only a small fraction of
  the training images of half of the classes, keep the test split balanced.
* :func:`make_rare_subpopulation`: a large synthetic task in which a rare
  subpopulation follows a different, harder rule, for classification or
  regression; the subpopulation is returned as ``groups`` for scoring only.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch, check_random_state

__all__ = ["make_imbalanced_digits", "make_rare_subpopulation"]


def _check(value, name, low, high, kind=Real):
    if isinstance(value, bool) or not isinstance(value, kind) or not (low <= value <= high):
        raise ValueError(f"{name} must be a {kind.__name__.lower()} in [{low}, {high}]; got {value!r}.")
    return value


def make_imbalanced_digits(*, keep_fraction=0.1, rare_classes=None, test_size=0.3,
                           binary=False, random_state=None):
    """Digits with half of the classes rare in training (the "-ST" construction).

    Splits scikit-learn's 1797 bundled 8x8 digit images (stratified) into a
    training and a balanced test part, then keeps only ``keep_fraction`` of
    the training images of ``rare_classes`` (default: digits 0-4, as
    CIFAR10-ST keeps 100 of 5000 images for classes 0-4).

    Parameters
    ----------
    keep_fraction : float in (0, 1], default=0.1
        Fraction of the rare classes' training images kept (at least one per
        class).
    rare_classes : sequence of int or None, default=None
        Classes made rare; None uses 0-4.
    test_size : float in (0, 1), default=0.3
    binary : bool, default=False
        MNIST-ST style: label 0 for digits 0-4 and 1 for digits 5-9.
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    data : Bunch
        ``X_train, y_train, X_test, y_test`` (pixel values scaled to [0, 1])
        and ``digits_train, digits_test`` (the original digit, a group for
        worst-class scoring when ``binary``).

    Examples
    --------
    >>> from skdp.datasets import make_imbalanced_digits
    >>> data = make_imbalanced_digits(keep_fraction=0.1, random_state=0)
    >>> int((data.y_train == 0).sum()), int((data.y_train == 9).sum())
    (12, 126)
    """
    _check(keep_fraction, "keep_fraction", 1e-9, 1.0)
    _check(test_size, "test_size", 1e-9, 1 - 1e-9)
    rng = check_random_state(random_state)
    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    rare = np.arange(5) if rare_classes is None else np.asarray(rare_classes)
    if not np.isin(rare, np.arange(10)).all():
        raise ValueError(f"rare_classes must be digits 0-9; got {list(rare)}.")
    X_tr, X_te, d_tr, d_te = train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=rng.randint(2**31 - 1))
    keep = np.ones(len(d_tr), dtype=bool)
    for c in rare:
        rows = np.flatnonzero(d_tr == c)
        n_keep = max(1, int(round(keep_fraction * len(rows))))
        keep[rows] = False
        keep[rng.choice(rows, n_keep, replace=False)] = True
    X_tr, d_tr = X_tr[keep], d_tr[keep]
    label = (lambda d: (d >= 5).astype(int)) if binary else (lambda d: d)
    return Bunch(X_train=X_tr, y_train=label(d_tr), X_test=X_te, y_test=label(d_te),
                 digits_train=d_tr, digits_test=d_te)


def make_rare_subpopulation(n_samples=100_000, *, n_features=20, rare_fraction=0.05,
                            task="classification", shift=3.0, offset=1.5, noise=0.02,
                            random_state=None):
    """A large task with a rare subpopulation that follows a shifted rule.

    The majority's target depends on ``s = w0 . x`` (``w0`` a unit vector
    on features 1..d-1); a rare subpopulation (fraction ``rare_fraction``),
    located by a shift of ``shift`` along feature 0, follows ``s - offset``:
    its decision threshold (classification) or its mean (regression) is
    moved. A linear model can serve both groups by using feature 0, at a
    small cost to the majority, but a fit for the average ignores the rare
    records; a distributionally robust fit gives them more weight without
    knowing who they are. The subpopulation label is returned for scoring
    only.

    Keep the label noise small: every worst-case reweighting also upweights
    mislabelled records, and with much label noise (10 % or more) those
    dominate the weights and no reweighting helps the rare group.

    Parameters
    ----------
    n_samples : int, default=100_000
    n_features : int >= 3, default=20
    rare_fraction : float in (0, 0.5], default=0.05
    task : {"classification", "regression"}, default="classification"
    shift : float, default=3.0
        How far the rare subpopulation sits from the majority (feature 0).
    offset : float, default=1.5
        How far the rare rule's threshold (or mean) is moved, in units of
        the score's standard deviation.
    noise : float, default=0.02
        Label-flip rate (classification) or noise std (regression).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}, or ``2 (s - offset g) + noise`` for regression.
    groups : ndarray of shape (n_samples,)
        1 for the rare subpopulation, 0 otherwise.

    Examples
    --------
    >>> from skdp.datasets import make_rare_subpopulation
    >>> X, y, groups = make_rare_subpopulation(1000, rare_fraction=0.1, random_state=0)
    >>> X.shape, round(float(groups.mean()), 1)
    ((1000, 20), 0.1)
    """
    _check(n_samples, "n_samples", 10, 10**9, Integral)
    _check(n_features, "n_features", 3, 10**6, Integral)
    _check(rare_fraction, "rare_fraction", 1e-9, 0.5)
    _check(noise, "noise", 0.0, 10.0)
    _check(shift, "shift", -1e6, 1e6)
    _check(offset, "offset", -1e6, 1e6)
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification' or 'regression'; got {task!r}.")
    rng = check_random_state(random_state)
    groups = (rng.uniform(size=n_samples) < rare_fraction).astype(int)
    X = rng.normal(size=(n_samples, n_features))
    X[:, 0] += shift * groups
    w0 = np.zeros(n_features)
    w0[1:] = rng.normal(size=n_features - 1)
    w0 /= np.linalg.norm(w0)
    score = X @ w0 - offset * groups
    if task == "classification":
        y = (score > 0).astype(int)
        flip = rng.uniform(size=n_samples) < noise
        y = np.where(flip, 1 - y, y)
    else:
        y = 2.0 * score + noise * rng.normal(size=n_samples)
    return X, y, groups
