"""From login to a pasted-ready configuration without a shell, in Chromium at 1280 and
390 px: the Connect page creates an agent (its fields shown once "A new agent…" is picked)
and its key, shows the key once with a copy button and the configurations, and the "last seen"
line turns to Connected after the first call."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from memory_portal.memory.models import AgentKey

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_connect_an_agent_from_the_browser(open_page, world, width):
    view = open_page(world.manager, width)
    view.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    view.goto("/p/acme-web/")
    view.page.get_by_role("link", name="Connect", exact=True).click()
    expect(view.page.get_by_role("heading", name="Connect an agent")).to_be_visible()
    # The new agent's fields show only while "A new agent…" is picked, its name focused.
    name = view.page.get_by_label("New agent's name")
    expect(name).to_be_hidden()
    view.page.get_by_label("Agent", exact=True).select_option("new")
    expect(name).to_be_focused()
    name.fill("Ana's Cursor agent")
    view.page.get_by_label("Its stage").select_option("understand")
    view.page.get_by_label("Where the key is used").fill("Ana's Cursor")
    view.screenshot(f"connect-form-{width}")
    assert not axe_violations(view.page)
    view.page.get_by_role("button", name="Create key").click()

    secret = view.page.locator("#secret").inner_text()
    assert secret.startswith("mpk_")
    view.page.get_by_role("button", name="Copy key").click()
    expect(view.page.get_by_role("button", name="Copied")).to_be_visible()
    assert view.page.evaluate("navigator.clipboard.readText()") == secret
    cursor = json.loads(view.page.locator("#snippet-cursor").inner_text())
    assert cursor["mcpServers"]["memory-portal"]["headers"]["Authorization"] == f"Bearer {secret}"
    expect(view.page.locator("#key-seen")).to_contain_text("Waiting")
    view.screenshot(f"connect-key-{width}")
    assert not axe_violations(view.page)

    # The first call with the key: the polled line says so.
    from memory_portal.memory import services
    from memory_portal.memory.tokens import key_authenticate

    services.key_run_start(key=key_authenticate(secret))
    expect(view.page.locator("#key-seen")).to_contain_text("Connected", timeout=15_000)
    assert AgentKey.objects.get(label="Ana's Cursor").first_used_at is not None
    assert not view.errors, view.errors


def test_axe_finds_what_it_should(open_page):
    """The accessibility check can fail: a bare field without a label is a violation."""
    view = open_page()
    view.page.set_content("<html lang='en'><title>t</title><main><input></main></html>")
    assert "label" in {rule for rule, _help, _count in axe_violations(view.page)}


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_agents_pages_with_keys(open_page, world, width):
    from memory_portal.memory import services

    services.key_create(actor=world.as_manager, agent=world.agent, label="Ana's Cursor")
    view = open_page(world.manager, width)
    view.goto("/p/acme-web/agents/")
    expect(view.page.get_by_role("heading", name="New agent")).to_be_visible()
    view.screenshot(f"agents-{width}")
    assert not axe_violations(view.page)
    view.goto(f"/p/acme-web/agents/{world.agent.pk}/")
    expect(view.page.get_by_role("cell", name="Ana's Cursor")).to_be_visible()
    view.page.get_by_text(f"Rename, change the stage of or retire {world.agent.name}").click()
    expect(view.page.get_by_label("Stage", exact=True)).to_have_value("runtime")
    view.screenshot(f"agent-keys-{width}", full_page=False)
    assert not axe_violations(view.page)
    view.page.get_by_role("button", name="Revoke").click()
    expect(view.page.get_by_text("Revoked the key")).to_be_visible()
    assert not view.errors, view.errors
