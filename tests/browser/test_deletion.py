"""The settings page in a real browser: a delete button waits for the typed id, and the
delete goes through without a CSP error."""

from __future__ import annotations

import pytest

from memory_portal.memory.models import Application, Project

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_manager_deletes_an_application_once_its_id_is_typed(world, open_page):
    from playwright.sync_api import expect

    page = open_page(world.manager)
    page.goto("/p/acme-web/settings/")
    row = page.page.locator("#application-storefront")
    row.locator("summary").click()
    button = row.get_by_role("button", name="Delete application storefront")
    field = row.get_by_label("Type storefront to confirm")
    expect(button).to_be_disabled()
    field.fill("storefron")
    expect(button).to_be_disabled()
    field.fill("storefront")
    expect(button).to_be_enabled()
    button.click()
    page.page.wait_for_url("**/p/acme-web/")
    expect(page.page.locator(".messages")).to_contain_text("Deleted application storefront")
    assert not Application.objects.filter(pk=world.app.pk).exists()
    assert page.errors == []


def test_an_administrator_deletes_the_project_from_the_danger_zone(world, make_user, open_page):
    from playwright.sync_api import expect

    page = open_page(make_user("root", superuser=True), width="phone")
    page.goto("/p/acme-web/settings/")
    page.page.get_by_text("Delete project acme-web…").click()
    page.page.get_by_label("Type acme-web to confirm", exact=True).fill("acme-web")
    page.page.get_by_role("button", name="Delete project acme-web").click()
    page.page.wait_for_url(lambda url: url.rstrip("/") == page.base_url)
    expect(page.page.locator(".messages")).to_contain_text("Deleted project acme-web")
    assert not Project.objects.filter(slug="acme-web").exists()
    assert page.errors == []
