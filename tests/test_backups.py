"""docs/OPERATIONS.md's backups restore: a PostgreSQL dump (pg_dump / pg_restore) and a SQLite
online backup (.backup), each restored into a fresh database, where a server process finds
every note — active, forgotten and vetoed — with its content, trust and status."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

from memory_portal.memory import services
from memory_portal.memory.models import Note

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db(transaction=True)

LIST_NOTES = (
    "import json; from memory_portal.memory.models import Note; "
    "print(json.dumps(sorted(Note.objects.values_list('id', 'content', 'status', 'trust'))))"
)


def _notes(world) -> list[list[str]]:
    """Three notes of the world's project, one forgotten and one vetoed; all of them, as a
    server lists them."""
    kept = services.note_write(
        actor=world.as_agent, kind="fact", content="Backups run at 03:15 UTC."
    ).note
    forgotten = services.note_write(
        actor=world.as_agent, kind="lesson", content="The old NAS is gone; use the bucket."
    ).note
    vetoed = services.note_write(
        actor=world.as_agent, kind="fact", content="Restores need no downtime at all."
    ).note
    services.note_forget(actor=world.as_agent, note_id=forgotten.pk)
    services.note_veto(actor=world.as_manager, note_id=vetoed.pk)
    assert kept.pk
    return sorted([list(r) for r in Note.objects.values_list("id", "content", "status", "trust")])


def _listed_by_a_server(env: dict[str, str]) -> list[list[str]]:
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", LIST_NOTES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SQLITE_PATH"}}
    return {**env, "DEBUG": "1", **extra}


@pytest.mark.postgres
@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="pg_dump is not installed")
def test_a_pg_dump_restores_into_a_fresh_database(world, tmp_path):
    expected = _notes(world)
    assert {r[2] for r in expected} == {"active", "forgotten", "archived"}
    db = connection.settings_dict
    host, port, user = db["HOST"] or "127.0.0.1", str(db["PORT"] or 5432), db["USER"]
    source = f"postgres://{user}@{host}:{port}/{db['NAME']}"
    dump = tmp_path / "memory-portal.dump"
    subprocess.run(
        ["pg_dump", "--format=custom", f"--file={dump}", source], check=True, timeout=120
    )
    fresh = f"restore_check_{uuid.uuid4().hex[:12]}"
    subprocess.run(["createdb", "-h", host, "-p", port, "-U", user, fresh], check=True)
    try:
        target = f"postgres://{user}@{host}:{port}/{fresh}"
        subprocess.run(
            ["pg_restore", "--no-owner", "--exit-on-error", f"--dbname={target}", str(dump)],
            check=True, timeout=120,
        )  # fmt: skip
        env = _clean_env(DATABASE_URL=target)
        check = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--check"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        assert _listed_by_a_server(env) == expected
    finally:
        subprocess.run(["dropdb", "-h", host, "-p", port, "-U", user, "--if-exists", fresh])


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 tool is not installed")
def test_a_sqlite_backup_restores_into_a_fresh_file(world, tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite backup is tested on the SQLite run")
    expected = _notes(world)
    source = connection.settings_dict["NAME"]
    backup = tmp_path / "memory-portal-backup.sqlite3"
    subprocess.run(["sqlite3", source, f".backup '{backup}'"], check=True, timeout=60)
    assert _listed_by_a_server(_clean_env(SQLITE_PATH=str(backup))) == expected
