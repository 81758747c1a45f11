"""`memory_bench_reads`: what recording every note served costs an agent's reads. PostgreSQL,
through the production server (gunicorn -c gunicorn.conf.py on a free loopback port), against
the same server whose workers skip the records' INSERT (bench/gunicorn_unrecorded.py) — both
running in the same run.

A throwaway project (`bench-reads-…`, deleted at the end unless --keep) holds --notes facts;
--agents agents, each with a run of its own, read it at once: each sends --calls calls on a
keep-alive connection, alternating `memory_search` (a word of the notes) and `memory_read` (a
page of five long_term notes), after warming up and waiting at a barrier. Rounds alternate the
sides' order. Reported per side: calls/s over the wall time (median of the rounds), p50 and
p99 latency, the answers by status, and the read records the side wrote (the unrecorded side
must write none). Target (docs/CONCEPTS.md, "Read records"): recorded ≤ 1.15× unrecorded,
as the unrecorded side's calls/s over the recorded side's.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import threading
import time
import uuid

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from bench import server as benchserver
from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import AuditEvent, MemorySetting, NoteRead, Project, Stage

TARGET = 1.15
WARMUP = 2
BARRIER_TIMEOUT = 120.0
WORDS = ("deploy", "cache", "billing", "export", "release", "webhook", "schema", "queue")
SIDES = {
    "recorded": ["-c", "gunicorn.conf.py"],
    "unrecorded": ["-c", "bench/gunicorn_unrecorded.py"],
}


class Command(BaseCommand):
    help = "Agents' reads with their read records against the same reads without them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agents", type=int, default=32, help="agents reading at once (32)")
        parser.add_argument("--calls", type=int, default=30, help="calls per agent a round (30)")
        parser.add_argument("--rounds", type=int, default=2, help="rounds (2)")
        parser.add_argument("--notes", type=int, default=200, help="facts in the project (200)")
        parser.add_argument("--keep", action="store_true", help="keep the throwaway project")

    def handle(self, *args, **opts) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("memory_bench_reads needs PostgreSQL: set DATABASE_URL.")
        agents, calls, rounds = opts["agents"], opts["calls"], opts["rounds"]
        if agents < 1 or rounds < 1 or not 1 <= calls * rounds <= 500:
            raise CommandError("--agents and --rounds ≥ 1; --calls × --rounds is 1–500.")
        self.prefix = f"bench-reads-{uuid.uuid4().hex[:6]}"
        env = {"MEMORY_EMBEDDINGS": "false"}
        try:
            tokens = self._setup(opts["notes"], agents)
            results: dict[str, list[dict]] = {side: [] for side in SIDES}
            for number in range(rounds):
                order = list(SIDES) if number % 2 == 0 else list(reversed(SIDES))
                for side in order:
                    with benchserver.gunicorn(SIDES[side], env) as server:
                        results[side].append(self._round(server, tokens, calls))
        except benchserver.ServerDidNotStart as exc:
            raise CommandError(f"gunicorn: {exc}") from exc
        finally:
            if not opts["keep"]:
                AuditEvent.objects.filter(project_ref__startswith=self.prefix).delete()
                Project.objects.filter(slug__startswith=self.prefix).delete()
        self._report(results, agents, calls, rounds)

    def _setup(self, notes: int, agents: int) -> list[tuple[str, str]]:
        project = services.project_create(actor=None, slug=self.prefix, name=self.prefix)
        MemorySetting.objects.filter(project=project).update(enabled=True)
        writer = services.agent_create(
            actor=None, project=project, name="Bench writer", stage=Stage.RUNTIME
        )
        run = None
        for n in range(notes):
            if n % 100 == 0:
                run = services.run_create(actor=None, agent=writer)
            services.note_write(
                actor=Actor.agent_run(run),
                kind="fact",
                content=f"Bench fact {n}: the {WORDS[n % len(WORDS)]} step runs after the "
                f"{WORDS[(n + 3) % len(WORDS)]} step on every release train number {n}.",
            )
        tokens = []
        for i in range(agents):
            reader = services.agent_create(
                actor=None, project=project, name=f"Bench reader {i}", stage=Stage.RUNTIME
            )
            warm = services.run_start(actor=None, agent=reader)[1]
            tokens.append((warm, services.run_start(actor=None, agent=reader)[1]))
        return tokens

    def _round(self, server, tokens, calls: int) -> dict:
        records_before = NoteRead.objects.filter(note__project__slug=self.prefix).count()
        lock = threading.Lock()
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        clock: dict[str, float] = {}
        finished = [0.0] * len(tokens)
        errors: list[BaseException] = []
        barrier = threading.Barrier(
            len(tokens), action=lambda: clock.update(start=time.perf_counter())
        )

        def work(index: int, warm: str, token: str) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            try:
                for n in range(WARMUP):
                    self._call(conn, warm, n + index)
                barrier.wait(timeout=BARRIER_TIMEOUT)
                for n in range(calls):
                    began = time.perf_counter()
                    status = self._call(conn, token, n + index)
                    with lock:
                        latencies.append(time.perf_counter() - began)
                        statuses[status] = statuses.get(status, 0) + 1
                finished[index] = time.perf_counter()
            except BaseException as exc:  # reported below
                errors.append(exc)
                barrier.abort()
            finally:
                conn.close()

        threads = [threading.Thread(target=work, args=(i, *t)) for i, t in enumerate(tokens)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise CommandError(f"a reader failed: {errors[0]!r}")
        seconds = max(finished) - clock["start"]
        records = NoteRead.objects.filter(note__project__slug=self.prefix).count()
        return {
            "rate": sum(statuses.values()) / seconds,
            "latencies": latencies,
            "statuses": statuses,
            "records": records - records_before,
            "load": os.getloadavg()[0],
        }

    def _call(self, conn: http.client.HTTPConnection, token: str, n: int) -> int:
        if n % 2 == 0:
            path, body = "memory_search", {"query": WORDS[n % len(WORDS)], "limit": 5}
        else:
            path, body = "memory_read", {"target": "long_term", "offset": n % 50, "limit": 5}
        conn.request(
            "POST",
            f"/api/tools/{path}",
            json.dumps(body),
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        answer = response.read()
        if response.status != 200 or not json.loads(answer)["entries"]:
            raise CommandError(f"{path} answered {response.status}: {answer[:300]!r}")
        return response.status

    def _report(self, results, agents: int, calls: int, rounds: int) -> None:
        self.stdout.write(
            f"memory_search and memory_read, {agents} agents at once on one project, "
            f"{calls} calls each a round, {rounds} round(s) a side, alternating (MEMORY_EMBEDDINGS"
            "=false)"
        )
        self.stdout.write(
            f"{'side':<11} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}  answers  records"
        )
        rates = {}
        for side, rows in results.items():
            rates[side] = statistics.median(r["rate"] for r in rows)
            ordered = sorted(x for r in rows for x in r["latencies"])
            p50 = ordered[int(0.5 * (len(ordered) - 1))] * 1000
            p99 = ordered[int(0.99 * (len(ordered) - 1))] * 1000
            answers = sum(sum(r["statuses"].values()) for r in rows)
            records = sum(r["records"] for r in rows)
            self.stdout.write(
                f"{side:<11} {rates[side]:8.1f} {p50:8.2f} {p99:8.2f}  {answers:7d}  {records:7d}"
            )
        if any(r["records"] for r in results["unrecorded"]):
            raise CommandError("the unrecorded side wrote read records: the comparison is void")
        loads = [r["load"] for rows in results.values() for r in rows]
        self.stdout.write(f"load average after the rounds: {min(loads):.1f}–{max(loads):.1f}")
        ratio = rates["unrecorded"] / rates["recorded"]
        verdict = "met" if ratio <= TARGET else "NOT met"
        self.stdout.write(
            f"cost: unrecorded ÷ recorded calls/s = {ratio:.3f}× (target ≤ {TARGET}×: {verdict})"
        )
