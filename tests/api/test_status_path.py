"""`memory_status` as a request runs it: its statements do not grow with the notes the caller
sees — on PostgreSQL their count and the fingerprint come back as one row of one statement
(docs/PERFORMANCE.md, "The hot path against the floor")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.selectors.agent import kept_seen

from .conftest import RoundTrips

pytestmark = pytest.mark.django_db


def _status(api, token, *, kept: bool = False) -> tuple[dict, list[str]]:
    """The answer and its statements; `kept=False`: as the first status at this revision."""
    if not kept:
        kept_seen.clear()
    with CaptureQueriesContext(connection) as captured:
        answer = api.tool("memory_status", token, {})
    assert answer.status_code == 200, answer.json()
    return answer.json(), [q["sql"] for q in captured.captured_queries]


def _write(world, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        services.note_write(
            actor=world.as_agent2, kind="fact", content=f"Release train {i} ships on Tuesday."
        )


def test_memory_status_sends_the_same_statements_at_3_and_at_40_notes(api, tokens, world):
    _write(world, 3)
    _status(api, tokens.agent)  # the token's first call also stamps its last use
    few, statements_few = _status(api, tokens.agent)
    _write(world, 37, start=3)
    many, statements_many = _status(api, tokens.agent)
    assert many["noteCount"] == few["noteCount"] + 37
    assert many["fingerprint"] != few["fingerprint"]
    assert len(statements_many) == len(statements_few), "\n".join(statements_many)
    if connection.vendor == "postgresql":
        digests = [s for s in statements_many if "hashtextextended" in s]
        assert len(digests) == 1 and "count(*)" in digests[0], "\n".join(statements_many)
        # Nothing else reads the project's notes: the count rides on the digest.
        notes = [s for s in statements_many if "project_memory_entry" in s]
        assert notes == digests, "\n".join(statements_many)


def test_the_count_includes_the_callers_own_notes_the_fingerprint_does_not(api, tokens, world):
    _write(world, 2)
    before, _ = _status(api, tokens.agent)
    services.note_write(actor=world.as_agent, kind="fact", content="Caches warm up in 4 min.")
    after, _ = _status(api, tokens.agent)
    assert after["noteCount"] == before["noteCount"] + 1
    assert after["fingerprint"] == before["fingerprint"]


@pytest.mark.django_db(transaction=True)
def test_a_status_is_answered_after_two_round_trips_and_one_at_an_unchanged_revision(
    api, tokens, world
):
    """PostgreSQL, as a request runs: the token check (which takes the run's slot and the call
    from its budget, and carries the setting row) and the count and digest — left out when
    they are kept for this revision — then the answer; the trace row with the slot given back
    goes after it."""
    if connection.vendor != "postgresql":
        pytest.skip("the round trips of PostgreSQL's status path")
    _write(world, 3)
    _status(api, tokens.agent)  # stamps the token's last use
    kept_seen.clear()
    world.run.refresh_from_db()
    calls_before = world.run.tool_calls
    trips = []
    for _ in range(2):
        with RoundTrips(connection) as sent:
            assert api.tool("memory_status", tokens.agent, {}).status_code == 200
        trips.append((sent.before_answer, sent.after_answer))
    (first, after), (again, after_again) = trips
    assert len(first) == 2, "\n".join(first)
    check, digest = first
    assert "memory_apitoken" in check and "INSERT INTO memory_run_slot" in check
    assert "UPDATE memory_run AS counted SET tool_calls" in check
    assert "hashtextextended" in digest
    # The trace row and the slot's give-back: one trip, after the answer has left.
    assert len(after) == 1, "\n".join(after)
    trace = after[0]
    assert "memory_toolcallcount" in trace and "DELETE FROM memory_run_slot" in trace
    assert again == [check] and after_again == [trace], "\n".join(again + after_again)
    world.run.refresh_from_db()
    assert world.run.tool_calls == calls_before + 2, "each call taken from the budget once"
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM memory_run_slot")
        assert cursor.fetchone()[0] == 0, "every slot given back"
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "30s", "the session's bound restored"
        # The slot's take commits without waiting for the WAL's flush, for itself only.
        assert "set_config('synchronous_commit', 'off', true)" in check
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on", "every later commit of the session is durable"


def _reads_notes(statements: list[str]) -> list[str]:
    return [s for s in statements if "project_memory_entry" in s]


def test_a_status_at_an_unchanged_revision_reads_no_note(api, tokens, world):
    """The count and fingerprint are kept per revision and view: asked again with nothing
    changed, a status reads no note; a write by another run changes both, read anew."""
    _write(world, 3)
    first, statements = _status(api, tokens.agent)
    assert _reads_notes(statements), "\n".join(statements)
    again, statements = _status(api, tokens.agent, kept=True)
    assert again == first and not _reads_notes(statements), "\n".join(statements)
    _write(world, 1, start=3)
    after, statements = _status(api, tokens.agent, kept=True)
    assert _reads_notes(statements) and after["revision"] == first["revision"] + 1
    assert after["noteCount"] == first["noteCount"] + 1
    assert after["fingerprint"] != first["fingerprint"]


def test_a_kept_status_ends_when_a_note_it_counted_expires(api, tokens, world, monkeypatch):
    """Time changes what an agent sees only as a note expires: the kept answer lasts until
    the first expiry among the notes it counted, not past it."""
    now = timezone.now()
    services.note_write(
        actor=world.as_agent2, kind="fact", content="The preview link works until noon.",
        expires_at=now + timedelta(hours=1),
    )  # fmt: skip
    _write(world, 1)
    first, _ = _status(api, tokens.agent)
    assert first["noteCount"] == 2
    monkeypatch.setattr(timezone, "now", lambda: now + timedelta(minutes=59))
    still, statements = _status(api, tokens.agent, kept=True)
    assert still == first and not _reads_notes(statements)
    monkeypatch.setattr(timezone, "now", lambda: now + timedelta(hours=1, seconds=1))
    later, statements = _status(api, tokens.agent, kept=True)
    assert _reads_notes(statements), "\n".join(statements)
    assert later["noteCount"] == 1 and later["fingerprint"] != first["fingerprint"]
    assert later["revision"] == first["revision"]
