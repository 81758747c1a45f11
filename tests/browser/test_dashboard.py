"""The dashboard in a real browser: log in, veto and undo, forget and restore, approve from
the review queue with the keyboard, switch memory off and on, reset with the typed slug, a bulk
approve, and screenshots of the main pages at 1280 and 390 px."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Trust

from ..dashboard.conftest import day_log_yesterday, save_fact, write_note, write_notes
from .conftest import SCREENSHOTS, SKIP_REASON, TIMEOUT_MS, axe_violations

expect = pytest.importorskip("playwright.sync_api", reason=SKIP_REASON).expect

pytestmark = pytest.mark.django_db(transaction=True)

SLUG = "acme-web"


def row(page, note):
    return page.page.locator(f"#note-{note.pk}")


def toast(page, level="success"):
    return page.page.locator(f"#toasts .toast.{level}").last


def test_log_in_and_out(world, open_page):
    page = open_page()
    page.goto("/p/acme-web/")
    expect(page.page.locator("h1")).to_have_text("Log in")
    page.page.fill("#id_username", world.manager.username)
    page.page.fill("#id_password", "wrong password")
    page.page.click("button[type=submit]")
    expect(page.page.locator(".error")).to_contain_text("Please enter a correct username")
    page.page.fill("#id_username", world.manager.username)
    page.page.fill("#id_password", "pw-12345!")
    page.page.click("button[type=submit]")
    expect(page.page.locator("h1")).to_contain_text("Acme Web")  # back where it was going
    page.page.click("text=Log out")
    expect(page.page.locator("h1")).to_have_text("Log in")
    assert page.errors == []


def test_veto_a_note_and_undo_it(world, open_page):
    note = write_note(world, "The search index rebuilds nightly")
    page = open_page(world.member)
    page.goto("/p/acme-web/")
    row(page, note).get_by_role("button", name="Veto").click()
    expect(row(page, note)).to_contain_text("Vetoed")
    expect(row(page, note).get_by_role("button", name="Undo")).to_be_visible()
    expect(toast(page)).to_contain_text("Vetoed")
    assert Note.objects.get(pk=note.pk).is_vetoed
    expect(page.page.locator("#project-counts")).to_contain_text("Archived 1")
    expect(page.page.locator("#awaiting-pill")).to_have_text("")  # the tab's count follows
    row(page, note).get_by_role("button", name="Undo").click()
    expect(row(page, note).get_by_role("button", name="Veto")).to_be_visible()
    assert Note.objects.get(pk=note.pk).status == "active"
    assert page.errors == []


def test_forget_and_restore(world, open_page):
    note = write_note(world, "The old cron host is cron-2")
    page = open_page(world.manager)
    page.goto("/p/acme-web/")
    row(page, note).locator("[data-panel]", has_text="More").click()
    row(page, note).get_by_role("button", name="Forget note").click()
    expect(row(page, note)).to_contain_text("Forgotten")
    assert Note.objects.get(pk=note.pk).status == "forgotten"
    # Clicked while the toast shows: the page's only row, at its foot, is scrolled clear of
    # it (the page gets room below its last row while a toast shows).
    row(page, note).get_by_role("button", name="Restore").click()
    expect(row(page, note).get_by_role("button", name="Veto")).to_be_visible()
    assert Note.objects.get(pk=note.pk).status == "active"
    # The same from the recoveries page.
    recovery = services.note_forget(actor=world.as_manager, note_id=note.pk)
    page.goto("/p/acme-web/recoveries/")
    page.page.locator(f"#recovery-{recovery.pk}").get_by_role("button", name="Restore").click()
    expect(page.page.locator(f"#recovery-{recovery.pk}")).to_contain_text("Restored")
    assert Note.objects.get(pk=note.pk).status == "active"
    assert page.errors == []


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_review_queue_keeps_pace(world, open_page, width):
    """A handled row leaves its section, the highlight and the focus move to the next note,
    the section's and the header's counts change in the same answer, the toast names the note
    and carries Undo; Enter opens a note and ? lists the keys."""
    first, second, third = write_notes(world, 3, prefix="Queue")
    page = open_page(world.manager, width)
    page.goto("/p/acme-web/review/")
    learned = page.page.locator("#queue-learned")
    count = page.page.locator("#queue-learned-count")
    expect(count).to_have_text("3")
    page.page.keyboard.press("j")
    expect(row(page, first)).to_have_attribute("aria-current", "true")
    page.page.keyboard.press("a")
    expect(toast(page)).to_contain_text("Approved “Queue number 0 about the deploy”")
    expect(row(page, first)).to_have_count(0)
    expect(count).to_have_text("2")
    expect(page.page.locator("#awaiting-pill")).to_have_text("2")
    expect(row(page, second)).to_have_attribute("aria-current", "true")
    expect(row(page, second)).to_be_focused()
    assert Note.objects.get(pk=first.pk).trust == Trust.REVIEWED

    page.page.keyboard.press("v")
    vetoed = toast(page)
    expect(vetoed).to_contain_text("Vetoed “Queue number 1 about the deploy”")
    expect(row(page, third)).to_be_focused()
    vetoed.hover()  # a toast stays while the pointer is on it
    expect(row(page, second)).to_have_count(0)
    expect(count).to_have_text("1")
    assert Note.objects.get(pk=second.pk).is_vetoed
    vetoed.get_by_role("button", name="Undo").click()
    expect(row(page, second)).to_be_visible()  # back in its section (the page is drawn again)
    expect(learned.locator("tr.note-row")).to_have_count(2)
    assert not Note.objects.get(pk=second.pk).is_vetoed

    page.page.keyboard.press("?")
    expect(page.page.locator("#keys-dialog")).to_be_visible()
    expect(page.page.locator("#keys-dialog")).to_contain_text("open the highlighted note")
    page.page.keyboard.press("Escape")
    expect(page.page.locator("#keys-dialog")).to_be_hidden()
    page.page.keyboard.press("j")
    expect(row(page, second)).to_have_attribute("aria-current", "true")
    page.page.keyboard.press("Enter")
    expect(page.page).to_have_url(re.compile(rf"/p/acme-web/notes/{second.pk}/(\?from=.*)?$"))
    assert page.errors == []


def test_ten_decisions_one_toast_one_count_and_undo_of_an_approve(world, open_page):
    """The queue's count, the tab's pill and the header's counter are one number after each
    of ten decisions; one toast shows at a time; an approve's toast undoes it."""
    notes = write_notes(world, 12, prefix="Decided")
    page = open_page(world.manager)
    page.goto("/p/acme-web/review/")
    counts = ["#queue-learned-count", "#awaiting-pill", "#awaiting-count"]
    page.page.keyboard.press("j")
    for i in range(10):
        page.page.keyboard.press("a" if i % 2 else "r")
        for selector in counts:
            expect(page.page.locator(selector)).to_have_text(str(11 - i))
        expect(page.page.locator("#toasts .toast")).to_have_count(1)
    assert MemorySetting.objects.get(project=world.project).notes_awaiting == 2
    approved = toast(page)
    expect(approved).to_contain_text("Approved")
    approved.get_by_role("button", name="Undo").click()
    expect(page.page.locator("#queue-learned-count")).to_have_text("3")  # the page drawn again
    for selector in counts[1:]:
        expect(page.page.locator(selector)).to_have_text("3")
    assert Note.objects.get(pk=notes[9].pk).trust == Trust.LEARNED
    assert AuditEvent.objects.filter(project=world.project).latest("id").action == "note.unreview"
    assert page.errors == []


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_toast_never_covers_the_row_in_hand(world, open_page, width):
    """The next note, focused after a row action, is scrolled clear of the toasts."""
    write_notes(world, 12, prefix="Deep queue")
    page = open_page(world.manager, width)
    page.goto("/p/acme-web/review/")
    for _ in range(6 if width == "phone" else 12):
        page.page.keyboard.press("j")
    page.page.keyboard.press("a")
    expect(toast(page)).to_contain_text("Approved")
    focused = page.page.locator("tr.note-row:focus")
    expect(focused).to_have_count(1)
    toast(page).hover()  # it stays while measured
    page.page.wait_for_timeout(300)  # the scroll after the swap has settled
    row_box, toast_box = focused.bounding_box(), toast(page).bounding_box()
    apart = (
        row_box["y"] + row_box["height"] <= toast_box["y"]
        or toast_box["y"] + toast_box["height"] <= row_box["y"]
        or row_box["x"] + row_box["width"] <= toast_box["x"]
    )
    assert apart, (row_box, toast_box)


def test_disable_and_enable_memory(world, open_page):
    """The header's Memory pill leads to Settings, where the switch is; both redraw."""
    page = open_page(world.manager)
    page.goto("/p/acme-web/")
    page.page.locator("#project-counts a.switch").click()
    expect(page.page).to_have_url(re.compile(r"/p/acme-web/settings/#memory$"))
    page.page.get_by_role("button", name="Disable memory").click()
    expect(page.page.locator("#memory")).to_contain_text("refused every memory call")
    expect(page.page.locator("#project-counts .switch")).to_contain_text("Off")
    expect(toast(page)).to_contain_text("Memory disabled")
    assert not MemorySetting.objects.get(project=world.project).enabled
    page.page.get_by_role("button", name="Enable memory").click()
    expect(page.page.locator("#memory")).to_contain_text("offered memory tools")
    expect(page.page.locator("#project-counts .switch")).to_contain_text("On")
    assert MemorySetting.objects.get(project=world.project).enabled
    assert page.errors == []


def test_reset_with_the_typed_slug(world, open_page):
    write_notes(world, 4)
    page = open_page(world.manager)
    page.goto("/p/acme-web/settings/")
    page.page.locator("#memory .danger-zone summary").click()
    button = page.page.get_by_role("button", name="Reset memory of acme-web")
    expect(button).to_be_disabled()
    page.page.fill("#confirm-slug", "acme")
    expect(button).to_be_disabled()
    page.page.fill("#confirm-slug", SLUG)
    expect(button).to_be_enabled()
    button.click()
    expect(page.page.locator(".messages")).to_contain_text("deleted 4 notes")
    expect(page.page.locator("#project-counts")).to_contain_text("0 / ")
    page.goto("/p/acme-web/")
    expect(page.page.locator(".notes-table")).to_contain_text("No notes yet")
    assert not Note.objects.exists()
    assert page.errors == []


def test_bulk_approve(world, open_page):
    notes = write_notes(world, 3, prefix="Bulk")
    page = open_page(world.manager)
    page.goto("/p/acme-web/")
    for note in notes[:2]:
        row(page, note).locator("input[name=ids]").check()
    expect(page.page.locator("[data-bulk-count]")).to_have_text("2 selected")
    page.page.select_option("#bulk-action", "approve")
    page.page.locator("#bulk-form").get_by_role("button", name="Apply").click()
    expect(row(page, notes[0])).to_contain_text("Reviewed")
    expect(row(page, notes[1])).to_contain_text("Reviewed")
    expect(toast(page)).to_contain_text("2 of 2")
    assert Note.objects.get(pk=notes[2].pk).trust == Trust.LEARNED
    assert page.errors == []


def test_row_actions_work_without_javascript(world, open_page):
    """A row's buttons post the page's one form to their own URL, and its "More" is a link to
    the note's page, which has the forms: every action works with JavaScript off."""
    note, other = write_notes(world, 2, prefix="Plain")
    page = open_page(world.manager, javascript=False)
    page.goto("/p/acme-web/?q=Plain")
    row(page, note).get_by_role("button", name="Veto").click()
    expect(page.page).to_have_url(f"{page.base_url}/p/acme-web/?q=Plain")  # back where it was
    expect(row(page, note).get_by_role("button", name="Undo")).to_be_visible()
    assert Note.objects.get(pk=note.pk).is_vetoed
    row(page, other).screenshot(path=str(SCREENSHOTS / "row-without-javascript.png"))
    row(page, other).get_by_role("link", name="More").click()  # the note's page, with the forms
    expect(page.page).to_have_url(re.compile(rf"/p/acme-web/notes/{other.pk}/(\?from=.*)?$"))
    page.page.get_by_label("Archive with a reason").fill("Done with it")
    page.page.get_by_role("button", name="Archive", exact=True).click()
    assert Note.objects.get(pk=other.pk).status == "archived"


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_edit_and_archive_from_a_row(world, open_page, width):
    """The "More" panel is loaded when it is opened, the edit field focused."""
    fact = save_fact(world, "Reports read from the primary")
    page = open_page(world.member, width)
    page.goto("/p/acme-web/")
    row(page, fact).locator("[data-panel]", has_text="More").click()
    expect(row(page, fact).locator("textarea")).to_be_focused()
    expect(row(page, fact).locator("textarea")).to_have_value("Reports read from the primary")
    row(page, fact).screenshot(path=str(SCREENSHOTS / f"row-edit-panel-{width}.png"))
    row(page, fact).locator("textarea").fill("Reports read from the replica")
    row(page, fact).get_by_role("button", name="Save edit").click()
    expect(row(page, fact)).to_contain_text("superseded by")
    new = Note.objects.get(supersedes=fact)
    expect(row(page, new)).to_contain_text("Reports read from the replica")
    row(page, new).locator("[data-panel]", has_text="More").click()
    row(page, new).locator("input[name=reason]").fill("Replica retired")
    row(page, new).get_by_role("button", name="Archive note").click()
    expect(row(page, new)).to_contain_text("Replica retired")
    assert page.errors == []


def test_a_refusal_shows_a_toast_and_keeps_the_row(world, open_page):
    note = write_note(world, "Rows stay put when refused")
    page = open_page(world.member)
    page.goto("/p/acme-web/")
    row(page, note).locator("[data-panel]", has_text="More").click()
    row(page, note).locator("textarea").fill("token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    row(page, note).get_by_role("button", name="Save edit").click()
    expect(toast(page, "error")).to_contain_text("secret")
    expect(row(page, note)).to_contain_text("Rows stay put when refused")
    assert page.errors == []


def test_works_without_javascript(world, browser, live_server):
    from django.test import Client

    note = write_note(world, "No script needed")
    client = Client()
    client.force_login(world.member)
    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(TIMEOUT_MS)
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page = context.new_page()
    page.goto(live_server.url + "/p/acme-web/?q=script")
    page.locator(f"#note-{note.pk}").get_by_role("button", name="Veto").click()
    expect(page.locator(".messages")).to_contain_text("Vetoed")
    assert page.url.endswith("/p/acme-web/?q=script")
    assert Note.objects.get(pk=note.pk).is_vetoed
    context.close()


def page_screenshot_path(name: str):
    from .conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


PAGES = [
    ("projects", "/"),
    ("overview", "/p/acme-web/overview/"),
    ("project-memory", "/p/acme-web/"),
    ("connect", "/p/acme-web/connect/"),
    ("api-tokens", "/tokens/"),
    ("review-queue", "/p/acme-web/review/"),
    ("members", "/p/acme-web/members/"),
    ("recoveries", "/p/acme-web/recoveries/"),
    ("agents", "/p/acme-web/agents/"),
    ("runs", "/p/acme-web/runs/"),
    ("audit-log", "/audit/?project=acme-web"),
]


def table_overflow(page) -> int:
    """How far the page's notes table is wider than its box (> 0: scrolled sideways)."""
    return page.page.evaluate(
        "(() => { const w = document.querySelector('.table-wrap');"
        " return w.scrollWidth - w.clientWidth; })()"
    )


def test_screenshots_of_the_main_pages(open_page, settings, tmp_path, monkeypatch):
    """The demo data set, as a person sees it, at 1280 and 390 px (tests/browser/screenshots/,
    git-ignored). Also asserts no console error (a CSP violation would be one) and no axe-core
    violation on any page."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from memory_portal.memory.models import Agent, Run

    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("DEMO_PASSWORD", "demo-password-for-screenshots")
    call_command("memory_demo", stdout=open(tmp_path / "demo.log", "w"))  # noqa: SIM115
    demo = get_user_model().objects.get(username="demo")
    agent = Agent.objects.filter(project__slug=SLUG, own_notes__kind="day").first()
    run = Run.objects.filter(project__slug=SLUG, tool_call_counts__isnull=False).first()
    note = Note.objects.filter(project__slug=SLUG, supersedes__isnull=False).first()
    pages = [
        *PAGES,
        ("note", f"/p/acme-web/notes/{note.pk}/"),
        ("agent", f"/p/acme-web/agents/{agent.pk}/"),
        ("run", f"/p/acme-web/runs/{run.pk}/"),
    ]
    for width, dark in (("desktop", False), ("phone", False), ("desktop", True), ("phone", True)):
        page = open_page(demo, width, dark=dark)
        for name, path in pages:
            response = page.goto(path)
            assert response.status == 200, path
            px = page.page.viewport_size["width"]
            if dark:  # the dark theme: every page's first screen, looked at and checked
                page.screenshot(f"{name}-{px}-dark", full_page=False)
                assert not axe_violations(page.page), (name, px, "dark", axe_violations(page.page))
                continue
            # On a phone every table row is a card: the first screens say how it reads, and
            # a full page of 50 cards would only slow the suite down.
            page.screenshot(f"{name}-{px}", full_page=width == "desktop")
            assert not axe_violations(page.page), (name, px, axe_violations(page.page))
            if width == "desktop" and page.page.locator(".notes-table").count():
                # At 1280 px the notes table fits: its sticky Actions column hides nothing,
                # also with a row's "More" panel open (it reaches left over the row's cells).
                assert table_overflow(page) <= 0, (name, table_overflow(page))
                if name == "project-memory":
                    page.page.locator("tr.note-row [data-panel]").first.click()
                    expect(page.page.locator("details.popover[open] .panel").first).to_be_visible()
                    page.screenshot(f"{name}-more-{px}")
                    assert table_overflow(page) <= 0, (name, "More", table_overflow(page))
            if width == "phone" and page.page.locator("tr.note-row").count():
                page.page.locator("tr.note-row").first.screenshot(
                    path=str(page_screenshot_path(f"{name}-{px}-row"))
                )
        if dark:
            assert page.errors == []
            continue
        if width == "desktop":
            search_by_meaning(page)
        login = open_page(None, width)
        login.goto("/login/")
        login.screenshot(f"login-{login.page.viewport_size['width']}")
        assert not axe_violations(login.page)
        assert page.errors == [] and login.errors == []


def test_a_note_opened_from_the_queue_steps_and_decides_with_keys(world, open_page):
    """Enter opens the highlighted note with its place in the queue; a approves it and shows
    the next note; k goes back to the approved one; the back link returns to the queue."""
    notes = write_notes(world, 3, prefix="Step")  # the queue: oldest first
    page = open_page(world.manager)
    page.goto("/p/acme-web/review/")
    page.page.keyboard.press("j")
    page.page.keyboard.press("Enter")
    steps = page.page.locator(".note-steps")
    expect(steps).to_contain_text("1 of 3")
    expect(page.page.locator(".page-head code")).to_have_text(notes[0].pk)
    page.page.keyboard.press("a")
    expect(page.page.locator(".page-head code")).to_have_text(notes[1].pk)
    expect(steps).to_contain_text("1 of 2")  # the approved note left the learned section
    assert Note.objects.get(pk=notes[0].pk).trust == Trust.REVIEWED
    page.page.keyboard.press("j")
    expect(page.page.locator(".page-head code")).to_have_text(notes[2].pk)
    page.page.keyboard.press("k")
    expect(page.page.locator(".page-head code")).to_have_text(notes[1].pk)
    steps.get_by_role("link", name="Review queue").click()
    expect(page.page).to_have_url(f"{page.base_url}/p/acme-web/review/")
    assert page.errors == []


def test_a_reject_with_a_reason_shows_it_on_the_note_and_to_its_agent(world, open_page):
    from memory_portal.api.serializers import entry

    note = write_note(world, "The staging database listens on 5433")
    page = open_page(world.manager)
    page.goto(f"/p/acme-web/notes/{note.pk}/")
    page.page.locator(".reason-form summary").click()
    page.page.locator("#decision-reason").fill("Staging moved to 5432 in May")
    page.page.get_by_role("button", name="Reject with this reason").click()
    expect(page.page.locator(".decision-reason")).to_have_text(
        "Rejected because: Staging moved to 5432 in May"
    )
    expect(page.page.locator("#audit-history, .note-page")).to_contain_text(
        "reason: Staging moved to 5432 in May"
    )
    page.goto("/p/acme-web/?trust=rejected")
    expect(row(page, note)).to_contain_text("“Staging moved to 5432 in May”")
    served = entry(Note.objects.get(pk=note.pk))  # what memory_read answers its agent
    assert served["trust"] == "rejected"
    assert served["reviewReason"] == "Staging moved to 5432 in May"
    assert page.errors == []


# Three ways a manager asked for the demo's note on preview environments, none in its words.
PARAPHRASES = [
    "how long do preview environments live",
    "preview env deleted after three days idle",
    "when do staging previews get cleaned up",
]


def search_by_meaning(page) -> None:
    """Typed into the notes table's search box as a person types (the table follows after a
    pause, no button pressed), each paraphrase puts a note on preview environments' 72 hours
    first; the URL keeps the search."""
    targets = Note.objects.filter(
        project__slug=SLUG, content__contains="deleted after 72 hours without a push"
    ).values_list("pk", flat=True)
    first = re.compile("^note-(" + "|".join(targets) + ")$")
    page.goto("/p/acme-web/")
    box = page.page.locator("#id_q")
    for query in PARAPHRASES:
        box.fill("")
        box.press_sequentially(query, delay=15)
        page.page.wait_for_url(lambda url, q=query: parse_qs(urlparse(url).query).get("q") == [q])
        expect(page.page.locator("tr.note-row").first).to_have_attribute("id", first)
    page.screenshot("search-by-meaning-1280")


def test_review_queue_lifts_a_day_line(world, open_page):
    day_log_yesterday(world, ["tried the new cache flags"])
    page = open_page(world.member)
    page.goto("/p/acme-web/review/")
    page.page.get_by_role("button", name="Lift into a fact").click()
    expect(toast(page)).to_contain_text("as a fact of Runtime helper")
    expect(page.page.locator(".day-line")).to_contain_text("Fact")
    assert Note.objects.filter(kind="fact", content="PIN-42 tried the new cache flags").exists()
    assert page.errors == []


def test_recall_preview_and_run_the_daily_review(world, open_page):
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN switched on")
    services.fact_save(actor=world.as_agent, text="Ana prefers squash merges on billing")
    page = open_page(world.member)
    page.goto(f"/p/acme-web/agents/{world.agent.pk}/")
    page.page.fill("#recall-query", "deploy to staging")
    page.page.get_by_role("button", name="Preview recall").click()
    result = page.page.locator("#recall-result")
    expect(result).to_contain_text("VPN switched on")
    expect(result).not_to_contain_text("squash")
    page.page.get_by_role("button", name="Run now").click()
    expect(page.page.locator("#routine")).to_contain_text("manual")
    expect(page.page.locator("#routine")).to_contain_text("succeeded")
    assert page.errors == []


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_recall_preview_shows_both_tiers(world, open_page, width):
    """The confident tier, then "Possibly related (lower confidence)", each fact with its
    score; at both widths nothing scrolls sideways and axe finds nothing."""
    for text in (
        "The staging deploy needs the VPN on; without it the helm upgrade times out.",
        "Celery workers ship in their own chart and must be restarted after any change.",
        "The readiness probe also checks Redis: with Redis down the pods never become ready.",
        "Ana prefers squash merges on the billing repo.",
    ):
        services.fact_save(actor=world.as_agent, text=text)
    page = open_page(world.member, width)
    page.goto(f"/p/acme-web/agents/{world.agent.pk}/")
    page.page.fill("#recall-query", "Our pre-live shipment job sits idle for ages and then aborts")
    page.page.get_by_role("button", name="Preview recall").click()
    result = page.page.locator("#recall-result")
    expect(result).to_contain_text("Possibly related (lower confidence)")
    expect(result.locator("table").last).to_contain_text("Celery workers")
    result.scroll_into_view_if_needed()
    page.screenshot(f"recall-preview-tiers-{width}")
    result.screenshot(path=str(SCREENSHOTS / f"recall-preview-tiers-{width}-card.png"))
    assert page.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert axe_violations(page.page) == []
    assert page.errors == []


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_recall_preview_does_not_take_a_shared_name_for_a_subject(world, open_page, width):
    """A question about Maya's vacation gets the release rule Maya signs off only as possibly
    related; a question about a Friday deploy gets it as a memory (docs/RECALL.md, "The hybrid
    score")."""
    rule = "Production releases only go out Tuesday to Thursday. A Friday deploy needs Maya's OK."
    for text in (
        rule,
        "The staging deploy needs the VPN on; without it the helm upgrade times out.",
        "Celery workers ship in their own chart and must be restarted after any change.",
        "Ana prefers squash merges on the billing repo.",
    ):
        services.fact_save(actor=world.as_agent, text=text)
    page = open_page(world.member, width)
    page.goto(f"/p/acme-web/agents/{world.agent.pk}/")
    result = page.page.locator("#recall-result")
    page.page.fill("#recall-query", "How many vacation days does Maya have left?")
    page.page.get_by_role("button", name="Preview recall").click()
    expect(result).to_contain_text("No fact of")
    expect(result).to_contain_text("Possibly related (lower confidence)")
    expect(result.locator("table")).to_have_count(1)
    expect(result.locator("table")).to_contain_text("Maya's OK")
    result.scroll_into_view_if_needed()
    page.screenshot(f"recall-preview-name-{width}")
    result.screenshot(path=str(SCREENSHOTS / f"recall-preview-name-{width}-card.png"))
    page.page.fill("#recall-query", "Can I deploy on Friday without asking Maya?")
    page.page.get_by_role("button", name="Preview recall").click()
    expect(result).not_to_contain_text("No fact of")
    expect(result.locator("table").first).to_contain_text("Maya's OK")
    assert page.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.errors == []


def test_no_keyboard_box_on_a_touch_screen(world, browser, live_server):
    """The review queue's keyboard box is for keyboards: a touch phone does not show it."""
    from django.test import Client

    client = Client()
    client.force_login(world.manager)
    for touch, visible in ((True, False), (False, True)):
        context = browser.new_context(
            viewport={"width": 390, "height": 844}, has_touch=touch, is_mobile=touch
        )
        cookie = {"name": "sessionid", "value": client.cookies["sessionid"].value}
        context.add_cookies([{**cookie, "url": live_server.url}])
        page = context.new_page()
        page.goto(f"{live_server.url}/p/acme-web/review/")
        assert page.locator(".shortcuts").is_visible() == visible
        context.close()


def test_a_bulk_veto_asks_with_the_count_and_its_toast_undoes_it(world, open_page):
    notes = write_notes(world, 3, prefix="Bulk")
    page = open_page(world.manager)
    asked: list[str] = []
    page.page.on("dialog", lambda dialog: asked.append(dialog.message))
    page.goto("/p/acme-web/")
    for note in notes[:2]:
        row(page, note).locator('input[name="ids"]').check()
    page.page.select_option("#bulk-action", "veto")
    page.page.get_by_role("button", name="Apply").click()
    done = toast(page)
    expect(done).to_contain_text("Veto: 2 of 2 notes.")
    assert asked and asked[0].startswith("Veto 2 notes?")
    expect(row(page, notes[0])).to_contain_text("Vetoed")
    assert all(Note.objects.get(pk=n.pk).is_vetoed for n in notes[:2])
    done.get_by_role("button", name="Undo").click()
    expect(row(page, notes[0])).not_to_contain_text("Vetoed")
    expect(row(page, notes[1])).not_to_contain_text("Vetoed")
    assert not any(Note.objects.get(pk=n.pk).is_vetoed for n in notes)
    assert page.errors == []


PHONE_PAGES = ["/p/acme-web/", "/p/acme-web/overview/", "/p/acme-web/review/",
               "/p/acme-web/connect/", "/tokens/", "/p/acme-web/agents/", "/audit/"]  # fmt: skip


def test_phones_tap_select_and_never_scroll_sideways(world, open_page):
    notes = write_notes(world, 4, prefix="Phone")
    page = open_page(world.manager, "phone")
    for path in PHONE_PAGES:
        page.goto(path)
        wide = page.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 0, (path, wide)
    page.goto("/p/acme-web/")
    box = row(page, notes[0]).locator('input[name="ids"]').bounding_box()
    assert box["width"] >= 24 and box["height"] >= 24
    # The header folds into one row and the tabs into another: the first note is on the first
    # screen, its top and its verbs.
    first = page.page.locator("tr.note-row").first.bounding_box()
    assert first["y"] + 120 <= page.page.viewport_size["height"], first
    select_all = page.page.locator(".select-page input")
    expect(select_all).to_be_visible()
    select_all.check()
    expect(page.page.locator(".bulk-bar [data-bulk-count]")).to_have_text("4 selected")
    page.page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    bar = page.page.locator(".bulk-bar").bounding_box()  # at hand at the end of the list too
    assert bar["y"] >= 0 and bar["y"] + bar["height"] <= page.page.viewport_size["height"]
    assert page.errors == []


def test_a_phone_taps_five_checkboxes_and_bulk_approves_them(world, open_page):
    """A finger on a card's checkbox ticks it (the id cell beside it painted over it and took
    the tap), the bar counts them, and a bulk approve reaches all five."""
    notes = write_notes(world, 6, prefix="Tapped")
    page = open_page(world.manager, "phone", touch=True)
    page.goto("/p/acme-web/")
    for note in notes[:5]:
        box = row(page, note).locator('input[name="ids"]')
        box.scroll_into_view_if_needed()
        box.tap()
        expect(box).to_be_checked()
    expect(page.page.locator(".bulk-bar [data-bulk-count]")).to_have_text("5 selected")
    expect(row(page, notes[5]).locator('input[name="ids"]')).not_to_be_checked()
    page.page.select_option("#bulk-action", "approve")
    page.page.locator(".bulk-bar").get_by_role("button", name="Apply").tap()
    expect(toast(page)).to_contain_text("Approve: 5 of 5 notes.")
    page.screenshot("notes-tapped-phone", full_page=False)
    assert [Note.objects.get(pk=n.pk).trust for n in notes] == [Trust.REVIEWED] * 5 + [
        Trust.LEARNED
    ]
    assert page.errors == []


def test_x_selects_the_highlighted_note_and_shift_click_a_range(world, open_page):
    notes = write_notes(world, 6, prefix="Range")  # newest first on the page
    shown = list(reversed(notes))
    page = open_page(world.manager)
    page.goto("/p/acme-web/")
    count = page.page.locator(".bulk-bar [data-bulk-count]")
    page.page.keyboard.press("j")
    page.page.keyboard.press("x")
    expect(row(page, shown[0]).locator('input[name="ids"]')).to_be_checked()
    expect(count).to_have_text("1 selected")
    page.page.keyboard.press("x")  # again: unticked
    expect(count).to_have_text("Select notes for a bulk action")
    page.page.keyboard.press("x")
    row(page, shown[2]).locator('input[name="ids"]').click()
    row(page, shown[4]).locator('input[name="ids"]').click(modifiers=["Shift"])
    ticked = [row(page, n).locator('input[name="ids"]').is_checked() for n in shown]
    assert ticked == [True, False, True, True, True, False]
    expect(count).to_have_text("4 selected")
    row(page, shown[3]).locator('input[name="ids"]').click(modifiers=["Shift"])  # unticks 3..4
    ticked = [row(page, n).locator('input[name="ids"]').is_checked() for n in shown]
    assert ticked == [True, False, True, False, False, False]
    expect(count).to_have_text("2 selected")
    page.page.keyboard.press("?")
    expect(page.page.locator("#keys-dialog")).to_contain_text("select the note for a bulk action")
    assert page.errors == []


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_long_tags_wrap_inside_their_cell(world, open_page, width):
    """A tag as long as a tag may be (32 characters, no break) stays inside its cell: it
    neither runs over the next column nor past a phone's edge."""
    note = write_note(
        world, "Tags may be long.", tags=["lgk:506e228b12162b33dc434d03919a", "short"]
    )
    page = open_page(world.manager, width)
    page.goto("/p/acme-web/")
    cell = row(page, note).locator("td.c-tags")
    edge = cell.bounding_box()
    for tag in cell.locator(".tag").all():
        box = tag.bounding_box()
        assert box["x"] + box["width"] <= edge["x"] + edge["width"] + 0.5, (width, box, edge)
    assert edge["x"] + edge["width"] <= page.page.viewport_size["width"]
    page.screenshot(f"long-tags-{width}", full_page=False)


def test_the_notes_table_takes_the_same_keys(world, open_page):
    notes = write_notes(world, 3, prefix="Table")
    page = open_page(world.manager)
    page.goto("/p/acme-web/")
    page.page.keyboard.press("j")  # newest first: the last written
    expect(row(page, notes[2])).to_have_attribute("aria-current", "true")
    page.page.keyboard.press("v")
    expect(row(page, notes[2])).to_contain_text("Vetoed")  # redrawn in place
    expect(row(page, notes[1])).to_be_focused()  # and on to the next note
    expect(toast(page).get_by_role("button", name="Undo")).to_be_visible()
    assert Note.objects.get(pk=notes[2].pk).is_vetoed
    page.page.keyboard.press("Enter")
    expect(page.page).to_have_url(re.compile(rf"/p/acme-web/notes/{notes[1].pk}/(\?from=.*)?$"))
    assert page.errors == []


def test_search_agent_and_date_presets_above_the_table(world, open_page):
    write_note(world, "The cache warms before the deploy")
    write_note(world, "Nothing about it")
    page = open_page(world.member)
    page.goto("/p/acme-web/")
    page.page.get_by_role("searchbox", name="Search").fill("cache deploy")
    page.page.get_by_role("button", name="Search").click()
    expect(page.page.locator("tr.note-row")).to_have_count(1)
    expect(page.page.locator("tr.note-row mark")).to_have_count(2)
    page.page.get_by_role("link", name="Today").click()
    expect(page.page.get_by_role("link", name="Today")).to_have_attribute("aria-current", "true")
    expect(page.page.locator("tr.note-row")).to_have_count(1)  # the search is kept
    page.page.get_by_label("Agent").select_option(world.agent2.pk)
    page.page.get_by_role("button", name="Search").click()
    expect(page.page.locator("tr.note-row")).to_have_count(0)
    assert "created_from=" in page.page.url and "q=cache" in page.page.url
    assert page.errors == []
