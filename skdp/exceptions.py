"""Warnings and errors raised by skdp."""

__all__ = ["PrivacyLeakWarning"]


class PrivacyLeakWarning(UserWarning):
    """Something learnt from the data is not covered by the reported epsilon.

    Raised, for example, when a scaler has no public ``bounds`` and reads the
    feature ranges from the data, or when :func:`skdp.privacy.spent` meets a
    pipeline step that was fitted without differential privacy. The fitted
    estimator then reports ``epsilon_ = inf``.

    Examples
    --------
    >>> import warnings
    >>> from skdp.exceptions import PrivacyLeakWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("bounds read from the data", PrivacyLeakWarning)
    >>> caught[0].category.__name__
    'PrivacyLeakWarning'
    """
