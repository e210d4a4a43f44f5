"""The releases that judge the returned model, after training: the model
check and the share of clipped gradients (:class:`~skdp._fit.releases.FitRelease`
objects, listed by the estimators as the others are).

Both read the returned model's scores on the training rows from one pass
(:func:`~skdp._fit.releases.returned_model_pass`), made by the score
calibration before them when it runs.
"""

import math
import warnings

import numpy as np
import torch
from scipy import special

from ..exceptions import ClippingWarning, ModelCheckWarning
from ..models import CHECK_LOSS_BOUND, CHECK_SHARE, check_terms
from ..privacy import current_communicator, verdict_margin
from .releases import FitRelease, release_counts, returned_model_pass
from .rows import row_blocks, row_sq_norms
from .units import unit_factors

__all__ = ["ClippedShare", "ModelCheck"]


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
        if scores is None:  # the pass, for the releases after it too
            scores, state.returned_row_sq_norms = returned_model_pass(
                estimator, X, state, report)
            state.returned_scores = scores
        # with units, a record adds its unit factor: a unit adds at most 1
        factors = unit_factors(state)
        counts = torch.zeros(n_groups * n_classes * n_classes, dtype=torch.float64)
        losses = torch.empty(len(y_codes), dtype=torch.float64)
        # a block of rows at a time: the per-record temporaries cost one
        # block of memory, not several copies of the scores; the losses are
        # summed whole, so the blocks do not change the sum
        for rows in row_blocks(len(y_codes)):
            block = torch.as_tensor(scores[rows], dtype=torch.float64)
            if block.dim() == 1:  # a binary model's score: the logits (0, s),
                # stored class-major (as check_terms reads two classes)
                block = torch.stack([torch.zeros_like(block), block]).T
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
    reads_row_norms = True
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
            # in place on one copy: 10M scores 0.29 -> 0.2 s, the same values
            r = np.negative(scores, where=np.asarray(y_codes) == 1, out=scores.copy())
            special.expit(r, out=r)
            np.multiply(r, r, out=r)
            return np.multiply(r, 2.0, out=r)
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
            bound = self.factor * estimator.max_grad_norm
            # a block of rows at a time, in the CPU's caches (the same values)
            clipped = [np.sqrt(self._output_sq_norms(scores[rows], y_codes[rows])
                               * (sq_norms[rows] + 1.0)) > bound
                       for rows in row_blocks(len(y_codes))]
        factors = unit_factors(state)
        if factors is None:  # a sum of zeros and ones: the number of ones
            total = float(sum(np.count_nonzero(block) for block in clipped))
        else:
            total = (np.concatenate(clipped) * factors).sum()
        std = self.noise_std(report)
        count = release_counts(np.array([total]), std, generator)[0]
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
