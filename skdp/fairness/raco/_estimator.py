"""DPRateConstrainedClassifier: RaCO-DP behind a scikit-learn interface."""

import math
import warnings
from dataclasses import dataclass
from numbers import Real
from typing import Any, Optional

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import softmax
from sklearn.utils.validation import check_is_fitted

from ..._fit.classifier import BaseDPClassifier
from ..._fit.options import BASE_SOLVER_OPTIONS, SolverOption, document_solver_options
from ..._fit.columns import split_sensitive_columns
from ..._fit.checks import ClippedShare, ModelCheck
from ..._fit.releases import ClassCounts, ScoreCalibration
from ..._fit.state import FitState
from ..._fit.units import MAX_RECORDS_PER_UNIT, UNIT_CONSTRAINTS
from ..._groups import encode_groups
from ...models import one_hot, top_class
from ...exceptions import ClippingWarning, ConstraintWarning
from ...privacy import (
    MET,
    UNDETERMINED,
    VIOLATED,
    BatchReleases,
    InitialRelease,
    PrivacyBudgetError,
    Release,
    ReleasePlan,
    current_communicator,
    gaussian_noise,
    verdict_margin,
)
from .._compiled import CompiledConstraints, make_constraints
from .._rates import evaluate_constraints, evaluate_hard_constraints
from .._verdicts import check_constraints
from ._trainer import RacoConfig, RacoNoise, train_raco

#: Share of the per-step privacy (in GDP mu^2 terms) given to the clipped-
#: record count when the noise is calibrated.
_COUNT_SHARE = 0.01

#: Share of the whole budget (in GDP mu^2 terms) given to the one-off noisy
#: cell sizes of ``denominator="expected"``.
_EXPECTED_SIZES_SHARE = 0.02

#: Number of checkpoints kept for ``return_iterate="best_checkpoint"``.
_N_CHECKPOINTS = 20

#: With ``small_group_threshold=None``, local sets below this ratio of
#: expected count per batch to histogram noise are named in a warning.
_SMALL_SET_RATIO = 3.0

#: Largest noisy share of one predicted class before the fit is flagged as
#: a (nearly) constant classifier.
_CONSTANT_SHARE = 0.99


def _set_noise_ratio(compiled, sizes, noise):
    """Expected count per batch of each local set over the standard deviation
    of the histogram noise on its summed counts (public noise; noisy sizes).

    A local set of ``c`` cells sums ``c`` noisy counts per class, so its
    noise has std ``histogram_std * sqrt(c)``; the per-step standard error
    of its rate estimates (expected denominators) is the inverse ratio.
    """
    n_cells = np.maximum(np.asarray(compiled.membership).sum(1), 1.0)
    return np.asarray(sizes) / (noise.histogram_std * np.sqrt(n_cells))


def _select_constraints(compiled, keep):
    """``compiled`` restricted to the constraints where ``keep`` is True
    (same cells and local sets, so histograms and sizes are unchanged)."""
    keep = np.asarray(keep, dtype=bool)

    def frozen(arr):
        arr = np.ascontiguousarray(arr)
        arr.setflags(write=False)
        return arr

    return CompiledConstraints(
        atom_cell=compiled.atom_cell,
        membership=compiled.membership,
        coefficients=frozen(np.asarray(compiled.coefficients)[keep]),
        tolerance=frozen(np.asarray(compiled.tolerance)[keep]),
        names=tuple(n for n, k in zip(compiled.names, keep) if k),
        local_sets=compiled.local_sets,
        local_set_names=compiled.local_set_names,
    )


@dataclass
class RacoFitState(FitState):
    """A RaCO-DP fit's state: the base's, and what its hooks pass on.

    Attributes
    ----------
    X_t : TrainingRows or None
        The training rows (for the checkpoint choice after training).
    cells_t : tensor of int or None
        Each record's cell (true class and group) of the constraints.
    noise : RacoNoise or None
        The noise scales of the step's three releases.
    sizes : tensor or None
        Expected per-batch sizes of the local sets (released once), or None.
    checkpoint_step : int or None
        The step of the checkpoint chosen after training, or None.
    """

    X_t: Any = None
    cells_t: Any = None
    noise: Any = None
    sizes: Any = None
    checkpoint_step: Optional[int] = None


@document_solver_options
class DPRateConstrainedClassifier(BaseDPClassifier):
    """Classifier trained under (epsilon, delta)-DP subject to rate constraints.

    Implements RaCO-DP (Yaghini, Cebere, Menart, Bellet & Papernot): private
    stochastic gradient descent-ascent on the Lagrangian of *generalized rate
    constraints* -- linear combinations of the rates at which the model
    predicts each class on groups of records defined by the sensitive
    attribute and the label (demographic parity, equalized odds, equal
    opportunity, false negative/positive rates, or any custom
    :class:`~skdp.fairness.RateConstraint`).

    Each step releases, on one Poisson batch, a noisy histogram of predictions
    per cell (from which the multipliers' ascent step and the per-cell weights
    of the constraint term are computed by post-processing), a noisy clipped
    sum of per-record gradients of the Lagrangian, and a noisy count of the
    clipped records. The three releases are accounted as one mechanism: with
    Gaussian histogram noise they form one Gaussian mechanism of noise
    multiplier ``(sigma_g^-2 + sigma_h^-2 + sigma_c^-2)^(-1/2)``; with Laplace
    histogram noise the Laplace release is converted to Gaussian DP (see
    :func:`skdp.privacy.joint_noise_multiplier`), never composed as a
    separately subsampled event.

    The unit of privacy is one whole record: features, label and sensitive
    attribute.

    Parameters
    ----------
    constraint : str, constraint object or list, default="demographic_parity"
        ``"demographic_parity"``, ``"equalized_odds"``, ``"equal_opportunity"``,
        ``"false_negative_rate"``, ``"false_positive_rate"``, a builder such
        as :class:`~skdp.fairness.DemographicParity`, a
        :class:`~skdp.fairness.RateConstraint`, or a list of them.
    tolerance : float or array-like, default=0.05
        Slack gamma of string constraints: scalar, or one value per expanded
        constraint.
    epsilon : float or None, default=1.0
        Privacy budget; ``None`` trains non-privately (SGDA without noise;
        gradients are still clipped unless ``max_grad_norm=np.inf``), for
        reference. The guarantee is about one record (add or remove one
        row), or, with ``fit(unit_ids=...)``, about one unit -- all records
        of a person -- with at most ``max_records_per_unit`` of them used
        (see :ref:`units`).
    delta : float, default=1e-5
    max_grad_norm : float, default=10.0
        Clipping bound C of each record's whole gradient (loss and constraint
        parts together). Larger than DP-SGD's usual 1 on purpose: when most
        per-record gradients are clipped, raising a multiplier cannot
        strengthen the constraint's pull and the constraint stalls (the
        clipping bias of the RaCO-DP paper, §5.7).
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size. ``"auto"`` uses
        ``min(n_samples // 4, max(64, round(6 * sqrt(n_samples))))``: about
        1000 for 30,000 records.
    max_epochs : float, default=10
        Training length in expected passes over the data.
    max_steps : int or None, default=None
        Overrides ``max_epochs``.
    learning_rate : float, default=0.2
        Primal step size (on the noisy mean gradient).
    dual_learning_rate : float, default=0.3
        Step size of the multipliers' projected ascent.
    hidden_layer_sizes : tuple of int, default=()
        Empty: multinomial logistic regression (closed-form per-sample path).
    module : callable or None, default=None
        ``module(n_features, n_classes) -> torch.nn.Module`` (no BatchNorm).
    sensitive_columns : str, int or list, default=None
        Columns of X holding the sensitive attribute, used as
        ``sensitive_features`` when none are passed to ``fit`` and removed from
        the model inputs (also at prediction time). This is the way to use the
        estimator in ``Pipeline``/``GridSearchCV`` without metadata routing.
    sensitive_groups : array-like or None, default=None
        The public list of sensitive groups (tuples when several columns form
        the groups), like ``OneHotEncoder(categories=...)``. When given,
        ``groups_`` is this list -- so it reveals nothing about which groups
        occur in the data -- group codes (used by custom constraints) follow
        its order in every fit and CV fold, and groups outside it are an
        error. When None, the groups are those seen in ``fit`` and
        ``groups_`` is treated as public.
    class_weight : dict, "balanced" or None, default=None
        Class weights, multiplied with ``sample_weight``. Only their ratios
        matter: they are divided by the largest, so the most heavily weighted
        class keeps the full per-record bound ``max_sample_weight``
        (``class_weight_`` holds the result). A dict (label -> weight; a class
        it leaves out gets 1) is public and costs nothing. ``"balanced"``
        weighs class c by ``n_samples / (n_classes * count_c)`` with the
        counts from one Gaussian release (2 % of the budget, in GDP ``mu^2``,
        accounted in ``dp_event_`` as ``"class_counts"``); noisy counts are
        floored at 1 and every weight is kept within a factor 100 of the
        largest.
    max_sample_weight : float, default=1.0
        Public bound on the weights of ``fit(sample_weight=...)``; larger
        weights are clipped to it (with a warning). Each record's clipped
        gradient -- and every other clipped per-record term of the algorithm
        -- is multiplied by ``w_i / max_sample_weight``, in [0, 1], *after*
        clipping, so one record still moves every released sum by at most its
        sensitivity: the noise, ``epsilon_`` and ``dp_event_`` do not depend
        on the weights, and Poisson sampling stays per record. A record of
        weight 1 counts ``1 / max_sample_weight`` of a full record, so keep
        the bound at the largest weight you need (without ``sample_weight``
        every record has weight 1). RaCO-DP weighs every per-record term: the
        record's row of the prediction histogram and of the cell counts (so
        the constrained rates are weighted rates), its clipped gradient of the
        Lagrangian (loss and constraint terms together) and its clipped-record
        indicator. See :ref:`privacy-sample-weights`.
    calibration : {"auto"} or None, default="auto"
        Private calibration of the predicted probabilities after training
        (binary problems). ``"auto"`` divides the scores by a temperature (``scale * s``, ``scale > 0``), which changes
        no prediction, so the rates the constraints bound stay those of the
        returned model; fitted on one accounted release of the
        counts of (score bin, true class) of the trained model (10 % of the
        budget, in ``dp_event_`` as ``"score_calibration"``; see
        :ref:`privacy-after-training`); ``score_calibration_`` holds the
        ``(scale, shift)`` applied. None keeps the trained scores and leaves
        that share to training. ``"auto"`` calibrates when the training
        records (or units) can fill three pools of the noisy counts (about
        280 at ``epsilon=1``, ``delta=1e-5``); below, the share goes to
        training (``score_calibration_`` is None).
    model_check : bool, default=True
        Check the returned model privately on its training records: one
        accounted release of its (group, true class, predicted class) counts
        and its clipped log-loss (2 % of the budget, ``"model_check"`` in
        ``dp_event_``), from which ``prediction_shares_`` and
        ``check_log_loss_`` follow and a :class:`~skdp.exceptions.ModelCheckWarning`
        says when the model is (nearly) constant or worse than a constant
        predictor; the verdicts on the constraints
        (``constraint_verdicts_``) come from the same release, so it is made
        whatever the number of records (too few give "undetermined"
        verdicts). False skips it (the attributes, ``constraints_met_``
        included, are then None) and leaves its share to training.
    warm_start : bool, default=False
        With True, ``fit`` on a fitted estimator starts from its parameters
        (``coef_`` and ``intercept_``, or the module's state) instead of a
        fresh model; ``X`` must have as many features (and ``y`` the same
        classes). The new fit spends its own budget; ``dp_event_`` becomes the
        composition of the previous and the new events, and ``epsilon_`` and
        ``privacy_report_`` the accountant's for it. Composition assumes the
        worst case, that both fits saw the same records. Only the model
        carries over: the Lagrange multipliers and the optimizer start afresh.
    solver_options : dict or None, default=None
        Settings of the solver that one default serves (the keys below; a key
        left out keeps its default; an unknown key or a bad value is an error
        at ``fit``):

        {solver_options}
    random_state : int, RandomState instance or None, default=None
        ``None`` (the default, and the setting for deployment): Poisson
        sampling and all noise come from the operating system's
        cryptographically secure generator (:class:`skdp.privacy.SecureGenerator`):
        nobody can replay them, fits are not reproducible. An int seeds a
        torch generator for reproducible *experiments*; anyone who knows the
        seed (it is in ``get_params()`` and in pickles) can regenerate the
        noise, so do not publish a model trained with a known seed as private.
    device : str, default="cpu"
    verbose : int, default=0
        Progress lines show only noisy (private) quantities.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit (e.g. a person) that a fit uses. Each unit keeps at most k of its
        records, a random subset drawn once per fit independently of their
        values, and each kept record weighs ``1 / min(|u|, k)`` in every
        per-record term (gradient, histogram row, cell counts and sizes,
        clipped-record count, check, calibration): a unit moves every
        release by at most the bound of one record, and the constrained
        rates are per-unit weighted rates. Unused without ``unit_ids``.
    unit_column : str, int or None, default=None
        A column of ``X`` (a DataFrame's column name, or a position) that
        holds the unit ids, for use with metadata routing off; it is removed
        from the features like ``sensitive_columns``, and ``predict``
        accepts ``X`` with or without it. ``fit(unit_ids=...)`` takes
        precedence.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    groups_ : ndarray
        Group labels seen in ``fit`` (tuples for several sensitive columns).
    constraints_ : CompiledConstraints
        Cells, local sets, coefficients and tolerances actually enforced.
    constraint_names_ : list of str
    coef_, intercept_ : ndarray
        Linear model (sklearn layout); ``module_state_`` for MLPs.
    lambda_ : ndarray of shape (n_constraints,)
        Final multipliers.
    history_ : dict of ndarray
        Per step: ``"lambda"``, ``"constraint_values"`` (noisy Γ_j - γ_j),
        ``"denominators"`` (noisy local-set sizes), ``"batch_size"`` (noisy),
        ``"clipped_count"`` (noisy count of clipped records),
        ``"clipped_fraction"`` (that count over the expected batch size,
        clamped to [0, 1]) and ``"histogram"`` (the noisy
        histogram of predictions per cell, shape (n_steps, n_cells + 1,
        n_classes); the last cell holds records no constraint uses). All are
        released with noise or computed from such releases, and accounted in
        ``epsilon_``. With ``record_gradient_norms=True`` also
        ``"gradient_norms"`` (exact, non-private debug output).
    epsilon_, delta_ : float
        Budget spent, from dp-accounting on ``dp_event_``.
    accountant_ : str
        Accountant used for ``epsilon_`` (and by :meth:`privacy_curve`).
    dp_event_ : dp_accounting.DpEvent
        ``n_steps_`` Poisson-subsampled Gaussian steps of multiplier
        ``joint_noise_multiplier_``, which dominate the releases of each
        step; with ``denominator="expected"``, composed after the one-off
        Gaussian release of the cell sizes.
    noise_multiplier_, histogram_noise_scale_, clip_count_noise_ : float
        Noise of the gradient (multiplier), histogram (std or Laplace scale)
        and clipped-record count (std).
    cell_count_noise_ : float or None
        Noise of the per-batch cell counts of ``denominator="separate_noisy"``.
    expected_sizes_ : ndarray of shape (n_local_sets,) or None
        Expected per-batch local-set sizes (``sampling_rate_`` times the
        noisy one-off counts) when they were released, else None.
    cell_size_noise_ : float or None
        Standard deviation of the noise on those one-off per-cell counts.
    excluded_groups_ : ndarray
        Groups left out of the constraints as too small at this privacy level
        (see ``small_group_threshold``); empty when none.
    excluded_constraints_ : list of str
        Names of the requested constraints that were left out; the enforced
        ones are ``constraint_names_``.
    noisy_violation_ : ndarray of shape (n_constraints,) or None
        Constraint values of the *returned* model minus tolerances, on the
        training records, from the private check of the model
        (``prediction_counts_``: one noisy release of its (group, true
        class, predicted class) counts after training, accounted in
        ``dp_event_``).
    constraints_met_ : bool or None
        True only when every enforced constraint's verdict is ``"met"``
        (``constraint_verdicts_``) and no requested constraint was left out
        (``excluded_constraints_``). A
        :class:`~skdp.exceptions.ConstraintWarning` names the violated and
        the undetermined ones. It is about the training records; check the
        constraints on held-out data before deploying the model (see
        :ref:`verdicts`). None when no check was made (``model_check=False``
        or too few records for its noise).
    constraint_verdicts_ : ndarray of shape (n_constraints,), dtype object, or None
        Per enforced constraint, ``"met"`` (``noisy_violation_`` plus ``z``
        times its noise std is at most 0), ``"violated"`` (minus ``z`` std
        above 0) or ``"undetermined"``, with ``z`` the one-sided normal
        quantile of the solver option ``verdict_confidence`` (0.95:
        ``z = 1.645``); :func:`skdp.privacy.bound_verdicts`.
    noisy_violation_std_ : ndarray of shape (n_constraints,) or None
        Standard deviation of ``noisy_violation_`` due to the check's noise
        (Monte Carlo over the public noise distribution: post-processing).
    prediction_shares_ : ndarray of shape (n_classes,)
        Noisy share of each class among the returned model's predictions on
        the training records (the private check). A share near 1 means a
        (nearly) constant classifier, and a warning says so.
    prediction_counts_ : ndarray of shape (n_groups, n_classes, n_classes)
        The noisy check: counts of (group, true class, predicted class) of
        the returned model on the training records.
    joint_noise_multiplier_ : float
    n_steps_ : int
    sampling_rate_, batch_size_ : float, int
        With ``unit_ids``, a rate over units and the expected number of
        units in a batch.
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public, like the number of
        records); None without them.
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights applied (``class_weight`` over its largest, times
        ``max_sample_weight``); for ``"balanced"`` a function of the noisy
        class counts. None without ``class_weight``.

    Notes
    -----
    The constraint is enforced on the training data through noisy batch
    estimates, so the final model's gap on new data is close to, not below,
    ``tolerance``: on Adult at epsilon=1 the test gap is within about 0.002 of
    it (``benchmarks/bench_raco_adult.py``). When the sensitive attribute is
    strongly encoded in the features, a deterministic linear model can have
    no solution between "fair and much less accurate" and "accurate and
    unfair" (non-private randomized methods such as fairlearn's
    ExponentiatedGradient miss the bound there too); the fit then ends above
    the tolerance, and a warning says so when the multipliers keep growing.

    Examples
    --------
    >>> from skdp import DPRateConstrainedClassifier
    >>> from skdp.datasets import make_fair_classification
    >>> from skdp.metrics import demographic_parity_difference
    >>> X, y, group = make_fair_classification(
    ...     n_samples=4000, label_group_correlation=0.8, random_state=0)
    >>> clf = DPRateConstrainedClassifier(tolerance=0.05, epsilon=2.0, random_state=0)
    >>> clf = clf.fit(X, y, sensitive_features=group)
    >>> clf.epsilon_ <= 2.0
    True
    >>> gap = demographic_parity_difference(y, clf.predict(X), sensitive_features=group)
    """

    #: Parameters that make ``fit`` keep exact, non-private diagnostics of
    #: the training data (a private search refuses them).
    __skdp_non_private_options__ = ("record_gradient_norms",)

    # the constraints bound the rates of the predictions: calibrate with a
    # temperature alone, which changes none of them
    # the check also gives the constraint verdicts: made even where it
    # cannot judge a constant classifier
    _fit_releases = (ClassCounts(), ScoreCalibration(temperature_only=True),
                     ModelCheck(skip_undecidable=False), ClippedShare())

    #: Trained by :func:`skdp.distributed.fit_data_parallel`.
    _data_parallel = True

    _released_attributes = BaseDPClassifier._released_attributes | {
        "history_", "lambda_", "expected_sizes_", "noisy_violation_", "noisy_violation_std_",
        "constraints_met_", "constraint_verdicts_", "constraints_", "constraint_names_",
        "excluded_groups_",
        "excluded_constraints_",
    }

    _solver_option_specs = {
        **BASE_SOLVER_OPTIONS,
    "verdict_confidence": SolverOption(
        0.95, [Interval(Real, 0.5, 1, closed="left")], 'float in [0.5, 1)',
        'One-sided confidence of each verdict of ``constraint_verdicts_`` (post-processing '
        'of the model check).'),
    "optimizer": SolverOption(
        'sgd', [StrOptions({"sgd", "adam"})], '{"sgd", "adam"}',
        "Optimizer of the model's step on the privatised gradient (post-processing)."),
    "momentum": SolverOption(
        0.5, [Interval(Real, 0, 1, closed="left")], 'float in [0, 1)',
        'Momentum of the primal ``"sgd"`` optimizer. Heavier momentum makes descent- '
        'ascent overshoot the constraint boundary.'),
    "histogram_noise": SolverOption(
        'gaussian', [StrOptions({"gaussian", "laplace"})], '{"gaussian", "laplace"}',
        "Noise of the per-step histogram of predictions (Gaussian, accounted jointly "
        "with the gradient; or Laplace)."),
    "histogram_noise_scale": SolverOption(
        None, [Interval(Real, 0, None, closed="neither"), None], 'float or None',
        'Standard deviation (Gaussian) or scale (Laplace) of the noise on each histogram '
        'count. ``None`` derives it from ``histogram_noise_share``.'),
    "histogram_noise_share": SolverOption(
        0.1, [Interval(Real, 0, 0.9, closed="right")], 'float in (0, 0.9]',
        "Share of each step's privacy (in Gaussian-DP ``mu^2``) spent on the histogram "
        'when scales are derived. 1 % more goes to the clipped-record count; the rest to '
        'the gradient.'),
    "temperature": SolverOption(
        2.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Temperature tau of the soft rates ``softmax(tau * logits)``.'),
    "dual_bound": SolverOption(
        None, [Interval(Real, 0, None, closed="neither"), None], 'float or None',
        'Upper bound of each multiplier (box ``[0, dual_bound]``); None keeps the non- '
        'negative orthant.'),
    "dual_bound_type": SolverOption(
        'box', [StrOptions({"box", "l1"})], '{"box", "l1"}',
        'Shape of the bounded dual domain when ``dual_bound`` is set: the box ``[0, '
        'dual_bound]^J``, or the l1 ball ``{lambda >= 0, sum(lambda) <= dual_bound}`` '
        '(the bounded-diameter domain of the RaCO-DP analysis).'),
    "dual_update": SolverOption(
        'projected', [StrOptions({"projected", "momentum", "exponentiated"})], '{"projected", "momentum", "exponentiated"}',
        'Multiplier update: projected ascent ``lambda <- max(0, lambda + eta g)``, the '
        'same with heavy-ball momentum ``dual_momentum``, or exponentiated ascent '
        '``lambda <- lambda * exp(eta g)`` (multipliers start at 1e-3). All are post- '
        'processing of the noisy constraint values ``g``.'),
    "dual_momentum": SolverOption(
        0.9, [Interval(Real, 0, 1, closed="left")], 'float',
        'Momentum of ``dual_update="momentum"``.'),
    "dual_rates": SolverOption(
        'hard', [StrOptions({"hard", "soft"})], '{"hard", "soft"}',
        'Rates in the released histogram (and so in the dual ascent): one-hot predictions '
        '(``"hard"``, what the constraint is judged on) or soft probabilities. The primal '
        'gradient always uses soft rates.'),
    "min_denominator": SolverOption(
        1.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Floor of the noisy local-set sizes dividing histogram counts.'),
    "denominator": SolverOption(
        'expected', [StrOptions({"histogram", "separate_noisy", "expected"})], '{"histogram", "separate_noisy", "expected"}',
        'Local-set sizes that divide the histogram\'s prediction sums: - ``"histogram"``: '
        "the noisy histogram's own row sums (the paper's choice; no extra release). A "
        'ratio of two noisy counts: when a set has few records per batch its denominator '
        'can come near zero and the rate estimate explode; - ``"separate_noisy"``: per- '
        "cell record counts released on each batch with their own noise (the histogram's "
        'mechanism); half of ``histogram_noise_share`` goes to them, half to the '
        'histogram, and they are accounted in the same joint step; - ``"expected"``: '
        '``sampling_rate`` times the sizes on the whole training set, from per-cell '
        'counts released once before training with Gaussian noise that takes 2 % of the '
        'budget (GDP ``mu^2``), composed with the training in ``dp_event_`` (the same '
        'release serves ``small_group_threshold``). The default: per step only the '
        'numerators are noisy, so the rate estimates never explode (the one-off sizes are '
        'off by a fixed relative error: their noise std is about 26 records at epsilon=1, '
        'delta=1e-5); ``expected_sizes_`` holds them.'),
    "freeze_denominators": SolverOption(
        False, ["boolean"], 'bool',
        "Keep the first step's noisy sizes for the whole run (no extra privacy cost; "
        'removes per-step denominator noise). No effect with ``denominator="expected"``.'),
    "small_group_threshold": SolverOption(
        3.0, [Interval(Real, 0, None, closed="left"), None], 'float or None',
        'Groups too small to constrain at this privacy level are left out of the '
        'constraints, decided privately: a constraint is enforced only if every local set '
        "it uses (e.g. one group, or one group's positives for equalized odds) has a "
        'noisy expected count per batch of at least ``small_group_threshold`` times the '
        "standard deviation of the histogram noise on that set's counts -- that is, if "
        'the per-step standard error of its rate estimates is at most ``1 / '
        'small_group_threshold``. Sizes come from per-cell counts released once before '
        'training (the release of ``denominator="expected"``, 2 % of the budget), so the '
        'choice costs nothing more. Left-out groups\' records still count in the "rest" of '
        "the other groups' constraints. A warning names them; ``excluded_groups_`` and "
        '``excluded_constraints_`` list them. Below the threshold the rate estimates are '
        "mostly noise: the multipliers random-walk and, since a small group's own per- "
        'record constraint gradients are clipped, the constraint is then met by moving '
        'everyone else -- often to a constant classifier. None enforces every constraint '
        '(a warning still names the small groups). Never applies without privacy.'),
    "return_iterate": SolverOption(
        'average', [StrOptions({"average", "last", "best_checkpoint"})], '{"average", "last", "best_checkpoint"}',
        'Model returned: the average of the parameters over the final ``averaging`` '
        'fraction of steps (post-processing; it damps the oscillation of descent-ascent), '
        'the last iterate, or -- NOT private -- the most accurate of 20 evenly spaced '
        'checkpoints whose hard constraints hold on the training data (the RaCO-DP '
        "paper's protocol). That choice reads the training data exactly, so ``epsilon_`` "
        "is then inf, ``training_epsilon_`` keeps the training's figure, "
        '``checkpoint_step_`` the chosen step, and a warning is raised.'),
    "averaging": SolverOption(
        0.5, [Interval(Real, 0, 1, closed="both")], 'float',
        'Fraction of the final steps averaged by ``return_iterate="average"`` (0 returns '
        'the last iterate).'),
    "dual_optimism": SolverOption(
        0.0, [Interval(Real, 0, None, closed="left")], 'float',
        "Weight of the optimistic term ``g_t - g_{t-1}`` added to the multipliers' ascent "
        'direction (post-processing of the noisy constraint values). Positive values '
        '(e.g. 3) damp the cycling of descent-ascent around the constraint boundary when '
        'cells are large, but amplify the histogram noise, which hurts constraints on '
        'small cells such as equalized odds; 0 gives plain projected ascent.'),
    "clip_constraint_values": SolverOption(
        False, ["boolean"], 'bool',
        'Clip each noisy per-set rate to [0, 1] before forming the constraint values that '
        'drive the multipliers (noise can push rates outside it).'),
    "record_gradient_norms": SolverOption(
        False, ["boolean"], 'bool',
        "Keep each step's exact per-record gradient norms in "
        '``history_["gradient_norms"]``: non-private debug output, not covered by '
        "``epsilon_`` (a warning says so; a private search refuses it)."),
    }

    _parameter_constraints = {
        **BaseDPClassifier._parameter_constraints,
        "constraint": [str, list, tuple, object],
        "tolerance": [Interval(Real, None, None, closed="neither"), "array-like"],
        "dual_learning_rate": [Interval(Real, 0, None, closed="neither")],
        **UNIT_CONSTRAINTS,
    }

    def __init__(
        self,
        constraint="demographic_parity",
        *,
        tolerance=0.05,
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=10.0,
        batch_size="auto",
        max_epochs=10,
        max_steps=None,
        learning_rate=0.2,
        dual_learning_rate=0.3,
        hidden_layer_sizes=(),
        module=None,
        sensitive_columns=None,
        sensitive_groups=None,
        random_state=None,
        device="cpu",
        verbose=0,
        class_weight=None,
        max_sample_weight=1.0,
        warm_start=False,
        calibration="auto",
        model_check=True,
        max_records_per_unit=MAX_RECORDS_PER_UNIT,
        unit_column=None,
        solver_options=None,
    ):
        self.constraint = constraint
        self.tolerance = tolerance
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.learning_rate = learning_rate
        self.dual_learning_rate = dual_learning_rate
        self.hidden_layer_sizes = hidden_layer_sizes
        self.module = module
        self.sensitive_columns = sensitive_columns
        self.sensitive_groups = sensitive_groups
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.class_weight = class_weight
        self.max_sample_weight = max_sample_weight
        self.warm_start = warm_start
        self.calibration = calibration
        self.model_check = model_check
        self.max_records_per_unit = max_records_per_unit
        self.unit_column = unit_column
        self.solver_options = solver_options

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, sensitive_features=None, sample_weight=None, unit_ids=None):
        """Train under the (epsilon, delta) budget subject to the constraints.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sensitive_features : array-like of shape (n_samples,) or (n_samples, k), default=None
            Group of each record (strings, ints; several columns form
            intersectional groups). ``None`` takes them from
            ``sensitive_columns``; if that is None too, all records form one
            group and group constraints are vacuous (a warning says so).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each record (None: all 1), clipped to
            ``max_sample_weight``; it scales the record's clipped contribution,
            so the privacy guarantee does not change. With metadata routing on,
            request it with ``set_fit_request(sample_weight=True)``.

        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id; any hashable,
            no missing values). When given, epsilon and delta are about
            adding or removing *all* records of one unit: each unit keeps at
            most ``max_records_per_unit`` of its records (drawn at random
            once per fit), each weighted ``1 / min(|u|, max_records_per_unit)``
            in every per-record term, batches are Poisson samples of units,
            sums are divided by the expected number of units in a batch, and
            the constrained rates are per-unit weighted rates. Requested by
            default with metadata routing on; with routing off,
            ``unit_column`` can name a column of ``X`` that holds them. See
            :ref:`units`.

        Returns
        -------
        self : DPRateConstrainedClassifier
        """
        self._validate_params()
        for stale in ("training_epsilon_", "checkpoint_step_"):
            self.__dict__.pop(stale, None)
        previous = self._previous_fit()
        X, y_codes, group_codes, unit_ids = self._validate_training_data(
            X, y, sensitive_features, units=True, unit_ids=unit_ids)
        self._check_warm_start(previous, unit_ids)
        sample_weight = self._validated_sample_weight(sample_weight, X, y_codes)
        unit_codes, n_units = self._validated_unit_ids(unit_ids, X.shape[0])
        if group_codes is None:
            group_codes = np.zeros(X.shape[0], dtype=np.int64)
        self._build_constraints()
        state = RacoFitState(y_codes=y_codes, group_codes=group_codes,
                             n_classes=len(self.classes_), sample_weight=sample_weight,
                             previous=previous, unit_codes=unit_codes, n_units=n_units)
        return self._fit_private(X, state)

    def _build_constraints(self):
        """``constraints_`` and ``constraint_names_`` for the classes and
        groups of the data (public: their lists only)."""
        n_classes = len(self.classes_)
        n_groups = 1 if self.groups_ is None else len(self.groups_)
        self.constraints_ = make_constraints(
            self.constraint, self.tolerance, n_classes=n_classes, n_groups=n_groups,
            class_names=list(self.classes_),
            group_names=None if self.groups_ is None else list(self.groups_),
        )
        self.constraint_names_ = list(self.constraints_.names)
        if n_groups == 1 and self.constraints_.n_constraints == 0:
            reason = (
                "No sensitive features were given" if self.groups_ is None
                else f"sensitive_features holds a single group ({self.groups_[0]!r})"
            )
            warnings.warn(
                f"{reason}, so every record is in one group and the group constraints are "
                "vacuous; pass sensitive_features= to fit (or set sensitive_columns) with "
                "at least two groups to enforce them.",
                UserWarning,
            )

    # the hooks of BaseDPEstimator._fit_private
    def _plan(self, X, state, generator):
        # with units, sampling is over units and their number is public; in a
        # data-parallel fit X is this rank's shard and n the rows of all ranks
        comm = current_communicator()
        if comm.distributed and self._option("return_iterate") == "best_checkpoint":
            raise ValueError(
                "return_iterate='best_checkpoint' reads every training record exactly, which "
                "a data-parallel fit does not do; use return_iterate='average' or 'last'.")
        n = comm.total(X.shape[0]) if state.units is None else state.units.n_units
        state.q = self._check_privacy_setup(n, self._resolve_batch_size(n))
        state.n = n
        self.batch_size_ = self._expected_batch_size(n, state.q)
        return self._release_plan(state.q, self._n_steps_requested(state.q), state.units)

    def _calibrate(self, plan, state):
        return self._spend_budget(plan)

    def _targets(self, report, generator, device, X_t, state):
        """One-hot labels, the constraint cell of each record and the noisy
        one-off local-set sizes (drawn here), with the groups too small for
        them left out."""
        state.noise = self._noise(report)
        state.X_t = X_t
        # stored class-major (a transposed view), as the trainer reads it
        onehot = one_hot(state.y_codes, state.n_classes, X_t.dtype, device)
        atom_cell = np.asarray(self.constraints_.atom_cell)
        n_cells = self.constraints_.n_cells
        cells = atom_cell[state.y_codes, state.group_codes]
        cells = np.where(cells < 0, n_cells, cells)  # spare cell for records no constraint uses
        state.cells_t = torch.as_tensor(cells, dtype=torch.long, device=device)
        state.sizes = self._expected_sizes(state.cells_t, state.q, report, generator, X_t.dtype,
                                         weights=state.record_weights)
        self._exclude_small_groups(state.noise)
        return onehot

    def _train(self, backend, onehot, report, generator, state):
        """RaCO-DP, then (``return_iterate="best_checkpoint"``) the chosen
        checkpoint loaded into the model."""
        tensors = self.constraints_.to_torch(device=onehot.device, dtype=onehot.dtype)
        fixed_sizes = state.sizes if self._option("denominator") == "expected" else None
        if self._option("record_gradient_norms"):
            warnings.warn(
                "record_gradient_norms=True: history_['gradient_norms'] holds exact, "
                "non-private gradient norms of the training data; it is debug output not "
                "covered by epsilon_.",
                UserWarning,
            )
        steps = report.steps[0]
        config = RacoConfig(
            n_steps=steps, sampling_rate=state.q, max_grad_norm=self.max_grad_norm,
            noise=state.noise, temperature=self._option("temperature"),
            dual_learning_rate=self.dual_learning_rate,
            dual_bound=self._option("dual_bound"), dual_bound_type=self._option("dual_bound_type"),
            dual_update=self._option("dual_update"), dual_momentum=self._option("dual_momentum"),
            dual_optimism=self._option("dual_optimism"), dual_rates=self._option("dual_rates"),
            clip_constraint_values=self._option("clip_constraint_values"),
            min_denominator=self._option("min_denominator"), optimizer=self._option("optimizer"),
            learning_rate=self.learning_rate, momentum=self._option("momentum"),
            averaging=self._option("averaging") if self._option("return_iterate") == "average" else 0.0,
            denominator=self._option("denominator"), freeze_denominators=self._option("freeze_denominators"),
            checkpoint_every=(
                math.ceil(steps / _N_CHECKPOINTS)
                if self._option("return_iterate") == "best_checkpoint" else None
            ),
            record_gradient_norms=self._option("record_gradient_norms"), verbose=self.verbose,
        )
        history = train_raco(backend, onehot, state.cells_t, tensors, config, generator,
                             fixed_sizes=fixed_sizes, units=state.units)
        checkpoints = history.pop("checkpoints", None)
        state.checkpoint_step = None
        if checkpoints is not None:
            state.checkpoint_step = self._load_best_checkpoint(
                backend, checkpoints, state.X_t, state.y_codes, state.group_codes)
        return history

    def _store_fitted(self, report, history, state):
        self.lambda_ = history.pop("final_lambda").cpu().numpy().astype(np.float64)
        self.history_ = {k: v.cpu().numpy().astype(np.float64) for k, v in history.items()}
        self._set_privacy_report(report, state.noise, state.q)
        self.n_units_ = None if state.units is None else state.units.n_units
        if state.checkpoint_step is not None:
            self._release_checkpoint_choice(state.checkpoint_step)
        self._warn_from_history(state.noise, state.q * state.n)

    def _needs_sizes(self):
        """Whether the per-cell counts are released once before training:
        for ``denominator="expected"`` or ``small_group_threshold``, when
        there is a constraint to serve."""
        if self.constraints_.n_constraints == 0:
            return False
        return self._option("denominator") == "expected" or self._option("small_group_threshold") is not None

    def _expected_sizes(self, cells_t, sampling_rate, report, generator, dtype, weights=None):
        """Expected per-batch local-set sizes, or None when not released.

        ``sampling_rate`` times the local-set sizes of the whole training set,
        computed from per-cell record counts released once with the Gaussian
        noise of the report's ``"cell_sizes"`` release (the initial event);
        exact counts without privacy. With record ``weights`` (factors in
        [0, 1]) the counts are weighted: sensitivity 1 still.
        """
        if "cell_sizes" not in report.noise:
            self.expected_sizes_ = self.cell_size_noise_ = None
            return None
        membership = torch.as_tensor(
            np.array(self.constraints_.membership), dtype=dtype, device=cells_t.device
        )
        n_cells = membership.shape[1]
        counts = torch.bincount(cells_t, weights=weights, minlength=n_cells + 1)[:n_cells].to(dtype)
        noise_std = report.scale("cell_sizes")
        self.cell_size_noise_ = noise_std
        # data-parallel: summed over the ranks, the root's noise added once
        counts = current_communicator().release(
            counts, None if noise_std is None else lambda: gaussian_noise(counts, noise_std,
                                                                          generator))
        sizes = sampling_rate * (membership @ counts)
        self.expected_sizes_ = sizes.cpu().numpy().astype(np.float64)
        return sizes

    def _exclude_small_groups(self, noise):
        """Leave out the constraints whose local sets are too small to
        estimate at this noise level (see ``small_group_threshold``).

        Post-processing of the noisy one-off sizes ``expected_sizes_`` and of
        the (public) histogram noise scale; updates ``constraints_`` and
        ``constraint_names_`` and sets ``excluded_groups_`` and
        ``excluded_constraints_``.
        """
        compiled = self.constraints_
        groups = np.asarray([] if self.groups_ is None else self.groups_, dtype=object)
        self.excluded_groups_ = groups[:0]
        self.excluded_constraints_ = []
        sizes = self.expected_sizes_
        if sizes is None or not noise.private:
            return
        ratio = _set_noise_ratio(compiled, sizes, noise)
        threshold = self._option("small_group_threshold")
        small = ratio < (_SMALL_SET_RATIO if threshold is None else threshold)
        uses = np.abs(np.asarray(compiled.coefficients)).sum(2) > 0  # (J, M)
        small &= uses.any(0)
        if not small.any():
            return
        # groups whose own local set (within that one group) is too small
        in_group = np.asarray(compiled.local_sets).any(1)  # (M, G)
        own = small & (in_group.sum(1) == 1)
        group_codes = np.unique([np.flatnonzero(in_group[m])[0] for m in np.flatnonzero(own)])
        named = groups[group_codes.astype(np.int64)] if groups.size else group_codes
        sets = ", ".join(
            f"{compiled.local_set_names[m]!r} (~{max(sizes[m], 0.0):.0f} records per batch)"
            for m in np.flatnonzero(small)[:6]
        )
        drop = (uses & small[None]).any(1)
        needed = _SMALL_SET_RATIO if threshold is None else threshold
        detail = (
            f"the local set(s) {sets} are too small for the histogram noise "
            f"({noise.histogram_std:.1f} per count): the noisy expected count per batch is below "
            f"{needed:g} times the noise"
        )
        if threshold is None:
            warnings.warn(
                f"small_group_threshold=None: enforcing every constraint although {detail}; "
                "their rate estimates are mostly noise and can drive the model to a constant. "
                "Use a larger batch_size, merge small groups, or raise epsilon.",
                ConstraintWarning,
            )
            return
        names = list(compiled.names)
        self.excluded_constraints_ = [names[j] for j in np.flatnonzero(drop)]
        self.excluded_groups_ = named
        self.constraints_ = _select_constraints(compiled, ~drop)
        self.constraint_names_ = list(self.constraints_.names)
        left = len(self.constraint_names_)
        warnings.warn(
            f"Groups too small to constrain at this privacy level were left out of the "
            f"constraints: {list(named)}; {detail} (small_group_threshold="
            f"{threshold:g}). {len(self.excluded_constraints_)} constraint(s) were dropped "
            f"(excluded_constraints_), {left} are enforced. Their records still count in the "
            "other groups' comparisons, but their own rates are not constrained: merge them "
            "into a larger group, raise epsilon or batch_size, or lower small_group_threshold "
            "to enforce them anyway.",
            ConstraintWarning,
        )

    def _load_best_checkpoint(self, backend, checkpoints, X_t, y_codes, group_codes):
        """Load the most accurate checkpoint whose hard constraints hold on
        the training data (the least violating one if none does) into the
        model; return its step.

        Non-private: the choice reads the training data exactly (see
        :meth:`_release_checkpoint_choice`).
        """
        tolerance = np.asarray(self.constraints_.tolerance)
        best_key, best = None, None
        with torch.no_grad():
            for step, params in checkpoints:
                for p, saved in zip(backend.parameters, params):
                    p.copy_(saved)
                pred = torch.cat([top_class(backend.predict_logits(block))
                                  for block in X_t.blocks()]).cpu().numpy()
                accuracy = float(np.mean(pred == y_codes))
                values = evaluate_hard_constraints(self.constraints_, y_codes, pred, group_codes)
                violation = float(np.max(values - tolerance, initial=0.0))
                key = (violation <= 0, -violation if violation > 0 else accuracy)
                if best_key is None or key > best_key:
                    best_key, best = key, (step, params)
            step, params = best
            for p, saved in zip(backend.parameters, params):
                p.copy_(saved)
        return step

    def _release_checkpoint_choice(self, step):
        """The released model is no longer covered by the accountant:
        ``epsilon_`` becomes inf (``training_epsilon_`` keeps the training's
        figure)."""
        self.checkpoint_step_ = step
        self.training_epsilon_ = self.epsilon_
        if self.dp_event_ is None:
            return
        self.epsilon_ = np.inf
        warnings.warn(
            f"return_iterate='best_checkpoint' chose the checkpoint of step {step} by exact "
            "accuracy and constraint values on the training data. That choice is not "
            "private: epsilon_ is set to inf (the training itself spent "
            f"{self.training_epsilon_:.3g}). Use return_iterate='average' for a private model.",
            UserWarning,
        )

    def _resolve_batch_size(self, n):
        if self.batch_size == "auto":
            return int(min(max(n // 4, 1), max(64, round(6 * math.sqrt(n)))))
        return int(self.batch_size)

    # ------------------------------------------------------------ privacy
    def _shares(self):
        """Shares of each step's privacy (GDP ``mu^2``) per release.

        Returns ``(gradient, histogram, cell_counts, clip_count)``; with
        ``denominator="separate_noisy"`` the histogram share is halved between
        the histogram and the separate cell counts.
        """
        histogram = self._option("histogram_noise_share")
        counts = 0.0
        if self._option("denominator") == "separate_noisy":
            histogram, counts = histogram / 2, histogram / 2
        gradient = 1.0 - self._option("histogram_noise_share") - _COUNT_SHARE
        return gradient, histogram, counts, _COUNT_SHARE

    def _release_plan(self, sampling_rate, steps, units=None):
        """What each step releases, on one Poisson batch, and its budget shares.

        The clipped gradient sum (l2 sensitivity C), the count of clipped
        records and the histogram of predictions per cell (sensitivity 1:
        a record adds one row on the simplex to one cell), plus, with
        ``denominator="separate_noisy"``, per-cell record counts. With
        ``denominator="expected"`` the cell sizes are released once before
        training with ``_EXPECTED_SIZES_SHARE`` of the budget. With
        ``units`` (:class:`~skdp.privacy.UnitBounds`) the same plan is about
        units: every per-record term carries the unit factors (which sum to
        at most 1 per unit), so a unit moves each release by at most one
        record's sensitivity; the rate is over units and the report names
        the unit.
        """
        share_g, share_h, share_n, share_c = self._shares()
        fixed = self._option("histogram_noise_scale")

        def counts_release(name, share):
            if fixed is None:
                return Release(name, mechanism=self._option("histogram_noise"), share=share)
            return Release(name, mechanism=self._option("histogram_noise"), noise_scale=fixed)

        releases = [
            Release("gradient", sensitivity=self.max_grad_norm, share=share_g),
            Release("clip_count", share=share_c),
            counts_release("histogram", share_h),
        ]
        if self._option("denominator") == "separate_noisy":
            releases.append(counts_release("cell_counts", share_n))
        initial = []
        if self._needs_sizes():
            initial.append(InitialRelease("cell_sizes", budget_share=_EXPECTED_SIZES_SHARE))
        extra = ({} if units is None else
                 {"n_records": units.n_units, "privacy_unit": units.description})
        return ReleasePlan(
            BatchReleases(releases, steps=steps, sampling_rate=sampling_rate),
            initial=initial, neighboring=self._option("neighboring"), accountant=self._option("accountant"), **extra,
        )

    def _spend_budget(self, plan):
        try:
            return self._spend(plan)
        except PrivacyBudgetError as exc:
            if self._option("histogram_noise_scale") is None:
                raise
            raise PrivacyBudgetError(
                f"histogram_noise_scale={self._option('histogram_noise_scale')}: {exc}"
            ) from exc

    def _noise(self, report):
        """The trainer's noise settings, read from the privacy report."""
        separate = self._option("denominator") == "separate_noisy"
        return RacoNoise(
            gradient=report.multiplier("gradient"),
            histogram=report.scale("histogram"),
            histogram_mechanism=self._option("histogram_noise"),
            clip_count=report.scale("clip_count"),
            cell_counts=report.scale("cell_counts") if separate else None,
        )

    def _set_privacy_report(self, report, noise, sampling_rate):
        self._store_privacy_report(report)
        self.n_steps_ = report.steps[0]
        self.sampling_rate_ = sampling_rate
        self.noise_multiplier_ = noise.gradient
        self.histogram_noise_scale_ = noise.histogram
        self.clip_count_noise_ = noise.clip_count
        self.cell_count_noise_ = noise.cell_counts
        self.joint_noise_multiplier_ = (
            report.joint_noise_multipliers[0] if report.private else None
        )

    def privacy_curve(self, n_points=10):
        """Epsilon spent after each of ``n_points`` step counts up to ``n_steps_``.

        Computed from the fitted privacy report (which depends only on public
        settings), so it releases nothing about the data. With
        ``denominator="expected"`` every point includes the one-off release of
        the group sizes.

        Parameters
        ----------
        n_points : int, default=10

        Returns
        -------
        curve : ndarray of shape (n_points, 2)
            Columns: step count, epsilon at ``delta_``.
        """
        check_is_fitted(self)
        if hasattr(self, "training_epsilon_") and self.dp_event_ is not None:
            warnings.warn(
                "return_iterate='best_checkpoint' chose the model non-privately: this curve "
                "covers the training only, not the released model (epsilon_ is inf).",
                UserWarning,
            )
        return super().privacy_curve(n_points)

    # ------------------------------------------------------------ warnings


    def _judge_model(self, loss_sum, std):
        """The check of the returned model, and its constraint verdicts:
        ``noisy_violation_``, ``noisy_violation_std_``,
        ``constraint_verdicts_`` and ``constraints_met_`` (post-processing
        of ``prediction_counts_``; all None when no check was made)."""
        super()._judge_model(loss_sum, std)
        if self.prediction_counts_ is None:
            self.noisy_violation_ = self.noisy_violation_std_ = None
            self.constraint_verdicts_ = self.constraints_met_ = None
            return
        confidence = self._option("verdict_confidence")
        check = check_constraints(self.constraints_, self.prediction_counts_, std,
                                  confidence=confidence,
                                  min_denominator=self._option("min_denominator"))
        self.noisy_violation_ = check.excess
        self.noisy_violation_std_ = check.std
        self.constraint_verdicts_ = check.verdicts
        self.constraints_met_ = (bool((check.verdicts == MET).all())
                                 and not self.excluded_constraints_)
        self._warn_verdicts(check.excess, check.std, check.verdicts, confidence)

    def _warn_verdicts(self, violation, spread, verdicts, confidence):
        """One :class:`~skdp.exceptions.ConstraintWarning` for the violated
        constraints and one for the undetermined ones."""
        tolerance = self.constraints_.tolerance

        def listed(kind):
            chosen = np.flatnonzero(verdicts == kind)
            order = chosen[np.argsort(-(violation[chosen]))]
            return "; ".join(
                f"{self.constraint_names_[j]}: {violation[j]:+.3f} (tolerance "
                f"{tolerance[j]:g}, noise std {spread[j]:.3f})" for j in order[:3])

        if (verdicts == VIOLATED).any():
            warnings.warn(
                f"Constraints violated by the returned model: its constraint value minus "
                f"tolerance on the training records (private check) is {listed(VIOLATED)}, "
                f"beyond its noise at confidence {confidence:g}; constraints_met_ is False and "
                "noisy_violation_ holds every value. The tolerance is likely out of reach at "
                "this privacy level and group sizes: raise tolerance or epsilon, and check "
                "the constraints on held-out data before deploying.",
                ConstraintWarning,
            )
        undetermined = verdicts == UNDETERMINED
        if undetermined.any():
            margin = float(verdict_margin(confidence) * spread[undetermined].max())
            warnings.warn(
                f"Constraints undetermined: the private check of the returned model cannot "
                f"tell at confidence {confidence:g} whether they hold, their noise is as large "
                f"as their distance to the tolerance ({listed(UNDETERMINED)}; constraint value "
                "minus tolerance on the training records). constraints_met_ is False. RaCO-DP "
                "trains to the tolerance, so a binding constraint ends near it: to have it met "
                f"beyond the noise, ask for a tolerance about {margin:.3g} below the one you "
                "need; or give more data (larger groups) or raise epsilon. Check the "
                "constraints on held-out data before deploying.",
                ConstraintWarning,
            )

    def _warn_from_history(self, noise, expected_batch):
        """Warnings from the noisy history only (post-processing): groups too
        small for the histogram noise, growing multipliers, heavy clipping.
        Whether the returned model meets the constraints is judged by the
        private check of the model (:meth:`_judge_model`)."""
        hist = self.history_
        steps, n_constraints = hist["lambda"].shape
        tail = slice(steps - max(2, steps // 4), steps)
        window = max(0.25,
                     self._option("averaging") if self._option("return_iterate") == "average" else 0.0)
        values = hist["constraint_values"][steps - max(2, int(window * steps)):]
        violation = values.mean(0) if values.shape[0] else np.zeros(n_constraints)
        k = len(self.classes_)
        if steps < 8 or n_constraints == 0:
            return
        if noise.private and self.expected_sizes_ is None:
            denominators = hist["denominators"][tail].mean(0)
            noise_std = noise.histogram_std
            small = denominators < 5 * noise_std * math.sqrt(k)
            if small.any():
                warnings.warn(
                    f"{int(small.sum())} constrained group(s) have about "
                    f"{denominators[small].min():.0f} records per batch, too few for histogram "
                    f"noise of {noise_std:.1f} per count; their rate estimates are mostly noise. "
                    "Use a larger batch_size, merge small groups, or raise epsilon.",
                    ConstraintWarning,
                )
        lam = hist["lambda"]
        growing = (lam[-1] > 1.5 * lam[steps // 2] + 1e-3) & (violation > 0.01)
        if growing.any():
            names = [self.constraint_names_[j] for j in np.flatnonzero(growing)[:3]]
            warnings.warn(
                f"Lagrange multipliers keep growing for {names}: the tolerance may be infeasible "
                "at this privacy level. Raise tolerance, or set dual_bound to cap the penalty.",
                ConstraintWarning,
            )
        # noisy clipped count over the (public) expected batch size, averaged
        # before clamping to [0, 1]
        clipped = float(np.clip(hist["clipped_count"][tail].mean() / expected_batch, 0.0, 1.0))
        if noise.private and clipped > 0.5 and violation.max() > 0.01:
            warnings.warn(
                f"About {100 * clipped:.0f}% of per-sample gradients are clipped (noisy "
                "estimate) while constraints remain violated: clipping is biasing the "
                "constraint gradient. Raise max_grad_norm.",
                ClippingWarning,
            )

    # ---------------------------------------------------------- diagnostics
    def constraint_values(self, X, y, *, sensitive_features=None, soft=False):
        """Constraint values Γ_j of the fitted model on given data.

        Non-private: computed exactly from ``X``, ``y`` and the groups. Records
        of groups unseen in ``fit`` are left out (with a warning). Hard (0-1)
        rates by default -- what the constraints are judged on; ``soft=True``
        uses the tempered probabilities ``softmax(temperature * logits)`` that
        training differentiates.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sensitive_features : array-like, default=None
            Taken from ``sensitive_columns`` when None.
        soft : bool, default=False
            Soft (tempered-probability) rates instead of hard ones.

        Returns
        -------
        values : ndarray of shape (n_constraints,)
            Compare with ``constraints_.tolerance``; the names are in
            ``constraint_names_``.
        """
        if soft:
            scores = self.decision_function(X)
            if scores.ndim == 1:
                scores = np.column_stack([np.zeros_like(scores), scores])
            y_pred = softmax(self._option("temperature") * scores)
        else:
            y_pred = self.predict(X)
        _, from_columns = split_sensitive_columns(X, self.sensitive_columns)
        if sensitive_features is None:
            sensitive_features = from_columns
        y = np.asarray(y)
        n = y.shape[0]
        if sensitive_features is None:
            if self.groups_ is not None:
                raise ValueError(
                    "sensitive_features is required: the model was fitted with groups "
                    f"{list(self.groups_)[:5]}."
                )
            group_codes = np.zeros(n, dtype=np.int64)
        else:
            group_codes, _ = encode_groups(sensitive_features, n, groups=self.groups_)
        y_codes = np.searchsorted(self.classes_, y)
        known = (group_codes >= 0) & (y_codes < len(self.classes_))
        known[known] &= self.classes_[y_codes[known]] == y[known]
        if not known.all():
            warnings.warn(
                f"{int((~known).sum())} records have a group or label unseen in fit and are "
                "left out of the constraint values.",
                UserWarning,
            )
        if soft:
            return evaluate_constraints(
                self.constraints_, y_codes[known], y_pred[known], group_codes[known]
            )
        pred_codes = np.searchsorted(self.classes_, y_pred)
        return evaluate_hard_constraints(
            self.constraints_, y_codes[known], pred_codes[known], group_codes[known]
        )

    def constraints_satisfied(self, X, y, *, sensitive_features=None):
        """Whether each hard constraint holds on given data (non-private).

        Returns
        -------
        satisfied : ndarray of bool of shape (n_constraints,)
            ``Γ_j <= γ_j`` for each constraint, in ``constraint_names_`` order.
        """
        values = self.constraint_values(X, y, sensitive_features=sensitive_features)
        return values <= np.asarray(self.constraints_.tolerance)

    def constraint_violation(self, X, y, *, sensitive_features=None):
        """Largest hard violation ``max_j (Γ_j - γ_j)`` on given data (non-private)."""
        values = self.constraint_values(X, y, sensitive_features=sensitive_features)
        if values.size == 0:
            return 0.0
        return float(np.max(values - np.asarray(self.constraints_.tolerance)))
