"""Real concurrency on PostgreSQL: threads with their own connections, started together through
a barrier, against the setting-row lock of the write protocol (SPEC §2.4)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Note
from memory_portal.memory.services import notes as note_services
from memory_portal.memory.validation import content_identity

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def run_together(count: int, work: Callable[[int], object]) -> list[object]:
    """Run work(i) in `count` threads released at once; each result is a value or the error."""
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count

    def target(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = work(i)
        except Exception as exc:  # noqa: BLE001 - the test inspects every outcome
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def codes(results: list[object]) -> list[str]:
    return sorted(r.code if isinstance(r, MemoryPortalError) else "ok" for r in results)


def fresh_runs(world, count: int) -> list[Actor]:
    return [
        Actor.agent_run(services.run_create(actor=None, agent=world.agent)) for _ in range(count)
    ]


def test_twenty_writers_race_for_the_last_slot(world):
    # Fill the project to 1,999 stored notes (test setup, not under test).
    now = timezone.now()
    Note.objects.bulk_create(
        Note(
            project=world.project,
            kind="fact",
            content=f"filler {i}",
            created_at=now,
            updated_at=now,
            place_key=content_identity(
                kind="fact",
                scope="project",
                target="long_term",
                day=None,
                application_id=None,
                owner_agent_id=None,
                content=f"filler {i}",
            ),
        )
        for i in range(1999)
    )
    actors = fresh_runs(world, 20)
    results = run_together(
        20,
        lambda i: services.note_write(actor=actors[i], kind="fact", content=f"racer {i}"),
    )
    assert codes(results) == ["memory_project_full"] * 19 + ["ok"]
    assert Note.objects.filter(project=world.project).count() == 2000


def test_ten_identical_writes_make_one_note(world):
    actors = fresh_runs(world, 10)
    results = run_together(
        10,
        lambda i: services.note_write(
            actor=actors[i], kind="lesson", content="Compare column positions first."
        ),
    )
    assert codes(results) == ["ok"] * 10
    assert len({r.note.id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert Note.objects.filter(project=world.project).count() == 1


def test_disable_during_validation_revokes_the_write(world, monkeypatch):
    validated = threading.Event()
    disabled = threading.Event()
    original = note_services.check_no_secret

    def pause_after_validation(**fields):
        original(**fields)
        validated.set()
        assert disabled.wait(timeout=10)

    monkeypatch.setattr(note_services, "check_no_secret", pause_after_validation)
    outcome: dict[str, object] = {}

    def writer() -> None:
        try:
            outcome["result"] = services.note_write(
                actor=world.as_agent, kind="fact", content="Written while disabling"
            )
        except MemoryPortalError as exc:
            outcome["result"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert validated.wait(timeout=10)
    services.memory_disable(actor=world.as_manager, project=world.project)
    disabled.set()
    thread.join(timeout=30)
    result = outcome["result"]
    assert isinstance(result, MemoryPortalError) and result.code == "memory_write_revoked"
    assert not Note.objects.filter(project=world.project).exists()


def test_writes_racing_a_reset(world):
    """Every write acknowledged before the reset began is gone after it; every write
    acknowledged after the reset returned survives; nothing fails except by revocation."""
    actors = fresh_runs(world, 4)
    reset_started = threading.Event()
    reset_done = threading.Event()
    acks: list[tuple[str, str]] = []  # (note id, when: before / during / after)
    failures: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + 20

    def writer(i: int) -> None:
        n = after = 0
        try:
            while time.monotonic() < stop and after < 10:
                n += 1
                started_after = reset_done.is_set()
                try:
                    result = services.note_write(
                        actor=actors[i], kind="fact", content=f"writer {i} note {n}"
                    )
                except MemoryPortalError as exc:
                    with lock:
                        failures.append(exc.code)
                    continue
                acked_before = not reset_started.is_set()
                when = "after" if started_after else "before" if acked_before else "during"
                after += when == "after"
                with lock:
                    acks.append((result.note.id, when))
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    while len(acks) < 40 and time.monotonic() < stop:
        time.sleep(0.01)
    reset_started.set()
    services.memory_reset(actor=world.as_manager, project=world.project)
    reset_done.set()
    for thread in threads:
        thread.join(timeout=60)
    surviving = set(Note.objects.filter(project=world.project).values_list("id", flat=True))
    before = [note_id for note_id, when in acks if when == "before"]
    after = [note_id for note_id, when in acks if when == "after"]
    assert before and after, "the race needs writes on both sides of the reset"
    assert not surviving.intersection(before)
    assert set(after) <= surviving
    assert set(failures) <= {"memory_write_revoked"}
