"""`memory_bench_recall`: how long `recall()` takes over N live facts (docs/RECALL.md, "Speed").

It creates a throwaway project (slug `bench-recall-…`) with one agent holding N live facts,
written with `bulk_create` and the same identity hash the services compute, and a day log of
today. The facts are the labelled set's (tests/memory/recall_set.py), repeated with a ticket key
to reach N; the queries are the set's. Then it calls `recall(actor=…, query=…, mark=False)`, the
dashboard preview path (the whole recall: the query for live facts, scoring, picking, the day
log and the block, without the recall-count UPDATE) and reports the median and p95 in ms, plus
the first (cold) call and the scoring share alone. The project is deleted at the end unless
--keep.
"""

from __future__ import annotations

import math
import statistics
import time
import uuid
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils import timezone

from memory_portal.memory import lexical, services
from memory_portal.memory import recall as recall_module
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Kind, MemorySetting, Note, Scope, Stage, Target
from memory_portal.memory.recall_eval import default_dataset_path, load_dataset
from memory_portal.memory.selectors import AgentView
from memory_portal.memory.validation import stamp_identity

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

    def handle(self, *args, facts=300, repeat=50, dataset=None, keep=False, **options) -> None:
        if facts < 1 or repeat < 1:
            raise CommandError("--facts and --repeat must be at least 1.")
        try:
            data = load_dataset(dataset)
        except OSError as exc:
            raise CommandError(f"cannot load the dataset: {exc}") from exc
        texts = [f["text"] for f in data["FACTS"]]
        queries = [q["query"] for q in data["QUERIES"]]

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
            self._fill(project, agent, texts, facts)
            self._measure(actor, queries, facts, repeat)
        finally:
            if keep:
                self.stdout.write(f"kept project {project.slug}")
            else:
                services.project_delete(actor=None, project=project, confirm=project.slug)

    def _fill(self, project, agent, texts: list[str], n: int) -> None:
        now = timezone.now()
        notes = []
        for i in range(n):
            base = texts[i % len(texts)]
            text = base if i < len(texts) else f"{base} (again in PIN-{1000 + i})"
            note = Note(
                project=project,
                scope=Scope.AGENT,
                owner_agent=agent,
                kind=Kind.FACT,
                target=Target.LONG_TERM,
                content=text[:500],
                expires_at=now + timedelta(days=90),
                created_at=now - timedelta(minutes=i),
                updated_at=now - timedelta(minutes=i),
                created_by_agent_id=agent.pk,
                created_by_stage=agent.stage,
            )
            stamp_identity(note)
            notes.append(note)
        Note.objects.bulk_create(notes, batch_size=500)

    def _measure(self, actor: Actor, queries: list[str], n: int, repeat: int) -> None:
        lexical._fact_terms.cache_clear()
        lexical.stem.cache_clear()
        # The facts' vectors are computed once per process (docs/RECALL.md, "Speed"); that
        # one-off cost is reported apart, before the first timed recall.
        started = time.perf_counter()
        recall_module.score_facts(
            queries[0], recall_module.live_facts(AgentView.of_run(actor.run), timezone.now())
        )
        embed_once = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        first = recall_module.recall(actor=actor, query=queries[0], mark=False)
        cold = (time.perf_counter() - started) * 1000
        if first.considered != n:
            raise CommandError(f"recall saw {first.considered} facts, expected {n}")

        wall: list[float] = []
        picks: list[int] = []
        for i in range(repeat):
            query = queries[i % len(queries)]
            started = time.perf_counter()
            result = recall_module.recall(actor=actor, query=query, mark=False)
            wall.append((time.perf_counter() - started) * 1000)
            picks.append(len(result.memories))
            if result.fallback is not None:
                raise CommandError(f"recall fell back ({result.fallback}) on {query!r}")

        facts = recall_module.live_facts(AgentView.of_run(actor.run), timezone.now())
        scoring: list[float] = []
        for i in range(repeat):
            started = time.perf_counter()
            recall_module.score_facts(queries[i % len(queries)], facts)
            scoring.append((time.perf_counter() - started) * 1000)

        self.stdout.write(
            f"recall() over {n} live facts on {connection.vendor}, {repeat} calls "
            f"({len(queries)} queries in turn), mark=False"
        )
        self.stdout.write(
            f"  median {statistics.median(wall):.1f} ms   p95 {percentile(wall, 0.95):.1f} ms   "
            f"max {max(wall):.1f} ms   first (cold caches) {cold:.1f} ms"
        )
        self.stdout.write(
            f"  scoring alone: median {statistics.median(scoring):.1f} ms   "
            f"p95 {percentile(scoring, 0.95):.1f} ms"
        )
        self.stdout.write(f"  memories picked per call: median {statistics.median(picks):g}")
        self.stdout.write(
            f"  embedding the {n} facts once per process (before the timed calls): "
            f"{embed_once:.0f} ms"
        )
