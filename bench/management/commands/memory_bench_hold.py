"""`memory_bench_hold`: `memory_search` and `memory_read` under the review policy `hold` against
the same calls under `open` (docs/PERFORMANCE.md, "The review policy's cost").

It creates a throwaway project (slug `bench-hold-…`) holding N facts of one agent with their
stored vectors (bench/util.py `fill_facts`), spread over 20 earlier top-level runs, a third of
them reviewed: under `hold` the learned two thirds are held from the measured run, a new run of
the same agent. Then, in rounds, it sends `POST /api/tools/memory_search` (a fact's two longest
words) and `POST /api/tools/memory_read` (`long_term`, the first page) through Django's full
request cycle, in-process, once with the policy `open` and once `hold` (the order alternating
by round), each query sent twice before it is timed. It prints each side's wall median and the
ratio hold ÷ open (target ≤ 1.1×), and what each side served; then again with every note
reviewed, so both sides serve the same notes and the ratio is the hold clause's own cost. The
project is deleted at the end unless --keep.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import Client, override_settings

from bench.management.commands.memory_bench_search import keywords
from bench.recall_eval import load_dataset
from bench.util import fill_facts, refresh_counters
from memory_portal.memory import services
from memory_portal.memory.models import MemorySetting, Note, Stage, Trust

SLUG_PREFIX = "bench-hold-"
TARGET = 1.1  # hold ÷ open, at most
EARLIER_RUNS = 20


class Command(BaseCommand):
    help = "Time memory_search and memory_read under the review policy hold against open."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", type=int, default=2000, help="Notes (default 2000).")
        parser.add_argument("--rounds", type=int, default=6, help="Rounds (default 6).")
        parser.add_argument("--queries", type=int, default=10, help="Queries a round (10).")
        parser.add_argument("--keep", action="store_true", help="Keep the throwaway project.")

    def handle(self, *args, notes=2000, rounds=6, queries=10, keep=False, **options) -> None:
        if notes < 1 or rounds < 2 or queries < 1:
            raise CommandError("--notes and --queries must be at least 1, --rounds at least 2.")
        texts = [f["text"] for f in load_dataset(None)["FACTS"]]
        asked = [keywords(t) for t in texts][:queries]
        conf = settings.MEMORY_PORTAL
        calls = 2 * rounds * 2 * (len(asked) * 3 + 3 * 3) + 10  # two scenarios
        own = {
            **conf,
            "PROJECT_NOTE_CAP": max(conf["PROJECT_NOTE_CAP"], notes + 100),
            "RUN_CALL_BUDGET": max(conf["RUN_CALL_BUDGET"], calls),
        }
        with override_settings(MEMORY_PORTAL=own, ALLOWED_HOSTS=["testserver"]):
            self._bench(texts, asked, notes, rounds, keep)

    def _bench(self, texts, asked, notes, rounds, keep) -> None:
        project = services.project_create(
            actor=None, slug=f"{SLUG_PREFIX}{uuid.uuid4().hex[:10]}", name="Hold benchmark"
        )
        try:
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Bench agent", stage=Stage.RUNTIME
            )
            fill_facts(project, agent, texts, notes)
            self._spread(project)
            _run, token = services.run_start(actor=None, agent=agent, task_key="BENCH-2")
            client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
            self._measure(project, client, asked, rounds)
            # The clause's own cost: the same notes served both ways (nothing is held when
            # every note is reviewed, but the rule still asks).
            Note.objects.filter(project=project).update(trust=Trust.REVIEWED)
            refresh_counters(project.pk)
            self._measure(project, client, asked, rounds)
        finally:
            if keep:
                self.stdout.write(f"kept project {project.slug}")
            else:
                services.project_delete(actor=None, project=project, confirm=project.slug)

    def _spread(self, project) -> None:
        """The facts as earlier runs wrote them: 20 top-level runs in turn, every third one
        reviewed by a person."""
        ids = list(Note.objects.filter(project=project).order_by("id").values_list("id", flat=True))
        for n in range(EARLIER_RUNS):
            Note.objects.filter(pk__in=ids[n::EARLIER_RUNS]).update(
                top_level_run_id=f"run_bench{n:021d}"
            )
        Note.objects.filter(pk__in=ids[::3]).update(trust=Trust.REVIEWED)
        refresh_counters(project.pk)

    def _call(self, client: Client, tool: str, body: dict) -> int:
        answer = client.post(
            f"/api/tools/{tool}", json.dumps(body), content_type="application/json"
        )
        if answer.status_code != 200:
            raise CommandError(f"{tool} answered {answer.status_code}: {answer.content!r}")
        return len(answer.json()["entries"])

    def _side(self, client: Client, asked: list[str]) -> dict[str, tuple[list[float], int]]:
        """Wall ms of each timed call, by tool, and the entries the last pass served."""
        calls = {
            "memory_search": [{"query": q} for q in asked],
            "memory_read": [{"target": "long_term"}] * 3,
        }
        out = {}
        for tool, bodies in calls.items():
            times: list[float] = []
            served = 0
            for body in bodies:
                self._call(client, tool, body)
                self._call(client, tool, body)
                started = time.perf_counter()
                served += self._call(client, tool, body)
                times.append((time.perf_counter() - started) * 1000)
            out[tool] = (times, served)
        return out

    def _measure(self, project, client: Client, asked: list[str], rounds: int) -> None:
        walls: dict[tuple[str, str], list[float]] = {}
        served: dict[tuple[str, str], int] = {}
        for number in range(rounds):
            order = ("open", "hold") if number % 2 == 0 else ("hold", "open")
            for policy in order:
                services.memory_policy_set(actor=None, project=project, policy=policy)
                for tool, (times, found) in self._side(client, asked).items():
                    walls.setdefault((tool, policy), []).extend(times)
                    served[(tool, policy)] = found
        held = Note.objects.filter(project=project, trust=Trust.LEARNED).count()
        total = Note.objects.filter(project=project).count()
        self.stdout.write(
            f"memory_search and memory_read, hold against open: {total} notes "
            f"({held} learned, held under hold), {rounds} rounds, in-process"
        )
        self.stdout.write(f"{'tool':<15} {'open ms':>9} {'hold ms':>9} {'ratio':>7}  served")
        for tool in ("memory_search", "memory_read"):
            on, off = (statistics.median(walls[(tool, p)]) for p in ("hold", "open"))
            ratio = on / off
            verdict = "met" if ratio <= TARGET else "NOT met"
            self.stdout.write(
                f"{tool:<15} {off:9.2f} {on:9.2f} {ratio:6.2f}×  open {served[(tool, 'open')]}, "
                f"hold {served[(tool, 'hold')]}  (target ≤ {TARGET}×: {verdict})"
            )
