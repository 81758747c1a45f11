"""`DELETE /api/admin/projects/{projectId}` (administrators) and `DELETE
/api/admin/projects/{projectId}/applications/{applicationId}` (managers): the typed id again
as `?confirm=`, the counts in the answer and the audit event, and the refusals."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import Agent, Application, AuditEvent, Note, Project
from tests.conftest import build_world
from tests.memory.deletion_data import populate, rows
from tests.memory.test_evidence import make_repo

from .conftest import error_code

PROJECT = "/api/admin/projects/acme-web"
APPLICATION = f"{PROJECT}/applications/storefront"


@pytest.fixture
def repo_path(tmp_path):
    return make_repo(tmp_path, {"README.md": "# Service\n"})[0]


@pytest.fixture
def data(world, repo_path):
    return populate(world, repo_path)


@pytest.fixture
def admin_token(make_user):
    return services.token_create(actor=None, user=make_user("root", superuser=True))[1]


def delete(api, path, token, confirm=None):
    query = "" if confirm is None else f"?confirm={confirm}"
    return api.call("DELETE", path + query, token)


# --- application ---------------------------------------------------------------------------


def test_a_manager_deletes_an_application_and_its_agents_keep_working(
    api, tokens, world, data, make_user, repo_path
):
    other = build_world(make_user, slug="other-web")
    populate(other, repo_path)
    other_before = rows(other.project)

    response = delete(api, APPLICATION, tokens.manager, confirm="storefront")

    assert response.status_code == 200
    body = response.json()
    assert body == {
        "projectId": "acme-web",
        "applicationId": "storefront",
        "notes": 5,
        "notesByStatus": {"active": 2, "archived": 2, "forgotten": 1},
        "recoveries": 1,
        "repositoryLinks": 1,
        "agentsDetached": 3,
        "runsDetached": 3,
    }
    event = AuditEvent.objects.get(action="application.delete")
    assert event.actor_user == world.manager and event.target_ref == "storefront"
    assert event.details["notes"] == 5 and event.details["agents_detached"] == 3
    assert rows(other.project) == other_before
    assert Agent.objects.get(pk=world.agent.pk).application is None

    # The detached agent's run token still works, and its private facts are still there.
    facts = api.get("/api/v1/memories?kind=fact", data.run_token).json()["data"]
    assert [f["id"] for f in facts] == [data.fact.pk]
    saved = api.post("/api/v1/memories", data.run_token, {"text": "Still here after the delete"})
    assert saved.status_code == 201, saved.json()
    written = api.tool("memory_write", data.run_token, {"kind": "fact", "content": "Shared"})
    assert written.status_code == 200 and written.json()["created"] is True

    again = delete(api, APPLICATION, tokens.manager, confirm="storefront")
    assert again.status_code == 404 and error_code(again) == "not_found"


@pytest.mark.parametrize("confirm", [None, "", "Storefront", "billing"])
def test_the_application_id_must_be_confirmed(api, tokens, world, data, confirm):
    before = rows(world.project)
    response = delete(api, APPLICATION, tokens.manager, confirm=confirm)
    assert response.status_code == 400 and error_code(response) == "memory_invalid"
    error = response.json()["error"]
    assert error["field"] == "confirm" and error["hint"]
    assert rows(world.project) == before


def test_who_may_delete_an_application(api, tokens, world, data, admin_token):
    member = delete(api, APPLICATION, tokens.member, confirm="storefront")
    assert member.status_code == 403 and error_code(member) == "memory_forbidden"
    outsider = delete(api, APPLICATION, tokens.outsider, confirm="storefront")
    assert outsider.status_code == 404 and error_code(outsider) == "not_found"
    agent = delete(api, APPLICATION, tokens.agent, confirm="storefront")
    assert agent.status_code == 403 and error_code(agent) == "memory_forbidden"
    readonly = delete(api, APPLICATION, tokens.manager_readonly, confirm="storefront")
    assert readonly.status_code == 403 and error_code(readonly) == "memory_tool_forbidden"
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert not AuditEvent.objects.filter(action="application.delete").exists()
    unknown = delete(api, f"{PROJECT}/applications/nope", tokens.manager, confirm="nope")
    assert unknown.status_code == 404 and error_code(unknown) == "not_found"
    by_admin = delete(
        api, f"{PROJECT}/applications/billing", admin_token, confirm="billing"
    )  # an administrator need not be a member
    assert by_admin.status_code == 200 and by_admin.json()["notes"] == 1


def test_an_outsider_learns_nothing_about_the_project(api, tokens, world):
    elsewhere = "/api/admin/projects/nope/applications/storefront"
    for confirm in ("storefront", None):  # without confirm: 400 for every project alike
        existing = delete(api, APPLICATION, tokens.outsider, confirm=confirm)
        missing = delete(api, elsewhere, tokens.outsider, confirm=confirm)
        assert existing.status_code == missing.status_code
        assert existing.json()["error"]["code"] == missing.json()["error"]["code"]
        assert existing.json()["error"]["hint"] == missing.json()["error"]["hint"]


# --- project -------------------------------------------------------------------------------


def test_an_administrator_deletes_a_project(api, tokens, world, data, admin_token):
    response = delete(api, PROJECT, admin_token, confirm="acme-web")
    assert response.status_code == 200
    body = response.json()
    assert body["projectId"] == "acme-web"
    assert body["notes"] == 10 and body["notesByStatus"]["forgotten"] == 2
    assert body["agents"] == 4 and body["runs"] == 4 and body["applications"] == 2
    assert body["tokens"] == 6  # the fixtures' five run tokens and the populated run's
    event = AuditEvent.objects.get(action="project.delete")
    assert event.project_ref == "acme-web" and event.details["notes"] == 10
    assert not Project.objects.filter(slug="acme-web").exists()
    assert not Note.objects.exists()
    # Its run tokens died with it; people's tokens did not.
    gone = api.get("/api/v1/memories", data.run_token)
    assert gone.status_code == 401 and error_code(gone) == "auth_invalid"
    after = api.get(f"{PROJECT}/memory", tokens.manager)
    assert after.status_code == 404 and error_code(after) == "not_found"


@pytest.mark.parametrize("confirm", [None, "", "acme", "storefront"])
def test_the_project_id_must_be_confirmed(api, world, data, admin_token, confirm):
    before = rows(world.project)
    response = delete(api, PROJECT, admin_token, confirm=confirm)
    assert response.status_code == 400 and response.json()["error"]["field"] == "confirm"
    assert rows(world.project) == before


def test_only_administrators_delete_projects(api, tokens, world):
    for token in (tokens.manager, tokens.member, tokens.agent):
        response = delete(api, PROJECT, token, confirm="acme-web")
        assert response.status_code == 403 and error_code(response) == "memory_forbidden"
    outsider = delete(api, PROJECT, tokens.outsider, confirm="acme-web")
    assert outsider.status_code == 404 and error_code(outsider) == "not_found"
    assert Project.objects.filter(slug="acme-web").exists()
    assert not AuditEvent.objects.filter(action="project.delete").exists()


def test_the_routes_are_documented_with_a_required_confirm(api):
    spec = api.client.get("/api/openapi.json").json()
    for path, schema in [
        ("/api/admin/projects/{project_id}", "ProjectDeleteOut"),
        ("/api/admin/projects/{project_id}/applications/{application_id}", "ApplicationDeleteOut"),
    ]:
        operation = spec["paths"][path]["delete"]
        confirm = [p for p in operation["parameters"] if p["name"] == "confirm"]
        assert confirm and confirm[0]["in"] == "query" and confirm[0]["required"] is True
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["$ref"].endswith(schema)
