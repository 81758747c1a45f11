"""`{% note_rows notes %}`: rows of the notes table, drawn by their Jinja2 template
(templates/jinja2/dashboard/note_rows.html, dashboard/jinja.py) in one call, with NoteTable's
columns and the page's `project`, `access` and `oob`. The rows' buttons post the page's one
`#row-actions` form (project_memory.html, partial `row_actions_form`). Every page and htmx
fragment that shows a note's row draws it through this tag: the notes table, the review queue
and `row_response`."""

from __future__ import annotations

from django import template
from django.template import engines
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from memory_portal.memory import selectors
from memory_portal.memory.access import note_actions

from ..jinja import searched_terms
from ..tables import NoteTable
from .fast_url import PlainReverser

register = template.Library()
_COLUMNS = NoteTable.row_columns()


def _searched(filterset) -> frozenset[str]:
    """The terms of the table's text search (NoteFilter `q`), to mark in each row."""
    data = getattr(filterset, "data", None) or {}
    return searched_terms(str(data.get("q", ""))[:500])


def _held_marker(context, notes):
    """`held(note)`: under the `hold` review policy, how long a held note has waited ("3 h"),
    else "" (the row shows a "Held" badge then). One query for the page's rows, only under
    `hold` (selectors.held_note_ids: the visibility rule's own clause)."""
    setting = context.get("setting")
    if setting is None:
        return lambda note: ""
    held_ids = selectors.held_note_ids(setting=setting, note_ids=[n.pk for n in notes])
    now = timezone.now()

    def held(note) -> str:
        return waited(now - note.created_at) if note.pk in held_ids else ""

    return held


def waited(age) -> str:
    """A wait as a person reads it: "12 min", "5 h", "3 d"."""
    minutes = max(0, int(age.total_seconds() // 60))
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{minutes // 60} h"
    return f"{minutes // (24 * 60)} d"


@register.simple_tag(takes_context=True)
def note_rows(context, notes) -> SafeString:
    rows = engines["jinja2"].env.get_template("dashboard/note_rows.html")
    manager = context["access"].is_manager

    def allowed(note) -> frozenset[str]:
        """The row's buttons: what this person may do to the note (access.note_actions)."""
        return note_actions(note, manager=manager)

    # A table's rows (django-tables2's BoundRows) or notes.
    records = [getattr(row, "record", row) for row in notes]
    return mark_safe(
        rows.render(
            notes=records,
            columns=_COLUMNS,
            project=context["project"],
            access=context["access"],
            oob=context.get("oob", False),
            url=PlainReverser(),
            allowed=allowed,
            # A row of a review-queue section sends the section's key with its actions: the
            # answer takes the row out once it no longer belongs there (views/base.py
            # `rows_response`).
            section=context.get("section_key", ""),
            words=_searched(context.get("filter")),
            held=_held_marker(context, records),
        )
    )
