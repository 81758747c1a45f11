"""Notifications in Chromium at 1280 and 390 px: a manager sees the defaults of their role, ticks
an alert and keeps it, and an email's unsubscribe link stops the digest after one button;
axe-clean, no sideways scroll."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_portal.memory import emails
from memory_portal.memory.models import NotificationSetting

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_manager_chooses_alerts_and_unsubscribes_from_the_digest(open_page, world, width):
    world.manager.email = "pat@example.com"
    world.manager.save(update_fields=["email"])
    view = open_page(world.manager, width)
    view.goto("/")
    view.page.get_by_role("link", name="Notifications").first.click()
    card = view.page.locator("#project-acme-web")
    expect(card.get_by_text("defaults of your role")).to_be_visible()
    expect(card.get_by_label("Daily digest")).to_be_checked()
    expect(card.get_by_label("A webhook endpoint is switched off (failing)")).to_be_checked()
    view.screenshot(f"notifications-{width}")
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    card.get_by_label("A note is vetoed").check()
    card.get_by_role("button", name="Save for acme-web").click()
    expect(view.page.locator(".messages")).to_contain_text("Saved your choice for")
    card = view.page.locator("#project-acme-web")
    expect(card.get_by_label("A note is vetoed")).to_be_checked()
    expect(card.get_by_text("defaults of your role")).to_have_count(0)
    row = NotificationSetting.objects.get(user=world.manager, project=world.project)
    assert row.digest and "note.vetoed" in row.alerts

    # The link in an email: opened signed out, it changes nothing until the button is pressed.
    token = emails.unsubscribe_token(world.manager.pk, [world.project.pk], emails.DIGEST)
    visitor = open_page(None, width)
    visitor.goto(f"/notifications/unsubscribe/{token}/")
    expect(visitor.page.get_by_role("heading", name="Unsubscribe")).to_be_visible()
    row.refresh_from_db()
    assert row.digest
    visitor.screenshot(f"unsubscribe-{width}")
    assert not axe_violations(visitor.page)
    visitor.page.get_by_role("button", name="Unsubscribe").click()
    expect(visitor.page.get_by_role("heading", name="Unsubscribed")).to_be_visible()
    row.refresh_from_db()
    assert not row.digest and "note.vetoed" in row.alerts
    assert not view.errors and not visitor.errors, view.errors + visitor.errors
