"""The one-off releases of a fit outside its training steps, as objects.

Besides its training steps, a fit may release a few statistics of the whole
data once: the class counts of ``class_weight="balanced"`` and a
regressor's target scale before training, the score calibration and the
checks of the returned model after it (:mod:`skdp._fit.checks`). Each is a
:class:`FitRelease`: it says what it
releases (its name, sensitivity and share of the budget, planned into the
fit's :class:`~skdp.privacy.ReleasePlan` as an
:class:`~skdp.privacy.InitialRelease`), computes its exact statistics,
adds the noise the report gives it (:func:`release_counts`) and applies the
result. An estimator lists its releases (``_fit_releases``); turning one off
or adding one is a change to that list.
"""

import math

import numpy as np
import torch

from ..privacy import (
    InitialRelease,
    balanced_class_weights,
    current_communicator,
    gaussian_noise,
    gdp_mu,
)
from .calibration import MIN_POOLED_BINS, POOL_STDS, calibration_counts, fit_score_map
from .rows import row_blocks
from .units import unit_factors

__all__ = ["ClassCounts", "FitRelease", "ScoreCalibration", "TargetScale",
           "release_counts", "returned_model_pass", "target_histogram"]


def release_counts(counts, std, generator, device=None):
    """A one-off release of ``counts`` (a float64 ndarray): the counts plus
    N(0, std^2) noise drawn from ``generator`` on ``device``, or exact when
    ``std`` is None.

    In a data-parallel fit (:func:`~skdp.privacy.current_communicator`)
    ``counts`` are this rank's: they are summed over the ranks, the root
    draws the noise once, and every rank gets the same noisy counts.
    """
    noise = None
    if std is not None:
        def noise():
            zeros = torch.zeros(counts.size, dtype=torch.float64, device=device)
            return gaussian_noise(zeros, std, generator).cpu().numpy().reshape(counts.shape)
    return current_communicator().release(counts, noise)


class FitRelease:
    """A one-off release of a fit: what it releases, and how it is applied.

    Attributes
    ----------
    name : str
        The release's name in the plan and the privacy report.
    sensitivity : float
        l2 sensitivity of the released vector to one record (or unit).
    share : float
        Its share of the budget (GDP ``mu^2``).
    stage : {"before", "model", "check"}
        When it is applied: before training, by what it serves (the record
        weights, the targets); on the trained model, before the fitted
        attributes are stored (``"model"``: it changes the model); or on
        the returned model, last (``"check"``: it judges it). The fit
        sequence applies the last two (:meth:`apply`) in the estimator's
        order.
    """

    name = None
    sensitivity = 1.0
    share = 0.0
    stage = "before"
    #: Whether it reads the training rows' squared norms (given by the pass
    #: over the rows after training, :func:`returned_model_pass`).
    reads_row_norms = False

    def applies(self, estimator):
        """Whether ``estimator``'s settings (public) ask for this release."""
        return True

    def planned_std(self, estimator):
        """The noise standard deviation a private fit of ``estimator`` gives
        this release, from public settings only: a one-off release with
        budget share ``s`` of a fit at ``(epsilon, delta)`` gets the
        Gaussian noise of ``sqrt(s) * mu`` GDP, ``mu`` that of the budget
        (:class:`~skdp.privacy.ReleasePlan`)."""
        mu = gdp_mu(estimator.epsilon, estimator.delta)
        return self.sensitivity / (math.sqrt(self.share) * mu)

    def cannot_decide(self, estimator, n_public, state):
        """Why the release could tell nothing at this budget, or None.

        Decided before anything is spent, from public quantities only: the
        number of training records (or units) ``n_public``, the classes and
        groups (``state`` holds what the fit validated) and the planned
        noise (:meth:`planned_std`). A release that
        cannot decide is left out of the plan (its share goes to training)
        and the fit warns with the returned message. Default: None (always
        planned).
        """
        return None

    #: The warning category of :meth:`cannot_decide`'s message, or None to
    #: only print it with ``verbose`` (a release whose skipping is its
    #: documented default behaviour).
    warning = UserWarning

    def initial_release(self, estimator):
        """The :class:`~skdp.privacy.InitialRelease` to plan, or None when the
        fit does not release it (it does not apply, or the fit is not
        private: it is then computed exactly)."""
        if estimator.epsilon is None or not self.applies(estimator):
            return None
        return InitialRelease(self.name, sensitivity=self.sensitivity, budget_share=self.share)

    def planned(self, report):
        """Whether ``report`` (a private fit's) has noise for this release."""
        return report is not None and report.private and self.name in report.noise

    def noise_std(self, report):
        """The noise standard deviation the report gives this release, or
        None when the fit is not private (the statistics are then exact).
        A private fit that did not plan it is an error: its statistics would
        leave the fit without noise."""
        if report is None or not report.private:
            return None
        if self.name not in report.noise:
            raise RuntimeError(
                f"The release {self.name!r} was not planned in this private fit; its "
                "statistics cannot be released (add it to the estimator's _fit_releases).")
        return report.scale(self.name)


# ------------------------------------------------------------ class counts
class ClassCounts(FitRelease):
    """The class counts of ``class_weight="balanced"``, released once before
    training: a record adds 1 to one count (l2 sensitivity 1); the weights
    ``n / (n_classes * count_c)`` follow from the noisy counts
    (:func:`~skdp.privacy.balanced_class_weights`: floored at one record,
    within a factor 100 of the largest)."""

    name = "class_counts"
    share = 0.02

    def applies(self, estimator):
        return is_balanced(getattr(estimator, "class_weight", None))

    def weights(self, state, n_classes, report, generator):
        """The balanced class weights from the noisy counts (exact without
        privacy); with units a record adds its unit factor."""
        counts = np.bincount(state.y_codes, weights=unit_factors(state),
                             minlength=n_classes).astype(np.float64)
        return balanced_class_weights(release_counts(counts, self.noise_std(report), generator))


def is_balanced(class_weight):
    """Whether ``class_weight`` is ``"balanced"``."""
    return isinstance(class_weight, str) and class_weight == "balanced"


# ---------------------------------------------------------- target scale
#: Exponents k of the log2 bins ``[2**(k-1), 2**k)`` of |y| in the private
#: target-scale histogram; values below (above) fall in the first (last) bin.
SCALE_EXPONENTS = np.arange(-20, 41)


def target_histogram(y, weights=None):
    """Counts of ``|y|`` in the bins of :data:`SCALE_EXPONENTS` (a record
    adds its weight, 1 without ``weights``, to one bin)."""
    magnitude = np.abs(y)
    with np.errstate(divide="ignore"):
        exponents = np.ceil(np.log2(np.where(magnitude > 0, magnitude, np.inf)))
    exponents = np.where(magnitude > 0, exponents, SCALE_EXPONENTS[0])
    # values exactly at a power of two belong to the bin they top
    bins = np.clip(exponents, SCALE_EXPONENTS[0], SCALE_EXPONENTS[-1]) - SCALE_EXPONENTS[0]
    return np.bincount(bins.astype(int), weights=weights,
                       minlength=len(SCALE_EXPONENTS)).astype(float)


class TargetScale(FitRelease):
    """A regressor's private target scale, released once before training
    (without public ``y_bounds``): a histogram of ``log2 |y|`` bins, one
    record adding 1 to one bin (l2 sensitivity 1). The scale is the power of
    two that tops the largest bin whose noisy count exceeds 4 noise standard
    deviations."""

    name = "target_scale"
    share = 0.04
    #: A bin counts when its noisy count exceeds this many noise stds.
    threshold_stds = 4.0

    def applies(self, estimator):
        return estimator.y_bounds is None

    def scale(self, y, report, generator, device=None, weights=None):
        """``(scale, decided)``: the power of two of the noisy histogram of
        ``y`` (``weights``: each record's histogram weight, e.g. its unit
        factor), and whether a bin stood out from the noise (else the scale
        of the largest noisy bin)."""
        std = self.noise_std(report)
        threshold = 0.0 if std is None else self.threshold_stds * std
        counts = release_counts(target_histogram(y, weights), std, generator, device)
        above = np.flatnonzero(counts > threshold)
        if above.size:
            return float(2.0 ** SCALE_EXPONENTS[above[-1]]), True
        return float(2.0 ** SCALE_EXPONENTS[int(np.argmax(counts))]), False


# ------------------------------------------------------- score calibration
class ScoreCalibration(FitRelease):
    """Platt calibration of a binary model's scores after training
    (:mod:`skdp._fit.calibration`): one Gaussian release of the counts of
    (score bin, true class), a record adding 1 to one count (l2 sensitivity
    1), and a map ``scale * s + shift`` fitted to them (post-processing).

    Parameters
    ----------
    temperature_only : bool, default=False
        Fit only the scale (``shift=0``, ``scale>0``), which keeps every
        prediction: the fairness estimators use it, so that the rates their
        constraints bound are those of the calibrated model.
    min_records_per_std : float, default=0.0
        Make the release only with at least this many standard deviations
        of its noise of training records (or units) -- besides the fewest
        that can fill the pools at all (:meth:`min_pooled_records`). An
        estimator whose trained probabilities are close to calibrated sets
        it: below it, the release's share of the budget costs training more
        than the map gains.
    """

    name = "score_calibration"
    share = 0.1
    stage = "model"
    # calibration="auto" calibrates as far as the budget allows: skipping
    # is its documented behaviour, said with verbose
    warning = None
    @staticmethod
    def min_pooled_records(std):
        """Fewest records that can fill :data:`~skdp._fit.calibration.MIN_POOLED_BINS`
        pools of the noisy counts (of noise ``std``): below, the map is the
        identity whatever the counts, and the release is not made."""
        return int(math.ceil(MIN_POOLED_BINS * POOL_STDS * std))

    def __init__(self, temperature_only=False, min_records_per_std=0.0):
        self.temperature_only = temperature_only
        self.min_records_per_std = min_records_per_std

    def applies(self, estimator):
        return estimator.calibration is not None and len(estimator.classes_) == 2

    def min_records(self, estimator):
        """The public number of records (or units) below which the
        calibration is not made at ``estimator``'s budget."""
        std = self.planned_std(estimator)
        return max(self.min_pooled_records(std),
                   int(math.ceil(self.min_records_per_std * std)))

    def cannot_decide(self, estimator, n_public, state):
        needed = self.min_records(estimator)
        if n_public >= needed:
            return None
        return (
            f"[{type(estimator).__name__}] score calibration skipped: at "
            f"epsilon={estimator.epsilon:g}, delta={estimator.delta:g} its noise would outweigh "
            f"what it can correct with fewer than {needed} training records (or units); its "
            "share of the budget went to training"
        )

    def apply(self, estimator, X, state, report, generator):
        """Map the trained model's scores ``s`` to ``scale * s + shift``,
        fitted on the noisy counts of the training records (with record
        weights, of the weighted problem the model was trained on); linear
        models take the map into ``coef_`` and ``intercept_``. Sets
        ``score_calibration_``, the ``(scale, shift)`` applied, or None when
        the fit did not release the counts."""
        estimator.score_calibration_ = None
        estimator._module_score_map = None
        if not self.planned(report):  # not private, or not asked for: no map
            return
        std = self.noise_std(report)
        # the releases after it read the returned model's scores (and the
        # rows' norms) from this pass: one pass over the rows after training
        scores, norms = returned_model_pass(estimator, X, state, report)
        weights = state.record_weights
        if weights is not None:
            weights = weights.detach().cpu().numpy()
        counts = sum(calibration_counts(scores[rows], state.y_codes[rows],
                                        None if weights is None else weights[rows])
                     for rows in row_blocks(len(scores)))
        counts = release_counts(counts, std, generator)
        scale, shift = fit_score_map(counts, std, temperature_only=self.temperature_only)
        if estimator.module_state_ is None:
            estimator.coef_ = scale * estimator.coef_
            estimator.intercept_ = scale * estimator.intercept_ + shift
        else:
            estimator._module_score_map = (scale, shift)
        estimator.score_calibration_ = (scale, shift)
        # the calibrated model's scores: those of a module model exactly (its
        # map is applied so), a linear model's to float64 rounding (its map
        # is folded into coef_ and intercept_)
        with np.errstate(invalid="ignore", over="ignore"):
            # in place: the pass's scores are this release's own
            scores *= scale
            scores += shift
        state.returned_scores = scores
        state.returned_row_sq_norms = norms


def returned_model_pass(estimator, X, state, report):
    """The returned model's scores on the training rows, ``(scores,
    row_sq_norms)``: one pass over the rows. The rows' squared norms are
    those training computed (``state.returned_row_sq_norms``), else, when a
    release of the fit reads them (:attr:`FitRelease.reads_row_norms`; a
    linear model's), from the pass's float64 blocks, else None."""
    norms = state.returned_row_sq_norms  # training's, when it computed them
    filled = None  # the norms the pass computes, when training did not
    if norms is None and estimator.module_state_ is None and any(
            release.reads_row_norms and release.applies(estimator)
            and (not report.private or release.planned(report))
            for release in estimator._fit_releases):
        norms = filled = np.empty(X.shape[0], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        scores = estimator._decision(X, row_norms=filled)
    return scores, norms
