"""The overview in Chromium at 1280 and 390 px: the charts draw without a console or CSP
error, axe finds nothing, and a segment opens the notes table listing what it counts."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory_portal.memory import services

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_overview_opens_what_a_bar_counts(open_page, world, width):
    for i in range(3):
        services.note_write(actor=world.as_agent, kind="fact", content=f"Overview fact {i}")
    view = open_page(world.manager, width)
    view.goto("/p/acme-web/")
    view.page.get_by_role("link", name="Overview").click()
    heading = view.page.get_by_role("heading", name="Notes written per day, by who wrote them")
    expect(heading).to_be_visible()
    view.screenshot(f"overview-{width}")
    assert not axe_violations(view.page)
    bar = view.page.locator("#chart-written a").last
    title = bar.locator("title").text_content()
    count = int(title.rsplit(" ", 1)[1])
    assert count == 3 and "Runtime helper" in title
    bar.click()
    expect(view.page).to_have_url(re.compile(r"/p/acme-web/\?created_from="))
    expect(view.page.locator("tr.note-row")).to_have_count(3)
    assert not view.errors, view.errors
