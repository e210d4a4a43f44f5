"""A lifetime privacy budget for one data set, kept in a file.

See :class:`PrivacyLedger`.
"""

import contextlib
import contextvars
import copy
import math
import os
import secrets
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import dp_accounting as dpa

from .._accounting import PrivacyBudgetError, check_budget, compute_epsilon, make_accountant
from .._report import check_same_privacy_unit
from ._events import event_from_json, event_to_json
from ._file import FORMAT, VERSION, LedgerError, locked, read_body, write_body

__all__ = ["Charge", "LedgerEntry", "PrivacyLedger", "active_ledger", "charge_budget",
           "charge_report", "charged_elsewhere", "composed_epsilon"]

#: Environment variable through which a charging block reaches the skdp fits
#: of worker processes it starts (and other threads): the ledger's path.
LEDGER_ENV = "SKDP_PRIVACY_LEDGER"
_LABEL_ENV = "SKDP_PRIVACY_LEDGER_LABEL"
_COVERED_ENV = "SKDP_PRIVACY_LEDGER_COVERED"

_ACTIVE = contextvars.ContextVar("skdp_privacy_ledger", default=None)
_COVERED = contextvars.ContextVar("skdp_privacy_ledger_covered", default=False)

_UNIT_KINDS = ("record", "unit")


@dataclass(frozen=True)
class LedgerEntry:
    """One charge of a ledger.

    Attributes
    ----------
    id : str
    time : str
        When it was reserved (UTC, ISO 8601).
    what : str
        What was charged (the estimator, search or step, and the label of
        the charging block).
    status : {"reserved", "committed"}
        ``"reserved"``: charged before the first release, the release did
        not say it finished (it may have failed, or been killed, after
        releasing); it counts in full all the same.
    epsilon, delta : float
        The release's own guarantee, as its report gave it.
    privacy_unit : str
    event : dp_accounting.DpEvent or None
        What the accountant composes; None for a release charged by its
        ``(epsilon, delta)`` alone (composed by basic composition).
    extra_delta : float
        A failure probability outside the event (e.g. the stability delta
        of a category choice), added to the composition's delta.
    """

    id: str
    time: str
    what: str
    status: str
    epsilon: float
    delta: float
    privacy_unit: str
    event: object = None
    extra_delta: float = 0.0

    def to_json(self):
        return {"id": self.id, "time": self.time, "what": self.what, "status": self.status,
                "epsilon": float(self.epsilon), "delta": float(self.delta),
                "privacy_unit": self.privacy_unit,
                "event": None if self.event is None else event_to_json(self.event),
                "extra_delta": float(self.extra_delta)}

    @classmethod
    def from_json(cls, value):
        event = value.get("event")
        return cls(id=str(value["id"]), time=str(value["time"]), what=str(value["what"]),
                   status=str(value["status"]), epsilon=float(value["epsilon"]),
                   delta=float(value["delta"]), privacy_unit=str(value["privacy_unit"]),
                   event=None if event is None else event_from_json(event),
                   extra_delta=float(value.get("extra_delta", 0.0)))


def composed_epsilon(entries, delta):
    """The epsilon at ``delta`` of ``entries`` together.

    Entries with an event are composed by the PLD accountant
    (:func:`~skdp.privacy.compute_epsilon` of their ``ComposedDpEvent``, in
    order); entries charged by ``(epsilon_i, delta_i)`` alone join by basic
    composition: the accountant's epsilon at ``delta - sum(delta_i)`` plus
    ``sum(epsilon_i)``; the entries' ``extra_delta`` are taken from
    ``delta`` too. inf when those deltas use up ``delta``.
    """
    events = [e.event for e in entries if e.event is not None]
    opaque = [e for e in entries if e.event is None]
    rest = delta - sum(e.delta for e in opaque) - sum(e.extra_delta for e in entries)
    if rest <= 0 and (opaque or any(e.extra_delta for e in entries)):
        return math.inf
    total = sum(e.epsilon for e in opaque)
    if len(events) == 1:
        total += compute_epsilon(events[0], rest)
    elif events:
        total += _composed_accountant(events).get_epsilon(rest)
    return float(total)


#: Accountants of recently composed entry lists, by the lists' reprs: a
#: charge composes one new event onto the ledger's (cached) total instead of
#: composing every entry again -- the same operations, in the same order, as
#: a fresh accountant composing ``ComposedDpEvent(events)``.
_COMPOSED = OrderedDict()
_COMPOSED_SIZE = 4
_COMPOSED_LOCK = threading.Lock()


def _composed_accountant(events):
    with _COMPOSED_LOCK:
        return _compose_from_cache(events)


def _compose_from_cache(events):
    keys = tuple(repr(e) for e in events)
    start, accountant = 0, None
    for k in range(len(keys), 0, -1):
        if keys[:k] in _COMPOSED:
            start, accountant = k, _COMPOSED[keys[:k]]
            break
    if start == len(keys):
        _COMPOSED.move_to_end(keys)
        return accountant
    accountant = make_accountant("pld") if accountant is None else copy.deepcopy(accountant)
    for event in events[start:]:
        accountant.compose(event)
    _COMPOSED[keys] = accountant
    while len(_COMPOSED) > _COMPOSED_SIZE:
        _COMPOSED.popitem(last=False)
    return accountant


class PrivacyLedger:
    """The lifetime privacy budget of one data set, persisted to a file.

    Each fit (or search, preprocessing step, audit fit...) made on the data
    set inside :meth:`charging` is charged to the ledger *before* its first
    release, and refused with a :class:`~skdp.privacy.PrivacyBudgetError`
    when the composition of everything charged so far with it would pass the
    cap ``max_epsilon`` at ``delta``. The composition is the accountant's
    (PLD, over the entries' events), not a sum of epsilons.

    The file is the data owner's: it is created once with :meth:`create`,
    written atomically (a crash leaves the old ledger or the new one),
    locked while it is read and rewritten (two processes never both spend
    the last of the budget), and checksummed. A missing or damaged file is
    an error, never a fresh budget. Nothing protects it from being deleted
    or replaced by whoever can write to its folder.

    Parameters
    ----------
    path : str or path-like
        An existing ledger file (see :meth:`create`).

    Attributes
    ----------
    path : str
    name : str
    max_epsilon, delta : float
        The lifetime cap: everything charged together is at most
        ``(max_epsilon, delta)``-DP.
    privacy_unit : {"record", "unit"}
        What the ledger's epsilon is about: records, or units (fits with
        ``unit_ids``); the other kind is refused.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from skdp import DPSGDClassifier
    >>> from skdp.privacy import PrivacyLedger
    >>> folder = tempfile.mkdtemp()
    >>> ledger = PrivacyLedger.create(os.path.join(folder, "credit.ledger"),
    ...                               max_epsilon=1.2, delta=1e-5, name="credit")
    >>> X = np.random.default_rng(0).normal(size=(500, 3)); y = (X[:, 0] > 0).astype(int)
    >>> with ledger.charging("monthly retrain"):
    ...     clf = DPSGDClassifier(epsilon=1.0, model_check=False, random_state=0).fit(X, y)
    >>> len(ledger.entries), ledger.spent() <= 1.0
    (1, True)
    >>> with ledger.charging("second retrain"):
    ...     DPSGDClassifier(epsilon=1.0, model_check=False, random_state=1).fit(X, y)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skdp.privacy._accounting.PrivacyBudgetError: ledger 'credit' refuses DPSGDClassifier ...
    >>> len(ledger.entries)  # the refused fit released nothing and charged nothing
    1
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._header(read_body(self.path))

    def _header(self, body):
        try:
            self.name = str(body["name"])
            self.max_epsilon = float(body["max_epsilon"])
            self.delta = float(body["delta"])
            self.privacy_unit = str(body["privacy_unit"])
            entries = [LedgerEntry.from_json(e) for e in body["entries"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise LedgerError(f"the privacy ledger {self.path!r} is inconsistent ({exc}).") from exc
        return entries

    @classmethod
    def create(cls, path, *, max_epsilon, delta, privacy_unit="record", name=None):
        """Start the ledger of a data set whose budget was never spent.

        Parameters
        ----------
        path : str or path-like
            Where to keep it; refused if a file is there already.
        max_epsilon : float
            The lifetime cap on epsilon, at ``delta``.
        delta : float
            The lifetime delta: every charge is read at it.
        privacy_unit : {"record", "unit"}, default="record"
        name : str, optional
            Shown in messages and by ``python -m skdp.privacy.ledger show``;
            default: the file's name.

        Returns
        -------
        PrivacyLedger
        """
        check_budget(max_epsilon, delta)
        if privacy_unit not in _UNIT_KINDS:
            raise ValueError(f"privacy_unit must be one of {_UNIT_KINDS}, got {privacy_unit!r}.")
        path = os.fspath(path)
        body = {"format": FORMAT, "version": VERSION,
                "name": str(name) if name is not None else os.path.basename(path),
                "max_epsilon": float(max_epsilon), "delta": float(delta),
                "privacy_unit": privacy_unit, "created": _now(), "entries": []}
        with locked(path):
            if os.path.exists(path):
                raise FileExistsError(
                    f"{path!r} exists already: open it with PrivacyLedger({path!r}); a ledger "
                    "is created once per data set."
                )
            write_body(path, body)
        return cls(path)

    # ---------------------------------------------------------------- reading
    @property
    def entries(self):
        """Every charge so far, oldest first (read from the file now)."""
        return self._header(read_body(self.path))

    def spent(self):
        """The composed epsilon of every charge so far, at :attr:`delta`."""
        return composed_epsilon(self.entries, self.delta)

    def remaining(self):
        """``max_epsilon`` minus :meth:`spent` (at least 0). Epsilons do not
        add up: a charge of epsilon ``e`` may fit even when ``e`` exceeds
        this (composition is sublinear), and is refused only when the
        composition passes the cap."""
        return max(0.0, self.max_epsilon - self.spent())

    def __repr__(self):
        return (f"PrivacyLedger({self.path!r}: {self.name!r}, max_epsilon={self.max_epsilon:g}, "
                f"delta={self.delta:g}, privacy_unit={self.privacy_unit!r})")

    # ---------------------------------------------------------------- charging
    def reserve(self, *, what, epsilon, delta, privacy_unit="record", event=None,
                extra_delta=0.0, max_epsilon=None):
        """Charge a release before it is made; refuse it past the cap.

        Parameters
        ----------
        what : str
            What is charged (shown by ``show``).
        epsilon, delta : float
            The release's own guarantee.
        privacy_unit : str, default="record"
            Its :attr:`~skdp.privacy.PrivacyReport.privacy_unit`.
        event : dp_accounting.DpEvent, optional
            Its event; without one the release is composed by basic
            composition from ``(epsilon, delta)``.
        extra_delta : float, default=0.0
            A failure probability outside ``event`` (see :class:`LedgerEntry`).
        max_epsilon : float, optional
            A lower cap for this charge than the ledger's own (e.g. a silo's
            ``max-total-epsilon``).

        Returns
        -------
        LedgerEntry
            The reserved entry (pass it to :meth:`commit` when done).

        Raises
        ------
        PrivacyBudgetError
            If the composition with this charge would pass the cap; nothing
            is charged.
        ValueError
            For a non-private release, or one about another privacy unit.
        """
        if event is not None and _non_private(event) or not math.isfinite(epsilon):
            raise PrivacyBudgetError(
                f"ledger {self.name!r} refuses {what}: it is not private (epsilon=inf). "
                "Fit it with a finite epsilon, or outside the charging block."
            )
        check_same_privacy_unit(self.privacy_unit, privacy_unit)
        entry = LedgerEntry(id=secrets.token_hex(8), time=_now(), what=str(what),
                            status="reserved", epsilon=float(epsilon), delta=float(delta),
                            privacy_unit=str(privacy_unit), event=event,
                            extra_delta=float(extra_delta))
        with locked(self.path):
            body = read_body(self.path)
            entries = self._header(body)
            after = composed_epsilon(entries + [entry], self.delta)
            cap = self.max_epsilon if max_epsilon is None else min(self.max_epsilon,
                                                                   float(max_epsilon))
            if after > cap * (1 + 1e-12):
                before = composed_epsilon(entries, self.delta)
                raise PrivacyBudgetError(
                    f"ledger {self.name!r} refuses {what} (epsilon={epsilon:.4g}, "
                    f"delta={delta:.3g}): with it, everything charged would be "
                    f"epsilon={after:.4g} at delta={self.delta:g}, past the cap "
                    f"max_epsilon={cap:g}. Spent so far: {before:.4g}; remaining: "
                    f"{max(0.0, cap - before):.4g} (composed, not added: ask for less epsilon "
                    "or fewer releases; a release charged by its (epsilon, delta) alone, as a "
                    "search is until it finishes, also uses up its delta of the ledger's)."
                )
            body["entries"].append(entry.to_json())
            write_body(self.path, body)
        return entry

    def commit(self, entry, *, event=None, epsilon=None, delta=None, extra_delta=None):
        """Mark a reserved charge as finished, with its final guarantee.

        Parameters
        ----------
        entry : LedgerEntry or str
            The reserved entry, or its id.
        event, epsilon, delta, extra_delta : optional
            The final guarantee, replacing the reserved one (e.g. a search
            reserved by its budget that finished with a smaller event). The
            replacement is kept only if the ledger's composed total does
            not grow with it; otherwise the reservation's figures stay.

        Returns
        -------
        LedgerEntry
            The committed entry.
        """
        entry_id = entry if isinstance(entry, str) else entry.id
        with locked(self.path):
            body = read_body(self.path)
            entries = self._header(body)
            index = next((i for i, e in enumerate(entries) if e.id == entry_id), None)
            if index is None:
                raise LedgerError(f"ledger {self.name!r} holds no entry {entry_id!r}.")
            old = entries[index]
            new = replace(old, status="committed")
            final = replace(
                new, event=old.event if event is None else event,
                epsilon=old.epsilon if epsilon is None else float(epsilon),
                delta=old.delta if delta is None else float(delta),
                extra_delta=old.extra_delta if extra_delta is None else float(extra_delta))
            if final != new:
                changed = entries[:index] + [final] + entries[index + 1:]
                if composed_epsilon(changed, self.delta) <= composed_epsilon(entries, self.delta):
                    new = final
            body["entries"][index] = new.to_json()
            write_body(self.path, body)
        return new

    @contextlib.contextmanager
    def charging(self, label=None):
        """Charge every skdp fit made in the block to this ledger.

        Each fit, search or private preprocessing step reserves its planned
        event before its first release (a fit refused by the cap releases
        nothing); a search charges its whole budget once, not its candidate
        fits. Fits in worker processes the block starts (``n_jobs``) charge
        the same file, which the lock keeps consistent. A failure before a
        fit's first release charges nothing; after it, the charge stays.

        Parameters
        ----------
        label : str, optional
            Added to each entry's ``what`` (e.g. ``"monthly retrain"``).
        """
        token = _ACTIVE.set((self, label))
        previous = {k: os.environ.get(k) for k in (LEDGER_ENV, _LABEL_ENV)}
        os.environ[LEDGER_ENV] = os.path.abspath(self.path)
        os.environ[_LABEL_ENV] = "" if label is None else str(label)
        _restart_worker_pool()
        try:
            yield self
        finally:
            _ACTIVE.reset(token)
            for key, value in previous.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            _restart_worker_pool()  # its workers would still charge this ledger


def _restart_worker_pool():
    """Stop joblib's reusable worker pool, if one runs: at the start of a
    charging block its processes would not see the ledger in their
    environment (their fits, with ``n_jobs``, would go uncharged), at its
    end they would still see it. The next ``Parallel`` call starts fresh
    workers with the environment of the moment."""
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is not None:
        with contextlib.suppress(Exception):
            executor.shutdown(wait=True)


def _non_private(event):
    if isinstance(event, dpa.NonPrivateDpEvent):
        return True
    inner = getattr(event, "events", None)
    if inner is not None:
        return any(_non_private(e) for e in inner)
    inner = getattr(event, "event", None)
    return inner is not None and _non_private(inner)


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def active_ledger():
    """``(ledger, label)`` of the enclosing :meth:`PrivacyLedger.charging`
    block (or of the process that started this worker), or None."""
    active = _ACTIVE.get()
    if active is not None:
        return active
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return None
    return PrivacyLedger(path), (os.environ.get(_LABEL_ENV) or None)


def charge_report(what, report, *, extra_delta=0.0):
    """Reserve ``report``'s release in the active ledger, if any.

    Called by every skdp fit right after its noise is planned and before
    its first release. Returns the reserved :class:`Charge`, or None
    when no ledger is charging or an enclosing release (a search) has
    charged for this one already (:func:`charged_elsewhere`).
    """
    event = report.dp_event if report.dp_event is not None else dpa.NonPrivateDpEvent()
    return _reserve_in_active(what, epsilon=report.epsilon, delta=report.delta,
                              privacy_unit=report.privacy_unit, event=event,
                              extra_delta=extra_delta)


def _reserve_in_active(what, **charge):
    """:meth:`PrivacyLedger.reserve` ``charge`` in the active ledger, named
    ``what`` and the block's label; None when no ledger charges here."""
    if _covered():
        return None
    active = active_ledger()
    if active is None:
        return None
    ledger, label = active
    name = what if label is None else f"{what} ({label})"
    return Charge(ledger, ledger.reserve(what=name, **charge))


def charge_budget(what, epsilon, delta, privacy_unit="record"):
    """Reserve a release by its budget ``(epsilon, delta)`` alone in the
    active ledger, if any (a search, whose event is known only at its end:
    :meth:`Charge.commit` it with the final event). Returns a
    :class:`Charge` or None, as :func:`charge_report`."""
    return _reserve_in_active(what, epsilon=float(epsilon), delta=float(delta),
                              privacy_unit=privacy_unit, event=None)


@dataclass
class Charge:
    """A reserved charge: its ledger and entry; :meth:`commit` when the
    releases are done."""

    ledger: PrivacyLedger
    entry: LedgerEntry

    def commit(self, **final):
        """:meth:`PrivacyLedger.commit` of the entry (``final``: ``event``,
        ``epsilon``, ``delta``)."""
        return self.ledger.commit(self.entry, **final)


def _covered():
    """Whether an enclosing release charged for the fits here: this
    context's flag, or, in a worker process, its parent's."""
    if _COVERED.get():
        return True
    owner = os.environ.get(_COVERED_ENV)
    return bool(owner) and owner != str(os.getpid())


@contextlib.contextmanager
def charged_elsewhere():
    """Within the block, fits charge nothing: an enclosing release (a search
    that charged its whole budget) covers them."""
    token = _COVERED.set(True)
    previous = os.environ.get(_COVERED_ENV)
    # for the worker processes the block starts (this process's other
    # threads keep charging: the variable names the covering process)
    os.environ[_COVERED_ENV] = str(os.getpid())
    try:
        yield
    finally:
        _COVERED.reset(token)
        if previous is None:
            os.environ.pop(_COVERED_ENV, None)
        else:
            os.environ[_COVERED_ENV] = previous
