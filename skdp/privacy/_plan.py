"""Release plans: what a training run releases, and the noise that pays for it.

A trainer releases noisy statistics from the data: at every step, one or
several statistics computed on the same Poisson batch (a clipped gradient sum,
a histogram of predictions, a count, a dual gradient), sometimes other
statistics at another rate (full-data anchors every few steps), and sometimes
a one-off statistic before training (noisy group sizes). A
:class:`ReleasePlan` describes all of them -- each release's sensitivity,
mechanism and share of the budget -- and is the one place in skdp that turns
them into noise scales and one accounted ``DpEvent``:

- :meth:`ReleasePlan.calibrate`: noise scales meeting an (epsilon, delta)
  budget for the planned step counts;
- :meth:`ReleasePlan.calibrate_steps`: the largest step count a fixed noise
  level affords;
- :meth:`ReleasePlan.account`: the privacy of given noise scales (e.g. a
  closed form from a paper), as the accountant certifies it;
- :meth:`ReleasePlan.calibrate_silos`: the same plan for each data silo's own
  record count (each silo pays for its own messages).

Each returns a :class:`PrivacyReport` (epsilon, delta, event, per-release
noise) that estimators store as their privacy attributes.

Several releases on one batch are accounted as one mechanism. A Gaussian
release of l2 sensitivity ``s`` and noise std ``sigma`` is ``s/sigma``-GDP; a
Laplace release of l1 sensitivity ``s`` and scale ``b`` is ``s/b``-DP, hence
:func:`~skdp.privacy.pure_dp_to_gdp` ``(s/b)``-GDP; releases on the same data
compose to ``mu^2 = sum mu_i^2`` (Dong, Roth & Su, 2022), and a mu-GDP
mechanism is dominated by one Gaussian of noise multiplier ``1/mu``, which
Poisson subsampling preserves (Zhu, Dong & Wang, 2022). So one step is
accounted as ``PoissonSampledDpEvent(q, GaussianDpEvent(1/mu))``, never as
separately subsampled events. Releases made on different batches or at other
rates are separate events, composed.

Shares are in units of GDP ``mu^2``: a release with share ``s`` of a batch
whose joint multiplier is ``z`` gets ``mu_i = sqrt(s) / z``, i.e. noise
multiplier ``z / sqrt(s)`` for a Gaussian release.
"""

import html
import math
from dataclasses import dataclass, replace

import dp_accounting as dpa
import numpy as np

from ._accounting import (
    ACCOUNTANTS,
    NEIGHBORING,
    PrivacyBudgetError,
    _MAX_NOISE,
    _check_budget,
    _secant_search,
    calibrate_noise_multiplier,
    calibrate_steps,
    compute_epsilon,
    gdp_mu,
    gdp_to_pure_dp,
    joint_noise_multiplier,
    poisson_gaussian_step,
    pure_dp_to_gdp,
    sensitivity_factor,
)

MECHANISMS = ("gaussian", "laplace")

#: Relative inflation of noise derived from a calibrated joint multiplier, so
#: that the released noise dominates the accounted mechanism despite rounding.
_INFLATE = 1 + 1e-9

#: Relative step by which Gaussian noise is raised when a plan that mixes
#: Laplace releases with replace-one neighbours must be checked by the
#: accountant (GDP conversion of pure DP is not linear in the sensitivity).
_RAISE = 1.02


@dataclass(frozen=True)
class Release:
    """One noisy statistic released from each sampled batch.

    Parameters
    ----------
    name : str
        Key of the release in the :class:`PrivacyReport`.
    sensitivity : float, default=1.0
        How much one record can move the statistic under add/remove-one
        neighbours: l2 norm for Gaussian noise, l1 norm for Laplace noise
        (e.g. the clipping bound of a clipped gradient sum; 1 for a
        histogram to which each record adds one row on the simplex).
        Replace-one neighbours double it (the plan does that).
    mechanism : {"gaussian", "laplace"}, default="gaussian"
    share : float, default=1.0
        Share of the batch's privacy (in GDP ``mu^2``) spent on this release,
        relative to the other shared releases of the batch (shares are
        normalized).
    noise_scale : float or None, default=None
        A fixed noise standard deviation (Gaussian) or scale (Laplace)
        instead of a share; the shared releases split what it leaves.

    Examples
    --------
    >>> from skdp.privacy import Release
    >>> Release("gradient", sensitivity=1.0, share=0.9)
    Release(name='gradient', sensitivity=1.0, mechanism='gaussian', share=0.9, noise_scale=None)
    """

    name: str
    sensitivity: float = 1.0
    mechanism: str = "gaussian"
    share: float = 1.0
    noise_scale: float = None

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ValueError(
                f"Release {self.name!r}: mechanism must be one of {MECHANISMS}, got "
                f"{self.mechanism!r}."
            )
        if not self.sensitivity > 0:  # inf only for non-private fits (no clipping)
            raise ValueError(
                f"Release {self.name!r}: sensitivity must be positive, got {self.sensitivity!r}."
            )
        if self.noise_scale is None and not (np.isfinite(self.share) and self.share > 0):
            raise ValueError(
                f"Release {self.name!r}: share must be positive, got {self.share!r}."
            )
        if self.noise_scale is not None and not self.noise_scale > 0:
            raise ValueError(
                f"Release {self.name!r}: noise_scale must be positive, got {self.noise_scale!r}."
            )

    @property
    def fixed_multiplier(self):
        """``noise_scale / sensitivity`` of a fixed-scale release, else None."""
        return None if self.noise_scale is None else float(self.noise_scale) / self.sensitivity

    def gdp_mu(self, multiplier, factor=1.0):
        """GDP mu of this release at noise ``multiplier`` (scale over
        sensitivity) when sensitivities are multiplied by ``factor``."""
        ratio = factor / multiplier
        return ratio if self.mechanism == "gaussian" else pure_dp_to_gdp(ratio)

    def multiplier_for_mu(self, mu):
        """Noise multiplier at which this release is mu-GDP under add/remove
        (raised by a relative 1e-9, see :data:`_INFLATE`)."""
        if self.mechanism == "gaussian":
            return _INFLATE / mu
        return (1.0 / gdp_to_pure_dp(mu)) * _INFLATE


@dataclass(frozen=True)
class BatchReleases:
    """The releases made from one sampled batch, repeated for some steps.

    Parameters
    ----------
    releases : sequence of Release
        Statistics computed on the same batch; accounted as one mechanism.
    steps : int
        How many times the batch is drawn and the releases made.
    sampling_rate : float or None, default=None
        Poisson sampling rate of each record; 1.0 uses the whole data set.
    batch_size : float or None, default=None
        Expected batch size instead of ``sampling_rate``; the rate is then
        ``batch_size / n_records`` of the plan (see
        :meth:`ReleasePlan.calibrate_silos`).
    noise_ratio : float, default=1.0
        With several batches, the joint noise multiplier of this batch
        relative to the others' (calibration scales them together).
    name : str, default="step"
    """

    releases: tuple
    steps: int
    sampling_rate: float = None
    batch_size: float = None
    noise_ratio: float = 1.0
    name: str = "step"

    def __post_init__(self):
        object.__setattr__(self, "releases", tuple(self.releases))
        if not self.releases:
            raise ValueError(f"BatchReleases {self.name!r} needs at least one release.")
        if (self.sampling_rate is None) == (self.batch_size is None):
            raise ValueError(
                f"BatchReleases {self.name!r}: give exactly one of sampling_rate and batch_size."
            )
        if self.sampling_rate is not None and not 0 < self.sampling_rate <= 1:
            raise ValueError(
                f"BatchReleases {self.name!r}: sampling_rate must be in (0, 1], got "
                f"{self.sampling_rate!r}."
            )
        if int(self.steps) < 0:
            raise ValueError(f"BatchReleases {self.name!r}: steps must be >= 0, got {self.steps}.")
        object.__setattr__(self, "steps", int(self.steps))

    def rate(self, n_records):
        if self.sampling_rate is not None:
            return float(self.sampling_rate)
        if n_records is None:
            raise ValueError(
                f"BatchReleases {self.name!r} is given by batch_size; the plan needs n_records."
            )
        return min(1.0, float(self.batch_size) / n_records)

    def _normalized_shares(self):
        shared = [r for r in self.releases if r.noise_scale is None]
        total = sum(r.share for r in shared)
        if abs(total - 1.0) <= 1e-12:
            return {r.name: r.share for r in shared}
        return {r.name: r.share / total for r in shared}

    def noise_at(self, joint):
        """Noise multipliers (scale over sensitivity) of the releases when
        the batch's joint multiplier under add/remove is ``joint``.

        Fixed-scale releases keep their noise; the shared ones split the
        rest of ``mu^2 = 1/joint^2`` by their shares. Multipliers derived
        from a split are raised by a relative 1e-9 so that the released noise
        dominates ``joint`` despite rounding; a batch of one Gaussian release
        gets ``joint`` itself.
        """
        shares = self._normalized_shares()
        fixed = [r for r in self.releases if r.noise_scale is not None]
        if len(self.releases) == 1 and not fixed and self.releases[0].mechanism == "gaussian":
            return {self.releases[0].name: float(joint)}
        mu, mu_sq = 1.0 / joint, 1.0 / joint**2
        if fixed:
            mu_sq -= sum(r.gdp_mu(r.fixed_multiplier) ** 2 for r in fixed)
            if mu_sq <= 0:
                raise PrivacyBudgetError(
                    f"the fixed noise of {[r.name for r in fixed]} alone spends more than the "
                    "budget at this number of steps; raise its noise scale or leave it to the "
                    "plan."
                )
        multipliers = {}
        for r in self.releases:
            if r.noise_scale is not None:
                multipliers[r.name] = r.fixed_multiplier
            elif fixed:
                multipliers[r.name] = r.multiplier_for_mu(math.sqrt(mu_sq * shares[r.name]))
            else:
                multipliers[r.name] = r.multiplier_for_mu(mu * math.sqrt(shares[r.name]))
        return multipliers

    def noise_relative_to(self, name, noise_multiplier):
        """Noise multipliers when release ``name`` (a shared Gaussian
        release) has ``noise_multiplier``: the other shared releases follow
        from the shares, fixed ones keep their noise."""
        shares = self._normalized_shares()
        target = next((r for r in self.releases if r.name == name), None)
        if target is None or name not in shares or target.mechanism != "gaussian":
            raise ValueError(f"{name!r} is not a shared Gaussian release of batch {self.name!r}.")
        mu = 1.0 / (noise_multiplier * math.sqrt(shares[name]))
        multipliers = {}
        for r in self.releases:
            if r.noise_scale is not None:
                multipliers[r.name] = r.fixed_multiplier
            elif r.name == name:
                multipliers[r.name] = float(noise_multiplier)
            else:
                multipliers[r.name] = r.multiplier_for_mu(mu * math.sqrt(shares[r.name]))
        return multipliers

    def joint_multiplier(self, multipliers, factor):
        """Accounted joint multiplier of the batch's releases.

        Gaussian releases count ``multiplier / factor``, Laplace releases
        their pure epsilon ``factor / multiplier`` (see
        :func:`~skdp.privacy.joint_noise_multiplier`).
        """
        gaussian = [multipliers[r.name] / factor for r in self.releases if r.mechanism == "gaussian"]
        pure = [factor / multipliers[r.name] for r in self.releases if r.mechanism == "laplace"]
        if len(gaussian) == 1 and not pure:
            return gaussian[0]
        return joint_noise_multiplier(gaussian, pure)


@dataclass(frozen=True)
class InitialRelease:
    """A one-off Gaussian release on the whole data set, before training.

    Parameters
    ----------
    name : str
    sensitivity : float, default=1.0
        l2 sensitivity under add/remove-one neighbours.
    budget_share : float or None, default=None
        Share of the whole budget's GDP ``mu^2`` (``mu`` of the mechanism
        that is exactly (epsilon, delta)-DP) spent on it.
    noise_scale : float or None, default=None
        A fixed noise standard deviation instead of a share.
    """

    name: str
    sensitivity: float = 1.0
    budget_share: float = None
    noise_scale: float = None

    def __post_init__(self):
        if (self.budget_share is None) == (self.noise_scale is None):
            raise ValueError(
                f"InitialRelease {self.name!r}: give exactly one of budget_share and noise_scale."
            )
        if self.budget_share is not None and not 0 < self.budget_share < 1:
            raise ValueError(
                f"InitialRelease {self.name!r}: budget_share must be in (0, 1), got "
                f"{self.budget_share!r}."
            )


@dataclass(frozen=True)
class NoiseScale:
    """Noise of one release: ``multiplier`` is the noise scale over the
    sensitivity; ``scale`` the Gaussian standard deviation or Laplace scale."""

    mechanism: str
    multiplier: float
    sensitivity: float

    @property
    def scale(self):
        return self.multiplier * self.sensitivity

    @property
    def std(self):
        """Standard deviation of the noise on each coordinate."""
        return self.scale * (math.sqrt(2.0) if self.mechanism == "laplace" else 1.0)


@dataclass(frozen=True)
class PrivacyReport:
    """What a fit spent: the accountant's epsilon for the event that ran.

    Attributes
    ----------
    epsilon : float
        ``compute_epsilon(dp_event, delta, accountant)``; inf without privacy.
    delta : float
    dp_event : dp_accounting.DpEvent or None
    accountant, neighboring : str
    noise : mapping of str to NoiseScale or None
        Every release's noise by name (initial releases included); None
        values without privacy.
    steps : tuple of int
        Step count of each batch of the plan.
    sampling_rates : tuple of float
    joint_noise_multipliers : tuple of float
        Accounted joint multiplier of each batch (in the event's units).
    initial_event : dp_accounting.DpEvent or None
        The one-off releases before training (one Gaussian event).
    step_events : tuple of dp_accounting.DpEvent
        One step's event of each batch.
    privacy_unit : str
        What epsilon is about: ``"record"`` (add or remove one record), or
        ``"unit (max_records_per_unit=k)"`` when a fit was given
        ``unit_ids`` (add or remove one unit with all its records; see
        :ref:`units`).

    Notes
    -----
    ``str(report)`` (and ``print``) gives :meth:`summary`, a notebook shows
    an HTML table, and :meth:`to_frame` has one row per release. A report is
    immutable and pickles.

    Examples
    --------
    >>> from skdp.privacy import BatchReleases, Release, ReleasePlan
    >>> plan = ReleasePlan(BatchReleases([Release("gradient", sensitivity=1.0)],
    ...                                  steps=100, sampling_rate=0.01))
    >>> print(plan.calibrate(epsilon=1.0, delta=1e-5).summary())  # doctest: +ELLIPSIS
    PrivacyReport: private, (epsilon=0.99..., delta=1e-05)-DP
      accountant: pld; neighbouring datasets: add or remove one record
      releases (noise std = noise multiplier x sensitivity):
        gradient: gaussian, sensitivity 1, noise std ..., noise multiplier ...
      training: 100 steps at sampling rate 0.01 (joint noise multiplier ...)
    """

    epsilon: float
    delta: float
    dp_event: object
    accountant: str
    neighboring: str
    noise: dict
    steps: tuple
    sampling_rates: tuple
    joint_noise_multipliers: tuple = ()
    initial_event: object = None
    step_events: tuple = ()
    privacy_unit: str = "record"

    @property
    def private(self):
        return self.dp_event is not None

    def scale(self, name):
        """Noise scale of release ``name`` (None without privacy)."""
        noise = self.noise[name]
        return None if noise is None else noise.scale

    def multiplier(self, name):
        """Noise multiplier of release ``name`` (None without privacy)."""
        noise = self.noise[name]
        return None if noise is None else noise.multiplier

    def epsilon_after(self, fraction):
        """Epsilon had the run stopped after ``fraction`` of every batch's steps."""
        if not self.private:
            raise ValueError("Nothing was accounted: the fit was not private.")
        steps = [int(round(fraction * t)) for t in self.steps]
        event = _compose(self.initial_event, self.step_events, steps)
        return compute_epsilon(event, self.delta, self.accountant)

    def privacy_curve(self, n_points=10):
        """Epsilon after each of ``n_points`` step counts up to the last.

        Returns an array of shape (n_points, 2): the first batch's step count
        (the others scaled in proportion) and epsilon at ``delta``.
        """
        total = self.steps[0]
        points = np.unique(np.linspace(1, total, int(n_points)).round().astype(int))
        eps = [self.epsilon_after(t / total) for t in points]
        return np.column_stack([points, eps])

    # ------------------------------------------------------------ display
    def _status(self):
        """(private, text): whether the report certifies a finite epsilon."""
        if not self.private:
            return False, "not private (trained without noise; nothing accounted)"
        if not math.isfinite(self.epsilon):
            return False, "not private (the accountant's epsilon is infinite)"
        return True, "private"

    def _release_rows(self):
        """One dict per release: name, mechanism, sensitivity, multiplier,
        scale and std (None without noise)."""
        rows = []
        for name, noise in self.noise.items():
            if noise is None:
                rows.append(dict(release=name, mechanism=None, sensitivity=None,
                                 noise_multiplier=None, noise_scale=None, noise_std=None))
            else:
                rows.append(dict(release=name, mechanism=noise.mechanism,
                                 sensitivity=float(noise.sensitivity),
                                 noise_multiplier=float(noise.multiplier),
                                 noise_scale=float(noise.scale), noise_std=float(noise.std)))
        return rows

    def _batch_lines(self):
        """``training: ...`` (one batch) or ``batch i: ...`` lines."""
        lines = []
        for i, (steps, rate) in enumerate(zip(self.steps, self.sampling_rates)):
            line = f"{steps} steps at sampling rate {_fmt(rate)}"
            if i < len(self.joint_noise_multipliers):
                line += f" (joint noise multiplier {_fmt(self.joint_noise_multipliers[i])})"
            lines.append(line)
        if len(lines) == 1:
            return [f"training: {lines[0]}"]
        return [f"training, batch {i}: {line}" for i, line in enumerate(lines)]

    def _neighbours(self):
        """The neighbouring relation in words, naming the privacy unit."""
        text = _NEIGHBOURS.get(self.neighboring, str(self.neighboring))
        if self.privacy_unit == "record":
            return text
        return text.replace("one record", f"one {self.privacy_unit} with all its records")

    def summary(self):
        """A short, readable account of the report, several lines of text.

        Epsilon and delta (the accountant's), the accountant and the
        neighbouring relation, each release's noise (name, mechanism,
        sensitivity, noise standard deviation and multiplier), the step
        counts and sampling rates, and whether the fit is private.

        Returns
        -------
        str
        """
        private, status = self._status()
        head = f"PrivacyReport: {status}"
        if private:
            head += f", (epsilon={_fmt(self.epsilon)}, delta={_fmt(self.delta)})-DP"
        else:
            head += f"; epsilon={_fmt(self.epsilon)}, delta={_fmt(self.delta)}"
        lines = [
            head,
            f"  accountant: {self.accountant}; neighbouring datasets: "
            f"{self._neighbours()}",
        ]
        rows = self._release_rows()
        if not rows:
            lines.append("  releases: none (nothing was released from the data)")
        else:
            lines.append("  releases (noise std = noise multiplier x sensitivity):")
            for row in rows:
                if row["mechanism"] is None:
                    lines.append(f"    {row['release']}: no noise")
                else:
                    lines.append(
                        f"    {row['release']}: {row['mechanism']}, sensitivity "
                        f"{_fmt(row['sensitivity'])}, noise std {_fmt(row['noise_std'])}, "
                        f"noise multiplier {_fmt(row['noise_multiplier'])}"
                    )
        lines.extend(f"  {line}" for line in self._batch_lines())
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def to_frame(self):
        """One row per release, as a pandas DataFrame.

        Indexed by the release's name, with columns ``mechanism``,
        ``sensitivity``, ``noise_multiplier``, ``noise_scale`` (Gaussian std
        or Laplace scale) and ``noise_std`` (NaN for a release without
        noise). Needs pandas.

        Returns
        -------
        pandas.DataFrame
        """
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "PrivacyReport.to_frame needs pandas: pip install pandas "
                f"(or use PrivacyReport.summary()). ({exc})"
            ) from exc
        columns = ["release", "mechanism", "sensitivity", "noise_multiplier", "noise_scale",
                   "noise_std"]
        frame = pd.DataFrame(self._release_rows(), columns=columns)
        numeric = columns[2:]
        frame[numeric] = frame[numeric].astype(float)
        return frame.set_index("release")

    def _repr_html_(self):
        """A small HTML table for notebooks (every text escaped)."""
        esc = html.escape
        private, status = self._status()
        head = (f"<strong>PrivacyReport</strong>: {esc(status)}; "
                f"epsilon = {esc(_fmt(self.epsilon))}, delta = {esc(_fmt(self.delta))}<br>"
                f"accountant: {esc(str(self.accountant))}; neighbouring datasets: "
                f"{esc(self._neighbours())}")
        cells = ("release", "mechanism", "sensitivity", "noise std", "noise multiplier")
        header = "".join(f"<th>{esc(c)}</th>" for c in cells)
        body = []
        for row in self._release_rows():
            values = (row["release"], row["mechanism"] or "no noise",
                      _fmt(row["sensitivity"]), _fmt(row["noise_std"]),
                      _fmt(row["noise_multiplier"]))
            body.append("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in values) + "</tr>")
        table = (f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                 if body else "<p>No releases (nothing was released from the data).</p>")
        batches = "<br>".join(esc(line) for line in self._batch_lines())
        batches = f"<p>{batches}</p>" if batches else ""
        return f"<div class=\"skdp-privacy-report\"><p>{head}</p>{table}{batches}</div>"


_NEIGHBOURS = {
    "add_remove": "add or remove one record",
    "replace": "replace one record",
}


def _fmt(value):
    """A number for display: 4 significant digits, "-" for None."""
    if value is None:
        return "-"
    value = float(value)
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def check_same_privacy_unit(earlier, later):
    """A ValueError unless two privacy units (``PrivacyReport.privacy_unit``
    strings) compose: both ``"record"``, or both about units.

    Examples
    --------
    >>> from skdp.privacy import check_same_privacy_unit
    >>> check_same_privacy_unit("unit (max_records_per_unit=1)", "unit (max_records_per_unit=8)")
    >>> check_same_privacy_unit("record", "unit (max_records_per_unit=1)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Cannot compose a fit about records with a fit about units ...
    """
    if (earlier == "record") == (later == "record"):
        return
    record, unit = (earlier, later) if earlier == "record" else (later, earlier)
    raise ValueError(
        f"Cannot compose a fit about records with a fit about units ({unit}): an epsilon "
        "about units is not an epsilon about records (with max_records_per_unit=1, removing "
        "one record of a two-record unit can swap which record is kept, moving a release by "
        "twice a record's bound), and an epsilon about records says nothing about units. "
        "Fit both with the same unit_ids, or both without them (for warm_start: "
        "warm_start=False, or refit the first model the same way)."
    )


def compose_reports(earlier, later):
    """The report of a fit ``later`` that continued ``earlier`` (a warm start).

    Both fits may have seen the same records, so the guarantee is the
    sequential composition of their mechanisms, in the worst case (same
    data): the event is ``ComposedDpEvent([earlier.dp_event,
    later.dp_event])`` and epsilon the accountant's (``later.accountant``)
    for it at ``later.delta``. The earlier event counts as a one-off release
    before the later fit's steps, so :meth:`PrivacyReport.epsilon_after` and
    :meth:`PrivacyReport.privacy_curve` include it. The noise, steps and
    rates are the later fit's. When either fit was not private, neither is
    the result (epsilon inf, no event).

    Both reports must be about the same privacy unit: two fits with
    ``unit_ids`` compose per unit (whatever their ``max_records_per_unit``),
    two record-level fits per record, and a unit-level fit and a
    record-level one do not compose at all (a ValueError, as in
    :func:`~skdp.privacy.spent`): with ``max_records_per_unit=1``, removing
    one record of a two-record person can swap which record the unit-level
    fit keeps, which moves its release by twice a record's bound, so its
    epsilon is not an epsilon about records.

    Parameters
    ----------
    earlier, later : PrivacyReport

    Returns
    -------
    PrivacyReport

    Examples
    --------
    >>> from skdp.privacy import BatchReleases, Release, ReleasePlan, compose_reports
    >>> from skdp.privacy import compute_epsilon
    >>> plan = ReleasePlan(BatchReleases([Release("gradient")], steps=100, sampling_rate=0.01))
    >>> one = plan.calibrate(1.0, 1e-5)
    >>> two = compose_reports(one, one)
    >>> bool(two.epsilon > one.epsilon)
    True
    >>> two.epsilon == compute_epsilon(two.dp_event, 1e-5)
    True
    """
    check_same_privacy_unit(earlier.privacy_unit, later.privacy_unit)
    if not (earlier.private and later.private):
        return replace(later, epsilon=np.inf, dp_event=None, initial_event=None)
    event = dpa.ComposedDpEvent([earlier.dp_event, later.dp_event])
    prefix = earlier.dp_event
    if later.initial_event is not None:
        prefix = dpa.ComposedDpEvent([earlier.dp_event, later.initial_event])
    return replace(later, epsilon=compute_epsilon(event, later.delta, later.accountant),
                   dp_event=event, initial_event=prefix)


def _compose(initial_event, step_events, steps):
    events = [dpa.SelfComposedDpEvent(e, int(t)) for e, t in zip(step_events, steps) if t > 0]
    if not events and initial_event is None:
        return dpa.NoOpDpEvent()
    if initial_event is not None:
        events.insert(0, initial_event)
    if len(events) == 1:
        return events[0]
    return dpa.ComposedDpEvent(events)


@dataclass(frozen=True)
class ReleasePlan:
    """Everything a fit releases, and how its budget is shared.

    Parameters
    ----------
    batches : BatchReleases or sequence of BatchReleases
        Per-step releases; several batches (other rates or step counts)
        compose as separate events.
    initial : sequence of InitialRelease, default=()
        One-off releases on the whole data before training.
    neighboring : {"add_remove", "replace"}, default="add_remove"
    accountant : {"pld", "rdp"}, default="pld"
    n_records : int or None, default=None
        Record count, needed by batches given by ``batch_size``: the number
        of units when the privacy unit is not a record.
    privacy_unit : str, default="record"
        What the plan's sensitivities and sampling rates are about, named in
        the report (:attr:`PrivacyReport.privacy_unit`): ``"record"``, or
        ``"unit (max_records_per_unit=k)"`` when each unit's contribution to
        every release is bounded like a record's and units are Poisson
        sampled (:func:`~skdp.privacy.bound_units`,
        :class:`~skdp.privacy.UnitSampler`).

    Examples
    --------
    A DP-SGD step that also releases a noisy histogram of 4 counts, with 10 %
    of each step's privacy on the histogram:

    >>> from skdp.privacy import BatchReleases, Release, ReleasePlan
    >>> plan = ReleasePlan(BatchReleases(
    ...     [Release("gradient", sensitivity=1.0, share=0.9),
    ...      Release("histogram", sensitivity=1.0, share=0.1)],
    ...     steps=300, sampling_rate=0.03))
    >>> report = plan.calibrate(epsilon=1.0, delta=1e-5)
    >>> report.epsilon <= 1.0
    True
    >>> z = report.joint_noise_multipliers[0]
    >>> g, h = report.multiplier("gradient"), report.multiplier("histogram")
    >>> bool(abs((g**-2 + h**-2) ** -0.5 - z) < 1e-6 * z)
    True
    """

    batches: tuple
    initial: tuple = ()
    neighboring: str = "add_remove"
    accountant: str = "pld"
    n_records: int = None
    privacy_unit: str = "record"

    def __post_init__(self):
        batches = (self.batches,) if isinstance(self.batches, BatchReleases) else tuple(self.batches)
        if not batches:
            raise ValueError("ReleasePlan needs at least one BatchReleases.")
        object.__setattr__(self, "batches", batches)
        object.__setattr__(self, "initial", tuple(self.initial))
        names = [r.name for b in batches for r in b.releases] + [r.name for r in self.initial]
        if len(set(names)) != len(names):
            raise ValueError(f"Release names must be unique in a plan; got {names}.")
        if self.neighboring not in NEIGHBORING:
            raise ValueError(
                f"neighboring must be one of {NEIGHBORING}, got {self.neighboring!r}."
            )
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {self.accountant!r}.")

    # ------------------------------------------------------------ helpers
    @property
    def _factor(self):
        return sensitivity_factor(self.neighboring)

    def sampling_rates(self):
        return tuple(b.rate(self.n_records) for b in self.batches)

    def with_steps(self, steps):
        """The plan with the single batch's step count set to ``steps``."""
        (batch,) = self._single_batch()
        return replace(self, batches=(replace(batch, steps=int(steps)),))

    def _single_batch(self):
        if len(self.batches) != 1:
            raise ValueError("This operation needs a plan with one batch of releases.")
        return self.batches

    def _initial(self, epsilon, delta, scales=None):
        """Noise multipliers of the one-off releases and their event (one
        Gaussian: releases on the same data compose exactly in GDP)."""
        if not self.initial:
            return {}, None
        multipliers = {}
        for r in self.initial:
            if scales is not None:
                multipliers[r.name] = float(scales[r.name]) / r.sensitivity
            elif r.noise_scale is not None:
                multipliers[r.name] = float(r.noise_scale) / r.sensitivity
            else:
                multipliers[r.name] = 1.0 / (math.sqrt(r.budget_share) * gdp_mu(epsilon, delta))
        accounted = [m / self._factor for m in multipliers.values()]
        joint = accounted[0] if len(accounted) == 1 else joint_noise_multiplier(accounted)
        return multipliers, dpa.GaussianDpEvent(noise_multiplier=joint)

    def _step_events(self, per_batch, rates):
        joints = tuple(b.joint_multiplier(m, self._factor) for b, m in zip(self.batches, per_batch))
        events = tuple(poisson_gaussian_step(z, q) for z, q in zip(joints, rates))
        return joints, events

    def _report(self, delta, initial, initial_event, per_batch, steps=None,
                accounted_joints=None):
        """Report for the multipliers ``initial`` and ``per_batch``.

        ``accounted_joints``: calibrated joint multipliers (add/remove units)
        that the released noise dominates, accounted as they are; otherwise
        the events are built from the multipliers.
        """
        rates = self.sampling_rates()
        steps = tuple(b.steps for b in self.batches) if steps is None else tuple(steps)
        if accounted_joints is None:
            joints, step_events = self._step_events(per_batch, rates)
        else:
            joints = tuple(z / self._factor for z in accounted_joints)
            step_events = tuple(
                poisson_gaussian_step(z, q, neighboring=self.neighboring)
                for z, q in zip(accounted_joints, rates)
            )
        event = _compose(initial_event, step_events, steps)
        noise = {r.name: NoiseScale("gaussian", initial[r.name], r.sensitivity)
                 for r in self.initial}
        for batch, multipliers in zip(self.batches, per_batch):
            for r in batch.releases:
                noise[r.name] = NoiseScale(r.mechanism, multipliers[r.name], r.sensitivity)
        return PrivacyReport(
            epsilon=compute_epsilon(event, delta, self.accountant),
            delta=float(delta),
            dp_event=event,
            accountant=self.accountant,
            neighboring=self.neighboring,
            noise=dict(noise),
            steps=steps,
            sampling_rates=rates,
            joint_noise_multipliers=joints,
            initial_event=initial_event,
            step_events=step_events,
            privacy_unit=self.privacy_unit,
        )

    # ----------------------------------------------------------- reports
    def non_private(self, delta):
        """Report of a fit without noise: epsilon inf, no event."""
        names = [r.name for r in self.initial] + [r.name for b in self.batches for r in b.releases]
        return PrivacyReport(
            epsilon=np.inf, delta=float(delta), dp_event=None, accountant=self.accountant,
            neighboring=self.neighboring, noise=dict.fromkeys(names),
            steps=tuple(b.steps for b in self.batches), sampling_rates=self.sampling_rates(),
            privacy_unit=self.privacy_unit,
        )

    def account(self, noise, delta, *, steps=None):
        """Report for given noise scales, as the accountant certifies them.

        Parameters
        ----------
        noise : mapping of str to float
            Noise scale (Gaussian std or Laplace scale) of every release,
            initial ones included.
        delta : float
        steps : sequence of int or None
            Step counts of the batches (default: the plan's).

        Returns
        -------
        PrivacyReport
        """
        missing = [r.name for b in self.batches for r in b.releases if r.name not in noise]
        missing += [r.name for r in self.initial if r.name not in noise]
        if missing:
            raise ValueError(f"noise is missing the scales of {missing}.")
        initial, initial_event = self._initial(None, None, scales=noise)
        per_batch = [{r.name: float(noise[r.name]) / r.sensitivity for r in b.releases}
                     for b in self.batches]
        return self._report(delta, initial, initial_event, per_batch, steps=steps)

    def calibrate(self, epsilon, delta):
        """Noise scales that meet the budget for the planned steps.

        All batches' joint multipliers scale together (in the ratio of their
        ``noise_ratio``); the accountant's epsilon of the result is in
        ``[0.994 * epsilon, epsilon]`` for one batch.

        Raises
        ------
        PrivacyBudgetError
            When no noise level up to a multiplier of 1e4 meets the budget,
            or fixed noise alone spends it.
        """
        _check_budget(epsilon, delta)
        initial, initial_event = self._initial(epsilon, delta)
        if len(self.batches) == 1:
            return self._calibrate_one(epsilon, delta, initial, initial_event)
        return self._calibrate_many(epsilon, delta, initial, initial_event)

    def _calibrate_one(self, epsilon, delta, initial, initial_event):
        (batch,) = self.batches
        (rate,) = self.sampling_rates()
        joint = calibrate_noise_multiplier(
            epsilon, delta, rate, batch.steps, accountant=self.accountant,
            neighboring=self.neighboring, initial_event=initial_event,
        )
        multipliers = batch.noise_at(joint)
        exact = self.neighboring == "add_remove" or all(
            r.mechanism == "gaussian" for r in batch.releases
        )
        if exact:
            # the split reproduces the calibrated joint multiplier, which is
            # accounted as is (the released noise dominates it)
            return self._report(delta, initial, initial_event, [multipliers],
                                accounted_joints=(joint,))
        # Laplace under replace-one: mu(2s/b) is not 2 mu(s/b); check with
        # the accountant and raise the shared Gaussian noise until it fits
        raised = [r.name for r in batch.releases
                  if r.mechanism == "gaussian" and r.noise_scale is None]
        for _ in range(200):
            report = self._report(delta, initial, initial_event, [multipliers])
            if report.epsilon <= epsilon:
                return report
            if not raised:
                break
            multipliers = {k: v * _RAISE if k in raised else v for k, v in multipliers.items()}
        raise PrivacyBudgetError(
            f"the Laplace releases alone spend more than epsilon={epsilon} over {batch.steps} "
            "steps; raise their noise or leave it to the plan."
        )

    def _calibrate_many(self, epsilon, delta, initial, initial_event):
        rates = self.sampling_rates()

        def multipliers_at(z):
            return [b.noise_at(z * b.noise_ratio) for b in self.batches]

        def log_eps(log_z):
            report = self._report(delta, initial, initial_event, multipliers_at(math.exp(log_z)))
            return math.log(max(report.epsilon, 1e-300))

        # start where the most expensive batch alone would meet the budget
        guesses = [
            calibrate_noise_multiplier(epsilon, delta, q, max(b.steps, 1), accountant=self.accountant,
                                       neighboring=self.neighboring) / b.noise_ratio
            for b, q in zip(self.batches, rates) if b.steps > 0
        ]
        x0 = math.log(max(guesses) * math.sqrt(len(guesses)))
        log_z = _secant_search(log_eps, x0, -1.0, math.log(epsilon), increasing=False, rtol=6e-3)
        if log_z is None or math.exp(log_z) > _MAX_NOISE:
            raise PrivacyBudgetError(
                f"epsilon={epsilon} at delta={delta} cannot pay for this plan even with noise "
                f"multiplier {_MAX_NOISE:g}; raise epsilon or reduce the number of steps."
            )
        return self._report(delta, initial, initial_event, multipliers_at(math.exp(log_z)))

    def calibrate_steps(self, epsilon, delta, *, release, noise_multiplier, max_steps=None):
        """The most steps (up to the planned count) a fixed noise level affords.

        Release ``release`` gets ``noise_multiplier``; the other shared
        releases follow from the shares (fixed ones keep their scales).

        Raises
        ------
        PrivacyBudgetError
            When not even one step is affordable.
        """
        _check_budget(epsilon, delta)
        (batch,) = self._single_batch()
        initial, initial_event = self._initial(epsilon, delta)
        multipliers = batch.noise_relative_to(release, float(noise_multiplier))
        (rate,) = self.sampling_rates()
        _, (step_event,) = self._step_events([multipliers], (rate,))
        cap = batch.steps if max_steps is None else int(max_steps)
        affordable = calibrate_steps(
            step_event, epsilon, delta, accountant=self.accountant, max_steps=cap,
            initial_event=initial_event,
        )
        if affordable == 0:
            raise PrivacyBudgetError(
                f"epsilon={epsilon} at delta={delta} cannot pay for a single step with "
                f"noise multiplier {noise_multiplier} on {release!r} and sampling rate "
                f"{rate:.4g}; raise epsilon or the noise, or lower the batch size."
            )
        return self._report(delta, initial, initial_event, [multipliers], steps=(affordable,))

    def calibrate_silos(self, epsilon, delta, silo_sizes):
        """The plan calibrated for each silo's own record count.

        Each silo samples its own batches (``batch_size`` batches get the rate
        ``batch_size / n_j``) and pays for its own messages, so a record --
        which lives in one silo -- is covered by its silo's report.

        Returns
        -------
        list of PrivacyReport
            One per silo, in the order of ``silo_sizes``.
        """
        return [
            replace(self, n_records=int(n)).calibrate(epsilon, delta) for n in silo_sizes
        ]


def silo_summary(reports):
    """The whole-data guarantee of per-silo reports: the largest epsilon.

    A record lives in one silo and only that silo's messages depend on it,
    so the report with the largest epsilon covers every record.

    Returns
    -------
    PrivacyReport
    """
    reports = list(reports)
    if not reports:
        raise ValueError("silo_summary needs at least one report.")
    return max(reports, key=lambda r: r.epsilon)
