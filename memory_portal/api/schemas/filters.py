"""Query-parameter schemas built from the selectors' FilterSets (memory/selectors/filters.py),
so an API list takes the dashboard's filters under the same names, with the same choices, and
its OpenAPI document lists them. The FilterSet itself filters and validates; these schemas
describe the parameters and refuse a value outside a filter's fixed choices early."""

from __future__ import annotations

from datetime import date as Date
from typing import Any, Literal

import django_filters
from ninja import Schema
from pydantic import Field, create_model

from memory_portal.memory.selectors import NoteFilter, RunFilter

from .inputs import QueryDate

# A free-text filter (text, run, tag, agent, application) is at most this long.
FILTER_TEXT_MAX = 200


def _annotation(filter_: django_filters.Filter) -> Any:
    if isinstance(filter_, django_filters.DateFilter):
        return QueryDate | None
    choices = filter_.extra.get("choices")
    if isinstance(filter_, django_filters.ChoiceFilter) and isinstance(choices, list | tuple):
        values = tuple(str(value) for value, _ in choices)
        if values:
            return Literal[values] | None
    return str | None


def filter_query(filterset: type[django_filters.FilterSet], name: str) -> type[Schema]:
    """A ninja Query schema with one optional parameter per filter of `filterset`."""
    fields: dict[str, Any] = {}
    for key, filter_ in filterset.base_filters.items():
        annotation = _annotation(filter_)
        extra = {"max_length": FILTER_TEXT_MAX} if annotation == str | None else {}
        fields[key] = (annotation, Field(None, description=str(filter_.label), **extra))
    return create_model(name, __base__=Schema, **fields)


NoteQuery = filter_query(NoteFilter, "NoteQuery")
RunQuery = filter_query(RunFilter, "RunQuery")


def filter_data(query: Schema) -> dict[str, str]:
    """A query schema's given values as the FilterSet's form data."""
    return {
        key: value.isoformat() if isinstance(value, Date) else str(value)
        for key, value in query.model_dump(exclude_none=True).items()
    }
