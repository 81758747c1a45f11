"""Webhooks on the Settings page without a browser: managers see and add endpoints (the secret
on the answer, once), a bad address is the form again with why, a member sees no webhooks and
cannot add one."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory_portal.memory.models import Webhook

SLUG = "acme-web"


@pytest.fixture(autouse=True)
def private_receivers(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "WEBHOOK_ALLOW_PRIVATE": True}


def test_a_manager_adds_an_endpoint_and_sees_its_secret_once(world, manager_client):
    url = reverse("dashboard:webhook-create", args=[SLUG])
    form = {"url": "http://127.0.0.1:9/x?token=abc", "event_types": ["note.vetoed"]}
    answer = manager_client.post(url, form)
    page = answer.content.decode()
    assert answer.status_code == 200 and 'id="webhook-secret-value">whsec_' in page
    webhook = Webhook.objects.get()
    assert webhook.event_types == ["note.vetoed"] and "token=abc" not in page
    again = manager_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    assert "whsec_" not in again and webhook.pk in again


def test_a_bad_address_is_the_form_again_with_why(world, manager_client, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "WEBHOOK_ALLOW_PRIVATE": False}
    url = reverse("dashboard:webhook-create", args=[SLUG])
    answer = manager_client.post(url, {"url": "http://10.0.0.8/x", "event_types": ["note.vetoed"]})
    page = answer.content.decode()
    assert answer.status_code == 400 and "private, loopback or link-local" in page
    assert 'value="http://10.0.0.8/x"' in page and not Webhook.objects.exists()


def test_a_member_sees_no_webhooks_and_cannot_add_one(world, member_client):
    page = member_client.get(reverse("dashboard:settings", args=[SLUG])).content.decode()
    assert 'id="webhooks"' not in page
    url = reverse("dashboard:webhook-create", args=[SLUG])
    member_client.post(url, {"url": "http://127.0.0.1:9/x", "event_types": ["note.vetoed"]})
    assert not Webhook.objects.exists()
