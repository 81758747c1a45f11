"""The write protocol (SPEC §2.4): validation, idempotency, never-resurrect, caps, epoch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Scope, Status, Trust
from memory_portal.memory.services import notes as note_services

from .helpers import last_event, refused, snapshot

LESSON = "The legacy export has duplicate headings; compare column positions first."


def write(actor, content=LESSON, **kw):
    kw.setdefault("kind", "lesson")
    return services.note_write(actor=actor, content=content, **kw)


def test_agent_write_is_learned_with_provenance_and_audited(world):
    before = snapshot(world.project)
    result = write(world.as_agent, tags=["Exports", "data-quality"], summary="Export headings")
    note = result.note
    assert result.created and note.id.startswith("mem_") and len(note.id) == 30
    assert note.trust == Trust.LEARNED and note.status == Status.ACTIVE
    assert note.scope == Scope.PROJECT and note.application is None
    assert note.tags == ["exports", "data-quality"]
    assert note.created_by_agent_id == world.agent.id
    assert note.created_by_stage == "runtime"
    assert note.origin_run_id == world.run.id and note.origin_run_ref == world.run.id
    assert note.top_level_run_id == world.run.id and note.task_key == "PIN-42"
    assert note.producer_status == "running"
    assert snapshot(world.project)["revision"] == before["revision"] + 1
    event = last_event(world.project, "note.write")
    assert event.note_ref == note.id and event.actor_agent_id == world.agent.id
    assert event.actor_run_id == world.run.id
    assert LESSON not in str(event.details)


def test_identical_write_returns_same_id_and_changes_nothing(world):
    first = write(world.as_agent, tags=["a"]).note
    services.note_approve(actor=world.as_manager, note_id=first.id)
    before = snapshot(world.project)
    again = write(world.as_agent2, tags=["b"], summary="other")
    assert not again.created and again.note.id == first.id
    note = Note.objects.get(pk=first.id)
    assert note.tags == ["a"] and note.trust == Trust.REVIEWED and note.summary == ""
    assert snapshot(world.project) == before


def test_same_content_in_another_place_is_another_note(world):
    a = write(world.as_agent).note
    b = write(world.as_agent, scope="application").note
    c = write(world.as_agent, kind="fact").note
    d = write(world.as_agent, target="daily").note
    assert len({a.id, b.id, c.id, d.id}) == 4
    assert b.application_id == world.app.id
    assert d.day == timezone.now().date()


@pytest.mark.parametrize(
    ("how", "code"),
    [("forget", "memory_forgotten"), ("reject", "memory_rejected"), ("veto", "memory_vetoed")],
)
def test_a_write_never_resurrects(world, how, code):
    note = write(world.as_agent).note
    if how == "forget":
        services.note_forget(actor=world.as_agent, note_id=note.id)
    elif how == "reject":
        services.note_reject(actor=world.as_manager, note_id=note.id)
    else:
        services.note_veto(actor=world.as_member, note_id=note.id)
    with refused(code, world.project):
        write(world.as_agent2)


def test_rejected_then_forgotten_content_stays_refused(world):
    note = write(world.as_agent).note
    services.note_reject(actor=world.as_manager, note_id=note.id)
    services.note_forget(actor=world.as_manager, note_id=note.id)
    with refused("memory_forgotten", world.project):
        write(world.as_agent)


def test_archived_for_other_reasons_can_be_written_again(world):
    old = services.fact_save(actor=world.as_agent, text="Staging needs the VPN").note
    services.note_archive(actor=world.as_agent, note_id=old.id, reason="done with it")
    new = services.fact_save(actor=world.as_agent, text="Staging needs the VPN")
    assert new.created and new.note.id != old.id


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "day"}, "kind"),
        ({"kind": "opinion"}, "kind"),
        ({"target": "forever"}, "target"),
        ({"scope": "agent"}, "scope"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 2001}, "content"),
        ({"summary": "s" * 241}, "summary"),
        ({"summary": ""}, "summary"),
        ({"tags": [f"t{i}" for i in range(9)]}, "tags"),
        ({"tags": ["x" * 33]}, "tags"),
        ({"tags": ["has space"]}, "tags"),
        ({"tags": "notalist"}, "tags"),
        ({"day": timezone.now().date()}, "date"),
        ({"expires_at": timezone.now() - timedelta(days=1)}, "expiresAt"),
        ({"evidence": {"repositoryId": "x", "path": "a", "line": 3}}, "evidence.line"),
        ({"evidence": {"path": "a"}}, "evidence.repositoryId"),
    ],
)
def test_invalid_input_names_the_field(world, kwargs, field):
    with refused("memory_invalid", world.project, field=field):
        write(world.as_agent, **kwargs)


def test_content_at_the_limits_is_accepted(world):
    assert write(world.as_agent, content="x").created
    assert write(world.as_agent, content="y" * 2000, summary="s" * 240).created
    assert write(world.as_agent, content="z", tags=[f"t{i}" for i in range(8)]).created


def test_payload_over_8000_bytes_is_refused(world):
    # 2,000 four-byte characters: within the character limit, over the byte budget.
    with refused("memory_payload_too_large", world.project):
        write(world.as_agent, content="😀" * 2000, summary="ok")


def test_application_scope_needs_an_application(world):
    from memory_portal.memory.actors import Actor

    lone = services.agent_create(actor=None, project=world.project, name="Lone", stage="runtime")
    run = services.run_create(actor=None, agent=lone)
    with refused("memory_invalid", world.project, field="scope"):
        write(Actor.agent_run(run), scope="application")


def test_secret_is_refused_and_never_stored_or_echoed(world):
    secret = "api_key = 'Zx81kQ2mP0aa93LmQ'"
    with refused("secret_in_memory", world.project) as info:
        write(world.as_agent, content=f"Use {secret} for staging")
    assert "Zx81kQ2mP0aa93LmQ" not in info.value.message
    assert info.value.reason
    assert not Note.objects.filter(content__contains="Zx81kQ2mP0aa93LmQ").exists()
    assert not AuditEvent.objects.filter(details__icontains="Zx81").exists()


def test_secret_in_summary_or_tags_is_refused(world):
    with refused("secret_in_memory", world.project, field="summary"):
        write(world.as_agent, summary="password=hunter2hunter2")


@pytest.mark.parametrize(
    ("persona", "code"),
    [
        ("as_reviewer", "memory_tool_forbidden"),
        ("as_readonly", "memory_tool_forbidden"),
        ("as_implementer", "memory_not_eligible"),
        ("as_manager", "memory_tool_forbidden"),
    ],
)
def test_who_may_not_write(world, persona, code):
    with refused(code, world.project):
        write(getattr(world, persona))


def test_disabled_memory_refuses_agent_writes(world):
    services.memory_disable(actor=world.as_manager, project=world.project)
    with refused("memory_disabled", world.project):
        write(world.as_agent)
    with refused("memory_disabled", world.project):
        services.fact_save(actor=world.as_agent, text="A fact")


def test_project_cap_counts_every_status(world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "PROJECT_NOTE_CAP": 3}
    a = write(world.as_agent, content="one").note
    write(world.as_agent, content="two")
    services.note_forget(actor=world.as_agent, note_id=a.id)
    write(world.as_agent2, content="three")
    with refused("memory_project_full", world.project):
        write(world.as_agent2, content="four")
    # An identical repeat is not a new note, so it still answers at the cap.
    assert write(world.as_agent2, content="three").created is False


def test_run_quota_counts_new_notes_of_the_top_level_run(world, settings):
    from memory_portal.memory.actors import Actor

    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_NOTE_QUOTA": 2}
    child = services.run_create(actor=None, agent=world.agent, parent=world.run)
    write(world.as_agent, content="one")
    write(Actor.agent_run(child), content="two")
    assert write(world.as_agent, content="one").created is False
    with refused("memory_run_quota", world.project):
        write(Actor.agent_run(child), content="three")
    # Another top-level run has its own quota.
    assert write(world.as_agent2, content="three").created


def test_disable_between_validation_and_commit_revokes_the_write(world, monkeypatch):
    original = note_services.check_no_secret

    def disable_midway(**fields):
        original(**fields)
        services.memory_disable(actor=world.as_manager, project=world.project)

    monkeypatch.setattr(note_services, "check_no_secret", disable_midway)
    with pytest.raises(MemoryPortalError) as info:
        write(world.as_agent)
    assert info.value.code == "memory_write_revoked"
    assert not Note.objects.filter(project=world.project).exists()


def test_reset_between_validation_and_commit_revokes_the_write(world, monkeypatch):
    original = note_services.check_no_secret

    def reset_midway(**fields):
        original(**fields)
        services.memory_reset(actor=world.as_manager, project=world.project)

    monkeypatch.setattr(note_services, "check_no_secret", reset_midway)
    with pytest.raises(MemoryPortalError) as info:
        write(world.as_agent)
    assert info.value.code == "memory_write_revoked"
    monkeypatch.undo()
    # A write after the reset is a new write and is saved normally.
    assert write(world.as_agent).created


def test_rejected_active_twin_refuses_the_write(world):
    note = write(world.as_agent).note
    services.note_reject(actor=world.as_manager, note_id=note.id)
    with refused("memory_rejected", world.project):
        write(world.as_agent)


def test_revision_bumps_once_per_write(world):
    rev = MemorySetting.objects.get(project=world.project).revision
    write(world.as_agent, content="a")
    write(world.as_agent, content="b")
    assert MemorySetting.objects.get(project=world.project).revision == rev + 2


def test_daily_note_date_cannot_be_in_the_future(world):
    with refused("memory_invalid", world.project, field="date"):
        write(world.as_agent, target="daily", day=timezone.now().date() + timedelta(days=1))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"content": "nul \x00 inside"}, "content"), ({"tags": ["a\x00b"]}, "tags")],
)
def test_nul_characters_are_refused(world, kwargs, field):
    with refused("memory_invalid", world.project, field=field):
        write(world.as_agent, **{"content": "fine", **kwargs})


def test_search_query_with_nul_is_refused(world):
    from memory_portal.memory import selectors

    with refused("memory_invalid", world.project, field="query"):
        selectors.notes_search(actor=world.as_agent, query="dep\x00loy")
