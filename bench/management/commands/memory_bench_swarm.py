"""`memory_bench_swarm`: many agents writing to ONE project at once, as an orchestrator that
fans out a swarm does, against the same agents spread over eight projects and against the
write's own statements sent by hand on one project. PostgreSQL, through the production server
(gunicorn -c gunicorn.conf.py on a free loopback port).

For each writer count (--writers, default 8 and 32), three scenarios on fresh throwaway
projects (`bench-swarm-…`, deleted at the end unless --keep):

- one project: every writer its own run, all on one project — they meet at its lock;
- spread: the same writers over eight projects — next to no contention;
- raw SQL: as many threads on one project sending the service's own statements by hand on
  psycopg (bench.writes.raw_writer, full=True): the database's floor for that contention.

Each writer warms up, waits at a barrier, then sends --writes `memory_write` calls on a
keep-alive connection. Reported per scenario: writes/s over the wall time, p50 and p99
latency, the answers by status (503 is memory_busy), the gunicorn workers' CPU per write and
the load average when it started. The server runs with MEMORY_EMBEDDINGS=false unless
--embeddings, so the write protocol alone is measured. Target (docs/PERFORMANCE.md, "A swarm
on one project"): one project ≥ 0.8× spread at 32 writers, no 503, p99 ≤ 1 s.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from bench import server as benchserver
from bench.writes import Writer, new_run, raw_writer
from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, MemorySetting, Project, Stage

SPREAD_PROJECTS = 8
WARMUP = 2
BARRIER_TIMEOUT = 120.0
TARGET_RATIO = 0.8
TARGET_P99_MS = 1000.0


@dataclass
class Result:
    scenario: str
    writers: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    server_cpu: float | None = None
    load: float = 0.0

    @property
    def ok(self) -> int:
        return self.statuses.get(200, 0)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0

    def pct_ms(self, q: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    @property
    def cpu_ms(self) -> float | None:
        if self.server_cpu is None or not self.ok:
            return None
        return self.server_cpu * 1000 / self.ok


class Command(BaseCommand):
    help = "A swarm of writers on one project against the same writers spread, and raw SQL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--writers", default="8,32", help="comma-separated writer counts")
        parser.add_argument("--writes", type=int, default=40, help="writes per writer (≤ 120)")
        parser.add_argument(
            "--embeddings", action="store_true", help="the shipped default: vectors on"
        )
        parser.add_argument(
            "--server-env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="an environment variable for gunicorn (e.g. MEMORY_PORTAL_THREADS=4)",
        )
        parser.add_argument("--keep", action="store_true", help="keep the throwaway projects")

    def handle(self, *args, **opts) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("memory_bench_swarm needs PostgreSQL: set DATABASE_URL.")
        counts = [int(c) for c in opts["writers"].split(",") if c.strip()]
        writes = opts["writes"]
        if not 1 <= writes <= 120:
            raise CommandError("--writes is 1–120 (a run writes at most 128 new notes).")
        env = {"MEMORY_EMBEDDINGS": "true" if opts["embeddings"] else "false"}
        for pair in opts["server_env"]:
            name, _, value = pair.partition("=")
            env[name] = value
        self.prefix = f"bench-swarm-{uuid.uuid4().hex[:6]}"
        results: list[Result] = []
        try:
            with benchserver.gunicorn(["-c", "gunicorn.conf.py"], env) as server:
                for count in counts:
                    results.append(self._http("one project", count, 1, writes, server))
                    results.append(self._http("spread", count, SPREAD_PROJECTS, writes, server))
                    results.append(self._raw(count, writes))
        except benchserver.ServerDidNotStart as exc:
            raise CommandError(f"gunicorn: {exc}") from exc
        finally:
            if not opts["keep"]:
                self._cleanup()
        self._report(results, writes, env)

    # --- set-up ---------------------------------------------------------------------------

    def _projects(self, name: str, count: int):
        made = []
        for i in range(count):
            slug = f"{self.prefix}-{name}-{i}"
            project = services.project_create(actor=None, slug=slug, name=slug)
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Swarm writer", stage=Stage.RUNTIME
            )
            made.append((Project.objects.get(pk=project.pk), agent))
        return made

    def _cleanup(self) -> None:
        AuditEvent.objects.filter(project_ref__startswith=self.prefix).delete()
        Project.objects.filter(slug__startswith=self.prefix).delete()

    def _content(self, where: str, writer: int, n: int) -> str:
        return (
            f"Swarm note {self.prefix} {where} writer {writer} number {n}: the nightly export "
            "finishes after the cache warm-up, so schedule reports after it."
        )

    # --- over HTTP ------------------------------------------------------------------------

    def _http(self, scenario, writers, projects, writes, server) -> Result:
        where = f"{scenario.replace(' ', '-')}-{writers}"
        targets = self._projects(where, projects)
        plans = []
        for i in range(writers):
            _project, agent = targets[i % len(targets)]
            warm = services.run_start(actor=None, agent=agent)[1]
            plans.append((i, warm, services.run_start(actor=None, agent=agent)[1]))
        result = Result(scenario, writers, load=os.getloadavg()[0])
        lock = threading.Lock()
        clock: dict[str, float] = {}
        finished = [0.0] * writers
        errors: list[BaseException] = []

        def started() -> None:
            clock["cpu"] = server.cpu_seconds()
            clock["start"] = time.perf_counter()

        barrier = threading.Barrier(writers, action=started)

        def work(index: int, warm: str, token: str) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            try:
                for n in range(WARMUP):
                    self._post(conn, warm, self._content(f"{where}-warm", index, n))
                barrier.wait(timeout=BARRIER_TIMEOUT)
                for n in range(writes):
                    began = time.perf_counter()
                    status = self._post(conn, token, self._content(where, index, n))
                    elapsed = time.perf_counter() - began
                    with lock:
                        result.latencies.append(elapsed)
                        result.statuses[status] = result.statuses.get(status, 0) + 1
                finished[index] = time.perf_counter()
            except BaseException as exc:  # reported below
                errors.append(exc)
                barrier.abort()
            finally:
                conn.close()

        self._run([threading.Thread(target=work, args=plan) for plan in plans], errors)
        result.seconds = max(finished) - clock["start"]
        result.server_cpu = server.cpu_seconds() - clock["cpu"]
        return result

    def _post(self, conn: http.client.HTTPConnection, token: str, content: str) -> int:
        conn.request(
            "POST",
            "/api/tools/memory_write",
            json.dumps({"kind": "fact", "content": content}),
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        body = response.read()
        if response.status == 200 and not json.loads(body).get("created"):
            raise CommandError(f"a write was not new: {body[:200]!r}")
        if response.status not in (200, 503):
            raise CommandError(f"memory_write answered {response.status}: {body[:300]!r}")
        return response.status

    # --- raw SQL on one project -----------------------------------------------------------

    def _raw(self, writers: int, writes: int) -> Result:
        where = f"raw-{writers}"
        [(project, agent)] = self._projects(where, 1)
        result = Result("raw SQL", writers, load=os.getloadavg()[0])
        lock = threading.Lock()
        clock: dict[str, float] = {}
        finished = [0.0] * writers
        errors: list[BaseException] = []
        barrier = threading.Barrier(writers, action=lambda: clock.update(start=time.perf_counter()))

        def work(index: int) -> None:
            try:
                connection.ensure_connection()
                writer = Writer(index=index, project=project, agent=agent, writes=writes)
                writer.runs = [new_run(agent)]
                write = raw_writer(writer, lambda n: self._content(where, index, n), full=True)
                barrier.wait(timeout=BARRIER_TIMEOUT)
                for n in range(writes):
                    began = time.perf_counter()
                    write(n)
                    elapsed = time.perf_counter() - began
                    with lock:
                        result.latencies.append(elapsed)
                        result.statuses[200] = result.statuses.get(200, 0) + 1
                finished[index] = time.perf_counter()
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()
            finally:
                connection.close()

        self._run([threading.Thread(target=work, args=(i,)) for i in range(writers)], errors)
        result.seconds = max(finished) - clock["start"]
        return result

    def _run(self, threads: list[threading.Thread], errors: list[BaseException]) -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
        if errors:
            raise CommandError(f"a writer failed: {(real or errors)[0]!r}")

    # --- the table ------------------------------------------------------------------------

    def _report(self, results: list[Result], writes: int, env: dict[str, str]) -> None:
        w = self.stdout.write
        settings_ = ", ".join(f"{k}={v}" for k, v in env.items())
        w(
            f"A swarm on one project — {writes} memory_write calls per writer, gunicorn -c "
            f"gunicorn.conf.py ({settings_}), PostgreSQL, {os.cpu_count()} CPUs\n"
        )
        w(
            f"{'writers':>7}  {'scenario':<12} {'w/s':>7} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'ok':>5} {'503':>5} {'CPU ms/w':>8} {'load':>5}"
        )
        for r in results:
            cpu = f"{r.cpu_ms:.1f}" if r.cpu_ms is not None else "—"
            w(
                f"{r.writers:>7}  {r.scenario:<12} {r.rate:>7.1f} {r.pct_ms(0.5):>8.1f} "
                f"{r.pct_ms(0.99):>8.1f} {r.ok:>5} {r.statuses.get(503, 0):>5} {cpu:>8} "
                f"{r.load:>5.2f}"
            )
        w("")
        for count in dict.fromkeys(r.writers for r in results):
            one = next(r for r in results if r.writers == count and r.scenario == "one project")
            spread = next(r for r in results if r.writers == count and r.scenario == "spread")
            raw = next(r for r in results if r.writers == count and r.scenario == "raw SQL")
            ratio = one.rate / spread.rate if spread.rate else float("nan")
            met = (
                ratio >= TARGET_RATIO
                and not one.statuses.get(503)
                and one.pct_ms(0.99) <= TARGET_P99_MS
            )
            w(
                f"{count} writers: one project ÷ spread = {ratio:.2f}× (target ≥ "
                f"{TARGET_RATIO}×, no 503, p99 ≤ {TARGET_P99_MS:g} ms: "
                f"{'met' if met else 'not met'}); one project ÷ raw SQL = "
                f"{one.rate / raw.rate if raw.rate else float('nan'):.2f}×"
            )
