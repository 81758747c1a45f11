"""No tool call runs past its bound (MEMORY_CALL_TIMEOUT_MS, 10 s; memory/deadline.py): what
could run long is cut to the time the call has left, and a call out of time answers 503
`memory_timeout` with Retry-After, having written nothing. The bound is shortened here; the
clock is moved where a test needs time to pass without waiting for it."""

from __future__ import annotations

import stat
import time

import pytest
from django.db import connection
from django.test import Client

from memory_portal.memory import deadline, services
from memory_portal.memory.models import Note, Recovery, Run
from memory_portal.memory.services import change as change_module
from memory_portal.memory.services import notes as write_module
from tests.memory.test_evidence import make_repo

from .conftest import Api, error_code

WRITE = {"kind": "fact", "content": "The queue drains by itself after a deploy."}


@pytest.fixture
def bound(settings):
    """Calls bounded to `ms` milliseconds."""

    def set_bound(ms: int) -> None:
        settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "CALL_TIMEOUT_MS": ms}

    return set_bound


def clock_jumps(monkeypatch):
    """The call's clock, moved on by a minute whenever the returned function is called."""
    shift = [0.0]
    monkeypatch.setattr(deadline, "clock", lambda: time.monotonic() + shift[0])

    def jump() -> None:
        shift[0] += 60

    return jump


def assert_timed_out(response) -> None:
    assert response.status_code == 503, response.content
    assert error_code(response) == "memory_timeout"
    assert response["Retry-After"] == "2"
    error = response.json()["error"]
    assert "nothing was written" in error["message"] and error["hint"]


def test_a_write_out_of_time_before_its_lock_writes_nothing(api, tokens, world, monkeypatch):
    """The bound is checked before the write starts its transaction (the one-statement write
    on PostgreSQL, the full protocol on SQLite)."""
    jump = clock_jumps(monkeypatch)
    stamp = write_module.stamp_provenance

    def slow_stamp(actor, note):  # the work before the lock took the call's time
        jump()
        stamp(actor, note)

    monkeypatch.setattr(write_module, "stamp_provenance", slow_stamp)
    assert_timed_out(api.tool("memory_write", tokens.agent, WRITE))
    assert not Note.objects.exists()
    monkeypatch.setattr(write_module, "stamp_provenance", stamp)
    again = api.tool("memory_write", tokens.agent, WRITE)
    assert again.status_code == 200 and again.json()["created"], "the same call works after"


def test_a_change_that_ran_past_its_time_rolls_back_whole(api, tokens, world, monkeypatch):
    """A change under the lock that outlasts the call is not committed: the forget is undone
    whole (the note stays live, no recovery is left)."""
    old = services.note_write(actor=world.as_agent, kind="fact", content="Deploys at noon").note
    jump = clock_jumps(monkeypatch)
    flush = change_module.ProjectChange._flush

    def slow_flush(change):
        flush(change)
        jump()

    monkeypatch.setattr(change_module.ProjectChange, "_flush", slow_flush)
    assert_timed_out(api.tool("memory_forget", tokens.agent, {"id": old.pk}))
    assert list(Note.objects.values_list("pk", "status")) == [(old.pk, "active")]
    assert not Recovery.objects.exists()


def test_an_evidence_check_is_cut_to_the_calls_time(api, tokens, world, settings, tmp_path):
    """A git that hangs (a huge repository, a stuck disk) is stopped when the call's time runs
    out — sooner than its own timeout — and the call is a retryable 503, not a refusal of the
    evidence."""
    path, _ = make_repo(tmp_path, {"README.md": "# Service\nThe queue drains by itself.\n"})
    repository = services.repository_create(actor=None, slug="svc-main", path=path)
    services.repository_link_set(
        actor=None, application=world.app, repository=repository, revision="HEAD"
    )
    hanging = tmp_path / "git"
    hanging.write_text("#!/bin/sh\nsleep 30\n")
    hanging.chmod(hanging.stat().st_mode | stat.S_IEXEC)
    settings.MEMORY_PORTAL = {
        **settings.MEMORY_PORTAL,
        "GIT_BINARY": str(hanging),
        "GIT_TIMEOUT_SECONDS": 20,
        "CALL_TIMEOUT_MS": 700,
    }
    body = {
        **WRITE,
        "evidence": {"repositoryId": "svc-main", "path": "README.md", "quote": "drains by itself"},
    }
    started = time.monotonic()
    response = api.tool("memory_write", tokens.agent, body)
    took = time.monotonic() - started
    assert_timed_out(response)
    assert took < 3, f"answered after {took:.1f} s"
    assert not Note.objects.exists()


def test_the_bound_is_off_at_zero_and_outside_calls(api, tokens, bound, monkeypatch):
    assert deadline.remaining() is None  # a command, a page: no bound
    bound(0)
    jump = clock_jumps(monkeypatch)
    stamp = write_module.stamp_provenance

    def slow_stamp(actor, note):
        jump()
        stamp(actor, note)

    monkeypatch.setattr(write_module, "stamp_provenance", slow_stamp)
    response = api.tool("memory_write", tokens.agent, WRITE)
    assert response.status_code == 200 and response.json()["created"]


# --- PostgreSQL: the database's own waits, cut to the call's time --------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_held_lock_is_waited_for_only_as_long_as_the_call_has(make_user, settings):
    from tests.conftest import build_world

    from .test_failures import setting_row_held

    world = build_world(make_user)
    token = services.token_create(actor=None, run=world.run)[1]
    settings.DB_LOCK_TIMEOUT_MS = 5_000  # the lock's own bound is longer than the call's
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "CALL_TIMEOUT_MS": 600}
    with setting_row_held(world.project):
        started = time.monotonic()
        response = Api(Client()).tool("memory_write", token, WRITE)
        took = time.monotonic() - started
    assert_timed_out(response)
    assert took < 2, f"answered after {took:.1f} s"
    assert not Note.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_slow_read_stops_at_the_calls_bound(make_user, settings, monkeypatch):
    """The call's statements run under a statement_timeout of the time it has left (set with
    the run's slot), and the connection gets its configured bound back afterwards."""
    from memory_portal.api import tools
    from tests.conftest import build_world

    world = build_world(make_user)
    token = services.token_create(actor=None, run=world.run)[1]
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "CALL_TIMEOUT_MS": 800}
    notes_for_actor = tools.selectors.notes_for_actor

    def slow_database(*, actor):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
        return notes_for_actor(actor=actor)

    monkeypatch.setattr(tools.selectors, "notes_for_actor", slow_database)
    api = Api(Client())
    with connection.cursor() as cursor:  # the test client's requests share this connection
        cursor.execute("SHOW statement_timeout")
        configured = cursor.fetchone()[0]
    started = time.monotonic()
    response = api.tool("memory_read", token, {})
    took = time.monotonic() - started
    assert_timed_out(response)
    assert took < 2.5, f"answered after {took:.1f} s"
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == configured
    assert Run.objects.get(pk=world.run.pk).status == "running"
