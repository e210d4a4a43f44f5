"""Warnings and errors raised by skdp."""

__all__ = ["PrivacyLeakWarning", "UnitPrivacyNotAvailableError"]


class PrivacyLeakWarning(UserWarning):
    """Something learnt from the data is not covered by the reported epsilon.

    Raised, for example, when a scaler has no public ``bounds`` and reads the
    feature ranges from the data, or when :func:`skdp.model_selection.spent` meets a
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


class UnitPrivacyNotAvailableError(ValueError, NotImplementedError):
    """``unit_ids`` were given to an estimator whose guarantee is per record.

    Unit-level privacy (epsilon about all records of one person) is
    implemented for :class:`~skdp.DPSGDClassifier` and
    :class:`~skdp.DPSGDRegressor`; every other estimator raises this error
    rather than ignore the ids. A ``ValueError`` (bad input for this
    estimator) and a ``NotImplementedError`` (not available yet).
    """
