"""What a fit spent: :class:`PrivacyReport`, its display, and composing
reports (a warm start, the silos of a federated fit)."""

import html
import math
from dataclasses import dataclass, replace

import dp_accounting as dpa
import numpy as np

from ._accounting import compute_epsilon

__all__ = ["PrivacyReport", "check_same_privacy_unit", "compose_reports", "silo_summary"]


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
    earlier : tuple of PrivacyReport
        With ``warm_start``: the reports of the earlier fits this one
        continued, oldest first (:func:`compose_reports`); ``epsilon`` and
        ``dp_event`` compose them all, the noise and steps are the last
        fit's.

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
    earlier: tuple = ()

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
        lines.extend(f"  {line}" for line in self._earlier_lines())
        return "\n".join(lines)

    def _earlier_lines(self):
        """A line naming the earlier fits a warm start continued, if any."""
        if not self.earlier:
            return []
        each = ", ".join(_fmt(r.epsilon) for r in self.earlier)
        return [f"continues {len(self.earlier)} earlier fit(s) (epsilon after each: {each}), "
                "composed into the epsilon above; the releases and steps listed are the last "
                "fit's"]

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
        batches = "<br>".join(esc(line) for line in self._batch_lines() + self._earlier_lines())
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
    :func:`~skdp.model_selection.spent`): with ``max_records_per_unit=1``, removing
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
                   dp_event=event, initial_event=prefix,
                   earlier=earlier.earlier + (replace(earlier, earlier=()),))


def _compose(initial_event, step_events, steps):
    events = [dpa.SelfComposedDpEvent(e, int(t)) for e, t in zip(step_events, steps) if t > 0]
    if not events and initial_event is None:
        return dpa.NoOpDpEvent()
    if initial_event is not None:
        events.insert(0, initial_event)
    if len(events) == 1:
        return events[0]
    return dpa.ComposedDpEvent(events)



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
