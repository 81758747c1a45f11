"""`memory_bench_locks`: does one busy project slow the others down? On PostgreSQL, through the
production server (gunicorn -c gunicorn.conf.py, started here on a free loopback port).

Client threads write notes over HTTP (`POST /api/tools/memory_write`): half of them to project
A, half to other projects. Each server configuration is measured twice — with nothing held, and
while another connection holds project A's setting-row lock (`SELECT … FOR UPDATE`, as a long
change to A would). The figure that matters is the latency of writes to the OTHER projects
while A is held, against the same figure with nothing held, in the same run: the ratio of p99s.

Two configurations are compared: the shipped one (gunicorn.conf.py: threaded workers, the
request path's lock wait bounded by MEMORY_PORTAL_LOCK_WAIT_MS, 2 s by default, then 503
memory_busy) and the setup this replaced (4 sync workers, 10 s lock wait). Throwaway projects
`bench-locks-…` are deleted at the end unless --keep.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from bench import server as benchserver
from memory_portal.memory import services
from memory_portal.memory.models import MemorySetting, Project, Stage

CONFIGS = {
    "shipped": {"args": ["-c", "gunicorn.conf.py"], "env": {}},
    "before": {
        # An empty config file, or gunicorn would read ./gunicorn.conf.py (and its threads
        # turn sync workers into threaded ones).
        "args": ["-c", os.devnull, "--workers", "4", "--worker-class", "sync", "--threads", "1"],
        "env": {"MEMORY_PORTAL_LOCK_WAIT_MS": "10000"},
    },
}


@dataclass
class Phase:
    config: str
    held: bool
    other: list[float] = field(default_factory=list)  # seconds, writes to other projects
    other_codes: dict[int, int] = field(default_factory=dict)
    locked_codes: dict[int, int] = field(default_factory=dict)  # writes to project A

    def count(self, codes: dict[int, int], status: int) -> None:
        codes[status] = codes.get(status, 0) + 1


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Command(BaseCommand):
    help = "Latency of writes to other projects while one project's lock is held (PostgreSQL)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase")
        parser.add_argument("--clients", type=int, default=16, help="client threads (half on A)")
        parser.add_argument("--others", type=int, default=4, help="projects besides A")
        parser.add_argument(
            "--configs", default="shipped,before", help="comma-separated: shipped, before"
        )
        parser.add_argument("--keep", action="store_true", help="keep the throwaway projects")

    def handle(self, *args, **opts) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("memory_bench_locks needs PostgreSQL: set DATABASE_URL.")
        configs = [c.strip() for c in opts["configs"].split(",") if c.strip()]
        unknown = set(configs) - set(CONFIGS)
        if unknown:
            raise CommandError(f"Unknown configuration(s): {', '.join(sorted(unknown))}.")
        clients = max(2, opts["clients"])
        tag = uuid.uuid4().hex[:6]
        projects = self._seed(tag, opts["others"] + 1, clients)
        phases: list[Phase] = []
        try:
            for name in configs:  # a fresh server per configuration
                with self._server(name) as port:
                    for held in (False, True):
                        phases.append(
                            self._measure(name, held, port, projects, clients, opts["seconds"])
                        )
        finally:
            if not opts["keep"]:
                for project, _agent in projects:
                    services.project_delete(actor=None, project=project, confirm=project.slug)
        self._report(phases, clients, opts["seconds"])

    # -- set-up ---------------------------------------------------------------------------

    def _seed(self, tag: str, count: int, clients: int):
        """Projects (the first is A) with memory on and an agent each."""
        seeded = []
        for i in range(count):
            slug = f"bench-locks-{tag}-{'a' if i == 0 else i}"
            project = services.project_create(actor=None, slug=slug, name=slug)
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Bench writer", stage=Stage.RUNTIME
            )
            seeded.append((Project.objects.get(pk=project.pk), agent))
        return seeded

    def _tokens(self, agent, clients: int) -> list[str]:
        """A fresh run (and its token) per client for each phase: a run may write 128 new
        notes, and every phase must measure writes, not quota refusals."""
        return [services.run_start(actor=None, agent=agent)[1] for _ in range(clients)]

    @contextmanager
    def _server(self, name: str):
        try:
            with benchserver.gunicorn(CONFIGS[name]["args"], CONFIGS[name]["env"]) as server:
                yield server.port
        except benchserver.ServerDidNotStart as exc:
            raise CommandError(f"gunicorn ({name}): {exc}") from exc

    # -- measuring ------------------------------------------------------------------------

    def _measure(self, config, held, port, projects, clients, seconds) -> Phase:
        phase = Phase(config, held)
        lock = threading.Lock()
        (project_a, agent_a), others = projects[0], projects[1:]
        tokens_a = self._tokens(agent_a, clients)
        other_tokens = [self._tokens(agent, clients) for _project, agent in others]
        stop_at = time.monotonic() + seconds
        holder = None
        if held:
            holder = psycopg.connect(benchserver.database_url(), autocommit=False)
            holder.execute(
                "SELECT id FROM project_memory_setting WHERE project_id = %s FOR UPDATE",
                [project_a.pk],
            )

        def client(index: int) -> None:
            on_a = index % 2 == 0
            token = tokens_a[index] if on_a else other_tokens[index % len(others)][index]
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            n = 0
            while time.monotonic() < stop_at:
                body = json.dumps(
                    {
                        "kind": "fact",
                        "content": f"Bench note {uuid.uuid4().hex} from client {index}, {n}",
                    }
                )
                started = time.monotonic()
                try:
                    conn.request(
                        "POST",
                        "/api/tools/memory_write",
                        body,
                        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                    )
                    response = conn.getresponse()
                    response.read()
                    status = response.status
                except OSError:
                    status = 0
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                elapsed = time.monotonic() - started
                with lock:
                    if on_a:
                        phase.count(phase.locked_codes, status)
                    else:
                        phase.other.append(elapsed)
                        phase.count(phase.other_codes, status)
                n += 1
                if n >= 100:  # the run quota is 128 new notes; stay well inside it
                    break
            conn.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if holder is not None:
            holder.rollback()
            holder.close()
        return phase

    # -- the table ------------------------------------------------------------------------

    def _report(self, phases: list[Phase], clients: int, seconds: float) -> None:
        w = self.stdout.write
        w(
            f"Writes to other projects while project A's lock is held — {clients} clients "
            f"(half on A), {seconds:g} s per phase, PostgreSQL, gunicorn on loopback\n"
        )
        w(
            f"{'configuration':<10} {'A held':<7} {'other writes':>12} {'ok':>6} "
            f"{'p50 ms':>8} {'p99 ms':>8} {'A: ok':>6} {'A: 503':>7} {'A: other':>8}"
        )
        for p in phases:
            ok = p.other_codes.get(200, 0)
            a_ok = p.locked_codes.get(200, 0)
            a_busy = p.locked_codes.get(503, 0)
            a_rest = sum(p.locked_codes.values()) - a_ok - a_busy
            w(
                f"{p.config:<10} {'yes' if p.held else 'no':<7} {len(p.other):>12} {ok:>6} "
                f"{_pct(p.other, 0.5) * 1000:>8.1f} {_pct(p.other, 0.99) * 1000:>8.1f} "
                f"{a_ok:>6} {a_busy:>7} {a_rest:>8}"
            )
        w("")
        for p in phases:
            refused = {k: v for k, v in p.other_codes.items() if k != 200}
            if refused:
                w(f"{p.config}, A held {p.held}: other projects' refusals by status {refused}")
        for config in dict.fromkeys(p.config for p in phases):
            free = next(p for p in phases if p.config == config and not p.held)
            held = next(p for p in phases if p.config == config and p.held)
            ratio = _pct(held.other, 0.99) / _pct(free.other, 0.99)
            mean = statistics.fmean(held.other) if held.other else float("nan")
            w(
                f"{config}: p99 of other projects' writes, A held ÷ nothing held = "
                f"{ratio:.2f}× (target ≤ 2×); mean while held {mean * 1000:.1f} ms"
            )
        w(
            "Configurations: shipped = gunicorn -c gunicorn.conf.py; "
            "before = 4 sync workers, 10 s lock wait"
        )
