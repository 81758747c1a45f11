"""A revert racing the run's own writes on PostgreSQL: the revert holds the setting-row lock
for its whole transaction, so each write lands either before it (and is reverted) or after it
(and stays); an unrelated run's writes are never touched."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Note, RunRevert, Status

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_writes_racing_a_revert(world):
    child = services.run_create(actor=None, agent=world.agent, parent=world.run)
    writers = [Actor.agent_run(world.run), Actor.agent_run(child), world.as_agent2]
    started, done = threading.Event(), threading.Event()
    acks: list[tuple[int, str, str]] = []  # (writer, note id, before / during / after)
    failures: list[object] = []
    lock = threading.Lock()
    stop = time.monotonic() + 20

    def writer(i: int) -> None:
        n = after = 0
        try:
            while time.monotonic() < stop and after < 5:
                n += 1
                began_after = done.is_set()
                try:
                    result = services.note_write(
                        actor=writers[i], kind="fact", content=f"writer {i} note {n}"
                    )
                except MemoryPortalError as exc:
                    with lock:
                        failures.append(exc.code)
                    continue
                when = "after" if began_after else "before" if not started.is_set() else "during"
                after += when == "after"
                with lock:
                    acks.append((i, result.note.id, when))
        except Exception as exc:  # noqa: BLE001 - the test reports every outcome
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    while len(acks) < 30 and time.monotonic() < stop:
        time.sleep(0.01)
    started.set()
    _, revert = services.run_revert(
        actor=world.as_manager, run=world.run, dry_run=False, confirm=world.run.pk
    )
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    connection.close()

    assert failures == []
    status = dict(Note.objects.values_list("id", "status"))
    reverted = {item["note"] for item in RunRevert.objects.get(pk=revert.pk).items}
    ours = [(note_id, when) for i, note_id, when in acks if i < 2]
    assert [n for n, when in ours if when == "before"], "the race needs writes before"
    assert [n for n, when in ours if when == "after"], "the race needs writes after"
    for note_id, when in ours:
        if when == "before":
            assert note_id in reverted and status[note_id] == Status.FORGOTTEN
        elif when == "after":
            assert note_id not in reverted and status[note_id] == Status.ACTIVE
        else:  # acknowledged while the revert ran: on one side of it, never half
            assert (note_id in reverted) == (status[note_id] == Status.FORGOTTEN)
    others = [note_id for i, note_id, _ in acks if i == 2]
    assert others and all(status[n] == Status.ACTIVE for n in others)
    assert not reverted.intersection(others)
