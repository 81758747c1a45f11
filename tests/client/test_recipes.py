"""The OpenAI Agents SDK recipe (docs/openai_agents_example.py, shown in docs/AGENTS.md) runs
against a live server with an agent key: the SDK's MCP server class connects to /mcp, lists
the tools and calls one. No model is involved."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory_portal.memory.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLE = DOCS / "openai_agents_example.py"


def test_the_recipe_connects_and_lists_the_tools(live_server, portal_tokens, world):
    env = {
        **os.environ,
        "MEMORY_PORTAL_URL": live_server.url,
        "MEMORY_PORTAL_TOKEN": portal_tokens.key,
    }
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["tools"].split(", ")[:3] == ["memory_write", "memory_read", "memory_search"]
    assert '"enabled": true' in lines["memory_status"]
    assert lines["agent"] == "Support with 1 MCP server"
    assert Run.objects.filter(agent=world.agent).exclude(pk=world.run.pk).exists()


def test_the_guide_shows_the_examples_code():
    """The snippet in docs/AGENTS.md is the example's own code, line for line."""
    guide = (DOCS / "AGENTS.md").read_text()
    section = guide.split("## The OpenAI Agents SDK", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    source = EXAMPLE.read_text()
    for line in snippet.splitlines():
        if line.strip() and "…" not in line:
            assert line.strip() in source, line
