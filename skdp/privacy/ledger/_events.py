"""dp-accounting events to and from plain JSON values (a ledger's entries).

Every ``DpEvent`` of dp-accounting is a frozen attrs class whose fields are
numbers, lists of events or events; the JSON form is ``{"type": class name,
<field>: <value>, ...}``, recursively. Only dp-accounting's own event
classes are read back.
"""

import attr
import dp_accounting as dpa
from dp_accounting import dp_event as _dp_event_module


def event_to_json(event):
    """The JSON value of a ``DpEvent``.

    >>> import dp_accounting as dpa
    >>> from skdp.privacy.ledger import event_from_json, event_to_json
    >>> event = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 3)
    >>> event_to_json(event)
    {'type': 'SelfComposedDpEvent', 'event': {'type': 'GaussianDpEvent', 'noise_multiplier': 2.0}, 'count': 3}
    >>> event_from_json(event_to_json(event)) == event
    True
    """
    if not isinstance(event, dpa.DpEvent):
        raise TypeError(f"not a dp_accounting DpEvent: {event!r}")
    value = {"type": type(event).__name__}
    for field in attr.fields(type(event)):
        value[field.name] = _value_to_json(getattr(event, field.name))
    return value


def _value_to_json(value):
    if isinstance(value, dpa.DpEvent):
        return event_to_json(value)
    if isinstance(value, (list, tuple)):
        return [_value_to_json(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    return float(value)


def event_from_json(value):
    """The ``DpEvent`` of a JSON value from :func:`event_to_json`."""
    if not isinstance(value, dict) or "type" not in value:
        raise ValueError(f"not an event: {value!r}")
    cls = getattr(_dp_event_module, value["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, dpa.DpEvent)):
        raise ValueError(f"unknown event type {value['type']!r}")
    fields = {name: _value_from_json(v) for name, v in value.items() if name != "type"}
    return cls(**fields)


def _value_from_json(value):
    if isinstance(value, dict):
        return event_from_json(value)
    if isinstance(value, list):
        return [_value_from_json(v) for v in value]
    return value
