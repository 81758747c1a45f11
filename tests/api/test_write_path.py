"""The agent's write path as a request really runs it (docs/PERFORMANCE.md, "The statements of
one `memory_write`"): its statements, and the call budget and trace taken inside the write's own
transaction with every outcome counted as before."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_portal.memory import services
from memory_portal.memory.models import MemorySetting, Note, Run, ToolCallCount
from memory_portal.memory.tokens import token_authenticate

from .conftest import RoundTrips, error_code

# Token check through response, BEGIN and COMMIT included (inside the test's own transaction
# they are the SAVEPOINT and RELEASE the capture sees); on SQLite, the outbox's event and its
# number are two of them (PostgreSQL's one write statement holds them).
WRITE_STATEMENTS = 12


def _write(api, token, content):
    """The answer and its round trips' SQL (statements sent together are one)."""
    with RoundTrips(connection) as sent:
        response = api.tool("memory_write", token, {"kind": "fact", "content": content})
    assert response.status_code == 200, response.json()
    return response, sent.trips


def _listing(statements: list[str]) -> str:
    return "\n".join(sql[:160] for sql in statements)


def test_memory_write_takes_at_most_ten_statements(api, tokens, world, settings):
    # The token's first call also stamps its last use (then at most once a minute).
    _first, statements = _write(api, tokens.agent, "The nightly export runs at two")
    assert len(statements) <= WRITE_STATEMENTS, _listing(statements)
    _second, statements = _write(api, tokens.agent, "The cache warms up after the export")
    assert len(statements) <= WRITE_STATEMENTS, _listing(statements)
    # SQLite counts the slots in the process; PostgreSQL's shape is the next test's.
    assert len(statements) <= (3 if connection.vendor == "postgresql" else 11), _listing(statements)
    # The token check reads the token, run, agent, project and setting row once; the write
    # touches the setting row once more (its lock), and nothing is read twice.
    token_reads = [s for s in statements if "memory_apitoken" in s]
    setting = [
        s for s in statements
        if "project_memory_setting" in s and s not in token_reads and '"event_seq" =' not in s
    ]  # fmt: skip (SQLite: the outbox's number is stored after the event, in one more UPDATE)
    assert len(token_reads) == 1 and len(setting) == 1, _listing(statements)
    runs = [
        s for s in statements
        if "memory_run" in s and s not in token_reads and "memory_run_slot" not in s
    ]  # fmt: skip
    assert len(runs) == 1, "the budget is taken once, with the trace row"
    if connection.vendor != "postgresql":
        # The lock and the revision bump are one statement.
        assert setting[0].startswith("UPDATE"), _listing(statements)
    world.run.refresh_from_db()
    assert world.run.tool_calls == 2
    trace = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=world.run)}
    assert trace == {("write", "ok"): 2}


@pytest.mark.django_db(transaction=True)
def test_a_clean_write_is_two_round_trips(api, tokens, world):
    """PostgreSQL, as a request runs (no transaction of the test's around it): the token check
    that also takes the run's slot, then the write, its statements sent together — the lock,
    one statement under it that inserts the note, its event and the call, advances the
    revision and gives the slot back — committed by the pipeline's sync. No Python runs while the
    lock is held."""
    if connection.vendor != "postgresql":
        pytest.skip("the round trips of PostgreSQL's write path")
    _write(api, tokens.agent, "The nightly export runs at two")  # stamps the token's last use
    with RoundTrips(connection) as sent:
        response = api.tool(
            "memory_write", tokens.agent, {"kind": "fact", "content": "The cache warms up"}
        )
    assert response.status_code == 200, response.json()
    assert len(sent.trips) == 2, _listing(sent.trips)
    check, write = sent.trips
    assert "memory_apitoken" in check and "INSERT INTO memory_run_slot" in check
    # The pipeline's own transaction, committed by its sync (no BEGIN or COMMIT of its own).
    parts = sent.statements[1:]
    assert len(parts) == 4 and not {"BEGIN", "COMMIT"} & set(parts), _listing(parts)
    assert "set_config('statement_timeout'" in parts[0] and parts[1].endswith("FOR UPDATE")
    assert "revision = revision + 1" in parts[3]
    for table in (
        "project_memory_entry", "memory_auditevent", "memory_toolcallcount", "memory_event"
    ):  # fmt: skip
        assert f"INSERT INTO {table}" in parts[3] or f'INSERT INTO "{table}"' in parts[3]
    assert "DELETE FROM memory_run_slot" in parts[3]
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM memory_run_slot")
        assert cursor.fetchone()[0] == 0, "every slot given back"
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "30s", "the session's bound restored"
        # The token check's slot commits without waiting for the WAL's flush; the note's
        # transaction does wait (and flushes the check's with its own).
        assert "synchronous_commit" in check and "synchronous_commit" not in write, write
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


def test_the_token_check_is_one_statement(tokens, world):
    token_authenticate(tokens.agent)  # stamps last use
    with CaptureQueriesContext(connection) as captured:
        token = token_authenticate(tokens.agent)
        run = token.run
        loaded = (run.agent.stage, run.project.slug, run.application.slug)
        setting = run.project.memory_setting
    assert len(captured) == 1
    assert loaded == (world.agent.stage, world.project.slug, world.app.slug)
    assert setting.enabled and setting.project_id == world.project.pk
    with CaptureQueriesContext(connection) as captured:
        person = token_authenticate(tokens.manager)
        assert person.user.pk == world.manager.pk and person.run is None
    assert len(captured) <= 2  # the row, and its first use


def test_a_write_refused_under_the_lock_counts_its_refusal_once(api, tokens, world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "PROJECT_NOTE_CAP": 1}
    _write(api, tokens.agent, "One")
    revision = MemorySetting.objects.get(project=world.project).revision
    full = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "Two"})
    assert full.status_code == 409 and error_code(full) == "memory_project_full"
    assert MemorySetting.objects.get(project=world.project).revision == revision
    world.run.refresh_from_db()
    assert world.run.tool_calls == 2
    trace = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=world.run)}
    assert trace == {("write", "ok"): 1, ("write", "memory_project_full"): 1}


def test_an_idempotent_repeat_is_one_ok_call_and_changes_nothing(api, tokens, world):
    first, _ = _write(api, tokens.agent, "Same words")
    revision = MemorySetting.objects.get(project=world.project).revision
    again, _ = _write(api, tokens.agent, "Same words")
    assert again.json()["id"] == first.json()["id"] and again.json()["created"] is False
    assert MemorySetting.objects.get(project=world.project).revision == revision
    world.run.refresh_from_db()
    assert world.run.tool_calls == 2
    assert ToolCallCount.objects.get(run=world.run, tool="write", outcome="ok").count == 2


def test_a_budget_spent_before_the_call_refuses_before_anything_runs(api, tokens, world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_CALL_BUDGET": 1}
    _write(api, tokens.agent, "The only call")
    spent = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "Another"})
    assert spent.status_code == 429 and error_code(spent) == "memory_call_budget"
    assert Note.objects.filter(project=world.project).count() == 1
    trace = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=world.run)}
    assert trace == {("write", "ok"): 1, ("write", "memory_call_budget"): 1}


@pytest.mark.parametrize("content", ["A new fact", "Kept"])
def test_a_budget_spent_during_the_call_rolls_the_write_back(
    api, tokens, world, settings, monkeypatch, content
):
    """Another call of the run takes the last call between this call's token check and its
    write: the write is refused and leaves nothing, as if the budget had been checked first.
    ("Kept" is an idempotent repeat, which is counted after its transaction.)"""
    _write(api, tokens.agent, "Kept")
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_CALL_BUDGET": 2}
    monkeypatch.setattr(services, "run_budget_spent", lambda run: False)
    Run.objects.filter(pk=world.run.pk).update(tool_calls=2)
    revision = MemorySetting.objects.get(project=world.project).revision
    late = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": content})
    assert late.status_code == 429 and error_code(late) == "memory_call_budget"
    assert Note.objects.filter(project=world.project).count() == 1
    assert MemorySetting.objects.get(project=world.project).revision == revision
    trace = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=world.run)}
    assert trace == {("write", "ok"): 1, ("write", "memory_call_budget"): 1}


def test_a_v1_save_takes_its_call_in_its_transaction(api, tokens, world):
    response = api.post("/api/v1/memories", tokens.agent, {"text": "Deploys go out on Tuesday"})
    assert response.status_code == 201, response.json()
    world.run.refresh_from_db()
    assert world.run.tool_calls == 1
    assert ToolCallCount.objects.get(run=world.run, tool="v1-save", outcome="ok").count == 1


def test_a_direct_service_write_takes_no_call(world):
    services.note_write(actor=world.as_agent, kind="fact", content="Not an API call")
    world.run.refresh_from_db()
    assert world.run.tool_calls == 0
    assert not ToolCallCount.objects.filter(run=world.run).exists()
