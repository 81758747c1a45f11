"""/mcp under the production server: gunicorn (gunicorn.conf.py, two processes with threads)
on PostgreSQL, several MCP clients of several runs at once, writing to one project. Skipped on
SQLite: its single writer and a file shared by separate server processes are not what this
measures (real row locks and concurrent transactions are)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from django.db import connection

from memory_portal.memory import services
from memory_portal.memory.models import Note, Stage, ToolCallCount

from .conftest import mcp_session, result_json, run_on_loop

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 8
WRITES = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    params = connection.settings_dict
    auth = params["USER"] + (f":{params['PASSWORD']}" if params["PASSWORD"] else "")
    host, port = params["HOST"] or "127.0.0.1", params["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{params['NAME']}"


@pytest.fixture
def gunicorn_url(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORY_"))}
    env.update(
        DATABASE_URL=_database_url(),
        DEBUG="1",  # static files from the finders: no collectstatic needed for /mcp
        MEMORY_PORTAL_BIND=f"127.0.0.1:{port}",
        WEB_CONCURRENCY="2",
        MEMORY_PORTAL_THREADS="4",
        PYTHONPATH=str(ROOT),
    )
    log = (tmp_path / "gunicorn.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "memory_portal.wsgi", "-c", "gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{url}/api/tools").status_code == 401:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_concurrent_mcp_clients_through_gunicorn(gunicorn_url, world):
    tokens = []
    for i in range(CLIENTS):
        agent = services.agent_create(
            actor=None, project=world.project, name=f"Runtime {i}", stage=Stage.RUNTIME
        )
        run = services.run_create(actor=None, agent=agent)
        tokens.append((run, services.token_create(actor=None, run=run)[1]))

    async def client(i: int, token: str) -> list[str]:
        ids = []
        async with mcp_session(f"{gunicorn_url}/mcp", token) as session:
            assert len((await session.list_tools()).tools) == 13
            for n in range(WRITES):
                result = await session.call_tool(
                    "memory_write", {"kind": "fact", "content": f"Client {i} learned fact {n}."}
                )
                assert not result.is_error, result_json(result)
                ids.append(result_json(result)["id"])
                read = await session.call_tool("memory_read", {"id": ids[-1]})
                assert result_json(read)["entries"][0]["content"] == f"Client {i} learned fact {n}."
        return ids

    async def everyone():
        return await asyncio.gather(*(client(i, t) for i, (_, t) in enumerate(tokens)))

    started = time.monotonic()
    ids = run_on_loop(everyone())
    elapsed = time.monotonic() - started
    assert len({i for per_client in ids for i in per_client}) == CLIENTS * WRITES
    assert Note.objects.filter(pk__in=[i for c in ids for i in c]).count() == CLIENTS * WRITES
    for run, _ in tokens:
        counts = {(r.tool, r.outcome): r.count for r in ToolCallCount.objects.filter(run=run)}
        assert counts == {("mcp:write", "ok"): WRITES, ("mcp:read", "ok"): WRITES}
    print(f"{CLIENTS} clients x {2 * WRITES} calls through gunicorn in {elapsed:.2f} s")


def test_a_held_project_lock_is_a_memory_busy_tool_error(live_server, world):
    """Retryable database trouble is the same refusal as over HTTP (memory_busy and its hint),
    never an exception's text; nothing is written, and the same call works afterwards."""
    from tests.api.test_failures import setting_row_held

    token = services.token_create(actor=None, run=world.run)[1]
    url = f"{live_server.url}/mcp"
    arguments = {"kind": "fact", "content": "Waits for the lock."}

    async def write():
        async with mcp_session(url, token) as session:
            return await session.call_tool("memory_write", arguments)

    with setting_row_held(world.project):
        busy = run_on_loop(write())
    assert busy.is_error
    error = result_json(busy)
    assert error["code"] == "memory_busy" and "Retry" in error["hint"]
    assert not Note.objects.filter(content=arguments["content"]).exists()
    assert not run_on_loop(write()).is_error
    assert ToolCallCount.objects.get(run=world.run, tool="mcp:write", outcome="memory_busy")
