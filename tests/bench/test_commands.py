"""`memory_bench_writes`: a tiny run on PostgreSQL prints the three scenarios and leaves nothing
behind; on SQLite it refuses to run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django_tasks_db.models import DBTaskResult

from memory_portal.memory.models import AuditEvent, Note, Project, ReviewRun
from tests.bench import command

SCENARIOS = ("1 writer, 1 project", "8 writers, 1 project", "8 writers, 8 projects")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_bench_prints_three_scenarios_and_cleans_up():
    out = StringIO()
    call_command(command("memory_bench_writes"), "--writes", "16", stdout=out)
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line.startswith(SCENARIOS)]
    assert [row[:22].strip() for row in rows] == list(SCENARIOS)
    for row in rows:
        assert row[22:].split()[0] == "16", row  # every scenario wrote all 16 notes
    assert "SQL statements plus BEGIN/COMMIT" in text
    assert not Project.objects.filter(slug__startswith="bench-").exists()
    assert not AuditEvent.objects.filter(project_ref__startswith="bench-").exists()
    assert not Note.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_bench_keep_leaves_its_projects():
    out = StringIO()
    call_command(command("memory_bench_writes"), "--writes", "8", "--keep", stdout=out)
    kept = Project.objects.filter(slug__startswith="bench-")
    # probe + s1 and s2 (1 project per path) + s3 (8 per path), three paths each
    assert kept.count() == 1 + 3 * (1 + 1 + 8)
    assert Note.objects.filter(project__in=kept).count() == 2 + 3 * 3 * 8


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_bench_http_times_memory_write_through_the_server_next_to_raw_sql():
    out = StringIO()
    call_command(command("memory_bench_writes"), "--http-only", "--writes", "16", stdout=out)
    text = out.getvalue()
    rows = [line.split() for line in text.splitlines() if line.endswith(tuple("0123456789"))]
    rows = [row for row in rows if row[:2] in (["1", "client,"], ["8", "clients,"])]
    assert [row[:4] for row in rows] == [
        ["1", "client,", "1", "project"],
        ["8", "clients,", "8", "projects"],
    ]
    for row in rows:
        assert row[4] == "16", row  # every write answered 200 with a new note
        http, raw, ratio = float(row[5]), float(row[6]), float(row[7])
        assert http > 0 and raw > 0 and ratio == pytest.approx(http / raw, abs=0.01)
    assert "1 writer, 1 project" not in text, "--http-only skips the in-process scenarios"
    assert not Project.objects.filter(slug__startswith="bench-").exists()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_bench_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_writes"), "--writes", "16")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_lock_bench_measures_other_projects_through_the_production_server():
    out = StringIO()
    call_command(
        command("memory_bench_locks"),
        "--seconds",
        "1",
        "--clients",
        "4",
        "--configs",
        "shipped",
        stdout=out,
    )
    text = out.getvalue()
    rows = [line.split() for line in text.splitlines() if line.startswith("shipped ")]
    assert [row[1] for row in rows] == ["no", "yes"]
    for row in rows:
        assert int(row[2]) > 0 and row[2] == row[3], row  # every other-project write ok
    assert rows[1][7] != "0", "writes to the held project answer 503 memory_busy"
    assert "A held ÷ nothing held" in text
    assert not Project.objects.filter(slug__startswith="bench-locks-").exists()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_lock_bench_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_locks"), "--seconds", "1")


@pytest.mark.django_db
def test_bench_recall_fills_the_project_to_its_cap(settings):
    """`memory_bench_recall --facts N` with N at the cap: the benchmark's own day log must not
    be refused by the cap its facts then fill (it once crashed with memory_project_full)."""
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "PROJECT_NOTE_CAP": 40}
    out = StringIO()
    call_command(command("memory_bench_recall"), "--facts", "40", "--repeat", "1", stdout=out)
    assert "recall() over 40 live facts" in out.getvalue()
    assert not Project.objects.filter(slug__startswith="bench-recall-").exists()


@pytest.mark.django_db
def test_bench_search_times_both_kinds_of_query_with_and_without_meaning():
    """`memory_bench_search`: a round per kind of query, each side finding notes (the keywords
    by their words too, so the side without meaning is not timed doing nothing), a ratio, and
    nothing left behind."""
    out = StringIO()
    call_command(
        command("memory_bench_search"),
        "--notes",
        "30",
        "--rounds",
        "1",
        "--queries",
        "2",
        stdout=out,
    )
    text = out.getvalue()
    found = {}
    for kind in ("questions", "keywords"):
        block = text[text.index(f"\n{kind} (") :]
        row = next(line for line in block.splitlines() if line.strip().startswith("1 "))
        found[kind] = (int(row.split()[-3]), int(row.split()[-1]))
        assert f"{kind}: with meaning ÷ without (wall, median of 1 rounds) = " in text
    assert found["questions"][0] > 0
    assert found["keywords"][0] > 0 and found["keywords"][1] > 0
    assert not Project.objects.filter(slug__startswith="bench-search-").exists()


@pytest.mark.django_db
def test_bench_hold_times_both_policies_and_serves_fewer_notes_under_hold():
    """`memory_bench_hold`: both scenarios print both tools with a ratio; with two thirds of
    the notes learned, `hold` serves fewer search results than `open`, and with every note
    reviewed the same; nothing is left behind."""
    out = StringIO()
    call_command(
        command("memory_bench_hold"), "--notes", "60", "--rounds", "2", "--queries", "3",
        stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    searches = [
        row.split() for row in text.splitlines() if row.startswith("memory_search ") and "×" in row
    ]
    assert len(searches) == 2
    held, same = (
        (int(row[row.index("open") + 1].rstrip(",")), int(row[row.index("hold") + 1]))
        for row in searches
    )
    assert held[1] < held[0] and same[0] == same[1] > 0
    assert not Project.objects.filter(slug__startswith="bench-hold-").exists()


@pytest.mark.django_db
def test_bench_scale_refuses_sqlite():
    if connection.vendor == "postgresql":
        pytest.skip("the refusal is SQLite's")
    with pytest.raises(CommandError, match="needs PostgreSQL"):
        call_command(command("memory_bench_scale"), "--sizes", "10", stdout=StringIO())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_bench_scale_measures_every_page_through_the_server(tmp_path):
    out = StringIO()
    results = tmp_path / "scale.json"
    call_command(
        command("memory_bench_scale"),
        "--sizes",
        "2000",
        "--repeat",
        "1",
        "--results",
        str(results),
        stdout=out,
    )
    text = out.getvalue()
    for name in (
        "projects list",
        "audit page 1",
        "audit deep page",
        "audit ?project=",
        "audit ?actor=",
        "audit ?date_from=",
        "runs list",
        "project notes page",
        "Django admin changelist, same 50 notes",
        "review queue",
        "overview (charts)",
        "memory_search",
        "memory_read list page",
        "recall, 2,000 facts",
    ):
        assert f"| {name}" in text, name
    import json

    figures = json.loads(results.read_text())["2000"]
    assert "notes page's server CPU ÷ Django admin's changelist" in text
    assert len(figures) == 14 and all(
        http > 0 and floor > 0 and cpu >= 0 for http, floor, cpu in figures.values()
    )


@pytest.mark.postgres
def test_memory_create_database_creates_it_once(monkeypatch):
    name = f"{connection.settings_dict['NAME']}_created"
    monkeypatch.setitem(connection.settings_dict, "NAME", name)
    try:
        first, second = StringIO(), StringIO()
        call_command(command("memory_create_database"), stdout=first)
        call_command(command("memory_create_database"), stdout=second)
        assert first.getvalue().strip() == f"database {name} created"
        assert second.getvalue().strip() == f"database {name} exists"
    finally:
        params = {**connection.get_connection_params(), "dbname": "postgres", "autocommit": True}
        with connection.Database.connect(**params) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_memory_create_database_leaves_sqlite_alone():
    if connection.vendor == "postgresql":
        pytest.skip("the SQLite path")
    out = StringIO()
    call_command(command("memory_create_database"), stdout=out)
    assert "SQLite" in out.getvalue()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_bench_reviews_runs_in_process_and_with_a_worker_and_checks_each_run():
    out = StringIO()
    args = ["--agents", "4", "--facts", "3", "--workers", "1"]
    call_command(command("memory_bench_reviews"), *args, stdout=out)
    text = out.getvalue()
    rows = {
        line.split()[0]: line.split()
        for line in text.splitlines()
        if line.startswith(("in-process ", "1 worker "))
    }
    assert set(rows) == {"in-process", "1"}, text
    assert rows["in-process"][1] == "4" and rows["1"][2] == "4"  # agents
    assert float(rows["in-process"][5]) > 0, "statements counted in-process"
    assert float(rows["1"][6]) > 0, "statements counted in the cron call and the worker"
    assert "1 worker(s), statements per agent: the cron call" in text
    # The correctness checks ran after each run: one succeeded review per routine, the
    # planned work done, the counters equal to a fresh count.
    checks = [line for line in text.splitlines() if "checks:" in line]
    assert len(checks) == 2, text
    for line in checks:
        assert "4 reviews, one per routine, all succeeded" in line
        assert "merged 1, renewed 1, expired 0, lifted 1 as planned" in line
        assert "counters of 1 projects match a fresh count" in line
    assert "Extrapolated linearly to 10,000 agents" in text
    assert not Project.objects.filter(slug__startswith="bench-reviews-").exists()
    assert not Note.objects.exists() and not ReviewRun.objects.exists()
    assert not DBTaskResult.objects.exists()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the SQLite refusal")
def test_bench_reviews_refuses_sqlite():
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command(command("memory_bench_reviews"), "--agents", "4")


@pytest.mark.django_db(transaction=True)
def test_bench_outbox_times_writes_with_and_without_endpoints_and_delivers_them_all():
    """`memory_bench_outbox`: three sides with their ratios, every delivery received, nothing
    left behind."""
    from memory_portal.memory.services import deliveries

    out = StringIO()
    try:
        call_command(
            command("memory_bench_outbox"), "--writes", "5", "--rounds", "2", stdout=out
        )
    finally:
        deliveries.background.pause()
    text = out.getvalue()
    for side in ("none", "three ", "three, sending alongside"):
        assert any(line.startswith(side) and "×" in line for line in text.splitlines()), text
    assert "deliveries received 60 of 60" in text
    assert not Project.objects.filter(slug__startswith="bench-outbox-").exists()
