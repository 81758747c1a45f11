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
    first = send(api, admin_token, body, "?project=acme-copy&grantMembers=true")
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
    assert again["members"] == []  # into an existing project: never
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


def test_an_import_never_grants_membership_unseen(api, tokens, world, admin_token, make_user):
    """A member line used to make anyone a manager of an existing project, silently. Now it
    never touches an existing project's members; into a project the import creates, the dry
    run lists every member and role, and the import is refused until they are confirmed."""
    from memory_portal.memory.models import Membership

    intruder = make_user("intruder")
    lines = export(api, tokens.manager).splitlines()
    for name, role in (("intruder", "manager"), ("ghost", "member")):
        lines.insert(1, json.dumps({"type": "member", "username": name, "role": role}).encode())
    end = json.loads(lines[-1])
    end["counts"]["member"] += 2
    lines[-1] = json.dumps(end).encode()
    body = b"\n".join(lines) + b"\n"

    # Into the existing project: imported, members untouched, and the dry run says so.
    dry = send(api, admin_token, body, "?dryRun=true")
    assert dry.status_code == 200 and dry.json()["dryRun"] is True
    assert dry.json()["createdProject"] is False and dry.json()["members"] == []
    into = send(api, admin_token, body)
    assert into.status_code == 200, into.json()
    assert into.json()["members"] == [] and into.json()["unchanged"]["member"] == 4
    assert not Membership.objects.filter(user=intruder).exists()
    event = AuditEvent.objects.filter(action="memory.import").latest("id")
    assert event.details["members_added"] == []

    # Into a new project: the dry run names everyone; unconfirmed, nothing is written.
    dry = send(api, admin_token, body, "?project=acme-copy&dryRun=true").json()
    assert dry["createdProject"] is True and not dry["inserted"]
    assert {(m["username"], m["role"], m["account"]) for m in dry["members"]} == {
        ("intruder", "manager", True), ("ghost", "member", False),
        (world.manager.username, "manager", True), (world.member.username, "member", True),
    }  # fmt: skip
    refused = send(api, admin_token, body, "?project=acme-copy")
    assert refused.status_code == 400 and error_code(refused) == "import_members_unconfirmed"
    assert "intruder (manager)" in refused.json()["error"]["message"]
    assert "grantMembers" in refused.json()["error"]["hint"]
    assert not Project.objects.filter(slug="acme-copy").exists()
    done = send(api, admin_token, body, "?project=acme-copy&grantMembers=true").json()
    assert {(m["username"], m["role"]) for m in done["members"]} == {
        ("intruder", "manager"), (world.manager.username, "manager"),
        (world.member.username, "member"),
    }  # fmt: skip
    event = AuditEvent.objects.filter(action="memory.import").latest("id")
    assert {"username": "intruder", "role": "manager"} in event.details["members_added"]


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
    assert send(api, admin_token, body, "?project=acme-copy&grantMembers=1").status_code == 200
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


def test_the_check_is_bounded_in_depth_lines_time_and_problems(
    api, tokens, world, admin_token, settings
):
    """No file holds a worker long or grows it without bound: a line nested past 400 levels
    (decoding it would recurse that deep: a 500 before), more lines than the bound (empty ones
    count: 30 MB of them took minutes before), a check past its seconds — each a 400
    import_limit naming the bound — and a file of bad lines stops being read at 1,000 problems."""
    import time

    from memory_portal.memory.portability.checks import MAX_PROBLEMS

    deep = send(api, admin_token, b"[" * 200_000 + b"\n")
    assert deep.status_code == 400 and error_code(deep) == "import_limit"
    assert deep.json()["error"]["reason"] == "depth"
    assert deep.json()["error"]["hint"]
    # Brackets inside strings are text, not nesting.
    text = json.dumps({"type": "nope", "content": "[" * 5000}).encode()
    assert error_code(send(api, admin_token, text + b"\n")) == "memory_invalid"

    started = time.monotonic()
    empty = send(api, admin_token, b"\n" * 30_000_000)
    assert time.monotonic() - started < 10
    assert empty.status_code == 400 and error_code(empty) == "import_limit"
    assert empty.json()["error"]["reason"] == "lines"
    assert "50,000 lines" in empty.json()["error"]["message"]

    bad = b'{"type": "note"}\n' * 200_000
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "IMPORT_MAX_LINES": 300_000}
    started = time.monotonic()
    many = send(api, admin_token, bad)
    assert time.monotonic() - started < 10
    assert many.status_code == 400 and error_code(many) == "memory_invalid"
    assert f"{MAX_PROBLEMS:,}+ problem(s)" in many.json()["error"]["message"]

    body = export(api, tokens.manager)
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "IMPORT_CHECK_SECONDS": 0}
    slow = send(api, admin_token, body, "?project=acme-slow")
    assert slow.status_code == 400 and error_code(slow) == "import_limit"
    assert slow.json()["error"]["reason"] == "time"
    assert not Project.objects.filter(slug="acme-slow").exists()


def test_a_long_line_or_large_event_details_is_a_bad_line(api, tokens, world, admin_token):
    services.note_write(actor=world.as_agent, kind="fact", content="Deploys need the VPN on.")
    lines = export(api, tokens.manager).splitlines()
    event = next(i for i, line in enumerate(lines) if b'"type":"event"' in line)
    record = json.loads(lines[event])
    record["details"] = {f"k{i}": i for i in range(1000)}
    lines[event] = json.dumps(record).encode()
    lines.insert(1, json.dumps({"type": "member", "username": "x" * 70_000}).encode())
    response = send(api, admin_token, b"\n".join(lines) + b"\n")
    assert error_code(response) == "memory_invalid"
    problems = {p["line"]: p["message"] for p in response.json()["error"]["lines"]}
    assert "longer than 65,536 characters" in problems[2]
    assert "longer than 4,096 characters as JSON" in problems[event + 2]
