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
from mcp.shared.message import SessionMessage

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
        stdio_server() as (stdin, stdout),
    ):
        server = forwarding_server(remote)
        await serve_draining(server, stdin, stdout)


async def serve_draining(server: Server, stdin, stdout) -> None:
    """Run `server` on the stdio streams, but when stdin ends (a client that writes its
    requests and closes its end), keep the server's read side open until every request read
    has been answered — at most TIMEOUT_SECONDS — instead of letting the SDK cancel them with
    "Connection closed"."""
    to_server, server_reads = anyio.create_memory_object_stream(0)
    server_writes, from_server = anyio.create_memory_object_stream(0)
    pending: set = set()
    answered = anyio.Event()

    async def read_stdin() -> None:
        nonlocal answered
        async with to_server:
            async for message in stdin:
                if isinstance(message, SessionMessage) and isinstance(
                    message.message, types.JSONRPCRequest
                ):
                    pending.add(message.message.id)
                await to_server.send(message)
            with anyio.move_on_after(TIMEOUT_SECONDS):
                while pending:
                    await answered.wait()
                    answered = anyio.Event()

    async def write_stdout() -> None:
        async with from_server, stdout:
            async for message in from_server:
                await stdout.send(message)
                if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                    pending.discard(message.message.id)
                    answered.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdin)
        tasks.start_soon(write_stdout)
        async with server_writes:
            await server.run(server_reads, server_writes, server.create_initialization_options())


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
