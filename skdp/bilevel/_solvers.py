"""Inner solvers of the bilevel tuner and its outer loop (torch only).

Each outer iteration solves two strongly convex problems at the current
regularisation strength omega:

* ``"train"``: mean training loss + omega R(theta);
* ``"mixed"``: the same plus the mean validation loss weighted by
  ``1 / penalty`` (Kornowski, Sec. 7: "mixing in a bit of the validation
  loss").

Both are written as one weighted mean over the records of their part of the
data (weights in the last target column, see
:class:`~skdp.models.WeightedHead`), so every solver clips each record's
*weighted* gradient and one record's influence is bounded whichever part it
is in. ``R`` is a :class:`Regularizer` over the weights (not the
intercepts): ``||W||^2 / 2`` by default, or the smoothed l1 norm.

With privacy units (:attr:`Problem.units`) each record's clipped gradient
(or loss) also carries its unit factor, the means are over units and the
DP-SGD solves sample units: one unit then moves every release as one record
does, and every sensitivity below holds with units in place of records.
"""

import math
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch

from .._training import DPSGDConfig, SmoothedL1Penalty, train_dpsgd
from ..models import CrossEntropyHead, LinearBackend, SquaredLossHead, WeightedHead
from ..privacy import BatchReleases, Release, gaussian_noise
from ._dp_loc_gd import LocGDConfig, run_loc_gd

SOLVERS = ("dp_loc_gd", "dp_sgd", "output_perturbation")


REGULARIZERS = ("l2", "smoothed_l1")


@dataclass(frozen=True)
class Regularizer:
    """The data-independent penalty ``R`` whose strength omega is tuned.

    ``"l2"``: ``R(theta) = ||W||^2 / 2``. ``"smoothed_l1"``:
    ``R(theta) = sum_j (sqrt(W_j^2 + mu^2) - mu) + l2 / 2 * ||W||^2`` with
    smoothing width ``mu = smoothing`` (public); ``l2`` is 0 except for
    solvers that need a strongly convex penalty. Sums run over the weight
    columns ``theta[:, :-1]``; the intercepts are never penalised here.
    """

    kind: str = "l2"
    smoothing: float = 0.01
    l2: float = 0.0

    @property
    def strong_convexity(self):
        """Strong-convexity modulus of ``R`` (per unit of omega)."""
        return 1.0 if self.kind == "l2" else self.l2

    def tensor_value(self, weights):
        """``R`` of a weight tensor (no bias column), differentiable."""
        if self.kind == "l2":
            return 0.5 * weights.square().sum()
        mu = self.smoothing
        value = (torch.sqrt(weights.square() + mu * mu) - mu).sum()
        return value + 0.5 * self.l2 * weights.square().sum() if self.l2 else value

    def value(self, theta):
        """``R(theta)`` as a float; ``theta`` has the bias as last column."""
        return float(self.tensor_value(theta[:, :-1].double()))

    def gradient(self, weights):
        if self.kind == "l2":
            return weights
        mu = self.smoothing
        return weights / torch.sqrt(weights.square() + mu * mu) + self.l2 * weights

    def curvature(self, weights):
        """Diagonal of the Hessian of ``R``."""
        if self.kind == "l2":
            return torch.ones_like(weights)
        mu = self.smoothing
        return mu * mu / (weights.square() + mu * mu) ** 1.5 + self.l2

    def penalty(self, omega):
        """The ``alpha`` the DP-SGD / DP-Loc-GD trainers take: omega for l2,
        else a factory of :class:`~skdp._training.SmoothedL1Penalty`."""
        if self.kind == "l2":
            return omega
        return partial(SmoothedL1Penalty, alpha=omega, smoothing=self.smoothing, l2=self.l2)


L2 = Regularizer()


def regularizer(weights, spec=L2):
    """``R(theta)`` over the weight columns (bias excluded); l2 by default."""
    return spec.value(weights)


@dataclass
class Problem:
    """One inner problem: rows (bias column appended), targets with the
    per-record weight as last column, and the base loss kind.

    ``record_weights`` are the sample-weight factors in [0, 1] of the rows
    (None: unweighted). The private solvers multiply each record's clipped
    gradient by them (the backend's ``record_weights``); the exact solves
    multiply its loss. ``max_weight`` (the sensitivity's factor) reads the
    unweighted column, a public bound on the weighted one.

    ``units`` (a :class:`~skdp.privacy.UnitBounds`, or None) makes the
    problem one over privacy units: ``record_weights`` then include each
    record's unit factor, the DP-SGD solver samples units, and every mean is
    over the ``n_units`` units (:attr:`n`) instead of the records. With the
    loss of a unit ``u`` written as ``l_u = sum_{i in u} a_i w_i l_i``
    (``a_i`` the factors, summing to at most 1 over the unit; ``w_i`` the
    part weight of the last target column, the same for all records of a
    unit), the problem is ``(1 / n_units) sum_u l_u + omega R``: the
    record-level problem with units in place of records, so each of its
    sensitivities is the record-level one with ``n_units`` for ``n``.
    """

    rows: torch.Tensor
    targets: torch.Tensor
    kind: str
    name: str
    omega_factor: float = 1.0
    normal_equations: tuple = None
    record_weights: torch.Tensor = None
    units: object = None

    def loss_weights(self):
        """Each record's weight in the exact solves' mean loss."""
        weights = self.targets[:, -1].double()
        if self.record_weights is None:
            return weights
        return weights * self.record_weights.double()

    @property
    def n(self):
        """The (public) normaliser of the mean loss: the number of records,
        or of units with ``units``."""
        return self.rows.shape[0] if self.units is None else self.units.n_units

    def mean(self, values):
        """The mean of per-record ``values`` over :attr:`n` (records or units)."""
        return values.mean() if self.units is None else values.sum() / self.n

    @property
    def max_weight(self):
        return float(self.targets[:, -1].max())

    def head(self):
        base = SquaredLossHead() if self.kind == "squared" else CrossEntropyHead()
        return WeightedHead(base)


def _sample_losses(kind, outputs, targets, huber=False):
    if kind == "squared":
        residual = outputs - targets
        if huber:
            absolute = residual.abs()
            return torch.where(absolute <= 1.0, 0.5 * residual.square(), absolute - 0.5).sum(1)
        return 0.5 * residual.square().sum(1)
    return -(targets * torch.log_softmax(outputs, dim=1)).sum(1)


def exact_solve(problem, omega, theta0, *, huber=False, penalize_intercept=False, row_bound=None,
                reg=L2):
    """The (numerically) exact minimiser of a weighted penalised problem.

    Penalty ``omega * R`` with ``R`` the :class:`Regularizer` ``reg``.
    Closed form for the squared loss with the l2 penalty, damped Newton for
    the squared loss with smoothed l1, L-BFGS in float64 otherwise. With
    ``row_bound``, rows are first clipped to that norm; with ``huber`` the
    squared loss becomes a Huber loss with unit threshold (both make the
    loss Lipschitz, for output perturbation; l2 penalty only).
    """
    if reg.kind != "l2" and (huber or penalize_intercept or row_bound is not None):
        raise ValueError("the Lipschitz (output perturbation) solve supports the l2 penalty only.")
    rows = problem.rows.double()
    if row_bound is not None:
        norms = rows.norm(dim=1, keepdim=True).clamp_min(1e-12)
        rows = rows * (row_bound / norms).clamp(max=1.0)
    targets = problem.targets[:, :-1].double()
    weights = problem.loss_weights()
    n, width = problem.n, rows.shape[1]
    mask = torch.ones(width, dtype=torch.float64)
    if not penalize_intercept:
        mask[-1] = 0.0
    if problem.kind == "squared" and not huber:
        if problem.normal_equations is None:  # omega-free, computed once
            problem.normal_equations = (rows.T @ (rows * weights[:, None]) / n,
                                        rows.T @ (targets * weights[:, None]) / n)
        gram, rhs = problem.normal_equations
        if reg.kind == "l2":
            return torch.linalg.solve(gram + torch.diag(omega * mask + 1e-12), rhs).T
        return _newton_squared(gram, rhs, omega, reg, theta0.double())
    theta = theta0.double().clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([theta], lr=1.0, max_iter=500, tolerance_grad=1e-10,
                                  tolerance_change=1e-14, history_size=20,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        losses = _sample_losses(problem.kind, rows @ theta.T, targets, huber)
        if reg.kind == "l2":
            value = problem.mean(losses * weights) + 0.5 * omega * (theta.square() * mask).sum()
        else:
            value = problem.mean(losses * weights) + omega * reg.tensor_value(theta[:, :-1])
        value.backward()
        return value

    with torch.enable_grad():
        optimizer.step(closure)
    return theta.detach()


def _newton_squared(gram, rhs, omega, reg, theta0, max_iter=200):
    """Damped Newton for the weighted squared loss plus ``omega * R``, one
    output column at a time (the problem separates over outputs)."""
    width = gram.shape[0]
    columns = []
    for k in range(rhs.shape[1]):
        b = rhs[:, k]
        theta = theta0[k].clone() if theta0.shape[0] > k else torch.zeros(width, dtype=gram.dtype)

        def objective(t, b=b):
            return float(0.5 * t @ gram @ t - b @ t + omega * reg.tensor_value(t[:-1]))

        value = objective(theta)
        for _ in range(max_iter):
            grad = gram @ theta - b
            grad[:-1] += omega * reg.gradient(theta[:-1])
            hess = gram.clone()
            hess.diagonal()[:-1] += omega * reg.curvature(theta[:-1])
            hess.diagonal().add_(1e-12)
            step = torch.linalg.solve(hess, grad)
            decrement = float(grad @ step)
            if decrement < 1e-24:
                break
            t = 1.0
            while t > 1e-12:  # backtracking (Armijo)
                candidate = theta - t * step
                new = objective(candidate)
                if new <= value - 0.25 * t * decrement:
                    break
                t *= 0.5
            else:
                break  # no decrease left at float64 precision
            theta, value = candidate, new
        columns.append(theta)
    return torch.stack(columns)


@dataclass(frozen=True)
class SolverSettings:
    """Public settings of the inner solves (one per problem)."""

    kind: str
    max_grad_norm: float
    steps: int              # releases per solve
    sampling_rate: float    # 1.0 for full-batch solvers
    learning_rate: float
    n_rounds: int = 1       # DP-Loc-GD rounds (steps = n_rounds * steps per round)


class InnerSolver:
    """Solves one :class:`Problem` at a given omega, privately.

    ``settings`` fixes the releases of one solve, so the release plan is
    known before training: :meth:`releases` describes ``n_solves`` solves.
    """

    def __init__(self, problem, settings, generator, exact=False, reg=L2):
        self.problem = problem
        self.settings = settings
        self.generator = generator
        self.exact = exact
        self.reg = reg
        if settings.kind == "output_perturbation" and reg.kind != "l2":
            raise ValueError(
                "output perturbation calibrates its noise to the 1 / omega sensitivity of an "
                "l2-penalised problem; it does not support the regularizer " + repr(reg.kind)
            )
        self.backend = None
        if not exact and settings.kind in ("dp_sgd", "dp_loc_gd"):
            n_out = problem.targets.shape[1] - 1
            self.backend = LinearBackend(problem.rows[:, :-1], n_out)
            self.backend.record_weights = problem.record_weights
            self.head = problem.head()

    # -------------------------------------------------------- privacy
    def sensitivity(self):
        """l2 sensitivity of one release, before the omega-dependent factor
        of output perturbation (whose noise scales with ``1 / omega``)."""
        return self.settings.max_grad_norm

    def releases(self, n_solves):
        s = self.settings
        return BatchReleases(
            [Release(self.problem.name, sensitivity=self.sensitivity())],
            steps=n_solves * s.steps, sampling_rate=s.sampling_rate, name=self.problem.name,
        )

    def output_sensitivity(self, omega):
        """Sensitivity of the exact argmin of the Lipschitz-ified problem:
        ``2 w_max L / (omega n)`` (each record's weighted gradient is at most
        ``w_max L``; the factor 2 also covers add/remove, where the mean's
        normaliser is public).

        With units ``n`` is the number of units: a unit's loss
        ``l_u = sum_{i in u} a_i w_i l_i`` has a gradient of norm at most
        ``sum_i a_i w_max L <= w_max L`` (the factors of a unit sum to at
        most 1), so removing the unit changes the gradient of the
        ``omega``-strongly convex objective ``(1 / n_units) sum_u l_u +
        omega R`` by at most ``w_max L / n_units`` everywhere, and its argmin
        by at most that over ``omega``: the record-level bound with units in
        place of records."""
        return 2.0 * self.problem.max_weight * self.settings.max_grad_norm / (omega * self.problem.n)

    # ----------------------------------------------------------- solve
    def solve(self, omega, theta0, noise_multiplier):
        """Private solution at ``omega`` started from ``theta0``; float64.

        The problem's penalty is ``omega * problem.omega_factor``.
        """
        s = self.settings
        omega = omega * self.problem.omega_factor
        if self.exact:
            return exact_solve(self.problem, omega, theta0, reg=self.reg)
        if s.kind == "output_perturbation":
            # L-Lipschitz loss: rows clipped to L / sqrt(2) (softmax output
            # gradients have norm <= sqrt(2)) or to L with a unit Huber loss
            bound = s.max_grad_norm / (math.sqrt(2.0) if self.problem.kind != "squared" else 1.0)
            theta = exact_solve(self.problem, omega, theta0, huber=self.problem.kind == "squared",
                                penalize_intercept=True, row_bound=bound)
            if noise_multiplier is not None:
                std = noise_multiplier * self.output_sensitivity(omega)
                theta = theta + gaussian_noise(theta, std, self.generator)
            return theta
        dtype = self.backend.weights.dtype
        self.backend.weights.copy_(theta0.to(dtype))
        if s.kind == "dp_sgd":
            config = DPSGDConfig(
                n_steps=s.steps, sampling_rate=s.sampling_rate, max_grad_norm=s.max_grad_norm,
                noise_multiplier=noise_multiplier, learning_rate=s.learning_rate, momentum=0.0,
                alpha=self.reg.penalty(omega), head=self.head, averaging=0.5,
            )
            train_dpsgd(self.backend, self.problem.targets.to(dtype), config, self.generator,
                        units=self.problem.units)
        else:
            config = LocGDConfig(
                n_rounds=s.n_rounds, n_steps=s.steps // s.n_rounds, max_grad_norm=s.max_grad_norm,
                noise_multiplier=noise_multiplier,
                strong_convexity=omega * self.reg.strong_convexity,
                max_lr=s.learning_rate, alpha=self.reg.penalty(omega),
                n_units=None if self.problem.units is None else self.problem.n,
            )
            run_loc_gd(self.backend, self.problem.targets.to(dtype), self.head, config,
                       self.generator)
        return self.backend.weights.detach().double().clone()


@dataclass(frozen=True)
class OuterConfig:
    """Settings of the outer loop on omega."""

    n_iter: int
    penalty: float
    omega_init: float
    omega_bounds: tuple
    outer_lr: object          # float or "auto"
    log_space: bool = True
    outer_noise_std: float = 0.0
    verbose: int = 0
    regularizer: Regularizer = L2


def run_bilevel(train, mixed, noise, config, generator, theta0):
    """The corrected Section-7 rule, on the fly.

    At each iteration ``theta_t`` (train) and ``theta_lambda_t`` (mixed) are
    solved privately at ``omega_t``; the hypergradient estimate is
    ``penalty * (R(theta_lambda_t) - R(theta_t))`` (a function of the two
    released models only), and omega moves *against* it (the paper prints
    the opposite sign). In log space (default) the step is on
    ``log omega`` with the chain-rule factor omega.

    Returns a dict of private quantities: ``omega`` path (T + 1 values),
    ``hypergradient``, ``R_train``, ``R_mixed``, ``steps`` and the models.
    """
    low, high = config.omega_bounds
    omega = float(np.clip(config.omega_init, low, high))
    path, hypergrads, r_train, r_mixed, models = [omega], [], [], [], []
    theta_t, theta_m = theta0.clone(), theta0.clone()
    squares = 0.0
    for t in range(config.n_iter):
        theta_t = train.solve(omega, theta_t, noise.get("train"))
        theta_m = mixed.solve(omega, theta_m, noise.get("mixed"))
        rt, rm = config.regularizer.value(theta_t), config.regularizer.value(theta_m)
        hyper = config.penalty * (rm - rt)
        if config.outer_noise_std:
            hyper += float(gaussian_noise(torch.zeros(1, dtype=torch.float64),
                                          config.outer_noise_std, generator))
        grad = omega * hyper if config.log_space else hyper
        if config.outer_lr == "auto":
            # AdaGrad-norm: the first step moves by one unit (a factor e in
            # log space), later ones shrink with the gradients seen so far
            squares += grad * grad
            lr = 1.0 / math.sqrt(squares) if squares > 0 else 0.0
        else:
            lr = float(config.outer_lr)
        if config.log_space:
            omega = float(np.clip(math.exp(math.log(omega) - lr * grad), low, high))
        else:
            omega = float(np.clip(omega - lr * grad, low, high))
        path.append(omega)
        hypergrads.append(hyper)
        r_train.append(rt)
        r_mixed.append(rm)
        models.append(theta_t)
        if config.verbose:
            print(f"[bilevel] iteration {t + 1}/{config.n_iter}  omega {omega:.4g}")
    return {"omega": np.array(path), "hypergradient": np.array(hypergrads),
            "R_train": np.array(r_train), "R_mixed": np.array(r_mixed), "models": models}


def output_rule(path, log_space=True):
    """``t_out = argmin_t |omega_{t+1} - omega_t|`` (in log space by
    default), from the private path only."""
    values = np.log(path) if log_space else np.asarray(path)
    return int(np.argmin(np.abs(np.diff(values))))


def with_steps(settings, steps):
    return replace(settings, steps=int(steps))
