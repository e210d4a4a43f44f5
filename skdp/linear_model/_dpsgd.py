"""DP-SGD classifier: the baseline every skdp estimator is compared against."""

import math
from numbers import Real

import torch
from sklearn.utils._param_validation import Interval, StrOptions

from .._fit.classifier import BaseDPClassifier
from .._fit.checks import ClippedShare, ModelCheck
from .._fit.releases import ClassCounts, ScoreCalibration
from .._fit.options import BASE_SOLVER_OPTIONS, SolverOption, document_solver_options
from .._fit.state import FitState
from .._fit.units import MAX_RECORDS_PER_UNIT, UNIT_CONSTRAINTS
from .._training import DPSGDConfig, train_dpsgd
from ..models import CrossEntropyHead, one_hot
from ..privacy import BatchReleases, Release, ReleasePlan, current_communicator


class _DPSGDMixin:
    """The DP-SGD fit shared by :class:`DPSGDClassifier` and
    :class:`~skdp.DPSGDRegressor`: the hooks of
    :meth:`~skdp._fit.template.BaseDPEstimator._fit_private` (plan, targets,
    trainer, fitted state)."""

    #: Trained by :func:`skdp.distributed.fit_data_parallel`.
    _data_parallel = True

    #: DP-SGD's solver options: the base's and the optimizer's.
    _dpsgd_options = {
        **BASE_SOLVER_OPTIONS,
        "optimizer": SolverOption(
            "sgd", [StrOptions({"sgd", "adam"})], '{"sgd", "adam"}',
            "Optimizer applied to the privatised gradient (post-processing)."),
        "momentum": SolverOption(
            0.0, [Interval(Real, 0, 1, closed="left")], "float in [0, 1)",
            'Momentum of ``"sgd"``.'),
    }

    #: ``learning_rate="auto"``: this step size, lowered where the noise would
    #: move the weights more than :attr:`_auto_noise_walk` (see
    #: :meth:`_resolved_learning_rate`).
    _auto_learning_rate = 0.5
    _auto_noise_walk = 0.3

    _dpsgd_constraints = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        **UNIT_CONSTRAINTS,
    }

    def _fit_dpsgd(self, X, make_targets, head, **labels):
        """Spend the budget on DP-SGD over ``X``; return self.

        ``make_targets(report, generator, device)`` returns the per-sample
        targets of ``head`` as a float tensor of shape (n_samples,
        ``self._n_model_outputs()``) (it may draw the noise of the plan's
        initial releases). ``labels`` (classifiers: ``y_codes`` and
        ``group_codes``) serve the check of the returned model;
        ``sample_weight`` and ``previous`` (:meth:`_previous_fit`) the
        weights and the warm start; ``unit_ids`` (or None) the privacy units.
        ``make_targets`` also gets ``weights=``: the unit factors of a fit
        with units (for its one-off releases), else None.
        """
        unit_ids = labels.pop("unit_ids", None)
        unit_codes, n_units = self._validated_unit_ids(unit_ids, X.shape[0])
        return self._fit_private(
            X, FitState(make_targets=make_targets, head=head, unit_codes=unit_codes,
                        n_units=n_units, **labels))

    def _plan(self, X, state, generator):
        # with units, sampling is over units and their number is public; in a
        # data-parallel fit X is this rank's shard and n the rows of all ranks
        state.n = (current_communicator().total(X.shape[0]) if state.units is None
                 else state.units.n_units)
        state.q = self._check_privacy_setup(state.n, self._resolve_batch_size(state.n))
        return self._release_plan(state.q, self._n_steps_requested(state.q), state.units)

    def _targets(self, report, generator, device, X_t, state):
        weights = None if state.units is None else state.units.factors
        targets = state.make_targets(report, generator, device, weights=weights)
        # stored class-major (a transposed view of (n_outputs, n) memory),
        # which is how the trainer reads them
        return targets.to(device=device, dtype=X_t.dtype).T.contiguous().T

    def _train(self, backend, targets, report, generator, state):
        config = DPSGDConfig(
            n_steps=report.steps[0], sampling_rate=state.q, max_grad_norm=self.max_grad_norm,
            noise_multiplier=report.multiplier("gradient"),
            optimizer=self._option("optimizer"),
            learning_rate=self._resolved_learning_rate(state, report),
            momentum=self._option("momentum"), verbose=self.verbose, alpha=self.alpha,
            head=state.head, averaging=self._option("averaging"),
        )
        return train_dpsgd(backend, targets, config, generator, units=state.units)

    def _resolved_learning_rate(self, state, report):
        """``learning_rate``, with ``"auto"`` resolved from public quantities.

        The noise added to the mean gradient moves each weight by a random
        walk of standard deviation ``lr * sigma * C * sqrt(T) / B`` over T
        steps (sigma the noise multiplier, C the clipping norm, B the
        expected batch). ``"auto"`` takes :attr:`_auto_learning_rate` unless
        that walk would exceed :attr:`_auto_noise_walk`, and then the step
        size that keeps it there: only fits with few records per unit of
        noise (a few hundred records at ``epsilon=1``) train more slowly.
        """
        if self.learning_rate != "auto":
            return float(self.learning_rate)
        if self.epsilon is None:  # no noise
            return self._auto_learning_rate
        walk = (report.multiplier("gradient") * self.max_grad_norm
                * math.sqrt(report.steps[0]) / (state.q * state.n))
        if walk * self._auto_learning_rate > self._auto_noise_walk:
            return self._auto_noise_walk / walk
        return self._auto_learning_rate

    def _store_fitted(self, report, result, state):
        self.learning_rate_ = self._resolved_learning_rate(state, report)
        self.n_steps_ = report.steps[0]
        self.sampling_rate_ = state.q
        self.batch_size_ = self._expected_batch_size(state.n, state.q)
        self.noise_multiplier_ = report.multiplier("gradient")
        self.n_units_ = None if state.units is None else state.units.n_units

    def _release_plan(self, sampling_rate, steps, units=None):
        """One release per step: the clipped gradient sum (sensitivity C).

        With ``units`` (:class:`~skdp.privacy.UnitBounds`) the same plan is
        about units: a unit's weighted, clipped records move the sum by at
        most C, the rate is over units, and the report names the unit."""
        extra = ({} if units is None else
                 {"n_records": units.n_units, "privacy_unit": units.description})
        return ReleasePlan(
            BatchReleases(
                [Release("gradient", sensitivity=self.max_grad_norm)],
                steps=steps, sampling_rate=sampling_rate,
            ),
            neighboring=self._option("neighboring"), accountant=self._option("accountant"),
            **extra,
        )


@document_solver_options
class DPSGDClassifier(_DPSGDMixin, BaseDPClassifier):
    """Logistic regression or MLP trained with differentially private SGD.

    Each step Poisson-samples a batch (every record joins with probability
    ``q = batch_size / n_samples``, or ``q = sample_rate``), clips each record's whole gradient to
    ``max_grad_norm``, adds Gaussian noise of standard deviation
    ``noise_multiplier * max_grad_norm`` to the sum and divides by the
    expected batch size. The privacy loss of all steps is accounted with
    dp-accounting, and ``fit`` enforces the ``(epsilon, delta)`` budget by
    calibrating the noise for the requested number of steps (or, when
    ``noise_multiplier`` is given, by stopping when the budget is spent).

    The unit of privacy is one whole record (features and label), under
    add/remove-one neighbours unless ``neighboring="replace"``.

    Parameters
    ----------
    epsilon : float or None, default=1.0
        Privacy budget. ``None`` trains non-privately, for reference: gradients
        are still clipped (so the optimisation matches the private run; set
        ``max_grad_norm=np.inf`` to turn clipping off) but no noise is added.
        The guarantee is about one record (add or remove one row), or, with
        ``fit(unit_ids=...)``, about one unit -- all records of a person --
        with at most ``max_records_per_unit`` of them used (see
        :ref:`units`).
    delta : float, default=1e-5
        Privacy budget; keep it well below ``1 / n_samples``.
    max_grad_norm : float, default=4.0
        Clipping bound C on each per-sample gradient's l2 norm. The default
        suits standardized features (a record's gradient is about the norm
        of its feature vector): clipping much below that biases the
        probabilities toward the majority class, much above it buys noise.
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size; the sampling rate is
        ``batch_size / n_samples``. ``"auto"`` uses
        ``min(n_samples // 4, max(64, round(12 * sqrt(n_samples))))``: about
        2000 for 30,000 records, and never more than a quarter of a small
        data set. Ignored when ``sample_rate`` is given.
    max_epochs : float, default=10
        Training length in expected passes over the data; the step count is
        ``round(max_epochs / q)`` with q the sampling rate.
    max_steps : int or None, default=None
        Step count; overrides ``max_epochs`` when given.
    learning_rate : float or "auto", default="auto"
        Step size applied to the noisy mean gradient. ``"auto"`` is 0.5
        unless the noise would move each weight by more than 0.3 (standard
        deviation of the noise's random walk over the fit,
        ``lr * noise_multiplier * max_grad_norm * sqrt(n_steps) / batch``),
        and then the step size that keeps it at 0.3: it lowers the step only
        for fits with little data per unit of noise (below about 1,000
        records or units at ``epsilon=1``; chosen on held-out Adult rows of
        300 to 3,000 and a person panel). It depends on public quantities
        only; ``learning_rate_`` holds the value used.
    alpha : float, default=0.0
        Strength of the L2 penalty ``alpha / 2 * ||W||^2`` on the weights
        (not the intercepts) added to the mean loss. It does not depend on the
        data, so its gradient is added after the noise (post-processing) and
        is neither clipped nor noised. For a binary linear model it equals
        ``LogisticRegression(C=2 / (n_samples * alpha))`` (the two-logit
        softmax puts half of ``coef_`` on each logit).
    hidden_layer_sizes : tuple of int, default=()
        Hidden layers of an MLP; empty gives (multinomial) logistic regression,
        trained through a closed-form per-sample-gradient path.
    module : callable or None, default=None
        ``module(n_features, n_classes) -> torch.nn.Module`` returning logits;
        overrides ``hidden_layer_sizes``. Must not use BatchNorm.
    sensitive_columns : str, int or list, default=None
        Accepted for interface compatibility with the fairness estimators
        (columns of X removed from the inputs); DP-SGD does not use groups.
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
        it leaves out gets 1) is public and costs nothing. ``"balanced"`` weighs
        class c by ``n_samples / (n_classes * count_c)`` with the counts from
        one Gaussian release (2 % of the budget, in GDP ``mu^2``, accounted in
        ``dp_event_`` as ``"class_counts"``); noisy counts are floored at 1 and
        every weight is kept within a factor 100 of the largest.
    max_sample_weight : float, default=1.0
        Public bound on the weights of ``fit(sample_weight=...)``; larger
        weights are clipped to it (with a warning). Each record's clipped
        gradient -- and every other clipped per-record term of the algorithm --
        is multiplied by ``w_i / max_sample_weight``, in [0, 1], *after*
        clipping, so one record still moves every released sum by at most its
        sensitivity: the noise, ``epsilon_`` and ``dp_event_`` do not depend on
        the weights, and Poisson sampling stays per record. A record of weight
        1 counts ``1 / max_sample_weight`` of a full record, so keep the bound
        at the largest weight you need (without ``sample_weight`` every record
        has weight 1). See :ref:`privacy-sample-weights`.
    calibration : {"auto"} or None, default="auto"
        Private calibration of the predicted probabilities after training
        (binary problems). ``"auto"`` maps each score ``s`` to ``scale * s + shift`` (Platt scaling) fitted on one accounted release of the
        counts of (score bin, true class) of the trained model (10 % of the
        budget, in ``dp_event_`` as ``"score_calibration"``; see
        :ref:`privacy-after-training`); ``score_calibration_`` holds the
        ``(scale, shift)`` applied. None keeps the trained scores and leaves
        that share to training. ``"auto"`` calibrates only when the budget
        allows: with at least 2,000 noise standard deviations of training
        records or units (about 23,600 at ``epsilon=1``, 3,800 at
        ``epsilon=8``, ``delta=1e-5``); below, DP-SGD's probabilities are
        close to calibrated and the release's share of the budget served
        training better on held-out data (``score_calibration_`` is None).
    model_check : bool, default=True
        Check the returned model privately on its training records: one
        accounted release of its (group, true class, predicted class) counts
        and its clipped log-loss (2 % of the budget, ``"model_check"`` in
        ``dp_event_``), from which ``prediction_shares_`` and
        ``check_log_loss_`` follow and a :class:`~skdp.exceptions.ModelCheckWarning`
        says when the model is (nearly) constant or worse than a constant
        predictor. Skipped, with a warning and nothing spent, when the
        training records (or units) are too few for its noise to tell a
        constant classifier from a useful one (fewer than about 2,640 at
        ``epsilon=1``, 425 at ``epsilon=8``, ``delta=1e-5``, for two classes
        without groups). False skips
        it (the attributes are then None) and leaves its share to training.
    warm_start : bool, default=False
        With True, ``fit`` on a fitted estimator starts from its parameters
        (``coef_`` and ``intercept_``, or the module's state) instead of a
        fresh model; ``X`` must have as many features (and ``y`` the same
        classes). The new fit spends its own budget;
        ``dp_event_`` becomes the composition of the previous and the new
        events, and ``epsilon_`` and ``privacy_report_`` the accountant's for
        it. Composition assumes the worst case, that both fits saw the same
        records. The optimizer (momentum, averaging) starts afresh.
    solver_options : dict or None, default=None
        Settings of the solver that one default serves (the keys below; a key
        left out keeps its default; an unknown key or a bad value is an error
        at ``fit``):

        {solver_options}
    random_state : int, RandomState instance or None, default=None
        ``None`` (the default, and the setting for deployment): Poisson
        sampling and noise come from the operating system's cryptographically
        secure generator (:class:`skdp.privacy.SecureGenerator`), so nobody --
        not even someone who seeded numpy's global generator or holds the
        fitted estimator -- can replay the noise; fits are not reproducible.
        An int (or ``RandomState``) seeds a torch generator behind sampling,
        noise and initialisation, for reproducible *experiments*: anyone who
        knows the seed (it is stored in ``get_params()`` and in pickles) can
        regenerate the noise and subtract it, so do not publish a model
        trained with a known seed as private.
    device : str, default="cpu"
        Torch device for training.
    verbose : int, default=0
        Print progress. Progress lines contain only the step count and time.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit (e.g. a person) that a fit uses. Each unit keeps at most k of its
        records, a random subset drawn once per fit independently of their
        values, and each kept record weighs ``1 / min(|u|, k)``: a unit then
        moves every released sum by at most the bound of one record. Larger
        k uses more of a large unit's records (less bias toward small units'
        data, no extra noise); the default was chosen on held-out persons of
        a heavy-tailed panel (see :ref:`units`). Unused without ``unit_ids``.
    unit_column : str, int or None, default=None
        A column of ``X`` (a DataFrame's column name, or a position) that
        holds the unit ids, for use with metadata routing off; it is removed
        from the features like ``sensitive_columns``, and ``predict``
        accepts ``X`` with or without it. ``fit(unit_ids=...)`` takes
        precedence.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Linear model weights (None for MLPs).
    intercept_ : ndarray of shape (1,) or (n_classes,)
    module_state_ : dict or None
        State dict (numpy arrays) of the torch module, for MLPs.
    epsilon_ : float
        Epsilon spent, from a fresh dp-accounting accountant on ``dp_event_``
        (``skdp.privacy.compute_epsilon(dp_event_, delta_, accountant)``);
        ``inf`` when ``epsilon=None``.
    delta_ : float
    accountant_ : str
        Accountant used for ``epsilon_`` (and by :meth:`privacy_curve`).
    dp_event_ : dp_accounting.DpEvent
        The event actually composed: ``n_steps_`` Poisson-subsampled Gaussian
        releases.
    privacy_report_ : skdp.privacy.PrivacyReport
        The release plan's report: epsilon, event and the noise of each
        release (here one, ``"gradient"``).
    noise_multiplier_ : float
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public, like the number of
        records); None without them.
    n_steps_ : int
    learning_rate_ : float
        The step size used (``learning_rate``, or its ``"auto"`` value).
    sampling_rate_ : float
        Poisson sampling rate q of the fit.
    batch_size_ : int
        Expected batch size ``q * n_samples``, rounded (equal to
        ``batch_size`` unless ``sample_rate`` was given).
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights applied (``class_weight`` over its largest, times
        ``max_sample_weight``); for ``"balanced"`` a function of the noisy
        class counts. None without ``class_weight``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    skdp.DPRateConstrainedClassifier : DP training with fairness rate constraints.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdp import DPSGDClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> clf = DPSGDClassifier(epsilon=1.0, batch_size=128, random_state=0).fit(X, y)
    >>> clf.epsilon_ <= 1.0
    True
    >>> clf.score(X, y) > 0.85
    True

    Sampling each record with probability 5 % instead of a fixed expected
    batch, with noise from the operating system's secure generator:

    >>> clf = DPSGDClassifier(solver_options={"sample_rate": 0.05, "secure_rng": True})
    >>> clf = clf.fit(X, y)
    >>> clf.sampling_rate_, clf.batch_size_
    (0.05, 100)
    """

    #: ``batch_size="auto"`` is ``min(n // 4, max(64, 12 sqrt(n)))`` (chosen
    #: with the other defaults on held-out parts of Adult, COMPAS and German
    #: credit, for calibrated probabilities at epsilon >= 1).
    _auto_batch_factor = 12

    _solver_option_specs = {
        **_DPSGDMixin._dpsgd_options,
        "averaging": SolverOption(
            0.5, [Interval(Real, 0, 1, closed="left")], "float in [0, 1)",
            "Fraction of the final steps whose iterates are averaged into the returned "
            "model (post-processing of released iterates: no privacy cost); averaging "
            "cancels much of the noise of the last steps, 0 returns the last iterate."),
    }

    # DP-SGD's log-loss training leaves probabilities close to calibrated:
    # below 2,000 noise standard deviations of records (about 23,600 at
    # epsilon=1), the calibration's share of the budget cost training more
    # than the map gained on Adult subsamples of 300 to 20,000 rows (epsilon
    # 1 and 3, benchmarks/bench_small_data.py --tune)
    _fit_releases = (ClassCounts(), ScoreCalibration(min_records_per_std=2000.0), ModelCheck(),
                     ClippedShare())

    _parameter_constraints = {
        **BaseDPClassifier._parameter_constraints,
        **_DPSGDMixin._dpsgd_constraints,
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=4.0,
        batch_size="auto",
        max_epochs=10,
        max_steps=None,
        learning_rate="auto",
        alpha=0.0,
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
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.learning_rate = learning_rate
        self.alpha = alpha
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

    def fit(self, X, y, *, sensitive_features=None, sample_weight=None, unit_ids=None):
        """Train under the (epsilon, delta) budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric features.
        y : array-like of shape (n_samples,)
            Class labels.
        sensitive_features : array-like, default=None
            Accepted so that the estimator fits in the same pipelines and
            searches as the fairness estimators; stored as ``groups_`` but not
            used in training.
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
            once per fit), each weighted ``1 / min(|u|, max_records_per_unit)``,
            and batches are Poisson samples of units. Requested by default
            with metadata routing on; with routing off, ``unit_column`` can
            name a column of ``X`` that holds them. See :ref:`units`.

        Returns
        -------
        self : DPSGDClassifier
        """
        self._validate_params()
        previous = self._previous_fit()
        X, y_codes, group_codes, unit_ids = self._validate_training_data(
            X, y, sensitive_features, units=True, unit_ids=unit_ids)
        self._check_warm_start(previous, unit_ids)
        sample_weight = self._validated_sample_weight(sample_weight, X, y_codes)

        def onehot(report, generator, device, weights=None):
            return one_hot(y_codes, len(self.classes_), torch.float32, device)

        return self._fit_dpsgd(X, onehot, CrossEntropyHead(), y_codes=y_codes,
                               group_codes=group_codes, sample_weight=sample_weight,
                               previous=previous, unit_ids=unit_ids)

