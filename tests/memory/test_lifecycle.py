"""A note's life after the write: review, archive, veto / undo, forget / restore, supersede,
edit, and the v1 fact and day-log rules (SPEC §2.3)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Kind, Note, Recovery, Scope, Status, Trust

from .helpers import last_event, refused


def note_by(actor, content="Deploys need the VPN on.", **kw):
    kw.setdefault("kind", "fact")
    return services.note_write(actor=actor, content=content, **kw).note


# --- approve / reject --------------------------------------------------------------------


def test_manager_approves_and_rejects_with_audit(world):
    note = note_by(world.as_agent)
    services.note_approve(actor=world.as_manager, note_id=note.id)
    assert Note.objects.get(pk=note.id).trust == Trust.REVIEWED
    event = last_event(world.project, "note.approve")
    assert event.actor_user == world.manager and event.details == {
        "from": "learned",
        "to": "reviewed",
    }
    services.note_reject(actor=world.as_manager, note_id=note.id)
    assert Note.objects.get(pk=note.id).trust == Trust.REJECTED
    assert last_event(world.project, "note.reject").note_ref == note.id


@pytest.mark.parametrize("persona", ["as_member", "as_agent"])
def test_only_managers_change_trust(world, persona):
    note = note_by(world.as_agent)
    with refused("memory_forbidden", world.project):
        services.note_approve(actor=getattr(world, persona), note_id=note.id)


def test_outsider_cannot_see_the_note(world):
    note = note_by(world.as_agent)
    with refused("memory_not_found", world.project):
        services.note_approve(actor=world.as_outsider, note_id=note.id)


def test_rejected_notes_are_never_served_but_read_by_id_shows_them(world):
    note = note_by(world.as_agent)
    services.note_reject(actor=world.as_manager, note_id=note.id)
    listed = selectors.notes_for_actor(actor=world.as_agent2)
    assert note.id not in {n.id for n in listed}
    assert not selectors.notes_search(actor=world.as_agent2, query="VPN").exists()
    assert selectors.note_get(actor=world.as_agent2, note_id=note.id).trust == Trust.REJECTED


# --- archive / unarchive / veto / undo --------------------------------------------------------


def test_agent_archives_and_unarchives_its_own_fact(world):
    fact = services.fact_save(actor=world.as_agent, text="Use port 8443 for staging").note
    services.note_archive(actor=world.as_agent, note_id=fact.id, reason="moved to 9443")
    fact.refresh_from_db()
    assert fact.status == Status.ARCHIVED and fact.archive_reason == "moved to 9443"
    assert fact.archived_at is not None
    assert last_event(world.project, "note.archive").note_ref == fact.id
    services.note_unarchive(actor=world.as_agent, note_id=fact.id)
    fact.refresh_from_db()
    assert fact.status == Status.ACTIVE and fact.archive_reason == "" and fact.archived_at is None
    assert last_event(world.project, "note.unarchive").note_ref == fact.id


def test_agent_cannot_archive_another_agents_note(world):
    note = note_by(world.as_agent2)
    with refused("memory_not_own", world.project):
        services.note_archive(actor=world.as_agent, note_id=note.id, reason="not mine")


def test_agent_cannot_reach_another_agents_private_fact(world):
    fact = services.fact_save(actor=world.as_agent2, text="Private to agent two").note
    with refused("memory_not_found", world.project):
        services.note_archive(actor=world.as_agent, note_id=fact.id, reason="x")


@pytest.mark.parametrize(
    ("reason", "field"), [("", "reason"), ("r" * 501, "reason"), ("vetoed", "reason")]
)
def test_archive_reason_rules(world, reason, field):
    fact = services.fact_save(actor=world.as_agent, text="A fact").note
    with refused("memory_invalid", world.project, field=field):
        services.note_archive(actor=world.as_agent, note_id=fact.id, reason=reason)


def test_archive_reason_of_500_chars_is_accepted(world):
    fact = services.fact_save(actor=world.as_agent, text="A fact").note
    services.note_archive(actor=world.as_agent, note_id=fact.id, reason="r" * 500)


def test_veto_and_undo_by_a_person(world):
    fact = services.fact_save(actor=world.as_agent, text="The build uses Node 18").note
    services.note_veto(actor=world.as_member, note_id=fact.id)
    fact.refresh_from_db()
    assert fact.is_vetoed and fact.vetoed_by == world.member
    event = last_event(world.project, "note.veto")
    assert event.actor_user == world.member and event.note_ref == fact.id
    # Vetoed notes are not served to agents.
    assert fact.id not in {n.id for n in selectors.notes_for_actor(actor=world.as_agent)}
    with refused("memory_veto_human_only", world.project):
        services.note_unarchive(actor=world.as_agent, note_id=fact.id)
    services.note_undo(actor=world.as_member, note_id=fact.id)
    fact.refresh_from_db()
    assert fact.status == Status.ACTIVE and fact.vetoed_by is None
    assert last_event(world.project, "note.undo").details == {"was_vetoed": True}


def test_agents_cannot_veto_or_undo(world):
    fact = services.fact_save(actor=world.as_agent, text="A fact").note
    with refused("memory_veto_human_only", world.project):
        services.note_veto(actor=world.as_agent, note_id=fact.id)
    services.note_archive(actor=world.as_agent, note_id=fact.id, reason="old")
    with refused("memory_veto_human_only", world.project):
        services.note_undo(actor=world.as_agent, note_id=fact.id)


def test_outsider_cannot_veto(world):
    fact = services.fact_save(actor=world.as_agent, text="A fact").note
    with refused("memory_not_found", world.project):
        services.note_veto(actor=world.as_outsider, note_id=fact.id)


# --- supersede and edit ----------------------------------------------------------------------


def test_supersede_archives_the_old_fact(world):
    old = services.fact_save(actor=world.as_agent, text="Staging is on port 8443").note
    new = services.fact_save(
        actor=world.as_agent, text="Staging is on port 9443", supersedes=old.id
    ).note
    old.refresh_from_db()
    assert old.status == Status.ARCHIVED and old.archive_reason == "superseded"
    assert old.superseded_by_id == new.id and new.supersedes_id == old.id
    assert last_event(world.project, "note.supersede").details["supersedes"] == old.id
    with refused("memory_superseded", world.project):
        services.note_unarchive(actor=world.as_agent, note_id=old.id)
    with refused("memory_superseded", world.project):
        services.note_undo(actor=world.as_member, note_id=old.id)


def test_supersede_refusals(world):
    mine = services.fact_save(actor=world.as_agent, text="Mine").note
    theirs = services.fact_save(actor=world.as_agent2, text="Theirs").note
    project_note = note_by(world.as_agent2, content="Shared note by agent two")
    with refused("memory_agent_mismatch", world.project):
        services.fact_save(actor=world.as_agent, text="New", supersedes=theirs.id)
    with refused("memory_agent_mismatch", world.project):
        services.fact_save(actor=world.as_agent, text="New", supersedes=project_note.id)
    services.note_archive(actor=world.as_agent, note_id=mine.id, reason="old")
    with refused("memory_supersede_archived", world.project):
        services.fact_save(actor=world.as_agent, text="New", supersedes=mine.id)
    day = services.day_append(actor=world.as_agent, line="worked on PIN-42")
    with refused("memory_day_append_only", world.project):
        services.fact_save(actor=world.as_agent, text="New", supersedes=day.id)


def test_person_supersedes_for_an_agent(world):
    old = services.fact_save(actor=world.as_agent, text="Old fact").note
    new = services.fact_save(
        actor=world.as_member, agent_id=world.agent.id, text="New fact", supersedes=old.id
    ).note
    assert new.owner_agent_id == world.agent.id and new.created_by_user == world.member


def test_person_edit_is_a_supersede(world):
    old = note_by(world.as_agent, content="Exports are UTF-16", tags=["exports"])
    new = services.note_edit(
        actor=world.as_member, note_id=old.id, content="Exports are UTF-8"
    ).note
    old.refresh_from_db()
    assert old.status == Status.ARCHIVED and old.superseded_by_id == new.id
    assert new.kind == old.kind and new.scope == old.scope and new.tags == ["exports"]
    assert new.created_by_user == world.member and new.created_by_agent_id == ""
    assert new.trust == Trust.LEARNED
    assert last_event(world.project, "note.edit").note_ref == new.id
    with refused("memory_supersede_archived", world.project):
        services.note_edit(actor=world.as_member, note_id=old.id, content="Again")


def test_edit_refusals(world):
    day = services.day_append(actor=world.as_agent, line="a line")
    with refused("memory_day_append_only", world.project):
        services.note_edit(actor=world.as_member, note_id=day.id, content="x")
    fact = services.fact_save(actor=world.as_agent, text="A fact").note
    with refused("memory_text_too_long", world.project):
        services.note_edit(actor=world.as_member, note_id=fact.id, content="x" * 501)
    with refused("memory_forbidden", world.project):
        services.note_edit(actor=world.as_agent, note_id=fact.id, content="x")


# --- v1 facts ---------------------------------------------------------------------------------


def test_v1_fact_defaults(world):
    before = timezone.now()
    fact = services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN").note
    assert fact.kind == Kind.FACT and fact.scope == Scope.AGENT
    assert fact.owner_agent_id == world.agent.id and fact.created_by_agent_id == world.agent.id
    assert timedelta(days=89, hours=23) < fact.expires_at - before < timedelta(days=90, minutes=1)
    assert last_event(world.project, "note.save").note_ref == fact.id


def test_v1_fact_refusals(world):
    with refused("memory_text_too_long", world.project):
        services.fact_save(actor=world.as_agent, text="x" * 501)
    with refused("secret_in_memory", world.project):
        services.fact_save(actor=world.as_agent, text="password=Sup3rS3cretValue")
    with refused("memory_agent_required", world.project):
        services.fact_save(actor=world.as_member, text="A fact")
    with refused("memory_not_own", world.project):
        services.fact_save(actor=world.as_agent, agent_id=world.agent2.id, text="A fact")
    with refused("not_found", world.project):
        services.fact_save(actor=world.as_outsider, agent_id=world.agent.id, text="A fact")
    with refused("memory_invalid", world.project, field="expiresAt"):
        services.fact_save(
            actor=world.as_agent, text="A fact", expires_at=timezone.now() - timedelta(1)
        )
    assert services.fact_save(actor=world.as_agent, text="x" * 500).created


def test_person_saves_a_fact_for_an_agent(world):
    fact = services.fact_save(actor=world.as_member, agent_id=world.agent.id, text="A fact").note
    assert fact.owner_agent_id == world.agent.id
    assert fact.created_by_user == world.member and fact.created_by_agent_id == ""


# --- day log ---------------------------------------------------------------------------------


def test_day_log_appends_stamped_lines_to_one_row(world):
    row = services.day_append(actor=world.as_agent, line="fixed the staging deploy")
    row2 = services.day_append(actor=world.as_agent, line="PR open, CI green")
    assert row.id == row2.id
    row.refresh_from_db()
    assert row.kind == Kind.DAY and row.day == timezone.now().date() and row.target == "daily"
    first, second = row.lines
    assert first.endswith(" PIN-42 fixed the staging deploy") and first[2] == ":"
    assert second.endswith(" PIN-42 PR open, CI green")
    assert last_event(world.project, "day.create").note_ref == row.id
    assert last_event(world.project, "day.append").note_ref == row.id


def test_day_log_refusals(world):
    with refused("memory_day_agent_only", world.project):
        services.day_append(actor=world.as_member, line="a line")
    with refused("memory_text_too_long", world.project):
        services.day_append(actor=world.as_agent, line="x" * 301)
    with refused("memory_invalid", world.project, field="line"):
        services.day_append(actor=world.as_agent, line="two\nlines")


def test_day_log_is_full_at_8000_characters(world):
    for _ in range(26):
        services.day_append(actor=world.as_agent, line="x" * 290)
    with refused("memory_day_full", world.project):
        services.day_append(actor=world.as_agent, line="y" * 290)


def test_one_live_day_row_per_agent_and_date(world):
    row = services.day_append(actor=world.as_agent, line="first")
    services.note_archive(actor=world.as_agent, note_id=row.id, reason="wrong run")
    second = services.day_append(actor=world.as_agent, line="again")
    assert second.id != row.id
    with refused("memory_day_exists", world.project):
        services.note_unarchive(actor=world.as_agent, note_id=row.id)


# --- forget / restore ------------------------------------------------------------------------


def test_agent_forgets_and_restores_a_learned_note(world):
    note = note_by(world.as_agent)
    recovery = services.note_forget(actor=world.as_agent, note_id=note.id)
    assert recovery.id.startswith("rec_") and recovery.previous_status == Status.ACTIVE
    note.refresh_from_db()
    assert note.status == Status.FORGOTTEN and note.content  # content stays in the row
    assert last_event(world.project, "note.forget").recovery_ref == recovery.id
    with refused("memory_not_found", world.project):
        selectors.note_get(actor=world.as_agent, note_id=note.id)
    # Later runs in the same scope see the recovery and may restore it.
    later = Actor.agent_run(services.run_create(actor=None, agent=world.agent))
    assert [r.id for r in selectors.recoveries_for_actor(actor=later)] == [recovery.id]
    restored = services.note_restore(actor=later, recovery_id=recovery.id)
    assert restored.status == Status.ACTIVE and restored.trust == Trust.LEARNED
    assert not Recovery.objects.filter(pk=recovery.id).exists()
    assert last_event(world.project, "note.restore").recovery_ref == recovery.id
    with refused("memory_recovery_not_found", world.project):
        services.note_restore(actor=later, recovery_id=recovery.id)


def test_agents_cannot_forget_reviewed_or_rejected_notes(world):
    note = note_by(world.as_agent)
    services.note_approve(actor=world.as_manager, note_id=note.id)
    with refused("memory_trust_locked", world.project):
        services.note_forget(actor=world.as_agent, note_id=note.id)


def test_agents_forget_only_in_their_reach(world):
    note = note_by(world.as_agent2, scope="application")  # billing application
    with refused("memory_not_found", world.project):
        services.note_forget(actor=world.as_agent, note_id=note.id)
    recovery = services.note_forget(actor=world.as_agent2, note_id=note.id)
    with refused("memory_recovery_not_found", world.project):
        services.note_restore(actor=world.as_agent, recovery_id=recovery.id)
    assert not selectors.recoveries_for_actor(actor=world.as_agent).exists()


def test_manager_forgets_and_restores_any_note_keeping_trust(world):
    note = note_by(world.as_agent)
    services.note_approve(actor=world.as_manager, note_id=note.id)
    services.note_archive(actor=world.as_agent, note_id=note.id, reason="old")
    recovery = services.note_forget(actor=world.as_manager, note_id=note.id)
    assert recovery.previous_status == Status.ARCHIVED
    assert recovery.forgotten_by_user == world.manager
    restored = services.note_restore(actor=world.as_manager, recovery_id=recovery.id)
    assert restored.status == Status.ARCHIVED and restored.trust == Trust.REVIEWED


def test_members_cannot_forget_or_restore(world):
    note = note_by(world.as_agent)
    with refused("memory_forbidden", world.project):
        services.note_forget(actor=world.as_member, note_id=note.id)
    recovery = services.note_forget(actor=world.as_manager, note_id=note.id)
    with refused("memory_forbidden", world.project):
        services.note_restore(actor=world.as_member, recovery_id=recovery.id)
    with refused("memory_recovery_not_found", world.project):
        services.note_restore(actor=world.as_outsider, recovery_id=recovery.id)


def test_reviewer_cannot_forget(world):
    note = note_by(world.as_agent)
    services.note_approve(actor=world.as_manager, note_id=note.id)
    with refused("memory_tool_forbidden", world.project):
        services.note_forget(actor=world.as_reviewer, note_id=note.id)
