"""Who read a note and what a run read (SPEC §2.10): the read lists of the note's and the run's
pages and of the admin API, paged newest first. Their reach is selectors/reach.py."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from ..actors import Actor
from ..models import NoteRead, Project, Status, Trust
from .activity import run_in_project
from .notes import note_in_project

# A read as a list shows it, with its run and the note's id; and what a run's list shows of the
# note now (never its text).
READ_COLUMNS = (
    "run", "read_at", "note", "tool", "rank", "score", "trust", "note__id", "run__id",
    "run__status", "run__agent_id", "run__top_level_run_id", "run__agent__name",
)  # fmt: skip
NOTE_NOW = ("kind", "trust", "status", "archive_reason", "superseded_by")


def note_reads(*, actor: Actor, project: Project, note_id: str) -> QuerySet[NoteRead]:
    """Who read a note of the project, newest first, each with its run (status, agent, top-level
    run). `memory_not_found` for a note that is not the project's."""
    note = note_in_project(actor=actor, project=project, note_id=note_id)
    return (
        NoteRead.objects.filter(note_id=note.read_key)
        .select_related("note", "run__agent")
        .only(*READ_COLUMNS)
        .order_by("-read_at", "-run_id")
    )


def run_reads(*, actor: Actor, project: Project, run_id: str) -> QuerySet[NoteRead]:
    """What a run of the project read, newest first (an answer's notes in its order), each with
    its note as it is now (see `changed_since`). `not_found` for a run that is not the
    project's."""
    run = run_in_project(actor=actor, project=project, run_id=run_id)
    return (
        NoteRead.objects.filter(run_id=run.read_key)
        .select_related("note", "run__agent")
        .only(*READ_COLUMNS, *(f"note__{c}" for c in NOTE_NOW))
        .order_by("-read_at", "rank")
    )


def changed_since(read: NoteRead) -> list[str]:
    """What became of the note since it was read, of what makes a read worth a second look:
    `vetoed`, `rejected` (reviewed or learned when read), `forgotten`, `superseded`."""
    note = read.note
    changes = []
    if note.is_vetoed:
        changes.append("vetoed")
    if note.trust == Trust.REJECTED and read.trust != Trust.REJECTED:
        changes.append("rejected")
    if note.status == Status.FORGOTTEN:
        changes.append("forgotten")
    if note.superseded_by_id:
        changes.append("superseded")
    return changes


PAGE_SIZE = 20


@dataclass(frozen=True)
class ReadsPage:
    rows: list[NoteRead]
    offset: int
    next_offset: int | None


def reads_page(
    reads: QuerySet[NoteRead], *, offset: int, size: int = PAGE_SIZE, changes: bool = False
) -> ReadsPage:
    """One page of a read list (newest first) from `offset`: the dashboard's note and run
    pages. `changes`: each row carries `changes` (`changed_since`; a run's list)."""
    offset = max(0, offset)
    rows = list(reads[offset : offset + size + 1])
    for row in rows if changes else ():
        row.changes = changed_since(row)
    more = len(rows) > size
    return ReadsPage(rows[:size], offset, offset + size if more else None)
