"""`memory_bench_outbox`: a write with three webhook endpoints subscribed against a write with
none (docs/INTEGRATIONS.md, "Cost").

It creates a throwaway project (slug `bench-outbox-…`) and, in rounds that alternate the order,
sends N `POST /api/tools/memory_write` through Django's full request cycle in-process: once with
no endpoint, once with three endpoints subscribed to `note.written` on a local receiver (an HTTP
server in this process), while this process's delivery thread sends them — as it does under
`MEMORY_PORTAL_TASKS=immediate`. Every write appends its outbox event either way. It prints the
wall medians, their ratio (target ≤ 1.1×) and how many deliveries arrived. The project is deleted
at the end unless --keep.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import Client, override_settings

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import MemorySetting, Stage
from memory_portal.memory.services import deliveries

SLUG_PREFIX = "bench-outbox-"
TARGET = 1.1


class _Receiver:
    def __init__(self) -> None:
        self.count = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                receiver.count += 1
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Command(BaseCommand):
    help = "Time memory_write with three webhook endpoints subscribed against none."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--writes", type=int, default=200, help="Writes a side (200).")
        parser.add_argument("--rounds", type=int, default=4, help="Rounds (4).")
        parser.add_argument("--keep", action="store_true", help="Keep the throwaway project.")

    def handle(self, *args, writes=200, rounds=4, keep=False, **options) -> None:
        if writes < 1 or rounds < 2:
            raise CommandError("--writes must be at least 1, --rounds at least 2.")
        total = writes * rounds * 3 + 10
        conf = settings.MEMORY_PORTAL
        own = {
            **conf,
            "PROJECT_NOTE_CAP": max(conf["PROJECT_NOTE_CAP"], total),
            "RUN_NOTE_QUOTA": max(conf["RUN_NOTE_QUOTA"], total),
            "RUN_CALL_BUDGET": max(conf["RUN_CALL_BUDGET"], total),
            "WEBHOOK_ALLOW_PRIVATE": True,
            "EMBEDDINGS_ENABLED": False,  # the protocol alone, as memory_bench_writes does
        }
        receiver = _Receiver()
        try:
            with override_settings(MEMORY_PORTAL=own, ALLOWED_HOSTS=["testserver"]):
                self._bench(receiver, writes, rounds, keep)
        finally:
            deliveries.background.paused = False
            receiver.close()

    def _bench(self, receiver, writes, rounds, keep) -> None:
        project = services.project_create(
            actor=None, slug=f"{SLUG_PREFIX}{uuid.uuid4().hex[:10]}", name="Outbox benchmark"
        )
        manager = self._manager(project)
        try:
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Bench agent", stage=Stage.RUNTIME
            )
            _run, token = services.run_start(actor=None, agent=agent, task_key="BENCH-3")
            client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
            hooks = [
                services.webhook_create(
                    actor=manager, project=project, url=receiver.url,
                    event_types=["note.written"], active=False,
                )[0]
                for _ in range(3)
            ]  # fmt: skip
            sides = ("none", "three", "three, sending alongside")
            walls: dict[str, list[float]] = {side: [] for side in sides}
            counter = [0]
            for number in range(rounds):
                order = sides if number % 2 == 0 else tuple(reversed(sides))
                for side in order:
                    subscribed = side != "none"
                    for hook in hooks:  # paused: no endpoint takes events
                        services.webhook_change(actor=manager, webhook=hook, active=subscribed)
                    # The write path alone: the thread that sends stays asleep while the
                    # writes are timed (a worker process sends them, MEMORY_PORTAL_TASKS=
                    # database) — or sends alongside, in this process (immediate).
                    deliveries.background.paused = side == "three"
                    walls[side] += self._writes(client, writes, counter)
                    deliveries.background.paused = False
                    if subscribed:
                        self._drain(project)
            expected = writes * rounds * 2 * 3
            none = statistics.median(walls["none"])
            self.stdout.write(
                f"memory_write against three webhook endpoints subscribed: {writes} writes × "
                f"{rounds} rounds a side, in-process (wall median ms, ratio to none)"
            )
            for side in sides:
                median = statistics.median(walls[side])
                ratio = median / none
                verdict = "" if side == "none" else (
                    f"  (target ≤ {TARGET}×: {'met' if ratio <= TARGET else 'NOT met'})"
                    if side == "three" else ""
                )
                self.stdout.write(f"{side:<26} {median:7.2f} ms  {ratio:5.2f}×{verdict}")
            self.stdout.write(f"deliveries received {receiver.count} of {expected}")
        finally:
            if keep:
                self.stdout.write(f"kept project {project.slug}")
            else:
                services.project_delete(actor=None, project=project, confirm=project.slug)

    def _drain(self, project) -> None:
        """Every delivery of the side sent before the next side is timed."""
        from memory_portal.memory.models import Delivery

        pending = Delivery.objects.filter(webhook__project=project).exclude(status="delivered")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            deliveries.background.kick()
            time.sleep(0.2)
            if not pending.exists() and not self._unhanded(project):
                return
        raise CommandError("the deliveries did not drain within 120 s")

    def _unhanded(self, project) -> bool:
        from memory_portal.memory.models import Event, Webhook

        cursor = min(Webhook.objects.filter(project=project).values_list("cursor", flat=True))
        return Event.objects.filter(project=project, number__gt=cursor).exists()

    def _manager(self, project) -> Actor:
        from django.contrib.auth import get_user_model

        user, _ = get_user_model().objects.get_or_create(
            username="bench-outbox-admin", defaults={"is_superuser": True}
        )
        if not user.is_superuser:
            raise CommandError("bench-outbox-admin exists and is no superuser.")
        return Actor.person(user)

    def _writes(self, client: Client, writes: int, counter: list[int]) -> list[float]:
        times = []
        for _ in range(writes):
            counter[0] += 1
            body = json.dumps({"kind": "fact", "content": f"Outbox bench note {counter[0]}"})
            started = time.perf_counter()
            answer = client.post(
                "/api/tools/memory_write", body, content_type="application/json"
            )
            times.append((time.perf_counter() - started) * 1000)
            if answer.status_code != 200:
                raise CommandError(f"memory_write answered {answer.status_code}")
        return times
