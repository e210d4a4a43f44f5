"""Standardization with a differentially private mean and variance."""

import math

import numpy as np

from .._fit.units import MAX_RECORDS_PER_UNIT
from ..privacy import Release
from ._base import (
    BaseDPScaler,
    add_noise,
    feature_pairs,
    kept_records,
    leaky_report,
    one_off_plan,
    weighted_sum,
)
from ._ranges import histogram_release, range_histogram

#: Shares (GDP mu^2) of the releases of one fit: the range histogram (only
#: with ``data_range``), the count, the sum and the sum of squares.
_SHARES = {"histogram": 0.2, "count": 0.1, "sum": 0.45, "sum_squares": 0.45}


def moment_releases(n_features, *, with_histogram=False):
    """The Gaussian releases of :class:`DPStandardScaler`, with their
    sensitivities under add/remove-one neighbours.

    Each record is mapped into ``[-1, 1]`` per feature (``u``), so one record
    moves the count by 1, the sum of ``u`` by at most ``sqrt(n_features)``
    and the sum of ``u**2 - 1/2`` (entries in ``[-1/2, 1/2]``) by at most
    ``sqrt(n_features) / 2``, in l2 norm. With ``unit_ids`` a unit's
    records add these contributions times factors that sum to at most 1, so
    a unit moves each release by at most the same amount.
    """
    root = math.sqrt(n_features)
    releases = [
        Release("count", sensitivity=1.0, share=_SHARES["count"]),
        Release("sum", sensitivity=root, share=_SHARES["sum"]),
        Release("sum_squares", sensitivity=root / 2, share=_SHARES["sum_squares"]),
    ]
    if with_histogram:
        releases.insert(0, histogram_release(n_features, share=_SHARES["histogram"]))
    return releases


def moment_statistics(X, lower, upper, weights=None):
    """The statistics :class:`DPStandardScaler` releases, before noise.

    ``X`` is clipped to ``[lower, upper]`` and mapped affinely onto
    ``[-1, 1]`` (``u``); returns the count, ``sum(u)`` and
    ``sum(u**2 - 1/2)``. ``weights`` (a factor in [0, 1] per record, the
    unit factors of a fit with ``unit_ids``) weigh each record's terms, the
    count included; None counts every record once.
    """
    center, half = (lower + upper) / 2, (upper - lower) / 2
    # clipped again after the affine map: its rounding must not push a value
    # past +-1, the sensitivity the plan states
    U = np.clip((np.clip(np.asarray(X, dtype=np.float64), lower, upper) - center) / half,
                -1.0, 1.0)
    count = float(U.shape[0]) if weights is None else float(np.sum(weights))
    return {
        "count": np.array([count]),
        "sum": weighted_sum(U, weights),
        "sum_squares": weighted_sum(U**2 - 0.5, weights),
    }


class DPStandardScaler(BaseDPScaler):
    """Standardize features with a differentially private mean and variance.

    Each feature is clipped to its public range ``[lower, upper]`` and mapped
    onto ``[-1, 1]``; ``fit`` releases the record count, the sum and the sum
    of squares of the mapped values with Gaussian noise, calibrated by a
    :class:`~skdp.privacy.ReleasePlan` so that the three releases together
    are ``(epsilon, delta)``-DP under add/remove-one neighbours (the count is
    noised too: adding a record changes it). The mean and variance are
    computed from the noisy statistics alone. Data outside ``bounds`` is
    clipped, never used to widen them.

    With ``fit(X, unit_ids=...)`` the guarantee is about adding or removing
    one unit (a person) with all its records: each unit keeps at most
    ``max_records_per_unit`` of its records, whose terms in every release
    (the range histogram included) are weighted ``1 / min(|u|, k)``, so the
    sensitivities and the noise are those of a record-level fit. The mean
    and variance are then those of the unit-weighted records (each unit's
    kept records share one unit of mass) and the count is a count of units.

    Read more in :ref:`preprocessing`.

    Parameters
    ----------
    epsilon : float or None, default=1.0
        Privacy budget of ``fit``. None computes the exact (clipped) moments,
        for reference (``epsilon_`` is then inf).
        About adding or removing one record, or with ``fit(unit_ids=...)`` one
        unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
    bounds : (lower, upper), dict or None, default=None
        Public per-feature range, fixed without looking at the data (a data
        dictionary, domain knowledge): ``lower`` and ``upper`` scalars or
        arrays of shape (n_features,), or a dict mapping every feature name
        to a ``(lower, upper)`` pair. If None and ``data_range`` is None, the
        range is read from the data: a :class:`~skdp.exceptions.PrivacyLeakWarning`
        is raised and ``epsilon_`` is inf.
    data_range : (lower, upper), dict or None, default=None
        A wide public range inside which the actual range is estimated
        privately (a noisy histogram with ``n_bins`` bins per feature; see
        :class:`DPMinMaxScaler`), at a fifth of the budget (in GDP ``mu^2``
        units). Use it when no tight public bounds are known. Only one of
        ``bounds`` and ``data_range`` may be given.
    n_bins : int, default=32
        Bins per feature of the range histogram (``data_range`` only).
    quantile : float in [0, 0.5), default=0.01
        Share of the records allowed below and above the estimated range
        (``data_range`` only).
    clip : bool, default=True
        Whether ``transform`` clips ``X`` to ``bounds_`` before scaling.
    random_state : int, RandomState instance or None, default=None
        Seeds the noise for reproducible experiments. None draws the noise
        from the operating system's CSPRNG (:class:`~skdp.privacy.SecureGenerator`):
        it cannot be predicted or replayed, which is what a deployment needs.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit that the fit uses (a random subset of a larger unit, drawn once
        per fit), each weighted ``1 / min(|u|, k)``. Unused without
        ``unit_ids``. See :ref:`units`.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
    var_ : ndarray of shape (n_features,)
    scale_ : ndarray of shape (n_features,)
        ``sqrt(var_)``; a zero variance gets scale 1. The variance of the
        mapped values is floored at its noise level, so that noise cannot
        blow a near-constant feature up.
    bounds_ : ndarray of shape (2, n_features)
        The range the data was clipped to.
    n_samples_seen_ : float
        Noisy record count (with ``unit_ids``: noisy count of units).
    epsilon_, delta_ : float
        Privacy spent by ``fit`` (the accountant's epsilon of ``dp_event_``).
    dp_event_ : dp_accounting.DpEvent or None
    privacy_report_ : skdp.privacy.PrivacyReport
        ``privacy_report_.privacy_unit`` names what epsilon is about:
        ``"record"``, or the unit with ``unit_ids``.
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public, like the number
        of records); None without.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has feature names that are all strings.

    See Also
    --------
    DPMinMaxScaler : Scale to a range with public or private bounds.
    skdp.model_selection.spent : Total privacy of a fitted pipeline.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPStandardScaler
    >>> X = np.random.default_rng(0).normal(50, 10, size=(10_000, 2))
    >>> scaler = DPStandardScaler(epsilon=1.0, bounds=(0, 100), random_state=0).fit(X)
    >>> np.round(scaler.mean_, 0), np.round(scaler.scale_, 0)
    (array([50., 50.]), array([10., 10.]))
    >>> round(scaler.epsilon_, 2)
    1.0
    """

    _released_attributes = frozenset({"bounds_", "n_samples_seen_", "mean_", "var_",
                                      "scale_"})

    def __init__(
        self, *, epsilon=1.0, delta=1e-5, bounds=None, data_range=None, n_bins=32,
        quantile=0.01, clip=True, random_state=None, max_records_per_unit=MAX_RECORDS_PER_UNIT,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.data_range = data_range
        self.n_bins = n_bins
        self.quantile = quantile
        self.clip = clip
        self.random_state = random_state
        self.max_records_per_unit = max_records_per_unit

    def fit(self, X, y=None, *, unit_ids=None):
        """Release the noisy moments of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id; any hashable,
            no missing value). With it, epsilon and delta are about adding
            or removing *all* records of one unit (see :ref:`units`).
            Requested by default with metadata routing on; with routing off,
            pass ``<step>__unit_ids=`` to ``Pipeline.fit``.

        Returns
        -------
        self : object
        """
        self._validate_params()
        X, n_features, names = self._validate_fit_data(X)
        self._check_range_source()
        generator, units = self._randomness(unit_ids, X.shape[0])
        X, weights = kept_records(X, units)
        private_range = self.bounds is None and self.data_range is not None
        plan = one_off_plan(moment_releases(n_features, with_histogram=private_range), units)
        report = self._spend(plan)
        # reading the ranges in the clear is not private: a ledger refuses it
        self._charge_ledger(report if self.bounds is not None or private_range
                            else leaky_report(report))

        if self.bounds is not None:
            lower, upper = feature_pairs(self.bounds, n_features, names, "bounds")
        elif private_range:
            wide_lower, wide_upper = feature_pairs(self.data_range, n_features, names, "data_range")
            counts = range_histogram(X, wide_lower, wide_upper, self.n_bins, weights=weights)
            lower, upper = self._noisy_range(counts, wide_lower, wide_upper, report, generator)
        else:
            lower, upper = X.min(axis=0), X.max(axis=0)
            upper = np.where(upper > lower, upper, lower + 1.0)
            report = leaky_report(report)
            self._warn_leak(
                "bounds=None and data_range=None: the feature ranges are read from the data."
            )

        noisy = add_noise(moment_statistics(X, lower, upper, weights), report, generator)
        count = max(float(noisy["count"][0]), 1.0)
        mean_u = np.clip(noisy["sum"] / count, -1.0, 1.0)
        second = np.clip((noisy["sum_squares"] + 0.5 * count) / count, 0.0, 1.0)
        var_u = np.clip(second - mean_u**2, 0.0, 1.0)
        if report.noise["sum_squares"] is not None:
            var_u = np.maximum(var_u, report.scale("sum_squares") / count)
        center, half = (lower + upper) / 2, (upper - lower) / 2

        self.bounds_ = np.vstack([lower, upper])
        self.n_samples_seen_ = count
        self.mean_ = center + half * mean_u
        self.var_ = half**2 * var_u
        self.scale_ = np.where(self.var_ > 0, np.sqrt(self.var_), 1.0)
        self._store_privacy_report(report)
        return self

    def transform(self, X):
        """Clip ``X`` to ``bounds_`` (if ``clip``) and standardize it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features)
        """
        X = self._validate_transform_data(X)
        if self.clip:
            X = np.clip(X, self.bounds_[0], self.bounds_[1])
        return (X - self.mean_) / self.scale_

    def inverse_transform(self, X):
        """Undo the scaling (not the clipping).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        X = self._validate_transform_data(X)
        return X * self.scale_ + self.mean_
