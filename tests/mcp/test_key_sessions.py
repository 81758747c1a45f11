"""An MCP session opened with an agent key is one run of the key's agent (SPEC §3.4a): the
official client connects with the key over HTTP and through `memory mcp` (stdio), writes, and
the note shows the agent and a run of its own; ending the session finishes that run; an idle
session is finished; a revoked key or a retired agent's key is a 401."""

from __future__ import annotations

from datetime import timedelta

import httpx2
import pytest
from django.utils import timezone
from mcp import Client

from memory_portal.memory import services
from memory_portal.memory.models import ApiToken, AuditEvent, Note, Run, RunStatus

from .conftest import mcp_session, result_json, run_on_loop
from .test_stdio import command

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key(world):
    return services.key_create(actor=world.as_manager, agent=world.agent, label="Laptop")


def test_a_session_is_a_run_of_the_keys_agent_until_the_client_ends_it(mcp_url, world, key):
    agent_key, secret = key
    before = set(Run.objects.values_list("pk", flat=True))

    async def go():
        async with mcp_session(mcp_url, secret) as client:
            tools = (await client.list_tools()).tools
            first = await client.call_tool(
                "memory_write", {"kind": "fact", "content": "Sessions are runs."}
            )
            second = await client.call_tool("memory_status", {})
            running = await _run_status()
            return tools, first, second, running

    async def _run_status():
        from asgiref.sync import sync_to_async
        from django.db import connection

        def statuses():
            # asgiref's thread outlives the test: its connection must not, or the test
            # database cannot be dropped at the end of the run ("being accessed by other users").
            try:
                return list(Run.objects.exclude(pk__in=before).values_list("status", flat=True))
            finally:
                connection.close()

        return await sync_to_async(statuses)()

    tools, first, second, running = run_on_loop(go())
    assert tools[0].name == "memory_write" and not first.is_error and not second.is_error
    assert running == [RunStatus.RUNNING]
    run = Run.objects.exclude(pk__in=before).get()
    assert run.agent_id == world.agent.pk and run.agent_key_id == agent_key.pk
    assert run.parent_id is None and run.task_key == "mcp"  # the official client's name
    note = Note.objects.get(pk=result_json(first)["id"])
    assert note.created_by_agent_id == world.agent.pk and note.origin_run_id == run.pk
    # The client ended the session (DELETE): the run has succeeded, its token is revoked.
    assert run.status == RunStatus.SUCCEEDED and run.finished_at is not None
    assert not ApiToken.objects.filter(run=run, revoked_at__isnull=True).exists()
    finished = AuditEvent.objects.get(action="run.status", target_ref=run.pk)
    assert finished.details["reason"] == "mcp_session_end"


def test_the_task_key_comes_from_the_header(live_server, mcp_url, world, key):
    _key, secret = key
    headers = {"Authorization": f"Bearer {secret}", "X-Memory-Task": "PROJ-9"}

    async def go():
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(mcp_url, http_client=http)) as client,
        ):
            await client.call_tool("memory_status", {})

    run_on_loop(go())
    assert Run.objects.get(agent_key=_key).task_key == "PROJ-9"


def _initialize(url: str, secret: str, **extra_headers) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    headers = {
        "Authorization": f"Bearer {secret}",
        "Accept": "application/json, text/event-stream",
        **extra_headers,
    }
    return httpx2.post(url, json=body, headers=headers, timeout=30)


def _status_call(url: str, secret: str, session: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    headers = {
        "Authorization": f"Bearer {secret}",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-06-18",
    }
    return httpx2.post(url, json=body, headers=headers, timeout=30)


def test_sessions_are_told_apart_and_end_by_idling(mcp_url, world, key, settings):
    agent_key, secret = key
    one = _initialize(mcp_url, secret)
    two = _initialize(mcp_url, secret)
    assert one.status_code == 200 and two.status_code == 200, one.text
    s1, s2 = one.headers["Mcp-Session-Id"], two.headers["Mcp-Session-Id"]
    assert s1 != s2
    runs = {r.mcp_session: r for r in Run.objects.filter(agent_key=agent_key)}
    assert set(runs) == {s1, s2} and runs[s1].task_key == "probe"
    assert _status_call(mcp_url, secret, s1).status_code == 200

    # A session idle past the limit is finished: its next request is a 404 (start anew).
    Run.objects.filter(pk=runs[s1].pk).update(last_call_at=timezone.now() - timedelta(hours=1))
    answer = _status_call(mcp_url, secret, s1)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert Run.objects.get(pk=runs[s1].pk).status == RunStatus.SUCCEEDED
    # The cron sweep finishes idle sessions nobody touches again.
    Run.objects.filter(pk=runs[s2].pk).update(last_call_at=timezone.now() - timedelta(hours=1))
    assert services.runs_finish_idle() == 1
    assert Run.objects.get(pk=runs[s2].pk).status == RunStatus.SUCCEEDED
    # Another key's session id is not this key's.
    other_key, other_secret = services.key_create(
        actor=world.as_manager, agent=world.agent, label="Other"
    )
    s3 = _initialize(mcp_url, other_secret).headers["Mcp-Session-Id"]
    assert _status_call(mcp_url, secret, s3).status_code == 404
    # A request of a key without a session must be the initialize.
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
    refused = httpx2.post(
        mcp_url,
        json=body,
        headers={"Authorization": f"Bearer {secret}", "Accept": "application/json"},
        timeout=30,
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "memory_invalid"


def test_a_revoked_or_retired_key_is_a_401_and_open_sessions_end(mcp_url, world, key):
    agent_key, secret = key
    session = _initialize(mcp_url, secret).headers["Mcp-Session-Id"]
    services.key_revoke(actor=world.as_manager, key=agent_key)
    for answer in (_initialize(mcp_url, secret), _status_call(mcp_url, secret, session)):
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "auth_invalid"
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    # The open session's run ended with the key: finished, its token revoked at once.
    run = Run.objects.get(mcp_session=session)
    assert run.status == RunStatus.FAILED
    assert not ApiToken.objects.filter(run=run, revoked_at__isnull=True).exists()

    fresh, fresh_secret = services.key_create(
        actor=world.as_manager, agent=world.agent, label="Fresh"
    )
    assert _initialize(mcp_url, fresh_secret).status_code == 200
    services.agent_retire(actor=world.as_manager, agent=world.agent)
    assert _initialize(mcp_url, fresh_secret).status_code == 401


def test_memory_mcp_with_a_key_is_one_run_per_process(live_server, world, key):
    agent_key, secret = key

    async def go():
        async with Client(command(live_server, secret), cache=None) as client:
            wrote = await client.call_tool(
                "memory_write", {"kind": "fact", "content": "Stdio sessions are runs."}
            )
            again = await client.call_tool("memory_status", {})
            return wrote, again

    wrote, again = run_on_loop(go())
    assert not wrote.is_error and not again.is_error
    run = Run.objects.get(agent_key=agent_key)
    note = Note.objects.get(pk=result_json(wrote)["id"])
    assert note.origin_run_id == run.pk and note.created_by_agent_id == world.agent.pk
    assert run.status == RunStatus.SUCCEEDED  # the process ended its session on exit


def test_a_discover_probe_is_told_to_initialize_without_a_refusal(mcp_url, world, key):
    """The SDK's clients probe `server/discover` first; a key's sessions are the handshake's,
    so the probe gets a JSON-RPC error (the client falls back to initialize), not an HTTP 400,
    and no run begins."""
    _, secret = key
    runs = Run.objects.count()
    probe = httpx2.post(
        mcp_url,
        json={"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {}},
        headers={"Authorization": f"Bearer {secret}", "Accept": "application/json"},
    )
    assert probe.status_code == 200
    assert probe.json()["id"] == 7 and probe.json()["error"]["code"] == -32601
    assert Run.objects.count() == runs

    async def go():
        async with mcp_session(mcp_url, secret) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "memory_write" in run_on_loop(go())
