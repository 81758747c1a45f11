"""Export and import (SPEC §3.5): the NDJSON format against its JSON Schema, no secrets or
tokens, whole-file validation, idempotent import, remapped ids, and the round trip."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import jsonschema
import pytest
from django.core.management import call_command
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import ApiToken, AuditEvent, Note, Project, Recovery
from memory_portal.memory.portability import (
    ImportInvalid,
    json_schema,
    project_export,
    project_import,
)
from memory_portal.memory.validation import content_identity

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "export-format-v1.schema.json"


def export(project) -> list[str]:
    return list(project_export(actor=None, project=project))


def comparable(lines: list[str]) -> list[dict]:
    """The content of an export, without the fields documented as the exporter's own: the
    header's time, the setting's counters, the events' ids (and the import's marker)."""
    out = []
    for line in lines[1:]:
        record = json.loads(line)
        if record["type"] == "setting":
            record.pop("revision"), record.pop("revocationEpoch")
        if record["type"] == "event":
            record.pop("id")
            record["details"].pop("imported_event", None)
        out.append(record)
    return out


@pytest.fixture
def filled(world):
    w = world
    child = services.run_create(actor=None, agent=w.agent, parent=w.run)
    w.shared = services.note_write(actor=w.as_agent, kind="lesson", content="Retry once.").note
    services.note_write(
        actor=Actor.agent_run(child), kind="fact", scope="application", content="Uses Redis."
    )
    old = services.fact_save(actor=w.as_agent, text="Builds take 4 minutes.").note
    services.fact_save(actor=w.as_agent, text="Builds take 9 minutes.", supersedes=old.pk)
    services.day_append(actor=w.as_agent, line="looked at the build")
    gone = services.note_write(actor=w.as_agent2, kind="fact", content="Old port 8080.").note
    services.note_forget(actor=w.as_manager, note_id=gone.pk)
    services.note_approve(actor=w.as_manager, note_id=w.shared.pk)
    return w


def test_the_schema_in_docs_is_the_one_the_code_validates_with():
    assert json.loads(SCHEMA.read_text()) == json.loads(json.dumps(json_schema()))


def test_export_lines_follow_the_schema_and_carry_no_tokens(filled):
    services.token_create(actor=None, run=filled.run)
    lines = export(filled.project)
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    records = [json.loads(line) for line in lines]
    for record in records:
        assert not list(validator.iter_errors(record)), record
    assert records[0]["type"] == "header" and records[0]["version"] == 1
    assert records[-1]["type"] == "end" and records[-1]["counts"]["note"] == 6
    text = "".join(lines)
    for token in ApiToken.objects.all():
        assert token.secret_hash not in text and token.prefix not in text
    assert "password" not in text
    statuses = {r["status"] for r in records if r["type"] == "note"}
    assert statuses == {"active", "archived", "forgotten"}


def test_round_trip_into_a_fresh_project_keeps_ids_and_content(filled):
    first = export(filled.project)
    services.project_delete(actor=None, project=filled.project, confirm="acme-web")
    report = project_import(actor=None, lines=first, grant_members=True)
    assert report.created_project and not report.remapped
    assert report.counts["note"] == 6 and report.counts["recovery"] == 1
    again = export(Project.objects.get(slug="acme-web"))
    assert comparable(again) == comparable(first)
    assert AuditEvent.objects.filter(action="memory.import").count() == 1


def test_import_twice_changes_nothing(filled):
    lines = export(filled.project)
    project_import(actor=None, lines=lines, project_slug="acme-copy", grant_members=True)
    copy = Project.objects.get(slug="acme-copy")
    before = (
        export(copy),
        AuditEvent.objects.filter(project=copy).exclude(action="memory.import").count(),
    )
    report = project_import(actor=None, lines=lines, project_slug="acme-copy")
    assert sum(report.counts.values()) == 0 and report.unchanged["note"] == 6
    after = (
        export(copy),
        AuditEvent.objects.filter(project=copy).exclude(action="memory.import").count(),
    )
    assert comparable(after[0]) == comparable(before[0]) and after[1] == before[1]
    assert after[0][2] == before[0][2]  # the revision did not move


def test_another_slug_remaps_every_id_consistently(filled):
    lines = export(filled.project)
    report = project_import(
        actor=None, lines=lines, project_slug="acme-copy", grant_members=True
    )
    assert report.remapped
    copy = Project.objects.get(slug="acme-copy")
    originals = set(Note.objects.filter(project=filled.project).values_list("pk", flat=True))
    copies = Note.objects.filter(project=copy)
    assert copies.count() == 6 and not originals & set(copies.values_list("pk", flat=True))
    new = copies.exclude(supersedes=None).get()
    assert new.supersedes.project == copy and new.supersedes.superseded_by == new
    assert Recovery.objects.get(project=copy).note.project == copy
    assert sorted(copies.values_list("content", flat=True)) == sorted(
        Note.objects.filter(project=filled.project).values_list("content", flat=True)
    )
    # Agents see the copy's notes as their place's: facts belong to the copied agents.
    fact = copies.filter(scope="agent", kind="fact", status="active").get()
    assert fact.owner_agent.project == copy


def test_a_bad_file_is_reported_line_by_line_and_nothing_is_written(filled):
    lines = export(filled.project)
    note_at = next(i for i, line in enumerate(lines) if '"type":"note"' in line)
    bad = json.loads(lines[note_at])
    bad["content"] = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    broken = [*lines]
    broken[note_at] = json.dumps(bad)
    broken.insert(3, "{not json\n")
    broken.append(json.dumps({"type": "recovery", "id": "rec_x"}) + "\n")
    count = Note.objects.count()
    with pytest.raises(ImportInvalid) as info:
        project_import(actor=None, lines=broken, project_slug="acme-copy")
    numbers = [number for number, _ in info.value.errors]
    assert 4 in numbers and note_at + 2 in numbers and len(broken) in numbers
    assert any("secret" in message for _, message in info.value.errors)
    assert Note.objects.count() == count and not Project.objects.filter(slug="acme-copy").exists()


def test_only_administrators_import(filled):
    with pytest.raises(MemoryPortalError) as info:
        project_import(actor=filled.as_manager, lines=export(filled.project), project_slug="x-y")
    assert info.value.code == "memory_forbidden"


def test_the_cap_holds_on_import(filled, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "PROJECT_NOTE_CAP": 5}
    with pytest.raises(ImportInvalid):
        project_import(actor=None, lines=export(filled.project), project_slug="acme-copy")


def test_commands_export_and_import(filled, tmp_path, capsys):
    path = tmp_path / "acme.jsonl"
    call_command("memory_export", "acme-web", stdout=path.open("w"))
    call_command("memory_import", str(path), "--project", "acme-copy", "--grant-members")
    assert "Created project acme-copy (ids remapped)" in capsys.readouterr().out
    assert Note.objects.filter(project__slug="acme-copy").count() == 6


def test_export_at_the_cap_stays_flat(world):
    now = timezone.now()
    Note.objects.bulk_create(
        Note(
            project=world.project,
            kind="fact",
            content=f"filler note {i} " + "x" * 1500,
            created_at=now,
            updated_at=now,
            place_key=content_identity(
                kind="fact",
                scope="project",
                target="long_term",
                day=None,
                application_id=None,
                owner_agent_id=None,
                content=f"filler note {i}",
            ),
        )
        for i in range(2000)
    )
    tracemalloc.start()
    size = 0
    for line in project_export(actor=None, project=world.project):
        size += len(line.encode())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert size > 3_000_000
    # Streamed: never the whole file in memory (the peak is a few 200-note chunks and the
    # driver's buffers, about a quarter of the file on PostgreSQL).
    assert peak < size / 3, (peak, size)


def test_the_command_names_a_line_that_is_not_utf8(tmp_path):
    import io

    from django.core.management import CommandError, call_command

    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"type": "header"}\n\xff\xfe not text\n')
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("memory_import", str(path), stderr=err)
    assert "line 2: not UTF-8 text" in err.getvalue()
