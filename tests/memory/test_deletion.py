"""Deleting an application (managers) and a project (administrators): exactly what goes is
counted in the audit event, an application's agents, runs and private facts stay (detached),
and nothing of another project moves."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import (
    Agent,
    ApiToken,
    Application,
    AuditEvent,
    MemorySetting,
    Note,
    Project,
    Recovery,
    RepositoryLink,
    ReviewRoutine,
    Run,
)
from memory_portal.memory.services import project_change
from memory_portal.memory.tokens import token_authenticate
from tests.conftest import build_world

from .deletion_data import populate, removed, rows, table_counts
from .helpers import last_event, refused
from .test_evidence import make_repo

STATUSES = ("active", "archived", "forgotten")


@pytest.fixture
def repo_path(tmp_path):
    return make_repo(tmp_path, {"README.md": "# Service\n"})[0]


@pytest.fixture
def data(world, repo_path):
    return populate(world, repo_path)


@pytest.fixture
def other(make_user, repo_path):
    """A second project with the same shapes of data, the same application slugs included."""
    other = build_world(make_user, slug="other-web")
    other.data = populate(other, repo_path)
    return other


@pytest.fixture
def admin(make_user):
    return Actor.person(make_user("root", superuser=True))


def fresh_agent_actor(run_id: str) -> Actor:
    return Actor.agent_run(Run.objects.select_related("agent", "project").get(pk=run_id))


# --- application ---------------------------------------------------------------------------


def test_a_manager_deletes_an_application_and_the_audit_counts_what_went(world, data, other):
    before, other_before = table_counts(), rows(other.project)
    setting = MemorySetting.objects.get(project=world.project)
    detached_agents = {world.agent.pk, world.reviewer.pk, world.implementer.pk}
    detached_runs = {world.run.pk, world.reviewer_run.pk, world.implementer_run.pk}

    counts = services.application_delete(
        actor=world.as_manager, application=world.app, confirm="storefront"
    )

    assert counts == {
        "notes": 5,
        "recoveries": 1,
        "repository_links": 1,
        "notes_by_status": {"active": 2, "archived": 2, "forgotten": 1},
        "agents_detached": 3,
        "runs_detached": 3,
    }
    gone = removed(before, table_counts())
    assert gone == {
        **{key: 0 for key in gone},
        "applications": 1,
        "notes": counts["notes"],
        "recoveries": counts["recoveries"],
        "repository_links": counts["repository_links"],
    }
    assert sum(counts["notes_by_status"].values()) == counts["notes"]
    event = last_event(world.project, "application.delete")
    assert event.actor_user == world.manager and event.target_ref == "storefront"
    assert event.details == counts
    assert rows(other.project) == other_before
    assert Application.objects.filter(project=other.project, slug="storefront").exists()

    # The application's notes and their recovery records are gone; nothing else is.
    scoped_ids = [n.pk for n in data.storefront_notes] + [data.edited.pk]
    assert not Note.objects.filter(pk__in=scoped_ids).exists()
    assert not Recovery.objects.filter(note_id__in=scoped_ids).exists()
    assert Recovery.objects.filter(project=world.project).count() == 1  # the shared one
    for kept in (data.shared, data.billing, data.fact, data.day):
        assert Note.objects.filter(pk=kept.pk).exists(), kept.content
    assert RepositoryLink.objects.filter(application=world.other_app).exists()

    # Agents and runs are detached, not deleted; the daily review stays with its agent.
    assert (
        set(
            Agent.objects.filter(pk__in=detached_agents, application=None).values_list(
                "pk", flat=True
            )
        )
        == detached_agents
    )
    assert (
        set(Run.objects.filter(pk__in=detached_runs, application=None).values_list("pk", flat=True))
        == detached_runs
    )
    assert Agent.objects.get(pk=world.agent2.pk).application == world.other_app
    assert ReviewRoutine.objects.filter(agent=world.agent).exists()

    # Agents' views changed and writes checked against the application are revoked.
    after = MemorySetting.objects.get(project=world.project)
    assert after.revision > setting.revision
    assert after.revocation_epoch == setting.revocation_epoch + 1


def test_a_detached_agent_keeps_working_with_its_run_token(world, data):
    services.application_delete(actor=world.as_manager, application=world.app, confirm="storefront")
    token = token_authenticate(data.run_token)
    agent = fresh_agent_actor(token.run_id)
    assert agent.run.application_id is None
    saved = services.fact_save(actor=agent, text="Still remembering after the delete").note
    assert saved.owner_agent_id == world.agent.pk
    assert last_event(world.project, "note.save").note_ref == saved.pk
    shared = services.note_write(actor=agent, kind="fact", content="Still sharing").note
    assert shared.scope == "project"
    with refused("memory_invalid", world.project, field="scope"):
        services.note_write(actor=agent, kind="fact", content="Nowhere", scope="application")


def test_supersede_links_into_the_application_are_cleared_not_followed(world, data):
    # Test set-up: no service links a note that stays to an application's note today; the
    # delete must still clear such a link rather than fail or take the note with it.
    Note.objects.filter(pk=data.shared.pk).update(supersedes=data.storefront_notes[0].pk)
    Note.objects.filter(pk=data.billing.pk).update(superseded_by=data.storefront_notes[0].pk)
    services.application_delete(actor=world.as_manager, application=world.app, confirm="storefront")
    shared, billing = Note.objects.get(pk=data.shared.pk), Note.objects.get(pk=data.billing.pk)
    assert shared.supersedes_id is None and billing.superseded_by_id is None
    assert shared.status == "active" and billing.status == "active"


def test_administrators_and_the_system_delete_applications_too(world, admin):
    services.application_delete(actor=admin, application=world.app, confirm="storefront")
    assert last_event(world.project, "application.delete").actor_user == admin.user
    services.application_delete(actor=None, application=world.other_app, confirm="billing")
    assert last_event(world.project, "application.delete").actor_label == "system"
    assert not Application.objects.filter(project=world.project).exists()


@pytest.mark.parametrize(
    ("persona", "code"),
    [
        ("as_member", "memory_forbidden"),
        ("as_agent", "memory_forbidden"),
        ("as_outsider", "not_found"),
    ],
)
def test_only_managers_delete_applications(world, data, persona, code):
    with refused(code, world.project):
        services.application_delete(
            actor=getattr(world, persona), application=world.app, confirm="storefront"
        )
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert not AuditEvent.objects.filter(action="application.delete").exists()


def test_a_read_only_manager_token_deletes_nothing(world, data):
    readonly = Actor.person(world.manager, can_write=False)
    with refused("memory_tool_forbidden", world.project):
        services.application_delete(actor=readonly, application=world.app, confirm="storefront")


@pytest.mark.parametrize("confirm", ["", "Storefront", "storefront ", "billing", "acme-web"])
def test_a_wrong_confirmation_deletes_nothing(world, data, confirm):
    before = rows(world.project)
    with refused("memory_invalid", world.project, field="confirm") as info:
        services.application_delete(actor=world.as_manager, application=world.app, confirm=confirm)
    assert "storefront" in info.value.message and "Nothing was deleted" in info.value.hint
    assert rows(world.project) == before


def test_an_application_deleted_meanwhile_is_not_found(world):
    stale = Application.objects.get(pk=world.app.pk)
    services.application_delete(actor=world.as_manager, application=world.app, confirm="storefront")
    with refused("not_found", world.project):
        services.application_delete(actor=world.as_manager, application=stale, confirm="storefront")


# --- project -------------------------------------------------------------------------------


def test_an_administrator_deletes_a_project_and_the_audit_counts_what_went(
    world, data, other, admin
):
    manager_token = services.token_create(actor=None, user=world.manager)[0]
    before, other_before = table_counts(), rows(other.project)
    earlier_events = AuditEvent.objects.filter(project=world.project).count()

    counts = services.project_delete(actor=admin, project=world.project, confirm="acme-web")

    gone = removed(before, table_counts())
    assert {key: counts[key] for key in gone} == gone
    assert gone == {
        "notes": 10,
        "recoveries": 2,
        "scratchpad_items": 1,
        "applications": 2,
        "repository_links": 2,
        "agents": 4,
        "runs": 4,
        "tokens": 1,
        "memberships": 2,
        "review_routines": 1,
        "review_runs": 0,
        "tool_call_counts": 1,
        "start_recalls": 1,
        "events": 11,  # the outbox's: each write, review, veto, forget… of the project
    }
    assert counts["notes_by_status"] == {"active": 6, "archived": 2, "forgotten": 2}
    assert set(counts) == set(gone) | {"notes_by_status"}
    assert not Project.objects.filter(slug="acme-web").exists()
    assert not MemorySetting.objects.filter(project_id=world.project.pk).exists()
    assert rows(other.project) == other_before

    event = AuditEvent.objects.get(action="project.delete")
    assert event.project is None and event.project_ref == "acme-web"
    assert event.target_ref == "acme-web" and event.actor_user == admin.user
    assert event.details == counts
    # The project's history stays, filed under its id; people's own tokens stay.
    assert AuditEvent.objects.filter(project_ref="acme-web").count() == earlier_events + 1
    assert ApiToken.objects.filter(pk=manager_token.pk).exists()


@pytest.mark.parametrize(
    ("persona", "code"),
    [
        ("as_manager", "memory_forbidden"),
        ("as_member", "memory_forbidden"),
        ("as_agent", "memory_forbidden"),
        ("as_outsider", "not_found"),
    ],
)
def test_only_administrators_delete_projects(world, data, persona, code):
    with refused(code, world.project):
        services.project_delete(
            actor=getattr(world, persona), project=world.project, confirm="acme-web"
        )
    assert Project.objects.filter(pk=world.project.pk).exists()


def test_a_read_only_administrator_token_deletes_nothing(world, make_user):
    readonly = Actor.person(make_user("root", superuser=True), can_write=False)
    with refused("memory_tool_forbidden", world.project):
        services.project_delete(actor=readonly, project=world.project, confirm="acme-web")


@pytest.mark.parametrize("confirm", ["", "acme", "ACME-WEB", "storefront"])
def test_a_wrong_project_confirmation_deletes_nothing(world, data, admin, confirm):
    before = rows(world.project)
    with refused("memory_invalid", world.project, field="confirm"):
        services.project_delete(actor=admin, project=world.project, confirm=confirm)
    assert rows(world.project) == before


def test_the_system_deletes_projects(world, data):
    counts = services.project_delete(actor=None, project=world.project, confirm="acme-web")
    event = AuditEvent.objects.get(action="project.delete")
    assert event.actor_label == "system" and event.details == counts


def test_a_call_that_arrives_after_the_project_is_gone_is_not_found(world, admin):
    stale = Project.objects.get(pk=world.project.pk)
    services.project_delete(actor=admin, project=world.project, confirm="acme-web")
    with pytest.raises(MemoryPortalError) as info, project_change(stale, actor=None):
        pass
    assert info.value.code == "not_found"
    assert not Project.objects.filter(pk=stale.pk).exists()
    assert not MemorySetting.objects.filter(project_id=stale.pk).exists()
    with pytest.raises(MemoryPortalError) as info:
        services.project_delete(actor=admin, project=stale, confirm="acme-web")
    assert info.value.code == "not_found"


# --- writes on their way while a delete happens --------------------------------------------


def delete_between_check_and_insert(monkeypatch, delete) -> None:
    """Run `delete` after a write's checks (step 1 of the write protocol) and before its
    insert under the lock (step 2): the window a concurrent delete can fall into."""
    from memory_portal.memory.services import notes as note_services

    original = note_services.stamp_provenance

    def provenance_then_delete(actor, note):
        original(actor, note)
        delete()

    monkeypatch.setattr(note_services, "stamp_provenance", provenance_then_delete)


def test_a_write_checked_before_its_application_went_is_revoked(world, monkeypatch):
    delete_between_check_and_insert(
        monkeypatch,
        lambda: services.application_delete(
            actor=None, application=world.app, confirm="storefront"
        ),
    )
    with pytest.raises(MemoryPortalError) as info:
        services.note_write(
            actor=world.as_agent, kind="fact", content="Checked too early", scope="application"
        )
    assert info.value.code == "memory_write_revoked"
    assert not Note.objects.filter(content="Checked too early").exists()


def test_a_write_checked_before_its_project_went_is_not_found(world, monkeypatch):
    delete_between_check_and_insert(
        monkeypatch,
        lambda: services.project_delete(actor=None, project=world.project, confirm="acme-web"),
    )
    with pytest.raises(MemoryPortalError) as info:
        services.note_write(actor=world.as_agent, kind="fact", content="Checked too early")
    assert info.value.code == "not_found"
    assert not Note.objects.exists()
