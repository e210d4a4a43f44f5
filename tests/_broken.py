"""Deliberately broken copies for the audit's power tests.

An audit that cannot fail proves nothing: the tests run every audit once
more on a copy of the estimator whose noise is a fraction of its planned
size (or none) while it still reports the planned epsilon, and check that
the audit then refutes the claim. The engine has no hook for this: within
:func:`scaled_noise` every module of skdp that holds the engine's noise draws
(:func:`skdp.privacy.normal_`, :func:`skdp.privacy.exponential_`) holds a
wrapper instead, for the duration of the block (single-threaded tests only).
"""

import sys
from contextlib import contextmanager

from skdp.privacy import _random


@contextmanager
def scaled_noise(factor):
    """Within the block, every Gaussian and Laplace draw of the privacy
    engine is multiplied by ``factor`` (0 removes the noise); restored after.

    >>> import torch
    >>> from skdp.privacy import gaussian_noise
    >>> with scaled_noise(0.0):
    ...     float(gaussian_noise(torch.zeros(3), 1.0, torch.Generator()).abs().sum())
    0.0
    """
    factor = float(factor)
    originals = {"normal_": _random.normal_, "exponential_": _random.exponential_}

    def scaled(draw):
        def wrapper(tensor, generator):
            return draw(tensor, generator).mul_(factor)
        return wrapper

    wrappers = {name: scaled(draw) for name, draw in originals.items()}
    patched = []
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("skdp"):
            continue
        for name, draw in originals.items():
            if getattr(module, name, None) is draw:
                setattr(module, name, wrappers[name])
                patched.append((module, name, draw))
    try:
        yield
    finally:
        for module, name, draw in patched:
            setattr(module, name, draw)
