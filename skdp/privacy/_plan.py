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

import math
from dataclasses import dataclass, replace

import dp_accounting as dpa
import numpy as np

from ._accounting import (
    ACCOUNTANTS,
    NEIGHBORING,
    PrivacyBudgetError,
    _MAX_NOISE,
    calibrate_noise_multiplier,
    calibrate_steps,
    check_budget,
    certified_search,
    compute_epsilon,
    estimated_log_epsilon,
    gdp_mu,
    joint_noise_multiplier,
    noise_multiplier_guess,
    poisson_gaussian_step,
    sensitivity_factor,
)
from ._releases import BatchReleases, NoiseScale
from ._report import PrivacyReport, _compose

__all__ = ["ReleasePlan"]

#: Relative step by which Gaussian noise is raised when a plan that mixes
#: Laplace releases with replace-one neighbours must be checked by the
#: accountant (GDP conversion of pure DP is not linear in the sensitivity).
_RAISE = 1.02


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

    def _event(self, initial_event, per_batch):
        """The accounted event of multipliers ``per_batch`` (what
        :meth:`_report` accounts, without the accountant)."""
        _, step_events = self._step_events(per_batch, self.sampling_rates())
        return _compose(initial_event, step_events, tuple(b.steps for b in self.batches))

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
        check_budget(epsilon, delta)
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

        def event_of(log_z):
            z = 1.0 if log_z is None else math.exp(log_z)
            return self._event(initial_event, multipliers_at(z))

        def log_eps(log_z):
            report = self._report(delta, initial, initial_event, multipliers_at(math.exp(log_z)))
            return math.log(max(report.epsilon, 1e-300))

        # start where the most expensive batch alone would meet the budget
        guesses = [
            noise_multiplier_guess(epsilon, delta, q, max(b.steps, 1), accountant=self.accountant,
                                   neighboring=self.neighboring) / b.noise_ratio
            for b, q in zip(self.batches, rates) if b.steps > 0
        ]
        x0 = math.log(max(guesses) * math.sqrt(len(guesses)))
        log_z = certified_search(log_eps, estimated_log_epsilon(event_of, delta, self.accountant),
                                 x0, -1.0, math.log(epsilon), increasing=False, rtol=6e-3)
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
        check_budget(epsilon, delta)
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
