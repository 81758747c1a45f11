"""`memory_load_scale`: grows the database to N notes of realistic shape with COPY, idempotent
on N; on SQLite it refuses clearly."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Count

from memory_portal.memory import counters
from memory_portal.memory import models as m
from tests.bench import command


@pytest.mark.django_db
def test_refuses_on_sqlite():
    if connection.vendor == "postgresql":
        pytest.skip("the refusal is SQLite's")
    with pytest.raises(CommandError, match="needs PostgreSQL"):
        call_command(command("memory_load_scale"), "--notes", "10", stdout=StringIO())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_loads_projects_of_2000_and_is_idempotent():
    out = StringIO()
    call_command(command("memory_load_scale"), "--notes", "2500", stdout=out)
    assert "Loaded 2,500 notes in 2 projects" in out.getvalue()
    sizes = dict(m.Project.objects.annotate(n=Count("notes")).values_list("slug", "n"))
    assert sizes == {"scale-00001": 2000, "scale-00002": 500}
    # realistic: every kind, trust and status; evidence, tags, audit and trace rows
    assert set(m.Note.objects.values_list("kind", flat=True).distinct()) == {
        "fact",
        "lesson",
        "decision",
        "navigation",
        "day",
    }
    assert set(m.Note.objects.values_list("trust", flat=True).distinct()) == {
        "learned",
        "reviewed",
        "rejected",
    }
    assert set(m.Note.objects.values_list("status", flat=True).distinct()) == {
        "active",
        "archived",
        "forgotten",
    }
    assert m.Note.objects.exclude(evidence_repository=None).count() > 0
    assert m.Note.objects.exclude(tags_text="").count() > 0
    assert m.Recovery.objects.count() == m.Note.objects.filter(status="forgotten").count()
    assert m.AuditEvent.objects.filter(note_ref__gt="").count() == 3 * 2500
    assert m.Run.objects.count() == 625 and m.ToolCallCount.objects.count() == 2 * 625
    assert m.MemorySetting.objects.filter(enabled=True).count() == 2
    for setting in m.MemorySetting.objects.all():  # the stored counters match the COPY
        stored = {f: getattr(setting, f) for f in counters.FIELDS}
        assert stored == counters.recounted(setting.project_id)
    # the stored rows pass the models' own constraints (the one active identity per place)
    assert (
        m.Note.objects.filter(status="active")
        .values("project", "place_key")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
        == 0
    )

    again = StringIO()
    call_command(command("memory_load_scale"), "--notes", "2500", stdout=again)
    assert "nothing loaded" in again.getvalue()
    assert m.Note.objects.count() == 2500
    call_command(command("memory_load_scale"), "--notes", "4000", stdout=StringIO())
    assert m.Note.objects.count() == 4000 and m.Project.objects.count() == 3
