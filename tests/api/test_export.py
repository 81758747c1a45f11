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
