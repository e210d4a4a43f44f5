"""A lifetime privacy budget per data set: :class:`PrivacyLedger`.

``python -m skdp.privacy.ledger show FILE`` lists a ledger's entries and
their composed total; ``python -m skdp.privacy.ledger create FILE
--max-epsilon E --delta D`` starts one.
"""

from ._events import event_from_json, event_to_json
from ._file import LedgerError
from ._ledger import (
    Charge,
    LedgerEntry,
    PrivacyLedger,
    active_ledger,
    charge_budget,
    charge_report,
    charged_elsewhere,
    composed_epsilon,
)

__all__ = [
    "Charge",
    "LedgerEntry",
    "LedgerError",
    "PrivacyLedger",
    "active_ledger",
    "charge_budget",
    "charge_report",
    "charged_elsewhere",
    "composed_epsilon",
    "event_from_json",
    "event_to_json",
]
