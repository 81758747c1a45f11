"""Migration 0022 gives every note and run a `read_key` and rebuilds the read records around it,
keeping every record (its note, run, tool, rank, score, trust and time); going back restores
them as they were."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("memory", "0021_reads")]
AFTER = [("memory", "0022_compact_reads")]
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
FIELDS = ("note_id", "run_id", "tool", "rank", "score", "trust", "read_at")


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _old_reads(apps) -> set[tuple]:
    return set(apps.get_model("memory", "NoteRead").objects.values_list(*FIELDS))


def test_0022_keeps_every_read_record_and_gives_them_back():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old_apps = _migrate(BEFORE)
        Project = old_apps.get_model("memory", "Project")
        Agent = old_apps.get_model("memory", "Agent")
        Run = old_apps.get_model("memory", "Run")
        Note = old_apps.get_model("memory", "Note")
        OldRead = old_apps.get_model("memory", "NoteRead")
        project = Project.objects.create(slug="mig", name="Migration")
        agent = Agent.objects.create(id="agt_mig", project=project, name="A", stage="runtime")
        runs = [
            Run.objects.create(id=f"run_mig{i}", agent=agent, project=project,
                               top_level_run_id=f"run_mig{i}")
            for i in range(2)
        ]  # fmt: skip
        notes = [
            Note.objects.create(
                id=f"mem_mig{i}", project=project, kind="fact", content=f"Fact {i}",
                place_key=f"p{i}", trust=trust,
            )
            for i, trust in enumerate(("learned", "reviewed", "rejected"))
        ]  # fmt: skip
        served = [
            (notes[0], runs[0], "search", 1, 0.75, "learned", T0),
            (notes[1], runs[0], "search", 2, 0.5, "reviewed", T0),
            (notes[0], runs[1], "start_recall", 1, None, "learned", T0 + timedelta(minutes=1)),
            (notes[2], runs[1], "list", 3, None, "rejected", T0 + timedelta(minutes=2)),
            (notes[1], runs[1], "read", 1, None, "learned", T0 + timedelta(minutes=3)),
            (notes[2], runs[0], "recall", 1, 0.25, "reviewed", T0 + timedelta(minutes=4)),
        ]
        for note, run, tool, rank, score, trust, when in served:
            OldRead.objects.create(
                note=note, run=run, tool=tool, rank=rank, score=score, trust=trust, read_at=when
            )
        before = _old_reads(old_apps)
        assert len(before) == 6

        new_apps = _migrate(AFTER)
        keys = {}
        for name in ("Note", "Run"):
            rows = new_apps.get_model("memory", name).objects.values_list("id", "read_key")
            keys.update({key: pk for pk, key in rows})
        assert len(keys) == 5 and all(0 < key < 2**63 for key in keys)
        NewRead = new_apps.get_model("memory", "NoteRead")
        after = {
            (keys[r.note_id], keys[r.run_id], r.tool, r.rank, r.score, r.trust, r.read_at)
            for r in NewRead.objects.all()
        }
        assert after == before

        assert _old_reads(_migrate(BEFORE)) == before
    finally:
        _migrate(latest)


def test_the_read_table_has_no_key_on_postgresql_and_finds_old_reads_by_time():
    """What the ORM does not say of the table: no primary key constraint on PostgreSQL (it
    would add a third to the table) and a BRIN index on read_at for the retention."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's layout")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT contype FROM pg_constraint WHERE conrelid = 'project_memory_read'::regclass"
        )
        assert "p" not in {kind for (kind,) in cursor.fetchall()}
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'project_memory_read'"
        )
        indexes = dict(cursor.fetchall())
    assert set(indexes) == {"reads_of_note", "reads_of_run", "read_by_age"}
    assert "USING brin (read_at)" in indexes["read_by_age"]
