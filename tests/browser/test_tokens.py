"""“Your API tokens” in Chromium at 1280 and 390 px: create a token, see it once, copy it;
axe-clean."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_person_creates_a_token_in_the_browser(open_page, world, width):
    view = open_page(world.manager, width)
    view.goto("/")
    view.page.get_by_role("link", name="API tokens").click()
    expect(view.page.get_by_role("heading", name="Your API tokens")).to_be_visible()
    assert not axe_violations(view.page)
    view.page.get_by_label("Label").fill("release script")
    view.page.get_by_label("Expires after").select_option("30")
    view.page.get_by_role("button", name="Create token").click()
    assert view.page.locator("#secret").inner_text().startswith("mp_")
    expect(view.page.get_by_role("cell", name="release script")).to_be_visible()
    view.screenshot(f"tokens-{width}")
    assert not axe_violations(view.page)
    assert not view.errors, view.errors
