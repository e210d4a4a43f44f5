"""Imputation of missing values with differentially private statistics."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._missing import is_scalar_nan
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    FLOAT_DTYPES,
    _check_feature_names_in,
    check_is_fitted,
    validate_data,
)

from .._fit.units import MAX_RECORDS_PER_UNIT
from ..privacy import Release
from ._base import (
    DPPreprocessorMixin,
    add_noise,
    feature_pairs,
    kept_records,
    one_off_plan,
    public_report,
    weighted_sum,
)
from ._encoder import column_codes, counts_release
from ._ranges import (
    histogram_median,
    histogram_release,
    range_from_histogram,
    range_histogram,
)

#: Shares (GDP mu^2) of the releases of a ``strategy="mean"`` fit: the range
#: histogram (only with ``data_range``), the clipped sums and the counts.
_SHARES = {"histogram": 0.25, "sum": 0.7, "count": 0.3}

#: A feature's statistic is used only when its noisy count of observed
#: values reaches this many noise standard deviations (and at least 1).
_FALLBACK_STDS = 2.0


def mean_releases(n_features, *, with_histogram=False):
    """The Gaussian releases of ``DPSimpleImputer(strategy="mean")``, with
    their sensitivities under add/remove-one neighbours.

    Each observed value is clipped to its feature's range and mapped
    affinely onto ``[-1, 1]`` (``u``), a missing value counts as 0. One
    record moves each feature's sum of ``u`` by at most 1 (its half-width in
    the units of ``X``) and each feature's count of observed values by at
    most 1, so over all features together both vectors move by at most
    ``sqrt(n_features)`` in l2 norm. A unit's records add factors summing to
    at most 1, so a unit moves them as much.
    """
    root = math.sqrt(n_features)
    releases = [
        Release("sum", sensitivity=root, share=_SHARES["sum"]),
        Release("count", sensitivity=root, share=_SHARES["count"]),
    ]
    if with_histogram:
        releases.insert(0, histogram_release(n_features, share=_SHARES["histogram"]))
    return releases


def mean_statistics(X, observed, lower, upper, weights=None):
    """What ``DPSimpleImputer(strategy="mean")`` releases, before noise.

    ``X`` (missing entries may hold anything, NaN included) is read only
    where ``observed``: those values are clipped to ``[lower, upper]`` and
    mapped onto ``[-1, 1]``. Returns each feature's sum of the mapped values
    and its count of observed values, each record's terms times its factor
    in ``weights`` (the unit factors of a fit with ``unit_ids``; None: 1).
    """
    observed = np.asarray(observed, dtype=bool)
    center, half = (lower + upper) / 2, (upper - lower) / 2
    values = np.where(observed, np.asarray(X, dtype=np.float64), center)
    # clipped again after the affine map: its rounding must not push a value
    # past +-1, the sensitivity the plan states
    U = np.clip((np.clip(values, lower, upper) - center) / half, -1.0, 1.0)
    if weights is None:
        return {"sum": U.sum(axis=0), "count": observed.sum(axis=0).astype(np.float64)}
    return {"sum": weighted_sum(U, weights),
            "count": weighted_sum(observed.astype(np.float64), weights)}


def count_releases(n_features):
    """The Gaussian release of ``strategy="most_frequent"`` with public
    ``categories``: a record adds one to at most one category of each
    feature, so the concatenated counts move by at most ``sqrt(n_features)``
    in l2 norm."""
    return [counts_release(n_features)]


def category_counts(X, observed, categories, weights=None):
    """Counts of the observed values of each feature equal to each of its
    public ``categories``, concatenated over the features (values outside
    the categories count nowhere); each record counts with its factor in
    ``weights``, or 1."""
    counts = []
    for j, values in enumerate(categories):
        codes = column_codes(np.asarray(X[:, j], dtype=np.float64), values)
        counted = np.asarray(observed[:, j], dtype=bool) & (codes >= 0)
        counts.append(np.bincount(
            codes[counted], weights=None if weights is None else weights[counted],
            minlength=len(values)).astype(np.float64))
    return np.concatenate(counts) if counts else np.empty(0)


def _trusted(noisy_total, std):
    """Whether a feature's noisy count of observed values (``std``: the
    noise std of that total; None without privacy) is high enough to use
    its statistic: at least ``max(1, 2 std)``."""
    threshold = 1.0 if std is None else max(1.0, _FALLBACK_STDS * std)
    return np.asarray(noisy_total) >= threshold


class DPSimpleImputer(DPPreprocessorMixin, TransformerMixin, BaseEstimator):
    """Impute missing values with differentially private statistics.

    Replaces the missing values of each (numeric) feature by a statistic of
    the feature learnt under differential privacy from its observed values
    within public bounds, or by a public constant at no cost:

    ``strategy="mean"``
        The observed values are clipped to the feature's public ``bounds``
        and mapped onto ``[-1, 1]``; ``fit`` releases each feature's sum of
        the mapped values and its count of observed values with Gaussian
        noise. One record moves each sum by at most 1 (half the width of
        the bounds, in the units of ``X``) and each count by at most 1, so
        the l2 sensitivity of each release over the ``d`` features is
        ``sqrt(d)``; a :class:`~skdp.privacy.ReleasePlan` calibrates the
        two releases together to ``(epsilon, delta)`` under add/remove-one
        neighbours. The mean is the noisy sum over the noisy count, clipped
        to the bounds. With ``data_range`` instead of ``bounds``, a fifth of
        the budget (in GDP ``mu^2``) first estimates the bounds inside that
        wide public range, as :class:`DPStandardScaler` does.
    ``strategy="median"``
        A Gaussian histogram of the observed values over the public range
        (``bounds`` or ``data_range``, cut into ``n_bins`` bins; l2
        sensitivity ``sqrt(d)``), and the point where its noisy cumulative
        count reaches half its noisy total (interpolated inside the bin).
    ``strategy="most_frequent"``
        With public ``categories`` (a list of values per feature): the
        noisy counts of the observed values equal to each category
        (sensitivity ``sqrt(d)``), and the category with the largest noisy
        count. Without them: the same histogram as for the median, and the
        centre of its bin with the largest noisy count.
    ``strategy="constant"``
        ``fill_value`` (default 0) for every feature. ``fit`` reads only
        the shape and column names of ``X``: ``epsilon_ = 0`` and
        ``dp_event_`` is a ``NoOpDpEvent``.

    With ``fit(X, unit_ids=...)`` the guarantee is about adding or removing
    one unit (a person) with all its records: each unit keeps at most
    ``max_records_per_unit`` of its records, whose terms in every release
    (sums, counts, histograms) are weighted ``1 / min(|u|, k)``, so the
    sensitivities and the noise are those of a record-level fit. The
    statistics are then those of the unit-weighted observed values (each
    unit's kept records share one unit of mass).

    **Features with too few observed values.** A feature whose noisy count
    of observed values (for a histogram or categories: the sum of its noisy
    counts) is below ``max(1, 2 sigma)``, ``sigma`` the noise std of that
    count, falls back to ``fill_value`` when it is given, else to the middle
    of its bounds (the first of its categories for ``most_frequent`` with
    categories). An entirely missing feature does so with probability about
    0.98. The decision reads only the noisy count, never the data, and is
    recorded in ``fallback_``. Extreme values are clipped before they are
    counted or summed, so ``statistics_`` is always finite: inside the
    bounds (or among the categories), or ``fill_value``.

    Unlike scikit-learn's ``SimpleImputer``, no feature is ever dropped
    (whether a feature is entirely missing depends on the data), the
    missing indicator (``add_indicator=True``) covers every feature (which
    ones have missing values depends on the data; the indicator of a record
    depends on that record alone, so it is free), and only numeric data is
    imputed: encode categorical features with :class:`DPOneHotEncoder`,
    which maps missing values to all zeros. Observed values pass through
    ``transform`` unchanged (not clipped).

    Read more in :ref:`preprocessing`.

    Parameters
    ----------
    missing_values : float or str, default=np.nan
        The placeholder of the missing values: NaN, a finite number (then
        NaN is not accepted in ``X``), or a string such as ``" "`` or
        ``"?"`` in columns that are otherwise numeric (text read from a
        file): the entries equal to it, and NaN, are missing, and every
        other entry must be a number.
    strategy : {"mean", "median", "most_frequent", "constant"}, default="mean"
        The statistic that replaces the missing values. Every strategy but
        ``"constant"`` needs public ``bounds`` or ``data_range`` (or
        ``categories`` for ``"most_frequent"``).
    fill_value : float or None, default=None
        With ``strategy="constant"``: the value imputed (None: 0). With
        another strategy: the fallback of a feature with too few observed
        values (None: the middle of its bounds).
    bounds : (lower, upper), dict or None, default=None
        Public per-feature range, fixed without looking at the data (a data
        dictionary, domain knowledge): ``lower`` and ``upper`` scalars or
        arrays of shape (n_features,), or a dict mapping every feature name
        to a ``(lower, upper)`` pair. Observed values outside it are clipped
        when the statistics are computed.
    data_range : (lower, upper), dict or None, default=None
        A wide public range: ``"mean"`` estimates the bounds inside it
        privately (a noisy histogram with ``n_bins`` bins per feature, at a
        fifth of the budget); ``"median"`` and ``"most_frequent"`` cut their
        histogram over it as over ``bounds``. Only one of ``bounds`` and
        ``data_range`` may be given.
    categories : list of array-like or None, default=None
        Public candidate values of each feature for
        ``strategy="most_frequent"`` (one non-empty list of finite numbers
        per feature). Then ``bounds`` and ``data_range`` are not used.
    n_bins : int, default=32
        Bins per feature of the histograms (``"median"``,
        ``"most_frequent"`` without categories, ``data_range``).
    quantile : float in [0, 0.5), default=0.01
        Share of the observed values allowed below and above the range
        estimated inside ``data_range`` (``"mean"`` only).
    add_indicator : bool, default=False
        Append one 0/1 column per feature marking its missing values, named
        ``"missingindicator_<feature>"``. Free: it is a function of each
        record alone.
    epsilon : float or None, default=1.0
        Privacy budget of ``fit`` (unused by ``"constant"``). None computes
        the exact statistics, for reference (``epsilon_`` is then inf).
        About adding or removing one record, or with ``fit(unit_ids=...)`` one
        unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
    random_state : int, RandomState instance or None, default=None
        Seeds the noise for reproducible experiments. None draws the noise
        from the operating system's CSPRNG (:class:`~skdp.privacy.SecureGenerator`).
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit that the fit uses (a random subset of a larger unit, drawn once
        per fit), each weighted ``1 / min(|u|, k)``. Unused without
        ``unit_ids``. See :ref:`units`.

    Attributes
    ----------
    statistics_ : ndarray of shape (n_features,)
        The value imputed in each feature.
    fallback_ : ndarray of bool of shape (n_features,)
        Features whose noisy count was too small, imputed with the fallback.
    bounds_ : ndarray of shape (2, n_features) or None
        The range the observed values were clipped to (estimated inside
        ``data_range`` for ``"mean"``); None for ``"constant"`` and for
        ``"most_frequent"`` with categories.
    epsilon_, delta_ : float
        Privacy spent by ``fit`` (the accountant's epsilon of ``dp_event_``).
    dp_event_ : dp_accounting.DpEvent or None
    privacy_report_ : skdp.privacy.PrivacyReport
        ``privacy_report_.privacy_unit`` names what epsilon is about.
    n_units_ : int or None
        Number of privacy units with ``unit_ids``; None without.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has feature names that are all strings.

    See Also
    --------
    DPStandardScaler : Standardize with a private mean and variance.
    DPOneHotEncoder : One-hot encoding; missing values give all zeros.
    skdp.model_selection.spent : Total privacy of a fitted pipeline.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPSimpleImputer
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(50, 10, size=(10_000, 2))
    >>> X[rng.random(X.shape) < 0.2] = np.nan
    >>> imputer = DPSimpleImputer(bounds=(0, 100), epsilon=1.0, random_state=0).fit(X)
    >>> np.round(imputer.statistics_, 0)
    array([50., 50.])
    >>> round(imputer.epsilon_, 2)
    1.0
    >>> imputer.transform([[np.nan, 42.0]]).round(0)
    array([[50., 42.]])

    Constant imputation and the missing indicator cost nothing:

    >>> free = DPSimpleImputer(strategy="constant", fill_value=-1, add_indicator=True).fit(X)
    >>> free.transform([[np.nan, 42.0]])
    array([[-1., 42.,  1.,  0.]])
    >>> free.epsilon_
    0.0
    """

    _released_attributes = frozenset({"statistics_", "fallback_", "bounds_"})

    _parameter_constraints = {
        "missing_values": [Real, str],
        "strategy": [StrOptions({"mean", "median", "most_frequent", "constant"})],
        "fill_value": [Real, None],
        "bounds": ["array-like", dict, None],
        "data_range": ["array-like", dict, None],
        "categories": [list, None],
        "n_bins": [Interval(Integral, 2, None, closed="left")],
        "quantile": [Interval(Real, 0, 0.5, closed="left")],
        "add_indicator": ["boolean"],
        **DPPreprocessorMixin._parameter_constraints,
    }

    def __init__(
        self, *, missing_values=np.nan, strategy="mean", fill_value=None, bounds=None,
        data_range=None, categories=None, n_bins=32, quantile=0.01, add_indicator=False,
        epsilon=1.0, delta=1e-5, random_state=None, max_records_per_unit=MAX_RECORDS_PER_UNIT,
    ):
        self.missing_values = missing_values
        self.strategy = strategy
        self.fill_value = fill_value
        self.bounds = bounds
        self.data_range = data_range
        self.categories = categories
        self.n_bins = n_bins
        self.quantile = quantile
        self.add_indicator = add_indicator
        self.epsilon = epsilon
        self.delta = delta
        self.random_state = random_state
        self.max_records_per_unit = max_records_per_unit

    def _skdp_reads_data(self):
        """Constant imputation reads nothing from the data."""
        return self.strategy != "constant"

    # ---------------------------------------------------------------- checks
    def _check_X(self, X, reset):
        """``X`` as a float64 array (NaN allowed when it marks missing values;
        a string marker becomes NaN)."""
        if isinstance(self.missing_values, str):
            return self._numbers_with_marker(X, reset)
        finite = "allow-nan" if is_scalar_nan(self.missing_values) else True
        X = validate_data(self, X, dtype=FLOAT_DTYPES, ensure_all_finite=finite, reset=reset)
        return np.asarray(X, dtype=np.float64)

    def _numbers_with_marker(self, X, reset):
        """``X`` with a string ``missing_values``: its entries (and NaN)
        become NaN, the others must be numbers."""
        X = validate_data(self, X, dtype=None, ensure_all_finite=False, reset=reset)
        X = np.asarray(X, dtype=object)
        marked = X == self.missing_values
        try:
            values = np.where(marked, np.nan, X).astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"With missing_values={self.missing_values!r}, every other entry of X must be a "
                f"number: {exc}. Encode text columns with skdp.preprocessing.DPOneHotEncoder "
                "(e.g. in a ColumnTransformer) and impute only the numeric ones."
            ) from exc
        if np.isinf(values).any():
            raise ValueError("Input X contains infinity; only missing values may be marked.")
        return values

    def _missing(self, X):
        if is_scalar_nan(self.missing_values) or isinstance(self.missing_values, str):
            return np.isnan(X)
        return X == self.missing_values

    def _check_settings(self):
        """Raise a ValueError for public settings that do not fit together."""
        if not (isinstance(self.missing_values, str) or is_scalar_nan(self.missing_values)
                or math.isfinite(self.missing_values)):
            raise ValueError(
                f"missing_values must be np.nan or a finite number, got {self.missing_values!r}."
            )
        if self.fill_value is not None and not math.isfinite(self.fill_value):
            raise ValueError(
                f"fill_value must be a finite number or None, got {self.fill_value!r}."
            )
        if self.strategy == "constant":
            return
        if self.bounds is not None and self.data_range is not None:
            raise ValueError("Give public bounds or a data_range to estimate them in, not both.")
        if self.categories is not None:
            if self.strategy != "most_frequent":
                raise ValueError(
                    f"categories is only used with strategy='most_frequent', not "
                    f"strategy={self.strategy!r}; give bounds instead, or leave it None."
                )
            if self.bounds is not None or self.data_range is not None:
                raise ValueError(
                    "With categories, most_frequent counts the public categories and uses no "
                    "range: leave bounds and data_range None."
                )
            return
        if self.bounds is None and self.data_range is None:
            also = ", or public categories" if self.strategy == "most_frequent" else ""
            raise ValueError(
                f"DPSimpleImputer(strategy={self.strategy!r}) learns from the values and needs "
                "public bounds to clip them to: give bounds=(lower, upper) (scalars, arrays of "
                "shape (n_features,), or a dict by feature name), or a wide data_range to "
                f"estimate them in{also}; or use strategy='constant', which costs nothing."
            )

    def _checked_categories(self, n_features):
        if len(self.categories) != n_features:
            raise ValueError(
                f"categories has {len(self.categories)} entries but X has {n_features} "
                "features; give one list of categories per feature."
            )
        checked = []
        for j, values in enumerate(self.categories):
            try:
                values = np.asarray(values, dtype=np.float64).ravel()
            except (TypeError, ValueError):
                raise ValueError(
                    f"categories[{j}] must hold numbers; impute categorical features with "
                    "DPOneHotEncoder, which encodes missing values as zeros."
                ) from None
            if values.size == 0:
                raise ValueError(f"categories[{j}] must be a non-empty list of numbers.")
            if not np.isfinite(values).all():
                raise ValueError(f"categories[{j}] must hold finite numbers.")
            checked.append(values)
        return checked

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None, *, unit_ids=None):
        """Learn the value imputed in each feature.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric data with missing values marked by ``missing_values``.
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
        X = self._check_X(X, reset=True)
        self._check_settings()
        n_features = X.shape[1]
        names = getattr(self, "feature_names_in_", None)
        self.bounds_ = None
        self.fallback_ = np.zeros(n_features, dtype=bool)
        constant = self.strategy == "constant"
        generator, units = self._randomness(unit_ids, X.shape[0], noise=not constant)
        if constant:
            fill = 0.0 if self.fill_value is None else float(self.fill_value)
            self.statistics_ = np.full(n_features, fill)
            self._store_privacy_report(public_report(units))
            return self

        X, weights = kept_records(X, units)
        data = (X, ~self._missing(X), weights, units, generator)
        if self.strategy == "most_frequent" and self.categories is not None:
            statistics, trusted, fallback, report = self._fit_categories(*data)
        elif self.strategy == "mean":
            statistics, trusted, fallback, report = self._fit_mean(*data, names)
        else:
            statistics, trusted, fallback, report = self._fit_histogram(*data, names)
        if self.fill_value is not None:
            fallback = np.full(n_features, float(self.fill_value))
        self.statistics_ = np.where(trusted, statistics, fallback)
        self.fallback_ = ~trusted
        self._store_privacy_report(report)
        return self

    def _public_range(self, n_features, names):
        if self.bounds is not None:
            return feature_pairs(self.bounds, n_features, names, "bounds")
        return feature_pairs(self.data_range, n_features, names, "data_range")

    def _fit_mean(self, X, observed, weights, units, generator, names):
        n_features = X.shape[1]
        private_range = self.bounds is None
        report = self._spend(one_off_plan(mean_releases(n_features, with_histogram=private_range),
                                          units))
        self._charge_ledger(report)
        lower, upper = self._public_range(n_features, names)
        if private_range:
            counts = range_histogram(X, lower, upper, self.n_bins, observed, weights)
            noisy = add_noise({"histogram": counts}, report, generator)["histogram"]
            lower, upper = range_from_histogram(noisy, lower, upper, self.quantile)
        noisy = add_noise(mean_statistics(X, observed, lower, upper, weights), report, generator)
        center, half = (lower + upper) / 2, (upper - lower) / 2
        mean_u = np.clip(noisy["sum"] / np.maximum(noisy["count"], 1.0), -1.0, 1.0)
        self.bounds_ = np.vstack([lower, upper])
        trusted = _trusted(noisy["count"], report.scale("count"))
        return center + half * mean_u, trusted, center, report

    def _fit_histogram(self, X, observed, weights, units, generator, names):
        n_features = X.shape[1]
        report = self._spend(one_off_plan([histogram_release(n_features)], units))
        self._charge_ledger(report)
        lower, upper = self._public_range(n_features, names)
        counts = range_histogram(X, lower, upper, self.n_bins, observed, weights)
        noisy = add_noise({"histogram": counts}, report, generator)["histogram"]
        if self.strategy == "median":
            statistics = histogram_median(noisy, lower, upper)
        else:  # most_frequent: the centre of the fullest bin
            width = (upper - lower) / self.n_bins
            statistics = lower + (np.argmax(noisy, axis=1) + 0.5) * width
        std = report.scale("histogram")
        trusted = _trusted(noisy.sum(axis=1), None if std is None else std * math.sqrt(self.n_bins))
        self.bounds_ = np.vstack([lower, upper])
        return statistics, trusted, (lower + upper) / 2, report

    def _fit_categories(self, X, observed, weights, units, generator):
        categories = self._checked_categories(X.shape[1])
        report = self._spend(one_off_plan(count_releases(X.shape[1]), units))
        self._charge_ledger(report)
        counts = category_counts(X, observed, categories, weights)
        noisy = add_noise({"counts": counts}, report, generator)["counts"]
        noisy = np.split(noisy, np.cumsum([len(c) for c in categories])[:-1])
        std = report.scale("counts")
        statistics = np.array([c[np.argmax(n)] for c, n in zip(categories, noisy)])
        trusted = np.array([
            _trusted(n.sum(), None if std is None else std * math.sqrt(len(n))) for n in noisy
        ], dtype=bool)
        return statistics, trusted, np.array([c[0] for c in categories]), report

    # ------------------------------------------------------------- transform
    def transform(self, X):
        """Replace the missing values of ``X`` by ``statistics_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features), or (n_samples, 2 *
            n_features) with ``add_indicator``
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        missing = self._missing(X)
        out = np.where(missing, self.statistics_, X)
        if self.add_indicator:
            out = np.hstack([out, missing.astype(np.float64)])
        return out

    def get_feature_names_out(self, input_features=None):
        """Output feature names: the input's, then
        ``"missingindicator_<feature>"`` for each with ``add_indicator``.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names; by default ``feature_names_in_`` or
            ``x0, x1, ...``.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self, "n_features_in_")
        names = _check_feature_names_in(self, input_features)
        if self.add_indicator:
            names = np.concatenate([names, [f"missingindicator_{n}" for n in names]])
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = is_scalar_nan(self.missing_values)
        return tags
