"""Group metrics of a classifier's or a regressor's predictions under
differential privacy, with intervals: :class:`DPMetricFrame`."""

import math
import warnings
from statistics import NormalDist

import numpy as np
import pandas as pd
import torch

from .._fit.private_fit import PrivateFitMixin
from .._fit.units import MAX_RECORDS_PER_UNIT
from .._fit.units import unit_codes as validated_unit_codes
from .._groups import encode_groups
from ..exceptions import PrivacyLeakWarning
from ..privacy import (
    BatchReleases,
    ReleasePlan,
    Release,
    bound_units,
    check_budget,
    gaussian_noise,
    interval_verdicts,
)

__all__ = ["DPMetricFrame", "FRAME_METRICS", "REGRESSION_METRICS", "SCORE_METRICS"]

# cells of a binary confusion matrix, (true, predicted): their index in a
# group's row of four counts
_TN, _FP, _FN, _TP = 0, 1, 2, 3
_ALL = (_TN, _FP, _FN, _TP)

#: The metrics a :class:`DPMetricFrame` derives from the noisy confusion
#: counts: name -> (numerator cells, denominator cells). ``count`` is the
#: denominator alone.
FRAME_METRICS = {
    "selection_rate": ((_FP, _TP), _ALL),
    "accuracy_score": ((_TN, _TP), _ALL),
    "true_positive_rate": ((_TP,), (_FN, _TP)),
    "recall_score": ((_TP,), (_FN, _TP)),
    "false_negative_rate": ((_FN,), (_FN, _TP)),
    "false_positive_rate": ((_FP,), (_TN, _FP)),
    "true_negative_rate": ((_TN,), (_TN, _FP)),
    "precision_score": ((_TP,), (_FP, _TP)),
    "count": (None, _ALL),
}

#: Regression metrics, means of a bounded per-record error: name -> (column
#: of the released sums, power of ``error_bound`` that scales it back). The
#: release holds, per group, the count and the sums of ``min(|e|, B) / B``
#: and ``min(e^2, B^2) / B^2``.
REGRESSION_METRICS = {
    "mean_absolute_error": (1, 1),
    "mean_squared_error": (2, 2),
}

#: Calibration-type metrics of scores in [0, 1] (``y_pred`` holds the
#: predicted probability of the positive class): name -> (column of the
#: released sums, multiplier, offset). The release holds, per group, the
#: count and the sums of ``s`` and of ``(s - y + 1) / 2`` (``y`` 1 for the
#: positive label); ``"calibration_gap"`` is the mean of ``s - y``, the
#: group's mean predicted probability minus its share of positives.
SCORE_METRICS = {
    "mean_score": (1, 1.0, 0.0),
    "calibration_gap": (2, 2.0, -1.0),
}

_MEAN_METRICS = set(REGRESSION_METRICS) | set(SCORE_METRICS)


def _metric_name(metric):
    name = metric if isinstance(metric, str) else getattr(metric, "__name__", None)
    if name not in FRAME_METRICS and name not in _MEAN_METRICS:
        raise ValueError(
            f"DPMetricFrame cannot derive {metric!r} from its release; use one of "
            f"{sorted(FRAME_METRICS)} for binary predictions, {sorted(SCORE_METRICS)} for "
            f"scores or {sorted(REGRESSION_METRICS)} for regression (by name, or the "
            "scikit-learn / fairlearn function of that name)."
        )
    return name


def _z(confidence):
    """Two-sided normal quantile of ``confidence``."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def rate_interval(numerator, denominator, numerator_std, rest_std, z):
    """Interval for a rate ``a / n`` from noisy counts (arrays broadcast).

    ``numerator`` is the noisy count ``a`` (noise std ``numerator_std``) and
    ``denominator`` the noisy ``n = a + c`` (``c``'s noise std
    ``rest_std``). The interval holds the rates ``r`` with ``(a - r n)^2 <=
    z^2 (n r (1 - r) + numerator_std^2 (1 - r)^2 + rest_std^2 r^2)``: a
    Wilson score interval whose variance adds the privacy noise of both
    counts to the binomial sampling variance of the evaluation set. Where
    the noise leaves the rate free (a small noisy ``n``), ``[0, 1]``.

    Returns ``(low, high)`` arrays.
    """
    sa2, sc2 = np.square(numerator_std), np.square(rest_std)
    # the privacy variance sa2 (1 - r)^2 + sc2 r^2 as v0 + v1 r + v2 r^2
    return _score_interval(numerator, denominator, sa2, -2.0 * sa2, sa2 + sc2, z)


def mean_interval(total, count, total_std, count_std, z):
    """Interval for the mean ``s / n`` of values in [0, 1] from a noisy sum
    ``s`` and a noisy count ``n`` with independent noise: as
    :func:`rate_interval`, with the binomial variance bounding the sampling
    variance (a value in [0, 1] of mean ``m`` has variance at most ``m (1 -
    m)``) and the privacy variance ``total_std^2 + count_std^2 r^2``."""
    return _score_interval(total, count, np.square(total_std), 0.0, np.square(count_std), z)


def _score_interval(a, n, v0, v1, v2, z):
    """The ``r`` in [0, 1] with ``(a - r n)^2 <= z^2 (n r (1 - r) + v0 + v1 r
    + v2 r^2)``, or ``[0, 1]`` where that set is not an interval inside it."""
    a, n = np.broadcast_arrays(np.asarray(a, float), np.asarray(n, float))
    z2 = z * z
    quad = n * n + z2 * n - z2 * v2
    lin = -2.0 * a * n - z2 * n - z2 * v1
    const = a * a - z2 * v0
    disc = lin * lin - 4.0 * quad * const
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(np.maximum(disc, 0.0))
        low = (-lin - root) / (2.0 * quad)
        high = (-lin + root) / (2.0 * quad)
    free = ~(quad > 0) | ~(n > 0) | ~(disc >= 0)
    low = np.where(free, 0.0, np.clip(low, 0.0, 1.0))
    high = np.where(free, 1.0, np.clip(high, 0.0, 1.0))
    return low, high


class DPMetricFrame(PrivateFitMixin):
    """Group metrics of binary predictions on sensitive evaluation data,
    released under differential privacy, with confidence intervals.

    Mirrors fairlearn's ``MetricFrame``: ``overall``, ``by_group``,
    ``difference()``, ``ratio()``, ``group_min()`` and ``group_max()``.
    Instead of exact group rates -- which, for a small group, reveal
    individual records -- it releases once the per-group confusion counts
    (true class x predicted class) with Gaussian noise calibrated by the
    accountant to ``(epsilon, delta)``, and derives every metric from that
    one release: asking for more metrics costs nothing more. Each record
    adds 1 to one count (l2 sensitivity 1; with ``unit_ids``, a unit's
    records together add at most 1).

    Every group value, difference, ratio, minimum and maximum comes with an
    interval (``..._interval`` methods and ``by_group_interval``) that
    covers both the sampling error of the evaluation set and the privacy
    noise, and :meth:`within` gives three-way verdicts against a bound
    (the same rule as the estimators' constraint verdicts). A group whose
    noisy size leaves a rate free has the value NaN and the interval
    ``[0, 1]``: never a point estimate presented as exact.

    Parameters
    ----------
    metrics : str, callable or dict of str to (str or callable)
        Names among :data:`FRAME_METRICS` (``"selection_rate"``,
        ``"accuracy_score"``, ``"true_positive_rate"``/``"recall_score"``,
        ``"false_positive_rate"``, ``"false_negative_rate"``,
        ``"true_negative_rate"``, ``"precision_score"``, ``"count"``), or
        regression metrics (:data:`REGRESSION_METRICS`:
        ``"mean_absolute_error"``, ``"mean_squared_error"``, which need
        ``error_bound``), or calibration-type metrics of scores in [0, 1]
        passed as ``y_pred`` (:data:`SCORE_METRICS`: ``"mean_score"``,
        ``"calibration_gap"``), or the scikit-learn / fairlearn functions of
        those names. One frame holds one kind.
    y_true, y_pred : array-like of shape (n_samples,)
        Binary labels and predictions; numbers for the regression metrics.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each record (several columns: intersectional groups).
    sensitive_groups : array-like or None, default=None
        The public list of groups (tuples for several columns). Without it
        the groups present in the data are used, and with privacy a
        :class:`~skdp.exceptions.PrivacyLeakWarning` says so (which groups
        occur is then revealed).
    control_features : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        As in fairlearn: the groups are compared within each level of the
        control features (e.g. an age band), and ``by_group`` is indexed by
        (control level, group); ``overall``, ``difference()``... by control
        level, and the interval methods return ``{level: {metric: (low,
        high)}}``. The same one release covers every level.
    control_groups : array-like or None, default=None
        The public list of control levels (as ``sensitive_groups``).
    pos_label : scalar, default=1
        The positive label of ``y_true`` and ``y_pred``.
    error_bound : float or None, default=None
        For regression metrics: a public bound ``B`` on ``|y_true - y_pred|``.
        The release holds each group's count and its sums of ``min(|e|, B) /
        B`` and ``min(e^2, B^2) / B^2`` (l2 sensitivity ``sqrt(3)``); larger
        errors count as ``B`` (the exact values of ``epsilon=None`` are not
        clipped).
    epsilon : float or None, default=1.0
        None computes exact values (equal to fairlearn's ``MetricFrame``);
        the intervals then cover the sampling error alone.
    delta : float, default=1e-5
    confidence : float, default=0.95
        Two-sided level of every interval.
    unit_ids : array-like of shape (n_samples,) or None, default=None
        Privacy units (e.g. a person per record): epsilon is then about a
        whole unit, each keeping at most ``max_records_per_unit`` records.
    max_records_per_unit : int, default=1
    random_state : int, RandomState or None, default=None
        None draws the noise from the operating system's CSPRNG; a seed
        makes it reproducible (experiments only).

    Attributes
    ----------
    counts_ : ndarray of shape (n_groups, 4) or (n_controls, n_groups, 4)
        The released (noisy) counts of each group (in each control level):
        TN, FP, FN, TP; for regression metrics (last axis 3) the count and
        the two sums of bounded errors.
    noise_std_ : float
        Standard deviation of the noise of each count (0 without privacy).
    groups_ : ndarray
    controls_ : ndarray or None
    epsilon_, delta_, dp_event_, privacy_report_, privacy_unit_
        As on the estimators.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.metrics import DPMetricFrame
    >>> rng = np.random.default_rng(0)
    >>> g = rng.choice(["a", "b"], size=4000)
    >>> y = rng.integers(0, 2, size=4000); p = (rng.random(4000) < 0.4 + 0.1 * (g == "b"))
    >>> frame = DPMetricFrame(metrics={"sel": "selection_rate"}, y_true=y, y_pred=p,
    ...                       sensitive_features=g, sensitive_groups=["a", "b"],
    ...                       epsilon=1.0, random_state=0)
    >>> frame.by_group["sel"].round(2).to_dict()
    {'a': 0.41, 'b': 0.48}
    >>> low, high = frame.difference_interval()["sel"]
    >>> bool(0.0 < low < 0.1 < high < 0.2)
    True
    >>> frame.within(0.2)["sel"], frame.within(0.02)["sel"]
    ('met', 'undetermined')
    """

    def __init__(self, *, metrics, y_true, y_pred, sensitive_features, sensitive_groups=None,
                 control_features=None, control_groups=None, pos_label=1, error_bound=None,
                 epsilon=1.0, delta=1e-5, confidence=0.95, unit_ids=None,
                 max_records_per_unit=MAX_RECORDS_PER_UNIT, random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.random_state = random_state
        self.confidence = confidence
        self.max_records_per_unit = max_records_per_unit
        if epsilon is not None:
            check_budget(epsilon, delta)
        if not 0.5 <= confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1); got {confidence!r}.")
        self._single = not isinstance(metrics, dict)
        named = {_metric_name(metrics): metrics} if self._single else dict(metrics)
        self._metrics = {str(key): _metric_name(m) for key, m in named.items()}
        y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
        if y_true.ndim != 1 or y_pred.shape != y_true.shape:
            raise ValueError(
                f"y_true and y_pred must be 1-d and of the same length; got {y_true.shape} "
                f"and {y_pred.shape}."
            )
        for name, values in (("y_true", y_true), ("y_pred", y_pred)):
            if pd.isna(values).any():
                raise ValueError(
                    f"{name} has missing values (NaN/None); every record needs a label or a "
                    "prediction (drop those records, or give them a value).")
        n = y_true.shape[0]
        codes, self.groups_ = _public_codes(sensitive_features, n, sensitive_groups,
                                            "sensitive", epsilon)
        self.controls_ = None
        control_codes = np.zeros(n, dtype=np.int64)
        if control_features is not None:
            control_codes, self.controls_ = _public_codes(control_features, n, control_groups,
                                                          "control", epsilon)
        n_controls = 1 if self.controls_ is None else len(self.controls_)
        kind = self._kind(error_bound)
        generator, _, _ = self._make_generator()
        weights, units = np.ones(n), None
        if unit_ids is not None:
            codes_u, n_units = validated_unit_codes(unit_ids, n)
            units = bound_units(codes_u, n_units, int(max_records_per_unit), generator)
            weights = np.where(units.kept, units.factors, 0.0)
        exact = None
        if kind == "scores":
            scores = y_pred.astype(np.float64)
            if not np.isfinite(scores).all():
                raise ValueError("y_pred must hold finite scores for score metrics.")
            scores = np.clip(scores, 0.0, 1.0)
            positive = (y_true == pos_label).astype(np.float64)
            # per record: 1, its score, and (score - label + 1) / 2, each in [0, 1]
            terms = np.stack([np.ones(n), scores, (scores - positive + 1.0) / 2.0], axis=1)
            counts = np.zeros((n_controls, len(self.groups_), 3))
            np.add.at(counts, (control_codes, codes), terms * weights[:, None])
            if epsilon is None:
                exact = np.zeros_like(counts)
                raw = np.stack([np.ones(n), y_pred.astype(np.float64),
                                y_pred.astype(np.float64) - positive], axis=1)
                np.add.at(exact, (control_codes, codes), raw * weights[:, None])
            sensitivity = math.sqrt(3.0)
        elif kind == "regression":
            # per record: 1, and its error's two bounded terms, each in [0, 1]
            y_true, y_pred = y_true.astype(np.float64), y_pred.astype(np.float64)
            if not (np.isfinite(y_true).all() and np.isfinite(y_pred).all()):
                raise ValueError("y_true and y_pred must be finite for regression metrics.")
            bound = float(error_bound)
            with np.errstate(over="ignore"):  # an error past the float range counts as B
                error = np.abs(y_true - y_pred)
                terms = np.stack([np.ones(n), np.minimum(error, bound) / bound,
                                  np.minimum(error * error, bound * bound) / bound**2], axis=1)
            counts = np.zeros((n_controls, len(self.groups_), 3))
            np.add.at(counts, (control_codes, codes), terms * weights[:, None])
            if epsilon is None:  # exact values from the unclipped errors, as fairlearn's
                exact = np.zeros_like(counts)
                with np.errstate(over="ignore"):
                    raw = np.stack([np.ones(n), error, error * error], axis=1)
                np.add.at(exact, (control_codes, codes), raw * weights[:, None])
            sensitivity = math.sqrt(3.0)
        else:
            cell = 2 * (y_true == pos_label).astype(np.int64) + (y_pred == pos_label)
            counts = np.zeros((n_controls, len(self.groups_), 4))
            np.add.at(counts, (control_codes, codes, cell), weights)
            sensitivity = 1.0
        extra = ({} if units is None else
                 {"n_records": units.n_units, "privacy_unit": units.description})
        plan = ReleasePlan(BatchReleases([Release("counts", sensitivity=sensitivity)], steps=1,
                                         sampling_rate=1.0, name="counts"), **extra)
        report = self._spend(plan)
        self._charge_ledger(report)
        std = report.scale("counts")
        if std is not None:
            noise = gaussian_noise(torch.zeros(counts.size, dtype=torch.float64), std, generator)
            counts = counts + noise.numpy().reshape(counts.shape)
        self.noise_std_ = 0.0 if std is None else float(std)
        self.counts_ = counts[0] if self.controls_ is None else counts
        self.error_bound = error_bound
        self._levels = [
            _GroupCounts(c, self.noise_std_, self._metrics, confidence, error_bound,
                         None if exact is None else exact[i])
            for i, c in enumerate(counts)]
        self._store_privacy_report(report)

    def _kind(self, error_bound):
        """``"counts"``, ``"scores"`` or ``"regression"``: the one kind of
        release the metrics need (with the regression's public
        ``error_bound`` checked)."""
        names = set(self._metrics.values())
        kinds = {"regression" if m in REGRESSION_METRICS else "scores" if m in SCORE_METRICS
                 else "counts" for m in names}
        if len(kinds) > 1:
            raise ValueError(
                f"metrics mixes {sorted(kinds)} metrics (binary predictions, scores, "
                "regression), which need different releases; make one DPMetricFrame for each.")
        [kind] = kinds
        if kind == "regression" and not (error_bound is not None and np.isfinite(error_bound)
                                         and error_bound > 0):
            raise ValueError(
                "regression metrics need error_bound, a public positive bound on |y_true - "
                f"y_pred| (larger errors count as the bound); got {error_bound!r}.")
        return kind

    # ---------------------------------------------------------- the outputs
    def _index(self):
        return pd.Index(list(self.groups_), name="sensitive_feature_0")

    def _control_index(self):
        return pd.Index(list(self.controls_), name="control_feature_0")

    def _per_level(self, function):
        """``function(level)`` -> {metric: value}, shaped as fairlearn shapes
        its aggregates: a scalar or a Series by metric; with control
        features a Series or DataFrame by control level."""
        results = [function(level) for level in self._levels]
        if self.controls_ is None:
            values = results[0]
            return next(iter(values.values())) if self._single else pd.Series(values)
        frame = pd.DataFrame(results, index=self._control_index())
        return frame[next(iter(self._metrics))] if self._single else frame

    def _per_level_intervals(self, function):
        """``function(level)`` for each level: the level's value without
        control features, else ``{level: value}``."""
        if self.controls_ is None:
            return function(self._levels[0])
        return {c: function(level) for c, level in zip(self.controls_.tolist(), self._levels)}

    @property
    def by_group(self):
        """Each group's value of each metric (NaN where the noise leaves it free)."""
        frames = [pd.DataFrame({k: level.values(m)[0] for k, m in self._metrics.items()},
                               index=self._index()) for level in self._levels]
        if self.controls_ is None:
            frame = frames[0]
        else:
            frame = pd.concat(frames, keys=list(self.controls_), names=["control_feature_0"])
        return frame[next(iter(self._metrics))] if self._single else frame

    @property
    def overall(self):
        """Each metric on all records (of each control level), from the
        summed noisy counts."""
        return self._per_level(lambda level: {k: float(level.overall(m)[0])
                                              for k, m in self._metrics.items()})

    @property
    def by_group_interval(self):
        """``(low, high)`` of each group's value of each metric at ``confidence``:
        a DataFrame with columns ``(metric, "low")`` and ``(metric, "high")``."""
        z = _z(self.confidence)
        frames = []
        for level in self._levels:
            columns = {}
            for key, name in self._metrics.items():
                _, low, high = level.values(name, z)
                columns[(key, "low")], columns[(key, "high")] = low, high
            frames.append(pd.DataFrame(columns, index=self._index()))
        if self.controls_ is None:
            return frames[0]
        return pd.concat(frames, keys=list(self.controls_), names=["control_feature_0"])

    def overall_interval(self):
        """``{metric: (low, high)}`` of the overall values."""
        z = _z(self.confidence)
        return self._per_level_intervals(
            lambda level: {k: tuple(float(v) for v in level.overall(m, z)[1:])
                           for k, m in self._metrics.items()})

    def group_min(self):
        """The smallest group value of each metric (NaN groups left out)."""
        return self._per_level(lambda level: level.reduce(lambda g, o: g.min()))

    def group_max(self):
        """The largest group value of each metric (NaN groups left out)."""
        return self._per_level(lambda level: level.reduce(lambda g, o: g.max()))

    def difference(self, method="between_groups"):
        """Largest difference between groups (``"between_groups"``) or from
        the overall value (``"to_overall"``), as fairlearn computes it."""
        _check_method(method)
        if method == "between_groups":
            return self._per_level(lambda level: level.reduce(
                lambda g, o: (g - g.min()).abs().max()))
        return self._per_level(lambda level: level.reduce(lambda g, o: (g - o).abs().max()))

    def ratio(self, method="between_groups"):
        """Smallest ratio between groups (``group_min() / group_max()``), or
        of each group to the overall value (turned below 1), as fairlearn
        computes it."""
        _check_method(method)
        if method == "between_groups":
            return self._per_level(lambda level: level.reduce(
                lambda g, o: np.float64(g.min()) / np.float64(g.max())))
        return self._per_level(lambda level: level.reduce(
            lambda g, o: (g / o).transform(lambda x: 1 / x if x > 1 else x).min()))

    # ------------------------------------------------------------- intervals
    def difference_interval(self, method="between_groups"):
        """``{metric: (low, high)}``: an interval for :meth:`difference` at
        ``confidence`` (from group intervals that hold together)."""
        _check_method(method)
        return self._per_level_intervals(
            lambda level: {k: level.difference_bounds([m], method)
                           for k, m in self._metrics.items()})

    def largest_difference_interval(self, metrics, method="between_groups"):
        """``(value, low, high)`` of the largest :meth:`difference` among
        ``metrics`` -- e.g. the equalized-odds difference of
        ``["true_positive_rate", "false_positive_rate"]`` -- with one
        interval at ``confidence`` for all of them."""
        _check_method(method)
        names = [_metric_name(m) for m in metrics]
        return self._per_level_intervals(lambda level: level.largest_difference(names, method))

    def ratio_interval(self, method="between_groups"):
        """``{metric: (low, high)}``: an interval for :meth:`ratio`."""
        _check_method(method)
        return self._per_level_intervals(
            lambda level: {k: level.ratio_bounds(m, method) for k, m in self._metrics.items()})

    def group_min_interval(self):
        """``{metric: (low, high)}`` for :meth:`group_min`."""
        return self._per_level_intervals(
            lambda level: {k: level.extreme_bounds(m, np.min) for k, m in self._metrics.items()})

    def group_max_interval(self):
        """``{metric: (low, high)}`` for :meth:`group_max`."""
        return self._per_level_intervals(
            lambda level: {k: level.extreme_bounds(m, np.max) for k, m in self._metrics.items()})

    def within(self, bound, method="between_groups"):
        """Verdicts on ``difference(method) <= bound`` for each metric:
        ``"met"`` when the whole interval is at most ``bound``,
        ``"violated"`` when it is all above, else ``"undetermined"`` (see
        :func:`skdp.privacy.interval_verdicts`)."""
        _check_method(method)

        def verdicts(level):
            bounds = [level.difference_bounds([m], method) for m in self._metrics.values()]
            found = interval_verdicts([b[0] for b in bounds], [b[1] for b in bounds], bound)
            return dict(zip(self._metrics, found.tolist()))

        return self._per_level(verdicts)

    def plot(self, metric=None, *, bound=None, control=None, ax=None):
        """Each group's value of ``metric`` with its interval, the overall
        value and, with ``bound``, the band ``overall +- bound``.

        Needs matplotlib (``pip install 'skdp[plot]'``). Groups whose value
        the noise leaves free show their interval alone.

        Parameters
        ----------
        metric : str, default=None
            A key of ``metrics`` (the only one when None).
        bound : float, default=None
        control : object, default=None
            The control level to draw (required with control features).
        ax : matplotlib Axes, default=None
            Where to draw (a new figure's when None).

        Returns
        -------
        matplotlib.axes.Axes
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - matplotlib is a test dependency
            raise ImportError(
                "DPMetricFrame.plot needs matplotlib: pip install 'skdp[plot]'.") from exc
        if metric is None:
            if len(self._metrics) != 1:
                raise ValueError(
                    f"metric= must name one of {list(self._metrics)} to plot.")
            metric = next(iter(self._metrics))
        if metric not in self._metrics:
            raise ValueError(f"metric={metric!r} is not among {list(self._metrics)}.")
        level = self._levels[0]
        if self.controls_ is not None:
            levels = self.controls_.tolist()
            if control not in levels:
                raise ValueError(f"control= must name one of the control levels {levels}.")
            level = self._levels[levels.index(control)]
        name = self._metrics[metric]
        value, low, high = level.values(name, _z(self.confidence))
        overall = float(level.overall(name)[0])
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 0.5 + 0.45 * len(self.groups_)))
        positions = np.arange(len(self.groups_))
        ax.hlines(positions, low, high, color="C0", lw=3, alpha=0.6,
                  label=f"{self.confidence:.0%} interval")
        ax.plot(value, positions, "o", color="C0", label="private value")
        ax.axvline(overall, color="0.3", ls="-", lw=1, label="overall")
        if bound is not None:
            ax.axvspan(overall - bound, overall + bound, color="C2", alpha=0.12,
                       label=f"overall +- {bound:g}")
        ax.set_yticks(positions, [str(g) for g in self.groups_])
        ax.invert_yaxis()
        title = "exact" if self.noise_std_ == 0 else f"epsilon={self.epsilon_:.2g}"
        ax.set_xlabel(f"{metric} ({title})")
        ax.legend(loc="best", fontsize="small")
        return ax


def _public_codes(features, n, public, what, epsilon):
    """Codes and labels of ``features`` against the public list ``public``
    (or the labels found, with a warning when private)."""
    name = f"{what}_features"
    codes, labels = encode_groups(features, n, groups=public, name=name)
    if public is not None and (codes < 0).any():
        raise ValueError(
            f"{name} holds groups outside {what}_groups; list every group there.")
    if public is None and epsilon is not None:
        warnings.warn(
            f"DPMetricFrame: the {what} group names were read from the data ({what}_groups="
            f"None), which reveals which groups occur; pass the public list as "
            f"{what}_groups.", PrivacyLeakWarning, stacklevel=3)
    return codes, labels


class _GroupCounts:
    """The metrics, intervals and bounds of one control level's noisy
    group counts (each count with noise std ``std``)."""

    def __init__(self, counts, std, metrics, confidence, bound=None, exact=None):
        self.counts, self.std, self.metrics, self.confidence = counts, std, metrics, confidence
        self.bound, self.exact = bound, exact

    def _means(self, counts, exact, name, cell_std, z=None):
        """``(value, low, high)`` of a mean metric ``name``: a mean of values
        in [0, 1] (bounded errors, scores), mapped back to the metric's
        scale (``bound ** power`` for errors)."""
        if name in REGRESSION_METRICS:
            column, power = REGRESSION_METRICS[name]
            scale, offset = float(self.bound) ** power, 0.0
        else:
            column, scale, offset = SCORE_METRICS[name]
        total, n = counts[:, column], counts[:, 0]
        if exact is not None:  # unclipped, without noise
            value = np.where(exact[:, 0] > 0, exact[:, column] / np.where(
                exact[:, 0] > 0, exact[:, 0], 1.0), 0.0)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                value = np.clip(total / np.where(n > 0, n, np.nan), 0.0, 1.0) * scale + offset
        if z is None and cell_std == 0.0:
            return value, value, value
        low, high = mean_interval(total, n, cell_std, cell_std,
                                  _z(self.confidence) if z is None else z)
        if cell_std > 0:
            value = np.where((low <= 0.0) & (high >= 1.0), np.nan, value)
        return value, low * scale + offset, high * scale + offset

    def _rates(self, counts, name, cell_std, z=None, exact=None):
        """``(value, low, high)`` arrays of metric ``name`` for the rows of
        ``counts`` (each count with noise std ``cell_std``)."""
        if name in _MEAN_METRICS:
            return self._means(counts, exact, name, cell_std, z)
        numerator, denominator = FRAME_METRICS[name]
        den = counts[:, list(denominator)].sum(1)
        if numerator is None:  # a count
            half = 0.0 if z is None else z * cell_std * math.sqrt(len(denominator))
            return den, den - half, den + half
        num = counts[:, list(numerator)].sum(1)
        if cell_std == 0.0:  # exact: 0 / 0 is 0, as in scikit-learn and fairlearn
            value = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                value = np.clip(num / np.where(den > 0, den, np.nan), 0.0, 1.0)
        if z is None and cell_std == 0.0:
            return value, value, value
        sa = cell_std * math.sqrt(len(numerator))
        sc = cell_std * math.sqrt(len(denominator) - len(numerator))
        low, high = rate_interval(num, den, sa, sc, _z(self.confidence) if z is None else z)
        if cell_std > 0:  # the noise leaves the rate free: no point estimate
            value = np.where((low <= 0.0) & (high >= 1.0), np.nan, value)
        return value, low, high

    def values(self, name, z=None):
        """``(value, low, high)`` of each group."""
        return self._rates(self.counts, name, self.std, z, self.exact)

    def overall(self, name, z=None):
        """``(value, low, high)`` of the level's total (the groups' noise summed)."""
        total = self.counts.sum(0, keepdims=True)
        exact = None if self.exact is None else self.exact.sum(0, keepdims=True)
        value, low, high = self._rates(total, name, self.std * math.sqrt(len(self.counts)), z,
                                       exact)
        return value[0], low[0], high[0]

    def reduce(self, function):
        """``{metric: function(group values as a Series, overall value)}``
        (pandas semantics, as fairlearn: NaN groups are skipped)."""
        out = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for key, name in self.metrics.items():
                groups = pd.Series(self.values(name)[0], dtype=np.float64)
                out[key] = function(groups, np.float64(self.overall(name)[0]))
        return out

    def simultaneous(self, names, with_overall=False):
        """Per-group (and overall) intervals of ``names`` that hold together
        at ``confidence`` (Bonferroni over every interval)."""
        n_intervals = len(names) * (len(self.counts) + int(with_overall))
        z = _z(1.0 - (1.0 - self.confidence) / n_intervals)
        groups = [self.values(name, z)[1:] for name in names]
        overall = [self.overall(name, z)[1:] for name in names] if with_overall else None
        return groups, overall

    def difference_bounds(self, names, method):
        """Bounds of the largest difference among ``names``."""
        groups, overall = self.simultaneous(names, method == "to_overall")
        lows, highs = [], []
        for i, (lo, hi) in enumerate(groups):
            if method == "between_groups":
                lows.append(max(lo.max() - hi.min(), 0.0))
                highs.append(hi.max() - lo.min())
            else:
                olo, ohi = overall[i]
                lows.append(np.maximum(np.maximum(lo - ohi, olo - hi), 0.0).max())
                highs.append(np.maximum(hi - olo, ohi - lo).max())
        return float(max(lows)), float(max(highs))

    def largest_difference(self, names, method):
        """``(value, low, high)`` of the largest difference among ``names``."""
        values = []
        for name in names:
            g, o = self.values(name)[0], self.overall(name)[0]
            with np.errstate(invalid="ignore"):
                values.append(np.nanmax(g) - np.nanmin(g) if method == "between_groups"
                              else np.nanmax(np.abs(g - o)))
        low, high = self.difference_bounds(names, method)
        return float(np.max(values)), low, high

    def ratio_bounds(self, name, method):
        """Bounds of the smallest ratio of ``name``."""
        [(lo, hi)], overall = self.simultaneous([name], method == "to_overall")
        if method == "between_groups":
            top_low, top_high = lo.max(), hi.max()
            low = lo.min() / top_high if top_high > 0 else 0.0
            high = hi.min() / top_low if top_low > 0 else 1.0
        else:
            (olo, ohi), = overall
            lows, highs = [], []
            for a, b in zip(lo, hi):
                lows.append(min(a / ohi if ohi > 0 else 0.0, olo / b if b > 0 else 0.0))
                if b < olo:
                    highs.append(b / olo)
                elif ohi < a:
                    highs.append(ohi / a)
                else:
                    highs.append(1.0)
            low, high = min(lows), min(highs)
        return float(min(max(low, 0.0), 1.0)), float(min(max(high, 0.0), 1.0))

    def extreme_bounds(self, name, extreme):
        """Bounds of the smallest (``np.min``) or largest (``np.max``) group value."""
        [(lo, hi)], _ = self.simultaneous([name])
        return float(extreme(lo)), float(extreme(hi))


def _check_method(method):
    if method not in ("between_groups", "to_overall"):
        raise ValueError(
            f"method must be 'between_groups' or 'to_overall'; got {method!r}.")
