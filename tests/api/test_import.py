"""`POST /api/admin/import`: a superuser imports an export sent as the body; the whole file
is checked first (a 400 lists every bad line, nothing is written); importing twice changes
nothing; the body limit is the import's own."""

from __future__ import annotations

import json

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, Note, Project

from .conftest import error_code


@pytest.fixture
def admin_token(make_user):
    root = make_user("root", superuser=True)
    return services.token_create(actor=None, user=root)[1]


def export(api, token) -> bytes:
    response = api.get("/api/admin/projects/acme-web/export", token)
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def send(api, token, body: bytes, query: str = ""):
    return api.client.post(
        f"/api/admin/import{query}",
        body,
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_a_superuser_imports_an_export_into_a_new_project_twice(api, tokens, world, admin_token):
    services.note_write(actor=world.as_agent, kind="fact", content="Deploys need the VPN on.")
    services.fact_save(actor=world.as_agent, text="The staging database is read-only.")
    body = export(api, tokens.manager)
    first = send(api, admin_token, body, "?project=acme-copy")
    assert first.status_code == 200, first.json()
    report = first.json()
    assert report["project"] == "acme-copy" and report["createdProject"] is True
    assert report["remapped"] is True and report["inserted"]["note"] == 2
    copy = Project.objects.get(slug="acme-copy")
    assert set(Note.objects.filter(project=copy).values_list("content", flat=True)) == {
        "Deploys need the VPN on.",
        "The staging database is read-only.",
    }
    again = send(api, admin_token, body, "?project=acme-copy").json()
    assert again["createdProject"] is False and not sum(again["inserted"].values())
    assert again["unchanged"]["note"] == 2
    assert AuditEvent.objects.filter(project=copy, action="memory.import").count() == 2


def test_a_bad_file_lists_every_bad_line_and_writes_nothing(api, tokens, world, admin_token):
    services.note_write(actor=world.as_agent, kind="fact", content="Deploys need the VPN on.")
    lines = export(api, tokens.manager).splitlines()
    lines.insert(2, b"{not json")
    lines.append(b"\xff\xfe not utf-8")
    response = send(api, admin_token, b"\n".join(lines[:-1]), "?project=acme-bad")
    assert response.status_code == 400 and error_code(response) == "memory_invalid"
    problems = response.json()["error"]["lines"]
    assert any(p["line"] == 3 for p in problems), problems
    assert not Project.objects.filter(slug="acme-bad").exists()
    binary = send(api, admin_token, b"\n".join(lines), "?project=acme-bad")
    assert binary.status_code == 400 and binary.json()["error"]["lines"][-1]["message"]
    assert not Project.objects.filter(slug="acme-bad").exists()


def test_only_superusers_import(api, tokens, world):
    body = export(api, tokens.manager)
    for token in (tokens.manager, tokens.agent):
        response = send(api, token, body, "?project=acme-copy")
        assert response.status_code == 403, response.json()
    assert not Project.objects.filter(slug="acme-copy").exists()


def test_the_import_has_its_own_body_limit(api, tokens, world, admin_token, settings):
    body = export(api, tokens.manager)
    assert len(body) < 2_500_000
    settings.MEMORY_PORTAL_IMPORT_MAX_BYTES = len(body) - 1
    response = send(api, admin_token, body, "?project=acme-copy")
    assert response.status_code == 413 and error_code(response) == "memory_payload_too_large"
    settings.MEMORY_PORTAL_IMPORT_MAX_BYTES = len(body)
    assert send(api, admin_token, body, "?project=acme-copy").status_code == 200
    big = json.dumps({"text": "x" * 2_700_000}).encode()
    other = api.client.post(
        "/api/v1/memories",
        big,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tokens.agent}",
    )
    assert other.status_code == 413, "every other route keeps the 2.5 MB limit"


def test_a_bad_project_slug_is_refused(api, tokens, world, admin_token):
    response = send(api, admin_token, export(api, tokens.manager), "?project=no%20spaces")
    assert response.status_code == 400 and error_code(response) == "memory_invalid"
