"""`{{ event.details|readable_details }}`: an audit event's details as a person reads them —
labels in words, counts and lists written out, booleans as yes / no — never a Python repr."""

from __future__ import annotations

from django import template

register = template.Library()

LIST_SHOWN = 5  # ids listed before "and N more"


def _label(key: str) -> str:
    return str(key).replace("_", " ")


def _value(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{_label(k)} {_value(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple):
        shown = ", ".join(_value(v) for v in value[:LIST_SHOWN])
        more = len(value) - LIST_SHOWN
        return (f"{shown} and {more} more" if more > 0 else shown) or "none"
    return str(value)


@register.filter
def readable_details(details) -> list[tuple[str, str]]:
    if not isinstance(details, dict):
        return [("details", _value(details))] if details else []
    return [(_label(key), _value(value)) for key, value in details.items()]
