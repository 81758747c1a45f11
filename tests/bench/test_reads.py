"""`memory_bench_reads`: a tiny run through two production servers (one whose workers skip the
read records' INSERT) prints both sides and the ratio; the recorded side wrote its records, the
unrecorded side none; nothing is left behind. On SQLite it refuses to run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memory_portal.memory.models import NoteRead, Project
from tests.bench import command


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_reads_bench_compares_recorded_with_unrecorded_reads():
    out = StringIO()
    call_command(
        command("memory_bench_reads"),
        *("--agents", "3", "--calls", "4", "--rounds", "1", "--notes", "12"),
        stdout=out,
    )
    lines = {line.split()[0]: line.split() for line in out.getvalue().splitlines() if line}
    # 3 agents × 4 measured calls, every answer a 200 with at least one entry (the bench
    # refuses an empty one), each entry recorded; warm-up calls are recorded too.
    answers, records = lines["recorded"][4:]
    assert answers == "12" and int(records) >= 3 * 6, out.getvalue()
    assert lines["unrecorded"][4:] == ["12", "0"], out.getvalue()
    assert "cost: unrecorded ÷ recorded calls/s = " in out.getvalue()
    assert not Project.objects.filter(slug__startswith="bench-reads-").exists()
    assert not NoteRead.objects.exists()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_reads_bench_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_reads"), "--agents", "1", "--calls", "1")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_read_lists_bench_grows_the_table_and_reports_each_stage():
    out = StringIO()
    call_command(
        command("memory_bench_read_lists"),
        *("--reads", "300", "--notes", "10", "--runs", "12", "--agents", "2", "--repeat", "1"),
        stdout=out,
    )
    stages = [line.split() for line in out.getvalue().splitlines() if line[:9].strip().isdigit()]
    assert [stage[0] for stage in stages] == ["3", "30", "300"], out.getvalue()
    assert all(len(stage) == 11 for stage in stages), out.getvalue()  # reads, bytes, 8 timings
    assert "bytes/read" in out.getvalue().splitlines()[-1]
    assert not Project.objects.filter(slug__startswith="bench-readlists-").exists()
    assert not NoteRead.objects.exists()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_read_lists_bench_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_read_lists"), "--reads", "100")
