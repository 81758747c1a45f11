"""A complete MCP session with Memory Portal, using the official `mcp` Python SDK's client.

An orchestrator starts a run (admin API, a project manager's token), hands the run's token to
the agent, the agent talks MCP to /mcp, and the orchestrator finishes the run (its token stops
working at once). Run it against a server:

    export MEMORY_PORTAL_URL=http://127.0.0.1:8000
    export MANAGER_TOKEN=mp_…  PROJECT=acme-web  AGENT_ID=agt_…
    python docs/mcp_example.py

Needs `pip install 'mcp>=2.3,<3'` (it brings httpx2). Prints the session as it goes.
"""

from __future__ import annotations

import asyncio
import json
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

BASE = os.environ["MEMORY_PORTAL_URL"].rstrip("/")
MANAGER = {"Authorization": f"Bearer {os.environ['MANAGER_TOKEN']}"}
RUNS = f"{BASE}/api/admin/projects/{os.environ['PROJECT']}/runs"


def start_run() -> dict:
    """The orchestrator's part: one run per task; its token is shown once."""
    body = {
        "agentId": os.environ["AGENT_ID"],
        "taskKey": "PIN-812",
        "task": {"title": "PIN-812: helm upgrade hangs on the staging deploy"},
    }
    response = httpx2.post(RUNS, json=body, headers=MANAGER)
    response.raise_for_status()
    return response.json()


def finish_run(run_id: str) -> None:
    response = httpx2.patch(f"{RUNS}/{run_id}", json={"status": "succeeded"}, headers=MANAGER)
    response.raise_for_status()


def show(label: str, result) -> dict:
    answer = json.loads(result.content[0].text)
    print(f"{label}: {'isError ' if result.is_error else ''}{json.dumps(answer)[:300]}")
    return answer


async def agent(token: str) -> None:
    """The agent's part: everything over MCP with the run's bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{BASE}/mcp", http_client=http)) as client,
    ):
        print(f"connected: {client.server_info.name}, protocol {client.protocol_version}")
        start = await client.get_prompt("memory_start")
        print("prompt memory_start:\n" + start.messages[0].content.text)
        tools = (await client.list_tools()).tools
        print("tools: " + ", ".join(tool.name for tool in tools))

        wrote = show(
            "memory_write",
            await client.call_tool(
                "memory_write",
                {"kind": "fact", "content": "Staging deploys need the VPN on (PIN-812)."},
            ),
        )
        show("memory_read", await client.call_tool("memory_read", {"id": wrote["id"]}))
        show("memory_search", await client.call_tool("memory_search", {"query": "staging VPN"}))
        show(
            "memory_save_fact",
            await client.call_tool("memory_save_fact", {"text": "helm upgrade needs --wait."}),
        )
        # A refusal is a tool result with isError; its text is {"code", "message", "hint"}.
        show("memory_write (refused)", await client.call_tool("memory_write", {"kind": "poem"}))


def main() -> None:
    run = start_run()
    print(f"run {run['id']} started")
    try:
        asyncio.run(agent(run["token"]))
    finally:
        finish_run(run["id"])
        print(f"run {run['id']} finished; its token no longer works")


if __name__ == "__main__":
    main()
