"""`memory_bench_swarm`: a tiny run through the production server prints one project, spread
and raw SQL for each writer count, every write answered, and leaves nothing behind; on SQLite
it refuses to run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memory_portal.memory.models import Note, Project
from tests.bench import command


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_swarm_bench_compares_one_project_with_spread_and_raw_sql():
    out = StringIO()
    call_command(command("memory_bench_swarm"), "--writers", "4", "--writes", "3", stdout=out)
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line[:7].strip() == "4"]
    scenarios = [line[9:21].strip() for line in rows]
    assert scenarios == ["one project", "spread", "raw SQL"]
    for line in rows:
        rate, _p50, _p99, ok, busy = line[21:].split()[:5]
        assert float(rate) > 0 and ok == "12" and busy == "0", line  # 4 writers × 3 writes
    assert "4 writers: one project ÷ spread = " in text and "MEMORY_EMBEDDINGS=false" in text
    assert not Project.objects.filter(slug__startswith="bench-swarm-").exists()
    assert not Note.objects.exists()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_swarm_bench_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_swarm"), "--writers", "2", "--writes", "1")
