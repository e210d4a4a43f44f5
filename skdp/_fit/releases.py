"""The one-off releases of a fit outside its training steps, as objects.

Besides its training steps, a fit may release a few statistics of the whole
data once: the class counts of ``class_weight="balanced"`` and a
regressor's target scale before training, the score calibration and the
model check after it. Each is a :class:`FitRelease`: it says what it
releases (its name, sensitivity and share of the budget, planned into the
fit's :class:`~skdp.privacy.ReleasePlan` as an
:class:`~skdp.privacy.InitialRelease`), computes its exact statistics,
adds the noise the report gives it (:func:`release_counts`) and applies the
result. An estimator lists its releases (``_fit_releases``); turning one off
or adding one is a change to that list.
"""

import math
import warnings

import numpy as np
import torch
from scipy import special

from ..exceptions import ClippingWarning, ModelCheckWarning
from ..models import CHECK_LOSS_BOUND, CHECK_SHARE, check_terms
from ..privacy import (
    InitialRelease,
    balanced_class_weights,
    current_communicator,
    gaussian_noise,
    gdp_mu,
    verdict_margin,
)
from .calibration import MIN_POOLED_BINS, POOL_STDS, calibration_counts, fit_score_map
from .rows import row_blocks, row_sq_norms
from .units import unit_factors

__all__ = ["ClassCounts", "ClippedShare", "FitRelease", "ModelCheck", "ScoreCalibration",
           "TargetScale",
           "release_counts", "target_histogram"]


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
        norms = _norms_for_clipped_share(estimator, report, len(state.y_codes))
        with np.errstate(invalid="ignore", over="ignore"):
            scores = estimator._decision(X, row_norms=norms)
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
            state.returned_scores = scale * scores + shift
        state.returned_row_sq_norms = norms


def _norms_for_clipped_share(estimator, report, n_rows):
    """An empty float64 array for the rows' squared norms when the
    estimator's :class:`ClippedShare` will be released (a linear model's),
    for the scoring pass to fill; else None."""
    clipped = estimator._fit_release(ClippedShare)
    if (clipped is not None and clipped.applies(estimator)
            and estimator.module_state_ is None
            and (not report.private or clipped.planned(report))):
        return np.empty(n_rows, dtype=np.float64)
    return None


# ------------------------------------------------------------- model check
class ModelCheck(FitRelease):
    """The private check of a returned classifier, released once after
    training: the counts of (group, true class, predicted class) and the sum
    of the per-record log-losses clipped to :attr:`loss_bound` and divided
    by it. A record adds 1 to one count and at most 1 to the sum: l2
    sensitivity sqrt(2).

    From the noisy vector (post-processing): ``prediction_counts_``,
    ``prediction_shares_``, ``check_log_loss_`` and
    ``check_constant_log_loss_``, and warnings when the model is (nearly)
    constant or its probabilities are worse than a constant predictor's --
    each only when the noisy figure is beyond the threshold by one noise
    standard deviation, and only when the noisy total is at least
    :attr:`min_signal` of its standard deviations (else the check says that
    it cannot judge the model).

    Parameters
    ----------
    skip_undecidable : bool, default=True
        Leave the check out of the plan when its noise cannot tell a
        constant classifier from a useful one (:meth:`cannot_decide`).
        False for an estimator whose constraint verdicts come from the same
        counts (they can be decided, or reported undetermined, where the
        constant-classifier check cannot).
    """

    name = "model_check"
    sensitivity = math.sqrt(2.0)
    share = CHECK_SHARE
    stage = "check"
    warning = ModelCheckWarning
    #: Per-record log-loss bound.
    loss_bound = CHECK_LOSS_BOUND
    #: The check judges only when its noisy total count is at least this many
    #: of its standard deviations.
    min_signal = 4.0
    #: A classifier whose other predictions are below this share of the
    #: records (by one standard deviation of the noise) is (nearly) constant.
    constant_minority = 0.02

    def __init__(self, skip_undecidable=True):
        self.skip_undecidable = skip_undecidable

    def applies(self, estimator):
        return bool(estimator.model_check)

    @staticmethod
    def n_groups(estimator, state):
        """Number of groups the check counts apart (public)."""
        if estimator.groups_ is None or state.group_codes is None:
            return 1
        return len(estimator.groups_)

    @staticmethod
    def n_cells(n_groups, n_classes):
        """Number of counts of the check: (group, true class, predicted class)."""
        return n_groups * n_classes * n_classes

    def min_records(self, estimator, n_groups):
        """The public number of records (or units) below which the check
        is skipped: its noisy count of the other predictions than the most
        frequent one must be able to tell :attr:`constant_minority` of the
        records from none (one noise standard deviation at most that share
        of the records)."""
        n_classes = len(estimator.classes_)
        others_std = self.planned_std(estimator) * math.sqrt(
            n_groups * n_classes * (n_classes - 1))
        return int(math.ceil(others_std / self.constant_minority))

    def cannot_decide(self, estimator, n_public, state):
        if not self.skip_undecidable:
            return None
        needed = self.min_records(estimator, self.n_groups(estimator, state))
        if n_public >= needed:
            return None
        return (
            f"{type(estimator).__name__}: the private check of the returned model was skipped: "
            f"at epsilon={estimator.epsilon:g}, delta={estimator.delta:g} its noise cannot tell "
            f"a constant classifier from a useful one with fewer than {needed} training records "
            "(or units); nothing was spent on it and the model was not judged. Judge it on "
            "held-out data, give more data or raise epsilon (model_check=False skips the check "
            "without this warning)."
        )

    @staticmethod
    def clear(estimator):
        """The fitted attributes of a check that was not made: None."""
        estimator.prediction_counts_ = None
        estimator.prediction_shares_ = None
        estimator.check_log_loss_ = None
        estimator.check_constant_log_loss_ = None
        estimator.check_noise_std_ = None

    def apply(self, estimator, X, state, report, generator):
        """Check the returned model on the training records ``X``: sets
        ``prediction_counts_`` and ``check_noise_std_`` and judges them
        (``estimator._judge_model``, by default :meth:`judge`). The
        statistics are :func:`~skdp.models.check_sums` of the model's logits,
        a block of rows at a time, as DP-FERMI's silos compute them. Nothing
        without class codes."""
        y_codes = state.y_codes
        if y_codes is None:
            return
        if not self.applies(estimator) or (report.private and not self.planned(report)):
            self.clear(estimator)
            estimator._judge_model(None, None)
            return
        n_classes = len(estimator.classes_)
        group_codes = state.group_codes
        n_groups = self.n_groups(estimator, state)
        scores = state.returned_scores  # the score calibration's pass, when it ran
        if scores is None:
            # the clipped share after it needs the rows' norms: the same pass
            norms = _norms_for_clipped_share(estimator, report, len(y_codes))
            with np.errstate(invalid="ignore", over="ignore"):
                scores = estimator._decision(X, row_norms=norms)
            state.returned_scores = scores  # for the releases after it: one pass
            state.returned_row_sq_norms = norms
        # with units, a record adds its unit factor: a unit adds at most 1
        factors = unit_factors(state)
        counts = torch.zeros(n_groups * n_classes * n_classes, dtype=torch.float64)
        losses = torch.empty(len(y_codes), dtype=torch.float64)
        # a block of rows at a time: the per-record temporaries cost one
        # block of memory, not several copies of the scores; the losses are
        # summed whole, so the blocks do not change the sum
        for rows in row_blocks(len(y_codes)):
            block = torch.as_tensor(scores[rows], dtype=torch.float64)
            if block.dim() == 1:  # a binary model's score: the logits (0, s)
                block = torch.stack([torch.zeros_like(block), block], dim=1)
            groups = (torch.zeros(block.shape[0], dtype=torch.int64) if n_groups == 1
                      else torch.as_tensor(group_codes[rows], dtype=torch.int64))
            weights = None if factors is None else torch.as_tensor(factors[rows])
            block_counts, losses[rows] = check_terms(
                block, torch.as_tensor(y_codes[rows], dtype=torch.int64), groups, n_groups,
                weights)
            counts += block_counts
        std = self.noise_std(report)
        values = torch.cat([counts, (losses.sum() / self.loss_bound)[None]])
        values = release_counts(values.numpy(), std, generator)
        estimator.prediction_counts_ = values[:-1].reshape(n_groups, n_classes, n_classes)
        estimator.check_noise_std_ = std
        estimator._judge_model(values[-1] * self.loss_bound, std)

    def judge(self, estimator, counts, loss_sum, std):
        """Fitted summaries and warnings from the noisy check of ``estimator``
        (post-processing): ``counts`` of shape (n_groups, n_classes,
        n_classes), the noisy sum of clipped log-losses (in loss units), and
        the noise std of each value (None: exact)."""
        if counts is None:  # no check was made
            return
        name = type(estimator).__name__
        n_groups, n_classes, _ = counts.shape
        n = max(float(counts.sum()), 1.0)
        total_std = 0.0 if std is None else std * math.sqrt(counts.size)
        predicted = counts.sum((0, 1))
        true = counts.sum((0, 2))
        estimator.prediction_shares_ = np.clip(predicted, 0.0, None) / max(
            float(np.clip(predicted, 0.0, None).sum()), 1.0)
        true_shares = np.clip(true / n, 1e-12, 1.0)
        true_shares = true_shares / true_shares.sum()
        estimator.check_log_loss_ = float(loss_sum) / n
        estimator.check_constant_log_loss_ = float(-(true_shares * np.log(true_shares)).sum())
        top = int(np.argmax(predicted))
        others = n - predicted[top]
        # one standard deviation of the noisy count of the other predictions
        others_std = 0.0 if std is None else std * math.sqrt(
            n_groups * n_classes * (n_classes - 1))
        label = estimator.classes_[top]
        label = label.item() if isinstance(label, np.generic) else label
        if n < self.min_signal * total_std:
            warnings.warn(
                f"{name}: the private check of the returned model cannot "
                "judge it: there are too few records (or units) for the noise of its "
                f"counts at this budget (noisy total {n:.0f}, noise {total_std:.0f}), so "
                "the model may be little better than noise too. Give more data or raise "
                "epsilon.",
                ModelCheckWarning,
            )
            return
        if others + others_std < self.constant_minority * n:
            warnings.warn(
                f"{name} predicts class {label!r} for about "
                f"{100 * estimator.prediction_shares_[top]:.1f}% of the training records "
                "(private check of the returned model, prediction_shares_): it is (nearly) "
                "a constant classifier. Common causes: features on raw scales (amounts in "
                "the thousands or millions make every clipped gradient tiny; scale them, "
                "e.g. with skdp.preprocessing.DPStandardScaler and public bounds), too few "
                "steps or too much noise (raise epsilon or max_epochs), or constraints "
                "that only a constant model meets.",
                ModelCheckWarning,
            )
        loss_error = 0.0 if std is None else std * self.loss_bound / n
        # class weights shift the probabilities towards the smaller classes
        # by design: no warning for the shift they ask for
        if (estimator.class_weight is None
                and estimator.check_log_loss_ - loss_error > estimator.check_constant_log_loss_):
            warnings.warn(
                f"{name}'s predicted probabilities are worse than a constant "
                f"predictor's on the training records: mean log-loss about "
                f"{estimator.check_log_loss_:.3f} against "
                f"{estimator.check_constant_log_loss_:.3f} for predicting the class shares "
                "(private check of the returned model, check_log_loss_). Scale the features, "
                "raise epsilon or max_epochs, or do not use predict_proba as probabilities.",
                ModelCheckWarning,
            )


# ----------------------------------------------------------- clipped share
class ClippedShare(FitRelease):
    """The share of training records whose per-sample gradient at the
    returned model is clipped far beyond ``max_grad_norm``, released once
    after training with the model check (``model_check=True``; linear
    models): a record adds at most 1 to the count (its unit factor with
    units), l2 sensitivity 1.

    Features on raw scales (amounts in the thousands, ages in days) make
    every gradient huge, so that clipping flattens them all to the same
    length and the model learns slowly or not at all -- often without
    collapsing to a constant. A linear model's per-sample gradient of the
    log-loss is ``(p - e_y) x~`` with ``x~ = (x, 1)``, of norm
    ``||p - e_y|| ||x~||``; the release counts the records where it exceeds
    :attr:`factor` times ``max_grad_norm`` and sets ``clipped_share_``
    (noisy count over the public number of records or units) and
    ``clipped_share_std_``. When the share is above :attr:`warn_share` by
    more than the noise allows (one-sided 95 %), a
    :class:`~skdp.exceptions.ClippingWarning` says so.
    """

    name = "clipped_share"
    share = 0.01
    stage = "check"
    warning = None  # part of the model check: its own skip warns
    #: A gradient counts when its norm exceeds this many ``max_grad_norm``.
    factor = 3.0
    #: Warn when more than this share of the records are so clipped: on
    #: synthetic tables with one raw column (std 10 to 50) the share was 0.05
    #: to 0.37 and 0 once standardised, on standardised Adult 0.
    warn_share = 0.1
    #: Planned only when the share's noise std is at most this (a share).
    max_share_std = 0.05

    def applies(self, estimator):
        return bool(estimator.model_check) and estimator._linear_by_settings()

    def cannot_decide(self, estimator, n_public, state):
        # made with the model check only: when that is skipped, so is this
        needed = max(int(math.ceil(self.planned_std(estimator) / self.max_share_std)),
                     ModelCheck().min_records(estimator, ModelCheck.n_groups(estimator, state)))
        if n_public >= needed:
            return None
        return (f"[{type(estimator).__name__}] clipped-gradient check skipped: its noise is "
                f"too large for fewer than {needed} training records (or units)")

    @staticmethod
    def _output_sq_norms(scores, y_codes):
        """``||p - e_y||^2`` of each record: the squared norm of its
        log-loss gradient with respect to the logits."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim == 1:
            # a binary score s is the logits (0, s): p - e_y = (-r, r) with
            # r = p_1 - y, and |r| = expit(s) for y = 0, expit(-s) for y = 1
            return 2.0 * special.expit(np.where(y_codes == 1, -scores, scores)) ** 2
        logits = scores - scores.max(1, keepdims=True)
        proba = np.exp(logits)
        proba /= proba.sum(1, keepdims=True)
        proba[np.arange(len(y_codes)), y_codes] -= 1.0
        return (proba**2).sum(1)

    def apply(self, estimator, X, state, report, generator):
        """Count, release and judge the records whose gradient is clipped
        more than :attr:`factor`-fold; ``clipped_share_`` and
        ``clipped_share_std_`` are None when the fit did not release it."""
        estimator.clipped_share_ = estimator.clipped_share_std_ = None
        y_codes = state.y_codes
        if y_codes is None or not self.applies(estimator) or (
                report.private and not self.planned(report)):
            return
        scores = state.returned_scores  # the model check's pass, when it ran
        with np.errstate(invalid="ignore", over="ignore"):
            if scores is None:
                scores = estimator._decision(X)
            sq_norms = state.returned_row_sq_norms
            if sq_norms is None:
                sq_norms = row_sq_norms(X)
            norms = np.sqrt(self._output_sq_norms(scores, y_codes) * (sq_norms + 1.0))
        clipped = (norms > self.factor * estimator.max_grad_norm).astype(np.float64)
        factors = unit_factors(state)
        if factors is not None:
            clipped = clipped * factors
        std = self.noise_std(report)
        count = release_counts(np.array([clipped.sum()]), std, generator)[0]
        n_public = state.n_units if state.units is not None else current_communicator().total(
            len(y_codes))
        share = float(np.clip(count / max(n_public, 1), 0.0, 1.0))
        share_std = 0.0 if std is None else std / max(n_public, 1)
        estimator.clipped_share_ = share
        estimator.clipped_share_std_ = share_std
        if share - verdict_margin(0.95) * share_std > self.warn_share:
            warnings.warn(
                f"{type(estimator).__name__}: about {100 * share:.0f}% of the training records "
                f"have a gradient at the returned model more than {self.factor:g} times "
                f"max_grad_norm={estimator.max_grad_norm:g} (private check, clipped_share_): "
                "clipping flattens them, and the model learns slowly or not at all. Features "
                "on raw scales (amounts, ages in days, blood pressures) are the usual cause: "
                "scale them, e.g. with skdp.preprocessing.DPStandardScaler and public bounds; "
                "with many standardised features, raise max_grad_norm.",
                ClippingWarning,
            )
