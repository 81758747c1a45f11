"""`POST /api/admin/projects/{p}/runs/{r}/revert` and `…/revert/undo`: the preview, the
applied revert with its id and counts, the typed confirmation, undo, and who may call."""

from __future__ import annotations

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import AuditEvent, Note, Status

from .conftest import error_code

BASE = "/api/admin/projects/acme-web"


def written(world):
    child = services.run_create(actor=None, agent=world.agent, parent=world.run)
    shared = services.note_write(actor=world.as_agent, kind="fact", content="Staging is slow.")
    nested = services.note_write(
        actor=Actor.agent_run(child), kind="lesson", content="Retry flaky builds once."
    )
    fact = services.fact_save(actor=world.as_agent, text="The VPN drops at noon.")
    return child, shared.note, nested.note, fact.note


def test_preview_then_apply_then_undo(api, tokens, world):
    child, shared, nested, fact = written(world)
    url = f"{BASE}/runs/{world.run.pk}/revert"
    preview = api.post(url, tokens.manager, {"dryRun": True})
    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert body["dryRun"] is True and body["revertId"] is None
    assert body["runIds"] == [world.run.pk, child.pk]
    assert {n["id"] for n in body["forget"]} == {shared.pk, nested.pk}
    assert [n["id"] for n in body["veto"]] == [fact.pk]
    assert body["changes"] == 3 and body["confirmRequired"] is False
    assert Note.objects.filter(status=Status.ACTIVE).count() == 3  # nothing changed

    applied = api.post(url, tokens.manager, {})
    assert applied.status_code == 200, applied.content
    result = applied.json()
    assert result["revertId"].startswith("rvt_") and result["dryRun"] is False
    assert result["counts"]["forgotten"] == 2 and result["counts"]["vetoed"] == 1
    assert not Note.objects.filter(status=Status.ACTIVE).exists()
    event = AuditEvent.objects.get(action="run.revert")
    assert event.details["revert"] == result["revertId"]

    undo = api.post(f"{url}/undo", tokens.manager)
    assert undo.status_code == 200, undo.content
    answer = undo.json()
    assert (answer["revertId"], answer["runId"], answer["skipped"]) == (
        result["revertId"],
        world.run.pk,
        {},
    )
    assert sorted(answer["restored"]) == sorted([fact.pk, shared.pk, nested.pk])
    assert Note.objects.filter(status=Status.ACTIVE).count() == 3
    again = api.post(f"{url}/undo", tokens.manager)
    assert again.status_code == 404 and error_code(again) == "not_found"


def test_reviewed_notes_ticked_and_typed_confirmation(api, tokens, world):
    _, shared, _, _ = written(world)
    services.note_approve(actor=world.as_manager, note_id=shared.pk)
    for i in range(20):
        services.note_write(actor=world.as_agent, kind="fact", content=f"Port {8000 + i} is ok.")
    url = f"{BASE}/runs/{world.run.pk}/revert"
    preview = api.post(url, tokens.manager, {"dryRun": True, "includeReviewed": [shared.pk]})
    body = preview.json()
    assert body["reviewed"][0] == {**body["reviewed"][0], "id": shared.pk, "selected": True}
    assert body["changes"] == 23 and body["confirmRequired"] is True
    refused = api.post(url, tokens.manager, {"includeReviewed": [shared.pk]})
    assert refused.status_code == 400 and error_code(refused) == "memory_invalid"
    assert refused.json()["error"]["field"] == "confirm"
    ok = api.post(url, tokens.manager, {"includeReviewed": [shared.pk], "confirm": world.run.pk})
    assert ok.status_code == 200 and ok.json()["changes"] == 23
    assert Note.objects.get(pk=shared.pk).status == Status.FORGOTTEN


def test_members_are_refused_and_outsiders_see_nothing(api, tokens, world):
    written(world)
    url = f"{BASE}/runs/{world.run.pk}/revert"
    for token in (tokens.member,):
        response = api.post(url, token, {"dryRun": True})
        assert response.status_code == 403 and error_code(response) == "memory_forbidden"
        response = api.post(f"{url}/undo", token)
        assert response.status_code == 403 and error_code(response) == "memory_forbidden"
    response = api.post(url, tokens.outsider, {"dryRun": True})
    assert response.status_code == 404
    response = api.post(url, tokens.agent, {"dryRun": True})
    assert response.status_code in (401, 403)
    assert not AuditEvent.objects.filter(action="run.revert").exists()


def test_another_projects_run_is_not_found(api, tokens, world, make_user):
    from tests.conftest import build_world

    other = build_world(make_user, slug="payments")
    response = api.post(f"{BASE}/runs/{other.run.pk}/revert", tokens.manager, {"dryRun": True})
    assert response.status_code == 404 and error_code(response) == "not_found"
    response = api.post(f"{BASE}/runs/{other.run.pk}/revert/undo", tokens.manager)
    assert response.status_code == 404 and error_code(response) == "not_found"
