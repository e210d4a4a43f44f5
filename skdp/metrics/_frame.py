"""Group metrics of a binary classifier's predictions under differential
privacy, with intervals: :class:`DPMetricFrame`."""

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

__all__ = ["DPMetricFrame", "FRAME_METRICS"]

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


def _metric_name(metric):
    name = metric if isinstance(metric, str) else getattr(metric, "__name__", None)
    if name not in FRAME_METRICS:
        raise ValueError(
            f"DPMetricFrame cannot derive {metric!r} from confusion counts; use one of "
            f"{sorted(FRAME_METRICS)} (by name, or the scikit-learn / fairlearn function of "
            "that name)."
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
    a, n = np.broadcast_arrays(np.asarray(numerator, float), np.asarray(denominator, float))
    z2 = z * z
    sa2, sc2 = np.square(numerator_std), np.square(rest_std)
    quad = n * n + z2 * n - z2 * sa2 - z2 * sc2
    lin = -2.0 * a * n - z2 * n + 2.0 * z2 * sa2
    const = a * a - z2 * sa2
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
        the scikit-learn / fairlearn functions of those names.
    y_true, y_pred : array-like of shape (n_samples,)
        Binary labels and predictions.
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group of each record (several columns: intersectional groups).
    sensitive_groups : array-like or None, default=None
        The public list of groups (tuples for several columns). Without it
        the groups present in the data are used, and with privacy a
        :class:`~skdp.exceptions.PrivacyLeakWarning` says so (which groups
        occur is then revealed).
    pos_label : scalar, default=1
        The positive label of ``y_true`` and ``y_pred``.
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
    counts_ : ndarray of shape (n_groups, 4)
        The released (noisy) counts of each group: TN, FP, FN, TP.
    noise_std_ : float
        Standard deviation of the noise of each count (0 without privacy).
    groups_ : ndarray
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
                 pos_label=1, epsilon=1.0, delta=1e-5, confidence=0.95, unit_ids=None,
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
        n = y_true.shape[0]
        codes, groups = encode_groups(sensitive_features, n, groups=sensitive_groups)
        if sensitive_groups is not None and (codes < 0).any():
            raise ValueError(
                "sensitive_features holds groups outside sensitive_groups; list every group "
                "there."
            )
        if sensitive_groups is None and epsilon is not None:
            warnings.warn(
                "DPMetricFrame: the group names were read from the data (sensitive_groups="
                "None), which reveals which groups occur; pass the public list of groups as "
                "sensitive_groups.", PrivacyLeakWarning, stacklevel=2)
        self.groups_ = groups
        cell = 2 * (y_true == pos_label).astype(np.int64) + (y_pred == pos_label)
        generator, _, _ = self._make_generator()
        weights, units = np.ones(n), None
        if unit_ids is not None:
            codes_u, n_units = validated_unit_codes(unit_ids, n)
            units = bound_units(codes_u, n_units, int(max_records_per_unit), generator)
            weights = np.where(units.kept, units.factors, 0.0)
        counts = np.zeros((len(groups), 4))
        np.add.at(counts, (codes, cell), weights)
        extra = ({} if units is None else
                 {"n_records": units.n_units, "privacy_unit": units.description})
        plan = ReleasePlan(BatchReleases([Release("counts", sensitivity=1.0)], steps=1,
                                         sampling_rate=1.0, name="counts"), **extra)
        report = self._spend(plan)
        self._charge_ledger(report)
        std = report.scale("counts")
        if std is not None:
            noise = gaussian_noise(torch.zeros(counts.size, dtype=torch.float64), std, generator)
            counts = counts + noise.numpy().reshape(counts.shape)
        self.noise_std_ = 0.0 if std is None else float(std)
        self.counts_ = counts
        self._store_privacy_report(report)

    # ---------------------------------------------------------------- values
    def _rates(self, counts, name, cell_std, z=None):
        """``(value, low, high)`` arrays of metric ``name`` for the rows of
        ``counts`` (each count with noise std ``cell_std``)."""
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

    def _group_values(self, name, z=None):
        return self._rates(self.counts_, name, self.noise_std_, z)

    def _overall_values(self, name, z=None):
        # the total's noise: the group counts' noise summed
        total = self.counts_.sum(0, keepdims=True)
        std = self.noise_std_ * math.sqrt(len(self.groups_))
        value, low, high = self._rates(total, name, std, z)
        return value[0], low[0], high[0]

    def _index(self):
        return pd.Index(list(self.groups_), name="sensitive_feature_0")

    def _frame(self, values):
        frame = pd.DataFrame(values, index=self._index())
        return frame[next(iter(values))] if self._single else frame

    @property
    def by_group(self):
        """Each group's value of each metric (NaN where the noise leaves it free)."""
        return self._frame({k: self._group_values(m)[0] for k, m in self._metrics.items()})

    @property
    def overall(self):
        """Each metric on all records (from the summed noisy counts)."""
        values = {k: float(self._overall_values(m)[0]) for k, m in self._metrics.items()}
        return next(iter(values.values())) if self._single else pd.Series(values)

    @property
    def by_group_interval(self):
        """``(low, high)`` of each group's value of each metric at ``confidence``:
        a DataFrame with columns ``(metric, "low")`` and ``(metric, "high")``."""
        z = _z(self.confidence)
        columns = {}
        for key, name in self._metrics.items():
            _, low, high = self._group_values(name, z)
            columns[(key, "low")], columns[(key, "high")] = low, high
        return pd.DataFrame(columns, index=self._index())

    def overall_interval(self):
        """``{metric: (low, high)}`` of the overall values."""
        z = _z(self.confidence)
        return {k: tuple(float(v) for v in self._overall_values(m, z)[1:])
                for k, m in self._metrics.items()}

    def _reduce(self, function):
        """``function(group values as a Series, overall value)`` per metric
        (pandas semantics, as fairlearn: NaN groups are skipped)."""
        values = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for key, name in self._metrics.items():
                groups = pd.Series(self._group_values(name)[0], dtype=np.float64)
                values[key] = function(groups, np.float64(self._overall_values(name)[0]))
        return next(iter(values.values())) if self._single else pd.Series(values)

    def group_min(self):
        """The smallest group value of each metric (NaN groups left out)."""
        return self._reduce(lambda g, o: g.min())

    def group_max(self):
        """The largest group value of each metric (NaN groups left out)."""
        return self._reduce(lambda g, o: g.max())

    def difference(self, method="between_groups"):
        """Largest difference between groups (``"between_groups"``) or from
        the overall value (``"to_overall"``), as fairlearn computes it."""
        _check_method(method)
        if method == "between_groups":
            return self._reduce(lambda g, o: (g - g.min()).abs().max())
        return self._reduce(lambda g, o: (g - o).abs().max())

    def ratio(self, method="between_groups"):
        """Smallest ratio between groups (``group_min() / group_max()``), or
        of each group to the overall value (turned below 1), as fairlearn
        computes it."""
        _check_method(method)
        if method == "between_groups":
            return self._reduce(lambda g, o: np.float64(g.min()) / np.float64(g.max()))
        return self._reduce(lambda g, o: (g / o).transform(lambda x: 1 / x if x > 1 else x).min())

    # ------------------------------------------------------------- intervals
    def _simultaneous(self, names, with_overall=False):
        """Per-group (and overall) intervals of ``names`` that hold together
        at ``confidence`` (Bonferroni over every interval)."""
        n_intervals = len(names) * (len(self.groups_) + int(with_overall))
        z = _z(1.0 - (1.0 - self.confidence) / n_intervals)
        groups = [self._group_values(name, z)[1:] for name in names]
        overall = [self._overall_values(name, z)[1:] for name in names] if with_overall else None
        return groups, overall

    def difference_interval(self, method="between_groups"):
        """``{metric: (low, high)}``: an interval for :meth:`difference` at
        ``confidence`` (from group intervals that hold together)."""
        _check_method(method)
        return {k: _difference_bounds([m], self, method) for k, m in self._metrics.items()}

    def largest_difference_interval(self, metrics, method="between_groups"):
        """``(value, low, high)`` of the largest :meth:`difference` among
        ``metrics`` -- e.g. the equalized-odds difference of
        ``["true_positive_rate", "false_positive_rate"]`` -- with one
        interval at ``confidence`` for all of them."""
        _check_method(method)
        names = [_metric_name(m) for m in metrics]
        values = []
        for name in names:
            g, o = self._group_values(name)[0], self._overall_values(name)[0]
            values.append(np.nanmax(g) - np.nanmin(g) if method == "between_groups"
                          else np.nanmax(np.abs(g - o)))
        low, high = _difference_bounds(names, self, method)
        return float(np.max(values)), low, high

    def ratio_interval(self, method="between_groups"):
        """``{metric: (low, high)}``: an interval for :meth:`ratio`."""
        _check_method(method)
        out = {}
        for key, name in self._metrics.items():
            [(lo, hi)], overall = self._simultaneous([name], method == "to_overall")
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
            out[key] = (float(min(max(low, 0.0), 1.0)), float(min(max(high, 0.0), 1.0)))
        return out

    def group_min_interval(self):
        """``{metric: (low, high)}`` for :meth:`group_min`."""
        return {k: (float(lo.min()), float(hi.min())) for k, ((lo, hi),) in
                ((k, self._simultaneous([m])[0]) for k, m in self._metrics.items())}

    def group_max_interval(self):
        """``{metric: (low, high)}`` for :meth:`group_max`."""
        return {k: (float(lo.max()), float(hi.max())) for k, ((lo, hi),) in
                ((k, self._simultaneous([m])[0]) for k, m in self._metrics.items())}

    def within(self, bound, method="between_groups"):
        """Verdicts on ``difference(method) <= bound`` for each metric:
        ``"met"`` when the whole interval is at most ``bound``,
        ``"violated"`` when it is all above, else ``"undetermined"`` (see
        :func:`skdp.privacy.interval_verdicts`)."""
        intervals = self.difference_interval(method)
        low = np.array([intervals[k][0] for k in self._metrics])
        high = np.array([intervals[k][1] for k in self._metrics])
        verdicts = interval_verdicts(low, high, bound)
        values = dict(zip(self._metrics, verdicts.tolist()))
        return next(iter(values.values())) if self._single else pd.Series(values)

    def plot(self, metric=None, *, bound=None, ax=None):
        """Each group's value of ``metric`` with its interval, the overall
        value and, with ``bound``, the band ``overall +- bound``.

        Needs matplotlib (``pip install 'skdp[plot]'``). Groups whose value
        the noise leaves free show their interval alone.

        Parameters
        ----------
        metric : str, default=None
            A key of ``metrics`` (the only one when None).
        bound : float, default=None
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
        name = self._metrics[metric]
        value, low, high = self._group_values(name, _z(self.confidence))
        overall = float(self._overall_values(name)[0])
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


def _check_method(method):
    if method not in ("between_groups", "to_overall"):
        raise ValueError(
            f"method must be 'between_groups' or 'to_overall'; got {method!r}.")


def _difference_bounds(names, frame, method):
    """Bounds of the largest difference among ``names`` from simultaneous
    group (and overall) intervals."""
    groups, overall = frame._simultaneous(names, method == "to_overall")
    lows, highs = [], []
    for i, (lo, hi) in enumerate(groups):
        if method == "between_groups":
            lows.append(max(lo.max() - hi.min(), 0.0))
            highs.append(hi.max() - lo.min())
        else:
            olo, ohi = overall[i]
            gap_low = np.maximum(np.maximum(lo - ohi, olo - hi), 0.0)
            gap_high = np.maximum(hi - olo, ohi - lo)
            lows.append(gap_low.max())
            highs.append(gap_high.max())
    return float(max(lows)), float(max(highs))

