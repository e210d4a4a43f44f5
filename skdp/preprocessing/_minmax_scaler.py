"""Scaling to a range with public or privately estimated bounds."""

import numpy as np

from .._fit.units import MAX_RECORDS_PER_UNIT
from ._base import (
    BaseDPScaler,
    feature_pairs,
    kept_records,
    leaky_report,
    one_off_plan,
    public_report,
)
from ._ranges import histogram_release, range_histogram


class DPMinMaxScaler(BaseDPScaler):
    """Scale features to ``feature_range`` with public or private bounds.

    Three ways to get each feature's ``[data_min_, data_max_]``:

    - ``bounds`` (public, recommended): taken as they are. ``fit`` reads
      nothing from the values of ``X`` (only its shape and column names), so
      it spends no budget: ``epsilon_ = 0`` and ``dp_event_`` is a
      ``NoOpDpEvent``.
    - ``data_range`` (a wide public range): the bounds are estimated
      privately. Each feature's ``data_range`` is cut into ``n_bins`` bins
      and a Gaussian histogram of the clipped values is released (l2
      sensitivity ``sqrt(n_features)`` under add/remove-one neighbours, noise
      calibrated to ``(epsilon, delta)`` by a
      :class:`~skdp.privacy.ReleasePlan`); the bounds are the noisy
      ``quantile`` and ``1 - quantile`` points of each histogram, rounded
      outwards to bin edges.
    - neither: the minimum and maximum of the data, with a
      :class:`~skdp.exceptions.PrivacyLeakWarning`; ``epsilon_`` is inf.

    With ``fit(X, unit_ids=...)`` the guarantee is about adding or removing
    one unit (a person) with all its records: each unit keeps at most
    ``max_records_per_unit`` of its records, each adding ``1 / min(|u|, k)``
    instead of 1 to the histogram, so a unit moves it as one record does
    (same sensitivity, same noise). Public bounds stay free.

    Read more in :ref:`preprocessing`.

    Parameters
    ----------
    feature_range : tuple (min, max), default=(0, 1)
        Range of the transformed data.
    epsilon : float or None, default=1.0
        Budget of the range estimation (``data_range`` only). None reads the
        exact histogram, for reference.
        About adding or removing one record, or with ``fit(unit_ids=...)`` one
        unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
    bounds : (lower, upper), dict or None, default=None
        Public per-feature range: scalars or arrays of shape (n_features,),
        or a dict mapping every feature name to a ``(lower, upper)`` pair.
    data_range : (lower, upper), dict or None, default=None
        Public range inside which the bounds are estimated privately. Only
        one of ``bounds`` and ``data_range`` may be given.
    n_bins : int, default=32
        Histogram bins per feature.
    quantile : float in [0, 0.5), default=0.01
        Share of the records allowed below and above the estimated range.
    clip : bool, default=True
        Whether ``transform`` clips ``X`` to ``[data_min_, data_max_]`` (so
        that the output stays in ``feature_range``).
    random_state : int, RandomState instance or None, default=None
        Seeds the noise for reproducible experiments; None draws it from the
        operating system's CSPRNG.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit that the fit uses (a random subset of a larger unit, drawn once
        per fit), each weighted ``1 / min(|u|, k)``. Unused without
        ``unit_ids``. See :ref:`units`.

    Attributes
    ----------
    data_min_, data_max_, data_range_ : ndarray of shape (n_features,)
    scale_, min_ : ndarray of shape (n_features,)
        ``X * scale_ + min_`` maps the bounds onto ``feature_range``.
    epsilon_, delta_ : float
    dp_event_ : dp_accounting.DpEvent or None
    privacy_report_ : skdp.privacy.PrivacyReport
        ``privacy_report_.privacy_unit`` names what epsilon is about.
    n_units_ : int or None
        Number of privacy units with ``unit_ids``; None without.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    DPStandardScaler : Standardize with a private mean and variance.

    Examples
    --------
    Public bounds cost nothing:

    >>> import numpy as np
    >>> from skdp.preprocessing import DPMinMaxScaler
    >>> X = np.array([[20.0, 1.0], [60.0, 40.0], [95.0, 99.0]])
    >>> scaler = DPMinMaxScaler(bounds=([17, 1], [90, 99])).fit(X)
    >>> scaler.transform(X).round(2)
    array([[0.04, 0.  ],
           [0.59, 0.4 ],
           [1.  , 1.  ]])
    >>> scaler.epsilon_
    0.0

    Private bounds inside a wide public range:

    >>> X = np.random.default_rng(0).uniform(20, 60, size=(5000, 1))
    >>> scaler = DPMinMaxScaler(data_range=(0, 100), epsilon=1.0, random_state=0).fit(X)
    >>> float(scaler.data_min_[0]), float(scaler.data_max_[0])
    (18.75, 62.5)
    """

    _released_attributes = frozenset({"data_min_", "data_max_", "data_range_", "min_",
                                      "scale_"})

    _parameter_constraints = {
        **BaseDPScaler._parameter_constraints,
        "feature_range": [tuple],
    }

    def __init__(
        self, feature_range=(0, 1), *, epsilon=1.0, delta=1e-5, bounds=None, data_range=None,
        n_bins=32, quantile=0.01, clip=True, random_state=None,
        max_records_per_unit=MAX_RECORDS_PER_UNIT,
    ):
        self.feature_range = feature_range
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.data_range = data_range
        self.n_bins = n_bins
        self.quantile = quantile
        self.clip = clip
        self.random_state = random_state
        self.max_records_per_unit = max_records_per_unit

    def _skdp_reads_data(self):
        """Public bounds read nothing from the data."""
        return self.bounds is None

    def fit(self, X, y=None, *, unit_ids=None):
        """Set the bounds: public, privately estimated, or (leaking) read.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id). With it,
            epsilon and delta are about adding or removing *all* records of
            one unit (see :ref:`units`). Requested by default with metadata
            routing on; with routing off, pass ``<step>__unit_ids=`` to
            ``Pipeline.fit``.

        Returns
        -------
        self : object
        """
        self._validate_params()
        low_out, high_out = self.feature_range
        if not low_out < high_out:
            raise ValueError(
                f"feature_range must be (min, max) with min < max; got {self.feature_range}."
            )
        self._check_range_source()
        X, n_features, names = self._validate_fit_data(X)
        noise = self.bounds is None and self.data_range is not None
        generator, units = self._randomness(unit_ids, X.shape[0], noise=noise)
        X, weights = kept_records(X, units)
        plan = one_off_plan([histogram_release(n_features)], units)
        if self.bounds is not None:
            # public: the values of X are never read
            lower, upper = feature_pairs(self.bounds, n_features, names, "bounds")
            self._store_privacy_report(public_report(units))
        elif self.data_range is not None:
            wide_lower, wide_upper = feature_pairs(self.data_range, n_features, names, "data_range")
            report = self._spend(plan)
            self._charge_ledger(report)
            counts = range_histogram(X, wide_lower, wide_upper, self.n_bins, weights=weights)
            lower, upper = self._noisy_range(counts, wide_lower, wide_upper, report, generator)
            self._store_privacy_report(report)
        else:
            lower, upper = X.min(axis=0), X.max(axis=0)
            self._warn_leak("bounds=None and data_range=None: the data's min and max are used.")
            report = leaky_report(plan.non_private(self.delta))
            self._charge_ledger(report)  # a ledger refuses it: it is not private
            self._store_privacy_report(report)

        self.data_min_, self.data_max_ = lower, upper
        self.data_range_ = upper - lower
        span = np.where(self.data_range_ > 0, self.data_range_, 1.0)
        self.scale_ = (high_out - low_out) / span
        self.min_ = low_out - lower * self.scale_
        return self

    def transform(self, X):
        """Clip ``X`` to the bounds (if ``clip``) and scale it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features)
        """
        X = self._validate_transform_data(X)
        if self.clip:
            X = np.clip(X, self.data_min_, self.data_max_)
        return X * self.scale_ + self.min_

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
        return (X - self.min_) / self.scale_
