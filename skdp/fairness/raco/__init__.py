"""RaCO-DP: private training under group-fairness rate constraints.

The estimator shell (``._estimator``, :class:`skdp.DPRateConstrainedClassifier`)
validates and plans; the trainer (``._trainer``) runs the private
descent-ascent on tensors. Both build on the rate-constraint language of
:mod:`skdp.fairness`.
"""

from ._estimator import DPRateConstrainedClassifier

__all__ = ["DPRateConstrainedClassifier"]
