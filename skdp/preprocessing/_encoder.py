"""One-hot encoding with public or privately selected categories."""

import math
import warnings
from numbers import Integral

import numpy as np
from scipy import stats
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._fit.units import MAX_RECORDS_PER_UNIT
from ..exceptions import CategoryWarning
from ..privacy import Release
from ._base import (
    DPPreprocessorMixin,
    add_noise,
    kept_records,
    one_off_plan,
    public_report,
)

#: Threshold on a candidate's noisy count, in noise standard deviations,
#: when ``min_frequency`` is None (an absent candidate passes with
#: probability 2.3 %).
_DEFAULT_STDS = 2.0
#: ``fit`` warns when the noise threshold is at least this share of the records.
WARN_THRESHOLD_SHARE = 0.01


def _is_missing(value):
    return value is None or (isinstance(value, float) and value != value) or (
        type(value).__name__ == "NAType"
    )


def _canonical_key(value):
    return (type(value).__name__, str(value))


def _unique_inverse(values):
    """Distinct values of a column (sorted or in a canonical order, never in
    order of appearance) and each row's index into them."""
    try:
        uniques, inverse = np.unique(values, return_inverse=True)
        return uniques, inverse.reshape(-1)
    except TypeError:  # mixed types or None: group by Python equality
        groups = {}
        missing = object()
        keys = [missing if _is_missing(v) else v for v in values]
        for key in keys:
            groups.setdefault(key, None)
        ordered = sorted((k for k in groups if k is not missing), key=_canonical_key)
        if any(k is missing for k in groups):
            ordered.append(None)
        position = {k: i for i, k in enumerate(ordered) if k is not None}
        na = len(ordered) - 1
        inverse = np.fromiter(
            (na if k is missing else position[k] for k in keys), dtype=np.int64, count=len(keys)
        )
        uniques = np.empty(len(ordered), dtype=object)
        uniques[:] = ordered
        return uniques, inverse


def _category_array(categories):
    """The categories as an array, kept as objects when numpy would turn
    mixed types into strings (``["a", 1]`` must keep the integer 1)."""
    categories = list(categories)
    array = np.asarray(categories)
    if array.dtype.kind in "US" and not all(isinstance(c, str) for c in categories):
        array = np.empty(len(categories), dtype=object)
        array[:] = categories
    return array


def column_codes(values, categories):
    """Index of each value in ``categories``; -1 for unknown or missing values."""
    lookup = {}
    for i, category in enumerate(categories):
        if not _is_missing(category):
            lookup.setdefault(category, i)
    uniques, inverse = _unique_inverse(values)
    table = np.array(
        [-1 if _is_missing(u) else lookup.get(u, -1) for u in uniques], dtype=np.int64
    )
    return table[inverse] if len(uniques) else np.empty(0, dtype=np.int64)


def present_counts(values, weights=None):
    """The non-missing distinct values of a column and their counts (each
    value counted with its record's factor in ``weights``, or 1)."""
    uniques, inverse = _unique_inverse(values)
    counts = np.bincount(inverse, weights=weights, minlength=len(uniques)).astype(np.float64)
    keep = np.array([not _is_missing(u) for u in uniques], dtype=bool)
    return uniques[keep], counts[keep]


def counts_release(n_features):
    """The Gaussian release of the category counts: a record adds one to at
    most one category of each of the ``n_features`` columns, so the
    concatenated counts move by at most ``sqrt(n_features)`` in l2 norm (a
    unit, whose records add factors summing to at most 1, too)."""
    return Release("counts", sensitivity=math.sqrt(n_features))


def _candidate_counts(codes, n_candidates, weights=None):
    """Count of each candidate among ``codes`` (-1: no candidate), each
    record counted with its factor in ``weights``, or 1."""
    known = codes >= 0
    weights = None if weights is None else weights[known]
    return np.bincount(codes[known], weights=weights, minlength=n_candidates).astype(np.float64)


def stability_threshold(std, n_new, selection_delta):
    """Smallest threshold at which the at most ``n_new`` new categories of
    one record or unit (count at most 1 each) all stay hidden except with
    probability ``selection_delta``: ``1 + std * Phi^-1(1 - selection_delta
    / n_new)``, by a union bound.

    A record brings at most one new category per feature (``n_new =
    n_features``); a unit at most ``max_records_per_unit`` per feature, each
    of weighted count at most 1 (``n_new = n_features *
    max_records_per_unit``).
    """
    return 1.0 + std * float(stats.norm.isf(selection_delta / n_new))


class DPOneHotEncoder(DPPreprocessorMixin, TransformerMixin, BaseEstimator):
    """One-hot encode categorical features, with public or private categories.

    Values that are not among the fitted categories (unknown, infrequent or
    missing) are encoded as all zeros (``handle_unknown="ignore"``).

    ``categories`` as a list (public, recommended)
        The categories of each feature, fixed without looking at the data
        (e.g. a data dictionary). ``fit`` reads only the shape and column
        names of ``X``: ``epsilon_ = 0``, ``dp_event_`` is a ``NoOpDpEvent``.
    ``categories="private"`` with ``candidate_categories``
        Frequent categories are selected from a public candidate list: the
        counts of every candidate are released with Gaussian noise (l2
        sensitivity ``sqrt(n_features)`` under add/remove-one neighbours,
        calibrated to ``(epsilon, delta)`` by a
        :class:`~skdp.privacy.ReleasePlan`), and a candidate is kept when its
        noisy count reaches the threshold set by ``min_frequency``.
    ``categories="private"`` without candidates
        The candidates are unknown, so the categories present in the data
        are counted with Gaussian noise calibrated to ``(epsilon, delta/2)``
        and only those whose noisy count reaches the stability threshold
        ``tau = 1 + sigma * Phi^-1(1 - delta_s / n_features)`` are kept, with
        ``delta_s = delta / (2 exp(epsilon))``: a category that only one
        record holds is then released with probability at most
        ``delta_s``. This is the thresholded (stable) histogram of Korolova
        et al. (2009), with Gaussian noise and bounded contributions as in
        Wilson et al. (2020); it is ``(epsilon_, delta_)``-DP with
        ``delta_ = privacy_report_.delta + exp(epsilon_) * selection_delta_
        <= delta``. Only the kept categories are released, never the
        others' noisy counts.

    With ``fit(X, unit_ids=...)`` the guarantee is about adding or removing
    one unit (a person) with all its records: each unit keeps at most
    ``k = max_records_per_unit`` of its records, each adding ``1 / min(|u|,
    k)`` instead of 1 to the counts (the same sensitivity, the same noise;
    the counts count units), and only kept records make a category present.
    A unit may bring up to ``k`` new categories per feature, so without
    candidates the stability threshold is set for ``n_features * k`` new
    categories (``Phi^-1(1 - delta_s / (n_features k))``).

    Read more in :ref:`preprocessing`.

    Parameters
    ----------
    categories : "private" or list of array-like, default="private"
        Public categories of each feature, or ``"private"`` to select them
        under differential privacy.
    candidate_categories : list of array-like or None, default=None
        Public candidates of each feature for ``categories="private"``.
    min_frequency : int, float or None, default=None
        Threshold on a category's noisy count: an int is a count, a float in
        (0, 1) a share of the feature's noisy total (the sum of the
        candidates' noisy counts, or of the kept categories' without
        candidates). None keeps candidates whose noisy count reaches 2 noise
        standard deviations (every category present, without privacy).
        Without candidates the stability threshold applies as well.
    epsilon : float or None, default=1.0
        Budget of the private selection. None counts exactly, for reference
        (``epsilon_`` is then inf).
        About adding or removing one record, or with ``fit(unit_ids=...)`` one
        unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
    dtype : number type, default=np.float64
        Type of the output.
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
    categories_ : list of ndarray
        The categories of each feature, in the order of the output columns.
    noisy_counts_ : list of ndarray or None
        With candidates: the released noisy count of every candidate. None
        otherwise (without candidates only the kept categories are released).
    count_threshold_ : float
        The noisy count a category must reach to be kept, set by the noise
        (public: from epsilon, delta and the number of columns): the
        stability threshold without candidates, twice the noise std with
        them, 1 without privacy (``min_frequency`` may ask for more). When
        it is at least 1 % of the records (or units), ``fit`` warns
        (:class:`~skdp.exceptions.CategoryWarning`).
    n_dropped_categories_ : ndarray of shape (n_features,) or None
        With candidates: how many candidates of each column were not kept
        (a function of the released noisy counts). None otherwise: without
        candidates the number of categories below the threshold is not
        released.
    selection_delta_ : float
        The stability part of ``delta_`` (0 unless the candidates are
        unknown).
    epsilon_, delta_ : float
    dp_event_ : dp_accounting.DpEvent or None
    privacy_report_ : skdp.privacy.PrivacyReport
        ``privacy_report_.privacy_unit`` names what epsilon is about.
    n_units_ : int or None
        Number of privacy units with ``unit_ids``; None without.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    References
    ----------
    A. Korolova, K. Kenthapadi, N. Mishra and A. Ntoulas. Releasing search
    queries and clicks privately. WWW 2009.

    R. J. Wilson, C. Y. Zhang, W. Lam, D. Desfontaines, D. Simmons-Marengo and
    B. Gipson. Differentially private SQL with bounded user contribution.
    PoPETs 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.preprocessing import DPOneHotEncoder
    >>> X = np.array([["a", "x"], ["b", "y"], ["a", "z"]], dtype=object)
    >>> enc = DPOneHotEncoder(categories=[["a", "b"], ["x", "y"]]).fit(X)
    >>> enc.transform(X)
    array([[1., 0., 1., 0.],
           [0., 1., 0., 1.],
           [1., 0., 0., 0.]])
    >>> enc.get_feature_names_out().tolist()
    ['x0_a', 'x0_b', 'x1_x', 'x1_y']

    Private selection of the frequent candidates:

    >>> rng = np.random.default_rng(0)
    >>> X = rng.choice(["a", "b", "rare"], p=[0.6, 0.39, 0.01], size=(5000, 1))
    >>> enc = DPOneHotEncoder(candidate_categories=[["a", "b", "rare", "absent"]],
    ...                       min_frequency=0.05, epsilon=1.0, random_state=0).fit(X)
    >>> enc.categories_
    [array(['a', 'b'], dtype='<U6')]
    """

    _released_attributes = frozenset({"categories_", "noisy_counts_", "n_dropped_categories_"})

    _parameter_constraints = {
        "categories": [StrOptions({"private"}), list],
        "candidate_categories": [list, None],
        "min_frequency": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="neither"),
            None,
        ],
        **DPPreprocessorMixin._parameter_constraints,
        "dtype": "no_validation",
    }

    def __init__(
        self, *, categories="private", candidate_categories=None, min_frequency=None,
        epsilon=1.0, delta=1e-5, dtype=np.float64, random_state=None,
        max_records_per_unit=MAX_RECORDS_PER_UNIT,
    ):
        self.categories = categories
        self.candidate_categories = candidate_categories
        self.min_frequency = min_frequency
        self.epsilon = epsilon
        self.delta = delta
        self.dtype = dtype
        self.random_state = random_state
        self.max_records_per_unit = max_records_per_unit

    def _check_X(self, X, reset):
        X = validate_data(self, X, dtype=None, ensure_all_finite="allow-nan", reset=reset)
        if X.dtype.kind in "USa":
            X = X.astype(object)
        return X

    @staticmethod
    def _per_feature(lists, n_features, name):
        if len(lists) != n_features:
            raise ValueError(
                f"{name} has {len(lists)} entries but X has {n_features} features; give one "
                "list of categories per feature."
            )
        return [_category_array(c) for c in lists]

    def _frequency_threshold(self, total):
        if self.min_frequency is None:
            return None
        if isinstance(self.min_frequency, Integral):
            return float(self.min_frequency)
        return float(self.min_frequency) * max(float(total), 1.0)

    def _skdp_reads_data(self):
        """Public categories (a list) read nothing from the data."""
        return isinstance(self.categories, str)

    def _skdp_stability_delta(self):
        """Bound on the stability delta of a fit (for a private search's
        budget): ``delta / 2`` when categories are chosen without
        candidates, whatever epsilon the search gives; else 0."""
        if (isinstance(self.categories, str) and self.categories == "private"
                and self.candidate_categories is None and self.epsilon is not None):
            return float(self.delta) / 2.0
        return 0.0

    def fit(self, X, y=None, *, unit_ids=None):
        """Fix the categories: public, or selected under differential privacy.

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
        X = self._check_X(X, reset=True)
        n_features = X.shape[1]
        self.noisy_counts_ = None
        self.n_dropped_categories_ = None
        self.count_threshold_ = 1.0
        self.selection_delta_ = 0.0
        public = not isinstance(self.categories, str)
        if public and self.candidate_categories is not None:
            raise ValueError(
                "candidate_categories is only used with categories='private'; with public "
                "categories leave it None."
            )
        generator, units = self._randomness(unit_ids, X.shape[0], noise=not public)
        if public:
            self.categories_ = self._per_feature(self.categories, n_features, "categories")
            self._store_privacy_report(public_report(units))
            return self
        n_public = X.shape[0] if units is None else units.n_units
        X, weights = kept_records(X, units)
        plan = one_off_plan([counts_release(n_features)], units)
        if self.candidate_categories is not None:
            self._fit_candidates(X, weights, plan, generator)
        else:
            n_new = n_features * (1 if units is None else units.max_records)
            self._fit_stable(X, weights, n_new, plan, generator)
        self._warn_if_threshold_high(n_public)
        return self

    def _warn_if_threshold_high(self, n_public):
        """A :class:`~skdp.exceptions.CategoryWarning` when the noise
        threshold (public) is at least :data:`WARN_THRESHOLD_SHARE` of the
        records (or units): categories that common may have been dropped."""
        if self.epsilon is None or self.count_threshold_ < WARN_THRESHOLD_SHARE * n_public:
            return
        kept = ", ".join(f"{name}: {len(c)}" for name, c in zip(self._column_names(),
                                                                 self.categories_))
        if self.n_dropped_categories_ is not None:
            dropped = ", ".join(f"{name}: {int(d)}" for name, d in zip(
                self._column_names(), self.n_dropped_categories_))
            detail = f"Candidates dropped per column: {dropped} (kept: {kept})."
        else:
            detail = (f"Categories kept per column: {kept} (how many were dropped is not "
                      "released: it would reveal rare categories).")
        warnings.warn(
            f"DPOneHotEncoder keeps a category only when its noisy count reaches "
            f"{self.count_threshold_:.0f} (count_threshold_, set by epsilon={self.epsilon:g}, "
            f"delta and the {self.n_features_in_} columns, all public): "
            f"{100 * self.count_threshold_ / max(n_public, 1):.1f}% of the {n_public} records "
            f"(or units), so categories held by fewer are dropped and encode as all zeros. "
            f"{detail} Give the categories (categories=[...] when they are public, or "
            "candidate_categories=[...] to select among known ones at a lower threshold), "
            "encode fewer columns with this encoder, or raise epsilon.",
            CategoryWarning, stacklevel=3,
        )

    def _column_names(self):
        if hasattr(self, "feature_names_in_"):
            return [str(name) for name in self.feature_names_in_]
        return [f"x{j}" for j in range(self.n_features_in_)]

    def _fit_candidates(self, X, weights, plan, generator):
        candidates = self._per_feature(self.candidate_categories, X.shape[1],
                                       "candidate_categories")
        counts = [
            _candidate_counts(column_codes(X[:, j], c), len(c), weights)
            for j, c in enumerate(candidates)
        ]
        report = self._spend(plan)
        self._charge_ledger(report)
        sizes = np.cumsum([len(c) for c in candidates])[:-1]
        noisy = add_noise({"counts": np.concatenate(counts)}, report, generator)["counts"]
        noisy = np.split(noisy, sizes)
        std = report.scale("counts")
        self.count_threshold_ = 1.0 if std is None else _DEFAULT_STDS * std
        self.categories_ = []
        for c, values in zip(candidates, noisy):
            threshold = self._frequency_threshold(values.sum())
            if threshold is None:
                threshold = self.count_threshold_
            self.categories_.append(c[values >= threshold])
        self.noisy_counts_ = noisy
        self.n_dropped_categories_ = np.array(
            [len(c) - len(kept) for c, kept in zip(candidates, self.categories_)])
        self._store_privacy_report(report)

    def _fit_stable(self, X, weights, n_new, plan, generator):
        """Categories present in ``X`` whose noisy count passes the stability
        threshold for ``n_new`` new categories of one record or unit."""
        n_features = X.shape[1]
        present = [present_counts(X[:, j], weights) for j in range(n_features)]
        if self.epsilon is None:
            report = plan.non_private(self.delta)
            tau = 1.0
        else:
            report = plan.calibrate(self.epsilon, self.delta / 2)
            self.selection_delta_ = self.delta / (2 * math.exp(self.epsilon))
            tau = stability_threshold(report.scale("counts"), n_new, self.selection_delta_)
        self._charge_ledger(report, extra_delta=0.0 if self.epsilon is None
                            else math.exp(report.epsilon) * self.selection_delta_)
        self.count_threshold_ = float(tau)
        flat = np.concatenate([c for _, c in present]) if present else np.empty(0)
        noisy = add_noise({"counts": flat}, report, generator)["counts"]
        noisy = np.split(noisy, np.cumsum([len(c) for _, c in present])[:-1])
        self.categories_ = []
        for (values, _), counts in zip(present, noisy):
            stable = counts >= tau  # only these are released
            threshold = self._frequency_threshold(counts[stable].sum())
            keep = stable if threshold is None else stable & (counts >= threshold)
            self.categories_.append(values[keep])
        self._store_privacy_report(
            report, delta=report.delta + math.exp(report.epsilon) * self.selection_delta_
            if self.epsilon is not None else None,
        )

    def transform(self, X):
        """One-hot encode ``X``; values outside ``categories_`` give zeros.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_encoded_features)
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        widths = [len(c) for c in self.categories_]
        out = np.zeros((X.shape[0], sum(widths)), dtype=self.dtype)
        offset = 0
        for j, (categories, width) in enumerate(zip(self.categories_, widths)):
            codes = column_codes(X[:, j], categories)
            rows = np.flatnonzero(codes >= 0)
            out[rows, offset + codes[rows]] = 1
            offset += width
        return out

    def inverse_transform(self, X):
        """Map one-hot rows back to the categories.

        As scikit-learn's ``OneHotEncoder(handle_unknown="ignore")`` does: in
        each feature's block the column holding the largest value gives the
        category, and a block of all zeros -- a value that was unknown,
        infrequent or missing, which ``transform`` encodes as zeros -- gives
        ``None`` (the output is then of object dtype). A feature without any
        category is None in every row.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_encoded_features)
            One-hot encoded data, e.g. the output of :meth:`transform`.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> from skdp.preprocessing import DPOneHotEncoder
        >>> enc = DPOneHotEncoder(categories=[["a", "b"]]).fit([["a"], ["b"]])
        >>> enc.inverse_transform(enc.transform([["b"], ["c"]]))
        array([['b'],
               [None]], dtype=object)
        """
        check_is_fitted(self)
        X = check_array(X, accept_sparse="csr")
        widths = [len(c) for c in self.categories_]
        if X.shape[1] != sum(widths):
            raise ValueError(
                "Shape of the passed X data is not correct. Expected "
                f"{sum(widths)} columns, got {X.shape[1]}; pass the output of transform."
            )
        try:
            dtype = np.result_type(*[c.dtype for c in self.categories_ if len(c)])
        except (TypeError, ValueError):  # no category, or types without a common dtype
            dtype = np.dtype(object)
        out = np.empty((X.shape[0], len(widths)), dtype=dtype)
        unknown = {}
        offset = 0
        for j, (categories, width) in enumerate(zip(self.categories_, widths)):
            if width == 0:
                unknown[j] = np.ones(X.shape[0], dtype=bool)
                continue
            block = X[:, offset:offset + width]
            out[:, j] = categories[np.asarray(block.argmax(axis=1)).ravel()]
            zeros = np.asarray(block.sum(axis=1) == 0).ravel()
            if zeros.any():
                unknown[j] = zeros
            offset += width
        if unknown:
            out = out.astype(object)
            for j, rows in unknown.items():
                out[rows, j] = None
        return out

    def get_feature_names_out(self, input_features=None):
        """Output feature names, ``"<feature>_<category>"``.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names; by default ``feature_names_in_`` or
            ``x0, x1, ...``.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self)
        names = getattr(self, "feature_names_in_", None)
        if input_features is not None:
            input_features = np.asarray(input_features, dtype=object)
            if len(input_features) != self.n_features_in_ or (
                names is not None and not np.array_equal(input_features, names)
            ):
                raise ValueError(
                    "input_features must have n_features_in_ entries, equal to "
                    "feature_names_in_ when it is defined."
                )
            names = input_features
        if names is None:
            names = [f"x{j}" for j in range(self.n_features_in_)]
        return np.asarray(
            [f"{name}_{c}" for name, cats in zip(names, self.categories_) for c in cats],
            dtype=object,
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.input_tags.allow_nan = True
        return tags
