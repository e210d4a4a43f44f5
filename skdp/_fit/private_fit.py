"""The privacy side of every skdp ``fit``: its randomness, spending a
release plan under ``(epsilon, delta)``, and the fitted privacy attributes.
Shared by the estimators and the private preprocessing steps."""

import os
import time

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._doc_link import DocLinkMixin
from ..privacy import SecureGenerator
from ..privacy.ledger import charge_report

__all__ = ["PrivateFitMixin"]


class PrivateFitMixin(DocLinkMixin):
    """The privacy side of every skdp ``fit``: the randomness of the fit,
    spending a release plan under ``(epsilon, delta)`` and storing its
    report. Shared by the estimators (:class:`BaseDPEstimator`) and the
    private preprocessing steps.

    Reads ``epsilon``, ``delta`` and ``random_state``; an estimator's
    solver options (``secure_rng``, ``noise_multiplier``) and ``device`` come
    through :meth:`_fit_option`, which a step without them leaves at its
    defaults.
    """

    #: Fit options a step without them gets (see :meth:`_fit_option`).
    _option_defaults = {"secure_rng": False, "noise_multiplier": None, "sample_rate": None,
                        "device": "cpu", "verbose": 0}

    def _fit_option(self, name):
        """The value of the fit option ``name``: a constructor parameter or a
        solver option of the estimator, else its default for steps that do
        not have it (:attr:`_option_defaults`)."""
        return getattr(self, name, self._option_defaults[name])

    def _make_generator(self):
        """Generator for sampling and noise, seed for module init, and device.

        Returns ``(generator, seed, device)``.

        - ``random_state=None`` (the default): sampling and noise come from a
          :class:`~skdp.privacy.SecureGenerator` (the operating system's
          CSPRNG: no seed, nothing anyone can replay, not even after
          ``np.random.seed``), and the initialisation seed from
          ``os.urandom``.
        - ``random_state`` an int or a ``RandomState``: a torch generator on
          ``device`` seeded from it, for reproducible experiments; with
          ``secure_rng=True`` the privacy randomness still comes from the
          CSPRNG and the seed only initialises the model.
        """
        device = self._checked_device()
        if self.random_state is None:
            seed = int.from_bytes(os.urandom(8), "little") >> 1
            return SecureGenerator(device), seed, device
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        if self._fit_option("secure_rng"):
            return SecureGenerator(device), seed, device
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        return generator, seed, device

    def _checked_device(self):
        """``torch.device(self.device)``, or a ValueError saying what to use."""
        try:
            device = torch.device(self._fit_option("device"))
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ValueError(
                f"device={self._fit_option('device')!r} is not a torch device ({exc}); use 'cpu', or 'cuda' "
                "on a machine with a CUDA build of torch."
            ) from exc
        available = {
            "cuda": torch.cuda.is_available,
            "mps": lambda: torch.backends.mps.is_available(),
        }.get(device.type, lambda: True)
        if not available():
            raise ValueError(
                f"device={self._fit_option('device')!r} is not available here (torch {torch.__version__} "
                f"finds no {device.type} device); use device='cpu'."
            )
        return device

    def _spend(self, plan, *, release="gradient"):
        """Privacy report of ``plan`` under the estimator's budget.

        Without privacy (``epsilon=None``): a report with epsilon inf. With a
        fixed ``noise_multiplier``: release ``release`` gets it and the step
        count is the most the budget affords (up to the planned one).
        Otherwise the plan's noise is calibrated for the planned steps.
        """
        if self.epsilon is None:
            return plan.non_private(self.delta)
        noise_multiplier = self._fit_option("noise_multiplier")
        if noise_multiplier is None:
            return plan.calibrate(self.epsilon, self.delta)
        report = plan.calibrate_steps(
            self.epsilon, self.delta, release=release, noise_multiplier=noise_multiplier
        )
        if report.steps[0] < plan.batches[0].steps and self._fit_option("verbose"):
            print(
                f"[{type(self).__name__}] budget affords {report.steps[0]} of "
                f"{plan.batches[0].steps} requested steps"
            )
        return report

    def _charge_ledger(self, report, *, extra_delta=0.0):
        """Reserve ``report``'s releases in the active
        :class:`~skdp.privacy.PrivacyLedger`, if any: called once the noise
        is planned, before the first release (a refused fit releases
        nothing). :meth:`_store_privacy_report` commits it."""
        self._ledger_charge = charge_report(type(self).__name__, report,
                                            extra_delta=extra_delta)

    def _store_privacy_report(self, report, *, delta=None):
        """Fitted privacy attributes, the same for every estimator and step.

        ``delta`` overrides the report's delta (a step whose fit adds a
        stability delta outside its event)."""
        charge = self.__dict__.pop("_ledger_charge", None)
        if charge is not None:
            charge.commit()
        self.privacy_report_ = report
        self.privacy_unit_ = report.privacy_unit
        self.epsilon_ = report.epsilon
        self.delta_ = report.delta if delta is None else float(delta)
        self.dp_event_ = report.dp_event
        self.accountant_ = report.accountant

    @staticmethod
    def _timed(function, *args, **kwargs):
        """``(function(*args, **kwargs), seconds it took)``, for
        :func:`skdp.debug.record_fit_times`.

        >>> from skdp._fit.private_fit import PrivateFitMixin
        >>> total, seconds = PrivateFitMixin._timed(sum, [1, 2, 3])
        >>> total, seconds >= 0
        (6, True)
        """
        start = time.perf_counter()
        result = function(*args, **kwargs)
        return result, time.perf_counter() - start
