"""Webhooks on the Settings page in Chromium at 1280 and 390 px: a manager adds an endpoint
(a local receiver), copies its secret shown once, sends a test event that arrives signed, reads
the delivery log, pauses and deletes it; axe-clean."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from standardwebhooks import Webhook as Verifier

from memory_portal.memory.models import Webhook
from tests.memory.test_webhooks import Receiver

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_manager_adds_tests_pauses_and_deletes_an_endpoint(open_page, world, settings, width):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "WEBHOOK_ALLOW_PRIVATE": True}
    receiver = Receiver()
    try:
        view = open_page(world.manager, width)
        view.goto("/p/acme-web/settings/")
        expect(view.page.get_by_role("heading", name="Webhooks")).to_be_visible()
        view.page.get_by_label("URL").fill(receiver.url)
        view.page.get_by_label("note.written").check()
        view.page.get_by_label("Description (optional)").fill("On-call channel bridge")
        view.page.get_by_role("button", name="Add endpoint").click()
        secret = view.page.locator("#webhook-secret-value").inner_text()
        assert secret.startswith("whsec_")
        view.screenshot(f"settings-webhook-secret-{width}")
        assert not axe_violations(view.page)

        view.page.get_by_role("button", name="Send a test event").click()
        expect(view.page.locator(".messages")).to_contain_text("delivered")
        headers, body = receiver.requests[0]
        assert Verifier(secret).verify(body, headers)["type"] == "webhook.test"
        assert secret not in view.page.content()  # shown once: not on the next page
        view.page.locator("details.deliveries summary").click()
        expect(view.page.locator("details.deliveries td[data-label=Status]")).to_have_text(
            "delivered"
        )
        view.screenshot(f"settings-webhook-log-{width}")
        assert not axe_violations(view.page)
        assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        view.page.get_by_role("button", name="Pause").click()
        expect(view.page.get_by_role("button", name="Resume")).to_be_visible()
        assert not Webhook.objects.get().active
        view.page.get_by_role("button", name="Delete").click()
        expect(view.page.locator(".webhook-list")).to_have_count(0)
        assert not Webhook.objects.exists()
        assert not view.errors, view.errors
    finally:
        receiver.close()
