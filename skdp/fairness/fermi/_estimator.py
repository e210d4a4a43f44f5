"""DPFERMIClassifier: DP-FERMI / SteFFLe behind a scikit-learn interface."""

import itertools
import warnings
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..._fit.classifier import BaseDPClassifier
from ..._fit.options import BASE_SOLVER_OPTIONS, SolverOption, document_solver_options
from ..._fit.columns import split_sensitive_columns
from ..._fit.checks import ModelCheck
from ..._fit.releases import is_balanced
from ..._fit.state import FitState
from ..._fit.units import MAX_RECORDS_PER_UNIT, UNIT_CONSTRAINTS
from ..._groups import _is_dataframe, encode_groups, select_columns
from ...models import gather_store_rows, is_row_store
from ...debug import report_fit_times
from ...privacy import compose_reports, current_communicator, silo_summary
from .._compiled import make_constraints
from .._verdicts import check_constraints
from ._ermi import FAIRNESS_NOTIONS, ermi, fairness_strata
from ._server import FermiRun, LocalSilos, engine, train_on_silos
from ._trainer import SCHEDULES
from .protocol import PRIVACY_UNITS, PROTOCOL

#: Engines that move the silos' messages (see :ref:`federated`).
ENGINES = ("inprocess", "flower-simulation")


def _silo_rows(X, start, stop, order):
    """The rows of the silo at ``start:stop`` of the records in silo order
    (``order``: their rows of ``X``, or None when ``X`` is in silo order); a
    numpy array also when ``X`` is a row store."""
    if order is None:
        return np.asarray(X[start:stop])
    if is_row_store(X):
        return gather_store_rows(X, order[start:stop])
    return X[order[start:stop]]


@document_solver_options
class DPFERMIClassifier(BaseDPClassifier):
    """Fair classifier trained privately from one or several data silos.

    Implements DP-FERMI and its federated form SteFFLe (Gupta, Poornash,
    Lowy & Razaviyayn, "A Stochastic Optimization Framework for Private and
    Fair Learning From Decentralized Data"): noisy stochastic gradient
    descent-ascent on ::

        min_theta max_W  mean_i [ loss(theta; x_i, y_i) + lam * psi_i(theta, W) ]

    whose inner maximum is ``loss + lam * ERMI``: ERMI (exponential Renyi
    mutual information) is the chi-squared divergence between the joint
    law of the (soft) prediction and the sensitive group and the product of
    their marginals -- conditionally on the label for equalized odds and
    equal opportunity. It is 0 exactly when predictions are independent of
    the group. Written with the dual matrix ``W``, every term is an
    average over records, so minibatch gradients are unbiased. See
    :ref:`fermi`.

    With several silos (``silo_ids``), each silo samples its own Poisson
    batches, computes its clipped gradient sums, adds noise calibrated to its
    own record count from its own random generator and sends them; the
    server averages the messages weighted by silo size and updates the model
    and ``W``. One silo is centralized DP-FERMI.

    Privacy is per silo (inter-silo record-level DP, ISRL-DP): each silo's
    messages over the whole run are ``(epsilon, delta)``-DP with respect to
    its own records, whatever the other silos do. By default the unit is a
    whole record (features, label and group; add/remove-one): every gradient
    that touches a record -- the model gradient of the loss and the ERMI
    term, and the W-gradient -- is clipped and noised, and the releases of a
    round are accounted as one mechanism. Silo sizes are treated as public.
    With ``fit(unit_ids=...)`` the unit is a person (or any unit) with all
    its records, each unit inside one silo: every silo keeps at most
    ``max_records_per_unit`` records of each of its units, weighs every
    per-record term of every release by ``1 / min(|u|, k)``, samples units,
    and its ``epsilon`` is about adding or removing one of its units (see
    :ref:`units`).

    Parameters
    ----------
    fairness : {"demographic_parity", "equalized_odds", "equal_opportunity"}, \
            default="demographic_parity"
        Independence penalized: prediction and group (demographic parity),
        given each label (equalized odds, one dual matrix per class) or
        given the label ``classes_[1]`` (equal opportunity). Any number of
        classes and groups.
    lam : float, default=1.0
        Weight of the ERMI term; 0 gives (private) logistic regression and
        larger values trade accuracy for fairness.
    epsilon : float or None, default=1.0
        Privacy budget of each silo. ``None`` trains without noise (clipping
        still applies), for reference.
        About one record (as ``privacy_unit`` defines the change), or with
        ``fit(unit_ids=...)`` one unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
        Keep it well below ``1 / n_j`` of the smallest silo.
    privacy_unit : {"record", "sensitive_attribute"}, default="record"
        ``"record"``: whole records are protected. ``"sensitive_attribute"``:
        the paper's weaker notion -- features and labels are public, only
        the group of a record is protected (replace-one), and ``epsilon_``
        is about the group alone. The loss and ERMI parts of each record's
        gradient are clipped separately, and the noise on their sum is
        ``max(lam, 1)`` times the noise the ERMI part needs, so no record's
        gradient is ever released unclipped or without noise (unlike the
        paper, which uses the loss gradient exactly). The fitted
        ``privacy_unit_`` names the notion. A federated silo accepts it
        only if its own policy allows it (:class:`skdp.federated.SiloPolicy`).
        With ``unit_ids`` the notion applies to units: ``"record"`` protects
        all records of one unit (add or remove the unit),
        ``"sensitive_attribute"`` the groups of all records of one unit
        (replace them all; features and labels public), since a person's
        group is usually the same in all their records. Every sensitivity
        holds per unit as it does per record: a unit's factors sum to 1.
    max_grad_norm : float, default=4.0
        Clipping bound C of each record's model gradient (of ``loss + lam *
        psi``; of the loss and the psi parts separately with
        ``privacy_unit="sensitive_attribute"``).
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size of each silo (its sampling rate is
        ``batch_size / n_j``). ``"auto"``: every silo samples at the rate
        ``q = min(n // 4, max(64, round(12 * sqrt(n)))) / n`` with ``n`` all
        records (about 2,200 / 32,500 on Adult), so that N silos run as many
        rounds as one, each with an expected batch of ``q * n_j``.
    max_epochs : float, default=10
        Training length in expected passes over the data (over an average
        silo with an integer ``batch_size``).
    max_steps : int or None, default=None
        Number of rounds; overrides ``max_epochs``.
    learning_rate : float, default=1.0
        Model step size (on the server's averaged noisy gradient).
    hidden_layer_sizes : tuple of int, default=()
        Hidden layers of an MLP; empty gives (multinomial) logistic regression
        with closed-form per-record gradients.
    module : callable or None, default=None
        ``module(n_features, n_classes) -> torch.nn.Module`` returning logits
        (no BatchNorm, no dropout); trained through ``torch.func``.
    sensitive_columns : str, int or list, default=None
        Columns of X holding the group, used when ``sensitive_features`` is
        not passed to ``fit`` and removed from the inputs (also when
        predicting): the way to use the estimator without metadata routing.
    sensitive_groups : array-like or None, default=None
        Public list of groups; ``groups_`` is then this list and other groups
        are an error.
    silo_column : str, int or None, default=None
        A column of X holding each record's silo, used when ``silo_ids`` is
        not passed to ``fit`` and removed from the inputs (also when
        predicting). It is removed before ``sensitive_columns`` and
        ``unit_column`` are read, so integer ones index the remaining columns.
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
        largest. With ``"balanced"`` each silo releases its own noisy class
        counts (``privacy_unit="sensitive_attribute"``: exact, the labels are
        public there) and the server sums them.
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
        every record has weight 1). DP-FERMI weighs every per-record term: the
        clipped model gradient (loss and ERMI terms), the clipped W-gradient,
        the monitoring terms and the group counts behind private priors.
        Weights need ``engine="inprocess"``: the federated engines raise a
        ValueError (a remote silo would have to weigh its own records, which
        the protocol does not carry). See :ref:`privacy-sample-weights`.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit that a fit uses. Each silo keeps at most k records of each of
        its units, a random subset drawn once per fit independently of their
        values, and each kept record weighs ``1 / min(|u|, k)`` in every
        release (the clipped model and W-gradients, the monitoring terms,
        the group and class counts and the model check), so a unit moves
        each release by at most the sensitivity of one record; batches are
        Poisson samples of units. k changes neither the noise nor
        ``epsilon_``, only how many of a large unit's records are used.
        Unused without ``unit_ids``. See :ref:`units`.
    unit_column : str, int or None, default=None
        A column of ``X`` holding each record's unit id, for use with
        metadata routing off; it is removed from the features (also when
        predicting) like ``sensitive_columns``. ``fit(unit_ids=...)`` takes
        precedence.
    model_check : bool, default=True
        Check the returned model privately on its training records: one
        accounted release of its (group, true class, predicted class) counts
        and its clipped log-loss (2 % of the budget, ``"model_check"`` in
        ``dp_event_``), from which ``prediction_shares_`` and
        ``check_log_loss_`` follow and a :class:`~skdp.exceptions.ModelCheckWarning`
        says when the model is (nearly) constant or worse than a constant
        predictor; :meth:`check_fairness` reads rate-constraint verdicts
        from it. Each silo releases its own counts, whatever their number
        (the server of a federated fit learns the silos' sizes only from
        them); with too few records the check says it cannot judge. False
        skips it (the attributes are then None) and leaves its share to
        training.
    warm_start : bool, default=False
        With True, ``fit`` on a fitted estimator starts from its parameters
        (``coef_`` and ``intercept_``, or the module's state) instead of a
        fresh model; ``X`` must have as many features (and ``y`` the same
        classes). The new fit spends its own budget; ``dp_event_`` becomes the
        composition of the previous and the new events, and ``epsilon_`` and
        ``privacy_report_`` the accountant's for it. Composition assumes the
        worst case, that both fits saw the same records. With several silos
        the silos must be the same, and each silo's ``silo_dp_events_`` entry
        is composed with its previous one. Only the model carries over: ``W``
        and the optimizer start afresh. It works with every engine (the
        server's model starts from the previous one).
    solver_options : dict or None, default=None
        Settings of the solver that one default serves (the keys below; a key
        left out keeps its default; an unknown key or a bad value is an error
        at ``fit``):

        {solver_options}
    random_state : int, RandomState instance or None, default=None
        Seeds model initialization and each silo's sampling and noise: the
        noise of round ``r`` of silo ``j`` comes from a generator seeded from
        ``(seed, j, r)``, its Poisson batches a chunk of rounds at a time
        from one seeded from ``(seed, j, chunk)``. ``None``: every silo draws
        from the operating system's CSPRNG (unpredictable, and not
        reproducible).
    device : str, default="cpu"
    verbose : int, default=0
        Progress lines show only noisy (private) quantities.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    groups_ : ndarray or None
        Groups seen in ``fit`` (or ``sensitive_groups``).
    coef_, intercept_ : ndarray
        Linear model (scikit-learn layout); ``module_state_`` for MLPs.
    W_ : ndarray of shape (n_groups, n_classes) or (n_classes, n_groups, n_classes)
        Final dual matrix (one per class for equalized odds).
    group_priors_ : ndarray of shape (n_strata, n_groups)
        Priors used: released noisy estimates (``"private"``) or the public
        ones. Rows are strata: one for demographic parity and equal
        opportunity, one per class for equalized odds.
    small_groups_ : ndarray
        Groups whose noisy prior fell below ``min_group_share`` and was
        raised to it in the ERMI term (empty when none).
    w_radius_, w_clip_ : float
        Dual radius and the per-record W-gradient clipping bound.
    n_silos_ : int
    silos_ : ndarray of shape (`n_silos_`,)
        Silo labels, in the order of the per-silo attributes.
    silo_sizes_ : ndarray of shape (`n_silos_`,)
        Records per silo, or privacy units per silo with ``unit_ids`` (the
        number of records is then not public). Treated as public: silos are
        institutions that publish their sizes; the sampling rates and the
        server's weights depend on them.
    n_units_ : int or None
        Number of privacy units (all silos) with ``unit_ids``; None without.
    silo_epsilons_ : ndarray of shape (`n_silos_`,)
        Each silo's epsilon: the accountant's figure for the noise that
        silo added (every silo calibrates its own release plan for its own
        record count and reports its noise scales; the server accounts
        them; in process the same calculation runs here). ``epsilon_`` is
        their maximum; inf when ``epsilon=None``.
    silo_dp_events_ : list of dp_accounting.DpEvent
        Each silo's accounted event: the one-off noisy counts (with
        ``group_priors="private"``) composed with ``n_steps_`` Poisson-sampled
        Gaussian rounds that dominate its three releases per round.
    epsilon_ : float
        ``max(silo_epsilons_)``: the guarantee for every record.
    delta_ : float
    dp_event_ : dp_accounting.DpEvent
        The event whose epsilon is ``epsilon_``.
    accountant_ : str
    privacy_report_ : skdp.privacy.PrivacyReport
        Report of that silo (noise of each release by name: ``"theta"``,
        ``"w"``, ``"monitor"``, ``"group_counts"``); its ``privacy_unit``
        is ``"record"``, or ``"unit (max_records_per_unit=k)"`` with
        ``unit_ids``.
    silo_privacy_reports_ : list of PrivacyReport
    privacy_unit_ : str
        What epsilon is about: ``"record"``, ``"unit
        (max_records_per_unit=k)"`` with ``unit_ids``, or
        ``"sensitive_attribute"`` (the weaker notion).
    noise_calibration_ : str
    n_steps_ : int
        Rounds run.
    sampling_rate_, batch_size_ : ndarray of shape (`n_silos_`,)
        Each silo's Poisson rate and expected batch size (of units with
        ``unit_ids``).
    noise_multiplier_ : ndarray of shape (`n_silos_`,)
        Each silo's noise over sensitivity of its model-gradient release
        (``"theta"``) in a round (NaN without privacy); the other releases'
        are in ``silo_privacy_reports_``.
    history_ : dict of ndarray
        Per round: ``"loss"`` (mean cross-entropy, clamped at 5 per record),
        ``"fairness"`` (mean ``psi``, clamped to [-2, 2] per record: the
        batch estimate of the ERMI term at the current ``W``) and
        ``"clipped_fraction"``, all from the silos' noisy monitoring
        releases (accounted); ``"w_norm"`` (Frobenius norm of ``W``) and
        ``"learning_rate"``, post-processing.
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights applied (``class_weight`` over its largest, times
        ``max_sample_weight``); for ``"balanced"`` a function of the noisy
        class counts. None without ``class_weight``.
    n_features_in_ : int
    feature_names_in_ : ndarray

    See Also
    --------
    skdp.DPRateConstrainedClassifier : DP training under explicit rate
        constraints (a tolerance instead of a penalty).
    skdp.datasets.make_silos : Split records into silos of controlled
        heterogeneity.

    Examples
    --------
    >>> from skdp import DPFERMIClassifier
    >>> from skdp.datasets import make_fair_classification
    >>> from skdp.metrics import demographic_parity_difference
    >>> X, y, group = make_fair_classification(
    ...     n_samples=4000, label_group_correlation=0.6, random_state=0)
    >>> clf = DPFERMIClassifier(lam=2.0, epsilon=1.0, random_state=0)
    >>> clf = clf.fit(X, y, sensitive_features=group)
    >>> clf.epsilon_ <= 1.0
    True
    >>> gap = demographic_parity_difference(y, clf.predict(X), sensitive_features=group)

    Three silos, each with its own privacy budget:

    >>> silos = [0, 1, 2] * 1333 + [0]
    >>> clf = DPFERMIClassifier(lam=2.0, random_state=0)
    >>> clf = clf.fit(X, y, sensitive_features=group, silo_ids=silos)
    >>> clf.n_silos_, clf.silo_sizes_.tolist()
    (3, [1334, 1333, 1333])
    >>> bool(clf.epsilon_ == clf.silo_epsilons_.max())
    True
    """

    # routing on: fit asks for the groups and the silos by default
    __metadata_request__fit = {"sensitive_features": True, "silo_ids": True}

    # trained by its own protocol: the silos release their class counts and
    # check the returned model (with ModelCheck's statistics); no calibration
    _fit_releases = (ModelCheck(),)

    #: Trained by :func:`skdp.distributed.fit_data_parallel` (one silo).
    _data_parallel = True

    # its fit does not run BaseDPEstimator._fit_private: X is checked for
    # finite values when it is validated
    _finite_check_with_norms = False

    _released_attributes = BaseDPClassifier._released_attributes | {
        "W_", "history_", "group_priors_", "w_clip_", "w_radius_", "small_groups_",
    }

    _solver_option_specs = {
        **{key: value for key, value in BASE_SOLVER_OPTIONS.items()
           if key not in ("noise_multiplier", "neighboring")},
    "noise_calibration": SolverOption(
        'accountant', [StrOptions({"accountant", "paper"})], '{"accountant", "paper"}',
        '``"accountant"``: noise calibrated by dp-accounting so that every silo meets the '
        'budget. ``"paper"``: the closed form of the paper\'s Theorem 3.3 for the model '
        'and W-gradient noise (reproduction only; a warning says so). ``epsilon_`` is '
        "always the accountant's value for the noise that ran, and may exceed ``epsilon`` "
        'in ``"paper"`` mode.'),
    "group_priors": SolverOption(
        'private', [StrOptions({"private"}), "array-like", dict], '"private", array-like or dict',
        'Group frequencies ``P(s)`` (``P(s | y)`` for equalized odds and equal '
        'opportunity) that enter ERMI and the W-gradient bound. ``"private"`` estimates '
        'them from noisy per-silo group counts released before training with 2 % of the '
        'budget (accounted). Public priors: for demographic parity and equal opportunity '
        'an array of shape (n_groups,) in ``groups_`` order or a dict ``{group: p}``; for '
        'equalized odds an array of shape (n_classes, n_groups) (rows in ``classes_`` '
        'order, each summing to 1) or a dict ``{class: {group: p}}``. With '
        '``epsilon=None``, ``"private"`` uses the exact frequencies.'),
    "min_group_share": SolverOption(
        0.02, [Interval(Real, 0, 0.5, closed="left")], 'float in [0, 0.5)',
        'With ``group_priors="private"``: a group whose noisy prior (in its stratum) '
        'falls below this share is treated as holding this share in the ERMI term (its '
        'prior is raised, post-processing of the released counts), so that a tiny group '
        "cannot blow up everyone's W-gradient bound and noise (``2 / sqrt(min prior)``). "
        'The groups raised are listed in ``small_groups_`` and a warning names them. 0 '
        'keeps every prior as released.'),
    "w_radius": SolverOption(
        'auto', [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})], 'float or "auto"',
        'Frobenius radius of each dual matrix. ``"auto"`` uses ``sqrt(n_classes / min '
        "prior)``, which holds the exact maximizer for every model. Each record's "
        'W-gradient is clipped to ``w_clip_ = 2 / sqrt(min prior)``, computed from the '
        'released (or public) priors.'),
    "schedule": SolverOption(
        'cosine', [StrOptions(set(SCHEDULES))], '{"constant", "cosine", "step"}',
        'Step-size schedule: constant, cosine decay to 0, or times 0.8 after each tenth '
        "of the rounds (the paper's decay)."),
    "momentum": SolverOption(
        0.5, [Interval(Real, 0, 1, closed="left")], 'float in [0, 1)',
        'Heavy-ball momentum of the ``"sgd"`` model step (post-processing).'),
    "optimizer": SolverOption(
        'sgd', [StrOptions({"sgd", "adam"})], '{"sgd", "adam"}',
        "Optimizer of the model's step on the averaged noisy gradients "
        "(post-processing)."),
    "w_learning_rate": SolverOption(
        0.5, [Interval(Real, 0, None, closed="left")], 'float',
        'Ascent step size of ``W`` on the averaged noisy W-gradient of ``psi``.'),
    "return_iterate": SolverOption(
        'average', [StrOptions({"average", "last"})], '{"average", "last"}',
        'The model returned: the average of the parameters over the final ``averaging`` '
        'fraction of rounds (post-processing), or the last one.'),
    "averaging": SolverOption(
        0.5, [Interval(Real, 0, 1, closed="both")], 'float in [0, 1]',
        'Fraction of the final rounds averaged by ``return_iterate="average"``.'),
    "engine": SolverOption(
        'inprocess', [StrOptions(set(ENGINES))], '{"inprocess", "flower-simulation"}',
        'What runs the silos. ``"inprocess"``: all silos in this process, in one batched '
        'pass per round (no extra dependency). ``"flower-simulation"``: each silo is a '
        "Flower ``ClientApp`` in Flower's simulation engine (``pip install "
        "'flwr[simulation]==1.41.0'``), with its own release plan, budget and noise, "
        'exchanging only '
        'noisy messages with a ``ServerApp``. Seeded fits give the same model in both '
        '(and in a Flower deployment, see :ref:`federated`).'),
    "engine_options": SolverOption(
        None, [dict, None], 'dict or None',
        'Options of the Flower engine: ``"round_timeout"`` (seconds a round waits for '
        'every silo, default 120), ``"node_timeout"`` (seconds to wait for the silos\' '
        'nodes, default 120) and ``"backend_config"`` (Flower\'s simulation backend '
        'settings, default one CPU per silo). In process: ``"batched"`` (default True) '
        'computes all silos of a round in one tensor pass, each with its own noise; False '
        "runs each silo's round through the function remote silos run (one thread, the "
        "silo's own step on its rows), for results bit-identical to the Flower engines on "
        'the same machine (batched results equal them up to float rounding; see '
        ':ref:`privacy-reproducibility`).'),
    }

    _parameter_constraints = {
        **BaseDPClassifier._parameter_constraints,
        "fairness": [StrOptions(set(FAIRNESS_NOTIONS))],
        "lam": [Interval(Real, 0, None, closed="left")],
        "privacy_unit": [StrOptions(set(PRIVACY_UNITS))],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "silo_column": [str, Integral, None],
        **UNIT_CONSTRAINTS,
    }
    def __init__(
        self,
        fairness="demographic_parity",
        *,
        lam=1.0,
        epsilon=1.0,
        delta=1e-5,
        privacy_unit="record",
        max_grad_norm=4.0,
        batch_size="auto",
        max_epochs=10,
        max_steps=None,
        learning_rate=1.0,
        hidden_layer_sizes=(),
        module=None,
        sensitive_columns=None,
        sensitive_groups=None,
        silo_column=None,
        random_state=None,
        device="cpu",
        verbose=0,
        class_weight=None,
        max_sample_weight=1.0,
        warm_start=False,
        model_check=True,
        max_records_per_unit=MAX_RECORDS_PER_UNIT,
        unit_column=None,
        solver_options=None,
    ):
        self.fairness = fairness
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.learning_rate = learning_rate
        self.hidden_layer_sizes = hidden_layer_sizes
        self.module = module
        self.sensitive_columns = sensitive_columns
        self.sensitive_groups = sensitive_groups
        self.silo_column = silo_column
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.class_weight = class_weight
        self.max_sample_weight = max_sample_weight
        self.warm_start = warm_start
        self.model_check = model_check
        self.max_records_per_unit = max_records_per_unit
        self.unit_column = unit_column
        self.solver_options = solver_options

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, sensitive_features=None, silo_ids=None, sample_weight=None,
            unit_ids=None):
        """Train under each silo's (epsilon, delta) budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sensitive_features : array-like of shape (n_samples,) or (n_samples, k), default=None
            Group of each record; several columns form intersectional groups.
            ``None`` takes them from ``sensitive_columns``; if that is None
            too, all records form one group and the ERMI term is vacuous (a
            warning says so).
        silo_ids : array-like of shape (n_samples,), default=None
            Silo of each record (any labels). ``None`` takes them from
            ``silo_column``; if that is None too, all records are in one silo
            (centralized DP-FERMI).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each record (None: all 1), clipped to
            ``max_sample_weight``; it scales the record's clipped contribution,
            so the privacy guarantee does not change. With metadata routing on,
            request it with ``set_fit_request(sample_weight=True)``.
            Needs ``engine="inprocess"``.

        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id; any hashable,
            no missing value). ``epsilon_`` is then about adding or removing
            *all* records of one unit; all records of a unit must be in one
            silo. Each silo keeps at most ``max_records_per_unit`` records of
            each of its units, weighted ``1 / min(|u|, max_records_per_unit)``,
            and samples units. Requested by default with metadata routing on;
            with routing off, ``unit_column`` can name a column of ``X``. The
            federated engines hand each silo its own ids. See :ref:`units`.

        Returns
        -------
        self : DPFERMIClassifier
        """
        self._validate_params()
        self._check_engine()
        previous = self._previous_fit()
        X, from_column = self._pop_silo_column(X)
        unit_argument = "unit_ids" if unit_ids is not None else "unit_column"
        X, y_codes, group_codes, unit_ids = self._validate_training_data(
            X, y, sensitive_features, units=True, unit_ids=unit_ids)
        unit_codes, n_units = self._validated_unit_ids(unit_ids, X.shape[0])
        self._check_warm_start(previous, unit_ids)
        sample_weight = self._validated_sample_weight(sample_weight, X, y_codes)
        self._check_engine_weights(sample_weight)
        n = X.shape[0]
        n_classes = len(self.classes_)
        group_codes, n_groups = self._check_groups(group_codes, n)
        silo_codes = self._encode_silos(from_column if silo_ids is None else silo_ids, n)
        # the records in silo order (silos in contiguous blocks); X itself
        # is never reordered: with its rows out of silo order the silos
        # read them through ``order`` (one int64 per row, not a copy of X)
        order = None
        if np.any(silo_codes[1:] < silo_codes[:-1]):
            order = np.argsort(silo_codes, kind="stable")
            silo_codes, y_codes, group_codes = silo_codes[order], y_codes[order], group_codes[order]
            if sample_weight is not None:
                sample_weight = sample_weight[order]
            if unit_codes is not None:
                unit_codes = unit_codes[order]
        self._check_warm_silos(previous)
        sizes = np.bincount(silo_codes, minlength=self.n_silos_)
        units = None
        if unit_codes is not None:
            units = self._units_per_silo(unit_codes, silo_codes, sizes, unit_argument, n_units)
        self._warn_single_group_silos(group_codes, silo_codes, n_groups)
        del silo_codes  # one int64 per record, not needed in training
        run, make_backend, device = self._prepare_run(previous)
        if self._option("engine") == "inprocess":
            batched = (self._option("engine_options") or {}).get("batched", True)
            X_t = self._to_tensor(X, device)
            weights = FitState(sample_weight=sample_weight, y_codes=y_codes)
            self._weigh_records(None, weights, None, None, X_t)
            transport = LocalSilos(X_t, y_codes, group_codes, sizes, self.fairness, n_classes,
                                   n_groups, device, batched, weights=weights.record_weights,
                                   units=units, rows=order)
            return self._store_fit(train_on_silos(run, transport, make_backend, device),
                                   previous)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        local = [None] * len(sizes) if units is None else np.split(units[0], bounds[1:-1])
        data = [
            (_silo_rows(X, a, b, order), y_codes[a:b], group_codes[a:b], unit)
            for a, b, unit in zip(bounds[:-1], bounds[1:], local)
        ]
        fit = engine(self._option("engine"))(run, data, make_backend, device,
                                             module=self.module,
                                             options=self._option("engine_options"))
        return self._store_fit(fit, previous)

    def fit_silos(self, transport, *, classes, groups=None, n_features):
        """Train on remote silos reached through ``transport``, given only
        public facts.

        The server never sees a record: it knows the public class and group
        lists, the number of features, and what the silos send (their record
        counts, their noisy group counts and their noisy gradient sums). Silos
        that hold unit ids send their number of units instead of records, and
        the fit is then about units (``n_units_``, ``privacy_report_``). See
        :ref:`federated` (``skdp.federated.fit_federated`` calls this).

        Parameters
        ----------
        transport : skdp.federated.SiloTransport
            Already connected (its ``hello`` done).
        classes : sequence
            Labels, in the order of the model's outputs.
        groups : sequence or None, default=None
            Sensitive groups, in code order (None: one group, no fairness
            term).
        n_features : int

        Returns
        -------
        self : DPFERMIClassifier
        """
        self._validate_params()
        self._check_engine()
        self._check_engine_weights(None)
        previous = self._previous_fit()
        self.classes_ = np.asarray(classes)
        if len(self.classes_) < 2:
            raise ValueError(f"classes must list at least two labels; got {list(classes)}.")
        self.groups_ = None if groups is None or len(groups) == 0 else np.asarray(groups)
        self.n_features_in_ = int(n_features)
        self.silos_ = np.asarray(transport.names)
        self.n_silos_ = len(transport.names)
        self._check_warm_start(previous)
        self._check_warm_silos(previous)
        run, make_backend, device = self._prepare_run(previous)
        return self._store_fit(train_on_silos(run, transport, make_backend, device), previous)

    def _units_per_silo(self, unit_codes, silo_codes, sizes, argument, n_units):
        """The units of each silo: every row's unit coded within its silo
        (``0 .. n_units_j - 1``) and each silo's number of units, for rows
        sorted by silo. A unit whose records are in two silos is refused: a
        silo bounds and accounts only the units it holds whole. In a
        data-parallel fit (one silo over the ranks) the codes are already
        those of all ranks' units."""
        if current_communicator().distributed:
            return unit_codes, [int(n_units)]
        n_silos = len(sizes)
        pairs = np.unique(unit_codes * n_silos + silo_codes)  # (unit, silo) present
        units_of_pair = pairs // n_silos
        spread = np.bincount(units_of_pair, minlength=int(unit_codes.max()) + 1)
        if (spread > 1).any():
            first = int(np.flatnonzero(spread > 1)[0])
            silos = self.silos_[pairs[units_of_pair == first] % n_silos].tolist()
            raise ValueError(
                f"{argument}: {int((spread > 1).sum())} unit(s) have records in more than one "
                f"silo (e.g. a unit in silos {silos[:5]}). A unit must live in one silo: each "
                "silo bounds and accounts only the units it holds whole. Put all records of "
                "a unit in one silo (e.g. assign silos by unit), or merge those silos."
            )
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        local = np.empty_like(unit_codes)
        counts = []
        for a, b in itertools.pairwise(bounds):
            _, local[a:b] = np.unique(unit_codes[a:b], return_inverse=True)
            counts.append(int(local[a:b].max()) + 1 if b > a else 0)
        return local, counts

    def _check_engine(self):
        engine = self._option("engine")
        if engine != "inprocess" and self._option("noise_calibration") == "paper":
            raise ValueError(
                f"solver_options['engine']={engine!r} needs the default noise calibration: "
                "the paper's noise depends on the released priors, which the silos do not "
                "calibrate against; leave 'engine' out of solver_options to reproduce the "
                "paper."
            )

    def _check_engine_weights(self, sample_weight):
        """Weights need the in-process engine (a ValueError naming the engine)."""
        weighted = (sample_weight is not None or self.class_weight is not None
                    or self.max_sample_weight != 1.0)
        engine = self._option("engine")
        if weighted and engine != "inprocess":
            raise ValueError(
                f"solver_options['engine']={engine!r} cannot weigh records: sample_weight, "
                "class_weight and max_sample_weight != 1 need the in-process engine (a "
                "federated silo would have to weigh its own records, which the protocol "
                f"{PROTOCOL} does not carry)."
            )

    def _previous_fit(self):
        previous = super()._previous_fit()
        if previous is not None:
            previous.silos = np.asarray(self.silos_)
            previous.silo_reports = list(self.silo_privacy_reports_)
        return previous

    def _check_warm_silos(self, previous):
        """``warm_start`` composes each silo's events with its previous ones,
        so the silos must be those of the previous fit."""
        if previous is None or np.array_equal(previous.silos, self.silos_):
            return
        silos = np.asarray(self.silos_).tolist()
        self.__dict__.update(previous.attributes, silos_=previous.silos,
                             n_silos_=len(previous.silos))
        raise ValueError(
            f"warm_start=True continues the previous fit, whose silos were "
            f"{previous.silos.tolist()[:10]}; this fit has the silos {silos[:10]}. Each silo's "
            "privacy loss is composed with its own, so the silos must be the same; use "
            "warm_start=False to train on other silos."
        )

    def _class_factors(self, state, report, generator):
        """Class factors of a ``class_weight`` dict; ``"balanced"`` is left to
        the silos' noisy class counts (:func:`train_on_silos`)."""
        if is_balanced(self.class_weight):
            self.class_weight_ = None
            return None
        return super()._class_factors(state, report, generator)

    def _prepare_run(self, previous=None):
        """The run's public settings, a backend factory and the device.

        Draws the seed of the fit (module initialisation, and the silos'
        randomness when seeded) and validates public group priors. With
        ``previous`` (``warm_start``) the factory's model starts from the
        previous fit's parameters.
        """
        n_classes = len(self.classes_)
        n_groups = 1 if self.groups_ is None else len(self.groups_)
        n_strata = n_classes if self.fairness == "equalized_odds" else 1
        _, seed, device = self._make_generator()
        seed = current_communicator().share(seed)  # data-parallel: the root's model
        silo_seed = None if (self.random_state is None or self._option("secure_rng")) else seed
        public = None
        if not self._private_priors():
            public = self._public_priors(n_strata, n_groups, n_classes)
        run = FermiRun(
            epsilon=self.epsilon, delta=float(self.delta), accountant=self._option("accountant"),
            privacy_unit=self.privacy_unit, noise_calibration=self._option("noise_calibration"),
            max_grad_norm=float(self.max_grad_norm), lam=float(self.lam),
            fairness=self.fairness, classes=tuple(self.classes_),
            groups=() if self.groups_ is None else tuple(self.groups_),
            n_features=int(self.n_features_in_),
            hidden_layer_sizes=tuple(int(h) for h in self.hidden_layer_sizes),
            batch_size=self.batch_size, sample_rate=self._option("sample_rate"),
            max_epochs=self.max_epochs, max_steps=self.max_steps, public_priors=public,
            w_radius=self._option("w_radius"), learning_rate=self.learning_rate,
            schedule=self._option("schedule"),
            momentum=self._option("momentum"), optimizer=self._option("optimizer"),
            w_learning_rate=self._option("w_learning_rate"),
            averaging=(self._option("averaging") if self._option("return_iterate") == "average"
                       else 0.0),
            seed=silo_seed, silo_names=tuple(str(s) for s in self.silos_),
            verbose=self.verbose, min_group_share=float(self._option("min_group_share")),
            class_counts=is_balanced(self.class_weight),
            max_records_per_unit=int(self.max_records_per_unit),
            model_check=bool(self.model_check),
        )

        def make_backend(X_t, n_outputs):
            backend = self._make_backend(X_t, n_outputs, seed)
            self._load_previous(backend, FitState(previous=previous))
            return backend

        return run, make_backend, device

    def _store_fit(self, fit, previous=None):
        """Fitted attributes from a :class:`~skdp.fairness.fermi.FermiFit`
        (with ``previous``, each silo's report composed with its previous
        one)."""
        # composed first: a silo whose privacy unit does not compose with its
        # previous one is refused before any fitted attribute changes
        reports = self._composed_silo_reports(fit.reports, previous)
        self.silo_sizes_ = fit.sizes
        self.group_priors_ = fit.priors
        groups = np.asarray(self.groups_ if self.groups_ is not None else [None], dtype=object)
        self.small_groups_ = groups[list(fit.small_groups)]
        if fit.small_groups:
            warnings.warn(
                f"Groups {list(self.small_groups_)} are too small for the ERMI term at this "
                f"privacy level: their noisy prior is below min_group_share="
                f"{self._option('min_group_share'):g}, which would make the W-gradient bound and "
                "its noise large for every record. They were given that share in the ERMI term "
                "(small_groups_); their own fairness is then weakly enforced. Merge them into "
                "larger groups, or raise epsilon.",
                UserWarning,
            )
        self.w_radius_ = fit.w_radius
        self.w_clip_ = fit.w_clip
        self._store_silo_reports(reports)
        self.class_weight_ = None
        if self.class_weight is not None:
            weights = (fit.class_weights if fit.class_weights is not None
                       else self._class_weight_dict(self.class_weight))
            self.class_weight_ = self.max_sample_weight * weights / weights.max()
        conditional = self.fairness == "equalized_odds"
        self.W_ = fit.W[0] if fit.W.shape[0] == 1 and not conditional else fit.W
        self.history_ = fit.history
        report_fit_times(self, **fit.fit_time)
        self._store_backend(fit.backend)
        self.n_steps_ = fit.rounds
        self.sampling_rate_ = np.asarray(fit.rates, dtype=np.float64)
        self.batch_size_ = np.asarray(fit.batches, dtype=np.float64)
        self.noise_multiplier_ = np.array(
            [r.multiplier("theta") if r.private else np.nan for r in fit.reports],
            dtype=np.float64)
        if self.privacy_unit == "sensitive_attribute":
            self.privacy_unit_ = "sensitive_attribute"
        self.n_units_ = int(np.sum(fit.sizes)) if fit.per_unit else None
        self.noise_calibration_ = self._option("noise_calibration")
        if fit.check is not None:
            n_classes = len(self.classes_)
            self.prediction_counts_ = fit.check[:-1].reshape(-1, n_classes, n_classes)
            self.check_noise_std_ = fit.check_std
            self._judge_model(fit.check[-1] * ModelCheck.loss_bound, fit.check_std)
        else:  # no check made (model_check=False, or too few records for it)
            ModelCheck.clear(self)
        return self

    # ------------------------------------------------------------- inputs
    def _pop_silo_column(self, X):
        """Take ``silo_column`` out of X; returns ``(X_without, silos)``."""
        if self.silo_column is None:
            return X, None
        column = self.silo_column
        if _is_dataframe(X) and isinstance(column, str):
            if column not in X.columns:
                raise ValueError(
                    f"silo_column {column!r} is not a column of X; X has columns "
                    f"{list(X.columns)[:20]}."
                )
            return X.drop(columns=[column]), np.asarray(X[column])
        silos = np.asarray(select_columns(X, [column], name="silo_column")).reshape(-1)
        if _is_dataframe(X):
            return X.drop(columns=[X.columns[column]]), silos
        X = np.asarray(X) if not hasattr(X, "shape") else X
        keep = np.setdiff1d(np.arange(X.shape[1]), [np.mod(column, X.shape[1])])
        return X[:, keep], silos

    def _without_fit_only_columns(self, X):
        """``X`` for prediction with or without ``silo_column`` (and the
        sensitive columns): the silo column is taken out first, as in fit."""
        column = self.silo_column
        if column is not None:
            if _is_dataframe(X) and isinstance(column, str):
                if column in X.columns:
                    X = X.drop(columns=[column])
            else:
                extra = (X.shape if hasattr(X, "shape") else np.shape(X))[1] - self.n_features_in_
                if extra in (1, 1 + len(super()._fit_only_columns())):
                    X, _ = self._pop_silo_column(X)
        return super()._without_fit_only_columns(X)

    def _check_groups(self, group_codes, n):
        if group_codes is None:
            warnings.warn(
                "No sensitive features were given, so every record is in one group and the "
                "ERMI term is vacuous; pass sensitive_features= to fit (or set "
                "sensitive_columns).",
                UserWarning,
            )
            return np.zeros(n, dtype=np.int64), 1
        n_groups = len(self.groups_)
        if n_groups == 1:
            warnings.warn(
                f"sensitive_features holds a single group ({self.groups_[0]!r}), so the ERMI "
                "term is vacuous.",
                UserWarning,
            )
        return group_codes, n_groups

    def _encode_silos(self, silo_ids, n):
        """Silo codes in sorted label order; sets ``silos_`` and ``n_silos_``."""
        if silo_ids is None:
            self.silos_ = np.array([0])
            self.n_silos_ = 1
            return np.zeros(n, dtype=np.int64)
        silo_ids = np.asarray(silo_ids)
        if silo_ids.ndim != 1 or silo_ids.shape[0] != n:
            raise ValueError(
                f"silo_ids must have one silo label per row of X: shape ({n},); got shape "
                f"{silo_ids.shape}."
            )
        try:
            labels, codes = np.unique(silo_ids, return_inverse=True)
        except TypeError as exc:
            raise ValueError(f"silo_ids must hold comparable labels (ints or strings): {exc}")
        self.silos_ = labels
        self.n_silos_ = len(labels)
        return codes.astype(np.int64).reshape(-1)

    def _warn_single_group_silos(self, group_codes, silo_codes, n_groups):
        """Warn when a silo holds one group only: a diagnostic for whoever
        runs ``fit`` (one record can turn it off), not part of the fitted
        estimator (see "What the guarantee does not cover" in the privacy
        docs)."""
        if n_groups < 2 or self.n_silos_ < 2:
            return
        per_silo = np.zeros((self.n_silos_, n_groups), dtype=np.int64)
        np.add.at(per_silo, (silo_codes, group_codes), 1)
        single = np.flatnonzero((per_silo > 0).sum(1) == 1)
        if single.size:
            warnings.warn(
                f"silo(s) {self.silos_[single][:5].tolist()} hold a single group: their "
                "gradients still count towards ERMI (priors are global), but the fit may "
                "be less stable; consider merging small silos.",
                UserWarning,
            )

    # ------------------------------------------------------------ privacy
    def _private_priors(self):
        return isinstance(self._option("group_priors"),
                          str) and self._option("group_priors") == "private"

    def _public_priors(self, n_strata, n_groups, n_classes):
        priors = self._option("group_priors")
        groups = list(self.groups_) if self.groups_ is not None else [None]
        conditional = self.fairness == "equalized_odds"
        if isinstance(priors, dict):
            if conditional:
                rows = []
                for label in self.classes_:
                    if label not in priors:
                        raise ValueError(
                            f"group_priors has no entry for class {label!r}; equalized odds "
                            "needs P(group | class) for every class in classes_."
                        )
                    rows.append(self._prior_row(priors[label], groups, f"class {label!r}"))
                table = np.array(rows)
            else:
                table = self._prior_row(priors, groups, "")[None, :]
        else:
            table = np.asarray(priors, dtype=np.float64)
            expected = (n_classes, n_groups) if conditional else (n_groups,)
            if table.shape != expected:
                raise ValueError(
                    f"group_priors must have shape {expected} (one prior per group in groups_ "
                    f"order{', one row per class' if conditional else ''}); got shape "
                    f"{table.shape}."
                )
            table = np.atleast_2d(table)
            for row in table:
                self._check_distribution(row, "")
        return table

    def _prior_row(self, values, groups, where):
        if isinstance(values, dict):
            unknown = [g for g in values if g not in groups]
            if unknown:
                raise ValueError(
                    f"group_priors{' for ' + where if where else ''} names groups {unknown[:5]} "
                    f"that are not in the data's groups {groups[:10]}; list every possible "
                    "group in sensitive_groups."
                )
            missing = [g for g in groups if g not in values]
            if missing:
                raise ValueError(
                    f"group_priors{' for ' + where if where else ''} misses groups "
                    f"{missing[:5]}; give a prior for every group in groups_."
                )
            row = np.array([values[g] for g in groups], dtype=np.float64)
        else:
            row = np.asarray(values, dtype=np.float64).reshape(-1)
            if row.shape[0] != len(groups):
                raise ValueError(
                    f"group_priors{' for ' + where if where else ''} has {row.shape[0]} values "
                    f"for {len(groups)} groups."
                )
        return self._check_distribution(row, where)

    @staticmethod
    def _check_distribution(row, where):
        suffix = f" for {where}" if where else ""
        if not np.all(np.isfinite(row)) or np.any(row <= 0) or abs(row.sum() - 1.0) > 1e-6:
            raise ValueError(
                f"group_priors{suffix} must be a probability distribution with every group "
                f"positive (each prior > 0, summing to 1); got {row.tolist()}."
            )
        return row

    @staticmethod
    def _composed_silo_reports(reports, previous=None):
        """Each silo's report, composed with its previous one with
        ``previous`` (``warm_start``, :func:`~skdp.privacy.compose_reports`)."""
        if previous is None:
            return list(reports)
        return [
            compose_reports(earlier if previous.private else replace(earlier, dp_event=None),
                            report)
            for earlier, report in zip(previous.silo_reports, reports)
        ]

    def _store_silo_reports(self, reports):
        """Per-silo privacy attributes from the reports of the noise that ran
        (the accountant's figures), so ``epsilon_ == max(silo_epsilons_)``."""
        self.silo_privacy_reports_ = list(reports)
        self.silo_epsilons_ = np.array([r.epsilon for r in reports], dtype=np.float64)
        self.silo_dp_events_ = [r.dp_event for r in reports]
        self._store_privacy_report(silo_summary(reports))

    # ---------------------------------------------------------- diagnostics
    def check_fairness(self, tolerance, *, constraint=None, confidence=0.95):
        """Verdicts on rate constraints of the returned model, from its
        private check (post-processing: nothing more is spent).

        The check released the noisy counts of (group, true class, predicted
        class) of the training records (``prediction_counts_``); each
        constraint's value, its noise standard deviation and a verdict
        ``"met"`` / ``"violated"`` / ``"undetermined"`` at ``confidence``
        follow from them (:func:`skdp.privacy.bound_verdicts`), as
        :class:`~skdp.fairness.DPRateConstrainedClassifier`'s
        ``constraint_verdicts_`` do.

        Parameters
        ----------
        tolerance : float
            The bound on each constraint value (e.g. 0.05 for rates within
            five points of each other); 0 gives the noisy gaps themselves.
        constraint : str, builder, RateConstraint or list, default=None
            The constraints (as :func:`~skdp.fairness.make_constraints`
            takes them); None: the model's ``fairness`` notion.
        confidence : float, default=0.95
            One-sided confidence of each verdict.

        Returns
        -------
        ConstraintCheck
            ``names``, ``excess`` (value minus tolerance), ``std``,
            ``verdicts``; ``as_frame()`` shows them as a table.

        Examples
        --------
        >>> import numpy as np
        >>> from skdp import DPFERMIClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(6000, 3))
        >>> group = rng.integers(0, 2, 6000)
        >>> y = (X[:, 0] + 0.5 * group + rng.normal(size=6000) > 0).astype(int)
        >>> model = DPFERMIClassifier(epsilon=1.0, random_state=0).fit(
        ...     X, y, sensitive_features=group)
        >>> check = model.check_fairness(0.1)
        >>> sorted(set(check.verdicts) - {"met", "violated", "undetermined"})
        []
        """
        check_is_fitted(self)
        if self.prediction_counts_ is None:
            raise ValueError(
                f"{type(self).__name__} was fitted without its model check (model_check=False, "
                "or too few records for its noise): there are no counts to judge. Refit with "
                "model_check=True on more data, or judge the model on held-out data.")
        compiled = make_constraints(
            self.fairness if constraint is None else constraint, tolerance,
            len(self.classes_), self.prediction_counts_.shape[0],
            class_names=list(self.classes_),
            group_names=None if self.groups_ is None else list(self.groups_))
        return check_constraints(compiled, self.prediction_counts_, self.check_noise_std_,
                                 confidence=confidence)

    def ermi_score(self, X, y, *, sensitive_features=None):
        """Exact ERMI of the fitted model's soft predictions on given data.

        Non-private: computed from ``X``, ``y`` and the groups, with the
        data's own group frequencies as priors (records of groups unseen in
        ``fit`` are left out).

        Returns
        -------
        float
            ``sum_m p(m) chi2_m``; 0 when predictions are independent of the
            group (given the label for equalized odds / equal opportunity).
        """
        check_is_fitted(self)
        probs = self.predict_proba(X)
        X_rest, _ = self._pop_silo_column(X)
        _, from_columns = split_sensitive_columns(X_rest, self.sensitive_columns)
        if sensitive_features is None:
            sensitive_features = from_columns
        y = np.asarray(y)
        if sensitive_features is None or self.groups_ is None:
            return 0.0
        codes, _ = encode_groups(sensitive_features, len(y), groups=self.groups_)
        y_codes = np.searchsorted(self.classes_, y).clip(0, len(self.classes_) - 1)
        known = (codes >= 0) & (self.classes_[y_codes] == y)
        strata, n_strata = fairness_strata(self.fairness, y_codes[known], len(self.classes_))
        return ermi(probs[known], codes[known], strata, len(self.groups_), n_strata)
