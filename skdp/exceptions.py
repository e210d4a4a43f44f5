"""Warnings and errors raised by skdp."""

__all__ = [
    "CategoryWarning",
    "ClippingWarning",
    "ConstraintWarning",
    "ModelCheckWarning",
    "NoiseDecisionWarning",
    "PrivacyLeakWarning",
    "SelectionWarning",
    "UnitPrivacyNotAvailableError",
]


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
    """``unit_ids`` were given to a step whose guarantee is per record.

    Every skdp estimator and private preprocessing step bounds the records
    of a unit; a private search raises this error for a candidate whose
    steps cannot (e.g. a user's own step), rather than ignore the ids. A
    ``ValueError`` (bad input for this estimator) and a
    ``NotImplementedError`` (not available yet).
    """


class NoiseDecisionWarning(UserWarning):
    """A decision from a noisy release that the noise did not allow.

    The base of skdp's warnings about what a private fit could or could not
    tell at its budget: a model check skipped because the
    public number of records (or units) is too small for its noise, a
    constraint whose verdict is undetermined, a search whose candidates are
    within their selection noise, an encoder that drops categories below its
    noise threshold, gradients clipped far beyond ``max_grad_norm``. Each
    has its own subclass; filter them all with this one, as scikit-learn's
    ``ConvergenceWarning``.

    Examples
    --------
    >>> import warnings
    >>> from skdp.exceptions import NoiseDecisionWarning
    >>> warnings.filterwarnings("ignore", category=NoiseDecisionWarning)
    >>> warnings.resetwarnings()
    """


class ModelCheckWarning(NoiseDecisionWarning):
    """A finding of the private check of a returned classifier.

    The model is (nearly) constant, its probabilities are worse than a
    constant predictor's, or the check could not judge it (too few records
    or units for its noise; the check is then skipped before spending).
    Turn the check off with ``model_check=False``.
    """


class ConstraintWarning(NoiseDecisionWarning):
    """A fairness constraint of a returned model is violated, undetermined,
    or was dropped.

    ``constraint_verdicts_`` holds, per constraint, ``"met"``,
    ``"violated"`` or ``"undetermined"`` at ``verdict_confidence``;
    ``constraints_met_`` is True only when every verdict is ``"met"``.
    """


class SelectionWarning(NoiseDecisionWarning):
    """A private search could not tell its best candidates apart.

    Its noisy scores are within the selection noise of each other, or every
    candidate dropped its fairness constraints; the search then chooses by
    its stated rule (the first candidate in the grid among those tied with
    the best).
    """


class CategoryWarning(NoiseDecisionWarning):
    """A private encoder dropped categories below its noise threshold.

    The threshold (``count_threshold_``) follows from epsilon, delta and the
    number of columns, all public; give the categories (``categories`` or
    ``candidate_categories``) or raise epsilon to keep them.
    """


class ClippingWarning(NoiseDecisionWarning):
    """Most per-sample gradients of the returned model are clipped far
    beyond ``max_grad_norm``, a sign of features on raw scales.

    From the private check of the returned model (``clipped_share_``).
    Scale the features, e.g. with :class:`~skdp.preprocessing.DPStandardScaler`.
    """
