"""The OpenAI Agents SDK with Memory Portal's MCP server: connect, list the tools, call one.

    export MEMORY_PORTAL_URL=http://127.0.0.1:8000  MEMORY_PORTAL_TOKEN=mpk_…  # an agent key
    python docs/openai_agents_example.py

With an agent key the MCP session is one run of the key's agent (a run token works too). No
model is called here; hand `memory` to an `Agent(mcp_servers=[...])` and `Runner.run` it with
a model of your choice. Needs `pip install 'openai-agents>=0.24'`."""

import asyncio
import os

from agents import Agent
from agents.mcp import MCPServerStreamableHttp


async def main() -> None:
    async with MCPServerStreamableHttp(
        name="memory-portal",
        params={
            "url": f"{os.environ['MEMORY_PORTAL_URL']}/mcp",
            "headers": {"Authorization": f"Bearer {os.environ['MEMORY_PORTAL_TOKEN']}"},
        },
    ) as memory:
        tools = await memory.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools))
        status = await memory.call_tool("memory_status", {})
        print("memory_status:", status.content[0].text)
        agent = Agent(
            name="Support",
            instructions="Check memory before answering; save what you learn as facts.",
            mcp_servers=[memory],
        )
        print("agent:", agent.name, "with", len(agent.mcp_servers), "MCP server")


if __name__ == "__main__":
    asyncio.run(main())
