"""Every bad input is a clear 4xx in the API's envelope, never a 500: bodies past the upload
limit, strings that are not valid Unicode text, naive timestamps, names past their column,
and writes to routes that do not exist."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.test import Client

from memory_portal.memory import services
from memory_portal.memory.models import Agent, Application, Note, Project

from .conftest import error_code

BASE = "/api/admin/projects/acme-web"
LONE = "\ud800"  # a lone surrogate: a valid JSON escape, not a Unicode character


@pytest.fixture
def admin(make_user):
    return services.token_create(actor=None, user=make_user("root", superuser=True))[1]


# --- Bodies past the upload limit ---------------------------------------------------------------


def too_big() -> bytes:
    text = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    return json.dumps({"text": text}).encode()


def test_a_body_past_the_limit_is_413_before_it_is_read(api, tokens):
    response = api.client.post(
        "/api/v1/memories",
        data=too_big(),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tokens.agent}",
    )
    assert response.status_code == 413 and error_code(response) == "memory_payload_too_large"
    assert "2,621,440" in response.json()["error"]["message"]
    assert not Note.objects.exists()


def test_a_chunked_body_without_content_length_is_capped_while_it_is_read(api, tokens):
    """Behind gunicorn a chunked body has no Content-Length (wsgi.input_terminated): it is
    read up to the limit and refused past it, and a small one is served as usual."""

    def chunked(body: bytes):
        return api.client.generic(
            "POST",
            "/api/v1/memories",
            HTTP_AUTHORIZATION=f"Bearer {tokens.agent}",
            HTTP_TRANSFER_ENCODING="chunked",
            CONTENT_TYPE="application/json",
            **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True},
        )

    response = chunked(too_big())
    assert response.status_code == 413 and error_code(response) == "memory_payload_too_large"
    small = chunked(json.dumps({"text": "Chunked uploads work"}).encode())
    assert small.status_code == 201, small.content
    assert Note.objects.get().content == "Chunked uploads work"


# --- Strings that are not valid Unicode text ------------------------------------------------------


def lone_surrogate_cases(world_ids):
    """(method, path, token, body, field): every kind of string the API takes."""
    return [
        ("POST", "/api/tools/memory_write", "agent", {"kind": "fact", "content": LONE}, "content"),
        (
            "POST",
            "/api/tools/memory_write",
            "agent",
            {"kind": "fact", "content": "ok", "summary": f"a{LONE}"},
            "summary",
        ),
        (
            "POST",
            "/api/tools/memory_write",
            "agent",
            {"kind": "fact", "content": "ok", "tags": [LONE]},
            "tags",
        ),
        ("POST", "/api/tools/memory_read", "agent", {"id": f"mem_{LONE}"}, "id"),
        ("POST", "/api/tools/memory_forget", "agent", {"id": LONE}, "id"),
        ("POST", "/api/tools/memory_restore", "agent", {"recoveryId": LONE}, "recoveryId"),
        ("POST", "/api/tools/scratchpad", "agent", {"action": "add", "text": LONE}, "text"),
        ("POST", "/api/tools/scratchpad", "agent", {"action": "done", "itemId": LONE}, "itemId"),
        ("POST", "/api/v1/memories", "agent", {"text": f"fact {LONE}"}, "text"),
        ("POST", "/api/v1/memories", "agent", {"text": "ok", "supersedes": LONE}, "supersedes"),
        ("POST", "/api/v1/memories", "manager", {"text": "ok", "agentId": LONE}, "agentId"),
        ("POST", "/api/v1/memories/day", "agent", {"line": LONE}, "line"),
        ("POST", "/api/v1/memories/recall", "manager", {"agentId": LONE}, "agentId"),
        ("POST", "/api/admin/projects", "admin", {"id": "new-one", "name": LONE}, "name"),
        ("POST", f"{BASE}/applications", "manager", {"id": "new-app", "name": LONE}, "name"),
        ("POST", f"{BASE}/agents", "manager", {"name": LONE, "stage": "runtime"}, "name"),
        ("POST", f"{BASE}/members", "manager", {"username": LONE}, "username"),
        ("POST", f"{BASE}/runs", "manager", {"agentId": LONE}, "agentId"),
        (
            "POST",
            f"{BASE}/runs",
            "manager",
            {"agentId": world_ids["agent"], "taskKey": LONE},
            "taskKey",
        ),
        ("PATCH", f"{BASE}/runs/{world_ids['run']}", "manager", {"step": LONE}, "step"),
        (
            "PUT",
            f"{BASE}/applications/storefront/repositories/repo",
            "manager",
            {"revision": LONE},
            "revision",
        ),
    ]


# api.py's `_field` drops every part of ninja's error location that equals a source name
# ("query", "path"), so a field called `query` or `path` is reported as `body`, and
# `evidence.path` as `evidence`. The fix (drop only the leading source and parameter) is
# asked of api.py's owner; strict, so this fails once it lands and the marker can go.
FIELDS_NAMED_LIKE_A_SOURCE = [
    ("POST", "/api/tools/memory_search", "agent", {"query": LONE}, "query"),
    ("POST", "/api/v1/memories/recall", "agent", {"query": LONE}, "query"),
    ("POST", "/api/admin/repositories", "admin", {"id": "repo", "path": LONE}, "path"),
    (
        "POST",
        "/api/tools/memory_write",
        "agent",
        {"kind": "fact", "content": "ok", "evidence": {"repositoryId": "r", "path": LONE}},
        "evidence.path",
    ),
]


def refusals_not_naming_the_field(api, cases, token_for) -> list:
    failures = []
    for method, path, who, body, field in cases:
        response = api.call(method, path, token_for[who], body)
        if response.status_code != 400:
            failures.append((method, path, field, response.status_code, response.content[:300]))
            continue
        error = response.json()["error"]
        if error["code"] != "memory_invalid" or error.get("field") != field:
            failures.append((method, path, field, error))
    return failures


def test_lone_surrogates_are_refused_naming_the_field(api, tokens, world, admin):
    ids = {"agent": world.agent.pk, "run": world.run.pk}
    token_for = {"agent": tokens.agent, "manager": tokens.manager, "admin": admin}
    failures = refusals_not_naming_the_field(api, lone_surrogate_cases(ids), token_for)
    assert not failures, failures
    assert not Project.objects.filter(slug="new-one").exists()
    assert Agent.objects.count() == 4 and Application.objects.count() == 2
    assert not Note.objects.exists()


def test_lone_surrogates_in_fields_named_like_a_source_are_a_400(api, tokens, admin):
    token_for = {"agent": tokens.agent, "admin": admin}
    for method, path, who, body, _ in FIELDS_NAMED_LIKE_A_SOURCE:
        response = api.call(method, path, token_for[who], body)
        assert response.status_code == 400 and error_code(response) == "memory_invalid"


def test_lone_surrogates_in_fields_named_like_a_source_name_the_field(api, tokens, admin):
    token_for = {"agent": tokens.agent, "admin": admin}
    failures = refusals_not_naming_the_field(api, FIELDS_NAMED_LIKE_A_SOURCE, token_for)
    assert not failures, failures


def test_a_lone_surrogate_in_a_key_or_query_parameter_is_a_400(api, tokens):
    response = api.post("/api/v1/memories", tokens.agent, {"text": "ok", LONE: 1})
    assert response.status_code == 400 and error_code(response) == "memory_invalid"
    # Percent-encoded surrogate bytes are not UTF-8: they arrive replaced, never as a 500.
    query = api.get("/api/v1/memories?agentId=%ED%A0%80&kind=fact", tokens.manager)
    assert query.status_code in {400, 404} and error_code(query) in {
        "memory_invalid",
        "memory_not_found",
        "not_found",
    }


def test_a_surrogate_pair_is_one_valid_character(api, tokens):
    response = api.post("/api/v1/memories", tokens.agent, {"text": "Ship it \ud83d\ude80"})
    assert response.status_code == 201, response.content
    assert Note.objects.get().content == "Ship it \U0001f680"


# --- Values of another JSON type (found by `make fuzz`) -------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "who", "body", "field"),
    [
        ("POST", "/api/tools/memory_search", "agent", {"query": "x", "offset": False}, "offset"),
        ("POST", "/api/tools/memory_read", "agent", {"limit": "5"}, "limit"),
        ("POST", "/api/tools/memory_read", "agent", {"limit": 5.0}, "limit"),
        ("POST", "/api/v1/memories/recall", "agent", {"start": 0}, "start"),
        ("PUT", f"{BASE}/memory", "manager", {"enabled": 0}, "enabled"),
        ("PUT", f"{BASE}/memory", "manager", {"enabled": "yes"}, "enabled"),
        (
            "POST",
            "/api/tools/memory_write",
            "agent",
            {"kind": "fact", "content": "x", "target": "daily", "date": 0},
            "date",
        ),
        ("POST", "/api/v1/memories", "agent", {"text": "x", "expiresAt": 1900000000}, "expiresAt"),
        (
            "POST",
            "/api/v1/memories",
            "agent",
            {"text": "x", "expiresAt": "1900000000"},
            "expiresAt",
        ),
    ],
)
def test_a_value_of_another_json_type_is_refused_not_coerced(
    api, tokens, method, path, who, body, field
):
    response = api.call(method, path, getattr(tokens, who), body)
    assert response.status_code == 400, response.content
    assert error_code(response) == "memory_invalid" and response.json()["error"]["field"] == field
    assert not Note.objects.exists()


def test_values_of_the_schema_type_still_pass(api, tokens):
    read = api.tool("memory_read", tokens.agent, {"limit": 5, "offset": 0})
    assert read.status_code == 200, read.content
    recall = api.post("/api/v1/memories/recall", tokens.agent, {"start": False})
    assert recall.status_code == 200, recall.content
    daily = api.tool(
        "memory_write",
        tokens.agent,
        {"kind": "fact", "content": "Daily", "target": "daily", "date": "2001-02-03"},
    )
    assert daily.status_code == 200, daily.content


# --- Timestamps without an offset -----------------------------------------------------------------


def test_a_naive_expires_at_is_utc(api, tokens):
    response = api.post(
        "/api/v1/memories",
        tokens.agent,
        {"text": "Renew the cert", "expiresAt": "2030-01-01T00:00:00"},
    )
    assert response.status_code == 201, response.content
    assert response.json()["expiresAt"].startswith("2030-01-01T00:00:00")
    assert Note.objects.get().expires_at == datetime(2030, 1, 1, tzinfo=UTC)
    past = api.post(
        "/api/v1/memories", tokens.agent, {"text": "Old", "expiresAt": "2001-01-01T00:00:00"}
    )
    assert past.status_code == 400 and past.json()["error"]["field"] == "expiresAt"


def test_an_expires_at_with_any_offset_is_stored_in_utc(api, tokens):
    """PostgreSQL takes offsets up to about ±16 hours; Python's go to ±24 (found by `make fuzz`:
    `+17:20` was a 500 on PostgreSQL). The expiry is stored in UTC, whatever the offset."""
    response = api.post(
        "/api/v1/memories",
        tokens.agent,
        {"text": "Odd offset", "expiresAt": "2773-09-18T01:36:59.91+17:20"},
    )
    assert response.status_code == 201, response.content
    assert Note.objects.get().expires_at == datetime(2773, 9, 17, 8, 16, 59, 910000, tzinfo=UTC)


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
def test_an_expires_at_past_the_calendar_is_a_400(api, tokens, value):
    response = api.post("/api/v1/memories", tokens.agent, {"text": "Edge", "expiresAt": value})
    assert response.status_code == 400 and response.json()["error"]["field"] == "expiresAt"


def test_the_openapi_says_a_naive_expires_at_is_utc(client):
    schema = client.get("/api/openapi.json").json()
    field = schema["components"]["schemas"]["MemorySaveIn"]["properties"]["expiresAt"]
    assert "UTC" in field["description"]


# --- Names past their column ----------------------------------------------------------------------


def test_names_are_checked_against_their_limit_before_the_database(api, tokens, world, admin):
    long = "n" * 100_000
    cases = [
        ("/api/admin/projects", admin, {"id": "big-one", "name": long}),
        (f"{BASE}/applications", tokens.manager, {"id": "big-app", "name": long}),
        (f"{BASE}/agents", tokens.manager, {"name": long, "stage": "runtime"}),
        ("/api/admin/repositories", admin, {"id": "big-repo", "path": "/" + long}),
    ]
    for path, token, body in cases:
        response = api.post(path, token, body)
        assert response.status_code == 400, (path, response.content[:300])
        error = response.json()["error"]
        assert error["code"] == "memory_invalid", error
        assert any(limit in error["message"] for limit in ("200", "1000")), error


def test_the_services_check_names_too(world):
    """Commands and the demo call the services directly: the same limit holds there."""
    from memory_portal.memory.errors import MemoryPortalError

    for call in (
        lambda: services.project_create(actor=None, slug="big-one", name="n" * 201),
        lambda: services.application_create(
            actor=None, project=world.project, slug="big-app", name="n" * 201
        ),
        lambda: services.agent_create(
            actor=None, project=world.project, name="n" * 201, stage="runtime"
        ),
    ):
        with pytest.raises(MemoryPortalError) as info:
            call()
        assert info.value.code == "memory_invalid" and "200" in info.value.message


# --- Routes that do not exist ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_write_to_an_unknown_route_is_a_json_404_not_a_csrf_403(db, method):
    client = Client(enforce_csrf_checks=True)
    response = client.generic(method, "/api/nothing/here", b"{}", "application/json")
    assert response.status_code == 404 and error_code(response) == "not_found"
    assert "/api/nothing/here" in response.json()["error"]["message"]
