"""Progress of the long commands: periodic lines when not on a terminal, a final line with
the count and the time; the commands write it to stderr, never into their output."""

from __future__ import annotations

import io
import json

from django.core.management import call_command

from memory_portal.memory.models import Note
from memory_portal.memory.progress import Progress

from ..dashboard.conftest import write_note


def test_lines_every_few_seconds_and_at_the_end(monkeypatch):
    clock = iter([0.0, 1.0, 6.0, 7.0, 13.0, 14.0])
    monkeypatch.setattr("memory_portal.memory.progress.time.monotonic", lambda: next(clock))
    out = io.StringIO()
    progress = Progress("exporting acme", total=4, unit="line", stream=out)  # t=0
    progress.update()  # t=1: too soon
    progress.update()  # t=6: a line
    progress.update()  # t=7: too soon
    progress.update()  # t=13: a line
    progress.close()  # t=14
    assert out.getvalue().splitlines() == [
        "exporting acme: 2 of 4 lines (50%)",
        "exporting acme: 4 of 4 lines (100%)",
        "exporting acme: 4 of 4 lines in 14.0 s",
    ]


def test_export_and_import_report_progress_on_stderr(world, tmp_path):
    write_note(world, "Exported with progress")
    out, err = io.StringIO(), io.StringIO()
    call_command("memory_export", "acme-web", stdout=out, stderr=err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]  # only NDJSON
    assert lines[-1]["type"] == "end"
    assert err.getvalue().startswith("exporting acme-web: ") and " lines in " in err.getvalue()

    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue())
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "memory_import", str(path), "--project", "acme-copy", "--grant-members",
        stdout=out, stderr=err,
    )  # fmt: skip
    phases = err.getvalue()
    assert "reading and checking the file" in phases and "writing, in one transaction" in phases
    assert "vectors: " in phases and " notes in " in phases  # the vectors' bar, then its total
    assert "Created project acme-copy" in out.getvalue()


def test_memory_embed_reports_progress_on_stderr(world, stored_vectors):
    from memory_portal.memory import services

    notes = [services.fact_save(actor=world.as_agent, text=f"Fact {i} about deploys").note
             for i in range(3)]  # fmt: skip
    Note.objects.filter(pk__in=[n.pk for n in notes]).update(embedding=None, embedding_model="")
    out, err = io.StringIO(), io.StringIO()
    call_command("memory_embed", batch=2, stdout=out, stderr=err)
    assert err.getvalue().startswith("embedding: 3 of 3 notes in ")
    assert "3 notes embedded" in out.getvalue()
