"""`memory_bench_read_lists`: the read records at scale. PostgreSQL. A throwaway project
(`bench-readlists-…`, deleted at the end unless --keep) with --notes facts and --runs runs of
--agents agents; the read table grows to --reads records (default 1,000,000) in three stages
(1 %, 10 %, 100 %), written with COPY as agents' calls would write them: each call is one run
served five notes (their popularity falls off as 1/rank, so the most-read note holds about a
sixth of all reads), a run makes its calls in turn, time moves forward.

At each stage (after ANALYZE) it times, median of --repeat calls, what the dashboard and the
admin API ask of the records:

- `note list`: the first page (20) of who read the most-read note and of a note of median
  popularity, and the fifth page of the most-read one (selectors.note_reads + reads_page);
- `run list`: the first page of what a run read (selectors.run_reads, with each note now);
- `reach`: the blast radius — of the most-read note (selectors.note_reach: a veto's event,
  the note page), of a page of rows of the 50 most-read notes (selectors.notes_reach: the notes
  page) and of their bulk selection (selectors.reach_of): each counts a note's newest reads
  only (REACH_SAMPLE, ROW_SAMPLE), so it should stay flat too;
- `overview`: the project's Overview (selectors.project_overview), whose most-read list counts
  the reads of the latest 200 runs and whose unread list asks each note for its last read;
- `rows` of the database and `bytes/read`: the table with its indexes
  (pg_total_relation_size) over its rows; target ≤ 120 (docs/CONCEPTS.md, "Read records").

The lists should stay flat from stage to stage: they walk the note's and the run's index,
newest first, and stop after a page.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from bench.scale import Table, _ulid_id
from memory_portal.memory import models as m
from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.ids import new_read_key

TARGET_BYTES = 120
NOTES_A_CALL = 5
BATCH = 50_000


class Command(BaseCommand):
    help = "The read records grown to a million: the note's and the run's lists, bytes per read."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reads", type=int, default=1_000_000, help="records (1,000,000)")
        parser.add_argument("--notes", type=int, default=200, help="facts (200)")
        parser.add_argument("--runs", type=int, default=20_000, help="runs (20,000)")
        parser.add_argument("--agents", type=int, default=20, help="agents (20)")
        parser.add_argument("--repeat", type=int, default=30, help="timed calls a figure (30)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--keep", action="store_true", help="keep the throwaway project")

    def handle(self, *args, **opts) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("memory_bench_read_lists needs PostgreSQL: set DATABASE_URL.")
        reads, notes, runs = opts["reads"], opts["notes"], opts["runs"]
        if reads < 100 or notes < 10 or runs < 10 or opts["agents"] < 1 or opts["repeat"] < 1:
            raise CommandError("--reads ≥ 100, --notes ≥ 10, --runs ≥ 10, --agents, --repeat ≥ 1.")
        self.rng = random.Random(opts["seed"])
        self.repeat = opts["repeat"]
        self.total = reads
        prefix = f"bench-readlists-{uuid.uuid4().hex[:6]}"
        if not m.NoteRead.objects.exists():
            # Empty, but maybe not small: an earlier run's deleted records leave their pages
            # behind until a vacuum, and they would count in the bytes per read.
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {m.NoteRead._meta.db_table}")
        try:
            self._setup(prefix, notes, runs, opts["agents"])
            self.stdout.write(
                "p50 ms of: the note lists (first page of the most-read note and of a median "
                "one, fifth page of the most-read), a run's list; the reach of the most-read "
                "note (a veto's event, the note page), of the 50 most-read notes' rows (the "
                "notes page) and of their bulk selection; the Overview"
            )
            self.stdout.write(
                f"{'reads':>9} {'bytes/read':>10} {'top':>7} {'median':>7} {'top p5':>7} "
                f"{'run':>7} {'reach':>7} {'rows':>7} {'bulk':>7} {'overview':>8}  "
                "(most-read note's reads)"
            )
            written = 0
            for stage in sorted({max(1, reads // 100), max(1, reads // 10), reads}):
                written += self._grow(stage - written)
                self._measure(written)
        finally:
            if not opts["keep"]:
                m.AuditEvent.objects.filter(project_ref__startswith=prefix).delete()
                m.Project.objects.filter(slug__startswith=prefix).delete()
                get_user_model().objects.filter(username=prefix).delete()

    # --- the project, its notes and runs -----------------------------------------------------
    def _setup(self, prefix: str, notes: int, runs: int, agents: int) -> None:
        self.project = services.project_create(actor=None, slug=prefix, name=prefix)
        m.MemorySetting.objects.filter(project=self.project).update(enabled=True)
        user = get_user_model().objects.create_user(username=prefix)
        services.membership_set(actor=None, project=self.project, user=user, role=m.Role.MANAGER)
        self.manager = Actor.person(user)
        created = [
            services.agent_create(
                actor=None, project=self.project, name=f"Bench agent {i}", stage=m.Stage.RUNTIME
            )
            for i in range(agents)
        ]
        self.notes = []
        for n in range(notes):
            if n % 100 == 0:  # a run writes at most 128 new notes
                writer = services.run_create(actor=None, agent=created[0])
            written = services.note_write(
                actor=Actor.agent_run(writer),
                kind="fact",
                content=f"Bench fact {n}: release train {n} ships after its checks pass.",
            )
            self.notes.append(written.note.pk)
        self.key_of = dict(
            m.Note.objects.filter(pk__in=self.notes).values_list("id", "read_key")
        )
        self.note_of = {key: note_id for note_id, key in self.key_of.items()}
        # Runs as an orchestrator leaves them: all finished but the last 1 %, started in turn.
        start = timezone.now() - timedelta(days=60)
        table = Table(m.Run)
        self.runs = []  # (id, read key)
        for i in range(runs):
            when = start + timedelta(seconds=i * 60)
            run_id, run_key = _ulid_id("run", when), new_read_key()
            running = i >= runs - max(1, runs // 100)
            table.add(
                id=run_id,
                agent_id=created[i % agents].pk,
                project_id=self.project.pk,
                top_level_run_id=run_id,
                read_key=run_key,
                status=m.RunStatus.RUNNING if running else m.RunStatus.SUCCEEDED,
                started_at=when,
                finished_at=None if running else when + timedelta(minutes=5),
            )
            self.runs.append((run_id, run_key))
        with transaction.atomic(), connection.cursor() as cursor:
            table.flush(cursor.connection.cursor())
            cursor.execute(f"ANALYZE {m.Run._meta.db_table}")  # as autovacuum would, soon
        # Popularity by 1/rank over a shuffled order of the notes.
        order = list(self.notes)
        self.rng.shuffle(order)
        self.by_popularity = order
        self.weights = [1 / (rank + 1) for rank in range(len(order))]
        # The calls spread over the last 20 days, the newest now: all inside the 30 days a blast
        # radius counts.
        self.step = timedelta(days=20) / max(1, self.total // NOTES_A_CALL)
        self.read_at = timezone.now() - timedelta(days=20)
        self.call = 0

    # --- growing the read table ----------------------------------------------------------------
    def _grow(self, count: int) -> int:
        """Write `count` more records, as calls of five notes by the runs in turn."""
        table = Table(m.NoteRead)
        per_run = max(1, count // NOTES_A_CALL // len(self.runs) or 1)
        written = 0
        with connection.cursor() as cursor:
            raw = cursor.connection.cursor()
            while written < count:
                run_id, run_key = self.runs[(self.call // per_run) % len(self.runs)]
                self.recent_run = run_id
                picked = set()
                while len(picked) < NOTES_A_CALL:
                    picked.add(self.rng.choices(self.by_popularity, self.weights)[0])
                self.read_at += self.step
                for rank, note_id in enumerate(picked, start=1):
                    if written == count:
                        break
                    table.add(
                        note_id=self.key_of[note_id],
                        run_id=run_key,
                        tool=m.ReadTool.SEARCH,
                        rank=rank,
                        score=round(self.rng.random(), 4),
                        trust=m.Trust.LEARNED,
                        read_at=self.read_at,
                    )
                    written += 1
                self.call += 1
                if len(table.rows) >= BATCH:
                    with transaction.atomic():
                        table.flush(raw)
            with transaction.atomic():
                table.flush(raw)
            cursor.execute(f"ANALYZE {m.NoteRead._meta.db_table}")
        return written

    # --- measuring -------------------------------------------------------------------------
    def _p50(self, work) -> float:
        times = []
        for _ in range(self.repeat):
            began = time.perf_counter()
            work()
            times.append((time.perf_counter() - began) * 1000)
        return statistics.median(times)

    def _measure(self, written: int) -> None:
        table = m.NoteRead._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_total_relation_size('{table}'), count(*) FROM {table}")
            size, rows = cursor.fetchone()
        # The note read most so far (at a small stage the likeliest may not have been drawn).
        most = (
            m.NoteRead.objects.filter(note_id__in=self.note_of)
            .values("note_id")
            .annotate(reads=Count("*"))
            .order_by("-reads", "note_id")
            .first()
        )
        top, top_reads = self.note_of[most["note_id"]], most["reads"]
        median = self.by_popularity[len(self.by_popularity) // 2]
        run = self.recent_run

        def note_page(note_id: str, offset: int = 0):
            listed = selectors.note_reads(actor=self.manager, project=self.project, note_id=note_id)
            page = selectors.reads_page(listed, offset=offset)
            if note_id == top and not offset and not page.rows:
                raise CommandError(f"no reads listed for {note_id}")

        def run_page():
            listed = selectors.run_reads(actor=self.manager, project=self.project, run_id=run)
            if not selectors.reads_page(listed, offset=0, changes=True).rows:
                raise CommandError(f"no reads listed for {run}")

        page = self.by_popularity[:50]  # a page of rows, the 50 most-read notes
        figures = (
            self._p50(lambda: note_page(top)),
            self._p50(lambda: note_page(median)),
            self._p50(lambda: note_page(top, offset=80)),
            self._p50(run_page),
            self._p50(lambda: selectors.note_reach(note_id=top)),
            self._p50(lambda: selectors.notes_reach(page)),
            self._p50(lambda: selectors.reach_of(page)),
            self._p50(lambda: selectors.project_overview(actor=self.manager, project=self.project)),
        )
        self.stdout.write(
            f"{written:>9,} {size / rows:>10.1f} "
            + " ".join(f"{f:>7.2f}" for f in figures[:-1])
            + f" {figures[-1]:>8.2f}"
            + f"  ({top_reads:,})"
        )
        if rows != written:
            self.stdout.write(f"  the table holds {rows:,} records, not only these")
        elif written == self.total:
            verdict = "meets" if size / rows <= TARGET_BYTES else "misses"
            self.stdout.write(f"bytes/read {size / rows:.1f} {verdict} the target ≤ {TARGET_BYTES}")
