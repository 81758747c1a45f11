"""Migration 0005 backfills `content_key` and recomputes `content_hash` over the normalised
text, changing nothing else and never hiding or changing a live note (SPEC §2.3)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory_portal.memory import validation

# Schema changes cannot run inside the test's transaction; the schema goes back to the latest
# migrations at the end, whatever happens.
pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("memory", "0004_review_routine")]
AFTER = [("memory", "0005_content_key_step_detach")]
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _old_identity(kind, scope, target, day, application_id, owner_agent_id, content) -> str:
    """content_hash as 0004-era code wrote it: the exact text in its place."""
    key = json.dumps(
        [
            kind,
            scope,
            target,
            day.isoformat() if day else "",
            application_id or 0,
            owner_agent_id or "",
            content,
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(key.encode()).hexdigest()


def _fields(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname != "content_hash"]


def test_0005_backfills_content_key_and_the_normalised_identity():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old_apps = _migrate(BEFORE)
        Project = old_apps.get_model("memory", "Project")
        Application = old_apps.get_model("memory", "Application")
        Agent = old_apps.get_model("memory", "Agent")
        OldNote = old_apps.get_model("memory", "Note")
        project = Project.objects.create(slug="mig", name="Migration")
        app = Application.objects.create(project=project, slug="web", name="Web")
        agent = Agent.objects.create(
            id="agt_mig", project=project, application=app, name="Runtime", stage="runtime"
        )

        def note(note_id, content, minutes, **kw):
            kw.setdefault("kind", "fact")
            kw.setdefault("scope", "project")
            kw.setdefault("target", "long_term")
            place = [kw["kind"], kw["scope"], kw["target"], kw.get("day")]
            place += [kw.get("application") and kw["application"].pk, kw.get("owner_agent_id")]
            content_hash = kw.pop("content_hash", None) or _old_identity(*place, content)
            at = T0 + timedelta(minutes=minutes)
            return OldNote.objects.create(
                id=note_id,
                project=project,
                content=content,
                content_hash=content_hash,
                created_at=at,
                updated_at=at,
                **kw,
            )

        day = date(2026, 1, 4)
        note("mem_twin_old", "Deploy needs the VPN", 0)
        note("mem_twin_young", "deploy needs  the VPN", 1)  # the same after normalisation
        note("mem_forgotten", "Old\u00a0Fact  Text", 2, status="forgotten")
        # Forgotten content takes the normalised identity even where a live twin holds it, so
        # the write check finds it in its place too.
        note("mem_twin_forgotten", "DEPLOY NEEDS THE VPN", 7, status="forgotten")
        note(
            "mem_vetoed",
            "Vetoed\u200b text",
            3,
            status="archived",
            archive_reason="vetoed",
            scope="application",
            application=app,
        )
        note("mem_fact", "The queue holds 100 JOBS", 4, scope="agent", owner_agent_id=agent.pk)
        note("mem_plain", "already normal text", 5, kind="lesson")
        note(
            "mem_day",
            "09:00 PIN-1 Line one\n09:05 PIN-1 line  TWO",
            6,
            kind="day",
            scope="agent",
            owner_agent_id=agent.pk,
            target="daily",
            day=day,
            content_hash=validation.day_row_identity(owner_agent_id=agent.pk, day=day),
        )
        fields = _fields(OldNote)
        before = {row["id"]: row for row in OldNote.objects.values(*fields, "content_hash")}
        assert len(before) == 8

        new_apps = _migrate(AFTER)
        Note = new_apps.get_model("memory", "Note")
        after = {n.id: n for n in Note.objects.all()}
        assert set(after) == set(before)
        for note_id, n in after.items():
            assert n.content_key == validation.content_key(n.content), note_id
            if n.kind == "day":
                expected = validation.day_row_identity(owner_agent_id=agent.pk, day=day)
            elif note_id == "mem_twin_young":
                # Its normalised identity is the older twin's: it keeps its old key and stays
                # live, so no live note is changed or hidden by the migration.
                expected = before[note_id]["content_hash"]
            else:
                expected = validation.note_identity(n)
            assert n.content_hash == expected, note_id
            unchanged = {f: getattr(n, f) for f in fields}
            assert unchanged == {f: before[note_id][f] for f in fields}, note_id
        assert after["mem_twin_old"].content_hash != before["mem_twin_old"]["content_hash"]
        assert after["mem_plain"].content_hash == before["mem_plain"]["content_hash"]
        twins = ("mem_twin_old", "mem_twin_young", "mem_twin_forgotten")
        assert len({after[i].content_key for i in twins}) == 1
        assert after["mem_twin_forgotten"].content_hash == after["mem_twin_old"].content_hash
        assert {after[i].status for i in ("mem_twin_old", "mem_twin_young")} == {"active"}
        assert validation.note_identity(after["mem_twin_young"]) == (
            after["mem_twin_old"].content_hash
        )
    finally:
        _migrate(latest)
