"""docs/API.md is executable: its shell examples run in order against a live server, and its
tool-call bodies validate against the tool definitions the server offers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from django.contrib.auth import get_user_model

from memory_portal.api.tools import TOOLS, tool_definition
from memory_portal.memory import services

DOC = Path(__file__).resolve().parents[2] / "docs" / "API.md"
BLOCK_RE = re.compile(r"```sh\n(.*?)```", re.S)


def shell_blocks() -> list[str]:
    return BLOCK_RE.findall(DOC.read_text())


def test_doc_has_examples_for_every_tool():
    text = DOC.read_text()
    for tool in TOOLS:
        assert f"/api/tools/{tool.name}" in text, tool.name


def test_tool_examples_validate_against_the_definitions():
    definitions = {t.name: tool_definition(t)["parameters"] for t in TOOLS}
    checked = 0
    for block in shell_blocks():
        for command in block.split("curl ")[1:]:
            match = re.search(r"/api/tools/(\w+)\".*?-d '(\{.*?\})'", command, re.S)
            if match:
                jsonschema.validate(json.loads(match.group(2)), definitions[match.group(1)])
                checked += 1
    assert checked >= 10


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.django_db(transaction=True)
def test_every_example_runs_against_the_server(live_server):
    User = get_user_model()
    admin = User.objects.create_superuser("admin", "admin@example.com", "pw-12345!")
    manager = User.objects.create_user("ana", "ana@example.com", "pw-12345!")
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "BASE": live_server.url,
        "ADMIN_TOKEN": services.token_create(actor=None, user=admin)[1],
        "MANAGER": manager.username,
        "MANAGER_TOKEN": services.token_create(actor=None, user=manager)[1],
    }
    script = "set -euo pipefail\n" + "\n".join(shell_blocks())
    result = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    out = result.stdout
    assert "auth_required" in out and "memory_write" in out and "--- MEMORY ---" in out
    assert "learned" in out
