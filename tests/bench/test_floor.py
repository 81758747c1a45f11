"""`memory_bench_floor`: a tiny run through the production server and the django-ninja
hello-world beside it (with its durable write) prints every call kind with its p50, p95 and
ratio to the floor, the load and the targets' verdicts; nothing is left behind, the durable
write's tables included. On SQLite it refuses to run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from bench.floor_tables import ROWS, TOKENS
from memory_portal.memory.models import Note, Project
from tests.bench import command


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_floor_bench_times_the_hot_path_beside_a_hello_world():
    out = StringIO()
    call_command(command("memory_bench_floor"), "--calls", "3", "--notes", "20", stdout=out)
    text = out.getvalue()
    rows = {
        line[:30].strip(): line[30:].split()
        for line in text.splitlines()
        if line.startswith(("hello-world", "a durable", "memory_"))
    }
    kinds = [
        "hello-world (the floor)",
        "a durable write's floor",
        "memory_write",
        "memory_status, 10 facts",
        "memory_status, 20 facts",
        "memory_search, 20 facts",
    ]
    assert [k for k in kinds if k in rows] == kinds, text
    for kind in kinds:
        p50, p95, ratio = rows[kind][:3]
        assert 0 < float(p50) <= float(p95), text
        assert ratio.endswith("×"), text
    assert rows["hello-world (the floor)"][2] == "1.00×", text
    assert "load average" in text.splitlines()[0], text
    assert "memory_status 20 ÷ 10 facts:" in text and "targets met:" in text, text
    assert "memory_write ÷ a durable write's floor:" in text, text
    assert not Project.objects.filter(slug__startswith="bench-floor-").exists()
    assert not Note.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", [TOKENS, ROWS])
        assert cursor.fetchone() == (None, None)


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_floor_bench_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_floor"), "--calls", "1")
