"""Row, bulk and page actions: each is one service call with its audit event, works over
htmx (the row and the counters come back, a toast says what happened) and without
JavaScript (POST, then back to the same filtered page), and refuses what the role forbids."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, MemorySetting, Note, Recovery, Run, Trust

from .conftest import HTMX, day_log_yesterday, save_fact, write_note, write_notes

SLUG = "acme-web"
NEXT = "/p/acme-web/?trust=learned&sort=-created&page=1"


def post(client, name, *args, data=None, htmx=False):
    payload = {"next": NEXT, **(data or {})}
    extra = HTMX if htmx else {}
    return client.post(reverse(f"dashboard:{name}", args=[SLUG, *args]), payload, **extra)


def toast(response) -> dict:
    return json.loads(response["HX-Trigger"])["toast"]


def events(action: str):
    return AuditEvent.objects.filter(action=action)


@pytest.fixture
def note(world):
    return write_note(world, "Deploys go out on Tuesdays")


# --- htmx: the row swaps in place, the counters come along, a toast explains -----------------


def test_veto_over_htmx_says_vetoed_and_offers_undo(world, note, member_client):
    response = post(member_client, "note-veto", note.pk, htmx=True)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith(f'<tr id="note-{note.pk}"')
    assert "Vetoed" in html and ">Undo<" in html and ">Veto<" not in html
    assert 'id="project-counts"' in html and 'hx-swap-oob="true"' in html
    assert "<html" not in html  # only the row and the counters
    assert toast(response)["level"] == "success" and "Vetoed" in toast(response)["message"]
    assert events("note.veto").get().actor_user == world.member

    undone = post(member_client, "note-undo", note.pk, htmx=True)
    assert ">Veto<" in undone.content.decode() and "Vetoed" not in undone.content.decode()
    assert Note.objects.get(pk=note.pk).status == "active"
    assert events("note.undo").count() == 1


def test_forget_over_htmx_says_forgotten_and_offers_restore(world, note, manager_client):
    response = post(manager_client, "note-forget", note.pk, htmx=True)
    html = response.content.decode()
    recovery = Recovery.objects.get(note=note)
    assert "Forgotten" in html and ">Restore<" in html and recovery.pk in html
    assert events("note.forget").get().recovery_ref == recovery.pk

    restored = manager_client.post(
        reverse("dashboard:restore", args=[SLUG, recovery.pk]), {"next": NEXT}, **HTMX
    )
    assert ">Veto<" in restored.content.decode()
    assert Note.objects.get(pk=note.pk).status == "active"
    assert events("note.restore").get().recovery_ref == recovery.pk


def test_restore_from_the_recoveries_page_redraws_that_row(world, note, manager_client):
    recovery = services.note_forget(actor=world.as_manager, note_id=note.pk)
    response = manager_client.post(
        reverse("dashboard:restore", args=[SLUG, recovery.pk]),
        {"next": "/p/acme-web/recoveries/", "from": "recoveries"},
        **HTMX,
    )
    html = response.content.decode()
    assert html.lstrip().startswith(f'<tr id="recovery-{recovery.pk}"') and "Restored" in html
    assert 'id="project-counts"' in html


@pytest.mark.parametrize(
    ("verb", "action", "trust"),
    [
        ("note-approve", "note.approve", Trust.REVIEWED),
        ("note-reject", "note.reject", Trust.REJECTED),
    ],
)
def test_review_actions_over_htmx(world, note, manager_client, verb, action, trust):
    response = post(manager_client, verb, note.pk, htmx=True)
    assert response.status_code == 200
    assert Note.objects.get(pk=note.pk).trust == trust
    assert trust.label in response.content.decode()
    event = events(action).get()
    assert event.actor_user == world.manager and event.note_ref == note.pk


def test_archive_and_unarchive(world, note, member_client):
    refused = post(member_client, "note-archive", note.pk, data={"reason": ""}, htmx=True)
    assert toast(refused)["level"] == "error" and refused["HX-Reswap"] == "none"
    reserved = post(member_client, "note-archive", note.pk, data={"reason": "vetoed"}, htmx=True)
    assert (
        toast(reserved)["level"] == "error" and "set by Memory Portal" in toast(reserved)["message"]
    )
    response = post(member_client, "note-archive", note.pk, data={"reason": "Outdated"}, htmx=True)
    assert "Archived" in response.content.decode() and ">Unarchive<" in response.content.decode()
    assert Note.objects.get(pk=note.pk).archive_reason == "Outdated"
    assert events("note.archive").count() == 1
    post(member_client, "note-unarchive", note.pk, htmx=True)
    assert Note.objects.get(pk=note.pk).status == "active"
    assert events("note.unarchive").count() == 1


def test_edit_supersedes_and_returns_both_rows(world, member_client):
    old = save_fact(world, "The queue holds 100 jobs")
    response = post(
        member_client, "note-edit", old.pk, data={"content": "The queue holds 250 jobs"}, htmx=True
    )
    new = Note.objects.get(supersedes=old)
    html = response.content.decode()
    assert html.index(f'id="note-{new.pk}"') < html.index(f'id="note-{old.pk}"')
    assert "superseded by" in html
    assert new.created_by_user == world.member and new.content == "The queue holds 250 jobs"
    assert events("note.edit").get().note_ref == new.pk
    again = post(member_client, "note-edit", old.pk, data={"content": "Other text"}, htmx=True)
    assert toast(again)["level"] == "error"  # an archived note is not edited twice


def test_edit_refuses_a_secret_and_changes_nothing(world, note, member_client):
    before = AuditEvent.objects.count()
    response = post(
        member_client, "note-edit", note.pk, data={"content": "password=hunter2hunter2"}, htmx=True
    )
    assert toast(response)["level"] == "error"
    assert "secret" in toast(response)["message"] and toast(response)["hint"]
    assert "hunter2" not in response["HX-Trigger"]
    assert AuditEvent.objects.count() == before and Note.objects.count() == 1


def test_reverify_rebinds_stale_evidence(world, tmp_path, member_client):
    from tests.memory.test_evidence import QUOTE, README, commit_all, make_repo, write_files

    path, first = make_repo(tmp_path, {"README.md": README})
    repository = services.repository_create(actor=None, slug="svc", path=path)
    services.repository_link_set(
        actor=None, application=world.app, repository=repository, revision=first
    )
    note = write_note(
        world,
        "The handler is in README",
        evidence={"repositoryId": "svc", "path": "README.md", "quote": QUOTE},
    )
    write_files(tmp_path / "repo", {"other.txt": "more"})
    second = commit_all(tmp_path / "repo", "second")
    services.repository_link_set(
        actor=None, application=world.app, repository=repository, revision=second
    )
    url = reverse("dashboard:project", args=[SLUG])
    assert note.pk in member_client.get(url + "?evidence_stale=true").content.decode()
    response = post(member_client, "note-reverify", note.pk, htmx=True)
    assert "Stale" not in response.content.decode()
    assert Note.objects.get(pk=note.pk).evidence_commit == second
    assert events("note.reverify").count() == 1
    assert note.pk not in member_client.get(url + "?evidence_stale=true").content.decode()


# --- Without JavaScript: POST, then back to the same filtered page --------------------------


@pytest.mark.parametrize(
    ("persona", "verb", "data", "action"),
    [
        ("manager", "note-approve", {}, "note.approve"),
        ("manager", "note-reject", {}, "note.reject"),
        ("member", "note-veto", {}, "note.veto"),
        ("member", "note-archive", {"reason": "Old"}, "note.archive"),
        ("member", "note-edit", {"content": "Deploys go out on Wednesdays"}, "note.edit"),
        ("manager", "note-forget", {}, "note.forget"),
    ],
)
def test_every_note_action_works_without_javascript(world, note, persona, verb, data, action):
    from .conftest import client_for

    client = client_for(getattr(world, persona))
    response = post(client, verb, note.pk, data=data)
    assert response.status_code == 302 and response.url == NEXT
    assert events(action).count() == 1
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    # The note is named as a person reads it: its text (an edit names the new text).
    named = "Deploys go out on Wednesdays" if verb == "note-edit" else note.content
    assert messages and f"“{named}" in messages[0] and note.pk not in messages[0]


def test_undo_unarchive_restore_without_javascript(world, note, manager_client):
    services.note_veto(actor=world.as_manager, note_id=note.pk)
    assert post(manager_client, "note-undo", note.pk).url == NEXT
    services.note_archive(actor=world.as_manager, note_id=note.pk, reason="Later")
    assert post(manager_client, "note-unarchive", note.pk).url == NEXT
    recovery = services.note_forget(actor=world.as_manager, note_id=note.pk)
    response = manager_client.post(
        reverse("dashboard:restore", args=[SLUG, recovery.pk]), {"next": NEXT}
    )
    assert response.url == NEXT
    assert Note.objects.get(pk=note.pk).status == "active"
    actions = list(
        AuditEvent.objects.filter(note_ref=note.pk).order_by("id").values_list("action", flat=True)
    )
    assert actions[-6:] == [
        "note.veto",
        "note.undo",
        "note.archive",
        "note.unarchive",
        "note.forget",
        "note.restore",
    ]


def test_a_refusal_without_javascript_comes_back_as_a_message(world, note, member_client):
    response = post(member_client, "note-approve", note.pk)
    assert response.status_code == 302 and response.url == NEXT
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    assert "manager role" in messages[0] and "Ask a project manager" in messages[0]
    assert Note.objects.get(pk=note.pk).trust == Trust.LEARNED


@pytest.mark.parametrize(
    "bad_next", ["https://evil.example/", "//evil.example/x", "javascript:alert(1)"]
)
def test_next_never_leaves_the_site(world, note, member_client, bad_next):
    response = member_client.post(
        reverse("dashboard:note-veto", args=[SLUG, note.pk]), {"next": bad_next}
    )
    assert response.url == "/p/acme-web/"


# --- Permissions: members may not review, forget or restore; outsiders see nothing ----------


@pytest.mark.parametrize("verb", ["note-approve", "note-reject", "note-forget"])
def test_members_are_refused_manager_actions(world, note, member_client, verb):
    before = AuditEvent.objects.count()
    response = post(member_client, verb, note.pk, htmx=True)
    assert response.status_code == 200 and response["HX-Reswap"] == "none"
    assert toast(response)["level"] == "error"
    assert "manager" in toast(response)["message"] and toast(response)["hint"]
    assert AuditEvent.objects.count() == before
    assert Note.objects.get(pk=note.pk).status == "active"


def test_members_cannot_restore(world, note, member_client):
    recovery = services.note_forget(actor=world.as_manager, note_id=note.pk)
    response = member_client.post(
        reverse("dashboard:restore", args=[SLUG, recovery.pk]), {}, **HTMX
    )
    assert toast(response)["level"] == "error"
    assert Note.objects.get(pk=note.pk).status == "forgotten"


@pytest.mark.parametrize(
    ("verb", "data"),
    [
        ("note-approve", {}),
        ("note-reject", {}),
        ("note-veto", {}),
        ("note-undo", {}),
        ("note-archive", {"reason": "x"}),
        ("note-unarchive", {}),
        ("note-edit", {"content": "x"}),
        ("note-forget", {}),
        ("note-reverify", {}),
    ],
)
def test_outsiders_get_404_for_every_note_action(world, note, outsider_client, verb, data):
    before = AuditEvent.objects.count()
    assert post(outsider_client, verb, note.pk, data=data).status_code == 404
    assert post(outsider_client, verb, note.pk, data=data, htmx=True).status_code == 404
    assert AuditEvent.objects.count() == before


def test_outsiders_get_404_for_project_actions(world, note, outsider_client):
    recovery = services.note_forget(actor=world.as_manager, note_id=note.pk)
    urls = [
        (reverse("dashboard:restore", args=[SLUG, recovery.pk]), {}),
        (reverse("dashboard:notes-bulk", args=[SLUG]), {"action": "veto", "ids": [note.pk]}),
        (reverse("dashboard:memory-enable", args=[SLUG]), {}),
        (reverse("dashboard:memory-disable", args=[SLUG]), {}),
        (reverse("dashboard:memory-reset", args=[SLUG]), {"confirm_slug": SLUG}),
        (reverse("dashboard:agent-fact", args=[SLUG, world.agent.pk]), {"text": "x"}),
        (reverse("dashboard:lift", args=[SLUG]), {"note": note.pk, "line": 0}),
        (reverse("dashboard:run-delete", args=[SLUG, world.run.pk]), {"confirm": "on"}),
        (reverse("dashboard:run-status", args=[SLUG, world.run.pk]), {"status": "failed"}),
    ]
    for url, data in urls:
        assert outsider_client.post(url, data).status_code == 404, url
    assert Run.objects.filter(pk=world.run.pk).exists()
    assert Note.objects.filter(project=world.project).count() == 1


def test_get_is_not_allowed_on_action_urls(world, note, manager_client):
    assert (
        manager_client.get(reverse("dashboard:note-veto", args=[SLUG, note.pk])).status_code == 405
    )


# --- Bulk actions -----------------------------------------------------------------------------


def test_bulk_approve_over_htmx_returns_each_row_out_of_band(world, manager_client):
    notes = write_notes(world, 3)
    response = manager_client.post(
        reverse("dashboard:notes-bulk", args=[SLUG]),
        {"action": "approve", "ids": [n.pk for n in notes], "next": NEXT},
        **HTMX,
    )
    html = response.content.decode()
    assert all(re.search(rf'<template>\s*<tr id="note-{n.pk}"', html) for n in notes)
    assert html.count('hx-swap-oob="true"') == 5  # three rows, the counters, the tab's pill
    assert set(Note.objects.values_list("trust", flat=True)) == {Trust.REVIEWED}
    assert events("note.approve").count() == 3
    assert "3 of 3" in toast(response)["message"]


@pytest.mark.parametrize(
    "verb,action", [("reject", "note.reject"), ("veto", "note.veto"), ("forget", "note.forget")]
)
def test_bulk_actions_without_javascript(world, manager_client, verb, action):
    notes = write_notes(world, 2)
    response = manager_client.post(
        reverse("dashboard:notes-bulk", args=[SLUG]),
        {"action": verb, "ids": [n.pk for n in notes], "next": NEXT},
    )
    assert response.status_code == 302 and response.url == NEXT
    assert events(action).count() == 2


def test_bulk_reports_what_was_refused_and_does_the_rest(world, make_user, manager_client):
    from tests.conftest import build_world

    notes = write_notes(world, 2)
    services.note_veto(actor=world.as_manager, note_id=notes[1].pk)
    foreign = write_note(build_world(make_user, slug="far-web"), "Not here")
    response = manager_client.post(
        reverse("dashboard:notes-bulk", args=[SLUG]),
        {"action": "veto", "ids": [notes[0].pk, notes[1].pk, foreign.pk, "mem_nope"]},
        **HTMX,
    )
    message = toast(response)["message"]
    assert "2 of 4" in message and "not found" in message  # the vetoed one is already vetoed
    assert Note.objects.get(pk=foreign.pk).status == "active"
    assert toast(response)["level"] == "warning"


def test_bulk_needs_a_selection_and_members_cannot_bulk_approve(world, member_client):
    notes = write_notes(world, 2)
    url = reverse("dashboard:notes-bulk", args=[SLUG])
    empty = member_client.post(url, {"action": "veto"}, **HTMX)
    assert toast(empty)["level"] == "error" and "Select at least one" in toast(empty)["message"]
    refused = member_client.post(url, {"action": "approve", "ids": [n.pk for n in notes]}, **HTMX)
    assert toast(refused)["level"] == "error" and refused["HX-Reswap"] == "none"
    assert events("note.approve").count() == 0


# --- Memory switch and reset --------------------------------------------------------------------


def test_disable_and_enable_over_htmx(world, manager_client):
    response = post(manager_client, "memory-disable", htmx=True)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="memory"') and "Enable memory" in html
    setting = MemorySetting.objects.get(project=world.project)
    assert not setting.enabled and setting.revocation_epoch == 1
    assert events("memory.disable").get().actor_user == world.manager
    response = post(manager_client, "memory-enable", htmx=True)
    assert "Disable memory" in response.content.decode()
    assert MemorySetting.objects.get(project=world.project).enabled
    assert events("memory.enable").count() == 1


def test_disable_without_javascript_and_members_refused(world, manager_client, member_client):
    refused = post(member_client, "memory-disable")
    assert refused.status_code == 302
    assert MemorySetting.objects.get(project=world.project).enabled
    assert "manager" in [str(m) for m in get_messages(refused.wsgi_request)][0]
    assert post(manager_client, "memory-disable").url == NEXT
    assert not MemorySetting.objects.get(project=world.project).enabled


def test_reset_needs_the_typed_slug(world, manager_client, member_client):
    write_notes(world, 3)
    url = reverse("dashboard:memory-reset", args=[SLUG])
    wrong = manager_client.post(url, {"confirm_slug": "acme"})
    assert wrong.status_code == 302
    assert "Type acme-web exactly" in [str(m) for m in get_messages(wrong.wsgi_request)][0]
    assert Note.objects.count() == 3 and not events("memory.reset").exists()
    member = member_client.post(url, {"confirm_slug": SLUG})
    assert member.status_code == 302 and Note.objects.count() == 3
    done = manager_client.post(url, {"confirm_slug": SLUG})
    assert done.url == "/p/acme-web/settings/#memory"  # where the reset is
    assert Note.objects.count() == 0
    assert events("memory.reset").get().details["notes"] == 3
    assert MemorySetting.objects.get(project=world.project).enabled  # the switch keeps its state


# --- Agents, day logs and runs ------------------------------------------------------------------


def test_save_a_fact_for_an_agent(world, member_client):
    url = reverse("dashboard:agent-fact", args=[SLUG, world.agent.pk])
    response = member_client.post(url, {"text": "Prefer the read replica for reports"})
    assert response.url == reverse("dashboard:agent", args=[SLUG, world.agent.pk])
    fact = Note.objects.get(content="Prefer the read replica for reports")
    assert fact.owner_agent == world.agent and fact.created_by_user == world.member
    assert events("note.save").get().note_ref == fact.pk
    again = member_client.post(url, {"text": "Prefer the read replica for reports"})
    assert "already keeps" in [str(m) for m in get_messages(again.wsgi_request)][-1]


def test_saving_a_secret_fact_shows_the_error_on_the_form(world, member_client):
    url = reverse("dashboard:agent-fact", args=[SLUG, world.agent.pk])
    response = member_client.post(url, {"text": "api_key: sk-abcdefghijklmnopqrstuvwx"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "looks like a secret" in html and "sk-abcdef" not in html.split("</textarea>")[1]
    assert not Note.objects.exists()
    assert member_client.post(url, {"text": ""}).status_code == 400


def test_lift_a_day_line_into_a_fact(world, member_client):
    row = day_log_yesterday(world, ["checked the nightly export", "fact: exports are gzip"])
    url = reverse("dashboard:lift", args=[SLUG])
    response = member_client.post(
        url, {"note": row.pk, "line": 0, "next": "/p/acme-web/review/"}, **HTMX
    )
    fact = Note.objects.get(kind="fact", owner_agent=world.agent)
    assert fact.content == "PIN-42 checked the nightly export"
    assert (
        f'id="day-{row.pk}-0"' in response.content.decode()
        and fact.pk[-8:] in response.content.decode()
    )
    assert events("note.save").get().note_ref == fact.pk
    review = member_client.get(reverse("dashboard:review", args=[SLUG])).content.decode()
    assert review.count("Lift into a fact") == 1  # the lifted line now shows its fact
    plain = member_client.post(url, {"note": row.pk, "line": 1, "next": "/p/acme-web/review/"})
    assert plain.url == "/p/acme-web/review/"
    assert member_client.post(url, {"note": row.pk, "line": 9}).status_code == 302
    assert member_client.post(url, {"note": fact.pk, "line": 0}, **HTMX)["HX-Reswap"] == "none"


def test_delete_run_needs_confirmation_and_a_manager(world, member_client, manager_client):
    note = write_note(world, "Written in the run")
    url = reverse("dashboard:run-delete", args=[SLUG, world.run.pk])
    assert member_client.post(url, {"confirm": "on"}).status_code == 302
    assert Run.objects.filter(pk=world.run.pk).exists()
    unconfirmed = manager_client.post(url, {})
    assert unconfirmed.url == reverse("dashboard:run", args=[SLUG, world.run.pk])
    assert Run.objects.filter(pk=world.run.pk).exists()
    done = manager_client.post(url, {"confirm": "on"})
    assert done.url == reverse("dashboard:runs", args=[SLUG])
    assert not Run.objects.filter(pk=world.run.pk).exists()
    assert events("run.delete").get().target_ref == world.run.pk
    kept = Note.objects.get(pk=note.pk)
    assert kept.origin_run_ref == world.run.pk and kept.producer_status == "unknown"


def test_a_manager_finishes_a_run_and_corrects_its_status(world, member_client, manager_client):
    """A run nobody finished (a script that stopped) is finished from its page; its token
    stops at once and its notes show the status; a finished run's status can be corrected."""
    note = write_note(world, "Written in the run")
    _api_token, token = services.token_create(actor=None, run=world.run)
    run_page = reverse("dashboard:run", args=[SLUG, world.run.pk])
    url = reverse("dashboard:run-status", args=[SLUG, world.run.pk])
    assert "Finish as failed" not in member_client.get(run_page).content.decode()
    page = manager_client.get(run_page).content.decode()
    assert "Finish as succeeded" in page and f'action="{url}"' in page

    def token_works() -> bool:
        answer = manager_client.post(
            "/api/tools/memory_status",
            "{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        return answer.status_code == 200

    assert member_client.post(url, {"status": "failed"}).status_code == 302
    assert Run.objects.get(pk=world.run.pk).status == "running" and token_works()
    refused = manager_client.post(url, {"status": "running"})
    assert refused.url == run_page and Run.objects.get(pk=world.run.pk).status == "running"

    finished = manager_client.post(url, {"status": "failed"})
    assert finished.url == run_page
    assert "Finished run" in [str(m) for m in get_messages(finished.wsgi_request)][-1]
    assert Run.objects.get(pk=world.run.pk).status == "failed"
    assert Note.objects.get(pk=note.pk).producer_status == "failed"
    assert events("run.status").get().actor_user == world.manager
    assert not token_works()

    page = manager_client.get(run_page).content.decode()
    assert "Mark as succeeded" in page and "Finish as" not in page
    manager_client.post(url, {"status": "succeeded"})
    assert Run.objects.get(pk=world.run.pk).status == "succeeded"


def test_edit_of_a_reviewed_note_is_offered_to_managers_only(
    world, note, member_client, manager_client
):
    services.note_approve(actor=world.as_manager, note_id=note.pk)
    page = reverse("dashboard:project", args=[SLUG])
    edit_url = reverse("dashboard:note-edit", args=[SLUG, note.pk])

    def offers_edit(client) -> bool:  # in the row's "More" panel (loaded when opened)
        assert 'data-panel="more"' in client.get(page).content.decode()
        more = client.get(f"/p/{SLUG}/notes/{note.pk}/more/form/", HTTP_HX_REQUEST="true")
        return edit_url in more.content.decode()

    assert not offers_edit(member_client) and offers_edit(manager_client)
    note_page = reverse("dashboard:note", args=[SLUG, note.pk])
    assert edit_url not in member_client.get(note_page).content.decode()
    refused = post(member_client, "note-edit", note.pk, data={"content": "Other"}, htmx=True)
    assert toast(refused)["level"] == "error" and "manager" in toast(refused)["message"]
    assert Note.objects.get(pk=note.pk).status == "active" and not events("note.edit").exists()
    post(manager_client, "note-edit", note.pk, data={"content": "Deploys go out on Wednesdays"})
    assert Note.objects.get(pk=note.pk).superseded_by.content == "Deploys go out on Wednesdays"


# --- Load and authorise once: the service reads the note of the URL's project -------------


@pytest.mark.parametrize(
    "verb, data",
    [("note-veto", {}), ("note-approve", {}), ("note-edit", {"content": "x"}), ("note-forget", {})],
)
def test_a_note_of_another_project_is_not_found_even_for_its_manager(
    world, make_user, manager_client, verb, data
):
    from tests.conftest import build_world

    other = build_world(make_user, slug="payments")
    services.membership_set(actor=None, project=other.project, user=world.manager, role="manager")
    foreign = write_note(other, "Payouts batch at five past the hour")
    before = AuditEvent.objects.count()
    assert post(manager_client, verb, foreign.pk, data=data).status_code == 404
    assert post(manager_client, verb, foreign.pk, data=data, htmx=True).status_code == 404
    assert AuditEvent.objects.count() == before
    assert Note.objects.get(pk=foreign.pk).status == "active"


@pytest.mark.parametrize("verb, data", [("note-veto", {}), ("note-edit", {"content": "Later"})])
def test_the_redrawn_counters_show_the_counts_the_change_left(
    world, note, member_client, verb, data
):
    response = post(member_client, verb, note.pk, data=data, htmx=True)
    setting = MemorySetting.objects.get(project=world.project)
    counters = response.content.decode().split('id="project-counts"', 1)[1]
    assert f'<span class="value" id="awaiting-count">{setting.notes_awaiting}</span>' in counters
    assert f"Archived {setting.notes_archived}</span>" in counters


def test_a_reason_is_gated_like_every_text(world, note, manager_client):
    """A reject's or a veto's reason is one line without a secret: refused over htmx with an
    error toast, without JavaScript with a message; nothing changes."""
    secret = "deploy key ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for verb in ("note-reject", "note-veto"):
        refused = post(manager_client, verb, note.pk, data={"reason": secret}, htmx=True)
        assert toast(refused)["level"] == "error"
        plain = post(manager_client, verb, note.pk, data={"reason": "first\nsecond"})
        said = str(list(get_messages(plain.wsgi_request))[0])
        assert plain.status_code == 302 and "one line" in said
    kept = Note.objects.get(pk=note.pk)
    assert kept.trust == "learned" and not kept.is_vetoed
    done = post(manager_client, "note-veto", note.pk, data={"reason": "Says 8443; it is 443"})
    assert done.status_code == 302
    assert Note.objects.get(pk=note.pk).review_reason == "Says 8443; it is 443"
