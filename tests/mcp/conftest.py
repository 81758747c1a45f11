"""MCP tests: the official `mcp` client against a live server (pytest-django's live_server,
a real HTTP server in a thread), with a run token of each kind."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memory_portal.memory import services


@asynccontextmanager
async def mcp_session(url: str, token: str | None):
    """An initialized MCP client session over Streamable HTTP with the run's bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def run_on_loop(coroutine):
    """The tests are synchronous (the database fixtures are); each MCP exchange runs on a
    loop of its own, in a thread of its own: Playwright's sync API (the browser tests) leaves
    an event loop running in the main thread, where asyncio.run() refuses to start."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def result_json(result) -> dict:
    assert len(result.content) == 1, result
    return json.loads(result.content[0].text)


@pytest.fixture
def mcp_url(live_server):
    return f"{live_server.url}/mcp"


@pytest.fixture
def run_tokens(world):
    t = type("RunTokens", (), {})()
    t.writer = services.token_create(actor=None, run=world.run)[1]
    t.reviewer = services.token_create(actor=None, run=world.reviewer_run)[1]
    t.readonly = services.token_create(actor=None, run=world.run, can_write=False)[1]
    t.manager = services.token_create(actor=None, user=world.manager)[1]
    return t
