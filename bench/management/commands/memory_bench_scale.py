"""`memory_bench_scale [--sizes 10000,100000,1000000]`: the pages and endpoints of issue "Fast
at a million notes", measured through the production server at each database size, next to
the raw SQL doing the same work in the same run.

For each size in turn it grows the database with the scale loader (memory/scale.py; nothing
is loaded when the database holds that many notes already), starts gunicorn (`-c
gunicorn.conf.py`, memory/benchserver.py) and times every page as a superuser's session and
every API call with a run's token, one client on a keep-alive connection: the median of
`--repeat` requests after two warm-ups. The floor is the SQL the page cannot do without (the
rows it shows, found by their indexes; docs/PERFORMANCE.md lists each), run on this process's
connection in the same run. `--results FILE` keeps the figures of earlier runs (one database per
size, say) and prints them all; the last table says whether each view grows with the tables:
its time at the largest size over its time at the smallest.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils import timezone

from bench import server as benchserver
from bench.floors import FLOORS
from bench.scale import SLUG_PREFIX, load_scale
from bench.util import refresh_counters, unsaved_fact
from memory_portal.dashboard.tables import keyset_cursor
from memory_portal.memory import services
from memory_portal.memory.models import Agent, Note, Project
from memory_portal.memory.services.vectors import stamp_vectors

ADMIN = "scale-bench-admin"
RECALL_SLUG = "benchscale-recall"
RECALL_FACTS = 2000
SEARCH = "cache deploy"
DEEP_OFFSET = 10_000  # page 200 of 50
NOTES_PAGE = "project notes page (2,000 notes)"
# The peer: Django's admin changelist of the same project's newest 50 notes, a plain
# ModelAdmin (bench/admin.py, served with bench/peer_settings.py).
ADMIN_PEER = "Django admin changelist, same 50 notes"
PEER_TARGET = 0.7  # the notes page's server CPU ÷ the admin's


@dataclass
class Probe:
    name: str
    method: str
    path: str
    body: dict | None
    auth: str  # "session" or "token" or "recall-token"
    floor: str  # key of FLOORS


def _median_ms(fn, repeat: int, warm: int = 2) -> float:
    for _ in range(warm):
        fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


class Command(BaseCommand):
    help = "Pages and endpoints through gunicorn at each size, with their raw-SQL floor."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sizes", default="10000,100000,1000000")
        parser.add_argument("--repeat", type=int, default=15)
        parser.add_argument("--results", default="", help="JSON file to keep figures across runs")

    def handle(self, *args, sizes: str, repeat: int, results: str, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("memory_bench_scale needs PostgreSQL: set DATABASE_URL.")
        try:
            wanted = [int(s.replace("_", "")) for s in sizes.split(",") if s.strip()]
        except ValueError as exc:
            raise CommandError("--sizes is a comma-separated list of note counts.") from exc
        path = Path(results) if results else None
        table: dict[str, dict[str, list[float]]] = {}
        if path and path.exists():
            table = json.loads(path.read_text())
        for size in sorted(wanted):
            loaded = load_scale(notes=size)
            if loaded.loaded:
                self.stdout.write(
                    f"loaded {loaded.loaded:,} notes in {loaded.seconds:.0f} s "
                    f"({loaded.rate:,.0f} notes/s)"
                )
            self.stdout.write(f"measuring at {Note.objects.count():,} notes …")
            table[str(size)] = self._measure_size(repeat)
            if path:
                path.write_text(json.dumps(table, indent=1))
            self._print(table)

    # -- set-up ---------------------------------------------------------------------------

    def _session(self) -> str:
        user, _ = get_user_model().objects.get_or_create(
            username=ADMIN, defaults={"is_superuser": True, "is_staff": True}
        )
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        return session.session_key

    def _recall_agent(self) -> Agent:
        """A project of one agent holding RECALL_FACTS live facts (made once)."""
        project = Project.objects.filter(slug=RECALL_SLUG).first()
        if project is None:
            project = services.project_create(actor=None, slug=RECALL_SLUG, name="Recall bench")
            project.memory_setting.enabled = True
            project.memory_setting.save(update_fields=["enabled"])
            agent = services.agent_create(
                actor=None, project=project, name="Recall agent", stage="runtime"
            )
            now = timezone.now()
            words = [
                "cache",
                "deploy",
                "schema",
                "worker",
                "queue",
                "retry",
                "timeout",
                "lock",
                "budget",
                "index",
            ]
            notes = [
                unsaved_fact(
                    agent,
                    f"The {words[i % 10]} of service {i} uses {words[(i * 7) % 10]}.",
                    at=now - timedelta(minutes=i),
                )
                for i in range(RECALL_FACTS)
            ]
            stamp_vectors(notes)  # as every write stores them (docs/RECALL.md, "Stored vectors")
            Note.objects.bulk_create(notes, batch_size=500)
            refresh_counters(project.pk)
        return Agent.objects.get(project=project)

    def _token(self, agent: Agent) -> str:
        run = services.run_create(actor=None, agent=agent, task_key="BENCH-SCALE")
        return services.token_create(actor=None, run=run)[1]

    def _params(self) -> dict:
        project = Project.objects.filter(slug=f"{SLUG_PREFIX}00001").first()
        if project is None:
            raise CommandError("no scale project: the loader made none (--sizes too small?)")
        eligible = settings.MEMORY_PORTAL["ELIGIBLE_STAGES"]
        agent = Agent.objects.filter(project=project, stage__in=eligible).order_by("name").first()
        with connection.cursor() as cursor:
            cursor.execute(  # a small database (a test) has fewer: its middle, then
                "SELECT created_at, id FROM memory_auditevent ORDER BY created_at DESC, id DESC"
                " OFFSET LEAST(%s, (SELECT count(*) / 2 FROM memory_auditevent)) LIMIT 1",
                [DEEP_OFFSET],
            )
            deep = cursor.fetchone()
            cursor.execute(
                "SELECT actor_label FROM memory_auditevent WHERE project_id = %s AND"
                " actor_label <> '' LIMIT 1",
                [project.pk],
            )
            actor = cursor.fetchone()[0]
        recall_agent = self._recall_agent()
        since = timezone.now() - timedelta(days=30)
        return {
            "project": project,
            "slug": project.slug,
            "agent": agent,
            "deep": deep,
            "deep_cursor": keyset_cursor(SimpleNamespace(created_at=deep[0], pk=deep[1])),
            "actor": actor,
            "since": since,
            "recall_agent": recall_agent,
        }

    def _probes(self, p: dict) -> list[Probe]:
        slug = p["slug"]
        return [
            Probe("projects list (superuser)", "GET", "/", None, "session", "projects"),
            Probe("audit page 1", "GET", "/audit/", None, "session", "audit_first"),
            Probe(
                f"audit deep page (after {DEEP_OFFSET:,})",
                "GET",
                f"/audit/?before={p['deep_cursor']}",
                None,
                "session",
                "audit_deep",
            ),
            Probe(
                "audit ?project=",
                "GET",
                f"/audit/?project={slug}",
                None,
                "session",
                "audit_project",
            ),
            Probe(
                "audit ?actor=",
                "GET",
                "/audit/?actor=" + p["actor"].replace(" ", "+"),
                None,
                "session",
                "audit_actor",
            ),
            Probe(
                "audit ?date_from=",
                "GET",
                f"/audit/?date_from={p['since'].date().isoformat()}",
                None,
                "session",
                "audit_date",
            ),
            Probe("runs list", "GET", f"/p/{slug}/runs/", None, "session", "runs"),
            Probe(
                NOTES_PAGE,
                "GET",
                f"/p/{slug}/",
                None,
                "session",
                "notes_page",
            ),
            Probe(
                ADMIN_PEER,
                "GET",
                f"/django-admin/memory/note/?project__id__exact={p['project'].pk}",
                None,
                "session",
                "notes_page",
            ),
            Probe("review queue", "GET", f"/p/{slug}/review/", None, "session", "review"),
            Probe("overview (charts)", "GET", f"/p/{slug}/overview/", None, "session", "overview"),
            Probe(
                "memory_search",
                "POST",
                "/api/tools/memory_search",
                {"query": SEARCH},
                "token",
                "search",
            ),
            Probe(
                "memory_read list page",
                "POST",
                "/api/tools/memory_read",
                {"target": "long_term"},
                "token",
                "read_list",
            ),
            Probe(
                f"recall, {RECALL_FACTS:,} facts",
                "POST",
                "/api/v1/memories/recall",
                {"query": "how is the cache deployed"},
                "recall-token",
                "recall",
            ),
        ]

    # -- measuring ------------------------------------------------------------------------

    def _measure_size(self, repeat: int) -> dict[str, list[float]]:
        p = self._params()
        session = self._session()
        tokens = {"token": self._token(p["agent"]), "recall-token": self._token(p["recall_agent"])}
        probes = self._probes(p)
        out: dict[str, list[float]] = {}
        # The server signs sessions with this process's key, or the session made here is void;
        # it serves Django's admin too, the notes page's peer.
        server_env = {
            "SECRET_KEY": settings.SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": "bench.peer_settings",
        }
        self._peer_migrated(server_env)
        try:
            server_cm = benchserver.gunicorn(["-c", "gunicorn.conf.py"], server_env)
            server = server_cm.__enter__()
        except benchserver.ServerDidNotStart as exc:
            raise CommandError(str(exc)) from exc
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            for probe in probes:
                headers = {"Content-Type": "application/json"}
                if probe.auth == "session":
                    headers["Cookie"] = f"{settings.SESSION_COOKIE_NAME}={session}"
                else:
                    headers["Authorization"] = f"Bearer {tokens[probe.auth]}"
                body = json.dumps(probe.body) if probe.body is not None else None

                sizes: list[int] = []

                def call(probe=probe, headers=headers, body=body, sizes=sizes):
                    conn.request(probe.method, probe.path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    sizes.append(len(data))
                    if response.status != 200:
                        raise CommandError(
                            f"{probe.name}: {probe.method} {probe.path} answered "
                            f"{response.status}: {data[:300]!r}"
                        )

                for _ in range(2):  # warm-up
                    call()
                cpu_before = server.cpu_seconds()
                http_ms = _median_ms(call, repeat, warm=0)
                cpu_ms = (server.cpu_seconds() - cpu_before) * 1000 / repeat
                floor = FLOORS[probe.floor]
                with connection.cursor() as cursor:
                    floor_ms = _median_ms(
                        lambda cursor=cursor, floor=floor: floor(cursor, p), repeat
                    )
                out[probe.name] = [round(http_ms, 2), round(floor_ms, 2), round(cpu_ms, 2)]
                self.stdout.write(
                    f"  {probe.name:<38} {http_ms:9.1f} ms   server CPU {cpu_ms:7.1f} ms"
                    f"   floor {floor_ms:7.2f} ms   {sizes[-1] / 1000:7.1f} KB"
                )
            conn.close()
        finally:
            server_cm.__exit__(None, None, None)
            self._peer_migrated(server_env, undo=True)
        return out

    def _peer_migrated(self, server_env: dict[str, str], *, undo: bool = False) -> None:
        """The admin's own tables (its log), which the server's readiness waits for; `undo`
        drops them again, so the database is left as the product knows it."""
        args = ["admin", "zero"] if undo else []
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", *args, "--noinput", "-v0"],
            cwd=settings.BASE_DIR,
            env={**os.environ, **server_env, "DATABASE_URL": benchserver.database_url()},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode:
            raise CommandError(f"migrate (bench.peer_settings): {result.stderr[-1000:]}")

    def _print(self, table: dict[str, dict[str, list[float]]]) -> None:
        sizes = sorted(table, key=int)
        names = list(table[sizes[0]])
        for size in sizes:
            self.stdout.write(f"\n### {int(size):,} notes (median of the requests, ms)\n")
            self.stdout.write(
                "| what | HTTP ms (wall) | server CPU ms | raw-SQL floor ms | wall ÷ floor |"
            )
            self.stdout.write("|---|---:|---:|---:|---:|")
            for name in names:
                if name not in table[size]:
                    continue
                http_ms, floor_ms, cpu_ms = table[size][name]
                ratio = http_ms / floor_ms if floor_ms else float("nan")
                self.stdout.write(
                    f"| {name} | {http_ms:,.1f} | {cpu_ms:,.1f} | {floor_ms:,.2f} | {ratio:,.0f}× |"
                )
        for size in sizes:
            ours, peer = table[size].get(NOTES_PAGE), table[size].get(ADMIN_PEER)
            if ours and peer and peer[2]:
                ratio = ours[2] / peer[2]
                self.stdout.write(
                    f"\nAt {int(size):,} notes the notes page's server CPU ÷ Django admin's "
                    f"changelist of the same 50 notes = {ratio:.2f}× (target ≤ {PEER_TARGET}×: "
                    f"{'met' if ratio <= PEER_TARGET else 'not met'})"
                )
        if len(sizes) > 1:
            first, last = sizes[0], sizes[-1]
            self.stdout.write(
                f"\n### Does it grow? Server CPU ms per request, {int(first):,} to "
                f"{int(last):,} notes\n"
            )
            self.stdout.write(
                "| what | "
                + " | ".join(f"{int(s):,}" for s in sizes)
                + " | grows? (last ÷ first) |"
            )
            self.stdout.write("|---|" + "---:|" * (len(sizes) + 1))
            for name in names:
                row = [table[s].get(name, [float("nan")] * 3)[2] for s in sizes]
                ratio = row[-1] / row[0] if row[0] else float("nan")
                cells = " | ".join(f"{v:,.1f}" for v in row)
                self.stdout.write(f"| {name} | {cells} | {ratio:.2f}× |")
