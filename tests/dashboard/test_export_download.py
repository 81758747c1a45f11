"""Settings' "Download export": a manager gets the API's export, streamed; a member does not."""

from __future__ import annotations

import json

from .conftest import write_note

URL = "/p/acme-web/export/"


def test_a_manager_downloads_the_export(world, manager_client):
    write_note(world, "Exported from the dashboard")
    response = manager_client.get(URL)
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"].startswith('attachment; filename="acme-web-')
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "end"
    assert any(line.get("content") == "Exported from the dashboard" for line in lines)
    settings = manager_client.get("/p/acme-web/settings/").content.decode()
    assert 'href="/p/acme-web/export/" download>Download export</a>' in settings
    assert "Download an export first" in settings  # beside the reset


def test_a_member_is_refused(world, member_client, outsider_client):
    response = member_client.get(URL)
    assert response.status_code == 302
    assert outsider_client.get(URL).status_code == 404
    settings = member_client.get("/p/acme-web/settings/").content.decode()
    assert "A project manager downloads" in settings
