"""The parts of `memory_bench_writes` (commands/memory_bench_writes.py) that are not the
command itself: its scenarios and measurements, a writer thread's share of one, the bare write
protocol in raw SQL (the floor the service is measured against), a memory_write request over
HTTP, and the thread runner."""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.ids import new_note_id, new_read_key
from memory_portal.memory.models import Agent, Project, Run
from memory_portal.memory.validation import AGENT_FACT_PLACE, content_identity, content_key

WRITES_PER_RUN = 100  # below the default per-run quota of 128: each thread switches runs

RAW_LOCK = (
    "SELECT id, enabled, revocation_epoch, revision FROM project_memory_setting"
    " WHERE project_id = %s FOR UPDATE"
)
RAW_COUNT = "SELECT count(*) FROM project_memory_entry WHERE project_id = %s"
RAW_INSERT = (
    "INSERT INTO project_memory_entry (id, project_id, scope, kind, target, content, summary,"
    " tags_text, trust, status, archive_reason, created_by_agent_id, created_by_stage,"
    " origin_run_id, origin_run_ref, top_level_run_id, step, task_key, evidence_path,"
    " evidence_commit, evidence_quote, recall_count, place_key, content_key, created_at,"
    " updated_at, read_key)"
    " VALUES (%s, %s, 'project', 'fact', 'long_term', %s, '', '', 'learned', 'active', '',"
    " %s, %s, %s, %s, %s, '', %s, '', '', '', 0, %s, %s, %s, %s, %s)"
)
RAW_BUMP = (
    "UPDATE project_memory_setting SET revision = revision + 1, last_write_at = %s"
    " WHERE project_id = %s"
)

# The service's other statements (as of this writing), for the "raw 8" path.
RAW8_READ = "SELECT id, enabled, revocation_epoch FROM project_memory_setting WHERE project_id = %s"
RAW8_IDENTITY = (
    "SELECT id, status, trust, archive_reason FROM project_memory_entry"
    " WHERE project_id = %s AND (place_key = %s OR content_key = %s)"
)
RAW8_RUN_COUNT = (
    "SELECT count(*) FROM project_memory_entry WHERE project_id = %s AND top_level_run_id = %s"
)
RAW8_AUDIT = (
    "INSERT INTO memory_auditevent (project_id, project_ref, actor_label, actor_agent_id,"
    " actor_run_id, action, note_ref, recovery_ref, target_ref, details, created_at)"
    " VALUES (%s, %s, %s, %s, %s, 'note.write', %s, '', '', %s, %s)"
)
# The place of a project's fact (the raw writes' identity key): an agent's fact's, no owner.
PROJECT_FACT_PLACE = {**AGENT_FACT_PLACE, "scope": "project", "owner_agent_id": None}
AUDIT_DETAILS = json.dumps({"kind": "fact", "scope": "project", "target": "long_term"})


@dataclass(frozen=True)
class Scenario:
    key: str
    label: str
    threads: int
    projects: int


SCENARIOS = (
    Scenario("s1", "1 writer, 1 project", threads=1, projects=1),
    Scenario("s2", "8 writers, 1 project", threads=8, projects=1),
    Scenario("s3", "8 writers, 8 projects", threads=8, projects=8),
)
# memory_write over HTTP, each next to the raw-SQL floor at the same concurrency.
HTTP_SCENARIOS = (
    Scenario("h1", "1 client, 1 project", threads=1, projects=1),
    Scenario("h8", "8 clients, 8 projects", threads=8, projects=8),
)
HTTP_WARMUP = 3  # writes per client before the clock starts (the workers' first requests)


@dataclass
class Measurement:
    writes: int
    seconds: float
    cpu: float  # this process's CPU seconds (every thread) while the writers ran

    @property
    def cpu_ms(self) -> float:
        """Client-side CPU per write: steadier than wall time on a busy machine."""
        return self.cpu * 1000 / self.writes if self.writes else 0.0

    @property
    def rate(self) -> float:
        return self.writes / self.seconds if self.seconds > 0 else 0.0


@dataclass
class HttpMeasurement(Measurement):
    server_cpu: float = 0.0  # the gunicorn workers' CPU seconds while the clients ran
    latencies: list[float] = field(default_factory=list)

    @property
    def server_cpu_ms(self) -> float:
        return self.server_cpu * 1000 / self.writes if self.writes else 0.0

    @property
    def p50_ms(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[len(ordered) // 2] * 1000 if ordered else 0.0


@dataclass
class Writer:
    """One thread's share of a measurement: its project, its agent and its runs (a fresh run
    every WRITES_PER_RUN writes, so the per-run quota never refuses a benchmark write)."""

    index: int
    project: Project
    agent: Agent
    writes: int | None  # None: write until the deadline (--seconds)
    runs: list[Run] = field(default_factory=list)

    def run_for(self, n: int) -> Run:
        slot = n // WRITES_PER_RUN
        while len(self.runs) <= slot:  # only in --seconds mode; fixed mode pre-creates them
            self.runs.append(new_run(self.agent))
        return self.runs[slot]


def new_run(agent: Agent) -> Run:
    run = services.run_create(actor=None, agent=agent, task_key="bench")
    # Loaded the way the API's token lookup loads it, so note_write sees the same objects.
    return Run.objects.select_related("agent", "project", "application").get(pk=run.pk)


def raw_writer(
    writer: Writer, content_of: Callable[[int], str], *, full: bool = False
) -> Callable[[int], None]:
    """The protocol by hand, writing `content_of(n)` as the n-th note. `full` adds the
    service's other statements: the read before the lock, the identity lookup, the per-run
    count and the audit row."""
    pg = connection.connection  # this thread's psycopg connection (autocommit)
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    quota = settings.MEMORY_PORTAL["RUN_NOTE_QUOTA"]
    project_id = writer.project.pk
    project_slug = writer.project.slug
    agent = writer.agent

    def write(n: int) -> None:
        run = writer.run_for(n)
        content = content_of(n)
        digest = content_identity(**PROJECT_FACT_PLACE, content=content)
        key = content_key(content)
        note_id = new_note_id()
        now = timezone.now()
        with pg.cursor() as cur:
            if full:
                cur.execute(RAW8_READ, [project_id])
                epoch = cur.fetchone()[2]
            cur.execute("BEGIN")
            try:
                cur.execute(RAW_LOCK, [project_id])
                _id, enabled, locked_epoch, _revision = cur.fetchone()
                if not enabled or (full and locked_epoch != epoch):
                    raise CommandError("raw write refused: memory off or revoked")
                if full:
                    cur.execute(RAW8_IDENTITY, [project_id, digest, key])
                    if cur.fetchall():
                        raise CommandError("raw write refused: identical note exists")
                cur.execute(RAW_COUNT, [project_id])
                if cur.fetchone()[0] >= cap:
                    raise CommandError("raw write refused: project full")
                if full:
                    cur.execute(RAW8_RUN_COUNT, [project_id, run.top_level_run_id])
                    if cur.fetchone()[0] >= quota:
                        raise CommandError("raw write refused: run quota")
                cur.execute(
                    RAW_INSERT,
                    [
                        note_id,
                        project_id,
                        content,
                        agent.pk,
                        agent.stage,
                        run.pk,
                        run.pk,
                        run.top_level_run_id,
                        run.task_key,
                        digest,
                        key,
                        now,
                        now,
                        new_read_key(),
                    ],
                )
                cur.execute(RAW_BUMP, [now, project_id])
                if full:
                    cur.execute(
                        RAW8_AUDIT,
                        [
                            project_id,
                            project_slug,
                            agent.name,
                            agent.pk,
                            run.pk,
                            note_id,
                            AUDIT_DETAILS,
                            now,
                        ],
                    )
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    return write


def post_write(conn: http.client.HTTPConnection, token: str, content: str) -> None:
    conn.request(
        "POST",
        "/api/tools/memory_write",
        json.dumps({"kind": "fact", "content": content}),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    body = response.read()
    if response.status != 200 or not json.loads(body).get("created"):
        raise CommandError(f"memory_write answered {response.status}: {body[:200]!r}")


def run_all(threads: list[threading.Thread], errors: list[BaseException], what: str) -> None:
    """Start the writer threads, wait for them, and fail with the first real error any of
    them reported (the others then only saw the barrier break)."""
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise CommandError(f"{what} failed: {(real or errors)[0]!r}")


def share_of(total: int, parts: int, index: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
