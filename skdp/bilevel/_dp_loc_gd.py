"""DP-Loc-GD: localized noisy projected gradient descent (Kornowski, Alg. 2).

A differentially private solver for strongly convex empirical risk
minimisation, used by the bilevel tuner as an inner solver and usable on its
own through :func:`dp_loc_gd`. Each of ``n_rounds`` rounds runs ``n_steps``
full-batch noisy gradient steps with step sizes ``min(max_lr, 1 / (mu (t +
1)))``, projected onto a ball around the round's starting point whose radius
shrinks from round to round, and restarts from the average of the round's
iterates.

Privacy depends only on the number of gradient releases (``n_rounds *
n_steps``), their sensitivity (each record's gradient is clipped to
``max_grad_norm``) and the noise: radii, projections, averaging and step
sizes are post-processing. The paper sets ``n_steps = n**2`` and radii from
unknown constants; here the step count is a parameter, the noise comes from
the release plan and the radii shrink towards the expected noise error
(library choices, documented in :ref:`bilevel`).
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from .._training import make_penalty
from ..models import LinearBackend
from ..privacy import BatchReleases, Release, ReleasePlan, gaussian_noise


@dataclass(frozen=True)
class LocGDConfig:
    """Settings of one DP-Loc-GD run.

    ``noise_multiplier=None`` runs without noise (still clipped).
    ``strong_convexity`` is the public modulus mu (the penalty ``alpha``
    when the loss alone is not known to be strongly convex). ``n_units``:
    with privacy units, the gradient sums (whose records carry their unit
    factors, so a unit moves a sum by at most ``max_grad_norm``) are divided
    by the public number of units instead of records (None).
    """

    n_rounds: int
    n_steps: int
    max_grad_norm: float
    noise_multiplier: float = None
    strong_convexity: float = 1.0
    max_lr: float = 1.0
    alpha: float = 0.0
    radius0: float = None
    n_units: int = None


def loc_gd_plan(config, *, name="gradient", neighboring="add_remove", accountant="pld"):
    """The release plan of one run: ``n_rounds * n_steps`` full-batch
    Gaussian releases of a clipped gradient sum (sensitivity C)."""
    return ReleasePlan(
        BatchReleases([Release(name, sensitivity=config.max_grad_norm)],
                      steps=config.n_rounds * config.n_steps, sampling_rate=1.0, name=name),
        neighboring=neighboring, accountant=accountant,
    )


@torch.inference_mode()
def run_loc_gd(backend, targets, head, config, generator):
    """Run DP-Loc-GD on a linear ``backend`` (in place) over all its rows.

    Parameters
    ----------
    backend : LinearBackend
        Holds the rows and the starting parameters.
    targets : tensor of shape (n_samples, n_targets)
    head : loss head (e.g. :class:`~skdp.models.SquaredLossHead`)
    config : LocGDConfig
    generator : torch.Generator or SecureGenerator

    Returns
    -------
    dict
        ``"radii"``: the ball radius of each round (public).
    """
    weights = backend.weights
    idx = torch.arange(targets.shape[0], device=weights.device)
    n = targets.shape[0] if config.n_units is None else config.n_units  # the mean's normaliser
    targets_t = (targets.T.contiguous(),)
    clip = config.max_grad_norm
    private = config.noise_multiplier is not None
    noise_std = config.noise_multiplier * clip if private else 0.0
    penalty = make_penalty(backend, config.alpha)
    mu = max(float(config.strong_convexity), 1e-12)
    d = weights.numel()
    # the ball must hold the optimum: |theta*| <= C / mu for a C-Lipschitz
    # loss with an l2 penalty mu (plus the distance of the start)
    radius = config.radius0
    if radius is None:
        radius = float(weights.norm()) + clip / mu
    # expected norm of the averaged noise error of a round, the radius floor
    floor = noise_std * math.sqrt(d) / (mu * n * math.sqrt(config.n_steps)) if private else 0.0
    radii = []
    batch, _ = backend.forward(idx)
    for _ in range(config.n_rounds):
        radii.append(radius)
        center = weights.clone()
        total = torch.zeros_like(weights)
        for t in range(config.n_steps):
            total.add_(weights)
            logits = weights @ batch.T
            (grad,), _ = backend.clipped_grad_sum(idx, batch, logits, head, targets_t, clip)
            if private:
                grad.add_(gaussian_noise(grad, noise_std, generator))
            grad.div_(n)
            if penalty is not None:
                penalty.add_gradient([grad], 1.0)
            lr = min(config.max_lr, 1.0 / (mu * (t + 1)))
            weights.sub_(grad, alpha=lr)
            step = weights - center
            norm = float(step.norm())
            if norm > radius:
                weights.copy_(center + step * (radius / norm))
        weights.copy_(total / config.n_steps)
        radius = math.sqrt(radius * max(floor, 1e-300)) + floor if private else radius / 2
    return {"radii": radii}


def dp_loc_gd(X, y, *, loss="squared", alpha=1.0, epsilon=1.0, delta=1e-5, max_grad_norm=1.0,
              n_rounds=3, n_steps=100, max_lr=1.0, random_state=None):
    """Fit a penalised linear model with DP-Loc-GD.

    Minimises ``mean(loss) + alpha / 2 * ||coef||^2`` (intercept not
    penalised) under ``(epsilon, delta)``-DP, add/remove-one neighbours,
    with each record's gradient clipped to ``max_grad_norm``. The error
    ``||theta - theta*||`` is of order ``C sqrt(d) / (alpha n epsilon)``
    (Kornowski, Thm. 8.2) when the clipping is inactive at the optimum.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Real targets (``loss="squared"``) or 0/1 labels (``"logistic"``).
    loss : {"squared", "logistic"}, default="squared"
    alpha : float, default=1.0
        Penalty, also the strong-convexity modulus used for step sizes and
        radii.
    epsilon : float or None, default=1.0
        ``None`` runs without noise.
    delta : float, default=1e-5
    max_grad_norm : float, default=1.0
    n_rounds, n_steps : int, default=3, 100
        Localization rounds and full-batch steps per round.
    max_lr : float, default=1.0
        Cap on the step sizes ``1 / (alpha (t + 1))``.
    random_state : int or None, default=None
        ``None`` draws the noise from the OS CSPRNG.

    Returns
    -------
    coef : ndarray of shape (n_features,)
    intercept : float
    report : skdp.privacy.PrivacyReport

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.model_selection import dp_loc_gd
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 3)) / 3
    >>> y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.normal(size=5000)
    >>> coef, intercept, report = dp_loc_gd(X, y, alpha=0.1, epsilon=1.0, random_state=0)
    >>> bool(np.abs(coef - [1.0, -1.0, 0.5]).max() < 0.5), report.epsilon <= 1.0
    (True, True)
    """
    from ..models import CrossEntropyHead, SquaredLossHead
    from ..privacy import SecureGenerator

    if loss not in ("squared", "logistic"):
        raise ValueError(f"loss must be 'squared' or 'logistic', got {loss!r}.")
    if not alpha > 0:
        raise ValueError(f"alpha must be positive (the strong convexity), got {alpha!r}.")
    X = torch.as_tensor(np.asarray(X, dtype=np.float64))
    y = np.asarray(y, dtype=np.float64)
    if loss == "squared":
        head, targets, n_out = SquaredLossHead(), torch.as_tensor(y)[:, None], 1
    else:
        head, n_out = CrossEntropyHead(), 2
        targets = torch.nn.functional.one_hot(torch.as_tensor(y, dtype=torch.long), 2).double()
    config = LocGDConfig(n_rounds=int(n_rounds), n_steps=int(n_steps),
                         max_grad_norm=float(max_grad_norm), strong_convexity=float(alpha),
                         max_lr=float(max_lr), alpha=float(alpha))
    plan = loc_gd_plan(config)
    report = plan.non_private(delta) if epsilon is None else plan.calibrate(epsilon, delta)
    config = LocGDConfig(**{**config.__dict__, "noise_multiplier": report.multiplier("gradient")})
    if random_state is None:
        generator = SecureGenerator(torch.device("cpu"))
    else:
        generator = torch.Generator().manual_seed(int(random_state))
    backend = LinearBackend(X, n_out)
    run_loc_gd(backend, targets, head, config, generator)
    weights = backend.weights.numpy()
    if loss == "logistic":
        weights = weights[1:] - weights[:1]
    return weights[0, :-1].copy(), float(weights[0, -1]), report
