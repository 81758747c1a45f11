"""Runs end (SPEC §2.3 "finish run"): once a run leaves `running` its token stops working on
every route at once; the orchestrator reports the current step and every write records it."""

from __future__ import annotations

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import ApiToken, Note, Run

from ..memory.helpers import last_event
from .conftest import error_code

BASE = "/api/admin/projects/acme-web"


def start_run(api, tokens, world, **body) -> dict:
    response = api.post(f"{BASE}/runs", tokens.manager, {"agentId": world.agent.id, **body})
    assert response.status_code == 201, response.json()
    return response.json()


def patch(api, token, run_id, body):
    return api.call("PATCH", f"{BASE}/runs/{run_id}", token, body)


# Every route a run token reaches, each with a body that would succeed on a live run.
RUN_TOKEN_ROUTES = [
    ("GET", "/api/tools", None),
    ("POST", "/api/tools/memory_write", {"kind": "fact", "content": "Deploys need the VPN"}),
    ("POST", "/api/tools/memory_read", {}),
    ("POST", "/api/tools/memory_search", {"query": "deploy"}),
    ("POST", "/api/tools/memory_status", {}),
    ("POST", "/api/tools/scratchpad", {"action": "add", "text": "check the VPN"}),
    ("POST", "/api/v1/memories", {"text": "The VPN is needed for deploys"}),
    ("POST", "/api/v1/memories/day", {"line": "fixed the deploy"}),
    ("GET", "/api/v1/memories", None),
    ("POST", "/api/v1/memories/recall", {"query": "deploy"}),
]


@pytest.mark.parametrize("status", ["succeeded", "failed"])
@pytest.mark.parametrize(("method", "path", "body"), RUN_TOKEN_ROUTES)
def test_a_finished_runs_token_stops_working_everywhere(
    api, tokens, world, status, method, path, body
):
    run = start_run(api, tokens, world)
    assert api.call(method, path, run["token"], body).status_code in {200, 201}
    assert patch(api, tokens.manager, run["id"], {"status": status}).status_code == 204
    response = api.call(method, path, run["token"], body)
    assert response.status_code == 401 and error_code(response) == "auth_invalid"
    assert "has finished" in response.json()["error"]["message"]


def test_finishing_revokes_every_token_of_the_run_and_is_audited(api, tokens, world):
    run = start_run(api, tokens, world)
    services.token_create(actor=None, run=Run.objects.get(pk=run["id"]), can_write=False)
    patch(api, tokens.manager, run["id"], {"status": "succeeded"})
    assert not ApiToken.objects.filter(run_id=run["id"], revoked_at__isnull=True).exists()
    event = last_event(world.project, "run.status")
    assert event.details == {"status": "succeeded", "tokens_revoked": 2}
    assert event.target_ref == run["id"] and event.actor_user == world.manager


def test_a_finished_run_does_not_run_again(api, tokens, world):
    run = start_run(api, tokens, world)
    patch(api, tokens.manager, run["id"], {"status": "failed"})
    again = patch(api, tokens.manager, run["id"], {"status": "running"})
    assert again.status_code == 400 and error_code(again) == "memory_invalid"
    assert again.json()["error"]["field"] == "status"
    step = patch(api, tokens.manager, run["id"], {"step": "deploy"})
    assert step.status_code == 400 and error_code(step) == "memory_invalid"
    # The final status may still be corrected; the token stays revoked.
    assert patch(api, tokens.manager, run["id"], {"status": "succeeded"}).status_code == 204
    assert Run.objects.get(pk=run["id"]).status == "succeeded"
    assert api.get("/api/tools", run["token"]).status_code == 401
    with pytest.raises(Exception, match="has finished"):
        services.token_create(actor=None, run=Run.objects.get(pk=run["id"]))


def test_every_write_records_the_step_the_orchestrator_reported(api, tokens, world):
    run = start_run(api, tokens, world, taskKey="PIN-7")
    token = run["token"]
    first = api.tool("memory_write", token, {"kind": "fact", "content": "Before any step"})
    assert patch(api, tokens.manager, run["id"], {"step": "plan"}).status_code == 204
    second = api.tool("memory_write", token, {"kind": "lesson", "content": "Learned in plan"})
    assert patch(api, tokens.manager, run["id"], {"step": "implement"}).status_code == 204
    fact = api.post("/api/v1/memories", token, {"text": "Saved while implementing"})
    day = api.post("/api/v1/memories/day", token, {"line": "implemented the fix"})
    steps = {
        first.json()["id"]: "",
        second.json()["id"]: "plan",
        fact.json()["id"]: "implement",
        day.json()["id"]: "implement",
    }
    assert {n.id: n.step for n in Note.objects.filter(pk__in=steps)} == steps
    read = api.tool("memory_read", token, {"id": second.json()["id"]}).json()
    assert read["entries"][0]["step"] == "plan"
    assert last_event(world.project, "run.step").details == {"step": "implement"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "status"),
        ({"step": "x" * 101}, "step"),
        ({"step": "two\nlines"}, "step"),
        ({"step": "password=hunter2hunter2"}, "step"),
    ],
)
def test_bad_run_updates_are_refused(api, tokens, world, body, field):
    run = start_run(api, tokens, world)
    response = patch(api, tokens.manager, run["id"], body)
    assert response.status_code in {400, 422}, response.json()
    assert error_code(response) in {"memory_invalid", "secret_in_memory"}
    assert Run.objects.get(pk=run["id"]).current_step == ""


def test_only_managers_report_on_runs(api, tokens, world):
    run = start_run(api, tokens, world)
    member = patch(api, tokens.member, run["id"], {"status": "succeeded"})
    assert member.status_code == 403 and error_code(member) == "memory_forbidden"
    outsider = patch(api, tokens.outsider, run["id"], {"status": "succeeded"})
    assert outsider.status_code == 404
    own = patch(api, run["token"], run["id"], {"status": "succeeded"})
    assert own.status_code == 403
    assert Run.objects.get(pk=run["id"]).status == "running"


def test_a_run_and_its_token_are_created_together_or_not_at_all(api, tokens, world, monkeypatch):
    from memory_portal.memory import tokens as token_secrets

    def fail():
        raise RuntimeError("no randomness available")

    # The boundary: the secret generator, after the run row is inserted.
    monkeypatch.setattr(token_secrets, "generate", fail)
    before = Run.objects.count(), ApiToken.objects.count()
    response = api.post(f"{BASE}/runs", tokens.manager, {"agentId": world.agent.id})
    assert response.status_code == 500
    assert (Run.objects.count(), ApiToken.objects.count()) == before, "no run without its token"
