"""Machinery shared by the private preprocessing steps.

A step describes what ``fit`` releases as a :class:`~skdp.privacy.ReleasePlan`
of one-off Gaussian releases on the whole data (one batch, one step,
sampling rate 1), lets the plan calibrate the noise, draws it from a seeded
``torch.Generator`` (or the operating system's CSPRNG when ``random_state``
is None) and stores the plan's report as ``epsilon_``, ``delta_``,
``dp_event_`` and ``privacy_report_``, with the estimators' own scaffolding
(:class:`skdp._fit.private_fit.PrivateFitMixin`).

With ``fit(X, unit_ids=...)`` the privacy unit is a unit (a person, say)
instead of a record, as for the estimators (see :ref:`units`): each unit
keeps at most ``max_records_per_unit`` of its records
(:func:`~skdp.privacy.bound_units`, a random subset drawn once per fit) and
every kept record adds its bounded contribution to every release times its
factor ``1 / min(|u|, max_records_per_unit)`` (:func:`kept_records`,
:func:`weighted_sum`). A unit's factors sum to 1, so a whole unit moves each
release by at most the sensitivity of one record: the plan is the
record-level plan, about units.

:class:`DPPreprocessorMixin` holds the privacy parameters and report of
every step; :class:`BaseDPScaler` adds the public or privately estimated
feature ranges of the scalers.
"""

import warnings
from dataclasses import replace
from numbers import Integral, Real

import dp_accounting as dpa
import numpy as np
import torch
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from .._fit.private_fit import PrivateFitMixin
from .._fit.units import UNIT_CONSTRAINTS, unit_codes
from ..exceptions import PrivacyLeakWarning
from ..privacy import (
    BatchReleases,
    PrivacyReport,
    ReleasePlan,
    bound_units,
    gaussian_noise,
)
from ._ranges import range_from_histogram


def one_off_plan(releases, units=None):
    """A plan releasing ``releases`` once from the whole data set.

    With ``units`` (:class:`~skdp.privacy.UnitBounds`) the plan is about
    units: the same sensitivities hold for a unit's weighted records, and
    the report names the unit.
    """
    extra = ({} if units is None else
             {"n_records": units.n_units, "privacy_unit": units.description})
    return ReleasePlan(BatchReleases(releases, steps=1, sampling_rate=1.0, name="fit"), **extra)


def kept_records(X, units):
    """The rows of ``X`` that the units keep, and their factors.

    Without units (``units`` None): ``X`` itself and None, the unweighted
    code path. Otherwise the rows of ``units.kept`` and their factors
    ``1 / min(|u|, k)``; a dropped record then appears in no release (not
    even as a category of its own in a count).
    """
    if units is None:
        return X, None
    return X[units.kept], units.factors[units.kept]


def weighted_sum(values, weights):
    """Sum of ``values`` over the records (axis 0), each record's row times
    its factor; ``weights`` None is the plain sum."""
    if weights is None:
        return values.sum(axis=0)
    return weights @ values


def add_noise(statistics, report, generator):
    """``statistics`` (name -> float64 array) plus the report's Gaussian noise.

    Without privacy (``report.dp_event is None``) the statistics are
    returned unchanged.
    """
    if report.dp_event is None:
        return {name: np.asarray(value, dtype=np.float64) for name, value in statistics.items()}
    noisy = {}
    for name, value in statistics.items():
        value = torch.as_tensor(np.asarray(value, dtype=np.float64))
        noisy[name] = (value + gaussian_noise(value, report.scale(name), generator)).numpy()
    return noisy


def public_report(units=None):
    """Report of a fit that reads nothing from the data: (0, 0)-DP, also
    about the ``units`` when given."""
    return PrivacyReport(
        epsilon=0.0, delta=0.0, dp_event=dpa.NoOpDpEvent(), accountant="pld",
        neighboring="add_remove", noise={}, steps=(), sampling_rates=(),
        privacy_unit="record" if units is None else units.description,
    )


def leaky_report(report):
    """``report`` of a fit that also read something from the data in the clear."""
    events = [dpa.NonPrivateDpEvent()]
    if report.dp_event is not None:
        events.append(report.dp_event)
    return replace(report, epsilon=float("inf"), dp_event=dpa.ComposedDpEvent(events))


class DPPreprocessorMixin(PrivateFitMixin):
    """Privacy attributes and budget handling of the preprocessing steps: the
    randomness of a fit, spending its plan and storing its report come from
    :class:`skdp._fit.private_fit.PrivateFitMixin`, as for the estimators.

    A step merges ``_parameter_constraints`` (``epsilon``, ``delta``,
    ``random_state`` and ``max_records_per_unit``, which every step takes)
    into its own.
    """

    # requested by default, so that with metadata routing on a Pipeline's
    # unit_ids reach every private step, as they reach the estimators
    __metadata_request__fit = {"unit_ids": True}

    #: Fitted attributes computed from the noisy releases (covered by
    #: ``epsilon_``); every other fitted attribute is public (see
    #: :attr:`skdp._fit.template.BaseDPEstimator._released_attributes`).
    _released_attributes = frozenset()

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "max_records_per_unit": UNIT_CONSTRAINTS["max_records_per_unit"],
    }

    def _randomness(self, unit_ids, n_samples, *, noise=True):
        """``(generator, units)`` of a fit; sets ``n_units_``.

        ``units`` is the :class:`~skdp.privacy.UnitBounds` of ``unit_ids``
        (at most ``max_records_per_unit`` records of each unit), or None
        without them. One generator draws the units' subsets, then the
        noise; it is made only when the fit draws either (``noise``, or
        ``unit_ids`` given), else it is None: a fit that draws nothing
        leaves a ``RandomState`` given as ``random_state`` untouched.
        """
        codes, n_units = unit_codes(unit_ids, n_samples)
        generator = self._make_generator()[0] if noise or codes is not None else None
        units = None if codes is None else bound_units(
            codes, n_units, int(self.max_records_per_unit), generator)
        self.n_units_ = None if units is None else units.n_units
        return generator, units

    def _warn_leak(self, what):
        warnings.warn(
            f"{type(self).__name__}: {what} This is not differentially private: epsilon_ is "
            "set to inf.",
            PrivacyLeakWarning,
            stacklevel=3,
        )


class BaseDPScaler(DPPreprocessorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Feature ranges and input checks shared by the private scalers.

    A scaler takes each feature's range from public ``bounds``, or
    estimates it inside a wide public ``data_range`` from a noisy histogram
    with ``n_bins`` bins per feature (``quantile`` of the records may fall
    outside each side), and ``transform`` clips to that range when ``clip``.
    Subclasses implement ``fit``, ``transform`` and ``inverse_transform``
    with the helpers below.
    """

    _parameter_constraints = {
        **DPPreprocessorMixin._parameter_constraints,
        "bounds": ["array-like", dict, None],
        "data_range": ["array-like", dict, None],
        "n_bins": [Interval(Integral, 2, None, closed="left")],
        "quantile": [Interval(Real, 0, 0.5, closed="left")],
        "clip": ["boolean"],
    }

    def _check_range_source(self):
        """Raise a ValueError when both ``bounds`` and ``data_range`` are given."""
        if self.bounds is not None and self.data_range is not None:
            raise ValueError("Give public bounds or a data_range to estimate them in, not both.")

    def _validate_fit_data(self, X):
        """Validate ``X`` for ``fit`` (float, finite; sets ``n_features_in_``).

        Returns ``(X, n_features, feature_names)``, the names None when
        ``X`` has no string column names.
        """
        X = validate_data(self, X, dtype=FLOAT_DTYPES, reset=True)
        return X, X.shape[1], getattr(self, "feature_names_in_", None)

    def _noisy_range(self, counts, wide_lower, wide_upper, report, generator):
        """Per-feature ``(lower, upper)`` read from a noisy range histogram.

        ``counts`` is the exact histogram of the records over
        ``[wide_lower, wide_upper]`` (see :func:`~._ranges.range_histogram`);
        it gets the noise of the report's ``"histogram"`` release, and the
        bounds are its noisy ``quantile`` points, rounded outwards to bin
        edges.
        """
        noisy = add_noise({"histogram": counts}, report, generator)["histogram"]
        return range_from_histogram(noisy, wide_lower, wide_upper, self.quantile)

    def _validate_transform_data(self, X):
        """Check that the scaler is fitted and ``X`` matches; return float64 ``X``."""
        check_is_fitted(self)
        return np.asarray(validate_data(self, X, dtype=FLOAT_DTYPES, reset=False), dtype=np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def feature_pairs(pairs, n_features, feature_names, name):
    """Per-feature ``(lower, upper)`` arrays from a public range parameter.

    ``pairs`` is ``(lower, upper)`` with scalars (the same range for every
    feature) or array-likes of shape (n_features,), or a dict mapping every
    feature name to a ``(lower, upper)`` pair (needs named features).
    """
    if isinstance(pairs, dict):
        if feature_names is None:
            raise ValueError(
                f"{name} is a dict of feature names, but X has no column names; fit on a "
                f"DataFrame or give {name} as (lower, upper) arrays."
            )
        names = [str(f) for f in feature_names]
        missing = [f for f in names if f not in pairs]
        unknown = sorted(set(map(str, pairs)) - set(names))
        if missing or unknown:
            raise ValueError(
                f"{name} must give a (lower, upper) pair for every feature of X and no other; "
                f"missing {missing}, unknown {unknown}."
            )
        try:
            lower, upper = zip(*(tuple(pairs[f]) for f in names))
        except (TypeError, ValueError):
            raise ValueError(f"every value of {name} must be a (lower, upper) pair.") from None
    else:
        try:
            lower, upper = pairs
        except (TypeError, ValueError):
            raise ValueError(
                f"{name} must be a (lower, upper) pair of scalars or of arrays of shape "
                f"(n_features,), or a dict of such pairs by feature name; got {pairs!r}."
            ) from None
    try:
        lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n_features,)).copy()
        upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (n_features,)).copy()
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must hold numbers, one (lower, upper) pair for each of the {n_features} "
            "features."
        ) from None
    if not (np.isfinite(lower).all() and np.isfinite(upper).all() and (lower < upper).all()):
        raise ValueError(f"{name} must be finite with lower < upper for every feature.")
    return lower, upper
