"""DP-SGD regressor: least squares (or an MLP) trained with DP-SGD."""

from numbers import Real

import torch
from sklearn.utils._param_validation import Interval

from .._fit.columns import split_fit_only_columns
from .._fit.options import SolverOption, document_solver_options
from .._fit.regressor import BaseDPRegressor
from .._fit.units import MAX_RECORDS_PER_UNIT
from ..models import SquaredLossHead
from ._dpsgd import _DPSGDMixin


@document_solver_options
class DPSGDRegressor(_DPSGDMixin, BaseDPRegressor):
    """Linear regression or MLP trained with differentially private SGD.

    Minimises the mean of ``(prediction - y)**2 / 2`` plus
    ``alpha / 2 * ||coef||^2`` with the DP-SGD engine of
    :class:`~skdp.DPSGDClassifier`: Poisson-sampled batches, each record's
    whole gradient clipped to ``max_grad_norm``, Gaussian noise on the sum,
    and one release plan that calibrates the noise to the ``(epsilon,
    delta)`` budget and accounts every release. For a linear model the
    per-sample gradient is ``(prediction - y) * [x, 1]`` in closed form.

    The unit of privacy is one whole record (features and target), under
    add/remove-one neighbours unless ``neighboring="replace"``.

    **Targets.** Clipping bounds every record's influence whatever its
    target, so the guarantee needs no bound on ``y``; but a squared-loss
    gradient grows with the residual, and with targets in the hundreds
    nearly every gradient would be clipped and training would crawl. The
    model is therefore trained on scaled targets:

    - ``y_bounds=(low, high)``, public bounds known without looking at the
      data: targets are clipped to them and mapped to [-1, 1] (no budget
      spent);
    - ``y_bounds=None`` (default): targets are divided by a power of two
      chosen from a noisy histogram of ``log2 |y|`` (4 % of the budget's
      privacy, in GDP ``mu^2``, accounted in ``dp_event_`` as a one-off
      release named ``"target_scale"``). The targets are not centred, so
      give ``y_bounds`` when they sit far from 0 relative to their spread.

    ``coef_``, ``intercept_`` and predictions are in the units of ``y``.
    Features should be on a unit scale (e.g. a private
    :class:`~skdp.preprocessing.DPStandardScaler` in a pipeline).

    Parameters
    ----------
    epsilon : float or None, default=1.0
        Privacy budget. ``None`` trains non-privately, for reference
        (gradients are still clipped unless ``max_grad_norm=np.inf``).
        The guarantee is about one record (add or remove one row), or, with
        ``fit(unit_ids=...)``, about one unit -- all records of a person --
        with at most ``max_records_per_unit`` of them used (see
        :ref:`units`).
    delta : float, default=1e-5
        Privacy budget; keep it well below ``1 / n_samples``.
    max_grad_norm : float, default=1.0
        Clipping bound C on each per-sample gradient's l2 norm.
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size; ``"auto"`` uses
        ``min(n_samples // 4, max(64, round(6 * sqrt(n_samples))))``.
        Ignored when ``sample_rate`` is given.
    max_epochs : float, default=20
        Training length in expected passes over the data.
    max_steps : int or None, default=None
        Step count; overrides ``max_epochs``.
    learning_rate : float, default=0.05
        Step size applied to the noisy mean gradient (of the scaled targets).
    alpha : float, default=0.0
        Strength of the L2 penalty ``alpha / 2 * ||coef||^2`` (intercept not
        penalised), added after the noise (post-processing; it does not
        depend on the data). With noise and clipping off this is
        ``sklearn.linear_model.Ridge(alpha=n_samples * alpha)``.
    hidden_layer_sizes : tuple of int, default=()
        Hidden layers of an MLP; empty gives linear regression (closed-form
        per-sample gradients).
    module : callable or None, default=None
        ``module(n_features, 1) -> torch.nn.Module`` returning one output per
        row; overrides ``hidden_layer_sizes``. Must not use BatchNorm.
    y_bounds : tuple (low, high) or None, default=None
        Public bounds on the target (see **Targets** above).
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
        every record has weight 1). See :ref:`privacy-sample-weights`.
    warm_start : bool, default=False
        With True, ``fit`` on a fitted estimator starts from its parameters
        (``coef_`` and ``intercept_``, or the module's state) instead of a
        fresh model; ``X`` must have as many features. The new fit spends its
        own budget; ``dp_event_`` becomes the composition of the previous and
        the new events, and ``epsilon_`` and ``privacy_report_`` the
        accountant's for it. Composition assumes the worst case, that both
        fits saw the same records. The optimizer starts afresh. With
        ``y_bounds=None`` the new fit releases its own target scale: a linear
        model is converted to it exactly, a module continues in its outputs'
        old units (give ``y_bounds`` to keep them equal).
    solver_options : dict or None, default=None
        Settings of the solver that one default serves (the keys below; a key
        left out keeps its default; an unknown key or a bad value is an error
        at ``fit``):

        {solver_options}
    random_state : int, RandomState instance or None, default=None
        ``None``: sampling and noise from the operating system's secure
        generator (the setting for deployment). An int seeds a torch
        generator for reproducible experiments; anyone who knows the seed
        can regenerate the noise.
    device : str, default="cpu"
    verbose : int, default=0
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
    coef_ : ndarray of shape (n_features,)
        Linear model weights in the units of ``y`` (None for MLPs).
    intercept_ : float
    module_state_ : dict or None
        State dict (numpy arrays) of the torch module, for MLPs.
    y_scale_, y_offset_ : float
        The model is trained on ``(y - y_offset_) / y_scale_``.
    epsilon_ : float
        Epsilon spent, from the accountant on ``dp_event_``.
    delta_ : float
    accountant_ : str
    dp_event_ : dp_accounting.DpEvent
        The event composed: the target-scale histogram (when ``y_bounds`` is
        None) and ``n_steps_`` Poisson-subsampled Gaussian steps.
    privacy_report_ : skdp.privacy.PrivacyReport
    noise_multiplier_ : float
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public, like the number of
        records); None without them.
    n_steps_ : int
    learning_rate_ : float
        The step size used (``learning_rate``).
    sampling_rate_ : float
    batch_size_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    skdp.DPSGDClassifier : the same engine with the cross-entropy loss.
    sklearn.linear_model.Ridge : the non-private counterpart.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skdp import DPSGDRegressor
    >>> X, y = make_regression(n_samples=5000, n_features=5, noise=10, random_state=0)
    >>> reg = DPSGDRegressor(epsilon=1.0, random_state=0).fit(X, y)
    >>> reg.epsilon_ <= 1.0
    True
    >>> reg.coef_.shape
    (5,)
    >>> bool(reg.score(X, y) > 0.9)
    True

    With public bounds on the target no budget goes to its scale:

    >>> reg = DPSGDRegressor(y_bounds=(-500, 500), random_state=0).fit(X, y)
    >>> reg.y_scale_
    500.0
    """

    _solver_option_specs = {
        **_DPSGDMixin._dpsgd_options,
        "averaging": SolverOption(
            0.0, [Interval(Real, 0, 1, closed="left")], "float in [0, 1)",
            "Fraction of the final steps whose iterates are averaged into the returned "
            "model (post-processing of released iterates: no privacy cost); 0 returns the "
            "last iterate."),
    }

    _parameter_constraints = {
        **BaseDPRegressor._parameter_constraints,
        **_DPSGDMixin._dpsgd_constraints,
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=1.0,
        batch_size="auto",
        max_epochs=20,
        max_steps=None,
        learning_rate=0.05,
        alpha=0.0,
        hidden_layer_sizes=(),
        module=None,
        y_bounds=None,
        random_state=None,
        device="cpu",
        verbose=0,
        max_sample_weight=1.0,
        warm_start=False,
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
        self.y_bounds = y_bounds
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.max_sample_weight = max_sample_weight
        self.warm_start = warm_start
        self.max_records_per_unit = max_records_per_unit
        self.unit_column = unit_column
        self.solver_options = solver_options

    #: ``unit_ids`` is requested by default with metadata routing on.
    __metadata_request__fit = {"unit_ids": True}

    def fit(self, X, y, *, sample_weight=None, unit_ids=None):
        """Train under the (epsilon, delta) budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric features.
        y : array-like of shape (n_samples,)
            Finite real targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each record (None: all 1), clipped to
            ``max_sample_weight``; it scales the record's clipped contribution,
            so the privacy guarantee does not change. With metadata routing on,
            request it with ``set_fit_request(sample_weight=True)``.
        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id). When given,
            epsilon and delta are about all records of one unit (at most
            ``max_records_per_unit`` of them used, each weighted
            ``1 / min(|u|, max_records_per_unit)``; batches are Poisson
            samples of units); the target-scale histogram is weighted the
            same way. Requested by default with metadata routing on; see
            ``unit_column`` and :ref:`units`.

        Returns
        -------
        self : DPSGDRegressor
        """
        self._validate_params()
        previous = self._previous_fit()
        X, _, from_column = split_fit_only_columns(X, None, self.unit_column)
        unit_ids = from_column if unit_ids is None else unit_ids
        X, y = self._validate_regression_data(X, y)
        self._check_warm_start(previous, unit_ids)
        sample_weight = self._validated_sample_weight(sample_weight, X)

        def targets(report, generator, device, weights=None):
            scaled = self._scale_targets(y, report, generator, device, weights=weights)
            return torch.as_tensor(scaled, dtype=torch.float32, device=device)[:, None]

        return self._fit_dpsgd(X, targets, SquaredLossHead(), sample_weight=sample_weight,
                               previous=previous, unit_ids=unit_ids)
