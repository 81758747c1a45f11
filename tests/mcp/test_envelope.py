"""`/mcp` speaks the API's envelope (SPEC §3.4): every HTTP-level refusal is JSON with a code,
a message and a hint; JSON-RPC errors use the standard codes; a retryable refusal carries
`retryAfter`; a reviewer is offered only what it may call."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory_portal.api import mcp_server
from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError

ACCEPT = "application/json, text/event-stream"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "1"}},
}  # fmt: skip


@pytest.fixture
def token(world):
    return services.token_create(actor=None, run=world.run)[1]


def _post(client: Client, token: str, body, *, content_type="application/json", **headers):
    data = body if isinstance(body, str) else json.dumps(body)
    headers.setdefault("HTTP_ACCEPT", ACCEPT)
    return client.post(
        "/mcp", data=data, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}",
        **headers,
    )  # fmt: skip


def _envelope(response) -> dict:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    error = response.json()["error"]
    assert error["code"] and error["message"] and error["hint"], error
    return error


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("wrong content type", 415, "memory_invalid"),
        ("body too large for the SDK", 413, "memory_payload_too_large"),
        ("body too large for the server", 413, "memory_payload_too_large"),
        ("not JSON", 400, "memory_invalid"),
        ("no Accept", 406, "memory_invalid"),
        ("a Host not served", 400, "memory_invalid"),
    ],
)
def test_every_http_level_refusal_is_the_envelope(client, token, case, status, code):
    send = {
        "wrong content type": lambda: _post(client, token, INIT, content_type="text/plain"),
        "body too large for the SDK": lambda: _post(client, token, "x" * (1024 * 1024 + 1)),
        "body too large for the server": lambda: _post(client, token, "x" * (3 * 1024 * 1024)),
        "not JSON": lambda: _post(client, token, "{not json"),
        "no Accept": lambda: _post(client, token, INIT, HTTP_ACCEPT="text/html"),
        "a Host not served": lambda: _post(client, token, INIT, HTTP_HOST="evil.example"),
    }[case]
    response = send()
    assert response.status_code == status, response.content[:300]
    assert _envelope(response)["code"] == code


def test_a_get_is_a_405_in_the_envelope(client, token):
    response = client.get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT=ACCEPT)
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert _envelope(response)["code"] == "method_not_allowed"


def test_an_unknown_prompt_is_invalid_params(client, token):
    body = {"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "nope"}}
    answer = _post(client, token, body).json()
    assert answer["id"] == 7 and answer["error"]["code"] == -32602  # JSON-RPC invalid params


def test_a_retryable_refusal_carries_retry_after():
    busy = MemoryPortalError("memory_busy", "The project is busy with another change.")
    body = json.loads(mcp_server.refusal_result(busy).content[0].text)
    assert body["code"] == "memory_busy" and body["retryAfter"] == busy.retry_after >= 1
    refused = MemoryPortalError("memory_forbidden", "No.")
    assert "retryAfter" not in json.loads(mcp_server.refusal_result(refused).content[0].text)


def test_a_reviewer_is_offered_only_what_it_may_call(world):
    reviewer = Actor.agent_run(world.reviewer_run)
    offered = mcp_server.operations_for(reviewer)
    names = {op.name for op in offered}
    assert {"memory_search", "memory_read", "memory_status"} <= names
    writes = {"memory_write", "memory_forget", "memory_save_fact", "memory_append_day",
              "memory_archive", "memory_unarchive"}  # fmt: skip
    assert not names & writes
    for op in offered:
        result = mcp_server.call_tool(reviewer, op.name, {})
        if result.is_error:
            refusal = json.loads(result.content[0].text)
            assert refusal["code"] != "memory_tool_forbidden", (op.name, refusal)
    writer = {op.name for op in mcp_server.operations_for(Actor.agent_run(world.run))}
    assert names < writer
