"""The `memory` CLI, run as the installed console script against a live test server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import Note

CLI = Path(sys.executable).parent / "memory"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CLI.exists(), reason="the memory console script is not installed"),
]


@pytest.fixture
def memory(live_server, world):
    agent_token = services.token_create(actor=None, run=world.run)[1]
    person_token = services.token_create(actor=None, user=world.member)[1]

    def run(*args: str, token: str = agent_token, env: dict | None = None):
        environment = {
            "PATH": os.environ.get("PATH", ""),
            "MEMORY_PORTAL_URL": live_server.url,
            "MEMORY_PORTAL_TOKEN": token,
            **(env or {}),
        }
        return subprocess.run(
            [str(CLI), *args], env=environment, capture_output=True, text=True, timeout=60
        )

    run.person_token = person_token
    return run


def test_save_list_archive_unarchive(memory, world):
    saved = memory("save", "The staging deploy needs the VPN on", "--expires", "2027-12-31")
    assert saved.returncode == 0, saved.stderr
    assert "Saved mem_" in saved.stdout and "2027-12-31" in saved.stdout
    note = Note.objects.get(content="The staging deploy needs the VPN on")
    listed = memory("list")
    assert note.id in listed.stdout and "RECALLS" in listed.stdout
    as_json = json.loads(memory("--json", "list").stdout)
    assert [m["id"] for m in as_json["data"]] == [note.id]
    after = json.loads(memory("list", "--kind", "fact", "--json").stdout)  # after the command
    assert after == as_json
    assert "RECALLS" in memory("list").stdout  # without it, the table
    archived = memory("archive", note.id, "--reason", "network changed")
    assert archived.returncode == 0 and "network changed" in archived.stdout
    assert note.id not in memory("list").stdout
    assert note.id in memory("list", "--all").stdout
    assert memory("unarchive", note.id).returncode == 0
    assert Note.objects.get(pk=note.id).status == "active"


def test_supersede_day_and_recall(memory, world):
    old = json.loads(memory("--json", "save", "Staging is on port 8443").stdout)
    new = memory("--json", "save", "Staging is on port 9443", "--supersedes", old["id"])
    assert json.loads(new.stdout)["supersedesId"] == old["id"]
    day = memory("day", "fixed the staging deploy")
    assert day.returncode == 0 and "Appended to mem_" in day.stdout
    recall = memory("recall", "--query", "which port is staging on")
    assert recall.returncode == 0, recall.stderr
    assert "SCORE" in recall.stdout and "9443" in recall.stdout and "8443" not in recall.stdout
    assert "fixed the staging deploy" in recall.stdout
    days = json.loads(memory("--json", "list", "--kind", "day").stdout)["data"]
    assert len(days) == 1


def test_people_name_the_agent(memory, world):
    missing = memory("save", "A fact", token=memory.person_token)
    assert missing.returncode == 1
    assert missing.stderr.startswith("memory_agent_required: ") and "(" in missing.stderr
    saved = memory(
        "save", "Ana prefers squash merges", "--agent", world.agent.id, token=memory.person_token
    )
    assert saved.returncode == 0, saved.stderr
    listed = memory("list", "--agent", world.agent.id, token=memory.person_token)
    assert "squash merges" in listed.stdout
    day = memory("day", "a line", token=memory.person_token)
    assert day.returncode == 1 and day.stderr.startswith("memory_day_agent_only: ")


def test_errors_are_code_message_hint(memory):
    too_long = memory("save", "x" * 501)
    assert too_long.returncode == 1
    assert too_long.stderr.startswith("memory_text_too_long: ")
    assert "(Shorten it" in too_long.stderr
    secret = memory("save", "password=Sup3rS3cretValue!")
    assert secret.returncode == 1 and secret.stderr.startswith("secret_in_memory: ")
    assert "Sup3rS3cret" not in secret.stderr
    bad_token = memory("list", token="mp_000000000000_nope")
    assert bad_token.returncode == 1 and bad_token.stderr.startswith("auth_invalid: ")
    unreachable = memory("list", env={"MEMORY_PORTAL_URL": "http://127.0.0.1:9"})
    assert unreachable.returncode == 1 and unreachable.stderr.startswith("connection_failed: ")
    unconfigured = memory("list", env={"MEMORY_PORTAL_TOKEN": ""})
    assert unconfigured.returncode == 2 and "MEMORY_PORTAL_TOKEN" in unconfigured.stderr


def test_recall_prints_the_possibly_related_tier_under_its_heading():
    from memory_portal.cli import show_recall

    def memory(id_, score, text):
        return {"id": id_, "score": score, "createdAt": "2026-03-02T10:00:00Z", "text": text}

    body = {
        "skipped": False,
        "fallback": None,
        "memories": [memory("mem_1", 0.71, "The staging deploy needs the VPN on")],
        "related": [memory("mem_2", 0.34, "Celery workers ship in their own chart")],
        "dayLog": [],
    }
    out = show_recall(body)
    assert out.index("mem_1") < out.index("Possibly related (lower confidence):")
    assert out.index("Possibly related (lower confidence):") < out.index("mem_2")
    assert "0.34" in out
    assert "Possibly related" not in show_recall({**body, "related": []})
