"""One silo's side of federated DP-FERMI, independent of any engine.

A :class:`FermiSilo` holds one silo's records and its own privacy policy,
and answers three requests: ``hello`` (its public record count, or its
number of privacy units when it holds unit ids),
``setup`` (it builds its own release plan from the public settings and its
own record count, calibrates its own noise and releases its noisy group
counts) and ``train`` (one round: its clipped, noised gradient sums on its
own Poisson batch). What it has spent lives in a *ledger* (a small dict)
that the engine keeps on the silo's side between requests -- in Flower, in
the node's ``context.state`` -- so the silo refuses a round its budget does
not cover, a round it has already answered, or a second setup, whatever
the server asks. Nothing here imports Flower.

A silo given ``unit_ids`` (a person's records) protects units, not records:
it answers only runs about units, bounds its own units (at most
``max_records_per_unit`` records each, drawn once per run and kept in its
ledger), samples units and weighs every release by the unit factors; its
record count never leaves it.
"""

import json
import math
import secrets

import numpy as np
import torch

from .._groups import encode_groups
from ..fairness.fermi import (
    FermiConfig,
    SiloDraws,
    SiloWorker,
    fairness_strata,
    record_cells,
    silo_group_counts,
)
from ..fairness.fermi.protocol import (
    CHECK_ROUND,
    PRIVACY_UNITS,
    PROTOCOL,
    SiloRandomness,
    new_units_token,
    silo_noise,
    silo_privacy_report,
    silo_unit_bounds,
)
from ..models import make_mlp, one_hot, training_rows
from ..privacy import PrivacyBudgetError
from ..privacy.ledger import LedgerError, PrivacyLedger


class SiloRefusal(RuntimeError):
    """A silo declines a request (budget spent, round replayed, policy)."""


class SiloPolicy:
    """What a silo accepts, set on the silo's side (Flower node config).

    Parameters
    ----------
    max_epsilon : float, default=inf
        Largest per-run epsilon the silo agrees to spend.
    max_delta : float, default=1e-4
    allow_seeded_noise : bool, default=False
        Accept a seed from the server. A seeded silo's noise can be replayed
        by whoever knows the seed, the server included: for experiments only.
    allow_non_private : bool, default=False
        Accept ``epsilon=None`` (no noise at all).
    privacy_units : sequence of str, default=("record",)
        The privacy units the silo accepts (its own choice, never the
        server's). ``"record"`` protects whole records. Add
        ``"sensitive_attribute"`` only where the silo's features and labels
        may be treated as public: that unit protects the group alone.
    ledger : str, path-like, PrivacyLedger or None, default=None
        The silo's lifetime :class:`~skdp.privacy.PrivacyLedger` (created
        once by the data owner, e.g. ``python -m skdp.privacy.ledger create
        FILE --max-epsilon 10 --delta 1e-5``). Every run is charged to it at
        setup, before the silo's first release, and refused when the
        composition of every run so far with it would pass the cap; it
        survives restarts of the node. A missing or damaged ledger refuses
        every run.
    max_total_epsilon : float, default=inf
        A lifetime cap of the silo's own, below the ledger's (the smaller
        one holds); needs ``ledger``.
    """

    def __init__(self, max_epsilon=math.inf, max_delta=1e-4, allow_seeded_noise=False,
                 allow_non_private=False, privacy_units=("record",), ledger=None,
                 max_total_epsilon=math.inf):
        self.max_total_epsilon = float(max_total_epsilon)
        if ledger is None and math.isfinite(self.max_total_epsilon):
            raise ValueError(
                "max_total_epsilon (max-total-epsilon) needs a lifetime ledger (ledger=FILE, "
                "node config 'ledger'): create it once with python -m skdp.privacy.ledger "
                "create FILE --max-epsilon E --delta D."
            )
        self.ledger = ledger
        self.max_epsilon = float(max_epsilon)
        self.max_delta = float(max_delta)
        self.allow_seeded_noise = bool(allow_seeded_noise)
        self.allow_non_private = bool(allow_non_private)
        units = (privacy_units,) if isinstance(privacy_units, str) else tuple(privacy_units)
        unknown = [u for u in units if u not in PRIVACY_UNITS]
        if unknown or not units:
            raise ValueError(
                f"privacy_units must list units among {PRIVACY_UNITS}; got {privacy_units!r}."
            )
        self.privacy_units = units

    @classmethod
    def permissive(cls):
        """Everything allowed: the silos of one party's own simulation."""
        return cls(allow_seeded_noise=True, allow_non_private=True, max_delta=1.0,
                   privacy_units=PRIVACY_UNITS)

    @classmethod
    def from_node_config(cls, config):
        """From Flower node config keys ``max-epsilon``, ``max-delta``,
        ``allow-seeded-noise``, ``allow-non-private``, ``privacy-units``
        (comma-separated, default ``"record"``), ``ledger`` (the lifetime
        ledger's file) and ``max-total-epsilon``."""
        def flag(key):
            value = config.get(key, False)
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")

        units = [u.strip() for u in str(config.get("privacy-units", "record")).split(",")]
        return cls(
            max_epsilon=float(config.get("max-epsilon", math.inf)),
            max_delta=float(config.get("max-delta", 1e-4)),
            allow_seeded_noise=flag("allow-seeded-noise"),
            allow_non_private=flag("allow-non-private"),
            privacy_units=[u for u in units if u],
            ledger=config.get("ledger") or None,
            max_total_epsilon=float(config.get("max-total-epsilon", math.inf)),
        )

    def lifetime_ledger(self):
        """The silo's :class:`~skdp.privacy.PrivacyLedger` (opened now: a
        missing or damaged file is an error), or None without one."""
        if self.ledger is None or isinstance(self.ledger, PrivacyLedger):
            return self.ledger
        return PrivacyLedger(self.ledger)


class FermiSilo:
    """One silo: its records, its policy and its step.

    Parameters
    ----------
    X : array-like of shape (n_records, n_features)
    y : array-like of shape (n_records,)
        Labels (values listed in the settings' ``classes``), or codes
        ``0 .. n_classes - 1`` with ``encoded=True``.
    sensitive : array-like of shape (n_records,) or None
        Groups (values listed in the settings' ``groups``), or codes with
        ``encoded=True``; None: one group.
    unit_ids : array-like of shape (n_records,) or None
        The privacy unit of each record (e.g. a person id, any hashable, no
        missing value): the silo then protects all records of one unit, and
        refuses record-level runs. A unit's records must all be in this
        silo: a person with records in two silos counts as two units, one
        per silo, each silo accounting for its own part.
    silo : int
        Index of the silo (0 .. N-1; Flower's ``partition-id``).
    name : str or None
        Public label of the silo (default: its index).
    policy : SiloPolicy or None
        Default :class:`SiloPolicy` (strict).
    encoded : bool, default=False
    module : callable or None
        ``module(n_features, n_classes)`` when the server trains a custom
        module (simulation only); else a linear model or an MLP from the
        settings' ``hidden_layer_sizes``.
    device : str, default="cpu"
    """

    def __init__(self, X, y, sensitive=None, *, unit_ids=None, silo=0, name=None, policy=None,
                 encoded=False, module=None, device="cpu"):
        X = np.asarray(X)
        # float rows are kept as given (read, never copied: a silo's table
        # may be large); anything else becomes float64
        self.X = np.ascontiguousarray(X if X.dtype in (np.float32, np.float64)
                                      else X.astype(np.float64))
        self.y = np.asarray(y)
        self.sensitive = None if sensitive is None else np.asarray(sensitive)
        if self.X.ndim != 2 or self.y.shape != (self.X.shape[0],):
            raise ValueError(
                f"silo {silo}: X must be 2-d with one label per row; got X {self.X.shape}, "
                f"y {self.y.shape}."
            )
        if self.sensitive is not None and self.sensitive.shape[0] != self.X.shape[0]:
            raise ValueError(f"silo {silo}: sensitive features need one value per row.")
        if not _all_finite(self.X):
            raise ValueError(f"silo {silo}: X holds NaN or infinite values.")
        self.unit_codes, self.n_units = None, None
        if unit_ids is not None:
            try:
                codes, units = encode_groups(unit_ids, self.X.shape[0], name="unit_ids")
            except ValueError as exc:
                raise ValueError(f"silo {silo}: {exc}") from exc
            self.unit_codes, self.n_units = codes, len(units)
        limit = float(np.finfo(np.float32).max)
        if self.X.dtype == np.float64 and self.X.size and _largest_magnitude(self.X) > limit:
            raise ValueError(
                f"silo {silo}: X has values too large for float32 training (|x| > {limit:.3g}), "
                "which the silo cannot clip; rescale or clip the features first (e.g. with "
                "public bounds)."
            )
        self.silo = int(silo)
        self.name = str(silo) if name is None else str(name)
        self.policy = SiloPolicy() if policy is None else policy
        self.encoded = bool(encoded)
        self.module = module
        self.device = torch.device(device)
        self._cache = {}

    @property
    def n_records(self):
        return int(self.X.shape[0])

    @property
    def size(self):
        """The silo's public size: its units with unit ids, else its records."""
        return self.n_records if self.n_units is None else self.n_units

    # -------------------------------------------------------------- requests
    def hello(self):
        """Public facts: protocol, index, name and record count (with unit
        ids: the number of units instead; the record count stays here)."""
        count = {"n_records": self.n_records} if self.n_units is None else {
            "n_units": self.n_units}
        return {"protocol": PROTOCOL, "silo": self.silo, "name": self.name, **count}

    def setup(self, settings, ledger):
        """Check the settings against the policy, calibrate this silo's own
        noise and release its noisy group counts.

        Returns
        -------
        (reply, ledger) : dict, dict
            ``reply``: ``epsilon``, ``delta``, ``noise`` (scale of each
            release) and ``counts`` (noisy counts per cell, or None).
        """
        if ledger:
            raise SiloRefusal(
                f"silo {self.name!r} is already set up for this run; a second setup would "
                "release its group counts again."
            )
        self._check_settings(settings)
        report = silo_privacy_report(settings, self.size)
        lifetime_entry = self._charge_lifetime(report)
        noise = {name: report.scale(name) for name in report.noise}
        rng = SiloRandomness(settings["seed"], self.silo, self.device)
        token = new_units_token(rng) if self.n_units is not None else None
        ledger = {
            "settings": json.dumps(settings, sort_keys=True),
            "answered": 0,
            "rounds": int(settings["rounds"]),
            "epsilon": float(report.epsilon),
            "noise": noise,
            "units_token": token,
            # names this run's batches (:meth:`_draws`): another run never
            # reuses them, whatever the seed
            "run": secrets.token_hex(16),
            "lifetime_entry": lifetime_entry,
        }
        counts = None
        if settings["private_priors"]:
            cells, n_cells = self._cells(settings)
            counts = silo_group_counts(cells, (self.n_records,), n_cells,
                                       noise.get("group_counts"), [rng],
                                       weights=self._unit_weights(settings, ledger))
            counts = counts[0].cpu().numpy()
        reply = {"epsilon": float(report.epsilon), "delta": float(report.delta),
                 "noise": noise, "counts": counts}
        return reply, ledger

    def _charge_lifetime(self, report):
        """Charge this run to the silo's lifetime ledger, before its first
        release; the entry's id, or None without a ledger. A run past the
        lifetime cap is refused (:class:`SiloRefusal`)."""
        try:
            lifetime = self.policy.lifetime_ledger()
        except LedgerError as exc:
            raise SiloRefusal(f"silo {self.name!r} refuses every run: {exc}") from exc
        if lifetime is None:
            return None
        try:
            entry = lifetime.reserve(
                what=f"federated run of silo {self.name!r}", epsilon=report.epsilon,
                delta=report.delta, privacy_unit=report.privacy_unit, event=report.dp_event,
                max_epsilon=self.policy.max_total_epsilon)
        except (PrivacyBudgetError, ValueError) as exc:
            raise SiloRefusal(f"silo {self.name!r} refuses this run: {exc}") from exc
        return entry.id

    def train(self, round_index, params, W, priors, ledger):
        """One round: this silo's noisy, normalized sums (numpy arrays).

        Parameters
        ----------
        round_index : int
            Must be the next round this silo has not answered, below the
            number of rounds its budget was calibrated for.
        params : list of ndarray
            The model (the server backend's parameters, in order).
        W : ndarray of shape (M, k, l)
        priors : ndarray of shape (M, k)

        Returns
        -------
        (reply, ledger)
            ``reply``: ``theta`` (list aligned with ``params``), ``w`` and
            ``monitor``, each already divided by the expected batch.
        """
        if not ledger:
            raise SiloRefusal(f"silo {self.name!r} was not set up for this run.")
        round_index = int(round_index)
        answered, rounds = int(ledger["answered"]), int(ledger["rounds"])
        if round_index >= rounds or answered >= rounds:
            raise SiloRefusal(
                f"silo {self.name!r} refuses round {round_index}: its privacy budget covers "
                f"{rounds} rounds and it has answered {answered}."
            )
        if round_index != answered:
            raise SiloRefusal(
                f"silo {self.name!r} refuses round {round_index}: the next round it answers is "
                f"{answered} (each round is answered once, in order)."
            )
        settings = json.loads(ledger["settings"])
        priors = np.asarray(priors, dtype=np.float64)
        n_cells = priors.size
        if priors.ndim != 2 or not np.all(np.isfinite(priors)) or np.any(priors <= 0):
            raise SiloRefusal(f"silo {self.name!r}: the broadcast priors are not positive.")
        noise, w_clip = silo_noise(settings, ledger["noise"], priors)
        worker = self._worker(settings, n_cells, ledger)
        for p, value in zip(worker.backend.parameters, params, strict=True):
            if tuple(p.shape) != tuple(np.shape(value)):
                raise SiloRefusal(
                    f"silo {self.name!r}: a model parameter has shape "
                    f"{np.shape(value)}, expected {tuple(p.shape)}."
                )
        if tuple(np.shape(W)) != tuple(np.shape(priors)) + (settings["n_classes"],):
            raise SiloRefusal(
                f"silo {self.name!r}: W has shape {np.shape(W)}, expected "
                f"{tuple(np.shape(priors)) + (settings['n_classes'],)}."
            )
        config = FermiConfig(
            n_rounds=rounds, silo_sizes=(self.size,), sampling_rates=(self._rate(settings),),
            lam=float(settings["lam"]), max_grad_norm=float(settings["max_grad_norm"]),
            w_clip=w_clip, w_radius=1.0, privacy_unit=settings["privacy_unit"], noise=noise,
            loss_bound=float(settings["loss_bound"]), psi_bound=float(settings["psi_bound"]),
        )
        draws = self._draws(settings, ledger)
        msg = worker.round(draws, round_index, [np.array(v) for v in params], np.array(W),
                           priors, config)
        ledger = dict(ledger, answered=round_index + 1, n_cells=int(n_cells))
        if round_index + 1 == rounds and ledger.get("lifetime_entry"):
            self.policy.lifetime_ledger().commit(ledger["lifetime_entry"])
        reply = {
            "theta": [t[0].cpu().numpy() for t in msg.theta],
            "w": msg.w[0].cpu().numpy(),
            "monitor": msg.monitor[0].cpu().numpy(),
        }
        return reply, ledger

    def check(self, params, ledger):
        """This silo's noisy check of the returned model ``params``, once,
        after its last round (when the run's settings ask for it).

        Returns
        -------
        (reply, ledger)
            ``reply["check"]``: counts of (group, true class, predicted
            class) of the model on this silo's records and their clipped
            log-loss sum, with this silo's own noise (its plan's
            ``"model_check"`` release).
        """
        if not ledger:
            raise SiloRefusal(f"silo {self.name!r} was not set up for this run.")
        settings = json.loads(ledger["settings"])
        if not settings.get("model_check", False):
            raise SiloRefusal(f"silo {self.name!r}: this run did not plan a model check.")
        if ledger.get("checked") or int(ledger["answered"]) < int(ledger["rounds"]):
            raise SiloRefusal(
                f"silo {self.name!r} answers one model check, after its last round "
                f"(answered {ledger['answered']} of {ledger['rounds']} rounds"
                f"{', already checked' if ledger.get('checked') else ''})."
            )
        worker = self._worker(settings, int(ledger["n_cells"]), ledger)
        for p, value in zip(worker.backend.parameters, params, strict=True):
            if tuple(p.shape) != tuple(np.shape(value)):
                raise SiloRefusal(
                    f"silo {self.name!r}: a model parameter has shape {np.shape(value)}, "
                    f"expected {tuple(p.shape)}."
                )
        generator = SiloRandomness(settings["seed"], self.silo, self.device).at(CHECK_ROUND)
        std = ledger["noise"].get("model_check")
        values = worker.check(generator, [np.array(v) for v in params], settings["n_groups"], std)
        return {"check": values}, dict(ledger, checked=True)

    # -------------------------------------------------------------- helpers
    def _check_settings(self, settings):
        where = f"silo {self.name!r}"
        if settings.get("protocol") != PROTOCOL:
            raise SiloRefusal(
                f"{where} speaks {PROTOCOL!r}, the server {settings.get('protocol')!r}; install "
                "the same skdp version on both sides."
            )
        _check_numbers(settings, where)
        policy = self.policy
        if settings["epsilon"] is None:
            if not policy.allow_non_private:
                raise SiloRefusal(f"{where} refuses to train without privacy (epsilon=None).")
        elif settings["epsilon"] > policy.max_epsilon:
            raise SiloRefusal(
                f"{where} refuses epsilon={settings['epsilon']}: its budget is "
                f"max_epsilon={policy.max_epsilon}."
            )
        if settings.get("privacy_unit") not in policy.privacy_units:
            raise SiloRefusal(
                f"{where} refuses privacy_unit={settings.get('privacy_unit')!r}: it accepts "
                f"{list(policy.privacy_units)} (node config privacy-units)."
            )
        units = bool(settings.get("units", False))
        if units != (self.n_units is not None):
            raise SiloRefusal(
                f"{where} holds unit ids and answers only runs about units (all records of "
                "a person); the server asked for a record-level run: give every silo unit "
                "ids." if self.n_units is not None else
                f"{where} has no unit ids, the server asked for a run about units: give the "
                "silo its records' unit_ids (data file array 'unit_ids'), or run per record."
            )
        k = settings.get("max_records_per_unit")
        if units and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise SiloRefusal(f"{where} refuses max_records_per_unit={k!r}: not an integer >= 1.")
        if settings["delta"] > policy.max_delta:
            raise SiloRefusal(
                f"{where} refuses delta={settings['delta']}: at most {policy.max_delta}."
            )
        if settings["seed"] is not None and not policy.allow_seeded_noise:
            raise SiloRefusal(
                f"{where} refuses seeded noise (the seed's holder could replay it); run with "
                "random_state=None, or set allow-seeded-noise=true on the silo for experiments."
            )
        if settings["n_features"] != self.X.shape[1]:
            raise SiloRefusal(
                f"{where} has {self.X.shape[1]} features, the run expects "
                f"{settings['n_features']}."
            )

    def _codes(self, settings):
        if "codes" in self._cache:
            return self._cache["codes"]
        n = self.n_records
        if self.encoded:
            y_codes = self.y.astype(np.int64)
            groups = np.zeros(n, np.int64) if self.sensitive is None else self.sensitive.astype(
                np.int64)
        else:
            y_codes = _encode(self.y, settings["classes"], f"silo {self.name!r}: label")
            groups = (np.zeros(n, np.int64) if self.sensitive is None or not settings["groups"]
                      else _encode(self.sensitive, settings["groups"],
                                   f"silo {self.name!r}: group"))
        if y_codes.size and (y_codes.min() < 0 or y_codes.max() >= settings["n_classes"]):
            raise SiloRefusal(f"silo {self.name!r}: labels outside the run's classes.")
        if groups.size and (groups.min() < 0 or groups.max() >= settings["n_groups"]):
            raise SiloRefusal(f"silo {self.name!r}: groups outside the run's groups.")
        self._cache["codes"] = (y_codes, groups)
        return y_codes, groups

    def _cells(self, settings):
        y_codes, groups = self._codes(settings)
        strata, n_strata = fairness_strata(settings["fairness"], y_codes, settings["n_classes"])
        n_cells = n_strata * settings["n_groups"]
        cells = record_cells(groups, strata, settings["n_groups"], n_strata)
        return torch.as_tensor(cells, dtype=torch.long, device=self.device), n_cells

    def _rate(self, settings):
        if settings.get("batch_size") is not None:
            return float(settings["batch_size"]) / self.size
        return float(settings["sampling_rate"])

    def _units(self, settings, ledger):
        """This silo's :class:`~skdp.privacy.UnitBounds` for the run of
        ``ledger`` (the same subsets in every request: seeded, or from the
        ledger's secret token), or None without unit ids."""
        if self.n_units is None:
            return None
        key = ("units", ledger.get("units_token"), settings["seed"],
               settings["max_records_per_unit"])
        if key not in self._cache:
            rng = SiloRandomness(settings["seed"], self.silo, self.device)
            self._cache[key] = silo_unit_bounds(self.unit_codes, self.n_units,
                                                settings["max_records_per_unit"], rng,
                                                ledger.get("units_token"))
        return self._cache[key]

    def _unit_weights(self, settings, ledger):
        """The unit factors of the silo's records (float32 tensor), or None."""
        units = self._units(settings, ledger)
        if units is None:
            return None
        return torch.as_tensor(units.factors, dtype=torch.float32, device=self.device)

    def _draws(self, settings, ledger):
        """This run's :class:`~skdp.fairness.fermi.SiloDraws` (cached for the
        run: its batches are drawn a chunk of rounds at a time; seeded, a
        fresh process draws the same ones)."""
        run, draws = self._cache.get("draws", (None, None))
        if draws is None or run != ledger.get("run"):  # another run's batches are dropped
            rng = SiloRandomness(settings["seed"], self.silo, self.device)
            draws = SiloDraws(rng, self.size, self._rate(settings), int(ledger["rounds"]),
                              self._units(settings, ledger))
            self._cache["draws"] = (ledger.get("run"), draws)
        return draws

    def _worker(self, settings, n_cells, ledger):
        """This silo's :class:`~skdp.fairness.fermi.SiloWorker` (cached)."""
        key = ("worker", settings["n_classes"], tuple(settings["hidden_layer_sizes"]), n_cells)
        if self.n_units is not None:  # the run's unit subsets
            key += (ledger.get("units_token"), settings["max_records_per_unit"], settings["seed"])
        if key not in self._cache:
            X_t = training_rows(self.X, self.device, torch.float32)  # read, not copied
            n_classes = settings["n_classes"]
            module = None
            if self.module is not None:
                module = self.module(X_t.shape[1], n_classes)
            elif settings["hidden_layer_sizes"]:
                module = make_mlp(X_t.shape[1], n_classes, tuple(settings["hidden_layer_sizes"]))
            y_codes, _ = self._codes(settings)
            onehot = one_hot(y_codes, n_classes, X_t.dtype, self.device)
            cells, _ = self._cells(settings)
            _, groups = self._codes(settings)
            self._cache[key] = SiloWorker(X_t, onehot, cells, n_cells, module,
                                          groups=torch.as_tensor(groups, device=self.device),
                                          weights=self._unit_weights(settings, ledger),
                                          units=self._units(settings, ledger))
        return self._cache[key]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state


def _row_blocks(X, rows=65536):
    return (X[start:start + rows] for start in range(0, X.shape[0], rows))


def _all_finite(X):
    """Whether every value of ``X`` is finite (a block of rows at a time)."""
    return all(np.isfinite(block).all() for block in _row_blocks(X))


def _largest_magnitude(X):
    """``max |x|`` over ``X`` (a block of rows at a time)."""
    return max(float(np.abs(block).max(initial=0.0)) for block in _row_blocks(X))


def _check_numbers(settings, where):
    """Refuse public settings that are out of range (a server could send
    anything): each noise scale and bound must stay positive and finite."""
    def number(key, low, high=math.inf, low_open=True):
        value = settings.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SiloRefusal(f"{where} refuses {key}={value!r}: not a number.")
        inside = (value > low if low_open else value >= low) and value <= high
        if not (math.isfinite(value) and inside):
            raise SiloRefusal(f"{where} refuses {key}={value!r}: out of range.")

    number("lam", 0.0, low_open=False)
    number("max_grad_norm", 0.0)
    number("loss_bound", 0.0)
    number("psi_bound", 0.0)
    number("delta", 0.0, 1.0)
    if settings.get("epsilon") is not None:
        number("epsilon", 0.0)
    if isinstance(settings.get("rounds"), bool) or not isinstance(settings.get("rounds"), int) \
            or settings["rounds"] < 1:
        raise SiloRefusal(f"{where} refuses rounds={settings.get('rounds')!r}.")
    if settings.get("batch_size") is not None:
        number("batch_size", 0.0)
    else:
        number("sampling_rate", 0.0, 1.0)


def _encode(values, labels, what):
    """Codes of ``values`` in the public list ``labels`` (matched as strings)."""
    index = {str(label): code for code, label in enumerate(labels)}
    codes = np.fromiter((index.get(str(v), -1) for v in values), dtype=np.int64,
                        count=len(values))
    if np.any(codes < 0):
        unknown = sorted({str(v) for v, c in zip(values, codes) if c < 0})[:5]
        raise SiloRefusal(f"{what} values {unknown} are not in the run's list {list(labels)[:10]}.")
    return codes
