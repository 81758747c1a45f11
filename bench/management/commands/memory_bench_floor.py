"""`memory_bench_floor` (`make bench-floor`): an agent's hot path against the framework's floor.
PostgreSQL. The product (gunicorn -c gunicorn.conf.py) and a django-ninja hello-world under the
same gunicorn settings (bench/floor.py, bench/gunicorn_floor.py) run side by side on loopback
ports; one client, a keep-alive connection to each, sends in turn, --calls times:

- `hello`: the hello-world's POST /hello (a JSON body in, a JSON answer out);
- `floor write`: the floor's POST /write, a durable write's floor: a bearer token looked up
  by its hash and one row inserted and committed (bench/floor.py), two round trips;
- `write`: `memory_write` of a new fact into a project of its own (a new run every 100 writes,
  below the 128 notes a run may add);
- `status 10` and `status N`: `memory_status` in a project of 10 facts and in one of --notes
  (2,000: the cap) — the retry fingerprint's cost as the project grows; `status N first`: a
  new run's first status in the big one, which finds nothing kept (as after any change to the
  project: memory/lru.py `Kept`) and reads what the run sees;
- `search N`: `memory_search` in the big project with one repeated query (its vector cached,
  as an agent's repeated search has it), answering a page of five.

Reported per call kind: p50 and p95 in ms and p50 ÷ the hello-world's p50, and the write's p50
÷ the durable write's floor; the machine's load average before and after; the targets
(docs/PERFORMANCE.md, "The hot path against the floor"). The projects are deleted at the end
unless --keep, the durable write's tables always. The facts of the big project are filled with
their stored vectors (bench/util.py `fill_facts`), the write service's protocol left aside,
and the notes' table is analysed after, as autovacuum would soon after such an insert.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import statistics
import time
import uuid

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from bench import floor_tables
from bench import server as benchserver
from bench.recall_eval import load_dataset
from bench.util import fill_facts
from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Project, Stage

# p50 ÷ the hello-world's p50, at most (issue targets; status N also ≤ 1.2 × status 10).
TARGETS = {"write": 2.5, "status big": 2.0, "search big": 6.0}
STATUS_GROWTH = 1.2
WRITES_PER_RUN = 100
CALLS_PER_RUN = 400  # below the 512 a run may make
WARMUP = 5
QUERY = "how long do preview environments live"


class Client:
    """One keep-alive connection; `post` returns the wall ms of a 200 answer."""

    def __init__(self, port: int, token: str | None = None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Content-Type": "application/json", "Host": "127.0.0.1"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def post(self, path: str, body: dict) -> float:
        data = json.dumps(body).encode()
        started = time.perf_counter()
        self.conn.request("POST", path, body=data, headers=self.headers)
        answer = self.conn.getresponse()
        content = answer.read()
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status != 200:
            raise CommandError(f"POST {path} answered {answer.status}: {content[:300]!r}")
        return elapsed


class Command(BaseCommand):
    help = "Write, status and search through gunicorn against a django-ninja hello-world."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--calls", type=int, default=300, help="calls of each kind (300)")
        parser.add_argument("--notes", type=int, default=2000, help="the big project (2,000)")
        parser.add_argument("--keep", action="store_true", help="keep the throwaway projects")

    def handle(self, *args, **opts) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("memory_bench_floor needs PostgreSQL: set DATABASE_URL.")
        calls, notes = opts["calls"], opts["notes"]
        if not 1 <= calls <= 5000 or not 20 <= notes <= 2000:
            raise CommandError("--calls is 1–5,000; --notes 20–2,000.")
        prefix = f"bench-floor-{uuid.uuid4().hex[:6]}"
        try:
            self._setup(prefix, notes)
            self._bench(calls, notes)
        finally:
            if not opts["keep"]:
                AuditEvent.objects.filter(project_ref__startswith=prefix).delete()
                for project in Project.objects.filter(slug__startswith=prefix):
                    services.project_delete(actor=None, project=project, confirm=project.slug)

    # --- three projects: one written to, one of 10 facts, one of --notes -----------------------
    def _project(self, slug: str):
        project = services.project_create(actor=None, slug=slug, name=slug)
        MemorySetting.objects.filter(project=project).update(enabled=True)
        agent = services.agent_create(
            actor=None, project=project, name="Floor agent", stage=Stage.RUNTIME
        )
        return project, agent

    def _setup(self, prefix: str, notes: int) -> None:
        texts = [f["text"] for f in load_dataset(None)["FACTS"]]
        texts.append("Preview environments are deleted after 72 hours without a push.")
        self.projects = {}
        for name, size in (("write", 0), ("small", 10), ("big", notes)):
            project, agent = self._project(f"{prefix}-{name}")
            if size:
                fill_facts(project, agent, texts[-size:] if size < len(texts) else texts, size)
            self.projects[name] = agent
        with connection.cursor() as cursor:  # as autovacuum would, soon after a bulk insert
            cursor.execute(f"ANALYZE {connection.ops.quote_name(Note._meta.db_table)}")

    def _token(self, name: str, **fields) -> str:
        _run, token = services.run_start(actor=None, agent=self.projects[name], **fields)
        return token

    # --- the interleaved calls --------------------------------------------------------------
    def _bench(self, calls: int, notes: int) -> None:
        floor_token = secrets.token_urlsafe(32)
        with connection.cursor() as cursor:
            floor_tables.drop_tables(cursor)  # a run killed before its end left them
            floor_tables.create_tables(cursor, floor_token)
        try:
            self._served(calls, notes, floor_token)
        finally:
            with connection.cursor() as cursor:
                floor_tables.drop_tables(cursor)

    def _served(self, calls: int, notes: int, floor_token: str) -> None:
        load_before = os.getloadavg()
        with (
            benchserver.gunicorn(["-c", "gunicorn.conf.py"]) as product,
            benchserver.gunicorn(
                ["-c", "bench/gunicorn_floor.py"], app="bench.floor:application"
            ) as floor,
        ):
            hello = Client(floor.port)
            floor_write = Client(floor.port, floor_token)
            clients: dict[str, Client] = {}
            made: dict[str, int] = {}

            def client(kind: str, name: str, every: int) -> Client:
                """The kind's client, on a fresh run every `every` calls."""
                count = made.get(kind, 0)
                if count % every == 0:
                    clients[kind] = Client(product.port, self._token(name))
                made[kind] = count + 1
                return clients[kind]

            n = 0

            def one_round() -> dict[str, float]:
                nonlocal n
                n += 1
                return {
                    "hello": hello.post("/hello", {"message": f"agent {n}"}),
                    "floor write": floor_write.post(
                        "/write", {"content": f"Floor bench fact {n}: step {n} passed."}
                    ),
                    "write": client("write", "write", WRITES_PER_RUN).post(
                        "/api/tools/memory_write",
                        {"kind": "fact", "content": f"Floor bench fact {n}: step {n} passed."},
                    ),
                    "status small": client("status small", "small", CALLS_PER_RUN).post(
                        "/api/tools/memory_status", {}
                    ),
                    "status big": client("status big", "big", CALLS_PER_RUN).post(
                        "/api/tools/memory_status", {}
                    ),
                    # A run's first status, as after any change: nothing kept to answer from.
                    "status big first": client("status big first", "big", 1).post(
                        "/api/tools/memory_status", {}
                    ),
                    "search big": client("search big", "big", CALLS_PER_RUN).post(
                        "/api/tools/memory_search", {"query": QUERY, "limit": 5}
                    ),
                }

            for _ in range(WARMUP):
                one_round()
            times: dict[str, list[float]] = {}
            for _ in range(calls):
                for kind, ms in one_round().items():
                    times.setdefault(kind, []).append(ms)
        load_after = os.getloadavg()
        self._report(times, notes, load_before, load_after)

    def _report(self, times, notes, load_before, load_after) -> None:
        def p(values: list[float], q: int) -> float:
            return statistics.quantiles(values, n=100, method="inclusive")[q - 1]

        floor = statistics.median(times["hello"])
        labels = {
            "hello": "hello-world (the floor)",
            "floor write": "a durable write's floor",
            "write": "memory_write",
            "status small": "memory_status, 10 facts",
            "status big": f"memory_status, {notes:,} facts",
            "status big first": f"  …a run's first ({notes:,})",
            "search big": f"memory_search, {notes:,} facts",
        }
        self.stdout.write(
            f"{len(times['hello'])} calls of each, interleaved, one client; load average "
            f"{load_before[0]:.2f} before, {load_after[0]:.2f} after"
        )
        self.stdout.write(f"{'call':<30} {'p50 ms':>8} {'p95 ms':>8} {'÷ floor':>8}  target")
        verdicts = []
        for kind, label in labels.items():
            p50 = statistics.median(times[kind])
            ratio = p50 / floor
            target = TARGETS.get(kind)
            said = ""
            if target is not None:
                met = ratio <= target
                verdicts.append(met)
                said = f"≤ {target:g}× {'met' if met else 'MISSED'}"
            self.stdout.write(
                f"{label:<30} {p50:>8.2f} {p(times[kind], 95):>8.2f} {ratio:>7.2f}×  {said}"
            )
        beyond = statistics.median(times["write"]) / statistics.median(times["floor write"])
        self.stdout.write(f"memory_write ÷ a durable write's floor: {beyond:.2f}×")
        growth = statistics.median(times["status big"]) / statistics.median(times["status small"])
        met = growth <= STATUS_GROWTH
        verdicts.append(met)
        self.stdout.write(
            f"memory_status {notes:,} ÷ 10 facts: {growth:.2f}× "
            f"(≤ {STATUS_GROWTH:g}× {'met' if met else 'MISSED'})"
        )
        self.stdout.write(f"targets met: {sum(verdicts)} of {len(verdicts)}")
