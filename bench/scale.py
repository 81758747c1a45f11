"""Grow a PostgreSQL database to N notes of realistic shape, fast (issue "Fast at a million
notes"; `manage.py memory_load_scale`, `manage.py memory_bench_scale`).

Projects of 2,000 notes (the cap), each with applications, agents, runs, notes of every kind,
trust and status, tags and evidence, about three audit events and a tool-call trace row per
note, recoveries of its forgotten notes and a review routine per agent. Rows go in with
PostgreSQL's COPY (psycopg's `cursor.copy`); every column list and every default comes from the
models' own `_meta`, so the loader cannot drift from the schema. Idempotent on N: it counts the
notes already stored and loads only the projects still missing.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, models, transaction
from django.utils import timezone
from ulid import ULID

from memory_portal.memory import counters
from memory_portal.memory import models as m
from memory_portal.memory.audit_actions import AuditAction
from memory_portal.memory.run_records import SmallCode

PROJECT_SIZE = 2000
SLUG_PREFIX = "scale-"
AGENTS_PER_PROJECT = 10
NOTES_PER_RUN = 4
PROJECTS_PER_TRANSACTION = 5

_WORDS_TEXT = (
    "cache index migration token deploy schema worker queue retry timeout lock budget "
    "review trace recall search audit export import backup replica shard vacuum planner "
    "gunicorn nginx celery redis postgres sqlite django template widget parser lexer "
    "compiler linker release branch commit rebase tag version semver changelog fixture "
    "pytest coverage lint format mypy typing protocol adapter service selector view form "
    "payload header cookie session csrf cors tls cert rotate secret vault config env "
    "latency throughput memory leak profile flame graph span metric alert pager oncall"
)
WORDS = _WORDS_TEXT.split()
TAGS = ["infra", "db", "api", "ui", "ops", "security", "perf", "tests", "docs", "build"]
KINDS = [("fact", 55), ("lesson", 15), ("decision", 12), ("navigation", 10), ("day", 8)]
TRUSTS = [("learned", 60), ("reviewed", 35), ("rejected", 5)]
STATUSES = [("active", 85), ("archived", 10), ("forgotten", 5)]
STAGES = [s.value for s in m.Stage]


def _weighted(pairs):
    out = []
    for value, weight in pairs:
        out += [value] * weight
    return out


_KIND_POOL = _weighted(KINDS)
_TRUST_POOL = _weighted(TRUSTS)
_STATUS_POOL = _weighted(STATUSES)


class Table:
    """One model's COPY: the column list from `_meta` (an auto id left to its sequence) and a
    row builder that fills every field not given from the field's own default."""

    def __init__(self, model: type[models.Model]):
        meta = model._meta
        auto_pk = isinstance(meta.pk, models.AutoField)
        self.fields = [f for f in meta.concrete_fields if not (auto_pk and f is meta.pk)]
        qn = connection.ops.quote_name
        columns = ", ".join(qn(f.column) for f in self.fields)
        self.sql = f"COPY {qn(meta.db_table)} ({columns}) FROM STDIN"
        self.model = model
        self.rows: list[tuple] = []
        self._defaults = {}
        for f in self.fields:
            if f.has_default() and not callable(f.default):
                self._defaults[f.attname] = self._plain(f.default)
            elif f.null:
                self._defaults[f.attname] = None
            elif isinstance(f, models.JSONField):
                self._defaults[f.attname] = self._plain(f.get_default())
            elif f.get_internal_type() in ("CharField", "TextField", "SlugField"):
                self._defaults[f.attname] = ""

    @staticmethod
    def _plain(value):
        if isinstance(value, dict | list):
            return json.dumps(value)
        return value

    def add(self, **values) -> None:
        missing = object()
        row = []
        for f in self.fields:
            value = values.get(f.attname, missing)
            if value is missing:
                value = self._defaults.get(f.attname, missing)
                if value is missing and f.unique and callable(f.default):
                    value = f.default()  # a key (a note's or run's read key) made per row
                if value is missing:
                    raise ValueError(f"{self.model.__name__}.{f.attname} needs a value")
            elif isinstance(value, dict | list):
                value = json.dumps(value)
            elif isinstance(f, SmallCode):
                value = f.get_prep_value(value)
            row.append(value)
        self.rows.append(tuple(row))

    def flush(self, cursor) -> int:
        n = len(self.rows)
        if n:
            with cursor.copy(self.sql) as copy:
                for row in self.rows:
                    copy.write_row(row)
            self.rows.clear()
        return n


def _ulid_id(prefix: str, when) -> str:
    return f"{prefix}_{str(ULID.from_datetime(when)).lower()}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def scale_notes() -> int:
    return m.Note.objects.count()


def _next_index() -> int:
    last = (
        m.Project.objects.filter(slug__startswith=SLUG_PREFIX)
        .order_by("-slug")
        .values_list("slug", flat=True)
        .first()
    )
    return int(last.removeprefix(SLUG_PREFIX)) + 1 if last else 1


@dataclass
class LoadResult:
    before: int
    after: int
    projects: int
    seconds: float

    @property
    def loaded(self) -> int:
        return self.after - self.before

    @property
    def rate(self) -> float:
        return self.loaded / self.seconds if self.seconds else 0.0


def load_scale(*, notes: int, seed: int = 1, progress=None) -> LoadResult:
    """Grow the database to `notes` notes (all projects counted); load nothing when it holds
    that many already. PostgreSQL only."""
    if connection.vendor != "postgresql":
        raise RuntimeError("memory_load_scale needs PostgreSQL (set DATABASE_URL).")
    started = time.monotonic()
    before = scale_notes()
    missing = notes - before
    projects = 0
    index = _next_index()
    repo, _ = m.Repository.objects.get_or_create(
        slug="scale-repo", defaults={"path": "/srv/git/scale-repo.git"}
    )
    while missing > 0:
        batch = []
        while missing > 0 and len(batch) < PROJECTS_PER_TRANSACTION:
            size = min(PROJECT_SIZE, missing)
            batch.append((index, size))
            index += 1
            missing -= size
        with transaction.atomic():
            for i, size in batch:
                _load_project(i, size, repo, random.Random(seed * 1_000_003 + i))
        projects += len(batch)
        if progress:
            progress(before + (notes - before - max(missing, 0)), time.monotonic() - started)
    if projects:  # fresh statistics, so the planner sees the table as it now is
        with connection.cursor() as cursor:
            for model in (m.Note, m.AuditEvent, m.Run, m.ToolCallCount, m.Recovery, m.Agent):
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    return LoadResult(before, scale_notes(), projects, time.monotonic() - started)


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def _load_project(index: int, size: int, repo: m.Repository, rng: random.Random) -> None:
    now = timezone.now()
    born = now - timedelta(days=90)
    project = m.Project.objects.create(
        slug=f"{SLUG_PREFIX}{index:05d}", name=f"Scale project {index}", created_at=born
    )
    app = m.Application.objects.create(project=project, slug="app", name="App", created_at=born)
    m.RepositoryLink.objects.create(application=app, repository=repo, revision="a" * 40)
    agents = Table(m.Agent)
    runs = Table(m.Run)
    notes = Table(m.Note)
    audits = Table(m.AuditEvent)
    calls = Table(m.ToolCallCount)
    recoveries = Table(m.Recovery)
    routines = Table(m.ReviewRoutine)

    agent_ids = []
    agent_names = {}
    for a in range(AGENTS_PER_PROJECT):
        agent_id = _ulid_id("agt", born + timedelta(seconds=a))
        stage = STAGES[a % len(STAGES)]
        agent_ids.append((agent_id, stage))
        agent_names[agent_id] = f"{stage}-agent-{a}"
        agents.add(
            id=agent_id,
            project_id=project.id,
            application_id=app.id,
            name=f"{stage}-agent-{a}",
            stage=stage,
            created_at=born,
        )
        routines.add(
            agent_id=agent_id,
            paused=False,
            next_run_at=now + timedelta(days=1),
            created_at=born,
        )
    span = (now - born).total_seconds()
    n_runs = max(1, size // NOTES_PER_RUN)
    run_rows = []
    for r in range(n_runs):
        at = born + timedelta(seconds=span * (r + 0.5) / n_runs)
        run_id = _ulid_id("run", at)
        agent_id, stage = agent_ids[r % len(agent_ids)]
        run_rows.append((run_id, agent_id, stage, at))
        runs.add(
            id=run_id,
            agent_id=agent_id,
            project_id=project.id,
            application_id=app.id,
            parent_id=None,
            top_level_run_id=run_id,
            status="succeeded" if r % 17 else "failed",
            task_title=f"Task {r}: {_sentence(rng, 5)}",
            current_step="done",
            tool_calls=NOTES_PER_RUN * 2,
            started_at=at,
            finished_at=at + timedelta(minutes=5),
        )
        calls.add(
            run_id=run_id, tool="memory_write", outcome="ok", count=NOTES_PER_RUN, last_called_at=at
        )
        calls.add(
            run_id=run_id, tool="memory_read", outcome="ok", count=NOTES_PER_RUN, last_called_at=at
        )
        audits.add(
            project_id=project.id,
            project_ref=project.slug,
            actor_label=agent_names[agent_id],
            actor_agent_id=agent_id,
            actor_run_id=run_id,
            action=AuditAction.RUN_CREATE,
            target_ref=run_id,
            created_at=at,
        )
    days_used: set[tuple[str, object]] = set()
    states: list[counters.State] = []
    for n in range(size):
        run_id, agent_id, stage, at = run_rows[min(n // NOTES_PER_RUN, n_runs - 1)]
        at = at + timedelta(seconds=n % NOTES_PER_RUN)
        kind = rng.choice(_KIND_POOL)
        trust = rng.choice(_TRUST_POOL)
        status = rng.choice(_STATUS_POOL)
        if kind == "day":
            day = at.date()
            if (agent_id, day) in days_used:
                kind = "fact"
            else:
                days_used.add((agent_id, day))
        content = f"{_sentence(rng, rng.randint(8, 30))} (note {index}-{n})"
        tags = rng.sample(TAGS, rng.randint(0, 3))
        scope = "agent" if kind in ("day",) or n % 7 == 0 else "project"
        note_id = _ulid_id("mem", at)
        if kind == "day":
            place_key = _sha(f"day|{agent_id}|{at.date().isoformat()}")
        else:
            place_key = _sha(f"{kind}|{scope}|{index}|{n}|{content}")
        archived = status == "archived"
        vetoed = archived and n % 3 == 0
        states.append((status, trust, kind == "day"))
        notes.add(
            id=note_id,
            project_id=project.id,
            application_id=None,
            scope=scope,
            owner_agent_id=agent_id if scope == "agent" else None,
            kind=kind,
            target="daily" if kind == "day" else "long_term",
            day=at.date() if kind == "day" else None,
            content=content,
            summary=_sentence(rng, 6) if n % 2 else "",
            tags_text=("|" + "|".join(tags) + "|") if tags else "",
            trust=trust,
            status=status,
            archive_reason=(m.REASON_VETOED if vetoed else "outdated") if archived else "",
            archived_at=at + timedelta(hours=1) if archived else None,
            expires_at=at + timedelta(days=200) if n % 11 == 0 else None,
            created_by_agent_id=agent_id,
            created_by_stage=stage,
            origin_run_id=run_id,
            origin_run_ref=run_id,
            top_level_run_id=run_id,
            step="implement",
            evidence_repository_id=repo.id if n % 4 == 0 else None,
            evidence_path=f"src/module_{n % 50}.py" if n % 4 == 0 else "",
            evidence_commit=("a" * 40) if n % 4 == 0 else "",
            evidence_quote=_sentence(rng, 6) if n % 4 == 0 else "",
            recall_count=n % 5,
            place_key=place_key,
            content_key=_sha(content),
            created_at=at,
            updated_at=at,
        )
        base = {
            "project_id": project.id,
            "project_ref": project.slug,
            "actor_label": agent_names[agent_id],
            "actor_agent_id": agent_id,
            "actor_run_id": run_id,
            "note_ref": note_id,
        }
        audits.add(**base, action=AuditAction.NOTE_WRITE, created_at=at)
        second = AuditAction.NOTE_APPROVE if trust == "reviewed" else AuditAction.NOTE_EDIT
        audits.add(**base, action=second, created_at=at + timedelta(minutes=30))
        if status == "forgotten":
            recoveries.add(
                id=_ulid_id("rec", at + timedelta(hours=2)),
                project_id=project.id,
                note_id=note_id,
                previous_status="active",
                forgotten_by_agent_id=agent_id,
                forgotten_by_run_id=run_id,
                forgotten_by_top_level_run_id=run_id,
                created_at=at + timedelta(hours=2),
            )
            third = AuditAction.NOTE_FORGET
        elif archived:
            third = AuditAction.NOTE_VETO if vetoed else AuditAction.NOTE_ARCHIVE
        else:
            third = AuditAction.NOTE_REVERIFY if n % 4 == 0 else AuditAction.NOTE_EDIT
        audits.add(**base, action=third, created_at=at + timedelta(hours=2))
    m.MemorySetting.objects.create(
        project=project,
        enabled=True,
        revision=size,
        changed_at=born,
        last_write_at=now,
        **counters.tally(states),  # the stored counters of the notes copied below
    )
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor, for COPY
        for table in (agents, routines, runs, calls, notes, recoveries, audits):
            table.flush(raw)
