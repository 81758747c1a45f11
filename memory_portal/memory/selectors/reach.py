"""The reach of notes among the runs they were served to (SPEC §2.10) — what a veto, a reject
or a forget acts on: one rule for the event payload, the API, the dashboard's rows and its
confirmations. Reads only the read records and their runs (the notes' own selectors use it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections
from django.db.models import Subquery
from django.utils import timezone

from ..models import Note, NoteRead, Run, RunStatus

RUNNING_LISTED = 50  # the ids of still-running readers an answer lists at most
REACH_WINDOW = timedelta(days=30)  # what a confirmation counts: the last 30 days' readers
# A note's newest reads a reach counts at most, so that its cost stays bounded however often
# the note is read (a veto counts its note's reach under the project's lock, for the event): a
# note served more often is said to reach "at least" what they hold. A page's rows count fewer
# of each note (50 rows, at most ROW_SAMPLE reads each); a bulk selection shares REACH_SAMPLE.
REACH_SAMPLE = 2_000
ROW_SAMPLE = 100


@dataclass(frozen=True)
class Reach:
    runs: int  # distinct runs the notes were served to
    agents: int  # their distinct agents
    still_running: int  # how many of those runs are still running
    running: tuple[str, ...] = ()  # their ids where listed (at most RUNNING_LISTED), by id
    at_least: bool = False  # a note had more than REACH_SAMPLE reads: only its newest counted

    def as_data(self) -> dict:
        return {
            "runs": self.runs,
            "agents": self.agents,
            "runningRunIds": list(self.running),
            "atLeast": self.at_least,
        }

    def sentence(self, *, window: bool = True) -> str:
        """The blast radius as a confirmation says it: "served to 14 runs of 5 agents in the
        last 30 days; 3 still running." ("" for notes nobody read)."""
        if not self.runs:
            return ""
        said = (
            f"served to {'at least ' if self.at_least else ''}{self.runs:,} "
            f"run{'s' * (self.runs != 1)} of {self.agents} agent{'s' * (self.agents != 1)}"
            f"{' in the last 30 days' if window else ''}"
        )
        return f"{said}; {self.still_running} still running." if self.still_running else f"{said}."


def _counted(rows, *, at_least: bool, listed: bool = False) -> Reach:
    """A reach from reads as (run id, its agent, its status), each run counted once; `listed`:
    with the ids of the runs still running."""
    runs = {run_id: (agent_id, status) for run_id, agent_id, status in rows}
    running = sorted(r for r, (_agent, status) in runs.items() if status == RunStatus.RUNNING)
    return Reach(
        runs=len(runs),
        agents=len({agent_id for agent_id, _status in runs.values()}),
        still_running=len(running),
        running=tuple(running[:RUNNING_LISTED]) if listed else (),
        at_least=at_least,
    )


def note_reach(*, note_id: str, since: datetime | None = None) -> Reach:
    """The runs `note_id` was served to (since `since`, else all kept records; its newest
    REACH_SAMPLE reads), their agents, and which of them are still running. One query down the
    note's newest reads with their runs, stopping after REACH_SAMPLE: bounded however often the
    note is read (an IN or a join over the sample let PostgreSQL scan the whole table)."""
    key = Note.objects.filter(pk=note_id).values("read_key")[:1]  # looked up once, first
    newest = NoteRead.objects.filter(note_id=Subquery(key))
    if since is not None:
        newest = newest.filter(read_at__gte=since)
    rows = list(
        newest.order_by("-read_at").values_list("run__id", "run__agent_id", "run__status")[
            :REACH_SAMPLE
        ]
    )
    return _counted(rows, at_least=len(rows) >= REACH_SAMPLE, listed=True)


@dataclass(frozen=True)
class Readers:
    """The reads a blast radius counts: of each note, its reads in the last 30 days, the newest
    `sample` of them — as (note id, run id, the run's agent, the run's status)."""

    rows: list[tuple[str, str, str, str]]
    sample: int

    def run_ids(self) -> list[str]:
        return list(dict.fromkeys(run_id for _note, run_id, _agent, _status in self.rows))

    def by_note(self) -> dict[str, list[tuple[str, str, str]]]:
        """Each note's reads as (run id, its agent, its status)."""
        grouped: dict[str, list[tuple[str, str, str]]] = {}
        for note_id, *read in self.rows:
            grouped.setdefault(note_id, []).append(tuple(read))
        return grouped

    def reach(self) -> Reach:
        """The reach of all of them, each run counted once."""
        sampled = any(len(reads) >= self.sample for reads in self.by_note().values())
        return _counted([tuple(row[1:]) for row in self.rows], at_least=sampled)


def readers_of(
    note_ids: Iterable[str], *, now: datetime | None = None, sample: int | None = None
) -> Readers:
    """Of each of `note_ids`, its reads in the last 30 days (REACH_WINDOW), the newest `sample`
    (by default REACH_SAMPLE shared by the notes, at least ROW_SAMPLE each), with their runs.
    One query, bounded by the sample: on PostgreSQL a LATERAL walk down each note's index,
    newest first, stopping after `sample` (a plain IN, join or floor let the planner scan the
    whole table for popular notes); on SQLite the same rows numbered per note."""
    ids = list(dict.fromkeys(note_ids))
    sample = sample or max(ROW_SAMPLE, REACH_SAMPLE // max(1, len(ids)))
    if not ids:
        return Readers([], sample)
    since = (now or timezone.now()) - REACH_WINDOW
    db = connections[NoteRead.objects.db]
    reads, runs, notes = (m._meta.db_table for m in (NoteRead, Run, Note))
    since_value = NoteRead._meta.get_field("read_at").get_db_prep_value(since, db)
    if db.vendor == "postgresql":
        sql = (
            f"SELECT n.id, s.id, s.agent_id, s.status FROM {notes} n CROSS JOIN LATERAL ("
            f"SELECT run.id, run.agent_id, run.status FROM {reads} r "
            f"JOIN {runs} run ON run.read_key = r.run_key "
            f"WHERE r.note_key = n.read_key AND r.read_at >= %s "
            f"ORDER BY r.read_at DESC LIMIT %s) s WHERE n.id = ANY(%s::varchar[])"
        )
        params = [since_value, sample, ids]
    else:
        marks = ", ".join(["%s"] * len(ids))
        sql = (
            f"SELECT note_id, run_id, agent_id, status FROM ("
            f"SELECT n.id AS note_id, run.id AS run_id, run.agent_id, run.status, ROW_NUMBER() "
            f"OVER (PARTITION BY r.note_key ORDER BY r.read_at DESC) AS newest FROM {reads} r "
            f"JOIN {notes} n ON n.read_key = r.note_key "
            f"JOIN {runs} run ON run.read_key = r.run_key "
            f"WHERE n.id IN ({marks}) AND r.read_at >= %s) WHERE newest <= %s"
        )
        params = [*ids, since_value, sample]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return Readers([tuple(row) for row in cursor.fetchall()], sample)


def notes_reach(note_ids: Iterable[str], *, now: datetime | None = None) -> dict[str, Reach]:
    """Each note's readers in the last 30 days (REACH_WINDOW; its newest ROW_SAMPLE reads),
    counted — a page's rows show it before a veto. One query; notes nobody read are left out."""
    readers = readers_of(note_ids, now=now, sample=ROW_SAMPLE)
    return {
        note_id: _counted(reads, at_least=len(reads) >= ROW_SAMPLE)
        for note_id, reads in readers.by_note().items()
    }


def reach_of(note_ids: Iterable[str], *, now: datetime | None = None) -> Reach:
    """The readers of any of `note_ids` in the last 30 days, each run counted once: what a bulk
    veto, reject or forget of those notes would act on. One query."""
    return readers_of(note_ids, now=now).reach()
