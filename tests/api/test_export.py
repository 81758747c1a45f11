"""`GET /api/admin/projects/{p}/export`: streamed NDJSON for managers; members refused,
outsiders not found."""

from __future__ import annotations

import json

from memory_portal.memory import services

from .conftest import error_code

URL = "/api/admin/projects/acme-web/export"


def test_managers_get_the_streamed_export(api, tokens, world):
    services.note_write(actor=world.as_agent, kind="fact", content="Deploys need the VPN on.")
    response = api.get(URL, tokens.manager)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["project"] == "acme-web"
    assert lines[-1]["type"] == "end" and lines[-1]["counts"]["note"] == 1
    assert tokens.manager.split("_")[1] not in json.dumps(lines)


def test_members_are_refused_and_outsiders_get_404(api, tokens, world):
    response = api.get(URL, tokens.member)
    assert response.status_code == 403 and error_code(response) == "memory_forbidden"
    response = api.get(URL, tokens.outsider)
    assert response.status_code == 404 and error_code(response) == "not_found"


# --- An export never stops silently -------------------------------------------------------------


def _failing(monkeypatch, target: str):
    """Make the export's read of `target` fail as a statement timeout would."""
    from django.db import OperationalError

    from memory_portal.memory.portability import export

    def fail(*args, **kwargs):
        raise OperationalError("canceling statement due to statement timeout")

    if target == "setting":
        monkeypatch.setattr(export, "MemorySetting", type("S", (), {"objects": type(
            "M", (), {"filter": staticmethod(fail)})}))  # fmt: skip
    else:
        monkeypatch.setattr(export, "_note", fail)


def test_a_failure_before_the_first_byte_is_a_503_with_retry_after(api, tokens, world, monkeypatch):
    _failing(monkeypatch, "setting")
    response = api.get(URL, tokens.manager)
    assert response.status_code == 503 and not response.streaming
    assert error_code(response) == "service_unavailable"
    assert int(response["Retry-After"]) >= 1


def test_a_failure_mid_stream_ends_with_an_error_line_and_aborts(api, tokens, world, monkeypatch):
    import pytest

    from memory_portal.memory.portability.export import ExportFailed

    services.note_write(actor=world.as_agent, kind="fact", content="Deploys need the VPN on.")
    _failing(monkeypatch, "note")
    response = api.get(URL, tokens.manager)
    assert response.status_code == 200 and response.streaming
    received = []
    with pytest.raises(ExportFailed):
        for chunk in response.streaming_content:
            received.append(chunk)
    lines = [json.loads(line) for line in b"".join(received).splitlines()]
    assert lines[-1]["type"] == "error" and "incomplete" in lines[-1]["message"]
    assert all(line["type"] != "end" for line in lines)


def test_the_command_fails_unless_it_wrote_the_end_line(world, monkeypatch):
    from io import StringIO

    import pytest
    from django.core.management import CommandError, call_command

    services.note_write(actor=world.as_agent, kind="fact", content="Deploys need the VPN on.")
    out = StringIO()
    call_command("memory_export", "acme-web", stdout=out)
    assert json.loads(out.getvalue().splitlines()[-1])["type"] == "end"
    _failing(monkeypatch, "note")
    out = StringIO()
    with pytest.raises(CommandError, match="the output is incomplete"):
        call_command("memory_export", "acme-web", stdout=out)
    assert '"type":"end"' not in out.getvalue()
