"""The project's stored note counters (issue "Fast at a million notes"): kept on the project's
setting row, changed by every service that stores, deletes or moves a note between statuses or
trust levels, in its transaction and under the setting-row lock it takes. The projects list and
the project header read them instead of counting notes.

A note counts once by status (`notes_active`, `notes_archived`, `notes_forgotten`), once by
trust (`notes_learned`, `notes_reviewed`, `notes_rejected`), and in `notes_awaiting` while it is
learned and active and not a day log: exactly the review queue's first section
(selectors.REVIEW_SECTIONS), the one number of notes awaiting review the product shows.
Stored notes are the three statuses summed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db import connection
from django.db.models import Count, F, Q

from .models import Kind, MemorySetting, Note, Status, Trust

STATUS_FIELDS = {
    Status.ACTIVE.value: "notes_active",
    Status.ARCHIVED.value: "notes_archived",
    Status.FORGOTTEN.value: "notes_forgotten",
}
TRUST_FIELDS = {
    Trust.LEARNED.value: "notes_learned",
    Trust.REVIEWED.value: "notes_reviewed",
    Trust.REJECTED.value: "notes_rejected",
}
AWAITING_FIELD = "notes_awaiting"
FIELDS = (*STATUS_FIELDS.values(), *TRUST_FIELDS.values(), AWAITING_FIELD)
# A new note from a write or a save: learned and active (a day log is not reviewed: its lines
# are lifted into facts).
NEW = (Status.ACTIVE.value, Trust.LEARNED.value, False)

State = tuple[str, str, bool]  # (status, trust, is a day log)


def _fields(state: State) -> list[str]:
    status, trust, _day = state
    fields = [STATUS_FIELDS[status], TRUST_FIELDS[trust]]
    if state == NEW:
        fields.append(AWAITING_FIELD)
    return fields


def state_of(note: Note) -> State:
    return (note.status, note.trust, note.kind == Kind.DAY)


def archived_state(note: Note) -> State:
    """`note`'s state once archived (its trust and kind kept)."""
    return (Status.ARCHIVED.value, note.trust, note.kind == Kind.DAY)


def moved(before: State | None, after: State | Note | None, n: int = 1) -> dict[str, int]:
    """The counter changes of `n` notes going from `before` to `after` (a State, or the
    note as it is now); None on either side is "not stored" (an insert, a
    delete). Unchanged counters are left out."""
    if isinstance(after, Note):
        after = state_of(after)
    change: Counter[str] = Counter()
    for field in _fields(before) if before is not None else ():
        change[field] -= n
    for field in _fields(after) if after is not None else ():
        change[field] += n
    return {field: d for field, d in change.items() if d}


def combined(*changes: dict[str, int]) -> dict[str, int]:
    """Several counter changes as one."""
    total: Counter[str] = Counter()
    for change in changes:
        total.update(change)
    return {field: d for field, d in total.items() if d}


def tally(states: Iterable[State]) -> dict[str, int]:
    """Every counter, as absolute values, for notes in the given states."""
    values = dict.fromkeys(FIELDS, 0)
    for state in states:
        for field in _fields(state):
            values[field] += 1
    return values


def recounted(project_id: int) -> dict[str, int]:
    """Every counter, counted afresh from the project's notes (one grouped query; a project
    stores at most its cap). Under the lock, the exact values to store."""
    return recounted_many([project_id])[project_id]


def recounted_many(project_ids: list[int]) -> dict[int, dict[str, int]]:
    """`recounted` of each project, in one grouped query for them all."""
    rows = (
        Note.objects.filter(project_id__in=project_ids)
        .order_by()
        .annotate(is_day=Q(kind=Kind.DAY))
        .values_list("project_id", "status", "trust", "is_day")
        .annotate(n=Count("pk"))
    )
    values = {pk: dict.fromkeys(FIELDS, 0) for pk in project_ids}
    for project_id, status, trust, day, n in rows:
        for field in _fields((status, trust, bool(day))):
            values[project_id][field] += n
    return values


def changes(setting: MemorySetting, change: dict[str, int]) -> dict:
    """`change` as the UPDATE's values (each counter plus its change, in the database) and
    in place on `setting`, so a caller holding the row sees the state it leaves."""
    for field, d in change.items():
        setattr(setting, field, getattr(setting, field) + d)
    return {field: F(field) + d for field, d in change.items()}


def sql_adds(change: dict[str, int]) -> tuple[list[str], list[int]]:
    """`change` for a hand-built UPDATE: its SET items (`field = field + %s`) and their values."""
    qn = connection.ops.quote_name
    return [f"{qn(field)} = {qn(field)} + %s" for field in change], list(change.values())


def project_counts(setting: MemorySetting) -> dict:
    """The counts the project header shows, from the stored counters."""
    by_status = {status: getattr(setting, field) for status, field in STATUS_FIELDS.items()}
    by_trust = {trust: getattr(setting, field) for trust, field in TRUST_FIELDS.items()}
    return {
        "total": sum(by_status.values()),
        "by_trust": by_trust,
        "by_status": by_status,
        "awaiting": getattr(setting, AWAITING_FIELD),
    }
