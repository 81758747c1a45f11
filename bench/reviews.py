"""The parts of `memory_bench_reviews` (commands/memory_bench_reviews.py) that are not the
command itself: the agents it reviews (loaded with COPY through the scale loader's `Table`),
the checks after a run, the `db_worker` processes of the fan-out, and CPU read from /proc."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection, transaction
from django_tasks_db.models import DBTaskResult

from bench.recall_eval import load_dataset
from bench.scale import Table
from bench.server import database_url
from bench.util import unsaved_fact
from memory_portal.memory import counters
from memory_portal.memory.ids import new_agent_id, new_read_key, new_run_id
from memory_portal.memory.models import (
    Agent,
    Application,
    AuditEvent,
    Kind,
    MemorySetting,
    Note,
    NoteRead,
    Project,
    ReadTool,
    ReviewRoutine,
    ReviewRun,
    Run,
    RunStatus,
    Stage,
    Target,
)
from memory_portal.memory.services.notes import agent_note
from memory_portal.memory.services.routines import run_review_routine
from memory_portal.memory.services.vectors import embed_texts
from memory_portal.memory.validation import FACT_MAX, day_row_identity

SLUG_PREFIX = "bench-reviews-"
AGENTS_PER_PROJECT = 10
PROJECTS_PER_TRANSACTION = 50
# The mix of agents, by index: every 4th has a merge, a renewal and an expiry planned; every
# 4th (another) a day log of yesterday with a `fact:` line to lift; every 4th a day log with
# nothing to lift; the rest only facts. One in 20 has two facts of the same meaning (one stored
# vector, different words): a near-duplicate pair, reported and never merged.
CHANGES, LIFT, DAY_ONLY = 0, 1, 2
KINDS = {
    CHANGES: "a merge, a renewal, an expiry",
    LIFT: "a day log, one line lifted",
    DAY_ONLY: "a day log, nothing to lift",
    3: "nothing to change",
}
NEAR_DUPLICATE_EVERY = 20


def pool() -> tuple[list[tuple[str, bytes | None]], str]:
    """The labelled recall set's facts (memory_bench_recall's dataset) with their real stored
    vectors, embedded once: every agent's facts are these, with words of their own."""
    texts = [f["text"] for f in load_dataset(None)["FACTS"]]
    blobs, model = embed_texts(texts)
    return list(zip(texts, blobs, strict=True)), model


@dataclass
class World:
    """One run's agents: fresh projects of 10 agents, each routine due at `now`."""

    prefix: str
    now: datetime
    project_ids: list[int] = field(default_factory=list)
    routine_ids: list[int] = field(default_factory=list)
    kinds: dict[int, str] = field(default_factory=dict)  # routine id: its agent's KINDS entry
    # What the reviews must do, summed over the agents (near_duplicates: at least).
    expected: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("merged", "renewed", "expired", "lifted", "near_duplicates"), 0
        )
    )
    notes: int = 0
    seconds: float = 0.0

    @property
    def agents(self) -> int:
        return len(self.routine_ids)


def build_world(prefix: str, agents: int, facts: int, now: datetime, vectors, model: str) -> World:
    """`agents` agents in projects of AGENTS_PER_PROJECT, each with `facts` live facts (stored
    vectors from `vectors`), the mix of work above, memory on, and its routine due one minute
    before `now`; the projects' counters computed as the rows are made."""
    started = time.monotonic()
    world = World(prefix=prefix, now=now)
    n_projects = math.ceil(agents / AGENTS_PER_PROJECT)
    for first in range(0, n_projects, PROJECTS_PER_TRANSACTION):
        last = min(n_projects, first + PROJECTS_PER_TRANSACTION)
        with transaction.atomic():
            _load_projects(world, range(first, last), agents, facts, vectors, model)
    names = dict(
        ReviewRoutine.objects.filter(agent__project_id__in=world.project_ids).values_list(
            "pk", "agent__name"
        )
    )
    world.routine_ids = sorted(names)
    world.kinds = {pk: KINDS[int(name.rsplit("-", 1)[1]) % 4] for pk, name in names.items()}
    with connection.cursor() as cursor:  # the planner sees the tables as they now are
        for model_ in (Note, Agent, ReviewRoutine, ReviewRun):
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model_._meta.db_table)}")
    world.seconds = time.monotonic() - started
    return world


def _load_projects(world: World, indexes, agents, facts, vectors, model) -> None:
    now = world.now
    born = now - timedelta(days=60)
    yesterday = (now - timedelta(days=1)).date()
    projects = Project.objects.bulk_create(
        [
            Project(slug=f"{world.prefix}{i:05d}", name=f"Review bench {i}", created_at=born)
            for i in indexes
        ]
    )
    apps = Application.objects.bulk_create(
        [Application(project=p, slug="app", name="App", created_at=born) for p in projects]
    )
    agent_rows, routine_rows, note_rows = Table(Agent), Table(ReviewRoutine), Table(Note)
    # A note "recalled" lately was served to a run of its agent then: its read record is what
    # the review's 30-day rule reads.
    run_rows, read_rows = Table(Run), Table(NoteRead)
    settings_rows = []
    for i, project, app in zip(indexes, projects, apps, strict=True):
        states = []
        for a in range(i * AGENTS_PER_PROJECT, min(agents, (i + 1) * AGENTS_PER_PROJECT)):
            agent = Agent(
                id=new_agent_id(),
                project=project,
                application=app,
                name=f"review-bench-{a}",
                stage=Stage.RUNTIME,
                created_at=born,
            )
            agent_rows.add(**_values(agent, agent_rows))
            routine_rows.add(
                agent_id=agent.pk, next_run_at=now - timedelta(minutes=1), created_at=born
            )
            notes = _agent_notes(world, agent, a, facts, vectors, model, yesterday)
            for note in notes:
                note_rows.add(**_values(note, note_rows))
                states.append(counters.state_of(note))
            served = [note for note in notes if note.last_recalled_at]
            if served:
                run_id, run_key = new_run_id(), new_read_key()
                run_rows.add(
                    id=run_id,
                    read_key=run_key,
                    agent_id=agent.pk,
                    project_id=project.pk,
                    top_level_run_id=run_id,
                    status=RunStatus.SUCCEEDED,
                    started_at=born,
                )
                for note in served:
                    read_rows.add(
                        note_id=note.read_key,
                        run_id=run_key,
                        tool=ReadTool.RECALL,
                        rank=1,
                        score=None,
                        trust=note.trust,
                        read_at=note.last_recalled_at,
                    )
        world.notes += len(states)
        settings_rows.append(
            MemorySetting(
                project=project,
                enabled=True,
                revision=len(states),
                changed_at=born,
                last_write_at=born,
                **counters.tally(states),
            )
        )
    MemorySetting.objects.bulk_create(settings_rows)
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor, for COPY
        for table in (agent_rows, routine_rows, note_rows, run_rows, read_rows):
            table.flush(raw)
    world.project_ids += [p.pk for p in projects]


def _values(instance, table: Table) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in table.fields}


def _agent_notes(world: World, agent: Agent, a: int, facts: int, vectors, model, yesterday):
    """One agent's facts (and day log): what its review will find."""
    now = world.now
    kind = a % 4
    notes = []
    for j in range(facts):
        base, blob = vectors[(a * 7 + j) % len(vectors)]
        text = f"{base.rstrip('.')[: FACT_MAX - 40]} (agent {a}, fact {j})"
        older = j % 2 == 0  # not recalled for 40 days: flagged for the review queue
        created = now - timedelta(days=40 if older else 5, minutes=-j)
        expires, recalled = None, None if older else now - timedelta(days=1)
        if kind == CHANGES and j < 4:
            if j == 0:  # the duplicate of fact 1, spelled differently: merged into it
                base, blob = vectors[(a * 7 + 1) % len(vectors)]
                text = f"{base.rstrip('.')[: FACT_MAX - 40]} (agent {a}, fact 1)."
                world.expected["merged"] += facts > 1
            elif j == 2:  # expired, recalled two days ago: renewed
                expires, recalled = now - timedelta(days=1), now - timedelta(days=2)
                world.expected["renewed"] += 1
            elif j == 3:  # expired, not recalled: archived
                expires, recalled = now - timedelta(days=1), None
                world.expected["expired"] += 1
        if a % NEAR_DUPLICATE_EVERY == 3 and j == facts - 1 and facts > 1:
            blob = notes[0].embedding  # the same meaning in other words
            world.expected["near_duplicates"] += blob is not None
        note = unsaved_fact(agent, text, at=created, expires_at=expires)
        note.last_recalled_at = recalled
        note.embedding, note.embedding_model = blob, model if blob is not None else ""
        notes.append(note)
    if kind in (LIFT, DAY_ONLY):
        lines = [f"09:{m:02d} BENCH-{a} checked the deploy of service {m}" for m in range(3)]
        if kind == LIFT:
            lines.append(
                f"09:30 BENCH-{a} fact: the cache warm-up of agent {a} finishes after the "
                "nightly export"
            )
            world.expected["lifted"] += 1
        at = datetime.combine(yesterday, datetime.min.time(), tzinfo=now.tzinfo)
        row = agent_note(
            agent,
            Kind.DAY,
            "\n".join(lines),
            project=agent.project,
            target=Target.DAILY,
            day=yesterday,
            place_key=day_row_identity(owner_agent_id=agent.pk, day=yesterday),
            created_at=at,
            updated_at=at,
        )
        row.created_by_agent_id, row.created_by_stage = agent.pk, agent.stage
        notes.append(row)
    return notes


# --- After a run ------------------------------------------------------------------------------


def done_count(world: World) -> int:
    """Reviews of the world's day that are recorded finished. Asked every POLL seconds while
    the workers run, so it is kept cheap: the routines' id range when their ids are
    consecutive (they are, made by one COPY each), not a list of 10,000."""
    ids = world.routine_ids
    if ids[-1] - ids[0] + 1 == len(ids):
        reviews = ReviewRun.objects.filter(routine_id__gte=ids[0], routine_id__lte=ids[-1])
    else:
        reviews = ReviewRun.objects.filter(routine_id__in=ids)
    return reviews.filter(day=world.now.date()).exclude(status=RunStatus.RUNNING).count()


def check(world: World) -> str:
    """Fail unless every routine has exactly one scheduled review of the day, succeeded; the
    reviews did the planned work; and every project's stored counters match a fresh count.
    Returns the line saying so."""
    day = world.now.date()
    reviews = list(
        ReviewRun.objects.filter(routine_id__in=world.routine_ids, day=day).values_list(
            "routine_id", "trigger", "status", "error_code", "counts"
        )
    )
    per_routine = {}
    for routine_id, *_ in reviews:
        per_routine[routine_id] = per_routine.get(routine_id, 0) + 1
    if sorted(per_routine) != world.routine_ids or set(per_routine.values()) != {1}:
        raise CommandError(
            f"expected one review per routine ({world.agents}), found {len(reviews)} for "
            f"{len(per_routine)} routines"
        )
    failed = [(s, e) for _, t, s, e, _ in reviews if t != "schedule" or s != RunStatus.SUCCEEDED]
    if failed:
        raise CommandError(f"{len(failed)} reviews did not succeed, e.g. {failed[:3]}")
    done = dict.fromkeys(world.expected, 0)
    for *_, counts in reviews:
        for key in done:
            done[key] += counts.get(key, 0)
    wrong = [
        f"{key} {done[key]} (planned {want})"
        for key, want in world.expected.items()
        if (done[key] < want if key == "near_duplicates" else done[key] != want)
    ]
    if wrong:
        raise CommandError(f"the reviews did not do the planned work: {', '.join(wrong)}")
    mismatched = counters_mismatched(world.project_ids)
    if mismatched:
        raise CommandError(f"stored counters differ from a fresh count in projects {mismatched}")
    return (
        f"checks: {len(reviews)} reviews, one per routine, all succeeded; merged {done['merged']}, "
        f"renewed {done['renewed']}, expired {done['expired']}, lifted {done['lifted']} as "
        f"planned; near-duplicates {done['near_duplicates']}; counters of "
        f"{len(world.project_ids)} projects match a fresh count"
    )


def counters_mismatched(project_ids: list[int]) -> list[int]:
    """The projects whose stored counters differ from a fresh count of their notes (one grouped
    query for all, the same sums as counters.recounted)."""
    fresh = counters.recounted_many(project_ids)
    stored = MemorySetting.objects.filter(project_id__in=project_ids).values(
        "project_id", *counters.FIELDS
    )
    return sorted(
        s["project_id"]
        for s in stored
        if {f: s[f] for f in counters.FIELDS} != fresh[s["project_id"]]
    )


def task_results(since: datetime) -> tuple[int, list[str]]:
    """The review tasks queued since `since`, and the tracebacks of any task that failed (a
    lifted fact's vector is a task of its own too, queued by its write)."""
    results = DBTaskResult.objects.filter(enqueued_at__gte=since)
    reviews = results.filter(task_path=f"{run_review_routine.module_path}")
    bad = results.filter(status="FAILED").values_list("task_path", "traceback")
    unfinished = reviews.exclude(status="SUCCESSFUL").values_list("status", "traceback")
    return reviews.count(), [f"{s}: {(t or '')[-300:]}" for s, t in [*bad, *unfinished]]


def delete_world(world: World, since: datetime | None = None) -> None:
    """Delete what the run made: its projects (with their agents, runs, notes, routines and
    reviews), their audit events, and the queue rows of its tasks."""
    with transaction.atomic():
        AuditEvent.objects.filter(project_id__in=world.project_ids).delete()
        notes = Note.objects.filter(project_id__in=world.project_ids)
        notes.exclude(superseded_by=None).update(superseded_by=None)
        Project.objects.filter(pk__in=world.project_ids).delete()
        if since is not None:
            DBTaskResult.objects.filter(enqueued_at__gte=since).delete()


# --- CPU from /proc ---------------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc); NaN when it cannot be read (a
    database on another host)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backend_cpu(exclude: int | None = None) -> dict[int, float]:
    """CPU seconds so far of every client backend of this database, by pid."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend'"
        )
        pids = [pid for (pid,) in cursor.fetchall() if pid != exclude]
    return {pid: proc_cpu(pid) for pid in pids}


def my_backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


# --- The workers --------------------------------------------------------------------------------


class Workers:
    """M `db_worker` processes on this database with MEMORY_PORTAL_TASKS=database, started and
    ready (each has logged "Starting worker") before the clock starts. Each runs what
    `manage.py db_worker` runs, through benchworker.py, which counts its statements."""

    def __init__(self, count: int, logs: Path, tag: str):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "memory_portal.settings",
            "DATABASE_URL": database_url(),
            "MEMORY_PORTAL_TASKS": "database",
            "DEBUG": "false",
            # One database connection per worker for the whole run (the default recycles it
            # every 60 s), so its backend's CPU can be read at the end; a reconnection a
            # minute, a few milliseconds, is all this leaves out.
            "DB_CONN_MAX_AGE": "3600",
        }
        self.logs = [logs / f"worker-{tag}-{i}.log" for i in range(count)]
        self.counts = [logs / f"worker-{tag}-{i}.json" for i in range(count)]
        self.procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.worker",
                    str(counted),
                    "db_worker",
                    "--no-reload",
                    "--no-startup-delay",
                    f"--worker-id=bench-{tag}-{i}",
                ],
                cwd=settings.BASE_DIR,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log.open("w"),
            )
            for i, (log, counted) in enumerate(zip(self.logs, self.counts, strict=True))
        ]

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not all("Starting worker" in log.read_text() for log in self.logs):
            self.check_alive()
            if time.monotonic() > deadline:
                raise CommandError(f"the workers did not start within {timeout:g} s")
            time.sleep(0.1)

    def check_alive(self) -> None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text()[-800:]
                raise CommandError(f"a db_worker exited ({proc.returncode}): {tail}")

    def cpu(self) -> float:
        return sum(proc_cpu(p.pid) for p in self.procs)

    def tracebacks(self) -> list[str]:
        return [log.read_text()[-800:] for log in self.logs if "Traceback" in log.read_text()]

    def statements(self) -> dict[str, int]:
        """The workers' statements, summed (benchworker.py), once they have stopped."""
        total = {"all": 0, "in_tasks": 0, "tasks": 0}
        for path in self.counts:
            for key, n in json.loads(path.read_text()).items():
                total[key] += n
        return total

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
