"""`memory_bench_reviews --agents N [--facts 20] [--workers 1 2 3] [--keep]`: the daily review
at scale (issue "Fast at a million notes": ≤ 20 statements and ≤ 20 ms per agent; 10,000
agents due at once done within one cron interval, five minutes).

Each run gets fresh agents (projects `bench-reviews-<tag>-<run>-…` of 10 agents, loaded with
COPY: `--facts` live facts each with real stored vectors — the labelled recall set's, embedded
once — yesterday's day log for half of them, a merge, a renewal and an expiry for a quarter, a
line to lift for another quarter, near-duplicates for one in 20), every routine due at the
same moment. Then the cron call, `routines_run_due(now=…)`:

* in-process, with the immediate task backend: every review runs in this process; wall time,
  this process's CPU, its database backend's CPU, and the statements sent (counted with a
  connection execute_wrapper);
* fanned out, once per `--workers M`: with the database task backend the cron call only queues
  the reviews and M `manage.py db_worker` processes (MEMORY_PORTAL_TASKS=database, this
  database), started before the clock, run them; timed from the cron call until every review
  is recorded finished, with the workers' CPU and their database backends', and the statements
  of the cron call and of the workers (each runs `db_worker` through benchworker.py, which counts
  them).

After every run it checks that each routine has exactly one review of the day, succeeded, that
the reviews did the planned work, and that the projects' stored counters match a fresh count.
The projects go after each run unless --keep. PostgreSQL only. docs/PERFORMANCE.md, "The daily
review of 10,000 agents", has the figures.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.tasks.signals import task_finished, task_started
from django.test.utils import override_settings
from django.utils import timezone

from bench.reviews import (
    KINDS,
    SLUG_PREFIX,
    Workers,
    World,
    backend_cpu,
    build_world,
    check,
    delete_world,
    done_count,
    my_backend,
    pool,
    proc_cpu,
    task_results,
)
from bench.writes import cpu_count
from memory_portal.memory.models import ReviewRoutine
from memory_portal.memory.services import tasks_run_in_process
from memory_portal.memory.services.routines import routines_run_due

IMMEDIATE = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
CRON_INTERVAL = 300.0  # seconds: the cron line of the README, every five minutes
TARGET_AGENTS = 10_000
POLL = 0.5  # seconds between looks at the review rows while the workers run


class Statements:
    """A connection execute_wrapper that counts what is sent."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)


@dataclass
class Result:
    mode: str
    agents: int
    seconds: float
    cron_seconds: float
    statements: int | None
    cpu: float  # this process (in-process) or the workers and this process (fan-out)
    db_cpu: float  # the database backends doing the work
    checks: str

    def per_agent(self, value: float) -> float:
        return value * 1000 / self.agents


class Command(BaseCommand):
    help = "Benchmark the daily review of N agents due at once, in-process and with M workers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agents", type=int, required=True, help="Agents due at once.")
        parser.add_argument("--facts", type=int, default=20, help="Live facts per agent (20).")
        parser.add_argument(
            "--workers",
            type=int,
            nargs="*",
            default=[1, 2, 3],
            help="Worker counts of the fan-out runs (default 1 2 3; none: in-process only).",
        )
        parser.add_argument("--no-in-process", action="store_true", help="Skip the in-process run.")
        parser.add_argument("--keep", action="store_true", help="Keep the benchmark projects.")

    def handle(self, *args, agents, facts, workers, no_in_process, keep, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError(
                "memory_bench_reviews needs PostgreSQL (the workers share the database); set "
                "DATABASE_URL=postgres://user@host:5432/name and run it again."
            )
        if agents < 1 or facts < 1 or any(m < 1 for m in workers):
            raise CommandError("--agents, --facts and every --workers must be at least 1.")
        self.agents, self.facts, self.keep = agents, facts, keep
        self.by_kind: dict[str, list[tuple[int, float, float]]] = {}
        self.worker_statements: dict[int, tuple[int, dict[str, int]]] = {}
        self.tag = uuid.uuid4().hex[:6]
        # One moment for every run, due for every agent of the run (and for nobody else).
        self.now = timezone.now().astimezone(UTC).replace(microsecond=0)
        self._header()
        started = time.monotonic()
        self.vectors, self.model = pool()
        self.stdout.write(
            f"Embedded the {len(self.vectors)} facts of the labelled recall set once "
            f"({time.monotonic() - started:.1f} s, {self.model or 'no embeddings'})."
        )
        results = []
        with override_settings(DEBUG=False), tempfile.TemporaryDirectory() as logs:
            if not no_in_process:
                results.append(self._run("in", self._in_process))
            for m in workers:
                results.append(
                    self._run(f"w{m}", lambda world, m=m: self._fan_out(world, m, Path(logs)))
                )
        self._report(results)

    def _header(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = cursor.fetchone()[0]
        loadavg = Path("/proc/loadavg")
        load = loadavg.read_text().split()[:3] if loadavg.exists() else []
        self.stdout.write(
            f"Daily review benchmark: {self.agents:,} agents due at once, {self.facts} live facts "
            f"each, PostgreSQL {version} (database {connection.settings_dict['NAME']}), "
            f"{cpu_count()} CPU(s), load average {' '.join(load) or 'unknown'}."
        )

    # --- One run ------------------------------------------------------------------------------

    def _run(self, name: str, measure) -> Result:
        prefix = f"{SLUG_PREFIX}{self.tag}-{name}-"
        others = ReviewRoutine.objects.filter(
            paused=False, deleted_at__isnull=True, next_run_at__lte=self.now
        )
        if others.exists():
            raise CommandError(
                f"{others.count()} routine(s) outside the benchmark are due now; the cron call "
                "would run them too. Use a database of its own."
            )
        world = build_world(prefix, self.agents, self.facts, self.now, self.vectors, self.model)
        self.stdout.write(
            f"[{name}] loaded {world.agents:,} agents in {len(world.project_ids):,} projects, "
            f"{world.notes:,} notes, in {world.seconds:.1f} s"
        )
        since = timezone.now()
        try:
            result = measure(world)
            result.checks = check(world)
            self.stdout.write(f"[{name}] {result.checks}")
        finally:
            if self.keep:
                self.stdout.write(f"[{name}] kept the projects {prefix}*")
            else:
                cleanup = time.monotonic()
                delete_world(world, since)
                self.stdout.write(f"[{name}] deleted them ({time.monotonic() - cleanup:.1f} s)")
        return result

    def _in_process(self, world: World) -> Result:
        counted = Statements()
        marks: dict[str, tuple[int, float, float]] = {}
        reviews: dict[int, tuple[int, float, float]] = {}  # routine: statements, ms, CPU ms

        def started(sender, task_result, **kwargs) -> None:
            marks[task_result.id] = (counted.n, time.perf_counter(), time.process_time())

        def finished(sender, task_result, **kwargs) -> None:
            n, t, c = marks.pop(task_result.id)
            reviews[task_result.kwargs["routine_id"]] = (
                counted.n - n,
                (time.perf_counter() - t) * 1000,
                (time.process_time() - c) * 1000,
            )

        task_started.connect(started)
        task_finished.connect(finished)
        try:
            with override_settings(TASKS=IMMEDIATE):
                assert tasks_run_in_process()
                backend = my_backend()
                db0, cpu0, t0 = proc_cpu(backend), time.process_time(), time.perf_counter()
                with connection.execute_wrapper(counted):
                    due = routines_run_due(now=self.now)
                seconds = time.perf_counter() - t0
                cpu, db_cpu = time.process_time() - cpu0, proc_cpu(backend) - db0
        finally:
            task_started.disconnect(started)
            task_finished.disconnect(finished)
        if sorted(due) != world.routine_ids or sorted(reviews) != world.routine_ids:
            raise CommandError(f"the cron call ran {len(due)} routines, not {world.agents}")
        self.by_kind = {}
        for routine_id, figures in reviews.items():
            self.by_kind.setdefault(world.kinds[routine_id], []).append(figures)
        return Result("in-process", world.agents, seconds, seconds, counted.n, cpu, db_cpu, "")

    def _fan_out(self, world: World, m: int, logs: Path) -> Result:
        workers = Workers(m, logs, f"{self.tag}-{m}")
        try:
            workers.wait_ready()
            mine = my_backend()
            backends0 = backend_cpu(exclude=mine)
            since = timezone.now()
            wcpu0, cpu0, t0 = workers.cpu(), time.process_time(), time.perf_counter()
            counted = Statements()
            with override_settings(TASKS=DATABASE), connection.execute_wrapper(counted):
                assert not tasks_run_in_process()
                queued = routines_run_due(now=self.now)
            cron = time.perf_counter() - t0
            if sorted(queued) != world.routine_ids:
                raise CommandError(f"the cron call queued {len(queued)}, not {world.agents}")
            deadline = t0 + max(600.0, world.agents * 0.5)
            while done_count(world) < world.agents:
                workers.check_alive()
                if time.perf_counter() > deadline:
                    raise CommandError(f"the workers did not finish by {deadline - t0:.0f} s")
                time.sleep(POLL)
            seconds = time.perf_counter() - t0
            cpu = workers.cpu() - wcpu0 + time.process_time() - cpu0
            backends1 = backend_cpu(exclude=mine)
            db_cpu = sum(c - backends0.get(pid, 0.0) for pid, c in backends1.items())
        finally:
            workers.stop()
        statements = workers.statements()
        if statements["tasks"] < world.agents:
            raise CommandError(f"the workers ran {statements['tasks']} tasks, not {world.agents}")
        self.worker_statements[m] = (counted.n, statements)
        n, bad = task_results(since)
        bad += workers.tracebacks()
        if bad:
            raise CommandError(f"{len(bad)} review tasks failed: {bad[0]}")
        if n != world.agents:
            raise CommandError(f"{n} review tasks were queued, not {world.agents}")
        label = f"{m} worker{'s' if m > 1 else ''}"
        total = counted.n + statements["all"]
        return Result(label, world.agents, seconds, cron, total, cpu, db_cpu, "")

    # --- Output -------------------------------------------------------------------------------

    def _report(self, results: list[Result]) -> None:
        self.stdout.write("")
        header = (
            f"{'mode':<11} {'agents':>7} {'wall s':>8} {'cron s':>7} {'ms/agent':>9} "
            f"{'stmts/agent':>11} {'CPU ms/agent':>12} {'DB CPU ms/agent':>15} "
            f"{'within 5 min?':>13}"
        )
        self.stdout.write(header)
        self.stdout.write("-" * len(header))
        for r in results:
            statements = f"{r.statements / r.agents:.1f}" if r.statements is not None else "—"
            self.stdout.write(
                f"{r.mode:<11} {r.agents:>7,} {r.seconds:>8.1f} {r.cron_seconds:>7.1f} "
                f"{r.per_agent(r.seconds):>9.1f} {statements:>11} {r.per_agent(r.cpu):>12.1f} "
                f"{r.per_agent(r.db_cpu):>15.1f} "
                f"{'yes' if r.seconds <= CRON_INTERVAL else 'no':>13}"
            )
        self.stdout.write("")
        self.stdout.write(
            "wall s: from the cron call until every review is recorded finished; cron s: the "
            "cron call itself (in-process it runs the reviews); CPU: this process, plus the "
            "workers' for a fan-out (/proc, 10 ms ticks); DB CPU: the PostgreSQL backends "
            "that did the work; statements: counted with an execute_wrapper, in this process "
            "(in-process) or in the cron call and the workers (fan-out: their start and idle "
            "polls included)."
        )
        for m, (cron, counts) in self.worker_statements.items():
            n = self.agents
            self.stdout.write(
                f"{m} worker(s), statements per agent: the cron call {cron / n:.1f} (queueing), "
                f"in the {counts['tasks']:,} tasks {counts['in_tasks'] / n:.1f} (the reviews, "
                "their results' rows, any lifted fact's vector), the queue's polls and claims "
                f"{(counts['all'] - counts['in_tasks']) / n:.1f}."
            )
        if self.by_kind:
            self.stdout.write("")
            self.stdout.write("In-process, one review by what it finds (medians; the cron call's")
            self.stdout.write("one query for every due routine not included):")
            header = f"{'review of one agent':<30} {'agents':>7} {'statements':>10} {'ms':>7} "
            header += f"{'CPU ms':>7}"
            self.stdout.write(header)
            self.stdout.write("-" * len(header))
            for kind in KINDS.values():
                rows = self.by_kind.get(kind)
                if not rows:
                    continue
                n, ms, cpu = (statistics.median(col) for col in zip(*rows, strict=True))
                self.stdout.write(f"{kind:<30} {len(rows):>7,} {n:>10g} {ms:>7.1f} {cpu:>7.1f}")
            self.stdout.write("")
        if self.agents < TARGET_AGENTS:
            self.stdout.write(f"Extrapolated linearly to {TARGET_AGENTS:,} agents due at once:")
            for r in results:
                total = r.seconds * TARGET_AGENTS / r.agents
                verdict = "within" if total <= CRON_INTERVAL else "over"
                self.stdout.write(
                    f"  {r.mode:<11} ≈ {total:,.0f} s ({total / 60:.1f} min), {verdict} one "
                    "five-minute cron interval"
                )
