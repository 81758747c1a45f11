"""At most RUN_IN_FLIGHT calls of one top-level run in flight (memory/run_slots.py): the next
waits its bound, then is refused 429 `memory_run_busy` with Retry-After, taking nothing from
the budget; other runs are not held up; a slot comes free when its call ends."""

from __future__ import annotations

import io
import os
import threading
from contextlib import contextmanager

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import Note, Run, RunSlot, ToolCallCount
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
    assert not RunSlot.objects.exists()  # a call gives its slot back when it ends


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


# A process whose threads (a database connection each, as a server's) take a run's slots; it
# says so, and then waits to be frozen or killed.
TAKER = """
import sys, threading, time, django
django.setup()
from memory_portal.memory.run_slots import call_slot
count = int(sys.argv[2])
taken = threading.Barrier(count + 1)
def call():
    with call_slot(sys.argv[1]):
        taken.wait()
        time.sleep(120)
for _ in range(count):
    threading.Thread(target=call, daemon=True).start()
taken.wait(30)
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_frozen_hosts_slots_come_back_once_its_calls_could_no_longer_run(settings):
    """A host frozen or cut off mid-call keeps its database connection open for hours in
    PostgreSQL's eyes (TCP keepalive): slots held by that connection (session advisory locks)
    kept the run refused everywhere until it came back. A slot is a row that stands for its
    call only as long as the call could run (its time bound and a margin): here a real
    process takes both of a run's slots and is frozen (SIGSTOP, its connection open), and the
    run is served again seconds later."""
    import signal
    import subprocess
    import sys
    import time

    from django.db import connection

    from memory_portal.memory.errors import MemoryPortalError
    from memory_portal.memory.run_slots import HOLD_MARGIN_SECONDS

    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {
        **os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "memory_portal.settings",
        "MEMORY_RUN_IN_FLIGHT": "2", "MEMORY_CALL_TIMEOUT_MS": "1000",
    }  # fmt: skip
    settings.MEMORY_PORTAL = {
        **settings.MEMORY_PORTAL, "RUN_IN_FLIGHT": 2, "RUN_IN_FLIGHT_WAIT_MS": 100
    }  # fmt: skip
    run_id = "run_frozenhost0000000000000000"
    taker = subprocess.Popen(
        [sys.executable, "-c", TAKER, run_id, "2"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert taker.stdout.readline().strip() == "held"
        taken = time.monotonic()
        os.kill(taker.pid, signal.SIGSTOP)  # frozen mid-call: its connection stays open
        with pytest.raises(MemoryPortalError) as busy, call_slot(run_id):
            pass
        assert busy.value.code == "memory_run_busy"
        with call_slot("run_anotherrun00000000000000000"):  # other runs are not held up
            pass
        served = None
        while time.monotonic() - taken < 1 + HOLD_MARGIN_SECONDS + 5:
            try:
                with call_slot(run_id):
                    served = time.monotonic() - taken
                break
            except MemoryPortalError:
                time.sleep(0.2)
        assert served is not None and served >= 1, served
    finally:
        taker.kill()
        taker.wait(10)


@pytest.mark.postgres
def test_the_routine_runner_sweeps_slots_a_vanished_host_left(db):
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    now = timezone.now()
    RunSlot.objects.create(run_id="run_gone", slot=0, expires_at=now - timedelta(hours=2))
    RunSlot.objects.create(run_id="run_recent", slot=0, expires_at=now - timedelta(minutes=5))
    call_command("memory_run_due_routines", stdout=io.StringIO())
    assert list(RunSlot.objects.values_list("run_id", flat=True)) == ["run_recent"]


@pytest.mark.django_db(transaction=True)
def test_a_slot_the_token_check_took_comes_back_whatever_the_answer(client):
    """A tool's token check takes the run's slot in its own statement (one round trip fewer);
    a request refused before its call runs — a body that does not parse, a tool not offered,
    an expired token — gives it back when it ends, and an answered call leaves none."""
    from django.utils import timezone

    from memory_portal.memory.models import ApiToken, Stage

    from .conftest import Api

    api = Api(client)
    project = services.project_create(actor=None, slug="slots", name="Slots")
    services.memory_enable(actor=None, project=project)
    agent = services.agent_create(actor=None, project=project, name="A", stage=Stage.RUNTIME)
    reviewer = services.agent_create(actor=None, project=project, name="R", stage=Stage.REVIEW)
    runs = [services.run_create(actor=None, agent=a) for a in (agent, reviewer)]
    token, reviewing = (services.token_create(actor=None, run=r)[1] for r in runs)
    assert api.tool("memory_write", token, {"kind": "fact"}).status_code == 400
    broken = client.post(
        "/api/tools/memory_write", "{", content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )  # fmt: skip
    assert broken.status_code == 400
    assert api.tool("memory_write", reviewing, WRITE).status_code == 403  # not offered
    assert api.tool("memory_status", token, {}).status_code == 200
    assert api.tool("memory_write", token, WRITE).status_code == 200
    assert not RunSlot.objects.exists()
    ApiToken.objects.update(expires_at=timezone.now())
    assert api.tool("memory_status", token, {}).status_code == 401
    assert not RunSlot.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_call_the_token_check_took_from_the_budget_counts_once_or_comes_back(
    client, settings, monkeypatch
):
    """On PostgreSQL a tool's token check also takes the call from its run's budget (a round
    trip fewer; a write's own statement takes its own): an answered call, a refused body and a
    spent budget each count once, as ever; a request that fails between the check and its
    call gives the call back with the slot."""
    from django.test import Client

    from memory_portal.api import calls
    from memory_portal.memory.models import Stage

    from .conftest import Api

    api = Api(client)
    project = services.project_create(actor=None, slug="budget", name="Budget")
    services.memory_enable(actor=None, project=project)
    agent = services.agent_create(actor=None, project=project, name="A", stage=Stage.RUNTIME)
    run = services.run_create(actor=None, agent=agent)
    token = services.token_create(actor=None, run=run)[1]

    def used() -> int:
        run.refresh_from_db()
        return run.tool_calls

    assert api.tool("memory_status", token, {}).status_code == 200
    assert used() == 1
    assert api.tool("memory_status", token, {"project": "x"}).status_code == 400
    assert used() == 2
    assert api.tool("memory_write", token, WRITE).status_code == 200
    assert used() == 3

    def fails():
        raise RuntimeError("a forced failure before the call")

    with monkeypatch.context() as patched:
        patched.setattr(calls.deadline, "bounded_call", fails)
        answer = Client(raise_request_exception=False).post(
            "/api/tools/memory_status", {}, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )  # fmt: skip
    assert answer.status_code == 500
    assert used() == 3, "the call the check took is given back"
    assert not RunSlot.objects.exists()

    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_CALL_BUDGET": 4}
    assert api.tool("memory_search", token, {"query": "anything"}).status_code == 200
    spent = api.tool("memory_status", token, {})
    assert spent.status_code == 429 and error_code(spent) == "memory_call_budget"
    assert used() == 4
    counts = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=run)}
    assert counts == {
        ("status", "ok"): 1,
        ("status", "memory_invalid"): 1,
        ("write", "ok"): 1,
        ("search", "ok"): 1,
        ("status", "memory_call_budget"): 1,
    }
    assert not RunSlot.objects.exists()
