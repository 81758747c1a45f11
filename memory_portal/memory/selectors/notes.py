"""People's reads of a project's notes: table ids, a page's rows, admin rows, one note."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import BooleanField, ExpressionWrapper, F, QuerySet

from ..actors import Actor
from ..models import AuditEvent, Note, Project
from .reach import notes_reach
from .visibility import evidence_stale_annotation, note_not_found, notes_for_actor

# What a table row shows of a note's relations. The origin run and its agent, and the people
# who vetoed or wrote it, are joined (with the open recovery record, an annotation); the
# application, the owning agent and the evidence repository are read for the rows that name
# one, a small query each. With all of them joined, PostgreSQL spent 4-10 ms planning the row
# query for about 1 ms of work; each join it loses roughly halves that (docs/PERFORMANCE.md).
ROW_JOINED = ("origin_run__agent", "vetoed_by", "created_by_user")
ROW_FETCHED = ("application", "owner_agent", "evidence_repository")


def _evidence_stale() -> ExpressionWrapper:
    return ExpressionWrapper(evidence_stale_annotation(), output_field=BooleanField())


def _with_row_columns(notes: QuerySet[Note]) -> QuerySet[Note]:
    return notes.annotate(evidence_stale=_evidence_stale(), recovery_ref=F("recovery__id"))


def notes_table(*, actor: Actor, project: Project) -> QuerySet[Note]:
    """Every note of the project a member sees, with what a table row shows joined in one query:
    application, owner agent, origin run and its agent, evidence repository, who vetoed, who
    created, the open recovery record and the evidence-stale flag. For one note (its page);
    a page of rows is `notes_rows`."""
    return _with_row_columns(
        notes_for_actor(actor=actor, project=project).select_related(*ROW_JOINED, *ROW_FETCHED)
    )


def notes_admin(*, actor: Actor, project: Project) -> QuerySet[Note]:
    """Every note of the project, newest first, with what an admin API row shows joined in:
    origin run, evidence repository, application, who vetoed, the open recovery record.
    `evidence_stale` is an alias to filter on (NoteFilter)."""
    return (
        notes_for_actor(actor=actor, project=project)
        .alias(evidence_stale=_evidence_stale())
        .select_related("origin_run", "evidence_repository", "application", "vetoed_by", "recovery")
        .order_by("-created_at", "-id")
    )


def notes_table_ids(*, actor: Actor, project: Project) -> QuerySet[Note]:
    """The same rows as `notes_table`, without its joins: a page filters, sorts and counts
    these (one table, planned in microseconds), then loads only its own rows with
    `notes_rows`. `evidence_stale` is an alias to filter on."""
    return (
        notes_for_actor(actor=actor, project=project)
        .alias(evidence_stale=_evidence_stale())
        .only("id")
    )


def notes_rows(*, actor: Actor, project: Project, ids: list[str]) -> list[Note]:
    """`notes_table`'s rows for `ids`, in that order (ids not found are left out): one query
    for the notes, then one for each of ROW_FETCHED that some of them have, and one for their
    readers of the last 30 days (`note.reach`, a Reach or None: the blast radius a row shows
    before its veto)."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return []
    rows = _with_row_columns(
        notes_for_actor(actor=actor, project=project)
        .filter(pk__in=ids)
        .select_related(*ROW_JOINED)
        .prefetch_related(*ROW_FETCHED)
    )
    found = {n.pk: n for n in rows}
    reach = notes_reach(found) if found else {}
    for note in found.values():
        note.reach = reach.get(note.pk)
    return [found[i] for i in ids if i in found]


def note_in_project(*, actor: Actor, project: Project, note_id: str) -> Note:
    """One table row of the project (`memory_not_found` for a note of another project)."""
    note = notes_table(actor=actor, project=project).filter(pk=note_id).first()
    if note is None:
        raise note_not_found(note_id)
    return note


@dataclass(frozen=True)
class NoteDetail:
    note: Note
    older: list[Note]  # the notes this one replaced, nearest first
    newer: list[Note]  # the notes that replaced it, nearest first
    events: QuerySet[AuditEvent]


def note_detail(*, actor: Actor, project: Project, note_id: str) -> NoteDetail:
    """A note with its supersede chain both ways and its audit history."""
    note = note_in_project(actor=actor, project=project, note_id=note_id)

    def walk(start: Note, link: str) -> list[Note]:
        chain: list[Note] = []
        seen = {start.pk}
        next_id = getattr(start, f"{link}_id")
        while next_id and next_id not in seen and len(chain) < 50:
            found = Note.objects.filter(pk=next_id, project=project).first()
            if found is None:
                break
            chain.append(found)
            seen.add(found.pk)
            next_id = getattr(found, f"{link}_id")
        return chain

    events = AuditEvent.objects.filter(project=project, note_ref=note.pk).order_by(
        "-created_at", "-id"
    )
    return NoteDetail(
        note=note, older=walk(note, "supersedes"), newer=walk(note, "superseded_by"), events=events
    )
