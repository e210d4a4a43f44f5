"""Private regularisation tuning without a grid: DP bilevel optimisation.

:class:`DPBilevelRidge` and :class:`DPBilevelLogisticRegression` choose the
strength omega of a penalty ``omega R(coef)`` (``R = ||coef||^2 / 2`` by
default, or a smoothed l1 norm) on a validation part of the data,
privately, in one fit: omega is updated on the fly from two privately
trained models per iteration (Kornowski, *DP bilevel optimization*, Sec. 7,
with the sign of the printed rule corrected). The
whole data set (training and validation parts) is protected and ``fit``
spends the whole budget.

With ``fit(unit_ids=...)`` the protected unit is a person (or any unit) with
all their records: the split is by unit, every inner problem is a mean over
units of each unit's factor-weighted loss (at most ``max_records_per_unit``
records, factors summing to at most 1, see
:func:`~skdp.privacy.bound_units`), the DP-SGD solves sample units, and every
sensitivity is the record-level one with the number of units in place of the
number of records (see :class:`~skdp.bilevel._solvers.Problem`).
"""

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Optional

import numpy as np
import torch
from sklearn.utils._metadata_requests import UNUSED
from sklearn.utils._param_validation import Interval, StrOptions

from .._fit.classifier import BaseDPClassifier
from .._fit.options import BASE_SOLVER_OPTIONS, SolverOption, document_solver_options
from .._fit.columns import split_fit_only_columns
from .._fit.regressor import BaseDPRegressor
from .._fit.state import FitState
from .._fit.units import MAX_RECORDS_PER_UNIT, UNIT_CONSTRAINTS
from ..models import one_hot
from ..privacy import (
    BatchReleases,
    PrivacyBudgetError,
    Release,
    ReleasePlan,
    bernoulli_split,
)
from ._solvers import (
    REGULARIZERS,
    SOLVERS,
    InnerSolver,
    OuterConfig,
    Problem,
    Regularizer,
    SolverSettings,
    output_rule,
    run_bilevel,
)

#: Fewest validation records the tuner accepts.
_MIN_VALIDATION = 2

#: Weight of the l2 part that the smoothed l1 regulariser keeps with
#: ``inner_solver="dp_loc_gd"``, whose step sizes and radii need a strongly
#: convex penalty (``R = R_mu + _LOC_GD_L2 / 2 * ||coef||^2``).
_LOC_GD_L2 = 0.1

#: Largest noise multiplier of an inner solve the tuner accepts: beyond it
#: the released models are noise.
_MAX_MULTIPLIER = 1e3

#: The tuners' fitted attributes computed from their noisy releases.
_BILEVEL_RELEASED = frozenset({"history_", "omega_", "omega_path_", "t_out_"})


#: The bilevel tuners' solver options.
_BILEVEL_OPTIONS = {
    **{key: value for key, value in BASE_SOLVER_OPTIONS.items()
       if key in ("accountant", "neighboring")},
    "omega_bounds": SolverOption(
        (1e-06, 100.0), [tuple, list], 'tuple (low, high)',
        'The outer step projects omega onto these bounds; ``low > 0`` keeps every '
        'l2-penalised inner problem strongly convex.'),
    "l1_smoothing": SolverOption(
        0.01, [Interval(Real, 0, None, closed="neither")], 'float',
        'Smoothing width ``mu > 0`` of ``"smoothed_l1"`` (public; in units of the '
        'coefficients). Ignored for ``"l2"``.'),
    "penalty": SolverOption(
        'auto', [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})], 'float or "auto"',
        'lambda of the penalty method: the second model of each iteration minimises '
        '``train loss + validation loss / penalty + omega R``. The hypergradient '
        '``penalty * (R(theta_lambda) - R(theta))`` has a bias of order ``1 / penalty`` '
        'and amplifies the inner solvers\' noise by ``penalty``. ``"auto"``: 10 for '
        'private fits, 1000 with ``epsilon=None`` (exact solves, no noise to amplify).'),
    "outer_lr": SolverOption(
        'auto', [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})], 'float or "auto"',
        'Step size of the outer update (in ``log omega``). ``"auto"`` is the AdaGrad-norm '
        'step ``1 / sqrt(sum of squared hypergradients)``: the first step changes omega '
        "by a factor e, later ones shrink (a library choice; the paper's step size has "
        'unknown constants).'),
    "outer_noise": SolverOption(
        'none', [StrOptions({"none", "paper"})], '{"none", "paper"}',
        '``"none"``: the outer update is post-processing of the two released models (its '
        'gradient with respect to omega does not touch the data), so it gets no noise. '
        '``"paper"``: add the paper\'s Gaussian noise to each hypergradient, accounted as '
        'T more releases (for reproduction).'),
}


@dataclass
class BilevelFitState(FitState):
    """A bilevel tuner's fit state: the base's, and what its hooks pass on.

    Attributes
    ----------
    validation_mask : ndarray of bool or None
        The user's validation part (None: drawn by coins).
    mask : ndarray of bool or None
        The validation part of this fit.
    sizes : tuple or None
        ``(n, n_train, n_val)`` that weigh the two parts (public).
    settings : dict or None
        The inner solves' settings by name.
    rows : tensor or None
        The float64 rows the solvers work on.
    t_out : int or None
        The iteration chosen by the output rule.
    omega : float or None
        The tuned strength.
    """

    validation_mask: Optional[np.ndarray] = None
    mask: Optional[np.ndarray] = None
    sizes: Optional[tuple] = None
    settings: Optional[dict] = None
    rows: Any = None
    t_out: Optional[int] = None
    omega: Optional[float] = None


def _part_sizes(mask, units=None):
    """``(n, n_train, n_val)`` of a validation ``mask`` over the records:
    counts of records, or with ``units`` (whose records are all on one side)
    of units."""
    if units is None:
        n_val = int(mask.sum())
        return mask.shape[0], mask.shape[0] - n_val, n_val
    n_val = int(np.bincount(units.codes[mask], minlength=units.n_units).astype(bool).sum())
    return units.n_units, units.n_units - n_val, n_val


def _public_part_sizes(mask, units, fraction):
    """``(n, n_train, n_val)`` that weigh the two parts: public numbers.

    With a coin split (``fraction`` the public ``validation_fraction``) the
    expected sizes ``n (1 - f)`` and ``n f``: the realised ones depend on
    whether a record (or unit) is present, and since the part weights
    multiply each gradient before it is clipped, weights from them would
    move every other record's clipped term when one record is added (a
    released sum would move by up to about ``C (1 + f)``, not ``C``). With
    a user's ``validation_mask`` (``fraction`` None) the mask's sizes, which
    the user fixed, like ``n``."""
    n, n_train, n_val = _part_sizes(mask, units)
    if fraction is None:
        return n, n_train, n_val
    return n, n * (1.0 - fraction), n * fraction


def _check_mask_keeps_units(mask, units):
    """A ValueError when ``mask`` puts records of one unit on both sides."""
    in_validation = np.bincount(units.codes, weights=mask, minlength=units.n_units)
    sizes = np.bincount(units.codes, minlength=units.n_units)
    split = int(((in_validation > 0) & (in_validation < sizes)).sum())
    if split:
        raise ValueError(
            f"validation_mask splits {split} of the {units.n_units} units given by unit_ids "
            "between the training and validation parts; with unit_ids each unit's records "
            "must all be on one side (the privacy unit is the whole unit). Make the mask "
            "constant within each unit, e.g. validation_mask = np.isin(unit_ids, "
            "validation_units), or leave it out to split by unit with validation_fraction."
        )


class _DPBilevelMixin:
    """The tuner shared by the two estimators: split, plan, outer loop."""

    _bilevel_constraints: ClassVar[dict] = {
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "omega_init": [Interval(Real, 0, None, closed="neither")],
        "regularizer": [StrOptions(set(REGULARIZERS))],
        "n_outer_iter": [Interval(Integral, 1, None, closed="left")],
        "refit_share": [Interval(Real, 0, 1, closed="left")],
        "inner_solver": [StrOptions(set(SOLVERS))],
        "inner_steps": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_grad_norm": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "device": [str, torch.device],
        "verbose": ["verbose"],
        "max_sample_weight": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
        "solver_options": [dict, None],
        **UNIT_CONSTRAINTS,
    }

    _solver_option_specs = _BILEVEL_OPTIONS

    #: The inner DP-SGD solves' expected batch: the base's ``"auto"`` rule
    #: (not a parameter of the tuners).
    batch_size = "auto"

    def _check_tuner_params(self):
        bounds = self._option("omega_bounds")
        if (len(bounds) != 2 or not all(isinstance(b, Real) for b in bounds)
                or not 0 < bounds[0] < bounds[1] < np.inf):
            raise ValueError(
                f"omega_bounds must be a pair (low, high) with 0 < low < high < inf; got "
                f"{bounds!r}. A positive lower bound keeps every inner problem strongly convex."
            )
        if not bounds[0] <= self.omega_init <= bounds[1]:
            raise ValueError(
                f"omega_init={self.omega_init!r} is outside omega_bounds={tuple(bounds)}."
            )
        if self.regularizer != "l2" and self.inner_solver == "output_perturbation":
            raise ValueError(
                f"regularizer={self.regularizer!r} cannot be used with "
                "inner_solver='output_perturbation': its noise is calibrated to the 1 / omega "
                "sensitivity that the strong convexity of the l2 penalty gives, and the smoothed "
                "l1 norm is not strongly convex. Use inner_solver='dp_sgd' or 'dp_loc_gd', or "
                "regularizer='l2'."
            )

    def _regularizer(self):
        """The public :class:`Regularizer` spec of this fit."""
        if self.regularizer == "l2":
            return Regularizer("l2")
        l2 = _LOC_GD_L2 if self.inner_solver == "dp_loc_gd" else 0.0
        return Regularizer("smoothed_l1", float(self._option("l1_smoothing")), l2)

    def _split(self, n, validation_mask, generator, units=None):
        """Boolean validation mask of the records: the routed one, or a coin
        per record drawn from the fit's ``generator`` (see
        :func:`~skdp.privacy.bernoulli_split`).

        With ``units`` the coins are per unit (all records of a unit on one
        side; adding or removing a unit moves no other unit), and a routed
        mask that splits a unit is refused.
        """
        if validation_mask is not None:
            mask = np.asarray(validation_mask)
            if mask.dtype != bool or mask.shape != (n,):
                raise ValueError(
                    f"validation_mask must be a boolean array of shape ({n},), one entry per "
                    f"row of X; got dtype {mask.dtype} and shape {mask.shape}."
                )
            if units is not None:
                _check_mask_keeps_units(mask, units)
        elif units is None:
            mask = bernoulli_split(n, self.validation_fraction, generator).cpu().numpy()
        else:
            coins = bernoulli_split(units.n_units, self.validation_fraction, generator)
            mask = coins.cpu().numpy()[units.codes]
        n_all, n_train, n_val = _part_sizes(mask, units)
        if n_val < _MIN_VALIDATION or n_train < _MIN_VALIDATION:
            what, sizes = "records", f"n_samples={n}"
            if units is not None:
                what, sizes = "units", f"n_units={n_all}, n_samples={n}"
            raise ValueError(
                f"the validation part has {n_val} and the training part {n_train} {what} "
                f"({sizes}); each needs at least {_MIN_VALIDATION}. Give more data, or change "
                "validation_fraction (or validation_mask)."
            )
        return mask

    def _problems(self, rows, targets, mask, device, sizes, units=None):
        """The ``train`` and ``mixed`` problems as weighted means over all
        the records (with ``units``: over all the units, each record's loss
        carrying its unit factor through ``record_weights``).

        Both sample every record at the same rate for the same steps (the
        validation records get weight 0 in ``train``), and ``mixed`` is
        divided by ``1 + 1 / penalty`` (its omega too, so its minimiser is
        unchanged): the two noisy solves then have about the same curvature
        and noise, so the noise's contribution to ``R`` mostly cancels in
        ``R(theta_lambda) - R(theta)`` instead of biasing omega.
        """
        # counts of records, or of units: the part weights n / n_train and
        # n / (penalty n_val), public (``sizes``, see _public_part_sizes),
        # make each problem a mean over its part
        n, n_train, n_val = sizes
        mask_t = torch.as_tensor(mask, device=device)
        augmented = torch.cat([rows, torch.ones_like(rows[:, :1])], 1)
        train_w = torch.full((rows.shape[0],), n / n_train, dtype=targets.dtype, device=device)
        train_w[mask_t] = 0.0
        shrink = 1.0 + 1.0 / self._penalty()
        mixed_w = train_w / shrink
        mixed_w[mask_t] = n / (self._penalty() * n_val) / shrink
        train = Problem(augmented, torch.cat([targets, train_w[:, None]], 1),
                        self._loss_kind, "train", units=units)
        mixed = Problem(augmented, torch.cat([targets, mixed_w[:, None]], 1),
                        self._loss_kind, "mixed", omega_factor=1.0 / shrink, units=units)
        return train, mixed

    def _settings(self, n, refit=False):
        """Release counts and step sizes of one solve on ``n`` records or
        units (the refit trains longer: it is the released model)."""
        kind = self.inner_solver
        if kind == "output_perturbation":
            return SolverSettings(kind, self.max_grad_norm, 1, 1.0, 1.0)
        if kind == "dp_loc_gd":
            steps = 60 if self.inner_steps == "auto" else int(self.inner_steps)
            steps *= 3 if refit else 1
            rounds = 3 if steps >= 3 else 1
            steps = max(rounds, steps - steps % rounds)
            return SolverSettings(kind, self.max_grad_norm, steps, 1.0, self._full_batch_lr,
                                  n_rounds=rounds)
        batch = self._resolve_batch_size(n)
        q = batch / n
        steps = (max(1, round(self._inner_epochs / q)) if self.inner_steps == "auto"
                 else int(self.inner_steps))
        steps *= 3 if refit else 1
        return SolverSettings(kind, self.max_grad_norm, steps, q, self._sgd_lr)

    def _release_plan(self, settings, n_train, units=None):
        """Every inner solve's releases (T of each kind), the one-off
        releases of the estimator (e.g. a private target scale) and, with
        ``outer_noise="paper"``, the T noisy hypergradients.

        With ``units`` (:class:`~skdp.privacy.UnitBounds`) the same plan is
        about units (``n_train`` then counts training units): each release
        adds every record's clipped, weighted term times its unit factor, so
        a unit moves it by at most its record-level sensitivity, and the
        DP-SGD solves' rates are over units."""
        T = self.n_outer_iter
        batches = [
            BatchReleases([Release(name, sensitivity=self.max_grad_norm)],
                          steps=T * settings[name].steps,
                          sampling_rate=settings[name].sampling_rate, name=name)
            for name in ("train", "mixed")
        ]
        if "refit" in settings:
            # the refit's noise relative to the tuning's, so that it gets
            # about refit_share of the privacy (GDP mu^2 ~ q^2 K / z^2 for
            # subsampled Gaussians, K / z^2 at q = 1); the accountant
            # certifies the total
            def weight(s, steps):
                return s.sampling_rate**2 * steps

            tune = sum(weight(settings[k], T * settings[k].steps) for k in ("train", "mixed"))
            refit = settings["refit"]
            ratio = math.sqrt(weight(refit, refit.steps) / tune
                              * (1.0 - self.refit_share) / self.refit_share)
            batches.append(BatchReleases(
                [Release("refit", sensitivity=self.max_grad_norm)], steps=refit.steps,
                sampling_rate=refit.sampling_rate, noise_ratio=ratio, name="refit",
            ))
        if self._option("outer_noise") == "paper":
            # equal privacy for the outer step and each inner solve (the
            # paper's thirds), approximately, through the noise ratio
            s = settings["train"]
            per_solve = s.steps * (1.0 if s.sampling_rate == 1.0
                                   else s.sampling_rate**2 * (math.e - 1.0))
            batches.append(BatchReleases(
                [Release("hypergradient", sensitivity=self._outer_sensitivity(n_train))],
                steps=T, sampling_rate=1.0, noise_ratio=1.0 / math.sqrt(per_solve),
                name="hypergradient",
            ))
        extra = ({} if units is None else
                 {"n_records": units.n_units, "privacy_unit": units.description})
        return ReleasePlan(batches, neighboring=self._option("neighboring"),
                           accountant=self._option("accountant"),
                           **extra)

    def _outer_sensitivity(self, n_train):
        # the paper's per-record outer bound, of order penalty * C, over the
        # mean of the training records (a library constant); with units,
        # over the mean of the training units: a unit's terms carry factors
        # summing to at most 1, so its bound is a record's
        return 2.0 * self._penalty() * self.max_grad_norm / n_train

    def _penalty(self):
        """lambda: ``penalty``, or with ``"auto"`` 1000 for exact
        (non-private) solves and 10 for private ones."""
        if self._option("penalty") != "auto":
            return float(self._option("penalty"))
        return 1e3 if self.epsilon is None else 10.0

    def _check_budget(self, n, units=None):
        """Warn when ``delta`` is not below one over the number of records
        (or of units)."""
        if self.epsilon is None:
            return
        if self.delta >= 1.0 / n:
            import warnings

            what = "n_samples" if units is None else "n_units"
            warnings.warn(
                f"delta={self.delta:g} is not smaller than 1/{what}={1.0 / n:.3g}; use "
                f"delta well below 1/{what}.", UserWarning,
            )

    def _tune(self, X, make_targets, n_outputs, validation_mask, unit_ids=None, **labels):
        """Run the tuner and set the fitted attributes.

        ``make_targets(report, generator, device, weights=None)`` returns the
        targets, shape (n, k) (it may draw the noise of one-off releases,
        with each record weighted by ``weights``: the unit factors of a fit
        with units, else None); ``labels`` also carry ``sample_weight`` and
        ``previous`` (the warm start); ``unit_ids`` (or None) the privacy
        units.
        """
        self._check_tuner_params()
        unit_codes, n_units = self._validated_unit_ids(unit_ids, X.shape[0])
        state = BilevelFitState(make_targets=make_targets, n_outputs=n_outputs,
                                validation_mask=validation_mask, unit_codes=unit_codes,
                                n_units=n_units, **labels)
        return self._fit_private(X, state)

    # the hooks of BaseDPEstimator._fit_private
    _training_dtype = torch.float64

    def _plan(self, X, state, generator):
        """The split (a coin per record, or per unit, drawn first after the
        units' subsets) and the plan of the inner solves."""
        state.mask = self._split(X.shape[0], state.validation_mask, generator, state.units)
        # with units, batch sizes and rates count units, whose number is public
        fraction = None if state.validation_mask is not None else self.validation_fraction
        state.sizes = _public_part_sizes(state.mask, state.units, fraction)
        n, n_train, _ = state.sizes
        self._check_budget(n, state.units)
        state.settings = {"train": self._settings(n), "mixed": self._settings(n)}
        if self.refit_share > 0:
            state.settings["refit"] = self._settings(n, refit=True)
        return self._release_plan(state.settings, n_train, state.units)

    def _calibrate(self, plan, state):
        if self.epsilon is None:
            return plan.non_private(self.delta)
        try:
            report = plan.calibrate(self.epsilon, self.delta)
        except PrivacyBudgetError as exc:
            raise ValueError(
                f"epsilon={self.epsilon} cannot pay for the 2 x n_outer_iter="
                f"{2 * self.n_outer_iter} inner solves ({exc}). Raise epsilon, or lower "
                "n_outer_iter or inner_steps."
            ) from exc
        z = max(report.multiplier("train"), report.multiplier("mixed"))
        if z > _MAX_MULTIPLIER:
            raise ValueError(
                f"epsilon={self.epsilon} is too small for 2 x n_outer_iter="
                f"{2 * self.n_outer_iter} inner solves: each would need noise "
                f"{z:.3g} times its sensitivity. Raise epsilon or lower n_outer_iter."
            )
        return report

    def _linear_by_settings(self):
        return True  # the bilevel tuners fit linear models only

    def _make_backend(self, X_t, n_outputs, seed):
        """No backend: the inner solvers work on the rows themselves (a
        linear model, trained on one thread on the CPU)."""
        self._is_linear = True

    def _targets(self, report, generator, device, X_t, state):
        state.rows = X_t.tensor()  # the float64 rows the solvers work on
        weights = None if state.units is None else state.units.factors
        targets = state.make_targets(report, generator, device, weights=weights)
        return targets.to(device=device, dtype=torch.float64)

    def _train(self, backend, targets, report, generator, state):
        """The outer loop over private inner solves, then the refit at the
        chosen omega; returns ``(weights, history, noise)``."""
        exact = self.epsilon is None
        rows, device = state.rows, state.rows.device
        train, mixed = self._problems(rows, targets, state.mask, device, state.sizes,
                                      units=state.units)
        # sample weights (factors in [0, 1], or None; with units times the
        # unit factors) weigh every record in both
        train.record_weights = mixed.record_weights = state.record_weights
        reg = self._regularizer()
        train_solver = InnerSolver(train, state.settings["train"], generator, exact, reg)
        mixed_solver = InnerSolver(mixed, state.settings["mixed"], generator, exact, reg)
        noise = {name: report.multiplier(name) for name in ("train", "mixed")}
        outer_std = 0.0
        if self._option("outer_noise") == "paper" and not exact:
            outer_std = report.scale("hypergradient")
            noise["hypergradient"] = report.multiplier("hypergradient")
        config = OuterConfig(
            n_iter=self.n_outer_iter, penalty=self._penalty(), omega_init=self.omega_init,
            omega_bounds=tuple(self._option("omega_bounds")), outer_lr=self._option("outer_lr"),
            outer_noise_std=outer_std, verbose=self.verbose, regularizer=reg,
        )
        theta0 = torch.zeros((state.n_outputs, rows.shape[1] + 1), dtype=torch.float64,
                             device=device)
        if state.initial_weights is not None:  # warm_start: the previous model
            theta0 = torch.as_tensor(state.initial_weights, dtype=torch.float64, device=device)
        history = run_bilevel(train_solver, mixed_solver,
                              {k: noise[k] for k in ("train", "mixed")}, config, generator,
                              theta0)
        t_out = output_rule(history["omega"])
        omega = float(history["omega"][t_out])
        weights = history["models"][t_out]
        if "refit" in state.settings:
            everything = Problem(torch.cat([rows, torch.ones_like(rows[:, :1])], 1),
                                 torch.cat([targets, torch.ones_like(targets[:, :1])], 1),
                                 self._loss_kind, "refit", record_weights=state.record_weights,
                                 units=state.units)
            refit = InnerSolver(everything, state.settings["refit"], generator, exact, reg)
            weights = refit.solve(omega, weights, report.multiplier("refit"))
            noise["refit"] = report.multiplier("refit")
        state.t_out, state.omega = t_out, omega
        return weights.cpu().numpy(), history, noise

    def _store_model(self, backend, result):
        self._set_linear_params(result[0])
        self.module_state_ = None

    def _store_fitted(self, report, result, state):
        _, history, noise = result
        self.noise_multiplier_ = noise["train"]
        self.n_steps_ = report.steps[0]
        self.sampling_rate_ = report.sampling_rates[0]
        self.t_out_ = state.t_out
        self.omega_ = state.omega
        self.omega_path_ = history["omega"]
        self.n_iter_ = self.n_outer_iter
        self.history_ = {k: v for k, v in history.items() if k != "models"}
        # in privacy units: a count of units (records) given by the public
        # unit coins (record coins) or the user's mask, never of the records
        # of the validation units (how many records a person holds is private)
        self.validation_size_ = _part_sizes(state.mask, state.units)[2]
        self.n_units_ = None if state.units is None else state.units.n_units

_PARAMS_DOC = """
    epsilon : float or None, default=1.0
        Budget of the whole fit (every inner solve; the training *and*
        validation parts are protected). ``None`` tunes non-privately with
        exact inner solves, for reference.
        About adding or removing one record, or with ``fit(unit_ids=...)`` one
        unit with all its records (see :ref:`units`).
    delta : float, default=1e-5
    validation_fraction : float in (0, 1), default=0.2
        Probability that a record is in the validation part: each record
        gets a coin of its own (:func:`~skdp.privacy.bernoulli_split`, drawn
        from the fit's randomness), so adding or removing a record moves no
        other record between the parts, and the parts' sizes are random
        (``fit`` raises a ``ValueError`` if either has fewer than 2
        records). A ``validation_mask`` passed to ``fit`` overrides it. With
        ``unit_ids`` the coin is per unit: a unit's records are all in one
        part, and each part needs at least 2 units.
    omega_init : float, default=1e-2
        Starting regularisation strength (of ``omega R(coef)`` on the mean
        loss, features as given: standardise them first).
    regularizer : {"l2", "smoothed_l1"}, default="l2"
        The penalty ``R`` (the intercept is never penalised). ``"l2"``:
        ``R = ||coef||^2 / 2``. ``"smoothed_l1"``: ``R = sum_j (sqrt(coef_j^2
        + mu^2) - mu)`` with ``mu = l1_smoothing``, which shrinks small
        coefficients towards 0 (sparsity-promoting); its gradient is added
        after the noise like the l2 one. With ``inner_solver="dp_loc_gd"``
        ``R`` keeps an l2 part ``0.1 / 2 * ||coef||^2`` (the solver's step
        sizes and radii need a strongly convex penalty; privacy does not
        depend on it); ``"output_perturbation"`` needs ``"l2"`` (its noise
        relies on the penalty's strong convexity) and raises otherwise.
    n_outer_iter : int, default=8
        Outer iterations T; the fit runs 2 T private inner solves.
    inner_solver : {"dp_sgd", "dp_loc_gd", "output_perturbation"}, default="dp_sgd"
        ``"dp_sgd"``: the DP-SGD engine (Poisson batches, clipping, penalty
        added after the noise, iterate averaging). ``"dp_loc_gd"``: the
        paper's localized noisy full-batch gradient descent.
        ``"output_perturbation"``: exact solve of a Lipschitz version of the
        problem (rows clipped, Huber loss for regression, intercept also
        penalised) plus Gaussian noise scaled to its ``1 / omega``
        sensitivity (an extension the paper's footnote 4 allows).
    refit_share : float in [0, 1), default=0.5
        Share of the privacy (GDP ``mu^2``, approximately; the accountant
        certifies the total) spent on a final private fit on *all* the data
        at ``omega_``, trained 3 times longer than an inner solve. 0 returns
        the tuning run's model at ``omega_`` (trained on the training part).
    inner_steps : int or "auto", default="auto"
        Gradient releases per inner solve (``"auto"``: 3 epochs for
        ``"dp_sgd"``, 60 full-batch steps in 3 rounds for ``"dp_loc_gd"``;
        output perturbation makes one release).
    max_grad_norm : float, default=1.0
        Clipping bound on each record's (weighted) gradient, or the Lipschitz
        bound of output perturbation.
    class_weight : dict, "balanced" or None, default=None
        (:class:`DPBilevelLogisticRegression` only.) Class weights, multiplied
        with ``sample_weight``. Only their ratios matter: they are divided by
        the largest, so the most heavily weighted class keeps the full
        per-record bound ``max_sample_weight`` (``class_weight_`` holds the
        result). A dict (label -> weight; a class it leaves out gets 1) is
        public and costs nothing. ``"balanced"`` weighs class c by ``n_samples
        / (n_classes * count_c)`` with the counts from one Gaussian release (2
        % of the budget, in GDP ``mu^2``, accounted in ``dp_event_`` as
        ``"class_counts"``); noisy counts are floored at 1 and every weight is
        kept within a factor 100 of the largest.
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
        every record has weight 1). The tuner weighs every record's loss term
        in both inner problems (the training loss, and for validation records
        the validation loss) and in the refit: the private solvers multiply
        each record's clipped gradient by ``w / max_sample_weight``, the exact
        and output-perturbation solves its loss (their sensitivities use the
        unweighted bound). See :ref:`privacy-sample-weights`.
    calibration : {"auto"} or None, default="auto" (classifier)
        Private calibration of the predicted probabilities after training
        (binary problems). ``"auto"`` maps each score ``s`` to ``scale * s + shift`` (Platt scaling) fitted on one accounted release of the
        counts of (score bin, true class) of the trained model (10 % of the
        budget, in ``dp_event_`` as ``"score_calibration"``; see
        :ref:`privacy-after-training`); ``score_calibration_`` holds the
        ``(scale, shift)`` applied. None keeps the trained scores and leaves
        that share to training. ``"auto"`` calibrates when the training
        records (or units) can fill three pools of the noisy counts (about
        280 at ``epsilon=1``, ``delta=1e-5``); below, the share goes to
        training (``score_calibration_`` is None).
    model_check : bool, default=True (classifier)
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
        (``coef_`` and ``intercept_``) instead of a fresh model; ``X`` must
        have as many features (and ``y`` the same classes). The new fit spends
        its own budget; ``dp_event_`` becomes the composition of the previous
        and the new events, and ``epsilon_`` and ``privacy_report_`` the
        accountant's for it. Composition assumes the worst case, that both
        fits saw the same records. Only the model carries over: the outer
        loop's state does not (omega starts again at ``omega_init``, with a
        fresh step size); the first inner solves start from the previous
        model.
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit (e.g. a person) that the fit uses. Each unit keeps at most k of
        its records, a random subset drawn once per fit independently of
        their values, and each kept record weighs ``1 / min(|u|, k)`` in both
        inner problems, the refit and every one-off release: a unit then
        moves every released quantity by at most the bound of one record,
        and every problem is a mean over units. Unused without ``unit_ids``.
    unit_column : str, int or None, default=None
        A column of ``X`` (a DataFrame's column name, or a position) that
        holds the unit ids, for use with metadata routing off; it is removed
        from the features, and ``predict`` accepts ``X`` with or without it.
        ``fit(unit_ids=...)`` takes precedence.
    solver_options : dict or None, default=None
        Settings of the solver that one default serves (the keys below; a key
        left out keeps its default; an unknown key or a bad value is an error
        at ``fit``):

        {solver_options}
    random_state : int, RandomState instance or None, default=None
        Seeds the split's coins and the noise, for reproducible experiments;
        ``None`` draws both from the OS CSPRNG.
    device : str, default="cpu"
    verbose : int, default=0
"""

_ATTRS_DOC = """
    omega_ : float
        The tuned strength, ``omega_path_[t_out_]``.
    omega_path_ : ndarray of shape (n_outer_iter + 1,)
    t_out_ : int
        The iteration whose step ``|log omega_{t+1} - log omega_t|`` is the
        smallest (the paper's output rule; post-processing).
    coef_, intercept_ :
        The private model at ``omega_``: the refit on all the data, or with
        ``refit_share=0`` the model of iteration ``t_out_`` (training part).
    epsilon_, delta_ : float
        Spent, from the accountant on ``dp_event_``.
    dp_event_ : dp_accounting.DpEvent
        Every inner solve (and refit, target scale, noisy hypergradient)
        composed.
    privacy_report_ : skdp.privacy.PrivacyReport
    noise_multiplier_ : float or None
        Noise over sensitivity of the ``"train"`` solves' steps (None without
        privacy); the ``"mixed"`` solves, the refit and a noisy
        hypergradient have theirs in ``privacy_report_``
        (``privacy_report_.multiplier(name)``).
    n_steps_ : int
        Steps of the ``"train"`` solves, all iterations together.
    sampling_rate_ : float
        Sampling rate of the ``"train"`` solves' steps.
    history_ : dict
        Private quantities per iteration: ``"omega"``, ``"hypergradient"``,
        ``"R_train"``, ``"R_mixed"`` (``R`` of the chosen ``regularizer``).
    validation_size_ : int
        Size of the validation part in privacy units: records, or with
        ``unit_ids`` units (public: the coins are drawn per record or per
        unit, independently of the data; the number of records the
        validation units hold is private and is not released).
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public, like the number of
        records of a record-level fit), else None.
    n_iter_ : int
        Outer iterations (``n_outer_iter``).
    class_weight_ : ndarray of shape (n_classes,) or None
        (:class:`DPBilevelLogisticRegression`.) The class weights applied
        (``class_weight`` over its largest, times ``max_sample_weight``).
"""


@document_solver_options
class DPBilevelRidge(_DPBilevelMixin, BaseDPRegressor):
    __doc__ = """Ridge regression whose penalty is tuned privately, without a grid.

    Minimises the mean of ``(prediction - y)**2 / 2`` plus
    ``omega R(coef)`` (``R = ||coef||^2 / 2`` by default, or a smoothed l1
    norm, see ``regularizer``) and chooses omega on a validation part of the
    data by the first-order DP bilevel method (see :ref:`bilevel`): each
    iteration trains two private models at the current omega -- one on the
    training part, one with the validation loss mixed in at weight
    ``1 / penalty`` -- and moves omega against
    ``penalty * (R(theta_lambda) - R(theta))``. Targets are scaled as in
    :class:`~skdp.DPSGDRegressor` (``y_bounds``, or a private power of two).

    Parameters
    ----------""" + _PARAMS_DOC + """    y_bounds : tuple (low, high) or None, default=None
        Public bounds on the target; ``None`` buys a private scale (part of
        the budget, see :class:`~skdp.DPSGDRegressor`).

    Attributes
    ----------""" + _ATTRS_DOC + """    y_scale_, y_offset_ : float

    See Also
    --------
    sklearn.linear_model.RidgeCV : the non-private grid search.
    DPBilevelLogisticRegression : the same tuner for classification.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skdp.model_selection import DPBilevelRidge
    >>> X, y = make_regression(n_samples=4000, n_features=20, noise=20, random_state=0)
    >>> reg = DPBilevelRidge(epsilon=2.0, random_state=0).fit(X, y)
    >>> reg.epsilon_ <= 2.0, len(reg.omega_path_)
    (True, 9)
    >>> bool(reg.score(X, y) > 0.8)
    True
    """

    _loss_kind = "squared"
    _inner_epochs = 3
    _sgd_lr = 0.1
    _full_batch_lr = 0.5

    _released_attributes = BaseDPRegressor._released_attributes | _BILEVEL_RELEASED
    _parameter_constraints: ClassVar[dict] = {
        **_DPBilevelMixin._bilevel_constraints,
        "y_bounds": [tuple, list, None],
    }

    def __init__(self, *, epsilon=1.0, delta=1e-5, validation_fraction=0.2, omega_init=1e-2,
                 regularizer="l2", n_outer_iter=8, refit_share=0.5, inner_solver="dp_sgd",
                 inner_steps="auto", max_grad_norm=1.0, y_bounds=None, random_state=None,
                 device="cpu", verbose=0, max_sample_weight=1.0, warm_start=False,
                 max_records_per_unit=MAX_RECORDS_PER_UNIT, unit_column=None,
                 solver_options=None):
        self.epsilon = epsilon
        self.delta = delta
        self.validation_fraction = validation_fraction
        self.omega_init = omega_init
        self.regularizer = regularizer
        self.n_outer_iter = n_outer_iter
        self.refit_share = refit_share
        self.inner_solver = inner_solver
        self.inner_steps = inner_steps
        self.max_grad_norm = max_grad_norm
        self.y_bounds = y_bounds
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.max_sample_weight = max_sample_weight
        self.warm_start = warm_start
        self.max_records_per_unit = max_records_per_unit
        self.unit_column = unit_column
        self.solver_options = solver_options

    # routing on: a validation mask and the unit ids are routed by default
    __metadata_request__fit: ClassVar[dict] = {"validation_mask": True, "unit_ids": True}

    def fit(self, X, y, *, validation_mask=None, sample_weight=None, unit_ids=None):
        """Tune omega and fit the private model at it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        validation_mask : array-like of bool, shape (n_samples,), default=None
            Rows of the validation part (public); overrides
            ``validation_fraction``.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each record (None: all 1), clipped to
            ``max_sample_weight``; it scales the record's clipped contribution,
            so the privacy guarantee does not change. With metadata routing on,
            request it with ``set_fit_request(sample_weight=True)``.

        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id; any hashable,
            no missing values). When given, epsilon and delta are about
            adding or removing *all* records of one unit: the validation
            part is drawn by unit (a ``validation_mask`` must keep each unit
            on one side), each unit keeps at most ``max_records_per_unit``
            of its records (drawn at random once per fit), each weighted
            ``1 / min(|u|, max_records_per_unit)`` in every inner problem and
            release, every problem is a mean over units, and the DP-SGD
            solves sample units. The target-scale histogram is weighted the
            same way. Requested by default with metadata routing on; with
            routing off, ``unit_column`` can name a column of ``X``
            that holds them. See :ref:`units`.

        Returns
        -------
        self : DPBilevelRidge
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
            return torch.as_tensor(scaled, dtype=torch.float64)[:, None]

        return self._tune(X, targets, 1, validation_mask, unit_ids=unit_ids,
                          sample_weight=sample_weight, previous=previous)


@document_solver_options
class DPBilevelLogisticRegression(_DPBilevelMixin, BaseDPClassifier):
    __doc__ = """Logistic regression whose penalty is tuned privately, without a grid.

    Softmax (multinomial) logistic regression with penalty
    ``omega R(W)`` (``R = ||W||^2 / 2`` by default, or a smoothed l1 norm,
    see ``regularizer``), omega chosen on a validation part of the data
    by the first-order DP bilevel method of :class:`DPBilevelRidge` (see
    :ref:`bilevel`).

    Parameters
    ----------""" + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)""" + _ATTRS_DOC + """
    See Also
    --------
    sklearn.linear_model.LogisticRegressionCV : the non-private grid search.
    DPBilevelRidge : the same tuner for regression.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdp.model_selection import DPBilevelLogisticRegression
    >>> X, y = make_classification(n_samples=4000, n_features=20, random_state=0)
    >>> clf = DPBilevelLogisticRegression(epsilon=2.0, random_state=0).fit(X, y)
    >>> clf.epsilon_ <= 2.0
    True
    >>> bool(clf.score(X, y) > 0.8)
    True
    """

    # fit takes no sensitive features; a validation mask and the unit ids
    # are routed by default
    __metadata_request__fit: ClassVar[dict] = {"sensitive_features": UNUSED, "validation_mask": True,
                               "unit_ids": True}

    _loss_kind = "logistic"
    _inner_epochs = 3
    _sgd_lr = 0.5
    _full_batch_lr = 1.0
    sensitive_columns = None
    sensitive_groups = None

    _released_attributes = BaseDPClassifier._released_attributes | _BILEVEL_RELEASED
    _parameter_constraints: ClassVar[dict] = {
        **_DPBilevelMixin._bilevel_constraints,
        "class_weight": BaseDPClassifier._parameter_constraints["class_weight"],
        "calibration": BaseDPClassifier._parameter_constraints["calibration"],
        "model_check": BaseDPClassifier._parameter_constraints["model_check"],
    }

    def __init__(self, *, epsilon=1.0, delta=1e-5, validation_fraction=0.2, omega_init=1e-2,
                 regularizer="l2", n_outer_iter=8, refit_share=0.5, inner_solver="dp_sgd",
                 inner_steps="auto", max_grad_norm=1.0, random_state=None, device="cpu",
                 verbose=0, class_weight=None, max_sample_weight=1.0, warm_start=False,
                 calibration="auto", model_check=True, max_records_per_unit=MAX_RECORDS_PER_UNIT,
                 unit_column=None, solver_options=None):
        self.epsilon = epsilon
        self.delta = delta
        self.validation_fraction = validation_fraction
        self.omega_init = omega_init
        self.regularizer = regularizer
        self.n_outer_iter = n_outer_iter
        self.refit_share = refit_share
        self.inner_solver = inner_solver
        self.inner_steps = inner_steps
        self.max_grad_norm = max_grad_norm
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

    def fit(self, X, y, *, validation_mask=None, sample_weight=None, unit_ids=None):
        """Tune omega and fit the private model at it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        validation_mask : array-like of bool, shape (n_samples,), default=None
            Rows of the validation part (public); overrides
            ``validation_fraction``.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each record (None: all 1), clipped to
            ``max_sample_weight``; it scales the record's clipped contribution,
            so the privacy guarantee does not change. With metadata routing on,
            request it with ``set_fit_request(sample_weight=True)``.

        unit_ids : array-like of shape (n_samples,), default=None
            The privacy unit of each record (e.g. a person id; any hashable,
            no missing values). When given, epsilon and delta are about
            adding or removing *all* records of one unit: the validation
            part is drawn by unit (a ``validation_mask`` must keep each unit
            on one side), each unit keeps at most ``max_records_per_unit``
            of its records (drawn at random once per fit), each weighted
            ``1 / min(|u|, max_records_per_unit)`` in every inner problem and
            release, every problem is a mean over units, and the DP-SGD
            solves sample units. Requested by default with metadata routing
            on; with routing off, ``unit_column`` can name a column of ``X``
            that holds them. See :ref:`units`.

        Returns
        -------
        self : DPBilevelLogisticRegression
        """
        self._validate_params()
        previous = self._previous_fit()
        X, y_codes, _, unit_ids = self._validate_training_data(
            X, y, None, units=True, unit_ids=unit_ids)
        self._check_warm_start(previous, unit_ids)
        sample_weight = self._validated_sample_weight(sample_weight, X, y_codes)

        def onehot(report, generator, device, weights=None):
            return one_hot(y_codes, len(self.classes_), torch.float64, device)

        return self._tune(X, onehot, len(self.classes_), validation_mask, unit_ids=unit_ids,
                          y_codes=y_codes, sample_weight=sample_weight, previous=previous)
