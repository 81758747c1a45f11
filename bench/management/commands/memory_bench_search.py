"""`memory_bench_search`: `memory_search` with meaning against the same search without it
(docs/PERFORMANCE.md, "`memory_search` with meaning").

It creates a throwaway project (slug `bench-search-…`) holding N notes of one agent with their
stored vectors (the labelled set's facts, repeated with a ticket key to reach N, written with
`bulk_create`: bench/util.py `fill_facts`), and a run with a token. Then, in rounds, it sends
`POST /api/tools/memory_search` through Django's full request cycle (the tool edge: token,
trace, budget, serialisation), in-process, for each query in turn: with embeddings on, then
off. Two kinds of query, each with its ratio: the set's questions (which full text, needing
every word, mostly does not match) and keywords (a fact's two longest words, found both ways).
Each query is sent twice before it is timed, so with meaning its vector is cached, as a
repeated search's is. A round prints both medians (wall and this process's CPU) and their
ratio; the target is on ÷ off ≤ 2×. The project is deleted at the end unless --keep.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client, override_settings

from bench.recall_eval import default_dataset_path, load_dataset
from bench.util import fill_facts
from memory_portal.memory import services
from memory_portal.memory.models import MemorySetting, Stage

SLUG_PREFIX = "bench-search-"
TARGET = 2.0  # a repeated search with meaning ÷ the same without, at most


def keywords(text: str) -> str:
    """A search as an agent types one: the fact's two longest words (every note it was made
    from matches it by words as well as by meaning)."""
    words = sorted({w.strip(".,;:()'\"") for w in text.split()}, key=lambda w: (-len(w), w))
    return " ".join(w for w in words[:2])


class Command(BaseCommand):
    help = "Time memory_search with embeddings on and off over N notes; prints the ratio."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--notes", type=int, default=300, help="Notes (default 300).")
        parser.add_argument("--rounds", type=int, default=5, help="Rounds (default 5).")
        parser.add_argument(
            "--queries", type=int, default=10, help="The set's first N queries (default 10)."
        )
        parser.add_argument(
            "--dataset",
            default=None,
            help=f"Facts and queries to use (default {default_dataset_path()}).",
        )
        parser.add_argument("--keep", action="store_true", help="Keep the throwaway project.")

    def handle(
        self, *args, notes=300, rounds=5, queries=10, dataset=None, keep=False, **options
    ) -> None:
        if notes < 1 or rounds < 1 or queries < 1:
            raise CommandError("--notes, --rounds and --queries must be at least 1.")
        try:
            data = load_dataset(dataset)
        except OSError as exc:
            raise CommandError(f"cannot load the dataset: {exc}") from exc
        texts = [f["text"] for f in data["FACTS"]]
        asked = {
            "questions": [q["query"] for q in data["QUERIES"]][:queries],
            "keywords": [keywords(t) for t in texts][:queries],
        }
        conf = settings.MEMORY_PORTAL
        # The run's budget and the project's cap are the bench's own (this process only).
        calls = rounds * queries * 2 * 2 * 3
        own = {
            **conf,
            "PROJECT_NOTE_CAP": max(conf["PROJECT_NOTE_CAP"], notes + 100),
            "RUN_CALL_BUDGET": max(conf["RUN_CALL_BUDGET"], calls + 10),
        }
        with override_settings(MEMORY_PORTAL=own, ALLOWED_HOSTS=["testserver"]):
            self._bench(texts, asked, notes, rounds, keep)

    def _bench(self, texts, asked, notes, rounds, keep) -> None:
        project = services.project_create(
            actor=None, slug=f"{SLUG_PREFIX}{uuid.uuid4().hex[:10]}", name="Search benchmark"
        )
        try:
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Bench agent", stage=Stage.RUNTIME
            )
            _run, token = services.run_start(actor=None, agent=agent, task_key="BENCH-1")
            fill_facts(project, agent, texts, notes)
            self._measure(Client(HTTP_AUTHORIZATION=f"Bearer {token}"), asked, notes, rounds)
        finally:
            if keep:
                self.stdout.write(f"kept project {project.slug}")
            else:
                services.project_delete(actor=None, project=project, confirm=project.slug)

    def _search(self, client: Client, query: str) -> int:
        answer = client.post(
            "/api/tools/memory_search",
            json.dumps({"query": query}),
            content_type="application/json",
        )
        if answer.status_code != 200:
            raise CommandError(f"memory_search answered {answer.status_code}: {answer.content!r}")
        return len(answer.json()["entries"])

    def _side(self, client: Client, asked: list[str], meaning: bool) -> tuple[float, float, int]:
        """Medians (wall ms, CPU ms) of one pass over the queries, and the results found."""
        portal = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": meaning}
        wall: list[float] = []
        cpu: list[float] = []
        found = 0
        with override_settings(MEMORY_PORTAL=portal):
            for query in asked:
                for _ in range(2):  # warm: with meaning, the query's vector is cached
                    self._search(client, query)
                started, started_cpu = time.perf_counter(), time.process_time()
                found += self._search(client, query)
                wall.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - started_cpu) * 1000)
        return statistics.median(wall), statistics.median(cpu), found

    def _measure(self, client: Client, asked: dict[str, list[str]], n: int, rounds: int) -> None:
        self.stdout.write(
            f"memory_search over {n} notes with stored vectors on {connection.vendor}, "
            "through the tool edge in-process; each query sent twice before it is timed"
        )
        for kind, queries in asked.items():
            self.stdout.write(f"\n{kind} ({len(queries)} a pass, e.g. {queries[0]!r})")
            self.stdout.write(
                "round   on wall ms  off wall ms  ratio   on CPU ms  off CPU ms  ratio   "
                "found on/off"
            )
            ratios: list[float] = []
            for i in range(1, rounds + 1):
                on_wall, on_cpu, on_found = self._side(client, queries, meaning=True)
                off_wall, off_cpu, off_found = self._side(client, queries, meaning=False)
                ratios.append(on_wall / off_wall)
                self.stdout.write(
                    f"{i:>5} {on_wall:>12.1f} {off_wall:>12.1f} {on_wall / off_wall:>6.2f}x "
                    f"{on_cpu:>11.1f} {off_cpu:>11.1f} {on_cpu / off_cpu:>6.2f}x "
                    f"{on_found:>8} / {off_found}"
                )
            verdict = "met" if statistics.median(ratios) <= TARGET else "not met"
            self.stdout.write(
                f"{kind}: with meaning ÷ without (wall, median of {rounds} rounds) = "
                f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}x; "
                f"target ≤ {TARGET:g}x: {verdict})"
            )
