"""The review policy in Chromium at 1280 and 390 px: a manager picks "After a person approves
it" in Settings, trusts an agent on its page, and the review queue says what is held; each
page axe-clean."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_portal.memory import services
from memory_portal.memory.models import Agent, MemorySetting

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_manager_holds_notes_for_review_and_trusts_an_agent(open_page, world, width):
    services.note_write(actor=world.as_agent, kind="fact", content="Held until approved")
    view = open_page(world.manager, width)
    view.goto("/p/acme-web/settings/")
    expect(view.page.get_by_role("heading", name="Review policy")).to_be_visible()
    expect(view.page.get_by_label("At once")).to_be_checked()
    view.page.get_by_label("After a person approves it").check()
    view.page.get_by_role("button", name="Save review policy").click()
    expect(view.page.get_by_label("After a person approves it")).to_be_checked()
    assert MemorySetting.objects.get(project=world.project).review_policy == "hold"
    view.screenshot(f"settings-review-policy-{width}")
    assert not axe_violations(view.page)

    view.goto(f"/p/acme-web/agents/{world.agent2.pk}/")
    view.page.get_by_role("button", name=f"Trust {world.agent2.name}").click()
    stop = view.page.get_by_role("button", name=f"Stop trusting {world.agent2.name}")
    expect(stop).to_be_visible()
    assert Agent.objects.get(pk=world.agent2.pk).trusted
    view.page.locator("#agent-trust").scroll_into_view_if_needed()
    view.screenshot(f"agent-trusted-{width}", full_page=False)
    assert not axe_violations(view.page)

    view.goto("/p/acme-web/review/")
    expect(view.page.locator("#held-summary")).to_contain_text("1 note held")
    expect(view.page.locator(".badge.held")).to_have_count(1)
    view.screenshot(f"review-held-{width}", full_page=False)
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert not view.errors, view.errors
