"""`/api/admin/projects/{projectId}/webhooks`: managers add, list, change, pause, test, rotate
and delete endpoints; the secret is answered once, the URL masked afterwards; members get 403
and outsiders 404; bad input is a 4xx with nothing created."""

from __future__ import annotations

import pytest

from memory_portal.memory.models import AuditEvent, Webhook

from .conftest import error_code

BASE = "/api/admin/projects/acme-web/webhooks"
URL = "http://127.0.0.1:9/hooks/T0/B0/secretpath?token=abc"


@pytest.fixture(autouse=True)
def private_receivers(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "WEBHOOK_ALLOW_PRIVATE": True}


def test_a_manager_keeps_endpoints_through_the_api(api, tokens, world):
    made = api.post(BASE, tokens.manager, {"url": URL, "eventTypes": ["note.vetoed"]})
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["secret"].startswith("whsec_") and body["url"] == URL
    hook_id = body["id"]
    assert hook_id.startswith("whk_") and body["format"] == "standard" and body["active"]

    listed = api.get(BASE, tokens.manager)
    assert listed.status_code == 200
    (row,) = listed.json()["webhooks"]
    assert "secret" not in row and "token=abc" not in listed.text and "secretpath" not in row["url"]
    assert row["url"].startswith("http://127.0.0.1:9/hooks/") and row["url"].endswith("?…")

    patched = api.call("PATCH", f"{BASE}/{hook_id}", tokens.manager, {"active": False})
    assert patched.status_code == 200 and patched.json()["active"] is False
    rotated = api.post(f"{BASE}/{hook_id}/rotate", tokens.manager)
    assert rotated.status_code == 200 and rotated.json()["secret"] != body["secret"]
    tested = api.post(f"{BASE}/{hook_id}/test", tokens.manager)
    assert tested.status_code == 200 and tested.json()["type"] == "webhook.test"
    assert tested.json()["status"] == "failed" and tested.json()["lastError"] == "connection"
    deliveries = api.get(f"{BASE}/{hook_id}/deliveries", tokens.manager).json()["deliveries"]
    assert [d["type"] for d in deliveries] == ["webhook.test"]

    actions = [e.action for e in AuditEvent.objects.filter(target_ref=hook_id).order_by("id")]
    assert actions == ["webhook.create", "webhook.change", "webhook.rotate"]
    assert body["secret"] not in str(list(AuditEvent.objects.values()))
    assert "token=abc" not in str(list(AuditEvent.objects.values()))
    assert api.call("DELETE", f"{BASE}/{hook_id}", tokens.manager).status_code == 204
    assert not Webhook.objects.exists()


def test_members_and_outsiders_cannot_and_bad_input_creates_nothing(api, tokens, world):
    body = {"url": URL, "eventTypes": ["note.vetoed"]}
    assert error_code(api.post(BASE, tokens.member, body)) == "memory_forbidden"
    assert error_code(api.get(BASE, tokens.member)) == "memory_forbidden"
    assert api.get(BASE, tokens.outsider).status_code == 404
    assert error_code(api.post(BASE, tokens.agent, body)) == "memory_forbidden"
    for bad in (
        {"url": "ftp://x.example/y", "eventTypes": ["note.vetoed"]},
        {"url": URL, "eventTypes": ["note.smudged"]},
        {"url": URL, "eventTypes": []},
        {"url": URL, "eventTypes": ["note.vetoed"], "colour": "red"},
        {"url": URL, "eventTypes": ["note.vetoed"], "format": "xml"},
    ):
        response = api.post(BASE, tokens.manager, bad)
        assert response.status_code == 400 and error_code(response) == "memory_invalid", bad
    assert api.get(f"{BASE}/whk_nope", tokens.manager).status_code == 404
    assert not Webhook.objects.exists()
