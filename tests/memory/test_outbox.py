"""The outbox (SPEC §2.12): every change that matters appends an event in its own transaction,
numbered per project without a gap; a change that is refused or rolled back appends none and
takes no number; an event never holds a note's content, summary, tags or a reason."""

from __future__ import annotations

import json

import pytest

from memory_portal.memory import outbox, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Event, MemorySetting, Recovery

SECRETISH = "zebra-umbrella content words"


def _events(project) -> list[Event]:
    return list(Event.objects.filter(project=project).order_by("number"))


def test_every_change_that_matters_appends_its_event_numbered_without_a_gap(world):
    m = world.as_manager
    written = services.note_write(
        actor=world.as_agent, kind="fact", content=f"The {SECRETISH} one", summary="sum words",
        tags=["tagword"],
    ).note  # fmt: skip
    fact = services.fact_save(actor=world.as_agent, text=f"A fact of {SECRETISH}").note
    newer = services.fact_save(
        actor=world.as_agent, text=f"A newer fact of {SECRETISH}", supersedes=fact.pk
    ).note
    edited = services.note_edit(actor=m, note_id=written.pk, content=f"Edited {SECRETISH}").note
    services.note_approve(actor=m, note_id=edited.pk)
    services.note_reject(actor=m, note_id=newer.pk)
    services.note_veto(actor=world.as_member, note_id=edited.pk)
    services.note_undo(actor=world.as_member, note_id=edited.pk)
    forgotten = services.note_write(actor=world.as_agent, kind="lesson", content="Forget me").note
    recovery = services.note_forget(actor=m, note_id=forgotten.pk)
    services.note_restore(actor=m, recovery_id=recovery.pk)
    services.memory_disable(actor=m, project=world.project)
    services.memory_enable(actor=m, project=world.project)
    services.memory_reset(actor=m, project=world.project)

    events = _events(world.project)
    assert [e.type for e in events] == [
        "note.written", "note.written", "note.superseded", "note.superseded", "note.reviewed",
        "note.rejected", "note.vetoed", "note.unvetoed", "note.written", "note.forgotten",
        "note.restored", "memory.disabled", "memory.enabled", "memory.reset",
    ]  # fmt: skip
    assert [e.number for e in events] == list(range(1, len(events) + 1))
    setting = MemorySetting.objects.get(project=world.project)
    assert setting.event_seq == len(events)
    assert set(e.type for e in events) <= set(outbox.TYPES)

    first = events[0].data
    assert first["note"]["id"] == written.pk and first["note"]["trust"] == "learned"
    assert first["note"]["agentId"] == world.agent.pk and first["note"]["taskKey"] == "PIN-42"
    assert first["actor"] == {
        "type": "agent", "agentId": world.agent.pk, "runId": world.run.pk
    }  # fmt: skip
    assert first["link"] == f"/p/acme-web/notes/{written.pk}/"
    assert events[3].data["supersedes"] == written.pk and events[3].data["note"]["id"] == edited.pk
    assert events[4].data["actor"] == {"type": "person", "username": world.manager.username}
    assert events[6].data["note"]["status"] == "archived"
    assert events[-1].data["counts"]["notes"] == 5 and events[-1].data["link"] == "/p/acme-web/"
    # Never what an agent wrote: no content, summary, tag or reason in any event.
    text = json.dumps([e.data for e in events])
    for word in ("zebra", "umbrella", "sum words", "tagword", "Forget me", "vetoed by"):
        assert word not in text


def test_a_refused_or_rolled_back_change_appends_nothing_and_takes_no_number(world):
    note = services.note_write(actor=world.as_agent, kind="fact", content="Kept").note
    with pytest.raises(MemoryPortalError):
        services.note_forget(actor=world.as_agent2, note_id="mem_00000000000000000000000000")
    with pytest.raises(MemoryPortalError):  # an agent may not veto
        services.note_veto(actor=world.as_agent, note_id=note.pk)
    services.note_write(actor=world.as_agent, kind="fact", content="Kept")  # identical: nothing
    services.note_approve(actor=world.as_manager, note_id=note.pk)
    assert [(e.number, e.type) for e in _events(world.project)] == [
        (1, "note.written"), (2, "note.reviewed")
    ]  # fmt: skip


def test_each_project_numbers_its_own_events(world, make_user):
    from tests.conftest import build_world

    other = build_world(make_user, slug="other-proj")
    services.note_write(actor=world.as_agent, kind="fact", content="In acme")
    services.note_write(actor=other.as_agent, kind="fact", content="In the other")
    services.note_write(actor=world.as_agent, kind="fact", content="In acme again")
    assert [e.number for e in _events(world.project)] == [1, 2]
    assert [e.number for e in _events(other.project)] == [1]


def test_a_run_revert_and_its_undo_are_events_with_their_counts(world):
    for text in ("Reverted one", "Reverted two"):
        services.note_write(actor=world.as_agent, kind="fact", content=text)
    _plan, revert = services.run_revert(actor=world.as_manager, run=world.run, dry_run=False)
    services.run_revert_undo(actor=world.as_manager, revert_id=revert.pk)
    events = _events(world.project)
    types = [e.type for e in events]
    # The revert forgets the run's shared notes (an event each), then says what it did; its
    # undo restores them (an event each), then says so.
    assert types == [
        "note.written", "note.written", "note.forgotten", "note.forgotten", "run.reverted",
        "note.restored", "note.restored", "run.revert_undone",
    ]  # fmt: skip
    reverted = events[4]
    assert reverted.data["runId"] == world.run.pk and reverted.data["counts"]["forgotten"] == 2
    assert reverted.data["link"] == f"/p/acme-web/runs/{world.run.pk}/"
    assert not Recovery.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_writers_at_once_on_one_project_number_their_events_without_a_gap(world):
    """Eight runs write at once through the one-round-trip write (PostgreSQL): each note has
    its one `note.written` event, numbered 1…N with no gap and no repeat."""
    import threading

    from django.db import connection

    from memory_portal.memory.actors import Actor

    runs = [services.run_create(actor=None, agent=world.agent) for _ in range(8)]
    errors: list[BaseException] = []

    def write(run):
        try:
            for i in range(6):
                services.note_write(
                    actor=Actor.agent_run(run), kind="fact", content=f"{run.pk} wrote {i}"
                )
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    events = _events(world.project)
    assert [e.number for e in events] == list(range(1, 49))
    assert {e.type for e in events} == {"note.written"}
    assert len({e.data["note"]["id"] for e in events}) == 48
    assert MemorySetting.objects.get(project=world.project).event_seq == 48
