"""The releases of a plan: what a fit releases, per step or once, with its
sensitivity, mechanism and share of the budget, and the noise each gets
(:class:`~skdp.privacy.ReleasePlan` turns them into noise scales)."""

import math
from dataclasses import dataclass

import numpy as np

from ._accounting import (
    PrivacyBudgetError,
    gdp_to_pure_dp,
    joint_noise_multiplier,
    pure_dp_to_gdp,
)

__all__ = ["BatchReleases", "InitialRelease", "MECHANISMS", "NoiseScale", "Release"]


MECHANISMS = ("gaussian", "laplace")

#: Relative inflation of noise derived from a calibrated joint multiplier, so
#: that the released noise dominates the accounted mechanism despite rounding.
_INFLATE = 1 + 1e-9


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


