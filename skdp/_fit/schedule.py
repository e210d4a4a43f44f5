"""The Poisson sampling schedule of a fit: its rate, batch and step count.

:class:`SamplingScheduleMixin` turns ``batch_size`` (or the solver option
``sample_rate``), ``max_epochs`` and ``max_steps`` into the sampling rate q
and the number of steps every trainer runs, and checks them, the clipping
norm and ``delta`` against the (public) number of training samples.
"""

import math
import warnings

import numpy as np

__all__ = ["SamplingScheduleMixin"]


class SamplingScheduleMixin:
    """Sampling rate, ``batch_size="auto"`` and step count of a private fit.

    Reads ``epsilon``, ``delta``, ``max_grad_norm``, ``batch_size``,
    ``max_epochs``, ``max_steps`` and the ``sample_rate`` fit option of the
    estimator it is mixed into.
    """

    def _check_privacy_setup(self, n_samples, batch_size):
        """Check the sampling, clipping and delta against the data; return q.

        The Poisson sampling rate q is ``sample_rate`` when the estimator has
        one set (``batch_size`` is then ignored), else
        ``batch_size / n_samples``.
        """
        if self.epsilon is not None and not np.isfinite(self.max_grad_norm):
            raise ValueError(
                "max_grad_norm=inf turns clipping off, which only a non-private fit "
                "(epsilon=None) can do: the noise scale is proportional to it."
            )
        sample_rate = self._fit_option("sample_rate")
        if sample_rate is None:
            q = self._rate_from_batch_size(n_samples, batch_size)
        else:
            q = self._checked_sample_rate(n_samples, sample_rate)
        if self.epsilon is not None and self.delta >= 1.0 / n_samples:
            warnings.warn(
                f"delta={self.delta:g} is not smaller than 1/n_samples={1.0 / n_samples:.3g}; "
                "a mechanism that publishes one random record satisfies such a guarantee. Use "
                "delta well below 1/n_samples.",
                UserWarning,
            )
        return q

    @staticmethod
    def _rate_from_batch_size(n_samples, batch_size):
        if batch_size > n_samples:
            raise ValueError(
                f"batch_size={batch_size} is larger than the number of training samples "
                f"({n_samples}); use batch_size <= {n_samples} (a few percent of the data is "
                "typical for DP-SGD)."
            )
        return batch_size / n_samples

    @staticmethod
    def _checked_sample_rate(n_samples, sample_rate):
        # relative slack so that sample_rate=1/n_samples passes despite rounding
        if sample_rate * n_samples < 1.0 - 1e-9:
            raise ValueError(
                f"solver_options['sample_rate']={sample_rate:g} gives an expected batch of "
                f"{sample_rate * n_samples:.3g} records on {n_samples} training samples, less "
                f"than one; use a sample_rate >= 1/n_samples = {1.0 / n_samples:.3g} (a few "
                "percent is typical for DP-SGD), or leave it out and set batch_size."
            )
        return float(sample_rate)

    @staticmethod
    def _expected_batch_size(n_samples, sampling_rate):
        """The expected Poisson batch ``sampling_rate * n_samples``, rounded."""
        return max(1, int(round(sampling_rate * n_samples)))

    def _n_steps_requested(self, sampling_rate):
        if self.max_steps is not None:
            return int(self.max_steps)
        return max(1, int(round(self.max_epochs / sampling_rate)))

    #: Factor ``c`` of ``batch_size="auto"``: ``min(n // 4, max(64, c sqrt(n)))``.
    _auto_batch_factor = 6

    def _resolve_batch_size(self, n_samples):
        """``batch_size``, with ``"auto"`` resolved to
        ``min(n // 4, max(64, round(c * sqrt(n))))`` with ``c`` the class's
        :attr:`_auto_batch_factor` (6: about 1000 for 30,000 records; never
        more than a quarter of the data)."""
        if self.batch_size == "auto":
            factor = self._auto_batch_factor
            return int(min(max(n_samples // 4, 1), max(64, round(factor * math.sqrt(n_samples)))))
        return int(self.batch_size)
