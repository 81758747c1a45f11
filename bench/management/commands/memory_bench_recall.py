"""`memory_bench_recall`: how long `recall()` takes over N live facts (docs/RECALL.md, "Speed").

It creates a throwaway project (slug `bench-recall-…`) with one agent holding N live facts,
written with `bulk_create`, the same identity hash and the stored vectors the services compute
(raising the project cap for itself when N needs it), and a day log of today. The facts
are the labelled set's (tests/memory/recall_set.py), repeated with a ticket key
to reach N; the queries are the set's. Then it calls `recall(actor=…, query=…, mark=False)`, the
dashboard preview path (the whole recall: the revision and the live facts, scoring, picking, the
day log and the block, without the recall-count UPDATE) and reports the median and p95 in ms,
plus the first call (cold caches), the scoring share alone and the floor: what any recall of
these facts costs at least, the raw SQL reading the agent's live facts (the `recall` floor of
`memory_bench_scale`) plus the query's embedding, measured in the same run. The project is
deleted at the end unless --keep.
"""

from __future__ import annotations

import math
import statistics
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from bench.floors import FLOORS
from bench.recall_eval import default_dataset_path, load_dataset
from bench.util import fill_facts
from memory_portal.memory import embeddings, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import MemorySetting, Stage
from memory_portal.memory.recall import facts as recall_facts
from memory_portal.memory.recall import lexical, service, text
from memory_portal.memory.selectors import AgentView

SLUG_PREFIX = "bench-recall-"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


class Command(BaseCommand):
    help = "Time recall() over N live facts of one agent; prints the median and p95 in ms."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--facts", type=int, default=300, help="Live facts (default 300).")
        parser.add_argument(
            "--repeat", type=int, default=50, help="Timed recalls per query pass (default 50)."
        )
        parser.add_argument(
            "--dataset",
            default=None,
            help=f"Facts and queries to use (default {default_dataset_path()}).",
        )
        parser.add_argument("--keep", action="store_true", help="Keep the throwaway project.")

    embed_ms = 0.0

    def handle(self, *args, facts=300, repeat=50, dataset=None, keep=False, **options) -> None:
        if facts < 1 or repeat < 1:
            raise CommandError("--facts and --repeat must be at least 1.")
        try:
            data = load_dataset(dataset)
        except OSError as exc:
            raise CommandError(f"cannot load the dataset: {exc}") from exc
        texts = [f["text"] for f in data["FACTS"]]
        queries = [q["query"] for q in data["QUERIES"]]

        # The project cap counts the facts and the day log: the bench raises it for itself
        # (only in this process), so `--facts 2000` does not run into the default 2,000.
        conf = settings.MEMORY_PORTAL
        cap = max(conf["PROJECT_NOTE_CAP"], facts + 100)
        with override_settings(MEMORY_PORTAL={**conf, "PROJECT_NOTE_CAP": cap}):
            self._bench(texts, queries, facts, repeat, keep)

    def _bench(self, texts, queries, facts, repeat, keep) -> None:
        self.texts = texts
        project = services.project_create(
            actor=None, slug=f"{SLUG_PREFIX}{uuid.uuid4().hex[:10]}", name="Recall benchmark"
        )
        try:
            MemorySetting.objects.filter(project=project).update(enabled=True)
            agent = services.agent_create(
                actor=None, project=project, name="Bench agent", stage=Stage.RUNTIME
            )
            run = services.run_create(actor=None, agent=agent, task_key="BENCH-1")
            actor = Actor.agent_run(run)
            # The day log first: once N facts are in, a project at the cap refuses writes.
            for i in range(20):
                services.day_append(actor=actor, line=f"bench line {i}: checked the deploy")
            self.embed_ms = fill_facts(project, agent, texts, facts)
            self._measure(actor, queries, facts, repeat)
        finally:
            if keep:
                self.stdout.write(f"kept project {project.slug}")
            else:
                services.project_delete(actor=None, project=project, confirm=project.slug)

    def _measure(self, actor: Actor, queries: list[str], n: int, repeat: int) -> None:
        lexical.clear_caches()
        text.stem.cache_clear()
        embeddings.vector_cache.clear()  # recall must read the stored vectors
        recall_facts.fact_cache.clear()
        started = time.perf_counter()
        first = service.recall(actor=actor, query=queries[0], mark=False)
        cold = (time.perf_counter() - started) * 1000
        if first.considered != n:
            raise CommandError(f"recall saw {first.considered} facts, expected {n}")

        wall: list[float] = []
        cpu: list[float] = []  # this process's CPU time: what a busy machine does not inflate
        picks: list[int] = []
        for i in range(repeat):
            query = queries[i % len(queries)]
            started, started_cpu = time.perf_counter(), time.process_time()
            result = service.recall(actor=actor, query=query, mark=False)
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
            picks.append(len(result.memories))
            if result.fallback is not None:
                raise CommandError(f"recall fell back ({result.fallback}) on {query!r}")

        facts = recall_facts.live_fact_rows(AgentView.of_run(actor.run), timezone.now())
        scoring: list[float] = []
        for i in range(repeat):
            started = time.perf_counter()
            service.score_facts(queries[i % len(queries)], facts)
            scoring.append((time.perf_counter() - started) * 1000)
        sql_ms, embed_ms = self._floor(actor, queries, repeat)
        floor_ms = sql_ms + embed_ms

        self.stdout.write(
            f"recall() over {n} live facts on {connection.vendor}, {repeat} calls "
            f"({len(queries)} queries in turn), mark=False"
        )
        self.stdout.write(
            f"  median {statistics.median(wall):.1f} ms   p95 {percentile(wall, 0.95):.1f} ms   "
            f"max {max(wall):.1f} ms   first (cold caches) {cold:.1f} ms"
        )
        self.stdout.write(
            f"  CPU time of this process: median {statistics.median(cpu):.1f} ms   "
            f"p95 {percentile(cpu, 0.95):.1f} ms (the database server's work not included)"
        )
        self.stdout.write(
            f"  scoring alone: median {statistics.median(scoring):.1f} ms   "
            f"p95 {percentile(scoring, 0.95):.1f} ms"
        )
        self.stdout.write(
            f"  floor {floor_ms:.1f} ms (raw SQL of the live facts {sql_ms:.1f} ms + the query's "
            f"embedding {embed_ms:.1f} ms, medians): median / floor "
            f"{statistics.median(wall) / floor_ms:.2f}, p95 / floor "
            f"{percentile(wall, 0.95) / floor_ms:.2f}"
        )
        self.stdout.write(f"  memories picked per call: median {statistics.median(picks):g}")
        self.stdout.write(
            f"  embedding the {min(n, len(self.texts))} distinct facts at write time (stored; "
            f"not part of recall): {self.embed_ms:.0f} ms"
        )

    def _floor(self, actor: Actor, queries: list[str], repeat: int) -> tuple[float, float]:
        """Medians in ms of what any recall of these facts costs at least: reading the agent's
        live facts with one raw SQL statement, and embedding the query."""
        embedder = embeddings.get_embedder()
        sql: list[float] = []
        embed: list[float] = []
        with connection.cursor() as cursor:
            for i in range(repeat):
                started = time.perf_counter()
                FLOORS["recall"](cursor, {"recall_agent": actor.run.agent})
                sql.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                if embedder is not None:
                    embedder.embed([queries[i % len(queries)]])
                embed.append((time.perf_counter() - started) * 1000)
        return statistics.median(sql), statistics.median(embed)
