"""/mcp with the official MCP client over Streamable HTTP against a live server: the same
tools and schemas as GET /api/tools for every kind of run, every tool called, refusals as tool
errors with their code, no leak across projects, the token checked before any session, the
start prompt, and the trace rows the run page counts."""

from __future__ import annotations

import json

import httpx2
import pytest
from django.test import Client as DjangoClient
from mcp import Client

from memory_portal.api import mcp_server, v1
from memory_portal.api.tools import tool_definition
from memory_portal.memory import services
from memory_portal.memory.models import Note, ToolCallCount
from tests.conftest import build_world

from .conftest import mcp_session, result_json, run_on_loop

pytestmark = pytest.mark.django_db(transaction=True)

MEMORY_TOOLS = [
    "memory_save_fact",
    "memory_list_facts",
    "memory_archive",
    "memory_unarchive",
    "memory_append_day",
    "memory_recall",
]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def api_tools(token: str) -> list[dict]:
    response = DjangoClient().get("/api/tools", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    return response.json()["tools"]


def list_tools(url: str, token: str) -> list:
    async def go():
        async with mcp_session(url, token) as client:
            return (await client.list_tools()).tools

    return run_on_loop(go())


def call(url: str, token: str, name: str, arguments: dict | None = None):
    async def go():
        async with mcp_session(url, token) as client:
            return await client.call_tool(name, arguments or {})

    return run_on_loop(go())


def refusal(result) -> dict:
    assert result.is_error, result
    error = result_json(result)
    assert error["message"] and error["hint"], error
    return error


@pytest.mark.parametrize("kind", ["writer", "reviewer", "readonly"])
def test_tools_and_schemas_are_those_of_api_tools(mcp_url, run_tokens, kind):
    token = getattr(run_tokens, kind)
    http = api_tools(token)
    listed = list_tools(mcp_url, token)
    # A reviewer, like a read-only token, is refused every write: it is offered the reads.
    reads_only = kind in ("readonly", "reviewer")
    memory = ["memory_list_facts", "memory_recall"] if reads_only else MEMORY_TOOLS
    assert [t.name for t in listed] == [t["name"] for t in http] + memory
    by_name = {t.name: t for t in listed}
    for tool in http:
        assert by_name[tool["name"]].input_schema == tool["parameters"], tool["name"]
        assert by_name[tool["name"]].description == tool["description"]
    for operation in v1.OPERATIONS:
        if operation.name in by_name:
            # The v1 routes' own Pydantic models (their OpenAPI request bodies).
            schema = tool_definition(operation)["parameters"]
            assert by_name[operation.name].input_schema == schema
    expected = {
        "writer": 7,
        "reviewer": 3,  # read, search, status
        "readonly": 3,  # no writes
    }
    assert len(http) == expected[kind]


def test_no_tools_while_memory_is_off_or_for_an_ineligible_stage(mcp_url, world):
    implementer = services.token_create(actor=None, run=world.implementer_run)[1]
    assert api_tools(implementer) == [] and list_tools(mcp_url, implementer) == []
    writer = services.token_create(actor=None, run=world.run)[1]
    services.memory_disable(actor=None, project=world.project)
    assert api_tools(writer) == [] and list_tools(mcp_url, writer) == []
    refused = refusal(call(mcp_url, writer, "memory_save_fact", {"text": "Off means off."}))
    assert refused["code"] == "memory_disabled"


def test_the_initialize_handshake_works_too(mcp_url, run_tokens):
    """Clients of the 2025 protocol (initialize, then calls) and of the current one."""

    async def go():
        headers = {"Authorization": f"Bearer {run_tokens.writer}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(mcp_server_transport(mcp_url, http), mode="legacy", cache=None) as client,
        ):
            tools = (await client.list_tools()).tools
            return client.protocol_version, client.server_info.name, len(tools)

    version, name, count = run_on_loop(go())
    assert version == "2025-11-25" and name == "memory-portal" and count == 13


def mcp_server_transport(url, http):
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(url, http_client=http)


def test_every_tool_answers_as_its_http_route(mcp_url, run_tokens, world):
    token = run_tokens.writer

    async def go():
        async with mcp_session(mcp_url, token) as c:
            answers = {}

            async def ok(name, arguments=None):
                result = await c.call_tool(name, arguments or {})
                assert not result.is_error, (name, result)
                assert result.structured_content == result_json(result)
                answers[name] = result_json(result)
                return answers[name]

            note = await ok("memory_write", {"kind": "fact", "content": "Deploys run on Fridays."})
            await ok("memory_read", {"id": note["id"]})
            await ok("memory_search", {"query": "Fridays"})
            await ok("memory_status")
            forgotten = await ok("memory_forget", {"id": note["id"]})
            await ok("memory_restore", {"recoveryId": forgotten["recoveryId"]})
            await ok("scratchpad", {"action": "add", "text": "check the deploy"})
            fact = await ok("memory_save_fact", {"text": "The staging VPN is needed."})
            await ok("memory_list_facts", {"kind": "fact"})
            await ok("memory_archive", {"id": fact["id"], "reason": "network changed"})
            await ok("memory_unarchive", {"id": fact["id"]})
            await ok("memory_append_day", {"line": "Looked at the deploy."})
            await ok("memory_recall", {"query": "staging VPN"})
            last_read = result_json(await c.call_tool("memory_read", {"id": note["id"]}))
            return answers, last_read

    answers, last_read = run_on_loop(go())
    assert set(answers) == {t.name for t in list_tools(mcp_url, token)}
    note_id = answers["memory_write"]["id"]
    assert answers["memory_write"]["created"] is True
    assert Note.objects.get(pk=note_id).content == "Deploys run on Fridays."
    # The same answer as the HTTP route gives for the same call.
    http_read = DjangoClient().post(
        "/api/tools/memory_read",
        data=json.dumps({"id": note_id}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert last_read == http_read.json()
    assert answers["memory_read"]["entries"][0]["content"] == "Deploys run on Fridays."
    assert [e["id"] for e in answers["memory_search"]["entries"]] == [note_id]
    assert answers["memory_restore"] == {"id": note_id, "status": "active"}
    assert answers["memory_archive"]["status"] == "archived"
    assert answers["memory_unarchive"]["status"] == "active"
    assert answers["memory_list_facts"]["data"][0]["text"] == "The staging VPN is needed."
    assert answers["memory_append_day"]["kind"] == "day"
    assert [m["text"] for m in answers["memory_recall"]["memories"]] == [
        "The staging VPN is needed."
    ]


def test_refusals_are_tool_errors_with_their_code(mcp_url, run_tokens):
    forbidden = refusal(
        call(mcp_url, run_tokens.reviewer, "memory_write", {"kind": "fact", "content": "x y z"})
    )
    assert forbidden["code"] == "memory_tool_forbidden"
    readonly = refusal(call(mcp_url, run_tokens.readonly, "memory_forget", {"id": "mem_x"}))
    assert readonly["code"] == "memory_tool_forbidden"
    invalid = refusal(call(mcp_url, run_tokens.writer, "memory_write", {"kind": "poem"}))
    assert invalid["code"] == "memory_invalid" and invalid["field"] == "kind"
    extra = refusal(call(mcp_url, run_tokens.writer, "memory_status", {"project": "other"}))
    assert extra["code"] == "memory_invalid" and extra["field"] == "project"
    unknown = refusal(call(mcp_url, run_tokens.writer, "drop_tables"))
    assert unknown["code"] == "memory_tool_forbidden"


def test_another_projects_note_is_not_found_and_not_leaked(mcp_url, run_tokens, make_user, world):
    other = build_world(make_user, slug="other-web")
    secret_plan = "The other project's launch is on the ninth."
    note = services.note_write(actor=other.as_agent, kind="fact", content=secret_plan).note
    for name, arguments in [
        ("memory_read", {"id": note.id}),
        ("memory_forget", {"id": note.id}),
        ("memory_archive", {"id": note.id, "reason": "mine now"}),
    ]:
        result = call(mcp_url, run_tokens.writer, name, arguments)
        assert refusal(result)["code"] == "memory_not_found", name
        assert "ninth" not in result.content[0].text
    found = result_json(call(mcp_url, run_tokens.writer, "memory_search", {"query": "launch"}))
    assert found["entries"] == []
    assert Note.objects.get(pk=note.id).status == "active"


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "auth_required"),
        ("Bearer mp_000000000000_nope", "auth_invalid"),
        ("Basic dXNlcjpwdw==", "auth_invalid"),
    ],
)
def test_no_session_starts_without_a_live_run_token(mcp_url, authorization, code):
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    response = httpx2.post(mcp_url, json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code
    assert "mcp-session-id" not in response.headers
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_the_official_client_is_refused_without_a_token(mcp_url):
    with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in its own groups
        list_tools(mcp_url, None)


def test_a_person_token_is_not_an_agent(mcp_url, run_tokens):
    headers = {"Authorization": f"Bearer {run_tokens.manager}"}
    response = httpx2.post(mcp_url, json=INITIALIZE, headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "memory_tool_forbidden"


def test_a_finished_runs_token_is_refused(mcp_url, run_tokens, world):
    assert len(list_tools(mcp_url, run_tokens.writer)) == 13
    services.run_update(actor=None, run=world.run, status="succeeded")
    headers = {"Authorization": f"Bearer {run_tokens.writer}"}
    response = httpx2.post(mcp_url, json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "auth_invalid" and "has finished" in error["message"]


def test_the_start_prompt_is_the_start_recall_block(mcp_url, run_tokens, world):
    services.fact_save(actor=world.as_agent, text="Use the blue deploy pipeline.")

    async def go():
        async with mcp_session(mcp_url, run_tokens.writer) as client:
            prompts = (await client.list_prompts()).prompts
            return prompts, await client.get_prompt(mcp_server.START_PROMPT)

    prompts, prompt = run_on_loop(go())
    assert [p.name for p in prompts] == ["memory_start"]
    text = prompt.messages[0].content.text
    assert text.startswith("--- MEMORY ---") and "Use the blue deploy pipeline." in text


def test_the_start_prompt_carries_the_possibly_related_tier(mcp_url, world):
    """A run's task near the agent's memory but about none of it confidently: the prompt's
    block lists the closest facts under their own heading (docs/CONCEPTS.md, two tiers)."""
    for text in (
        "Celery workers ship in their own chart and must be restarted after any change.",
        "The readiness probe also checks Redis: with Redis down the pods never become ready.",
    ):
        services.fact_save(actor=world.as_agent, text=text)
    run = services.run_create(
        actor=None,
        agent=world.agent,
        task_title="The pre-live shipment job",
        task_description="It sits idle for ages and then aborts.",
    )
    token = services.token_create(actor=None, run=run)[1]

    async def go():
        async with mcp_session(mcp_url, token) as client:
            return await client.get_prompt(mcp_server.START_PROMPT)

    text = run_on_loop(go()).messages[0].content.text
    heading = text.index("Possibly related (lower confidence):")
    assert text.index("Celery workers ship") > heading, text


def test_mcp_calls_are_traced_by_tool_and_outcome(mcp_url, run_tokens, world):
    call(mcp_url, run_tokens.writer, "memory_write", {"kind": "fact", "content": "One fact."})
    call(mcp_url, run_tokens.writer, "memory_status")
    call(mcp_url, run_tokens.writer, "memory_write", {"kind": "poem"})
    call(mcp_url, run_tokens.writer, "memory_save_fact", {"text": "A fact of my own."})
    rows = {(r.tool, r.outcome): r.count for r in ToolCallCount.objects.filter(run=world.run)}
    assert rows == {
        ("mcp:write", "ok"): 1,
        ("mcp:status", "ok"): 1,
        ("mcp:write", "memory_invalid"): 1,
        ("mcp:v1-save", "ok"): 1,
    }
    world.run.refresh_from_db()
    # One budget for both transports: each MCP call took one call from the run's 512.
    assert world.run.tool_calls == 4
    # The run's page counts them by tool and outcome.
    page = DjangoClient()
    page.force_login(world.manager)
    html = page.get(f"/p/{world.project.slug}/runs/{world.run.id}/").content.decode()
    assert "<code>mcp:write</code>" in html and "<code>mcp:v1-save</code>" in html
    assert "memory_invalid" in html


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_only_post_is_served(mcp_url, run_tokens, method):
    """Stateless, JSON only: no server stream to open with GET (it would hold a thread), no
    session to end with DELETE."""
    headers = {
        "Authorization": f"Bearer {run_tokens.writer}",
        "Accept": "application/json, text/event-stream",
    }
    response = httpx2.request(method, mcp_url, headers=headers, timeout=10)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    error = response.json()["error"]  # the API's envelope, as every HTTP-level refusal
    assert error["code"] == "method_not_allowed" and error["hint"]


def test_edge_refusals_on_mcp_are_json_not_html(run_tokens):
    """The edge middlewares and the failure handler treat /mcp as API (failures.is_api)."""
    response = DjangoClient().post("/mcp?x=%00", HTTP_AUTHORIZATION=f"Bearer {run_tokens.writer}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "memory_invalid"


def test_under_hold_an_mcp_write_is_held_from_other_runs(mcp_url, world, run_tokens):
    """The review policy `hold` through MCP: the write says `held`, its own run finds it, another
    agent's run neither reads it by id nor finds it, until a person approves it."""
    services.memory_policy_set(actor=world.as_manager, project=world.project, policy="hold")
    other = services.token_create(actor=None, run=world.run2)[1]
    write = call(mcp_url, run_tokens.writer, "memory_write", {"kind": "fact", "content": HELD})
    written = result_json(write)
    assert written["held"] is True and written["trust"] == "learned"
    search = {"query": "release freeze Fridays"}
    mine = result_json(call(mcp_url, run_tokens.writer, "memory_search", search))
    assert [e["id"] for e in mine["entries"]] == [written["id"]]
    theirs = call(mcp_url, other, "memory_search", search)
    assert result_json(theirs)["entries"] == []
    by_id = call(mcp_url, other, "memory_read", {"id": written["id"]})
    assert by_id.is_error and refusal(by_id)["code"] == "memory_not_found"
    status = result_json(call(mcp_url, run_tokens.writer, "memory_status"))
    assert status["reviewPolicy"] == "hold" and status["heldCount"] == 1

    services.note_approve(actor=world.as_manager, note_id=written["id"])
    theirs = result_json(call(mcp_url, other, "memory_search", search))
    assert [(e["id"], e["trust"]) for e in theirs["entries"]] == [(written["id"], "reviewed")]


HELD = "The release freeze starts on Fridays at noon UTC."
