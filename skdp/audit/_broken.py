"""Deliberately broken copies for the audit's power tests (test-only).

An audit that cannot fail proves nothing: the tests run every audit once
more on a copy of the estimator whose noise is a fraction of its planned
size (or none) while it still reports the planned epsilon, and check that
the audit then refutes the claim. The hook is a private factor on every
noise draw of the engine (:data:`skdp.privacy._random._NOISE_FACTOR`);
nothing in the package sets it, and it is not an option of any estimator.
"""

from contextlib import contextmanager

from ..privacy import _random


@contextmanager
def scaled_noise(factor):
    """Within the block, every Gaussian and Laplace draw of the privacy
    engine is multiplied by ``factor`` (0 removes the noise); restored after.

    >>> import torch
    >>> from skdp.audit._broken import scaled_noise
    >>> from skdp.privacy import gaussian_noise
    >>> with scaled_noise(0.0):
    ...     float(gaussian_noise(torch.zeros(3), 1.0, torch.Generator()).abs().sum())
    0.0
    """
    previous = _random._NOISE_FACTOR
    _random._NOISE_FACTOR = float(factor)
    try:
        yield
    finally:
        _random._NOISE_FACTOR = previous
