"""Differentially private distributionally robust classifier and regressor."""

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Optional

import numpy as np
import torch
from scipy.optimize import brentq
from sklearn.base import is_classifier
from sklearn.utils._param_validation import Interval, StrOptions

from .._fit.classifier import BaseDPClassifier
from .._fit.options import BASE_SOLVER_OPTIONS, SolverOption, document_solver_options
from .._fit.columns import split_fit_only_columns
from .._fit.regressor import BaseDPRegressor
from .._fit.state import FitState
from .._fit.units import MAX_RECORDS_PER_UNIT, UNIT_CONSTRAINTS
from ..privacy import (
    BatchReleases,
    PrivacyBudgetError,
    Release,
    ReleasePlan,
    current_communicator,
)
from ._divergences import DIVERGENCES, make_divergence
from ._losses import CrossEntropyLoss, SquaredLoss
from ._trainer import (
    DROConfig,
    release_names,
    train_double_spider,
    train_dual_sgd,
    train_recursive_spider,
)

ALGORITHMS = ("auto", "double_spider", "recursive_spider", "dp_sgd")

#: ``algorithm="auto"`` runs the SPIDER algorithms only from this many
#: training records on (classifier, regressor). With the "auto" batches,
#: ``max_epochs`` buys about ``0.12 max_epochs sqrt(n)`` SPIDER steps; a
#: gradient difference is cheaper to release than a fresh gradient only when
#: the steps are short (``diff_clip * |step|`` well below ``2 C``), which
#: takes many steps. Chosen on held-out data at epsilon=1 with the defaults
#: (best lam of the documented grid):
#:
#: * classifier, worst-group accuracy, DP-SGD on the dual against double
#:   SPIDER: imbalanced digits (690 records) 17-27 % worst-class recall
#:   against at most 1.5 %; Adult (22,600 records, a held-out quarter of the
#:   training data) 59.7 % against 51.9 %; the rare-subpopulation task
#:   (70,000 records of a second draw) 71.8 % against 70.0 %;
#: * regressor, worst-group MSE on 70,000 records of a second draw of the
#:   regression task: double SPIDER 3.84 against 4.38 for DP-SGD on the dual
#:   (DPSGDRegressor 5.10).
SPIDER_MIN_SAMPLES = {"classifier": 100_000, "regressor": 10_000}

#: Share of each batch's privacy (GDP mu^2) by release. The model gradient
#: carries most of the information; the scalar dual statistics need little.
_SHARES = {
    "eta_anchor": 0.1, "x_anchor": 0.9, "eta_diff": 0.1, "x_diff": 0.9,
    "v_anchor": 0.75, "u_anchor": 0.1, "s_anchor": 0.15,
    "v_diff": 0.75, "u_diff": 0.1, "s_diff": 0.15,
    "x_grad": 0.9, "dual_grad": 0.1,
}

#: Largest exponent a float64 exponential of the DRO weights may reach.
_EXP_LIMIT = 700.0

#: The release of each algorithm that carries the model's gradient in a
#: (difference) step: its multiplier is ``noise_multiplier_``.
_MODEL_RELEASE = {"double_spider": "x_diff", "recursive_spider": "v_diff", "dp_sgd": "x_grad"}

#: The DRO estimators' solver options.
_DRO_OPTIONS = {
    **{key: value for key, value in BASE_SOLVER_OPTIONS.items()
       if key not in ("sample_rate", "noise_multiplier")},
    "alpha": SolverOption(
        0.2, [Interval(Real, None, None, closed="neither")], 'float in (0, 1)',
        'The level of ``divergence="kl_cvar"``: its largest weight ratio is ``1/alpha``.'),
    "k": SolverOption(
        2.0, [Interval(Real, None, None, closed="neither")], 'float > 1',
        'The exponent of ``divergence="cressie_read"``.'),
    "lam_min": SolverOption(
        0.05, [Interval(Real, 0, None, closed="neither")], 'float > 0',
        'Lower bound on the learned KL temperature (with ``rho``).'),
    "lam_init": SolverOption(
        1.0, [Interval(Real, 0, None, closed="neither")], 'float > 0',
        'Initial temperature (with ``rho``).'),
    "algorithm": SolverOption(
        'auto', [StrOptions(set(ALGORITHMS))], '{"auto", "double_spider", "recursive_spider", "dp_sgd"}',
        '``"auto"``: with at least 100,000 training records (classifier) or 10,000 '
        '(regressor), recursive SPIDER for KL and double SPIDER otherwise; with fewer, '
        '``"dp_sgd"`` (the SPIDER algorithms need many short steps; the sizes were chosen '
        'on held-out data, see ``SPIDER_MIN_SAMPLES``). ``"dp_sgd"``: DP-SGD on the same '
        'dual objective.'),
    "dual_grad_norm": SolverOption(
        1.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Per-sample clipping bound of the dual statistics (eta or lam).'),
    "diff_clip": SolverOption(
        4.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Per-sample bound of a difference is ``min(2 C, diff_clip * |step|)``, where '
        '``|step|`` is the length of the last (released) move.'),
    "anchor_batch_size": SolverOption(
        'auto', [Interval(Integral, 1, None, closed="left"), StrOptions({"auto", "full"})], 'int, "auto" or "full"',
        'Expected Poisson batch of the anchors: "auto" is 4 times ``batch_size`` (at most '
        'half the data); "full" uses every record.'),
    "epoch_size": SolverOption(
        8, [Interval(Integral, 1, None, closed="left")], 'int',
        'An anchor every ``epoch_size`` steps (q of the paper).'),
    "dual_learning_rate": SolverOption(
        0.5, [Interval(Real, 0, None, closed="neither")], 'float',
        'Step size of eta (or lam).'),
    "momentum": SolverOption(
        0.5, [Interval(Real, 0, 1, closed="left")], 'float in [0, 1)',
        'Momentum of ``algorithm="dp_sgd"``. The classifier\'s default, with '
        '``iterate="average"``, was chosen for calibrated probabilities on validation '
        'splits of the training data (Adult and German credit at epsilon=1): heavier '
        'momentum makes the noisy iterates overshoot and the probabilities over- '
        'confident.'),
    "step_norm_cap": SolverOption(
        1.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Longest model step of the SPIDER algorithms (normalised steps).'),
    "storm_beta": SolverOption(
        0.0, [Interval(Real, 0, 1, closed="both")], 'float in [0, 1]',
        "STORM weight of the recursive SPIDER's estimate of ``mean exp`` (0: a SPIDER "
        'difference, 1: a fresh minibatch mean every step).'),
    "loss_bound": SolverOption(
        3.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Public cap B of the loss where it enters a weight; exponentials are taken as '
        '``exp((min(loss, B) - B) / lam)`` or with ``eta`` in ``[0, B]``, so they cannot '
        'overflow.'),
    "max_weight": SolverOption(
        10.0, [Interval(Real, 1, None, closed="left"), None], 'float >= 1 or None',
        "Cap ``W`` on a record's worst-case weight ratio ``(psi*)'`` in the penalised "
        'dual (double SPIDER, DP-SGD): the divergence becomes ``psi`` restricted to '
        "ratios ``<= W``. Each record's model gradient is clipped to ``max_grad_norm`` "
        '*then* weighted, so its sensitivity is ``W * max_grad_norm`` with ``W = '
        "min((psi*)'(loss_bound / lam), max_weight)`` (``weight_bound_``); a smaller cap "
        'means less noise and less robustness. None: no cap (KL then cannot be private).'),
    "anchor_noise_ratio": SolverOption(
        1.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Noise multiplier of the anchors relative to the differences.'),
    "noise": SolverOption(
        'calibrated', [StrOptions({"calibrated", "paper"})], '{"calibrated", "paper"}',
        '``"paper"`` uses the paper\'s closed-form noise with constant ``paper_constant`` '
        'and reports what the accountant certifies for it (with a warning): for '
        'reproduction only.'),
    "paper_constant": SolverOption(
        1.0, [Interval(Real, 0, None, closed="neither")], 'float',
        'Constant of the paper\'s closed-form noise of ``"noise": "paper"``.'),
    "iterate": SolverOption(
        'average', [StrOptions({"last", "average"})], '{"last", "average"}',
        'Return the last iterate or the average of the second half.'),
    "init_model": SolverOption(
        None, "no_validation", 'object or None',
        'A model fitted on *public* data (with ``coef_`` and ``intercept_``) to start '
        'from; never a model trained on the training data.'),
}

_DRO_CONSTRAINTS = {
    "divergence": [StrOptions(set(DIVERGENCES))],
    "lam": [Interval(Real, 0, None, closed="neither")],
    "rho": [Interval(Real, 0, None, closed="left"), None],
    **UNIT_CONSTRAINTS,
}


@dataclass
class DROFitState(FitState):
    """A DRO fit's state: the base's, and the schedule its hooks pass on.

    Attributes
    ----------
    q_anchor, q_diff : float or None
        Sampling rates of the anchor and difference batches.
    n_anchor_batch, n_diff_batch : int or None
        Their expected sizes.
    steps : int or None
    weight_cap : float or None
        Cap on the worst-case weight ratio used in training.
    config : DROConfig or None
    """

    algorithm: Optional[str] = None
    q_anchor: Optional[float] = None
    q_diff: Optional[float] = None
    n_anchor_batch: Optional[int] = None
    n_diff_batch: Optional[int] = None
    steps: Optional[int] = None
    noise: Any = None
    weight_cap: Optional[float] = None
    config: Any = None


class _DROMixin:
    """Fit machinery shared by the DRO classifier and regressor."""

    @property
    def _formulation(self):
        """``"constrained"`` (a KL ball of radius ``rho``, the temperature
        learned) when ``rho`` is given, else ``"penalized"`` (weight ``lam``)."""
        return "penalized" if self.rho is None else "constrained"

    _loss = None
    #: Trained by :func:`skdp.distributed.fit_data_parallel`.
    _data_parallel = True

    def _resolve_algorithm(self, n_samples):
        """``"auto"``: DP-SGD on the dual below ``SPIDER_MIN_SAMPLES`` records,
        else recursive SPIDER for KL and double SPIDER for the rest."""
        algorithm = self._option("algorithm")
        if algorithm == "auto":
            kind = "classifier" if is_classifier(self) else "regressor"
            if n_samples < SPIDER_MIN_SAMPLES[kind]:
                algorithm = "dp_sgd"
            else:
                algorithm = "recursive_spider" if self.divergence == "kl" else "double_spider"
        if self._formulation == "constrained":
            if self.divergence != "kl":
                raise ValueError(
                    f"rho={self.rho!r} asks for a KL ball of radius rho, which needs "
                    f"divergence='kl'; got divergence={self.divergence!r}. Use rho=None (the "
                    "penalized problem, weight lam)."
                )
            if algorithm == "double_spider":
                raise ValueError(
                    "algorithm='double_spider' solves the penalized dual; the constrained KL "
                    "form is compositional: use algorithm='recursive_spider' (or 'auto') or "
                    "'dp_sgd'."
                )
        if algorithm == "recursive_spider" and self.divergence != "kl":
            raise ValueError(
                f"algorithm='recursive_spider' solves the KL compositional form; got "
                f"divergence={self.divergence!r}. Use 'double_spider' (or 'auto')."
            )
        return algorithm

    def _check_exponent(self):
        lam = self._option("lam_min") if self._formulation == "constrained" else self.lam
        if self._divergence.uses_exp and self._option("loss_bound") / lam > _EXP_LIMIT:
            name = "lam_min" if self._formulation == "constrained" else "lam"
            raise ValueError(
                f"loss_bound / {name} = {self._option('loss_bound'):g} / {lam:g} = "
                f"{self._option('loss_bound') / lam:.3g} overflows the exponential scale of "
                f"divergence={self.divergence!r} (limit {_EXP_LIMIT:g}): the worst-case weights "
                f"exp(loss / {name}) are not representable. Raise {name} or lower loss_bound."
            )

    def _resolve_anchor_batch(self, n, batch):
        if self._option("anchor_batch_size") == "full":
            return n
        if self._option("anchor_batch_size") == "auto":
            # Poisson-subsampled (never the whole data) so anchors stay amplified
            return int(max(batch, min(n // 2, 4 * batch)))
        if self._option("anchor_batch_size") > n:
            raise ValueError(
                f"anchor_batch_size={self._option('anchor_batch_size')} is larger than the number of "
                f"training samples ({n}); use 'full' or a smaller size."
            )
        return int(self._option("anchor_batch_size"))

    def _weight_cap(self, algorithm):
        """Cap on the weight ratio used in training (inf: none).

        The penalised dual (double SPIDER, DP-SGD) caps ``(psi*)'`` at
        ``max_weight``; recursive SPIDER's shifted weights are at most 1
        and need no cap."""
        if algorithm == "recursive_spider" or self._option("max_weight") is None:
            return math.inf
        return float(self._option("max_weight"))

    def _weight_bound(self, algorithm):
        """Public bound ``W`` on the per-sample weights of the x statistic.

        Penalised dual: ``eta`` is kept in ``[0, B]`` and losses are capped
        at ``B``, so ``(l - eta) / lam <= B / lam`` and
        ``w <= (psi*)'(B / lam)``, capped at ``max_weight`` (constrained KL
        with DP-SGD: ``lam >= lam_min``). Recursive SPIDER: 1."""
        if algorithm == "recursive_spider":
            return 1.0
        lam = self._option("lam_min") if self._formulation == "constrained" else self.lam
        div = make_divergence(self.divergence, alpha=self._option("alpha"), k=self._option("k"),
                              max_ratio=self._weight_cap(algorithm))
        bound = float(div.weight(torch.tensor(self._option("loss_bound") / lam,
                                              dtype=torch.float64)))
        if self.epsilon is not None and not math.isfinite(bound):
            raise ValueError(
                f"divergence={self.divergence!r} with loss_bound / lam = "
                f"{self._option('loss_bound') / lam:.3g} has unbounded worst-case weights, so one record's "
                "weighted gradient has no finite sensitivity; set max_weight (e.g. 10)."
            )
        return max(1.0, bound)

    def _plan_releases(self, algorithm, n, q_anchor, q_diff, steps, units=None):
        anchor_names, diff_names = release_names(algorithm, self._formulation)
        W = self._weight_bound(algorithm)
        # the x statistic is sum_i w_i clip(g_i, C) with w_i <= W: sensitivity W C
        sens = {"x": W * self.max_grad_norm, "v": self.max_grad_norm,
                "eta": self._option("dual_grad_norm"),
                "u": self._option("dual_grad_norm"), "dual": self._option("dual_grad_norm"), "s": 1.0}

        def release(name, anchor):
            # difference bounds adapt to the iterates: their noise is the
            # multiplier times the bound of the step (nominal sensitivity 1)
            sensitivity = sens[name.split("_")[0]] if anchor or name.startswith("s_") else 1.0
            return Release(name, sensitivity=sensitivity, share=_SHARES[name])

        if algorithm == "dp_sgd":
            batches = [BatchReleases([release(nm, True) for nm in diff_names], steps=steps,
                                     sampling_rate=q_diff, name="steps")]
        else:
            n_anchor = -(-steps // self._option("epoch_size"))
            batches = [
                BatchReleases([release(nm, True) for nm in anchor_names], steps=n_anchor,
                              sampling_rate=q_anchor, name="anchors",
                              noise_ratio=self._option("anchor_noise_ratio")),
                BatchReleases([release(nm, False) for nm in diff_names], steps=steps - n_anchor,
                              sampling_rate=q_diff, name="differences"),
            ]
        # with units every per-record term carries the unit factors (a unit
        # moves each release as one record does); the rates are over units
        extra = ({} if units is None else
                 {"n_records": units.n_units, "privacy_unit": units.description})
        return ReleasePlan(batches, neighboring=self._option("neighboring"),
                           accountant=self._option("accountant"),
                           **extra)

    def _paper_noise(self, plan, n, steps, n_anchor_batch, n_diff_batch):
        """The paper's closed-form noise (Thm 5 with both branches and the
        corrected sqrt(log(1/delta))/epsilon), as noise scales on the sums."""
        base = self._option("paper_constant") * math.sqrt(math.log(1.0 / self.delta)) / self.epsilon
        q = self._option("epoch_size")
        scales = {}
        for batch in plan.batches:
            anchor = batch.name == "anchors"
            size = n_anchor_batch if anchor else n_diff_batch
            horizon = steps / q if anchor else steps
            z = base * max(1.0, size * math.sqrt(horizon) / n)
            for r in batch.releases:
                scales[r.name] = z * r.sensitivity
        # one-off releases (the regressor's target scale) keep their planned share
        initial, _ = plan._initial(self.epsilon, self.delta)
        scales.update({r.name: initial[r.name] * r.sensitivity for r in plan.initial})
        return scales

    def _fit_dro(self, X, targets, **labels):
        """Train on validated ``X``; ``targets(report, generator, device,
        weights=None)`` returns the per-sample target tensor (it may draw the
        noise of the plan's initial releases, weighted by the unit factors
        ``weights`` of a fit with units). ``labels`` may hold ``unit_ids``
        (or None): the privacy units."""
        self._divergence.name  # validates alpha / k
        unit_codes, n_units = self._validated_unit_ids(labels.pop("unit_ids", None), X.shape[0])
        return self._fit_private(X, DROFitState(make_targets=targets, unit_codes=unit_codes,
                                                n_units=n_units, **labels))

    # the hooks of BaseDPEstimator._fit_private
    def _plan(self, X, state, generator):
        """The schedule (algorithm, batches, steps) and its release plan
        (with units, over their public number: rates, batch sizes and the
        algorithm choice are about units)."""
        n = (current_communicator().total(X.shape[0]) if state.units is None
             else state.units.n_units)  # data-parallel: the rows of all ranks
        state.algorithm = algorithm = self._resolve_algorithm(n)
        self._check_exponent()
        batch = self._resolve_batch_size(n)
        state.q_diff = self._check_privacy_setup(n, batch)
        state.n_diff_batch = self._expected_batch_size(n, state.q_diff)
        state.n_anchor_batch = self._resolve_anchor_batch(n, state.n_diff_batch)
        state.q_anchor = state.n_anchor_batch / n
        if self.max_steps is not None:
            steps = int(self.max_steps)
        elif algorithm == "dp_sgd":
            steps = max(1, int(round(self.max_epochs / state.q_diff)))
        else:
            per_step = (state.n_anchor_batch + (self._option("epoch_size") - 1) * state.n_diff_batch) / (
                self._option("epoch_size"))
            steps = max(1, int(round(self.max_epochs * n / per_step)))
        state.n, state.steps = n, steps
        return self._plan_releases(algorithm, n, state.q_anchor, state.q_diff, steps, state.units)

    def _calibrate(self, plan, state):
        """The accountant's calibration, or the paper's noise (with a warning
        and the accountant's epsilon for it)."""
        if self.epsilon is None:
            return plan.non_private(self.delta)
        if self._option("noise") == "paper":
            report = plan.account(
                self._paper_noise(plan, state.n, state.steps, state.n_anchor_batch, state.n_diff_batch),
                self.delta)
            warnings.warn(
                f"noise='paper' uses the paper's closed-form noise (constant "
                f"c={self._option('paper_constant'):g}), which is not calibrated to the budget: the "
                f"accountant certifies epsilon={report.epsilon:.4g} for epsilon={self.epsilon:g} "
                "requested. Use it only to reproduce the paper.",
                UserWarning,
            )
            return report
        try:
            report = plan.calibrate(self.epsilon, self.delta)
        except PrivacyBudgetError as exc:
            raise ValueError(
                f"epsilon={self.epsilon} cannot buy one anchor of this plan ({exc}). Raise "
                "epsilon, lower max_epochs or raise the batch sizes."
            ) from exc
        self._check_anchor_noise(state.algorithm, report, state.n_anchor_batch)
        return report

    def _targets(self, report, generator, device, X_t, state):
        weights = None if state.units is None else state.units.factors
        targets = state.make_targets(report, generator, device, weights=weights)
        return targets.to(device=device, dtype=X_t.dtype)

    def _train(self, backend, targets, report, generator, state):
        """The configured algorithm from a (public) warm start; returns
        ``(eta, lam, history)``."""
        algorithm = state.algorithm
        state.noise = None if self.epsilon is None else {
            k: v.multiplier for k, v in report.noise.items()}
        state.weight_cap = self._weight_cap(algorithm)
        state.config = config = DROConfig(
            algorithm=algorithm, divergence=self._make_divergence(state.weight_cap),
            formulation=self._formulation, weight_bound=self._weight_bound(algorithm),
            lam=self.lam, rho=0.0 if self.rho is None else self.rho,
            lam_min=self._option("lam_min"), loss_bound=self._option("loss_bound"),
            n_steps=state.steps, epoch_size=self._option("epoch_size"), anchor_rate=state.q_anchor,
            diff_rate=state.q_diff, max_grad_norm=self.max_grad_norm,
            dual_grad_norm=self._option("dual_grad_norm"), diff_clip=self._option("diff_clip"),
            learning_rate=self.learning_rate, dual_learning_rate=self._option("dual_learning_rate"),
            momentum=self._option("momentum"), storm_beta=self._option("storm_beta"),
            step_norm_cap=self._option("step_norm_cap"), noise=state.noise, iterate=self._option("iterate"),
            verbose=self.verbose, units=state.units,
        )
        if state.previous is None:  # warm_start takes precedence
            self._warm_start(backend, targets.shape[1])
        lam_init = self.lam if self._formulation == "penalized" else max(self._option("lam_init"),
                                                                         self._option("lam_min"))
        if algorithm == "double_spider":
            eta, history = train_double_spider(backend, self._loss, targets, config, generator)
            return eta, self.lam, history
        if algorithm == "recursive_spider":
            lam, history = train_recursive_spider(
                backend, self._loss, targets, config, generator, lam_init)
            return None, lam, history
        return train_dual_sgd(backend, self._loss, targets, config, generator, lam_init)

    def _store_fitted(self, report, result, state):
        eta, lam, history = result
        dp_sgd = state.algorithm == "dp_sgd"
        self.algorithm_ = state.algorithm
        self.max_weight_ = state.weight_cap
        self.weight_bound_ = state.config.weight_bound
        self.eta_ = eta
        self.lam_ = float(lam)
        self.n_steps_ = state.steps
        self.noise_multiplier_ = (report.multiplier(_MODEL_RELEASE[state.algorithm])
                                  if report.private else None)
        self.sampling_rate_ = state.q_diff
        self.anchor_sampling_rate_ = None if dp_sgd else state.q_anchor
        self.batch_size_ = state.n_diff_batch
        self.anchor_batch_size_ = None if dp_sgd else state.n_anchor_batch
        self.history_ = history
        self.n_units_ = None if state.units is None else state.units.n_units

    def _check_anchor_noise(self, algorithm, report, n_anchor_batch):
        name = {"double_spider": "x_anchor", "recursive_spider": "v_anchor"}.get(algorithm)
        if name is None:
            return
        multiplier = report.multiplier(name)
        if multiplier > n_anchor_batch:
            warnings.warn(
                f"epsilon={self.epsilon} buys only weak anchors: the calibrated noise "
                f"(multiplier {multiplier:.3g}) exceeds the anchor batch ({n_anchor_batch} "
                "records), so each anchor's noise is larger than any clipped gradient mean. "
                "Raise epsilon, anchor_batch_size or epoch_size, or lower max_epochs.",
                UserWarning,
            )

    def _warm_start(self, backend, n_outputs):
        """Initialise a linear model from a *public* warm start."""
        if self._option("init_model") is None:
            return
        if not getattr(self, "_is_linear", False):
            raise ValueError("init_model is only supported for linear models.")
        coef = np.atleast_2d(np.asarray(getattr(self._option("init_model"), "coef_", None),
                                        dtype=float))
        intercept = np.atleast_1d(np.asarray(getattr(self._option("init_model"), "intercept_",
                                                     0.0),
                                             dtype=float))
        if coef.shape[-1] != backend.weights.shape[1] - 1:
            raise ValueError(
                f"init_model has coef_ of shape {coef.shape}; expected {backend.weights.shape[1] - 1}"
                " features. Pass a model fitted on public data with the same features."
            )
        weights = np.zeros(tuple(backend.weights.shape))
        if coef.shape[0] == 1 and n_outputs == 2:
            weights[1, :-1], weights[1, -1] = coef[0], intercept[0]
        elif coef.shape[0] == n_outputs:
            weights[:, :-1], weights[:, -1] = coef, intercept
        else:
            raise ValueError(f"init_model has {coef.shape[0]} output rows; expected {n_outputs}.")
        with torch.no_grad():
            backend.weights.copy_(torch.as_tensor(weights, dtype=backend.weights.dtype))

    # -------------------------------------------------------- introspection
    def _sample_losses(self, X, y):
        raise NotImplementedError

    def _dual_solution(self, losses):
        """``(eta*, Psi)`` of the penalised dual on ``losses`` (capped)."""
        cap = getattr(self, "max_weight_", math.inf)
        div = self._make_divergence(cap)
        lam = self.lam_
        lt = torch.as_tensor(np.minimum(losses, self._option("loss_bound")), dtype=torch.float64)
        if (self.divergence == "kl" and not math.isfinite(cap)) or \
                self._formulation == "constrained":
            m = float(lt.max())
            eta = m + lam * math.log(float(torch.exp((lt - m) / lam).mean()))
        else:
            def excess(eta):
                return float(div.weight((lt - eta) / lam).mean()) - 1.0
            lo, hi = float(lt.min()), float(lt.max())
            eta = lo if excess(lo) <= 0 or hi == lo else brentq(excess, lo, hi, xtol=1e-12)
        value = lam * float(div.conjugate((lt - eta) / lam).mean()) + eta
        if self._formulation == "constrained":
            value += lam * self.rho
        return eta, value, lt

    def worst_case_weights(self, X, y):
        """Worst-case weights of the records of ``(X, y)`` under the fitted model.

        ``p_i = (psi*)'((l_i - eta*) / lam) / n``, with ``eta*`` the optimal
        dual variable on these records (so the weights sum to 1) and losses
        capped at ``loss_bound`` as in training; for KL, ``p = softmax(l /
        lam)``. Records the model finds hard get large weights.

        Computed exactly on the data passed in, without noise: do not publish
        it for training records if their privacy matters.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        weights : ndarray of shape (n_samples,)
        """
        losses = self._sample_losses(X, y)
        eta, _, lt = self._dual_solution(losses)
        div = self._make_divergence(getattr(self, "max_weight_", math.inf))
        w = div.weight((lt - eta) / self.lam_).numpy()
        return w / w.sum()

    def dro_objective(self, X, y):
        """Robust objective ``Psi`` of the fitted model on ``(X, y)``.

        Penalised: ``min_eta lam mean psi*((l_i - eta)/lam) + eta`` (equal to
        ``max_p sum p_i l_i - lam D_psi(p, 1/n)``); constrained KL:
        ``lam_ log mean exp(l_i / lam_) + lam_ rho``. Losses are capped at
        ``loss_bound`` as in training.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        value : float
        """
        return float(self._dual_solution(self._sample_losses(X, y))[1])

    @property
    def _divergence(self):
        return make_divergence(self.divergence, alpha=self._option("alpha"), k=self._option("k"))

    def _make_divergence(self, cap):
        return make_divergence(self.divergence, alpha=self._option("alpha"), k=self._option("k"),
                               max_ratio=cap if cap is not None else math.inf)


_DOC_PARAMS = """
    divergence : {"chi2", "kl", "kl_cvar", "cressie_read"}, default="chi2"
        psi-divergence of the uncertainty set. ``"chi2"`` is
        ``psi(t) = (t - 1)^2`` (conjugate ``-1 + (s + 2)_+^2 / 4``);
        ``"kl"`` is ``t log t - t + 1``; ``"kl_cvar"`` is KL restricted to
        weight ratios ``<= 1/alpha``; ``"cressie_read"`` has exponent ``k``
        (``alpha`` and ``k`` are solver options).
    lam : float > 0, default=0.1 (classifier), 3.0 (regressor)
        Penalty weight: smaller values let the weights move further from
        uniform (more robust, less average accuracy). The defaults were
        chosen on validation splits of the training data (Adult, the
        rare-subpopulation task) over the grid ``(0.1, 0.3, 1)``.
    rho : float >= 0 or None, default=None
        None: the penalized problem ``max_p E_p[loss] - lam D_psi(p,
        uniform)``. A radius: the constrained one, a KL ball of radius
        ``rho`` (``divergence="kl"`` only), with the temperature ``lam_``
        learned (at least the solver option ``lam_min``).
    epsilon : float or None, default=1.0
        Privacy budget; ``None`` trains without noise, for reference: the
        per-sample gradients are still clipped (``max_grad_norm=np.inf``
        turns that off) and the weights still capped, so it is the private
        algorithm without noise, not plain DRO. The guarantee is about one
        record (add or remove one row), or, with ``fit(unit_ids=...)``,
        about one unit -- all records of a person -- with at most
        ``max_records_per_unit`` of them used (see :ref:`units`).
    delta : float, default=1e-5
    max_grad_norm : float, default=1.0 (classifier), 5.0 (regressor)
        Per-sample clipping bound ``C`` of the (unweighted) model gradients;
        each clipped gradient is then multiplied by its weight, so one
        record's sensitivity is ``weight_bound_ * C``. Chosen on validation
        splits of the training data.
    batch_size : int or "auto", default="auto"
        Expected Poisson batch of the difference (and DP-SGD) steps.
    max_epochs : float, default=10
        Passes over the data (records read by anchors and differences).
    max_steps : int or None, default=None
        Step count; overrides ``max_epochs``.
    learning_rate : float, default=0.5
        Step size of the model (capped so a step moves at most
        ``step_norm_cap``); with ``"dp_sgd"``, the SGD learning rate.
    class_weight : dict, "balanced" or None, default=None (classifier only)
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
        every record has weight 1). DRO weighs the empirical distribution: the
        x statistic of a record is ``a_i w_i clip(grad l_i, C)`` (``a_i = w /
        max_sample_weight``) and every clipped dual statistic is multiplied by
        ``a_i``; sums are still divided by the public expected batch sizes, so
        with a radius ``rho`` (the constrained form) weights well below the bound make
        the radius ``rho`` act on the unnormalised weighted measure
        (effectively a larger ball). See :ref:`privacy-sample-weights`.
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
        (``coef_`` and ``intercept_``, or the module's state) instead of a
        fresh model; ``X`` must have as many features (and ``y`` the same
        classes). The new fit spends its own budget; ``dp_event_`` becomes the
        composition of the previous and the new events, and ``epsilon_`` and
        ``privacy_report_`` the accountant's for it. Composition assumes the
        worst case, that both fits saw the same records. Only the model
        carries over: the dual variables (``eta``, ``lam``) and the SPIDER
        estimates start afresh. It takes precedence over ``init_model``.
    hidden_layer_sizes : tuple of int, default=()
    module : callable or None, default=None
        ``module(n_features, n_outputs) -> torch.nn.Module``.
    sensitive_columns, sensitive_groups : default=None
        Accepted for pipeline compatibility; DRO uses no group labels.
    solver_options : dict or None, default=None
        Settings of the solver that one default serves (the keys below; a key
        left out keeps its default; an unknown key or a bad value is an error
        at ``fit``):

        {solver_options}
    random_state : int, RandomState instance or None, default=None
    device : str, default="cpu"
    verbose : int, default=0
    max_records_per_unit : int, default=16
        With ``fit(unit_ids=...)``: the public bound k on the records of one
        unit (e.g. a person) that a fit uses. Each unit keeps at most k of its
        records, a random subset drawn once per fit independently of their
        values, and each kept record weighs ``1 / min(|u|, k)`` in every
        per-record term (the x statistic, every clipped dual statistic,
        anchors and differences alike, and the one-off releases): a unit
        moves every release by at most the bound of one record. The
        divergence ball is then over the *unit-weighted* empirical measure
        (each unit's kept records share one unit of mass), and sums are
        divided by the expected number of units in a batch. Unused without
        ``unit_ids``.
    unit_column : str, int or None, default=None
        A column of ``X`` (a DataFrame's column name, or a position) that
        holds the unit ids, for use with metadata routing off; it is removed
        from the features, and ``predict`` accepts ``X`` with or without it.
        ``fit(unit_ids=...)`` takes precedence.
"""


@document_solver_options
class DPDROClassifier(_DROMixin, BaseDPClassifier):
    __doc__ = """Differentially private distributionally robust classifier.

    Minimises the worst-case expected cross-entropy over reweightings of the
    training records within a psi-divergence of uniform, so that rare and
    hard subpopulations -- which need no labels -- are not sacrificed to the
    average:

        min_x max_p sum_i p_i l_i(x) - lam D_psi(p, uniform),

    solved through its dual ``min_{x, eta} lam mean psi*((l_i - eta)/lam) + eta``
    by DP Double-SPIDER, or for KL through the compositional form by DP
    Recursive-SPIDER (Xu et al., "Differentially private non-convex
    distributionally robust optimization", with the corrections of the
    skdp spec). Anchors (large Poisson batches every ``epoch_size`` steps)
    and per-sample-clipped gradient differences (small batches) are separate
    events of one composed ``DpEvent``, calibrated together by the release
    plan. See :ref:`robust`.

    Parameters
    ----------""" + _DOC_PARAMS + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_, intercept_ : ndarray
        Linear model (None for modules; then ``module_state_``).
    eta_ : float or None
        Dual variable (penalised dual).
    lam_ : float
        Penalty or learned KL temperature.
    algorithm_ : str
    epsilon_, delta_, dp_event_, privacy_report_, accountant_
        The accountant's guarantee for the composed event.
    n_steps_ : int
    noise_multiplier_ : float or None
        Noise standard deviation over the sensitivity of the model-gradient
        release of a (difference) step: ``"x_diff"`` (double SPIDER),
        ``"v_diff"`` (recursive SPIDER) or ``"x_grad"`` (DP-SGD); None
        without privacy. Every release's multiplier is in
        ``privacy_report_`` (``privacy_report_.multiplier(name)``).
    n_units_ : int or None
        Number of privacy units with ``unit_ids`` (public); None without
        them. With units, ``sampling_rate_`` and ``batch_size_`` (and the
        anchors') are over units.
    history_ : dict of str to ndarray
        Released quantities per step only (noisy estimates, iterates).
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights applied (``class_weight`` over its largest, times
        ``max_sample_weight``); for ``"balanced"`` a function of the noisy
        class counts. None without ``class_weight``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdp import DPDROClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> clf = DPDROClassifier(epsilon=1.0, random_state=0).fit(X, y)
    >>> clf.epsilon_ <= 1.0
    True
    >>> float(clf.worst_case_weights(X[:5], y[:5]).sum().round(6))
    1.0
    """

    _released_attributes = BaseDPClassifier._released_attributes | {"eta_", "history_"}
    _solver_option_specs = _DRO_OPTIONS

    _parameter_constraints = {**BaseDPClassifier._parameter_constraints, **_DRO_CONSTRAINTS}
    _loss = CrossEntropyLoss()

    def __init__(
        self,
        *,
        divergence="chi2",
        lam=0.1,
        rho=None,
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=1.0,
        batch_size="auto",
        max_epochs=10,
        max_steps=None,
        learning_rate=0.5,
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
        self.divergence = divergence
        self.lam = lam
        self.rho = rho
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.learning_rate = learning_rate
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
        y : array-like of shape (n_samples,)
        sensitive_features : array-like, default=None
            Accepted for pipeline compatibility and stored as ``groups_``;
            DRO does not use group labels.
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
            in every per-record term; anchors and difference batches are
            Poisson samples of units, sums are divided by the expected number
            of units, and the divergence ball is over the unit-weighted
            empirical measure. Requested by default with metadata routing on;
            with routing off, ``unit_column`` can name a column of ``X`` that
            holds them. See :ref:`units`.

        Returns
        -------
        self : DPDROClassifier
        """
        self._validate_params()
        previous = self._previous_fit()
        X, y_codes, group_codes, unit_ids = self._validate_training_data(
            X, y, sensitive_features, units=True, unit_ids=unit_ids)
        self._check_warm_start(previous, unit_ids)
        sample_weight = self._validated_sample_weight(sample_weight, X, y_codes)
        n_classes = len(self.classes_)

        def targets(report, generator, device, weights=None):
            return torch.nn.functional.one_hot(torch.as_tensor(y_codes, device=device), n_classes)

        return self._fit_dro(X, targets, y_codes=y_codes, group_codes=group_codes,
                             sample_weight=sample_weight, previous=previous, unit_ids=unit_ids)

    def _sample_losses(self, X, y):
        proba = self.predict_proba(X)
        y = np.asarray(y)
        index = np.searchsorted(self.classes_, y)
        index = np.clip(index, 0, len(self.classes_) - 1)
        if not np.all(self.classes_[index] == y):
            raise ValueError("y holds labels the classifier was not fitted on.")
        return -np.log(np.clip(proba[np.arange(len(y)), index], 1e-300, None))


@document_solver_options
class DPDRORegressor(_DROMixin, BaseDPRegressor):
    __doc__ = """Differentially private distributionally robust linear (or MLP) regressor.

    The regression counterpart of :class:`DPDROClassifier`, with the half
    squared error ``(f(x) - y)^2 / 2`` on targets scaled as by
    :class:`~skdp.DPSGDRegressor` (public ``y_bounds`` or a private
    power-of-two scale bought with a small share of the budget), so
    ``loss_bound`` is in squared scaled units. The worst-case weights move
    mass to the records with the largest errors -- typically a rare
    subpopulation that the average fit ignores.

    Parameters
    ----------""" + _DOC_PARAMS.replace(
        "    sensitive_columns, sensitive_groups : default=None\n"
        "        Accepted for pipeline compatibility; DRO uses no group labels.\n",
        "    y_bounds : (float, float) or None, default=None\n"
        "        Public bounds of the target; None buys a private target scale.\n") + """
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    y_offset_, y_scale_ : float
        Target scaling used in training.
    eta_, lam_, algorithm_, n_steps_, n_units_, history_, noise_multiplier_
        As in :class:`DPDROClassifier`.
    epsilon_, delta_, dp_event_, privacy_report_, accountant_

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skdp import DPDRORegressor
    >>> X, y = make_regression(n_samples=2000, n_features=5, noise=1.0, random_state=0)
    >>> reg = DPDRORegressor(epsilon=1.0, random_state=0).fit(X, y)
    >>> reg.epsilon_ <= 1.0
    True
    """

    _released_attributes = BaseDPRegressor._released_attributes | {"eta_", "history_"}
    _solver_option_specs = {
        **_DRO_OPTIONS,
        "momentum": SolverOption(
            0.9, [Interval(Real, 0, 1, closed="left")], "float in [0, 1)",
            'Momentum of ``algorithm="dp_sgd"``.'),
        "iterate": SolverOption(
            "last", [StrOptions({"last", "average"})], '{"last", "average"}',
            "Return the last iterate or the average of the second half."),
    }

    _parameter_constraints = {**BaseDPRegressor._parameter_constraints, **_DRO_CONSTRAINTS}
    _loss = SquaredLoss()

    #: ``unit_ids`` is requested by default with metadata routing on.
    __metadata_request__fit = {"unit_ids": True}

    def __init__(
        self,
        *,
        divergence="chi2",
        lam=3.0,
        rho=None,
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=5.0,
        batch_size="auto",
        max_epochs=10,
        max_steps=None,
        learning_rate=0.5,
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
        self.divergence = divergence
        self.lam = lam
        self.rho = rho
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.learning_rate = learning_rate
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

    def fit(self, X, y, *, sample_weight=None, unit_ids=None):
        """Train under the (epsilon, delta) budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Finite real targets.
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
            in every per-record term; anchors and difference batches are
            Poisson samples of units, sums are divided by the expected number
            of units, and the divergence ball is over the unit-weighted
            empirical measure. Requested by default with metadata routing on;
            with routing off, ``unit_column`` can name a column of ``X`` that
            holds them. See :ref:`units`.

        Returns
        -------
        self : DPDRORegressor
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

        return self._fit_dro(X, targets, sample_weight=sample_weight, previous=previous,
                             unit_ids=unit_ids)

    def _sample_losses(self, X, y):
        y = np.asarray(y, dtype=np.float64)
        residual = (self.predict(X) - y) / self.y_scale_
        return 0.5 * residual**2
