"""`memory mcp`: a stdio MCP server, launched as a subprocess by the official client's stdio
transport, forwarding to the live server's /mcp."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import memory_portal
from memory_portal.memory import services
from memory_portal.memory.models import Note, Run, ToolCallCount

from .conftest import result_json, run_on_loop

pytestmark = pytest.mark.django_db(transaction=True)

# This checkout's code, whatever the installed console script points at.
ROOT = Path(memory_portal.__file__).resolve().parent.parent


def command(live_server, token: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_portal.cli", "mcp"],
        cwd=str(ROOT),
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "MEMORY_PORTAL_URL": live_server.url,
            "MEMORY_PORTAL_TOKEN": token,
        },
    )


def test_memory_mcp_lists_the_tools_and_calls_one(live_server, run_tokens, world):
    async def go():
        async with Client(command(live_server, run_tokens.writer), cache=None) as client:
            tools = (await client.list_tools()).tools
            wrote = await client.call_tool(
                "memory_write", {"kind": "fact", "content": "Stdio clients work too."}
            )
            refused = await client.call_tool("memory_forget", {"id": "mem_nope"})
            prompt = await client.get_prompt("memory_start")
            return tools, wrote, refused, prompt

    tools, wrote, refused, prompt = run_on_loop(go())
    assert len(tools) == 13 and tools[0].name == "memory_write"
    assert not wrote.is_error
    assert Note.objects.get(pk=result_json(wrote)["id"]).content == "Stdio clients work too."
    assert refused.is_error and result_json(refused)["code"] == "memory_not_found"
    assert prompt.messages[0].content.text.startswith("--- MEMORY ---")
    assert ToolCallCount.objects.get(run=world.run, tool="mcp:write").count == 1


def test_memory_mcp_refuses_a_bad_token_at_once(live_server):
    params = command(live_server, "mp_000000000000_nope")
    finished = subprocess.run(
        [params.command, *params.args],
        cwd=params.cwd,
        env=params.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert finished.returncode == 1
    assert finished.stderr.startswith("auth_invalid: ")


EXAMPLE = ROOT / "docs" / "mcp_example.py"


def test_the_documented_example_runs(live_server, world):
    """docs/mcp_example.py, as a user runs it: start a run, an MCP session, finish the run."""
    manager_token = services.token_create(actor=None, user=world.manager)[1]
    finished = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env={
            "PATH": os.environ.get("PATH", ""),
            "MEMORY_PORTAL_URL": live_server.url,
            "MANAGER_TOKEN": manager_token,
            "PROJECT": world.project.slug,
            "AGENT_ID": world.agent.id,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    out = finished.stdout
    assert "prompt memory_start:\n--- MEMORY ---" in out
    assert "tools: memory_write, memory_read, memory_search" in out
    assert 'memory_read: {"entries": [{"id": "mem_' in out
    assert 'memory_write (refused): isError {"code": "memory_invalid"' in out
    assert "finished; its token no longer works" in out
    run_ = Run.objects.get(task_key="PIN-812", agent=world.agent)
    assert run_.status == "succeeded"
    assert Note.objects.filter(origin_run=run_).count() == 2  # the note and the fact


def test_memory_mcp_answers_every_request_it_read_before_stdin_closed(live_server, run_tokens):
    """A client that writes its requests and closes stdin at once still gets every answer."""
    import json

    params = command(live_server, run_tokens.writer)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "memory_write", "arguments": {"kind": "fact", "content": "Piped and closed."}}},
    ]  # fmt: skip
    finished = subprocess.run(
        [params.command, *params.args],
        cwd=params.cwd,
        env=params.env,
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        timeout=120,
    )
    answers = {a.get("id"): a for a in map(json.loads, finished.stdout.splitlines())}
    assert set(answers) >= {1, 2, 3}, (finished.stdout, finished.stderr[-2000:])
    assert not answers[3]["result"].get("isError"), answers[3]
    assert Note.objects.filter(content="Piped and closed.").count() == 1
