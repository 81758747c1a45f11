"""`/api/admin`: project memory management and orchestration, with its authorization matrix."""

from __future__ import annotations

import json
import re

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Run
from memory_portal.memory.validation import SLUG_MAX, SLUG_PATTERN

from .conftest import error_code

BASE = "/api/admin/projects/acme-web"


def note(world, content="Deploys need the VPN on."):
    return services.note_write(actor=world.as_agent, kind="fact", content=content).note


def test_memory_page_lists_settings_and_notes(api, tokens, world):
    for i in range(3):
        note(world, f"Note {i}")
    body = api.get(f"{BASE}/memory?limit=2&offset=0", tokens.manager).json()
    assert body["projectId"] == "acme-web" and body["setting"]["enabled"] is True
    assert body["counts"]["total"] == 3 and len(body["notes"]) == 2 and body["nextOffset"] == 2
    row = body["notes"][0]
    assert row["trust"] == "learned" and row["state"] == "learned"
    assert row["createdByAgentId"] == world.agent.id and row["producerStatus"] == "running"
    rest = api.get(f"{BASE}/memory?limit=2&offset=2", tokens.manager).json()
    assert len(rest["notes"]) == 1 and rest["nextOffset"] is None


def test_memory_page_takes_the_notes_tables_filters(api, tokens, world):
    """The admin list filters through the dashboard's NoteFilter, under the same names: each
    review section's own filters list exactly the notes the section counts."""
    from urllib.parse import urlencode

    from memory_portal.memory import selectors

    kept, approved, vetoed = (note(world, f"Filtered note {i}") for i in range(3))
    services.note_approve(actor=world.as_manager, note_id=approved.pk)
    services.note_veto(actor=world.as_member, note_id=vetoed.pk)
    services.note_write(actor=world.as_agent, kind="lesson", content="Tagged", tags=["deploy"])
    queue = selectors.review_queue(actor=world.as_manager, project=world.project)
    assert queue.totals["learned"] == 2  # kept and the lesson; a vetoed note awaits no review
    for section in selectors.REVIEW_SECTIONS:
        url = f"{BASE}/memory?limit=100&{urlencode(section.filters)}"
        body = api.get(url, tokens.manager).json()
        assert len(body["notes"]) == queue.totals[section.key], section.key
    learned = api.get(f"{BASE}/memory?trust=learned&status=active", tokens.manager).json()
    assert kept.pk in {n["id"] for n in learned["notes"]}
    assert approved.pk not in {n["id"] for n in learned["notes"]}
    tagged = api.get(f"{BASE}/memory?tag=deploy&kind=lesson", tokens.manager).json()
    assert [n["content"] for n in tagged["notes"]] == ["Tagged"]
    stale = api.get(f"{BASE}/memory?evidence_stale=true", tokens.manager).json()
    assert stale["notes"] == []
    by_agent = api.get(f"{BASE}/memory?agent={world.agent.pk}&limit=100", tokens.manager).json()
    assert len(by_agent["notes"]) == 4

    # A value outside a filter's choices is a 400 naming the filter, for fixed and
    # project-bound choices alike; nothing else is read.
    # A date is written YYYY-MM-DD: a number is no date (lax parsing read `0` as 1970-01-01).
    for query, field in (("trust=trusted", "trust"), ("agent=agt_nobody", "agent"),
                         ("created_from=yesterday", "created_from"), ("day=0", "day"),
                         ("created_to=1700000000", "created_to")):  # fmt: skip
        response = api.get(f"{BASE}/memory?{query}", tokens.manager)
        assert response.status_code == 400, query
        error = response.json()["error"]
        assert error["code"] == "memory_invalid" and field in error["message"], query


def test_enable_disable_reset(api, tokens, world):
    response = api.call("PUT", f"{BASE}/memory", tokens.manager, {"enabled": False})
    assert response.status_code == 204 and response.content == b""
    assert not MemorySetting.objects.get(project=world.project).enabled
    assert api.call("PUT", f"{BASE}/memory", tokens.manager, {"enabled": True}).status_code == 204
    assert MemorySetting.objects.get(project=world.project).enabled
    note(world)
    assert api.call("DELETE", f"{BASE}/memory", tokens.manager).status_code == 204
    assert not Note.objects.exists()
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"memory.disable", "memory.enable", "memory.reset"} <= actions


def test_review_forget_restore_veto_undo(api, tokens, world):
    n = note(world)
    response = api.call("PATCH", f"{BASE}/memory/{n.id}", tokens.manager, {"state": "approved"})
    assert response.status_code == 204
    assert Note.objects.get(pk=n.id).trust == "reviewed"
    api.call("PATCH", f"{BASE}/memory/{n.id}", tokens.manager, {"state": "rejected"})
    assert Note.objects.get(pk=n.id).trust == "rejected"
    forgotten = api.post(f"{BASE}/memory/{n.id}/forget", tokens.manager).json()
    assert forgotten["recoveryId"].startswith("rec_")
    restored = api.post(
        f"{BASE}/memory/recoveries/{forgotten['recoveryId']}/restore", tokens.manager
    ).json()
    assert restored == {"id": n.id}
    assert Note.objects.get(pk=n.id).trust == "rejected"
    other = note(world, "Another")
    vetoed = api.post(f"{BASE}/memory/{other.id}/veto", tokens.member).json()
    assert vetoed["status"] == "archived" and vetoed["archiveReason"] == "vetoed"
    undone = api.post(f"{BASE}/memory/{other.id}/undo", tokens.member).json()
    assert undone["status"] == "active" and undone["archiveReason"] is None


@pytest.mark.parametrize(
    ("persona", "status", "code"),
    [
        ("member", 403, "memory_forbidden"),
        ("outsider", 404, "not_found"),
        ("agent", 403, "memory_forbidden"),
        ("manager_readonly", 403, "memory_tool_forbidden"),
    ],
)
def test_management_needs_a_manager(api, tokens, world, persona, status, code):
    n = note(world)
    token = getattr(tokens, persona)
    calls = [
        api.call("PUT", f"{BASE}/memory", token, {"enabled": False}),
        api.call("DELETE", f"{BASE}/memory", token),
        api.call("PATCH", f"{BASE}/memory/{n.id}", token, {"state": "approved"}),
        api.post(f"{BASE}/memory/{n.id}/forget", token),
    ]
    for response in calls:
        assert response.status_code == status, response.content
        assert error_code(response) == code
    assert Note.objects.get(pk=n.id).trust == "learned"
    assert MemorySetting.objects.get(project=world.project).enabled


def test_outsider_cannot_list(api, tokens):
    response = api.get(f"{BASE}/memory", tokens.outsider)
    assert response.status_code == 404 and error_code(response) == "not_found"
    assert error_code(api.get(f"{BASE}/memory", tokens.member)) == "memory_forbidden"


def test_unknown_state_and_foreign_note(api, tokens, world, make_user):
    from tests.conftest import build_world

    other = build_world(make_user, slug="payments")
    foreign = services.note_write(actor=other.as_agent, kind="fact", content="Elsewhere").note
    response = api.call(
        "PATCH", f"{BASE}/memory/{foreign.id}", tokens.manager, {"state": "approved"}
    )
    assert response.status_code == 404 and error_code(response) == "memory_not_found"
    n = note(world)
    bad = api.call("PATCH", f"{BASE}/memory/{n.id}", tokens.manager, {"state": "reviewed"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "state"


def test_a_slug_id_is_documented_and_checked_by_one_rule(api, client, world, make_user):
    """Projects', applications' and repositories' ids: the OpenAPI document gives the pattern
    the service checks, and a refusal says what a slug may hold."""
    admin = services.token_create(actor=None, user=make_user("root", superuser=True))[1]
    document = client.get("/api/openapi.json").json()["components"]["schemas"]
    for schema in ("ProjectIn", "ApplicationIn", "RepositoryIn"):
        id_field = document[schema]["properties"]["id"]
        assert (id_field["pattern"], id_field["minLength"], id_field["maxLength"]) == (
            SLUG_PATTERN,
            1,
            SLUG_MAX,
        ), schema
    for bad in ("bad slug!", "tab\there", "trailing\n", "é"):
        for url, body in (("/api/admin/projects", {"name": "N"}),
                          (f"{BASE}/applications", {"name": "N"}),
                          ("/api/admin/repositories", {"path": "/tmp"})):  # fmt: skip
            response = api.post(url, admin, {"id": bad, **body})
            assert response.status_code == 400, (url, bad)
            error = response.json()["error"]
            assert error["code"] == "memory_invalid", (url, bad)
            assert "letters, digits, - and _" in error["message"], (url, bad, error)
    assert re.fullmatch(SLUG_PATTERN, "billing-svc_2") and not re.search(SLUG_PATTERN, "a b")


def test_orchestration_lifecycle(api, tokens, world, make_user, tmp_path):
    from tests.memory.test_evidence import make_repo

    admin = services.token_create(actor=None, user=make_user("root", superuser=True))[1]
    assert api.post("/api/admin/projects", tokens.manager, {"id": "x"}).status_code == 403
    created = api.post("/api/admin/projects", admin, {"id": "billing-svc", "name": "Billing"})
    assert created.status_code == 201 and created.json() == {"id": "billing-svc"}
    base = "/api/admin/projects/billing-svc"
    member = api.post(
        f"{base}/members", admin, {"username": world.manager.username, "role": "manager"}
    )
    assert member.json() == {"username": world.manager.username, "role": "manager"}
    app = api.post(f"{base}/applications", tokens.manager, {"id": "ledger", "name": "Ledger"})
    assert app.status_code == 201
    path, sha = make_repo(tmp_path, {"README.md": "# Ledger\n"})
    repo = api.post("/api/admin/repositories", admin, {"id": "ledger-main", "path": path})
    assert repo.status_code == 201
    link = api.call(
        "PUT",
        f"{base}/applications/ledger/repositories/ledger-main",
        tokens.manager,
        {"revision": "HEAD"},
    )
    assert link.json() == {
        "applicationId": "ledger",
        "repositoryId": "ledger-main",
        "revision": sha,
    }
    agent = api.post(
        f"{base}/agents",
        tokens.manager,
        {"name": "Ledger helper", "stage": "runtime", "applicationId": "ledger"},
    )
    agent_id = agent.json()["id"]
    run = api.post(f"{base}/runs", tokens.manager, {"agentId": agent_id, "taskKey": "PIN-7"})
    assert run.status_code == 201
    run_body = run.json()
    assert run_body["token"].startswith("mp_") and run_body["scopes"] == ["read", "write"]
    child = api.post(
        f"{base}/runs",
        tokens.manager,
        {"agentId": agent_id, "parentRunId": run_body["id"], "scopes": ["read"]},
    )
    assert child.json()["topLevelRunId"] == run_body["id"] and child.json()["scopes"] == ["read"]
    # The fresh run token works (memory is off in a new project).
    tools = api.get("/api/tools", run_body["token"]).json()
    assert tools["enabled"] is False
    finished = api.call(
        "PATCH", f"{base}/runs/{run_body['id']}", tokens.manager, {"status": "succeeded"}
    )
    assert finished.status_code == 204
    assert Run.objects.get(pk=run_body["id"]).status == "succeeded"
    deleted = api.call("DELETE", f"{base}/runs/{run_body['id']}", tokens.manager)
    assert deleted.status_code == 204
    gone = api.get("/api/tools", run_body["token"])
    assert gone.status_code == 401 and error_code(gone) == "auth_invalid"


def test_run_creation_refusals(api, tokens, world):
    response = api.post(f"{BASE}/runs", tokens.member, {"agentId": world.agent.id})
    assert response.status_code == 403
    response = api.post(f"{BASE}/runs", tokens.manager, {"agentId": "agt_missing"})
    assert response.status_code == 404
    response = api.post(f"{BASE}/agents", tokens.manager, {"name": "X", "stage": "wizard"})
    assert response.status_code == 400 and response.json()["error"]["field"] == "stage"


def test_a_run_with_a_task_and_its_start_recall(api, tokens, world, stored_vectors):
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN on (PIN-812)")
    services.fact_save(actor=world.as_agent, text="Ana prefers squash merges on the billing repo")
    task = {
        "title": "PIN-901: the staging deployment hangs",
        "description": "helm upgrade times out on staging since Monday; find out why.",
    }
    response = api.post(f"{BASE}/runs", tokens.manager, {"agentId": world.agent.id, "task": task})
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.task_title, run.task_description) == (task["title"], task["description"])
    recalled = api.post("/api/v1/memories/recall", response.json()["token"], {"start": True})
    body = recalled.json()
    assert recalled.status_code == 200 and body["fallback"] is None and not body["skipped"]
    assert [m["text"] for m in body["memories"]] == [
        "The staging deploy needs the VPN on (PIN-812)"
    ]
    assert body["memories"][0]["score"] >= 0.5
    plain = api.post(f"{BASE}/runs", tokens.manager, {"agentId": world.agent.id}).json()
    listed = api.post("/api/v1/memories/recall", plain["token"], {"start": True}).json()
    assert listed["fallback"] == "no_query" and len(listed["memories"]) == 2


@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"title": "t" * 1200, "description": "d" * 801}, "task"),
        ({"title": "one\ntwo"}, "task.title"),
        ({"description": "no title"}, "task.title"),
        ({"title": ""}, "task.title"),
        ({"title": "PIN-1", "owner": "me"}, "task.owner"),
        ({"title": 12}, "task.title"),
        ({"title": "PIN-1", "description": "x" * 2001}, "task.description"),
        ("PIN-1: a plain string", "task"),
    ],
)
def test_a_bad_task_is_a_400_and_makes_no_run(api, tokens, world, task, field):
    before = (Run.objects.count(), AuditEvent.objects.filter(action="run.create").count())
    response = api.post(f"{BASE}/runs", tokens.manager, {"agentId": world.agent.id, "task": task})
    assert response.status_code == 400, response.content
    assert error_code(response) == "memory_invalid"
    assert response.json()["error"]["field"] == field
    after = (Run.objects.count(), AuditEvent.objects.filter(action="run.create").count())
    assert after == before


def test_the_openapi_schema_describes_the_task(client):
    schema = client.get("/api/openapi.json").json()
    components = schema["components"]["schemas"]
    run_in = components["RunIn"]["properties"]["task"]
    assert "TaskIn" in json.dumps(run_in)
    task_in = components["TaskIn"]
    assert task_in["required"] == ["title"]
    assert task_in["properties"]["title"]["maxLength"] == 2000
    assert "2,000 characters together" in task_in["description"]


def test_runs_are_listed_with_the_runs_tabs_filters(api, tokens, world):
    """`GET …/runs`: newest first, paged, filtered by the dashboard's RunFilter under the same
    names; a value outside a filter's choices is a 400 naming it."""
    from datetime import timedelta

    from django.utils import timezone

    services.run_update(actor=None, run=world.run2, status="failed")
    old = services.run_create(actor=None, agent=world.agent, task_key="pin-7")
    Run.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(days=10))

    def ids(query: str = "") -> list[str]:
        body = api.get(f"{BASE}/runs?limit=100&{query}", tokens.member).json()
        return [run["id"] for run in body["runs"]]

    every = ids()
    assert len(every) == 5 and every[-1] == old.pk  # newest first
    assert set(ids(f"agent={world.agent.pk}")) == {world.run.pk, old.pk}
    assert ids("status=failed") == [world.run2.pk]
    assert ids("task_key=PIN-7") == [old.pk]  # any case
    ten_days_ago = (timezone.localdate() - timedelta(days=10)).isoformat()
    assert ids(f"started_to={ten_days_ago}") == [old.pk]
    assert old.pk not in ids(f"started_from={timezone.localdate().isoformat()}")
    page = api.get(f"{BASE}/runs?limit=2", tokens.member).json()
    assert len(page["runs"]) == 2 and page["nextOffset"] == 2
    row = api.get(f"{BASE}/runs?status=failed", tokens.member).json()["runs"][0]
    assert row["agentId"] == world.agent2.pk and row["taskKey"] == "PIN-43"
    assert row["finishedAt"] is not None and row["parentRunId"] is None
    bad = api.get(f"{BASE}/runs?status=lost", tokens.member)
    assert (bad.status_code, error_code(bad)) == (400, "memory_invalid")
    assert api.get(f"{BASE}/runs", tokens.outsider).status_code == 404


def test_a_reject_and_a_veto_carry_a_reason_to_the_note_and_its_agent(api, tokens, world):
    """An optional one-line reason, gated like every text: on the note and in its history,
    and to the owning agent beside `archiveReason`; taken back with the decision."""
    rejected, vetoed, bare = (note(world, f"Reasoned note {i}") for i in range(3))
    url = f"{BASE}/memory/{rejected.pk}"
    why = {"state": "rejected", "reason": "Wrong port: 8443"}
    said = api.call("PATCH", url, tokens.manager, why)
    assert said.status_code == 204
    veto = api.post(f"{url[:-len(rejected.pk)]}{vetoed.pk}/veto", tokens.member,
                    {"reason": "Duplicate of the runbook"})  # fmt: skip
    assert veto.status_code == 200 and veto.json()["reviewReason"] == "Duplicate of the runbook"
    plain = api.post(f"{BASE}/memory/{bare.pk}/veto", tokens.member)  # {}: no reason
    assert plain.status_code == 200, plain.json()
    assert plain.json()["reviewReason"] is None
    assert Note.objects.get(pk=rejected.pk).review_reason == "Wrong port: 8443"
    history = AuditEvent.objects.filter(note_ref=rejected.pk, action="note.reject").get()
    assert history.details["reason"] == "Wrong port: 8443"
    # The agent reads its note by id: why it was taken away.
    for gone, why in [(vetoed, "Duplicate of the runbook"), (rejected, "Wrong port: 8443")]:
        own = api.tool("memory_read", tokens.agent, {"id": gone.pk}).json()["entries"][0]
        assert own["reviewReason"] == why
    # Refused: two lines, a secret, a reason with an approval; nothing changes.
    secret = "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for body in [{"state": "rejected", "reason": "one\ntwo"},
                 {"state": "rejected", "reason": secret},
                 {"state": "approved", "reason": "fine"}]:  # fmt: skip
        refused = api.call("PATCH", f"{BASE}/memory/{bare.pk}", tokens.manager, body)
        assert refused.status_code == 400, body
    assert Note.objects.get(pk=bare.pk).trust == "learned"
    # Taken back, the reason goes with the decision.
    api.call("PATCH", url, tokens.manager, {"state": "learned"})
    api.post(f"{BASE}/memory/{vetoed.pk}/undo", tokens.member)
    assert {n.review_reason for n in Note.objects.filter(pk__in=[rejected.pk, vetoed.pk])} == {""}


def test_members_are_listed_and_removed_never_the_last_manager(api, tokens, world, make_user):
    ana = make_user("ana")
    added = api.post(f"{BASE}/members", tokens.manager, {"username": "ana", "role": "manager"})
    assert added.json() == {"username": "ana", "role": "manager"}
    listed = api.get(f"{BASE}/members", tokens.member).json()["members"]
    assert listed[0]["role"] == "manager" and {m["username"] for m in listed} == {
        world.manager.username, world.member.username, "ana"
    }
    assert api.call("DELETE", f"{BASE}/members/ana", tokens.member).status_code == 403
    assert api.call("DELETE", f"{BASE}/members/ana", tokens.manager).status_code == 204
    assert not ana.memberships.exists()
    last = api.call("DELETE", f"{BASE}/members/{world.manager.username}", tokens.manager)
    assert (last.status_code, error_code(last)) == (409, "project_last_manager")
    demote = {"username": world.manager.username, "role": "member"}
    refused = api.post(f"{BASE}/members", tokens.manager, demote)
    assert (refused.status_code, error_code(refused)) == (409, "project_last_manager")
    gone = api.call("DELETE", f"{BASE}/members/ana", tokens.manager)
    assert (gone.status_code, error_code(gone)) == (404, "not_found")
    assert api.get(f"{BASE}/members", tokens.outsider).status_code == 404
