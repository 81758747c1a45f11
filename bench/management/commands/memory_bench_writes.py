"""`memory_bench_writes`: how many notes per second the write protocol (SPEC §2.4) stores on
PostgreSQL, against the same transaction written by hand in raw SQL.

Three scenarios, each measured on fresh throwaway projects (slugs `bench-<tag>-…`, deleted at
the end unless --keep):

1. one writer on one project;
2. eight writer threads on ONE project: they queue on its setting-row lock;
3. eight writer threads spread over eight projects: no lock contention.

The service path is `services.note_write(kind="fact")` as an agent run, exactly what the API's
`memory_write` calls. The raw path, on a psycopg connection of its own per thread, is the bare
protocol: BEGIN; SELECT … FOR UPDATE of the setting row; count(*) of the project's notes; INSERT
the note; UPDATE the revision; COMMIT. The ratio service / raw is the price of everything else
the service does (validation and secret scan, the pre-lock read, the idempotency lookup, the
per-run quota count, the audit row, the ORM). A third path, "raw 8", sends the service's own
eight statements by hand, which splits that price into "more statements" and "the ORM".

With --http (or --http-only) it also times what an agent waits for: `POST
/api/tools/memory_write` through the production server (gunicorn -c gunicorn.conf.py on a free
loopback port), with 1 client on 1 project and 8 clients on 8 projects, each next to the raw-SQL
floor measured in the same run at the same concurrency, and the server's CPU per write (the
gunicorn workers' user + system time, from /proc).

See docs/PERFORMANCE.md for figures and their interpretation.
"""

from __future__ import annotations

import http.client
import math
import platform
import threading
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from bench import server as benchserver
from bench.writes import (
    HTTP_SCENARIOS,
    HTTP_WARMUP,
    SCENARIOS,
    WRITES_PER_RUN,
    HttpMeasurement,
    Measurement,
    Scenario,
    Writer,
    cpu_count,
    new_run,
    post_write,
    raw_writer,
    run_all,
    share_of,
)
from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Agent, AuditEvent, MemorySetting, Project, Stage

SLUG_PREFIX = "bench-"
BARRIER_TIMEOUT = 120.0

PATHS = ("svc", "raw", "raw8")


class Command(BaseCommand):
    help = (
        "Benchmark note writes on PostgreSQL: the write service against the same transaction "
        "in raw SQL, with 1 writer, 8 writers on one project and 8 writers on 8 projects."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--writes",
            type=int,
            default=400,
            help="Writes per scenario and path, shared by its threads (default 400).",
        )
        parser.add_argument(
            "--seconds",
            type=float,
            default=None,
            help="Run each scenario and path for this many seconds instead of a fixed number "
            "of writes (raises the project cap in-process, since the count is open).",
        )
        parser.add_argument(
            "--http",
            action="store_true",
            help="Also time memory_write through gunicorn (1 client; 8 clients on 8 projects) "
            "next to the raw-SQL floor at the same concurrency.",
        )
        parser.add_argument(
            "--http-only",
            action="store_true",
            help="Only the HTTP comparison (skip the in-process scenarios).",
        )
        parser.add_argument(
            "--keep",
            action="store_true",
            help="Keep the bench- projects, agents, runs and notes for inspection.",
        )

    # --- Entry point ------------------------------------------------------------------------

    def handle(self, *args, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError(
                "memory_bench_writes needs PostgreSQL (row locks and concurrent writers); "
                "set DATABASE_URL=postgres://user@host:5432/name and run it again."
            )
        writes: int = options["writes"]
        seconds: float | None = options["seconds"]
        if writes < 1:
            raise CommandError("--writes must be at least 1.")
        if seconds is not None and seconds <= 0:
            raise CommandError("--seconds must be positive.")
        http_only: bool = options["http_only"]
        over_http = options["http"] or http_only
        if over_http and seconds is not None:
            raise CommandError("--http times a fixed number of writes; drop --seconds.")
        if over_http and writes > settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]:
            raise CommandError(
                "--http writes at most PROJECT_NOTE_CAP notes per project (the server's own "
                "limit); lower --writes."
            )
        self.verbosity = options["verbosity"]
        self.tag = uuid.uuid4().hex[:6]
        self.prefix = f"{SLUG_PREFIX}{self.tag}"

        limits = dict(settings.MEMORY_PORTAL)
        overrides: list[str] = []
        if seconds is not None:
            limits["PROJECT_NOTE_CAP"] = 10**9
            overrides.append("PROJECT_NOTE_CAP raised to 10^9 (a timed run has no fixed count)")
        elif writes > limits["PROJECT_NOTE_CAP"]:
            overrides.append(
                f"PROJECT_NOTE_CAP raised from {limits['PROJECT_NOTE_CAP']} to {writes} "
                "(scenarios 1 and 2 put every write in one project)"
            )
            limits["PROJECT_NOTE_CAP"] = writes

        try:
            with override_settings(MEMORY_PORTAL=limits):
                self._header(writes, seconds, overrides)
                if not http_only:
                    statements = self._probe()
                    rows = []
                    for scenario in SCENARIOS:
                        rows.append(
                            (scenario, [self._measure(scenario, p, writes, seconds) for p in PATHS])
                        )
                    self._report(rows, statements)
                if over_http:
                    self._report_http(self._measure_http_all(writes))
        finally:
            if options["keep"]:
                self.stdout.write(f"Kept the benchmark projects {self.prefix}-*.")
            else:
                self._cleanup()

    # --- Output -----------------------------------------------------------------------------

    def _header(self, writes: int, seconds: float | None, overrides: list[str]) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            pg_version = cursor.fetchone()[0]
            cursor.execute("SHOW synchronous_commit")
            sync_commit = cursor.fetchone()[0]
        database = connection.settings_dict["NAME"]
        self.stdout.write(
            f"Memory Portal write benchmark: PostgreSQL {pg_version} (database {database}, "
            f"synchronous_commit={sync_commit}), Python {platform.python_version()}, "
            f"{cpu_count()} CPU(s)."
        )
        amount = f"{seconds:g} s" if seconds is not None else f"{writes} writes"
        self.stdout.write(
            f"Each scenario: {amount} through the service, then in raw SQL (4 statements), "
            "then in raw SQL sending the service's 8 statements."
        )
        quota = settings.MEMORY_PORTAL["RUN_NOTE_QUOTA"]
        self.stdout.write(
            f"Per-run quota ({quota}): every writer thread moves to a fresh run every "
            f"{WRITES_PER_RUN} writes."
        )
        for line in overrides:
            self.stdout.write(f"In-process override for this benchmark: {line}.")

    def _report(self, rows, statements: list[str]) -> None:
        self.stdout.write("")
        header = (
            f"{'scenario':<22} {'writes':>6} {'service w/s':>11} {'raw SQL w/s':>11} "
            f"{'ratio':>5} {'raw 8 w/s':>9} {'ratio 8':>7} {'CPU ms/write':>17}"
        )
        self.stdout.write(header)
        self.stdout.write("-" * len(header))
        below = []
        for scenario, (service, raw, raw8) in rows:
            ratio = service.rate / raw.rate if raw.rate else 0.0
            ratio8 = service.rate / raw8.rate if raw8.rate else 0.0
            if ratio < 0.5:
                below.append(scenario.label)
            self.stdout.write(
                f"{scenario.label:<22} {service.writes:>6} {service.rate:>11.1f} "
                f"{raw.rate:>11.1f} {ratio:>5.2f} {raw8.rate:>9.1f} {ratio8:>7.2f} "
                f"{f'{service.cpu_ms:.2f}/{raw.cpu_ms:.2f}/{raw8.cpu_ms:.2f}':>17}"
            )
        self.stdout.write("")
        self.stdout.write(
            "ratio = service / raw SQL; ratio 8 = service / raw SQL sending the service's "
            "statements;\nCPU ms/write = this process's CPU per write, service/raw/raw 8 "
            "(PostgreSQL's own CPU not included)."
        )
        body = [sql for sql in statements if sql.strip().upper() not in ("BEGIN", "COMMIT")]
        self.stdout.write(
            f"One service write issues {len(body)} SQL statements plus BEGIN/COMMIT "
            "(raw SQL: 4, raw 8: 8)."
        )
        if self.verbosity >= 2:
            for sql in statements:
                self.stdout.write(f"  {sql[:160]}")
        if below:
            self.stdout.write(f"Service below half of raw SQL in: {'; '.join(below)}.")
        else:
            self.stdout.write("Service at or above half of raw SQL in every scenario.")

    def _report_http(self, rows: list[tuple[Scenario, HttpMeasurement, Measurement]]) -> None:
        self.stdout.write("")
        self.stdout.write(
            "memory_write over HTTP (gunicorn -c gunicorn.conf.py), next to the raw-SQL floor "
            "at the same concurrency, in this run:"
        )
        header = (
            f"{'scenario':<22} {'writes':>6} {'HTTP w/s':>9} {'raw SQL w/s':>11} "
            f"{'ratio':>5} {'HTTP p50 ms':>11} {'server CPU ms/write':>19}"
        )
        self.stdout.write(header)
        self.stdout.write("-" * len(header))
        for scenario, over_http, raw in rows:
            ratio = over_http.rate / raw.rate if raw.rate else 0.0
            self.stdout.write(
                f"{scenario.label:<22} {over_http.writes:>6} {over_http.rate:>9.1f} "
                f"{raw.rate:>11.1f} {ratio:>5.2f} {over_http.p50_ms:>11.1f} "
                f"{over_http.server_cpu_ms:>19.2f}"
            )
        self.stdout.write("")
        self.stdout.write(
            "ratio = HTTP / raw SQL (4 statements on the benchmark's own connection); server "
            "CPU = the gunicorn workers' user + system time per write (PostgreSQL's not "
            "included; 10 ms clock ticks)."
        )

    # --- Fixtures ---------------------------------------------------------------------------

    def _targets(self, name: str, count: int) -> list[tuple[Project, Agent]]:
        targets = []
        for i in range(count):
            slug = f"{self.prefix}-{name}-{i}"
            project = services.project_create(actor=None, slug=slug, name=f"Benchmark {slug}")
            # A throwaway benchmark project: switch memory on directly. memory_enable would need
            # a manager (a person), i.e. a user account left behind by the benchmark.
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Bench writer", stage=Stage.RUNTIME
            )
            targets.append((project, agent))
        return targets

    def _cleanup(self) -> None:
        like = f"{self.prefix}-"
        AuditEvent.objects.filter(project_ref__startswith=like).delete()
        Project.objects.filter(slug__startswith=like).delete()

    # --- Statements per write ---------------------------------------------------------------

    def _probe(self) -> list[str]:
        """One warm-up write, then the statements of one service write as Django sends them."""
        [(_project, agent)] = self._targets("probe", 1)
        run = new_run(agent)
        actor = Actor.agent_run(run)
        services.note_write(actor=actor, kind="fact", content=self._content("probe", 0, 0))
        with CaptureQueriesContext(connection) as captured:
            services.note_write(actor=actor, kind="fact", content=self._content("probe", 0, 1))
        return [q["sql"] for q in captured.captured_queries]

    # --- Measurement ------------------------------------------------------------------------

    def _content(self, where: str, thread: int, n: int) -> str:
        # Unique per write (identical content would be an idempotent no-op) and plain prose.
        return (
            f"Benchmark note {self.tag} {where} writer {thread} number {n}: the nightly "
            "export finishes after the cache warm-up, so schedule reports after it."
        )

    def _content_of(self, writer: Writer, where: str) -> Callable[[int], str]:
        return lambda n: self._content(where, writer.index, n)

    def _measure(
        self, scenario: Scenario, path: str, writes: int, seconds: float | None
    ) -> Measurement:
        targets = self._targets(f"{scenario.key}-{path}", scenario.projects)
        writers = []
        for i in range(scenario.threads):
            project, agent = targets[i % len(targets)]
            share = None if seconds is not None else share_of(writes, scenario.threads, i)
            writer = Writer(index=i, project=project, agent=agent, writes=share)
            if share is not None:
                writer.runs = [new_run(agent) for _ in range(math.ceil(share / WRITES_PER_RUN))]
            writers.append(writer)

        where = f"{scenario.key}-{path}"
        make = {
            "svc": self._service_writer,
            "raw": lambda w, where: raw_writer(w, self._content_of(w, where)),
            "raw8": lambda w, where: raw_writer(w, self._content_of(w, where), full=True),
        }[path]
        clock: dict[str, float] = {}
        done = [0] * len(writers)
        finished = [0.0] * len(writers)
        errors: list[BaseException] = []

        def started() -> None:
            clock["cpu"] = time.process_time()
            clock["start"] = time.perf_counter()

        barrier = threading.Barrier(len(writers), action=started)

        def work(writer: Writer) -> None:
            try:
                connection.ensure_connection()  # each thread has its own connection
                write = make(writer, where)
                barrier.wait(timeout=BARRIER_TIMEOUT)
                deadline = clock["start"] + seconds if seconds is not None else None
                n = 0
                while (n < writer.writes) if deadline is None else (time.perf_counter() < deadline):
                    write(n)
                    n += 1
                done[writer.index] = n
                finished[writer.index] = time.perf_counter()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                barrier.abort()
            finally:
                connection.close()

        threads = [
            threading.Thread(target=work, args=(w,), name=f"bench-{w.index}") for w in writers
        ]
        run_all(threads, errors, f"{scenario.label} ({path})")
        return Measurement(
            writes=sum(done),
            seconds=max(finished) - clock["start"],
            cpu=time.process_time() - clock["cpu"],
        )

    def _service_writer(self, writer: Writer, where: str) -> Callable[[int], None]:
        actors: dict[str, Actor] = {}

        def write(n: int) -> None:
            run = writer.run_for(n)
            actor = actors.get(run.pk)
            if actor is None:
                actor = actors[run.pk] = Actor.agent_run(run)
            result = services.note_write(
                actor=actor, kind="fact", content=self._content(where, writer.index, n)
            )
            if not result.created:
                raise CommandError(f"Write {n} of writer {writer.index} was not new.")

        return write

    # --- Over HTTP ----------------------------------------------------------------------------

    def _measure_http_all(self, writes: int) -> list[tuple[Scenario, HttpMeasurement, Measurement]]:
        rows = []
        try:
            with benchserver.gunicorn(["-c", "gunicorn.conf.py"]) as server:
                for scenario in HTTP_SCENARIOS:
                    over_http = self._measure_http(scenario, writes, server)
                    raw = self._measure(scenario, "raw", writes, None)
                    rows.append((scenario, over_http, raw))
        except benchserver.ServerDidNotStart as exc:
            raise CommandError(f"gunicorn: {exc}") from exc
        return rows

    def _measure_http(
        self, scenario: Scenario, writes: int, server: benchserver.Running
    ) -> HttpMeasurement:
        """`writes` memory_write calls shared by the scenario's clients, each on a keep-alive
        connection of its own with a fresh run's token every WRITES_PER_RUN writes."""
        targets = self._targets(f"{scenario.key}-http", scenario.projects)
        plans = []
        for i in range(scenario.threads):
            _project, agent = targets[i % len(targets)]
            share = share_of(writes, scenario.threads, i)
            runs = math.ceil(share / WRITES_PER_RUN) + 1  # the first warms the server up
            tokens = [services.run_start(actor=None, agent=agent)[1] for _ in range(runs)]
            plans.append((i, share, tokens))
        where = f"{scenario.key}-http"
        clock: dict[str, float] = {}
        done = [0] * len(plans)
        finished = [0.0] * len(plans)
        latencies: list[list[float]] = [[] for _ in plans]
        errors: list[BaseException] = []

        def started() -> None:
            clock["cpu"] = server.cpu_seconds()
            clock["start"] = time.perf_counter()

        barrier = threading.Barrier(len(plans), action=started)

        def work(index: int, share: int, tokens: list[str]) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            try:
                for n in range(HTTP_WARMUP):
                    post_write(conn, tokens[0], self._content(f"{where}-warm", index, n))
                barrier.wait(timeout=BARRIER_TIMEOUT)
                for n in range(share):
                    token = tokens[1 + n // WRITES_PER_RUN]
                    began = time.perf_counter()
                    post_write(conn, token, self._content(where, index, n))
                    latencies[index].append(time.perf_counter() - began)
                done[index] = share
                finished[index] = time.perf_counter()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                barrier.abort()
            finally:
                conn.close()

        threads = [threading.Thread(target=work, args=plan) for plan in plans]
        run_all(threads, errors, f"{scenario.label} (HTTP)")
        return HttpMeasurement(
            writes=sum(done),
            seconds=max(finished) - clock["start"],
            cpu=0.0,
            server_cpu=server.cpu_seconds() - clock["cpu"],
            latencies=[x for per_client in latencies for x in per_client],
        )
