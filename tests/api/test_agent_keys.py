"""Agent keys (SPEC §3.4a): managers create, list and revoke them; a key only starts runs
(`POST /api/runs` here, an MCP session in tests/mcp/test_key_sessions.py) and is a 401 with a
hint everywhere else; a revoked key or a retired agent's key is refused."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import AgentKey, AuditEvent, Note, Run, RunStatus

from .conftest import error_code

BASE = "/api/admin/projects/acme-web"


@pytest.fixture
def key(api, tokens, world):
    response = api.post(f"{BASE}/agents/{world.agent.pk}/keys", tokens.manager, {"label": "CI"})
    assert response.status_code == 201, response.content
    return response.json()


def test_a_manager_creates_lists_and_revokes_keys(api, tokens, world, key):
    assert key["id"].startswith("key_") and key["key"].startswith("mpk_")
    assert key["label"] == "CI" and key["agentId"] == world.agent.pk and key["createdAt"]
    stored = AgentKey.objects.get(pk=key["id"])
    secret = key["key"].split("_", 2)[2]  # the secret itself may hold "_"
    assert secret not in stored.secret_hash and stored.secret_hash != secret

    listed = api.get(f"{BASE}/agents/{world.agent.pk}/keys", tokens.manager).json()["keys"]
    assert [k["id"] for k in listed] == [key["id"]]
    assert "key" not in listed[0] and listed[0]["lastUsedAt"] is None
    assert key["key"] not in api.get(f"{BASE}/agents/{world.agent.pk}/keys", tokens.manager).text

    # Audited, never with the secret.
    events = AuditEvent.objects.filter(action__startswith="key.")
    assert [e.action for e in events] == ["key.create"]
    assert key["key"] not in str(list(events.values()))

    deleted = api.call("DELETE", f"{BASE}/agents/{world.agent.pk}/keys/{key['id']}", tokens.manager)
    assert deleted.status_code == 204
    assert error_code(api.post("/api/runs", key["key"])) == "auth_invalid"
    assert AuditEvent.objects.filter(action="key.revoke", target_ref=key["id"]).exists()


def test_only_managers_handle_keys(api, tokens, world, key):
    url = f"{BASE}/agents/{world.agent.pk}/keys"
    assert error_code(api.post(url, tokens.member, {"label": "x"})) == "memory_forbidden"
    assert error_code(api.get(url, tokens.member)) == "memory_forbidden"
    assert api.get(url, tokens.outsider).status_code == 404
    response = api.call("DELETE", f"{url}/{key['id']}", tokens.member)
    assert error_code(response) == "memory_forbidden"
    assert error_code(api.post(url, tokens.agent, {"label": "x"})) == "memory_forbidden"
    assert error_code(api.post(url, tokens.manager, {"label": ""})) == "memory_invalid"


def test_a_key_starts_runs_of_its_agent(api, world, key):
    response = api.post("/api/runs", key["key"], {"taskKey": "PROJ-7", "task": {"title": "Fix"}})
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert run.agent_id == world.agent.pk and run.agent_key_id == key["id"]
    assert run.task_key == "PROJ-7" and run.task_title == "Fix" and run.parent_id is None
    assert body["topLevelRunId"] == run.pk and body["scopes"] == ["read", "write"]

    # The run token works as any run's: the note shows the agent and the run.
    written = api.tool("memory_write", body["token"], {"kind": "fact", "content": "VPN first."})
    assert written.status_code == 200, written.content
    note = Note.objects.get(pk=written.json()["id"])
    assert note.created_by_agent_id == world.agent.pk and note.origin_run_id == run.pk
    event = AuditEvent.objects.get(action="run.create", target_ref=run.pk)
    assert event.actor_agent_id == world.agent.pk and event.details == {"key": key["id"]}
    assert AgentKey.objects.get(pk=key["id"]).first_used_at is not None

    nested = api.post("/api/runs", key["key"], {"parentRunId": run.pk}).json()
    assert Run.objects.get(pk=nested["id"]).top_level_run_id == run.pk
    response = api.post("/api/runs", key["key"], {"parentRunId": "run_nope"})
    assert response.status_code == 404 and error_code(response) == "not_found"
    services.run_update(actor=None, run=run, status=RunStatus.SUCCEEDED)
    assert error_code(api.tool("memory_status", body["token"])) == "auth_invalid"
    response = api.post("/api/runs", key["key"], {"parentRunId": run.pk})
    assert error_code(response) == "memory_invalid"


def test_a_key_nests_only_under_runs_of_its_own(api, tokens, world, key):
    """A run id is printed in every note's provenance: nesting under another agent's run (or
    another key's) would lend that run's scratchpad, slots, budget and quota. Such a parent is
    the 404 an unknown id gets, with nothing started; the agent's runs a manager started for
    it, and the key's own, take nested runs."""
    other_key = api.post(
        f"{BASE}/agents/{world.agent.pk}/keys", tokens.manager, {"label": "other"}
    ).json()
    others_run = api.post("/api/runs", other_key["key"]).json()
    before = Run.objects.count()
    for parent in (world.run2.pk, others_run["id"], world.reviewer_run.pk):
        response = api.post("/api/runs", key["key"], {"parentRunId": parent})
        assert response.status_code == 404 and error_code(response) == "not_found", parent
        assert parent not in response.json()["error"]["hint"]
    assert Run.objects.count() == before
    assert not AuditEvent.objects.filter(
        action="run.create", details__key=key["id"]
    ).exists()

    # The agent's run a manager started (world.run) takes it, and so does the key's own.
    nested = api.post("/api/runs", key["key"], {"parentRunId": world.run.pk})
    assert nested.status_code == 201 and nested.json()["topLevelRunId"] == world.run.pk
    own = api.post("/api/runs", key["key"]).json()
    deeper = api.post("/api/runs", key["key"], {"parentRunId": own["id"]}).json()
    assert deeper["topLevelRunId"] == own["id"]


def test_revoking_a_key_finishes_the_runs_it_opened(api, tokens, world, key):
    """A revoked key leaves nothing running: its runs (nested ones too) are finished as
    failed with their tokens revoked at once; runs a manager started stay running."""
    first = api.post("/api/runs", key["key"]).json()
    nested = api.post("/api/runs", key["key"], {"parentRunId": first["id"]}).json()
    second_token = services.token_create(actor=None, run=Run.objects.get(pk=first["id"]))[1]
    for token in (first["token"], nested["token"], second_token):
        assert api.tool("memory_status", token).status_code == 200
    deleted = api.call("DELETE", f"{BASE}/agents/{world.agent.pk}/keys/{key['id']}", tokens.manager)
    assert deleted.status_code == 204
    for token in (first["token"], nested["token"], second_token):
        assert error_code(api.tool("memory_status", token)) == "auth_invalid"
    for run_id in (first["id"], nested["id"]):
        run = Run.objects.get(pk=run_id)
        assert run.status == RunStatus.FAILED and run.finished_at is not None
        event = AuditEvent.objects.get(action="run.status", target_ref=run_id)
        assert event.details["reason"] == "key_revoked"
    assert Run.objects.get(pk=world.run.pk).status == RunStatus.RUNNING
    revoked = AuditEvent.objects.get(action="key.revoke", target_ref=key["id"])
    assert revoked.details["runs_finished"] == 2


def test_a_run_a_key_started_reports_its_step_and_end_with_its_own_token(
    api, tokens, world, key
):
    """The key's holder is the run's orchestrator: the run token sets the step and finishes
    the run (then stops working); it reaches no other run, and a manager's run stays the
    manager's to report on."""
    run = api.post("/api/runs", key["key"], {"taskKey": "PROJ-8"}).json()
    other = api.post("/api/runs", key["key"]).json()
    url = f"/api/runs/{run['id']}"
    assert api.call("PATCH", url, run["token"], {"step": "triage"}).status_code == 204
    written = api.tool("memory_write", run["token"], {"kind": "fact", "content": "Step seen."})
    assert Note.objects.get(pk=written.json()["id"]).step == "triage"

    # Not another run (not even one of the same key), not a key, not an empty report.
    refused = api.call("PATCH", f"/api/runs/{other['id']}", run["token"], {"status": "failed"})
    assert refused.status_code == 404 and error_code(refused) == "not_found"
    assert error_code(api.call("PATCH", url, key["key"], {"status": "failed"})) == "auth_invalid"
    assert error_code(api.call("PATCH", url, run["token"], {})) == "memory_invalid"
    bad = api.call("PATCH", url, run["token"], {"status": "done"})
    assert bad.status_code == 400 and error_code(bad) == "memory_invalid"

    finished = api.call("PATCH", url, run["token"], {"status": "failed"})
    assert finished.status_code == 204
    assert Run.objects.get(pk=run["id"]).status == RunStatus.FAILED
    assert Run.objects.get(pk=other["id"]).status == RunStatus.RUNNING
    assert error_code(api.tool("memory_status", run["token"])) == "auth_invalid"
    event = AuditEvent.objects.get(action="run.status", target_ref=run["id"])
    assert event.actor_agent_id == world.agent.pk and event.details["status"] == "failed"
    # A manager may still correct the final status.
    fixed = api.call(
        "PATCH", f"{BASE}/runs/{run['id']}", tokens.manager, {"status": "succeeded"}
    )
    assert fixed.status_code == 204

    # The fixture's run was started by a manager (an orchestrator): its token may not.
    own = api.call("PATCH", f"/api/runs/{world.run.pk}", tokens.agent, {"status": "succeeded"})
    assert own.status_code == 403 and error_code(own) == "memory_forbidden"
    assert Run.objects.get(pk=world.run.pk).status == RunStatus.RUNNING
    person = api.call("PATCH", url, tokens.manager, {"status": "failed"})
    assert person.status_code == 404 and "/api/admin/projects/" in person.json()["error"]["hint"]


def test_a_manager_changes_an_agents_stage_and_its_key_connects_to_memory(api, tokens, world):
    """An agent made with a stage not offered memory is changed, not replaced: its key and
    runs stay, and what it is offered follows from its next call."""
    agent = services.agent_create(
        actor=None, project=world.project, name="Coder", stage="implement"
    )
    key, secret = services.key_create(actor=world.as_manager, agent=agent, label="Cursor")
    run = api.post("/api/runs", secret).json()
    refused = api.tool("memory_status", run["token"])
    assert refused.status_code == 403 and error_code(refused) == "memory_not_eligible"

    url = f"{BASE}/agents/{agent.pk}"
    assert error_code(api.call("PATCH", url, tokens.member, {"stage": "design"})) == (
        "memory_forbidden"
    )
    assert error_code(api.call("PATCH", url, tokens.manager, {"stage": "chef"})) == (
        "memory_invalid"
    )
    assert error_code(api.call("PATCH", url, tokens.manager, {})) == "memory_invalid"
    changed = api.call("PATCH", url, tokens.manager, {"stage": "design", "name": "Designer"})
    assert changed.status_code == 204
    agent.refresh_from_db()
    assert (agent.stage, agent.name) == ("design", "Designer")
    assert api.tool("memory_status", run["token"]).status_code == 200
    assert [t["name"] for t in api.get("/api/tools", run["token"]).json()["tools"]][:1] == [
        "memory_write"
    ]
    event = AuditEvent.objects.get(action="agent.stage", target_ref=agent.pk)
    assert event.details == {"from": "implement", "to": "design"}
    assert AgentKey.objects.get(pk=key.pk).revoked_at is None

    # A name the gate refuses changes nothing, the stage included.
    bad = api.call("PATCH", url, tokens.manager, {"stage": "review", "name": "a\nb"})
    assert error_code(bad) == "memory_invalid"
    agent.refresh_from_db()
    assert (agent.stage, agent.name) == ("design", "Designer")


def test_a_key_is_refused_everywhere_else(api, tokens, world, key):
    for method, path in (
        ("GET", "/api/tools"),
        ("POST", "/api/tools/memory_status"),
        ("GET", "/api/v1/memories"),
        ("GET", f"{BASE}/memory"),
    ):
        response = api.call(method, path, key["key"], {} if method == "POST" else None)
        assert response.status_code == 401, path
        error = response.json()["error"]
        assert error["code"] == "auth_invalid" and "/api/runs" in error["hint"], path
    # And /api/runs takes nothing but a key.
    for token in (tokens.agent, tokens.manager):
        response = api.post("/api/runs", token)
        assert response.status_code == 401 and error_code(response) == "auth_invalid"
    assert error_code(api.post("/api/runs")) == "auth_required"
    assert error_code(api.post("/api/runs", "mpk_0123456789ab_wrong")) == "auth_invalid"


def test_a_retired_agents_keys_stop_and_its_work_stays(api, tokens, world, key):
    started = api.post("/api/runs", key["key"]).json()
    api.tool("memory_write", started["token"], {"kind": "fact", "content": "Kept after retire."})
    response = api.post(f"{BASE}/agents/{world.agent.pk}/retire", tokens.manager)
    assert response.status_code == 204
    assert error_code(api.post("/api/runs", key["key"])) == "auth_invalid"
    assert AgentKey.objects.get(pk=key["id"]).revoked_at is not None
    assert Note.objects.filter(content="Kept after retire.").exists()
    assert Run.objects.filter(pk=started["id"]).exists()
    # A retired agent takes no new key and starts no run from an orchestrator either.
    url = f"{BASE}/agents/{world.agent.pk}/keys"
    assert error_code(api.post(url, tokens.manager, {"label": "again"})) == "memory_forbidden"
    response = api.post(f"{BASE}/runs", tokens.manager, {"agentId": world.agent.pk})
    assert error_code(response) == "memory_forbidden"
    assert AuditEvent.objects.get(action="agent.retire").details == {
        "keys_revoked": 1,
        "runs_finished": 1,
    }
    assert Run.objects.get(pk=started["id"]).status == RunStatus.FAILED


def test_a_manager_renames_an_agent(api, tokens, world):
    url = f"{BASE}/agents/{world.agent.pk}"
    assert api.call("PATCH", url, tokens.manager, {"name": "Builder"}).status_code == 204
    world.agent.refresh_from_db()
    assert world.agent.name == "Builder"
    assert error_code(api.call("PATCH", url, tokens.member, {"name": "X"})) == "memory_forbidden"
    assert error_code(api.call("PATCH", url, tokens.manager, {"name": ""})) == "memory_invalid"


def test_an_export_never_contains_a_key(api, tokens, world, key):
    started = api.post("/api/runs", key["key"]).json()
    api.tool("memory_write", started["token"], {"kind": "fact", "content": "Exported fact."})
    export = api.get(f"{BASE}/export", tokens.manager)
    assert export.status_code == 200
    text = b"".join(export.streaming_content).decode()
    assert "Exported fact." in text
    assert key["key"] not in text and key["id"] not in text and "mpk_" not in text
    assert started["token"] not in text
