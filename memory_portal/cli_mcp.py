"""`memory mcp`: a stdio MCP server for clients that only launch local processes. It forwards
tools/list, tools/call and the prompts to the portal's /mcp endpoint (MEMORY_PORTAL_URL, with
MEMORY_PORTAL_TOKEN as the bearer token), so the tools, their schemas, the trace and every
refusal are the server's own. With an agent key (`mpk_…`) the process holds one MCP session,
so it is one run of the key's agent, finished when the process ends. Needs the `mcp` package
(a dependency of memory-portal)."""

from __future__ import annotations

import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TIMEOUT_SECONDS = 60
KEY_PREFIX = "mpk_"  # memory.tokens.KEY_PREFIX; this module imports no Django


def forwarding_server(remote: Client) -> Server:
    """A stdio-side server whose every answer comes from the remote /mcp session."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return await remote.list_tools()

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await remote.call_tool(params.name, params.arguments)

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return await remote.list_prompts()

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await remote.get_prompt(params.name, params.arguments)

    return Server(
        "memory-portal",
        version="1.0",
        instructions=remote.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve(base_url: str, token: str) -> None:
    url = base_url.rstrip("/") + "/mcp"
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_SECONDS) as http,
        # No client-side cache: the portal decides what each call sees.
        Client(streamable_http_client(url, http_client=http), cache=None) as remote,
        stdio_server() as (read_stream, write_stream),
    ):
        server = forwarding_server(remote)
        await server.run(read_stream, write_stream, server.create_initialization_options())


def check_token(base_url: str, token: str) -> str | None:
    """Refuse at once, with the portal's own words, a token /mcp will not take. A run token is
    tried on GET /api/tools; an agent key on /mcp itself (a DELETE of no session: 400 for a
    live key, which opens nothing, and 401 for a dead one)."""
    key = token.startswith(KEY_PREFIX)
    try:
        response = httpx2.request(
            "DELETE" if key else "GET",
            base_url.rstrip("/") + ("/mcp" if key else "/api/tools"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT_SECONDS,
        )
    except httpx2.HTTPError as exc:
        return (
            f"connection_failed: Could not reach {base_url}: {exc}. "
            "(Check MEMORY_PORTAL_URL and that the server is running.)"
        )
    if response.status_code == (400 if key else 200):
        return None
    try:
        error = response.json()["error"]
        return f"{error['code']}: {error['message']} ({error['hint']})"
    except (ValueError, KeyError, TypeError):
        return f"http_{response.status_code}: The server answered {response.status_code}."


def main(base_url: str, token: str) -> int:
    problem = check_token(base_url, token)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    anyio.run(serve, base_url, token)
    return 0
