"""The server's side of a DP-FERMI fit, whatever moves the messages.

:func:`train_on_silos` runs a whole fit against a *transport* and returns
the fitted state; :class:`~skdp.DPFERMIClassifier` stores it. The in-process
engine is :class:`LocalSilos` (below); the Flower engines and remote silos
(:mod:`skdp.federated`) implement the same four calls:

* ``sizes``: the silos' public sizes, in silo order: record counts, or
  unit counts when ``per_unit`` is True (the silos hold unit ids; a unit's
  records all live in one silo, and their number is not public);
* ``setup(settings)``: each silo calibrates its own release plan for its
  own record count and releases its noisy group counts; one reply per silo
  with its ``epsilon``, its noise scales (``noise``) or, in process, its
  very ``report``, and its ``counts``;
* ``backend(make_backend, n_features, n_classes, device)``: the server's
  model;
* ``exchange(backend, config, priors)``: a callable ``(step, broadcast) ->
  SiloMessages`` that moves one round;
* ``check(backend, n_groups)``: each silo's noisy check of the returned
  model (``settings["model_check"]``), a list of vectors.

The in-process engine also weighs records (``sample_weight``, and
``class_weight`` through ``weigh_classes(factors)`` after the silos' noisy
class counts, ``settings["class_counts"]``); the federated engines do not.
With privacy units every engine's silos bound, sample and weigh their own
units (:func:`~skdp.fairness.fermi.protocol.silo_unit_bounds`).

Nothing here imports scikit-learn or Flower.
"""

import importlib
import math
import time
import warnings
from dataclasses import dataclass, replace
from functools import partial
from numbers import Integral

import numpy as np
import torch

from ..._training import training_threads
from ...models import LinearBackend
from ...privacy.ledger import active_ledger, charge_report
from ...privacy import (
    LocalCommunicator,
    PrivacyBudgetError,
    balanced_class_weights,
    current_communicator,
    gaussian_noise,
    silo_summary,
)
from ._ermi import default_w_radius, fairness_strata, record_cells, w_gradient_clip
from ._trainer import (
    FermiConfig,
    InProcessSilos,
    priors_from_counts,
    run_rounds,
    silo_group_counts,
    theorem_3_3_noise,
)
from .protocol import (
    CLASS_COUNTS_ROUND,
    LOSS_BOUND,
    PROTOCOL,
    PSI_BOUND,
    FermiNoise,
    fermi_release_plan,
    new_units_token,
    silo_privacy_report,
    silo_randomness,
    silo_unit_bounds,
    w_noise_scale,
)


@dataclass(frozen=True)
class FermiRun:
    """The server's settings of one fit, from the estimator's (validated)
    parameters and the public facts: classes, groups, features, silo names.

    ``public_priors`` is the table of public group priors (shape (strata,
    groups)), or None for priors released privately by the silos.
    ``seed`` seeds the silos' randomness (None: each silo draws from the
    operating system). ``averaging`` is the fraction of final rounds whose
    iterates are averaged (0: the last iterate). ``class_counts``: the
    silos release noisy class counts for ``class_weight="balanced"``
    (in-process engine only). ``max_records_per_unit``: the public bound k
    of a run whose silos hold unit ids.
    """

    epsilon: object
    delta: float
    accountant: str
    privacy_unit: str
    noise_calibration: str
    max_grad_norm: float
    lam: float
    fairness: str
    classes: tuple
    groups: tuple
    n_features: int
    hidden_layer_sizes: tuple
    batch_size: object
    sample_rate: object
    max_epochs: float
    max_steps: object
    public_priors: object
    w_radius: object
    learning_rate: float
    schedule: str
    momentum: float
    optimizer: str
    w_learning_rate: float
    averaging: float
    seed: object
    silo_names: tuple
    verbose: int = 0
    model_check: bool = True
    min_group_share: float = 0.0
    class_counts: bool = False
    max_records_per_unit: object = None

    @property
    def n_classes(self):
        return len(self.classes)

    @property
    def n_groups(self):
        return max(1, len(self.groups))

    @property
    def n_strata(self):
        return self.n_classes if self.fairness == "equalized_odds" else 1


@dataclass
class FermiFit:
    """What a fit leaves: the public schedule (``rates``, ``batches``,
    ``rounds``), the released priors and the bounds derived from them, each
    silo's privacy report, the trained backend, the history and ``W``, and
    the seconds spent calibrating and training. ``per_unit``: ``sizes``
    (and rates and batches) count privacy units, not records."""

    sizes: np.ndarray
    rates: list
    batches: list
    rounds: int
    priors: np.ndarray
    w_radius: float
    w_clip: float
    reports: list
    backend: object
    history: dict
    W: np.ndarray
    fit_time: dict
    check: np.ndarray = None
    check_std: float = None
    small_groups: tuple = ()
    class_weights: np.ndarray = None
    per_unit: bool = False


def train_on_silos(run, transport, make_backend, device):
    """Fit DP-FERMI on the silos behind ``transport``.

    Parameters
    ----------
    run : FermiRun
    transport : object
        ``sizes``, ``setup``, ``backend`` and ``exchange`` (module docstring).
    make_backend : callable ``(X_t, n_outputs) -> backend``
        Builds the model (linear or module) on rows ``X_t``.
    device : torch.device

    Returns
    -------
    FermiFit
    """
    sizes = np.asarray(transport.sizes, dtype=np.int64)
    per_unit = bool(getattr(transport, "per_unit", False))
    rates, batches, rounds = silo_sampling(run, sizes, per_unit)

    start = time.perf_counter()
    settings = silo_settings(run, rounds, rates, per_unit)
    expected = expected_reports(settings, sizes)
    # a privacy ledger of the whole data set (in-process silos) is charged
    # before the silos' first release: a record lives in one silo, so the
    # largest silo report covers it
    if run.noise_calibration == "paper" and run.epsilon is not None and active_ledger():
        raise PrivacyBudgetError(
            "noise_calibration='paper' sets its noise after the silos' first release, from a "
            "formula the accountant does not certify to the budget: a privacy ledger cannot "
            "charge it beforehand. Use the default noise calibration inside a charging block."
        )
    charge = charge_report("DPFERMIClassifier", silo_summary(expected))
    replies = transport.setup(settings)
    reports = checked_reports(run, settings, sizes, expected, replies)
    class_weights = None
    if run.class_counts:
        counts = np.sum([np.asarray(r["class_counts"], dtype=np.float64) for r in replies], axis=0)
        class_weights = balanced_class_weights(counts)
        transport.weigh_classes(class_weights / class_weights.max())
    if run.public_priors is None:
        counts = np.stack([np.asarray(r["counts"], dtype=np.float64) for r in replies])
        floor = 1.0 if run.epsilon is not None else 1e-12
        priors = priors_from_counts(counts, run.n_strata, run.n_groups, floor=floor)
        priors, small_groups = floor_small_groups(priors, run.min_group_share)
    else:
        priors, small_groups = np.asarray(run.public_priors, dtype=np.float64), ()
    w_radius = (default_w_radius(priors, run.n_classes) if run.w_radius == "auto"
                else float(run.w_radius))
    w_clip = w_gradient_clip(priors)
    w_scale = w_noise_scale(run.privacy_unit, priors, w_clip)
    if run.noise_calibration == "paper" and run.epsilon is not None:
        reports = paper_reports(run, settings, reports, sizes, rounds, batches, priors,
                                w_radius, w_scale)
    else:  # paper mode replaced the silos' noise
        warn_on_silo_figures(run.silo_names, reports, replies)
    calibration_time = time.perf_counter() - start

    noise = FermiNoise()
    if run.epsilon is not None:
        noise = FermiNoise(
            theta=tuple(r.scale("theta") for r in reports),
            w=tuple(r.scale("w") * w_scale for r in reports),
            monitor=tuple(r.scale("monitor") for r in reports),
        )
    backend = transport.backend(make_backend, run.n_features, run.n_classes, device)
    dtype = backend.parameters[0].dtype
    config = FermiConfig(
        n_rounds=rounds, silo_sizes=tuple(int(s) for s in sizes),
        sampling_rates=tuple(rates), lam=float(run.lam),
        max_grad_norm=float(run.max_grad_norm), w_clip=w_clip, w_radius=w_radius,
        privacy_unit=run.privacy_unit, noise=noise, learning_rate=run.learning_rate,
        schedule=run.schedule, momentum=run.momentum, optimizer=run.optimizer,
        w_learning_rate=run.w_learning_rate, averaging=run.averaging,
        loss_bound=LOSS_BOUND, psi_bound=PSI_BOUND, verbose=run.verbose,
    )
    priors_t = torch.as_tensor(priors, dtype=dtype, device=device)
    start = time.perf_counter()
    with training_threads(isinstance(backend, LinearBackend), device):
        exchange = transport.exchange(backend, config, priors)
        history = run_rounds(backend, priors_t, run.n_classes, config, exchange)
    training_time = time.perf_counter() - start
    check, check_std = None, None
    if settings["model_check"]:
        check = np.sum(transport.check(backend, run.n_groups), axis=0)
        if run.epsilon is not None:
            check_std = math.sqrt(sum(r.scale("model_check") ** 2 for r in reports))
    W = history.pop("W").cpu().numpy().astype(np.float64)
    history = {k: v.cpu().numpy().astype(np.float64) for k, v in history.items()}
    if charge is not None:
        charge.commit()
    return FermiFit(
        sizes=sizes, rates=rates, batches=batches, rounds=rounds, priors=priors,
        w_radius=w_radius, w_clip=w_clip, reports=reports, backend=backend, history=history,
        W=W, fit_time={"calibration": calibration_time, "training": training_time},
        check=check, check_std=check_std, small_groups=small_groups,
        class_weights=class_weights, per_unit=per_unit,
    )


# ------------------------------------------------------------- the steps
def floor_small_groups(priors, min_share):
    """Raise every group prior below ``min_share`` (in its stratum) to it and
    renormalize; return the new priors and the codes of the groups raised.

    Post-processing of the released noisy counts. A tiny group's prior
    enters the W-gradient bound as ``2 / sqrt(min prior)``: a group of two
    records would make that bound (and the W noise) tens of times larger for
    everyone. Its records keep their ERMI term, computed as if the group
    held ``min_share`` of its stratum.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.fairness.fermi._server import floor_small_groups
    >>> priors, small = floor_small_groups(np.array([[0.999, 0.001]]), 0.02)
    >>> small, bool(priors.min() >= 0.0196)
    ((1,), True)
    """
    priors = np.asarray(priors, dtype=np.float64)
    small = priors < min_share
    if not small.any():
        return priors, ()
    raised = np.maximum(priors, min_share)
    raised = raised / raised.sum(1, keepdims=True)
    return raised, tuple(int(g) for g in np.flatnonzero(small.any(0)))


def silo_sampling(run, sizes, per_unit=False):
    """Per-silo sampling rates and expected batches, and the round count.

    ``sample_rate``, or ``batch_size="auto"``, give every silo the same rate
    (``"auto"``: the centralized default's rate on all ``n`` records, so
    that N silos take as many rounds as one); an integer ``batch_size`` is
    each silo's expected batch (rate ``b / n_j``). With ``per_unit``,
    ``sizes``, ``n`` and batches count units.
    """
    n, n_min = int(sizes.sum()), int(sizes.min())
    one_silo = len(sizes) == 1
    what = "units" if per_unit else "records"
    rate = run.sample_rate
    if rate is None and run.batch_size == "auto":
        rate = min(max(n // 4, 1), max(64, round(12 * math.sqrt(n)))) / n
    if rate is not None:
        for name, size in zip(run.silo_names, sizes):
            if rate * size < 1.0 - 1e-9:
                where = "the data has" if one_silo else f"silo {name!r} has"
                raise ValueError(
                    f"{where} {size} {what}: the sampling rate {rate:.4g} gives it an "
                    f"expected batch below one of them; raise sample_rate (or batch_size), "
                    "or merge small silos."
                )
        rates = [float(rate)] * len(sizes)
        reference = float(rate)
    else:
        batch = int(run.batch_size)
        too_small = [(name, s) for name, s in zip(run.silo_names, sizes) if s < batch]
        if too_small:
            name, size = too_small[0]
            where = "the data has" if one_silo else f"silo {name!r} has"
            raise ValueError(
                f"{where} {size} {what}, fewer than batch_size={batch}; use batch_size "
                f"<= {n_min}, or merge small silos."
            )
        rates = [batch / float(s) for s in sizes]
        reference = batch / float(sizes.mean())
    if run.max_steps is not None:
        rounds = int(run.max_steps)
    else:
        rounds = max(1, int(round(run.max_epochs / reference)))
    batches = [q * s for q, s in zip(rates, sizes)]
    if run.epsilon is not None and run.delta >= 1.0 / n_min:
        warnings.warn(
            f"delta={run.delta:g} is not smaller than 1/n for the smallest silo "
            f"({n_min} {what}); use delta well below {1.0 / n_min:.3g}.",
            UserWarning,
        )
    return rates, batches, rounds


def silo_settings(run, rounds, rates, per_unit=False):
    """The public settings every silo receives before training: enough to
    build its own release plan (with its own record count) and its own step;
    no data-derived value besides the public silo sizes. With ``per_unit``
    (the silos hold unit ids) also ``units`` and ``max_records_per_unit``."""
    rate_mode = not (isinstance(run.batch_size, Integral) and run.sample_rate is None)
    return {
        "protocol": PROTOCOL,
        "epsilon": None if run.epsilon is None else float(run.epsilon),
        "delta": float(run.delta),
        "accountant": run.accountant,
        "privacy_unit": run.privacy_unit,
        "max_grad_norm": float(run.max_grad_norm),
        "lam": float(run.lam),
        "rounds": int(rounds),
        "sampling_rate": float(rates[0]) if rate_mode else None,
        "batch_size": None if rate_mode else int(run.batch_size),
        "private_priors": run.public_priors is None,
        "fairness": run.fairness,
        "n_classes": int(run.n_classes),
        "n_groups": int(run.n_groups),
        "n_features": int(run.n_features),
        "classes": [str(c) for c in run.classes],
        "groups": [str(g) for g in run.groups],
        "hidden_layer_sizes": [int(h) for h in run.hidden_layer_sizes],
        "loss_bound": LOSS_BOUND,
        "psi_bound": PSI_BOUND,
        "seed": None if run.seed is None else int(run.seed),
        "model_check": bool(run.model_check),
    } | ({"class_counts": True} if run.class_counts else {}) | (
        {"units": True, "max_records_per_unit": int(run.max_records_per_unit)}
        if per_unit else {})


def expected_reports(settings, sizes):
    """The report each silo should compute for itself
    (:func:`~skdp.fairness.fermi.protocol.silo_privacy_report`), once per
    distinct sampling rate."""
    if settings["epsilon"] is None:
        return [silo_privacy_report(settings, int(n)) for n in sizes]
    plan = fermi_release_plan(settings)
    rate_of = {int(n): plan.batches[0].rate(int(n)) for n in sizes}
    unique = {rate: n for n, rate in rate_of.items()}
    try:
        found = {rate: silo_privacy_report(settings, n) for rate, n in unique.items()}
    except PrivacyBudgetError as exc:
        what = "units" if settings.get("units", False) else "records"
        raise PrivacyBudgetError(
            f"epsilon={settings['epsilon']} cannot pay for {settings['rounds']} rounds on the "
            f"smallest silo ({int(sizes.min())} {what}): {exc} Raise epsilon, lower "
            "max_epochs/max_steps, or merge small silos."
        ) from exc
    return [found[rate_of[int(n)]] for n in sizes]


def checked_reports(run, settings, sizes, expected, replies):
    """Reports of the noise each silo says it adds: the expected report when
    the silo's noise scales are the expected ones, else the accountant's
    report of the silo's scales (a silo may add more)."""
    reports = []
    for name, size, report, reply in zip(run.silo_names, sizes, expected, replies):
        if reply.get("report") is not None:  # in process: the very report
            reports.append(reply["report"])
            continue
        noise = reply["noise"]
        if settings["epsilon"] is None or all(
            noise.get(release) is not None
            and math.isclose(noise[release], report.scale(release), rel_tol=1e-12)
            for release in report.noise
        ):
            reports.append(report)
            continue
        missing = [release for release in report.noise if noise.get(release) is None]
        if missing:
            raise ValueError(
                f"silo {name!r} reported no noise for {missing}: it would release them "
                "without privacy; check the silo's skdp version."
            )
        reports.append(fermi_release_plan(settings, int(size)).account(
            noise, float(settings["delta"])))
    return reports


def paper_reports(run, settings, reports, sizes, rounds, batches, priors, w_radius, w_scale):
    """Reports for Theorem 3.3's noise on the model and W-gradients (the
    other releases keep the plan's calibrated noise), as the accountant
    certifies them."""
    warnings.warn(
        "noise_calibration='paper' uses the closed form of Theorem 3.3, which the "
        "accountant does not certify (specs/fair_fl.md §3.5): epsilon_ is the accountant's "
        "value for the noise that ran and may exceed epsilon.",
        UserWarning,
    )
    plan = fermi_release_plan(settings)
    paper = []
    for report, size, batch in zip(reports, sizes, batches):
        theta_std, w_std = theorem_3_3_noise(
            run.epsilon, run.delta, rounds, int(size), batch, float(priors.min()),
            run.max_grad_norm, w_radius,
        )
        noise = {name: report.scale(name) for name in report.noise}
        noise.update(theta=theta_std, w=w_std / w_scale)
        paper.append(replace(plan, n_records=int(size)).account(noise, run.delta))
    return paper


def warn_on_silo_figures(names, reports, replies):
    """Warn when a silo's own epsilon is not the server's replay of its noise
    (e.g. another dp-accounting version on the silo)."""
    for name, report, reply in zip(names, reports, replies):
        own = reply.get("epsilon")
        if own is not None and not math.isclose(own, report.epsilon, rel_tol=1e-6):
            warnings.warn(
                f"silo {name!r} reports epsilon={own:.6g}, the server's accountant gives "
                f"{report.epsilon:.6g} for the noise it says it added; silo_epsilons_ holds "
                "the accountant's figure. Check the skdp and dp-accounting versions on both "
                "sides.",
                UserWarning,
            )


# --------------------------------------------------------- the in-process engine
class LocalSilos:
    """Every silo in this process (``engine="inprocess"``): the transport of
    :func:`train_on_silos` over rows held here (read where they are, never
    copied).

    Parameters
    ----------
    X_t : tensor of shape (n, n_features)
    y_codes, group_codes : ndarray of shape (n,)
    sizes : sequence of int
        Records per silo.
    fairness : str
    n_classes, n_groups : int
    device : torch.device
    batched : bool, default=True
        One tensor pass for all silos (see
        :class:`~skdp.fairness.fermi._trainer.InProcessSilos`).
    weights : tensor of shape (n,) or None
        Sample-weight factors in [0, 1] of the rows (None: unweighted); the
        class factors of :meth:`weigh_classes` multiply them.
    units : (ndarray of shape (n,), sequence of int) or None
        Privacy units: the unit of each row, coded within its silo (``0 ..
        n_units_j - 1``), and the number of units of each silo. The silos'
        public ``sizes`` are then their unit counts; each silo bounds its
        own units in :meth:`setup` and their factors join the weights.
    rows : ndarray of shape (n,) or None
        The row of ``X_t`` of each record when the records (``y_codes``,
        ``group_codes``, ``weights``, ``units``: silos in contiguous blocks)
        are not in the order of ``X_t``'s rows: an index, so that ``X_t`` is
        never reordered (copied). None: record ``i`` is row ``i``.

    Notes
    -----
    In a data-parallel fit (:func:`~skdp.privacy.current_communicator`)
    the rows here are this rank's share of one silo: the silo's public size
    is the number of rows over all ranks, its noisy counts are summed over
    the ranks before the root's noise, and the rounds and the model check
    are those of :class:`~skdp.fairness.fermi._trainer.InProcessSilos`.
    """

    def __init__(self, X_t, y_codes, group_codes, sizes, fairness, n_classes, n_groups,
                 device, batched=True, weights=None, units=None, rows=None):
        self.X_t, self.y_codes = X_t, y_codes
        self.rows = None if rows is None else torch.as_tensor(rows, dtype=torch.long,
                                                              device=device)
        self.groups_t = torch.as_tensor(group_codes, dtype=torch.long, device=device)
        self.record_sizes = [int(s) for s in sizes]
        self.per_unit = units is not None
        self.comm = current_communicator()
        if self.comm.distributed and len(sizes) == 1:  # the silo over all ranks
            sizes = [self.comm.total(self.record_sizes[0])]
        self.unit_codes, self.sizes = (None, sizes) if units is None else units
        self.unit_bounds = None
        strata, n_strata = fairness_strata(fairness, y_codes, n_classes)
        self.cells = record_cells(group_codes, strata, n_groups, n_strata)
        self.n_cells = n_strata * n_groups
        self.device = device
        self.cells_t = torch.as_tensor(self.cells, dtype=torch.long, device=device)
        self.batched = batched
        self.randomness = None
        self.weights = weights
        self.n_classes = n_classes

    def setup(self, settings):
        reports = expected_reports(settings, np.asarray(self.sizes))
        self.reports = reports
        self.randomness = silo_randomness(settings["seed"], len(self.sizes), self.device)
        unit_factors = self._bound_units(settings)
        counts = [None] * len(self.sizes)
        if settings["private_priors"]:
            std = reports[0].scale("group_counts")  # equal for every silo
            counts = silo_group_counts(self.cells_t, self.record_sizes, self.n_cells, std,
                                       self.randomness, weights=self.weights,
                                       comm=self.comm).cpu().numpy()
        replies = [{"report": r, "epsilon": r.epsilon, "counts": c}
                   for r, c in zip(reports, counts)]
        if settings.get("class_counts", False):
            cuts = np.cumsum(self.record_sizes)[:-1]
            factors = ([None] * len(self.sizes) if unit_factors is None
                       else np.split(unit_factors, cuts))
            for reply, labels, rng, weights in zip(replies, np.split(self.y_codes, cuts),
                                                   self.randomness, factors):
                report = reply["report"]
                std = report.scale("class_counts") if "class_counts" in report.noise else None
                reply["class_counts"] = silo_class_counts(
                    labels, self.n_classes, std, rng.at(CLASS_COUNTS_ROUND), weights, self.comm)
        return replies

    def _bound_units(self, settings):
        """Each silo bounds its own units (:func:`silo_unit_bounds`, from its
        own randomness); their factors join the record weights. Returns the
        unit factors of all rows (float64), or None without units."""
        if not self.per_unit:
            return None
        cuts = np.cumsum(self.record_sizes)[:-1]
        k = settings["max_records_per_unit"]
        self.unit_bounds = [
            silo_unit_bounds(codes, n_units, k, rng, new_units_token(rng))
            for codes, n_units, rng in zip(np.split(self.unit_codes, cuts), self.sizes,
                                           self.randomness)
        ]
        factors = np.concatenate([u.factors for u in self.unit_bounds])
        unit_weights = torch.as_tensor(factors, dtype=self.X_t.dtype, device=self.device)
        self.weights = unit_weights if self.weights is None else self.weights * unit_weights
        return factors

    def weigh_classes(self, factors):
        """Multiply each record's weight factor by its class's ``factors``
        (in (0, 1]; post-processing of the noisy class counts)."""
        classes = torch.as_tensor(np.asarray(factors)[self.y_codes], dtype=self.X_t.dtype,
                                  device=self.device)
        self.weights = classes if self.weights is None else self.weights * classes

    def backend(self, make_backend, n_features, n_classes, device):
        return make_backend(self.X_t, n_classes)

    def exchange(self, backend, config, priors):
        if self.per_unit or self.comm.distributed:  # the rows' layout: records per silo here
            config = replace(config, record_sizes=tuple(self.record_sizes))
        labels = torch.as_tensor(self.y_codes, dtype=torch.long, device=self.device)
        onehot = torch.zeros((len(labels), self.n_classes), dtype=self.X_t.dtype,
                             device=self.device).scatter_(1, labels[:, None], 1.0)
        self.silos = InProcessSilos(backend, onehot, self.cells_t, self.n_cells, config,
                                    self.randomness, batched=self.batched, priors=priors,
                                    groups=self.groups_t, units=self.unit_bounds,
                                    weights=self.weights, rows=self.rows, X=self.X_t)
        return self.silos

    def check(self, backend, n_groups):
        stds = [r.scale("model_check") if r.private else None for r in self.reports]
        return self.silos.check(n_groups, stds)


def silo_class_counts(labels, n_classes, std, generator, weights=None, comm=None):
    """One silo's class counts, with Gaussian noise of standard deviation
    ``std`` drawn from ``generator`` (the silo's stream at
    ``CLASS_COUNTS_ROUND``); exact when ``std`` is None (no privacy, or the
    labels are public under the sensitive-attribute unit). With ``weights``
    (unit factors, summing to at most 1 over a unit) each record adds its
    factor: one unit moves the counts by at most 1, as one record does.
    In a data-parallel fit (``comm``) the ranks' counts are summed before
    the root adds the noise.

    Returns
    -------
    ndarray of shape (n_classes,)
    """
    counts = np.bincount(labels, weights=weights, minlength=n_classes).astype(np.float64)
    noise = None
    if std is not None:
        noise = partial(_numpy_noise, n_classes, std, generator)
    return (LocalCommunicator() if comm is None else comm).release(counts, noise)


def _numpy_noise(size, std, generator):
    """``size`` Gaussian values of standard deviation ``std`` from
    ``generator``, as a float64 ndarray."""
    return gaussian_noise(torch.zeros(size, dtype=torch.float64), std, generator).cpu().numpy()


#: Engines besides ``"inprocess"``, registered by the packages that provide
#: them (:mod:`skdp.federated` registers ``"flower-simulation"``): name ->
#: ``fit(run, data, make_backend, device, *, module, options) -> FermiFit``.
_ENGINES = {}


def register_engine(name, fit):
    """Make ``engine=name`` of :class:`~skdp.DPFERMIClassifier` call ``fit``."""
    _ENGINES[name] = fit


#: Engines another skdp package provides, by the package that registers
#: them: imported on first use (``import skdp`` loads its packages lazily).
_PROVIDERS = {"flower-simulation": "skdp.federated"}


def engine(name):
    """The fit function of a registered engine (importing the package that
    provides it, when skdp knows it), or an ImportError saying how to get
    it."""
    if name not in _ENGINES and name in _PROVIDERS:
        importlib.import_module(_PROVIDERS[name])  # registers the engine
    if name not in _ENGINES:
        raise ImportError(
            f"engine={name!r} is provided by skdp.federated, which did not register it; "
            "import skdp.federated (it needs Flower: pip install 'flwr[simulation]==1.41.0')."
        )
    return _ENGINES[name]
