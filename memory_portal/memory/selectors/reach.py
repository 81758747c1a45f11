"""The reach of notes among the runs they were served to (SPEC §2.10) — what a veto, a reject
or a forget acts on: one rule for the event payload, the API, the dashboard's rows and its
confirmations. Reads only the read records and their runs (the notes' own selectors use it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from ..models import NoteRead, RunStatus

RUNNING_LISTED = 50  # the ids of still-running readers an answer lists at most

REACH_WINDOW = timedelta(days=30)  # what a confirmation counts: the last 30 days' readers


@dataclass(frozen=True)
class Reach:
    runs: int  # distinct runs the notes were served to
    agents: int  # their distinct agents
    still_running: int  # how many of those runs are still running
    running: tuple[str, ...] = ()  # their ids where listed (at most RUNNING_LISTED), by id

    def as_data(self) -> dict:
        return {"runs": self.runs, "agents": self.agents, "runningRunIds": list(self.running)}

    def sentence(self, *, window: bool = True) -> str:
        """The blast radius as a confirmation says it: "served to 14 runs of 5 agents in the
        last 30 days; 3 still running." ("" for notes nobody read)."""
        if not self.runs:
            return ""
        said = (
            f"served to {self.runs} run{'s' * (self.runs != 1)} of {self.agents} "
            f"agent{'s' * (self.agents != 1)}{' in the last 30 days' if window else ''}"
        )
        return f"{said}; {self.still_running} still running." if self.still_running else f"{said}."


def _counted() -> dict:
    """Distinct runs, their agents and those still running, of a set of reads."""
    running = Q(run__status=RunStatus.RUNNING)
    return {
        "runs": Count("run_id", distinct=True),
        "agents": Count("run__agent_id", distinct=True),
        "still_running": Count("run_id", distinct=True, filter=running),
    }


def note_reach(*, note_id: str, since: datetime | None = None) -> Reach:
    """The runs `note_id` was served to (since `since`, else all kept records), their agents,
    and which of them are still running. Two queries on the note's index."""
    reads = NoteRead.objects.filter(note_id=note_id)
    if since is not None:
        reads = reads.filter(read_at__gte=since)
    counted = reads.aggregate(**_counted())
    running = ()
    if counted["still_running"]:
        running = tuple(
            reads.filter(run__status=RunStatus.RUNNING)
            .order_by("run_id")
            .values_list("run_id", flat=True)
            .distinct()[:RUNNING_LISTED]
        )
    return Reach(**counted, running=running)


def readers_of(note_ids: Iterable[str], *, now: datetime | None = None) -> QuerySet[NoteRead]:
    """The read records of `note_ids` in the last 30 days (REACH_WINDOW): the reads a blast
    radius counts."""
    since = (now or timezone.now()) - REACH_WINDOW
    return NoteRead.objects.filter(note_id__in=list(note_ids), read_at__gte=since)


def notes_reach(note_ids: Iterable[str], *, now: datetime | None = None) -> dict[str, Reach]:
    """Each note's readers in the last 30 days (REACH_WINDOW), counted — a page's rows show it
    before a veto. One query; notes nobody read are left out."""
    reads = readers_of(note_ids, now=now)
    rows = reads.values("note_id").annotate(**_counted()).order_by()
    return {row.pop("note_id"): Reach(**row) for row in rows}


def reach_of(note_ids: Iterable[str], *, now: datetime | None = None) -> Reach:
    """The readers of any of `note_ids` in the last 30 days, each run counted once: what a bulk
    veto, reject or forget of those notes would act on. One query."""
    reads = readers_of(note_ids, now=now)
    return Reach(**reads.aggregate(**_counted()))
