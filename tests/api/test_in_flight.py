"""At most RUN_IN_FLIGHT calls of one top-level run in flight (memory/run_slots.py): the next
waits its bound, then is refused 429 `memory_run_busy` with Retry-After, taking nothing from
the budget; other runs are not held up; a slot comes free when its call ends."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import Note, Run, ToolCallCount
from memory_portal.memory.run_slots import call_slot

from .conftest import error_code


@pytest.fixture
def two_slots(settings):
    settings.MEMORY_PORTAL = {
        **settings.MEMORY_PORTAL, "RUN_IN_FLIGHT": 2, "RUN_IN_FLIGHT_WAIT_MS": 150
    }  # fmt: skip


@contextmanager
def held(run_id: str, count: int, *, for_seconds: float = 10):
    """`count` calls of the run in flight, each in a thread of its own (its own database
    connection), until the block ends or `for_seconds` have passed."""
    taken = threading.Barrier(count + 1)
    release = threading.Event()
    errors: list[BaseException] = []

    def hold():
        from django.db import connection

        try:
            with call_slot(run_id):
                taken.wait(5)
                release.wait(for_seconds)
        except BaseException as exc:  # reported below
            errors.append(exc)
            taken.abort()
        finally:
            connection.close()

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for thread in threads:
        thread.start()
    taken.wait(5)
    try:
        yield
    finally:
        release.set()
        for thread in threads:
            thread.join(10)
    assert not errors, errors


WRITE = {"kind": "fact", "content": "The queue drains by itself after a deploy."}


def test_the_next_call_of_a_full_run_is_a_429_that_takes_nothing(api, tokens, world, two_slots):
    run = Run.objects.get(pk=world.run.pk)
    with held(run.top_level_run_id, 2):
        refused = api.tool("memory_write", tokens.agent, WRITE)
        assert refused.status_code == 429 and error_code(refused) == "memory_run_busy"
        assert int(refused["Retry-After"]) >= 1
        assert "2 calls in flight" in refused.json()["error"]["message"]
        other = api.tool("memory_status", tokens.agent2, {})  # another run is not held up
        assert other.status_code == 200
    assert not Note.objects.exists()
    run.refresh_from_db()
    assert run.tool_calls == 0 and not ToolCallCount.objects.filter(run=run).exists()
    again = api.tool("memory_write", tokens.agent, WRITE)  # the slots came free
    assert again.status_code == 200 and again.json()["created"]


def test_a_nested_run_shares_its_top_level_runs_slots(api, world, two_slots):
    child = services.run_create(actor=None, agent=world.agent, parent=world.run)
    token = services.token_create(actor=None, run=child)[1]
    with held(world.run.top_level_run_id, 2):
        refused = api.tool("memory_status", token, {})
        assert refused.status_code == 429 and error_code(refused) == "memory_run_busy"


def test_a_call_waits_for_a_slot_within_its_bound(api, tokens, world, settings):
    """A call that finds every slot taken waits (here up to 3 s) and runs once one comes free."""
    import time

    settings.MEMORY_PORTAL = {
        **settings.MEMORY_PORTAL, "RUN_IN_FLIGHT": 1, "RUN_IN_FLIGHT_WAIT_MS": 3000
    }  # fmt: skip
    with held(world.run.top_level_run_id, 1, for_seconds=0.4):
        started = time.monotonic()
        answer = api.tool("memory_status", tokens.agent, {})
        waited = time.monotonic() - started
    assert answer.status_code == 200 and 0.3 <= waited < 3
