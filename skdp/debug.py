"""Non-private debug output, off by default.

What a fit reveals is what its fitted attributes hold, and they are all
covered by ``epsilon_`` (or public). Some diagnostics depend on the private
data in ways the accountant does not cover -- the time a fit takes grows with
the number of records kept per unit, for instance -- so they are never
fitted attributes: a data owner who wants them asks for them explicitly, for
a block of code, and keeps them to herself.
"""

import contextvars
from contextlib import contextmanager

__all__ = ["record_fit_times"]

_FIT_TIMES = contextvars.ContextVar("skdp_fit_times", default=None)


@contextmanager
def record_fit_times():
    """Collect the timings of every skdp fit made inside the block.

    Each fit appends one dict: ``"estimator"`` (the class name) and the
    seconds of its parts, ``"calibration"`` (noise calibration) and
    ``"training"`` (the trainer's loop). **Not private**: the times depend on
    the data (e.g. on how many records each unit holds), so they are debug
    output for whoever runs ``fit``, never to be published with the model.
    Fits in other threads or processes are not recorded (the recorder is
    a context variable of the calling thread).

    Yields
    ------
    times : list of dict
        Filled as the fits finish.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp import DPSGDClassifier
    >>> from skdp.debug import record_fit_times
    >>> X = np.random.default_rng(0).normal(size=(500, 3)); y = (X[:, 0] > 0).astype(int)
    >>> with record_fit_times() as times:
    ...     clf = DPSGDClassifier(random_state=0).fit(X, y)
    >>> times[0]["estimator"], sorted(times[0])
    ('DPSGDClassifier', ['calibration', 'estimator', 'training'])
    >>> hasattr(clf, "fit_time_")
    False
    """
    times = []
    token = _FIT_TIMES.set(times)
    try:
        yield times
    finally:
        _FIT_TIMES.reset(token)


def report_fit_times(estimator, **seconds):
    """Give a fit's timings to the enclosing :func:`record_fit_times`, if any;
    with ``estimator.verbose`` positive, also print them (non-private output
    for whoever runs ``fit``)."""
    times = _FIT_TIMES.get()
    if times is not None:
        times.append({"estimator": type(estimator).__name__, **seconds})
    if getattr(estimator, "verbose", 0):
        parts = ", ".join(f"{name} {value:.3f} s" for name, value in seconds.items())
        print(f"[{type(estimator).__name__}] {parts} (timings are not private)")
