"""What the Connect page hands out: ready-to-paste configuration for the MCP clients people
use, with this portal's base URL and a new agent key filled in (docs/AGENTS.md has the same
forms with placeholders)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

SERVER = "memory-portal"


@dataclass(frozen=True)
class Snippet:
    key: str  # an id for the page's tabs and copy buttons
    title: str
    where: str  # where it goes
    text: str


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def snippets(base_url: str, key: str) -> list[Snippet]:
    base = base_url.rstrip("/")
    mcp = f"{base}/mcp"
    bearer = f"Bearer {key}"
    stdio = {
        "command": "memory",
        "args": ["mcp"],
        "env": {"MEMORY_PORTAL_URL": base, "MEMORY_PORTAL_TOKEN": key},
    }
    return [
        Snippet(
            "claude-code",
            "Claude Code",
            "Run in a terminal",
            f"claude mcp add --transport http {SERVER} {shlex.quote(mcp)} \\\n"
            f"  --header {shlex.quote('Authorization: ' + bearer)}",
        ),
        Snippet(
            "cursor",
            "Cursor",
            "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
            _json({"mcpServers": {SERVER: {"url": mcp, "headers": {"Authorization": bearer}}}}),
        ),
        Snippet(
            "vscode",
            "VS Code",
            ".vscode/mcp.json",
            _json(
                {
                    "servers": {
                        SERVER: {"type": "http", "url": mcp, "headers": {"Authorization": bearer}}
                    }
                }
            ),
        ),
        Snippet(
            "claude-desktop",
            "Claude Desktop",
            "claude_desktop_config.json — it launches `memory mcp`, which comes with Memory "
            "Portal (`.venv/bin/memory` in a checkout after `make run`, or `pip install -e .` "
            "in one); give its full path if it is not on PATH",
            _json({"mcpServers": {SERVER: stdio}}),
        ),
        Snippet(
            "cli",
            "memory CLI",
            "A shell: `memory mcp` is one MCP session, so one run, per process",
            f"export MEMORY_PORTAL_URL={shlex.quote(base)}\n"
            f"export MEMORY_PORTAL_TOKEN={shlex.quote(key)}\n"
            "memory mcp",
        ),
        Snippet(
            "curl",
            "A run per task (scripts)",
            "POST /api/runs answers the run's id and token, for the tools and v1 routes; "
            'when the task is done, PATCH /api/runs/<id> with that token and {"status": '
            '"succeeded"} (or "failed") finishes the run',
            f"curl -fsS -X POST {shlex.quote(base + '/api/runs')} \\\n"
            f"  -H {shlex.quote('Authorization: ' + bearer)} \\\n"
            "  -H 'Content-Type: application/json' \\\n"
            """  -d '{"taskKey": "PROJ-1", "task": {"title": "What the run is for"}}'""",
        ),
    ]
