"""Enable / disable / reset, the scratchpad, runs, tokens and the call trace."""

from __future__ import annotations

import pytest

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import (
    ApiToken,
    MemorySetting,
    Note,
    Recovery,
    Run,
    ScratchpadItem,
    ToolCallCount,
)
from memory_portal.memory.tokens import token_authenticate

from .helpers import last_event, refused


def test_enable_disable_keep_notes_and_are_audited(world):
    note = services.note_write(actor=world.as_agent, kind="fact", content="A fact").note
    setting = services.memory_disable(actor=world.as_manager, project=world.project)
    assert not setting.enabled and setting.revocation_epoch == 1
    assert last_event(world.project, "memory.disable").actor_user == world.manager
    with refused("memory_disabled", world.project):
        selectors.notes_for_actor(actor=world.as_agent).count()
        services.note_forget(actor=world.as_agent, note_id=note.id)
    assert Note.objects.filter(pk=note.id, status="active").exists()
    setting = services.memory_enable(actor=world.as_manager, project=world.project)
    assert setting.enabled and setting.revocation_epoch == 1
    assert last_event(world.project, "memory.enable").actor_user == world.manager
    services.note_forget(actor=world.as_agent, note_id=note.id)


@pytest.mark.parametrize("persona", ["as_member", "as_agent"])
def test_only_managers_switch_memory(world, persona):
    actor = getattr(world, persona)
    with refused("memory_forbidden", world.project):
        services.memory_disable(actor=actor, project=world.project)
    with refused("memory_forbidden", world.project):
        services.memory_reset(actor=actor, project=world.project)


def test_outsider_learns_nothing(world):
    with refused("not_found", world.project):
        services.memory_enable(actor=world.as_outsider, project=world.project)


def test_reset_deletes_notes_recoveries_and_scratchpads(world):
    a = services.note_write(actor=world.as_agent, kind="fact", content="one").note
    b = services.fact_save(actor=world.as_agent, text="two").note
    services.fact_save(actor=world.as_agent, text="three", supersedes=b.id)
    services.note_forget(actor=world.as_agent, note_id=a.id)
    services.scratchpad_add(actor=world.as_agent, text="check the export")
    before = MemorySetting.objects.get(project=world.project)
    counts = services.memory_reset(actor=world.as_manager, project=world.project)
    assert counts == {"notes": 3, "recoveries": 1, "scratchpad_items": 1}
    after = MemorySetting.objects.get(project=world.project)
    assert after.enabled and after.revocation_epoch == before.revocation_epoch + 1
    assert not Note.objects.filter(project=world.project).exists()
    assert not Recovery.objects.exists() and not ScratchpadItem.objects.exists()
    assert last_event(world.project, "memory.reset").details == counts


# --- scratchpad ---------------------------------------------------------------------------


def test_scratchpad_actions(world):
    one = services.scratchpad_add(actor=world.as_agent, text="compare headings")
    two = services.scratchpad_add(actor=world.as_agent, text="check totals")
    assert one.id.startswith("itm_")
    services.scratchpad_done(actor=world.as_agent, item_id=one.id)
    services.scratchpad_done(actor=world.as_agent, item_id=two.id)
    services.scratchpad_undo(actor=world.as_agent, item_id=two.id)
    assert [(i.id, i.done) for i in selectors.scratchpad_items(actor=world.as_agent)] == [
        (one.id, True),
        (two.id, False),
    ]
    assert services.scratchpad_clear(actor=world.as_agent) == 1
    assert [i.id for i in selectors.scratchpad_items(actor=world.as_agent)] == [two.id]
    actions = ["scratchpad.add", "scratchpad.done", "scratchpad.undo", "scratchpad.clear"]
    for action in actions:
        last_event(world.project, action)


def test_scratchpad_is_shared_by_steps_of_one_top_level_run_only(world):
    child = Actor.agent_run(services.run_create(actor=None, agent=world.agent, parent=world.run))
    item = services.scratchpad_add(actor=world.as_agent, text="shared")
    assert [i.id for i in selectors.scratchpad_items(actor=child)] == [item.id]
    services.scratchpad_done(actor=child, item_id=item.id)
    assert not selectors.scratchpad_items(actor=world.as_agent2).exists()
    with refused("scratchpad_item_not_found", world.project):
        services.scratchpad_done(actor=world.as_agent2, item_id=item.id)


def test_scratchpad_limits(world):
    with refused("memory_invalid", world.project, field="text"):
        services.scratchpad_add(actor=world.as_agent, text="x" * 1001)
    with refused("secret_in_memory", world.project):
        services.scratchpad_add(
            actor=world.as_agent, text="token: ghp_abcdefghijklmnopqrstuvwxyz0123456789"
        )
    for i in range(100):
        services.scratchpad_add(actor=world.as_agent, text=f"item {i}")
    with refused("scratchpad_full", world.project):
        services.scratchpad_add(actor=world.as_agent, text="one too many")
    with refused("memory_tool_forbidden", world.project):
        services.scratchpad_add(actor=world.as_member, text="people have none")


# --- runs -------------------------------------------------------------------------------


def test_delete_run_keeps_provenance_and_drops_its_scratchpad(world):
    note = services.note_write(actor=world.as_agent, kind="fact", content="A fact").note
    services.scratchpad_add(actor=world.as_agent, text="todo")
    _, plaintext = services.token_create(actor=None, run=world.run)
    run_id = world.run.id
    result = services.run_delete(actor=world.as_manager, run=world.run)
    assert result == {"scratchpad_items": 1}
    note.refresh_from_db()
    assert note.origin_run_id is None and note.origin_run_ref == run_id
    assert note.producer_status == "unknown"
    assert note.created_by_agent_id == world.agent.id and note.created_by_stage == "runtime"
    assert not Run.objects.filter(pk=run_id).exists()
    assert last_event(world.project, "run.delete").target_ref == run_id
    with pytest.raises(MemoryPortalError) as info:
        token_authenticate(plaintext)
    assert info.value.code == "auth_invalid"


def test_members_cannot_delete_runs(world):
    with refused("memory_forbidden", world.project):
        services.run_delete(actor=world.as_member, run=world.run)


def test_run_status_changes_producer_status(world):
    note = services.note_write(actor=world.as_agent, kind="fact", content="A fact").note
    services.run_update(actor=world.as_manager, run=world.run, status="failed")
    assert Note.objects.get(pk=note.id).producer_status == "failed"
    assert last_event(world.project, "run.status").details == {
        "status": "failed",
        "tokens_revoked": 0,
    }


def test_nested_runs_share_the_top_level_run(world):
    child = services.run_create(actor=None, agent=world.agent, parent=world.run)
    grandchild = services.run_create(actor=None, agent=world.agent2, parent=child)
    assert child.top_level_run_id == grandchild.top_level_run_id == world.run.id


# --- tokens -------------------------------------------------------------------------------


def test_tokens_are_hashed_and_authenticate(world):
    token, plaintext = services.token_create(actor=world.as_manager, run=world.run, can_write=False)
    assert plaintext.startswith("mp_") and len(plaintext) > 40
    stored = ApiToken.objects.get(pk=token.pk)
    assert plaintext not in stored.secret_hash and stored.secret_hash != plaintext
    assert token_authenticate(plaintext).run_id == world.run.id
    assert token_authenticate(plaintext).scopes == ["read"]
    event = last_event(world.project, "token.create")
    secret = plaintext.split("_", 2)[2]  # the secret itself may hold "_"
    assert len(secret) >= 40 and secret not in str(event.details)


@pytest.mark.parametrize("raw", ["mp_nothex_x", "garbage", "mp_0123456789ab_wrong"])
def test_bad_tokens_are_invalid(world, raw):
    with pytest.raises(MemoryPortalError) as info:
        token_authenticate(raw)
    assert info.value.code == "auth_invalid"


def test_missing_and_revoked_tokens(world):
    with pytest.raises(MemoryPortalError) as info:
        token_authenticate(None)
    assert info.value.code == "auth_required"
    token, plaintext = services.token_create(actor=None, user=world.member)
    services.token_revoke(actor=None, token=token)
    with pytest.raises(MemoryPortalError) as info:
        token_authenticate(plaintext)
    assert info.value.code == "auth_invalid"


def test_wrong_secret_with_a_real_prefix_is_invalid(world):
    token, plaintext = services.token_create(actor=None, user=world.member)
    with pytest.raises(MemoryPortalError) as info:
        token_authenticate(plaintext[:-2] + "xx")
    assert info.value.code == "auth_invalid"


# --- trace ---------------------------------------------------------------------------------


def test_call_budget_and_trace(world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_CALL_BUDGET": 3}
    for _ in range(3):
        services.run_call_consume(run=world.run)
    with pytest.raises(MemoryPortalError) as info:
        services.run_call_consume(run=world.run)
    assert info.value.code == "memory_call_budget" and info.value.status == 429
    services.tool_call_record(run=world.run, tool="write", outcome="ok")
    services.tool_call_record(run=world.run, tool="write", outcome="ok")
    services.tool_call_record(run=world.run, tool="write", outcome="secret_in_memory")
    counts = {(c.tool, c.outcome): c.count for c in ToolCallCount.objects.filter(run=world.run)}
    assert counts == {("write", "ok"): 2, ("write", "secret_in_memory"): 1}


def test_read_only_person_tokens_change_nothing(world):
    readonly = Actor.person(world.manager, can_write=False)
    note = services.note_write(actor=world.as_agent, kind="fact", content="A fact").note
    for call in (
        lambda: services.note_approve(actor=readonly, note_id=note.id),
        lambda: services.note_veto(actor=readonly, note_id=note.id),
        lambda: services.note_forget(actor=readonly, note_id=note.id),
        lambda: services.memory_disable(actor=readonly, project=world.project),
        lambda: services.memory_reset(actor=readonly, project=world.project),
    ):
        with refused("memory_tool_forbidden", world.project):
            call()


def test_system_can_switch_memory(world):
    services.memory_disable(actor=None, project=world.project)
    assert last_event(world.project, "memory.disable").actor_label == "system"
    services.memory_enable(actor=None, project=world.project)


def test_read_only_administrator_tokens_create_nothing(make_user, db):
    from memory_portal.memory.errors import MemoryPortalError
    from memory_portal.memory.models import Project

    admin = Actor.person(make_user("root", superuser=True), can_write=False)
    with pytest.raises(MemoryPortalError) as info:
        services.project_create(actor=admin, slug="new-project", name="New")
    assert info.value.code == "memory_tool_forbidden"
    assert not Project.objects.filter(slug="new-project").exists()
