"""Read records in Chromium at 1280 and 390 px: run B searches and reads a note run A wrote
(through the API); the note's page says who read it; the manager vetoes it there and follows
the reader's link to run B's page, which flags the note; axe-clean, no sideways scroll."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import expect

from memory_portal.memory import services

from .conftest import axe_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_note_page_says_who_read_it_and_the_run_page_flags_a_veto(open_page, world, width):
    note = services.note_write(
        actor=world.as_agent, kind="fact", content="The billing service retries webhooks for a day."
    ).note
    token = services.token_create(actor=None, run=world.run2)[1]
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for name, body in (("memory_search", {"query": "billing"}), ("memory_read", {"id": note.id})):
        answer = agent.post(f"/api/tools/{name}", body, content_type="application/json")
        assert answer.status_code == 200

    view = open_page(world.manager, width)
    view.goto(f"/p/acme-web/notes/{note.id}/")
    reads = view.page.locator("#reads")
    expect(reads).to_contain_text("Read by 1 run of 1 agent, 1 still running")
    expect(reads.get_by_role("link", name=world.run2.pk)).to_have_count(2)
    reads.scroll_into_view_if_needed()
    view.screenshot(f"note-reads-{width}", full_page=False)
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    view.page.get_by_role("button", name="Veto", exact=True).click()
    expect(view.page.get_by_role("button", name="Undo veto")).to_be_visible()
    note.refresh_from_db()
    assert note.is_vetoed
    view.page.locator("#reads").get_by_role("link", name=world.run2.pk).first.click()
    expect(view.page.get_by_role("heading", name="What this run read")).to_be_visible()
    reads = view.page.locator("#reads")
    expect(reads.locator("tr.flagged")).to_have_count(2)
    expect(reads).to_contain_text("vetoed since")
    reads.scroll_into_view_if_needed()
    view.screenshot(f"run-reads-{width}", full_page=False)
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert not view.errors, view.errors


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_blast_radius_before_and_after_a_veto(open_page, world, width):
    """A row says who was served its note before the click; the bulk bar and its question say
    it for the selection; the toast after says it again and links to those runs."""
    read = services.note_write(
        actor=world.as_agent, kind="fact", content="The billing service retries webhooks for a day."
    ).note
    services.note_write(actor=world.as_agent, kind="fact", content="Staging deploys at noon.")
    token = services.token_create(actor=None, run=world.run2)[1]
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = agent.post("/api/tools/memory_read", {"id": read.id}, content_type="application/json")
    assert answer.status_code == 200

    view = open_page(world.manager, width)
    asked: list[str] = []
    view.page.on("dialog", lambda dialog: asked.append(dialog.message))
    view.goto("/p/acme-web/")
    row = view.page.locator(f"#note-{read.pk}")
    expect(row.locator(".reach")).to_contain_text("Read by 1 run · 1 running")
    expect(row.get_by_role("button", name="Veto")).to_have_accessible_description(
        "Read by 1 run · 1 running in the last 30 days, of 1 agent"
    )

    view.page.locator("[data-select-all]:visible").first.check()  # both notes, either width
    view.page.select_option("#bulk-action", "veto")
    said = view.page.locator("[data-bulk-reach-said]")
    expect(said).to_have_text(
        "The selected notes were served to 1 run of 1 agent in the last 30 days; 1 still running."
    )
    row.scroll_into_view_if_needed()
    view.screenshot(f"notes-reach-{width}", full_page=False)
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    view.page.get_by_role("button", name="Apply").click()
    done = view.page.locator("#toasts .toast.success").last
    expect(done).to_contain_text("Veto: 2 of 2 notes. They were served to 1 run of 1 agent")
    assert asked[0].startswith("Veto 2 notes?") and asked[0].endswith(
        "The selected notes were served to 1 run of 1 agent in the last 30 days; 1 still running."
    )
    expect(said).to_have_text("")  # the selection went with the change, and its reach too
    view.screenshot(f"notes-reach-toast-{width}", full_page=False)
    done.get_by_role("button", name="Undo").click()
    expect(row).not_to_contain_text("Vetoed")

    row.get_by_role("button", name="Veto").click()
    done = view.page.locator("#toasts .toast.success").last
    expect(done).to_contain_text("It was served to 1 run of 1 agent in the last 30 days")
    done.get_by_role("link", name="See the run").click()
    expect(view.page.locator(".filter-note")).to_contain_text("Runs served note")
    expect(view.page.get_by_role("link", name=world.run2.pk)).to_be_visible()
    expect(view.page.get_by_role("link", name=world.run.pk)).to_have_count(0)
    view.screenshot(f"runs-read-{width}", full_page=False)
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert not view.errors, view.errors


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_overview_names_what_is_read_and_what_nobody_reads(open_page, world, width):
    from datetime import timedelta

    from django.utils import timezone

    from memory_portal.memory.models import Note

    read = services.note_write(
        actor=world.as_agent, kind="fact", content="The billing service retries webhooks for a day."
    ).note
    idle = services.note_write(
        actor=world.as_agent, kind="fact", content="The old staging cluster lives in eu-west-1."
    ).note
    Note.objects.filter(pk=idle.pk).update(created_at=timezone.now() - timedelta(days=45))
    token = services.token_create(actor=None, run=world.run2)[1]
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = agent.post("/api/tools/memory_read", {"id": read.id}, content_type="application/json")
    assert answer.status_code == 200

    view = open_page(world.manager, width)
    view.goto("/p/acme-web/overview/")
    most = view.page.locator("ol.most-recalled").first
    expect(most).to_contain_text("The billing service retries webhooks for a day.")
    expect(most).to_contain_text("1 run")
    expect(view.page.get_by_role("link", name="List it")).to_be_visible()
    view.page.get_by_role("link", name="List it").scroll_into_view_if_needed()
    view.screenshot(f"overview-reads-{width}", full_page=False)
    assert not axe_violations(view.page)
    assert view.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    view.page.get_by_role("link", name="List it").click()
    expect(view.page.locator(f"#note-{idle.pk}")).to_be_visible()
    expect(view.page.locator(f"#note-{read.pk}")).to_have_count(0)
    assert not view.errors, view.errors
