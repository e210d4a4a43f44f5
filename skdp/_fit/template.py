"""The fit sequence every skdp estimator runs, and what it needs.

:class:`BaseDPEstimator` holds the privacy parameters and their checks, the
Poisson sampling rate and step count (:mod:`skdp._fit.schedule`), the model (linear, an MLP or a user's
module) and its backend, and :meth:`~BaseDPEstimator._fit_private`: the same
sequence around every trainer, whose hooks an estimator fills. Classifiers
and regressors add their targets and predictions
(:mod:`skdp._fit.classifier`, :mod:`skdp._fit.regressor`).
"""

import warnings
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import (
    Interval,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import check_is_fitted, validate_data

from .._training import training_threads
from ..debug import report_fit_times
from ..models import is_row_store, make_backend, make_mlp
from ..privacy import bound_units, current_communicator
from .columns import column_list, without_fit_only_columns
from .options import BASE_SOLVER_OPTIONS
from .private_fit import PrivateFitMixin
from .rows import (
    check_finite_X,
    check_representable,
    module_outputs,
    to_training_rows,
    validated_X_y,
)
from .schedule import SamplingScheduleMixin
from .units import unit_codes
from .warm_start import WarmStartMixin
from .weights import RecordWeightsMixin

__all__ = ["BaseDPEstimator"]


class BaseDPEstimator(
    SamplingScheduleMixin, WarmStartMixin, RecordWeightsMixin, PrivateFitMixin, BaseEstimator
):
    """Machinery shared by every skdp estimator trained with a private torch loop.

    Privacy parameters and their checks, Poisson sampling rate and step
    count, the generator (OS CSPRNG when ``random_state=None``), device,
    model backend, thread policy, spending a release plan and storing its
    privacy report, and the forward pass of a fitted model. Task-specific
    bases add target handling and prediction:
    :class:`~skdp._fit.classifier.BaseDPClassifier` and
    :class:`~skdp._fit.regressor.BaseDPRegressor`.

    Subclasses tell the base how many model outputs they train with
    ``_n_model_outputs()`` and turn a fitted linear weight matrix into
    ``coef_``/``intercept_`` with ``_set_linear_params(weights)``.

    A ``fit`` validates its inputs into a :class:`~skdp._fit.state.FitState`
    and runs :meth:`_fit_private`, the same sequence around every trainer;
    an estimator fills its hooks (:meth:`_plan`, :meth:`_train`,
    :meth:`_store_fitted`, and where it differs :meth:`_calibrate`,
    :meth:`_targets`, :meth:`_make_backend`, :meth:`_store_model`) and lists
    its one-off releases outside the training steps (:attr:`_fit_releases`,
    :mod:`skdp._fit.releases`).
    """

    #: Fitted attributes computed from the noisy releases (covered by
    #: ``epsilon_``); every other fitted attribute is public: a function of n
    #: (and n_units), the classes and groups, the public parameters and the
    #: seed (checked for every estimator by tests/test_fitted_attributes.py).
    _released_attributes = frozenset({"coef_", "intercept_", "module_state_"})

    #: The one-off releases of a fit outside its training steps
    #: (:class:`~skdp._fit.releases.FitRelease`), planned and applied in
    #: this order.
    _fit_releases = ()

    #: The solver options (keys of ``solver_options``) this estimator
    #: accepts: name -> :class:`~skdp._fit.options.SolverOption` (default,
    #: constraints, documentation). Subclasses extend it.
    _solver_option_specs = BASE_SOLVER_OPTIONS

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "max_grad_norm": [Interval(Real, 0, None, closed="right")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_epochs": [Interval(Real, 0, None, closed="neither")],
        "max_steps": [Interval(Integral, 1, None, closed="left"), None],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "hidden_layer_sizes": [tuple, list],
        "module": [callable, None],
        "random_state": ["random_state"],
        "device": [str, torch.device],
        "verbose": ["verbose"],
        "max_sample_weight": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
        "solver_options": [dict, None],
    }

    # ------------------------------------------------------ solver options
    def _validate_params(self):
        """scikit-learn's check of the constructor parameters, then of the
        keys and values of ``solver_options`` (:attr:`_solver_option_specs`)."""
        super()._validate_params()
        options = self.solver_options or {}
        specs = self._solver_option_specs
        unknown = sorted(set(options) - set(specs))
        if unknown:
            raise ValueError(
                f"solver_options has unknown key(s) {unknown}; {type(self).__name__} accepts "
                f"{sorted(specs)} (see its docstring, Parameters: solver_options)."
            )
        validate_parameter_constraints(
            {name: specs[name].constraints for name in options}, dict(options),
            caller_name=f"{type(self).__name__} solver_options",
        )

    def _option(self, name):
        """The solver option ``name``: ``solver_options[name]`` when given,
        else the estimator's default (:attr:`_solver_option_specs`)."""
        options = self.solver_options or {}
        return options[name] if name in options else self._solver_option_specs[name].default

    def _fit_option(self, name):
        """A fit option of the privacy side: a solver option, or a
        constructor parameter (``device``, ``verbose``)."""
        if name in self._solver_option_specs:
            return self._option(name)
        return super()._fit_option(name)

    # ------------------------------------------------------------------ fit
    @staticmethod
    def _validated_X_y(estimator, X, y, **kwargs):
        """:func:`~skdp._fit.rows.validated_X_y`; the finiteness of ``X`` is
        left to :meth:`_fit_private` when :meth:`_defers_finite_check`."""
        return validated_X_y(estimator, X, y, defer_finite=estimator._defers_finite_check(),
                             **kwargs)

    #: Whether the fit checks that ``X`` is finite from the rows' squared
    #: norms, which the linear backend computes before training anyway (one
    #: pass over ``X`` instead of two: 0.65 s of scikit-learn's check at 10M x
    #: 100 float32); False for a shell that does not fit by
    #: :meth:`_fit_private`.
    _finite_check_with_norms = True

    def _defers_finite_check(self):
        """Whether validation leaves the finiteness of ``X`` to
        :meth:`_fit_private`: in one process only (in a data-parallel fit
        every rank checks its shard up front, before the ranks first
        communicate)."""
        return self._finite_check_with_norms and current_communicator().world_size == 1

    def _rows_and_backend(self, X, state, seed, device):
        """``X``'s training rows and the backend built on them, after the
        checks that validation deferred (:meth:`_defers_finite_check`): that
        ``X`` is finite and within the training dtype's range. A value
        beyond the range becomes an infinity in the training rows, and a row
        whose squared norm (in the training dtype) is finite is finite, so
        scikit-learn's finiteness check and the range check
        (:func:`~skdp._fit.rows.check_representable`) run, in that order,
        only when some norm is not finite (a NaN or an infinity, a value
        beyond the range, or a row too large to square: the checks then
        pass) or when the backend computed no norms. Nothing is drawn or
        charged before them."""
        deferred = self._defers_finite_check() and not is_row_store(X)
        X_t = self._to_tensor(X, device, dtype=self._training_dtype, check_range=not deferred)
        backend = self._make_backend(X_t, state.n_outputs or self._n_model_outputs(), seed)
        if deferred:
            norms = None if backend is None else backend.computed_row_sq_norms()
            if norms is None or not bool(torch.isfinite(norms).all()):
                check_finite_X(self, X)
                check_representable(X, self._training_dtype)
        return X_t, backend

    def _build_module(self, n_features, n_outputs, seed):
        """User module or MLP, initialised from ``seed``; None for linear."""
        if self.module is None and len(self.hidden_layer_sizes) == 0:
            return None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if self.module is not None:
                module = self.module(n_features, n_outputs)
                if not isinstance(module, torch.nn.Module):
                    raise ValueError(
                        "module must be a callable (n_features, n_classes) -> torch.nn.Module; "
                        f"it returned {type(module).__name__}."
                    )
            else:
                module = make_mlp(n_features, n_outputs, tuple(self.hidden_layer_sizes))
        for layer in module.modules():
            if isinstance(layer, (torch.nn.modules.batchnorm._BatchNorm,
                                  torch.nn.modules.dropout._DropoutNd)):
                raise ValueError(
                    f"module contains {type(layer).__name__}, which per-sample gradient "
                    "clipping cannot handle (BatchNorm mixes the records of a batch; dropout "
                    "draws from an unseeded RNG inside vmap). Use GroupNorm/LayerNorm and no "
                    "dropout."
                )
        return module

    def _to_tensor(self, array, device, dtype=torch.float32, check_range=True):
        """``array``'s rows to train on (:func:`~skdp._fit.rows.to_training_rows`);
        remembers whether they are read from a file or a store
        (:attr:`_rows_on_disk`), so that the backend gathers batches ahead
        (:meth:`_make_backend`)."""
        rows, self._rows_on_disk = to_training_rows(array, device, dtype,
                                                    check_range=check_range)
        return rows

    #: Batches gathered ahead on background threads when the training rows
    #: are read from a file (a ``numpy.memmap``): two keep the disk busy
    #: while a step computes.
    _prefetch_from_disk = 2

    def _make_backend(self, X_t, n_outputs, seed):
        module = self._build_module(X_t.shape[1], n_outputs, seed)
        self._is_linear = module is None
        backend = make_backend(X_t, n_outputs, module)
        if getattr(self, "_rows_on_disk", False) and X_t.device.type == "cpu":
            backend.prefetch = self._prefetch_from_disk
        backend.prepare()
        return backend

    def _linear_by_settings(self):
        """Whether the public settings make the model linear (no ``module``,
        no hidden layers): known before the fit, unlike ``_is_linear``."""
        return self.module is None and len(self.hidden_layer_sizes) == 0

    def _training_threads(self, device):
        """The thread policy of :func:`skdp._training.training_threads` for
        this fit's model (one thread for linear models on the CPU)."""
        return training_threads(self._is_linear, device)

    #: Training precision of the feature tensor.
    _training_dtype = torch.float32


    def _fit_private(self, X, state):
        """The fit sequence every estimator shell runs; subclasses fill hooks.

        1. ``self._make_generator()``: the randomness of the fit (nothing
           is drawn yet) and the seed of the model's initialisation;
        2. ``X`` to a tensor in :attr:`_training_dtype` on the device, and
           the model, ``self._make_backend(X_t, n_outputs, seed)`` (building
           it draws nothing from the generator; a linear backend computes
           the rows' squared norms), then the finiteness check of ``X`` that
           validation left to the fit (:meth:`_rows_and_backend`), so that
           bad input fails before anything is drawn or charged;
           ``self._bound_units(state, generator)``: with units, the records
           each unit keeps (drawn);
        3. ``self._plan(X, state, generator)``: the release plan, from public
           settings (hook; it may draw, e.g. a split by coins), with the
           one-off releases of :attr:`_fit_releases` added;
        4. ``self._calibrate(plan, state)``: the privacy report (hook;
           default :meth:`_spend`), charged to the ledger; the record
           weights of ``state.sample_weight`` and ``class_weight``
           (:meth:`_weigh_records`; ``class_weight="balanced"`` draws the
           noise of its class counts);
        5. ``self._targets(report, generator, device, X_t, state)``: the
           per-sample targets (hook; may draw the noise of one-off
           releases, e.g. a private target scale), then, with
           ``warm_start``, the previous fit's parameters
           (:meth:`_load_previous`);
        6. ``self._train(backend, targets, report, generator, state)`` under
           the thread policy (hook);
        7. ``self._store_model(backend, result)``, the releases that change
           the model (stage ``"model"``: the score calibration), the report,
           and ``self._store_fitted(report, result, state)`` (hook: the
           estimator's own fitted attributes); with ``warm_start``, the
           report composed with the previous fit's
           (:meth:`_compose_with_previous`); last the releases that judge
           the returned model (stage ``"check"``: the model check).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Validated features.
        state : FitState
            What the shell validated (labels, groups, a target builder...)
            and what stages hand to later ones.

        Returns
        -------
        self
        """
        generator, seed, device = self._make_generator()
        seed = current_communicator().share(seed)  # data-parallel: the root's model
        X_t, backend = self._rows_and_backend(X, state, seed, device)
        self._bound_units(state, generator)
        plan = self._with_fit_releases(self._plan(X, state, generator), X, state)
        report, calibration_time = self._timed(self._calibrate, plan, state)
        self._charge_ledger(report)
        self._weigh_records(backend, state, report, generator, X_t)
        targets = self._targets(report, generator, device, X_t, state)
        self._load_previous(backend, state)
        result = self._run_training(
            lambda: self._train(backend, targets, report, generator, state), device,
            calibration_time,
        )
        self._store_model(backend, result)
        norms = None if backend is None else backend.computed_row_sq_norms()
        if norms is not None:  # the releases after training read them
            state.returned_row_sq_norms = norms.double().cpu().numpy() - 1.0
        self._apply_fit_releases("model", X, state, report, generator)
        self._store_privacy_report(report)
        self._store_fitted(report, result, state)
        self._compose_with_previous(state.previous)
        self._apply_fit_releases("check", X, state, report, generator)
        return self

    def _with_fit_releases(self, plan, X, state):
        """``plan`` with the one-off releases of :attr:`_fit_releases` that
        this fit makes (:meth:`~skdp._fit.releases.FitRelease.initial_release`),
        less those that could decide nothing at the public number of
        training records or units
        (:meth:`~skdp._fit.releases.FitRelease.cannot_decide`: each spends
        nothing and warns once, or prints with ``verbose``)."""
        # in a data-parallel fit X is this rank's shard: n counts every rank's
        n_public = (state.n_units if state.units is not None
                    else current_communicator().total(X.shape[0]))
        extra = []
        for release in self._fit_releases:
            initial = release.initial_release(self)
            if initial is None:
                continue
            reason = release.cannot_decide(self, n_public, state)
            if reason is not None:
                if release.warning is not None:
                    warnings.warn(reason, release.warning, stacklevel=4)
                elif self._fit_option("verbose"):
                    print(reason)
                continue
            extra.append(initial)
        return replace(plan, initial=plan.initial + tuple(extra)) if extra else plan

    def _apply_fit_releases(self, stage, X, state, report, generator):
        """Apply the releases of :attr:`_fit_releases` of ``stage`` to the
        trained model, in order."""
        for release in self._fit_releases:
            if release.stage == stage:
                release.apply(self, X, state, report, generator)

    def _fit_release(self, kind):
        """The release of class ``kind`` in :attr:`_fit_releases`, or None."""
        return next((r for r in self._fit_releases if isinstance(r, kind)), None)

    def _bound_units(self, state, generator):
        """Set ``state.units``: the :class:`~skdp.privacy.UnitBounds` of
        ``state.unit_codes`` (at most ``max_records_per_unit`` records of each
        unit, drawn from ``generator``), or None without units (nothing
        drawn)."""
        state.units = None
        if state.unit_codes is None:
            return
        state.units = bound_units(state.unit_codes, state.n_units,
                                  int(self.max_records_per_unit), generator)

    def _validated_unit_ids(self, unit_ids, n_samples):
        """``(codes, n_units)`` of ``unit_ids`` (:func:`~skdp._fit.units.unit_codes`)."""
        return unit_codes(unit_ids, n_samples)

    def _plan(self, X, state, generator):
        """The fit's :class:`~skdp.privacy.ReleasePlan` (hook)."""
        raise NotImplementedError

    def _calibrate(self, plan, state):
        """The privacy report of ``plan`` (hook; default :meth:`_spend`)."""
        return self._spend(plan)

    def _targets(self, report, generator, device, X_t, state):
        """Per-sample targets of the trainer (hook; default none)."""
        return None

    def _train(self, backend, targets, report, generator, state):
        """Run the trainer; its result goes to :meth:`_store_model` and
        :meth:`_store_fitted` (hook)."""
        raise NotImplementedError

    def _store_model(self, backend, result):
        """Keep the trained parameters (hook; default :meth:`_store_backend`)."""
        self._store_backend(backend)

    def _store_fitted(self, report, result, state):
        """The estimator's own fitted attributes (hook; default none)."""

    def _run_training(self, train, device, calibration_time):
        """Call ``train()`` under :meth:`_training_threads`; report the timings
        to :func:`skdp.debug.record_fit_times` (never a fitted attribute: they
        depend on the data).

        Parameters
        ----------
        train : callable
            Runs the trainer; called once without arguments.
        device : torch.device
            Device of the fit (the thread policy depends on it).
        calibration_time : float
            Seconds spent before training on calibrating the noise.

        Returns
        -------
        result
            What ``train()`` returned (e.g. the trainer's history).
        """
        with self._training_threads(device):
            result, training_time = self._timed(train)
        report_fit_times(self, calibration=calibration_time, training=training_time)
        return result

    def _store_backend(self, backend):
        """Keep fitted parameters as numpy arrays (picklable, clone-safe).

        Linear models go through ``_set_linear_params(weights)`` (weights of
        shape (n_outputs, n_features + 1), bias last); modules keep their
        state dict in ``module_state_``.
        """
        state = backend.state()
        if not all(np.isfinite(v).all() for v in state.values() if np.issubdtype(v.dtype, np.floating)):
            raise ValueError(
                f"{type(self).__name__} diverged: the trained parameters are not finite. "
                "Lower learning_rate (or dual_learning_rate), or raise max_grad_norm less."
            )
        if self._is_linear:
            self._set_linear_params(state["weights"])
            self.module_state_ = None
        else:
            self.module_state_ = state
            self.coef_ = self.intercept_ = None

    def privacy_curve(self, n_points=10):
        """Epsilon spent after each of ``n_points`` step counts up to ``n_steps_``.

        Computed from the fitted privacy report (which depends only on public
        settings), so it releases nothing about the data; one-off releases
        before training are included in every point.

        Parameters
        ----------
        n_points : int, default=10

        Returns
        -------
        curve : ndarray of shape (n_points, 2)
            Columns: step count, epsilon at ``delta_``.
        """
        check_is_fitted(self)
        if self.dp_event_ is None:
            raise ValueError("The estimator was fitted with epsilon=None: nothing was accounted.")
        return self.privacy_report_.privacy_curve(n_points)

    # -------------------------------------------------------------- predict
    def _validate_predict_X(self, X):
        check_is_fitted(self)
        X = self._without_fit_only_columns(X)
        return validate_data(self, X, dtype=[np.float64, np.float32], reset=False)

    #: The parameters that name columns of ``X`` which ``fit`` reads and the
    #: model does not use (classifiers add ``sensitive_columns``).
    _fit_only_column_params = ("unit_column",)

    def _fit_only_columns(self):
        """Columns of ``X`` that ``fit`` reads and the model does not use (the
        values of the parameters :attr:`_fit_only_column_params`)."""
        return [column for name in self._fit_only_column_params
                for column in column_list(getattr(self, name))]

    def _without_fit_only_columns(self, X):
        """``X`` for prediction, with or without the fit-only columns
        (:func:`~skdp._fit.columns.without_fit_only_columns`)."""
        return without_fit_only_columns(X, self._fit_only_columns(), self.n_features_in_,
                                        type(self).__name__)

    def _module_outputs(self, X):
        """Outputs of the fitted torch module on ``X``, shape (n, n_outputs),
        in float64 (:func:`~skdp._fit.rows.module_outputs`)."""
        module = self._build_module(self.n_features_in_, self._n_model_outputs(), 0)
        module.load_state_dict({k: torch.as_tensor(v) for k, v in self.module_state_.items()})
        return module_outputs(module, X, self._n_model_outputs())
