"""The dashboard answers every bad input with a clear refusal, never a 500: bodies past the
upload limit, page numbers past any page, malformed ids in a bulk action, and log-in
fields that are not text."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from memory_portal.dashboard.views.base import SHOWN_MAX
from memory_portal.memory.models import AuditEvent, Note

from .conftest import HTMX, save_fact, write_notes

SLUG = "acme-web"


def test_a_form_body_past_the_limit_is_a_plain_413_page(world, manager_client):
    url = reverse("dashboard:agent-fact", args=[SLUG, world.agent.pk])
    body = "text=" + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = manager_client.post(url, data=body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    assert "too large" in response.content.decode().lower()
    assert not Note.objects.exists()


# --- Page numbers past any page -------------------------------------------------------------------


def paginated_pages(world, run_id: str) -> list[str]:
    return [
        reverse("dashboard:project", args=[SLUG]),
        reverse("dashboard:agent", args=[SLUG, world.agent.pk]),
        reverse("dashboard:runs", args=[SLUG]),
        reverse("dashboard:run", args=[SLUG, run_id]),
        reverse("dashboard:recoveries", args=[SLUG]),
        reverse("dashboard:audit"),
    ]


@pytest.mark.parametrize(
    "page", ["99999999999999999999", "-99999999999999999999", "-1", "0", "1e9", "abc", ""]
)
def test_every_paginated_page_clamps_the_page_number(world, manager_client, page):
    write_notes(world, 3)
    for url in paginated_pages(world, world.run.pk):
        response = manager_client.get(url, {"page": page, "per_page": "99999999999999999999"})
        assert response.status_code == 200, (url, page, response.status_code)


# --- Malformed ids in a bulk action ---------------------------------------------------------------


@pytest.mark.parametrize("bad", ["x\x00", "mem_\x00", "mem_" + "a" * 100_000, "'; --", "mem_é"])
@pytest.mark.parametrize("htmx", [False, True])
def test_a_bulk_action_with_a_malformed_id_is_refused_and_changes_nothing(
    world, manager_client, bad, htmx
):
    notes = write_notes(world, 2)
    before = AuditEvent.objects.count()
    response = manager_client.post(
        reverse("dashboard:notes-bulk", args=[SLUG]),
        {"action": "veto", "ids": [notes[0].pk, bad]},
        **(HTMX if htmx else {}),
    )
    if htmx:
        assert response.status_code == 200 and response["HX-Reswap"] == "none"
        toast = json.loads(response["HX-Trigger"])["toast"]
        assert toast["level"] == "error" and "not a note id" in toast["message"]
    else:
        assert response.status_code == 302
        message = " ".join(str(m) for m in get_messages(response.wsgi_request))
        assert "not a note id" in message
    assert set(Note.objects.values_list("status", flat=True)) == {"active"}
    assert AuditEvent.objects.count() == before


@pytest.mark.parametrize("htmx", [False, True])
def test_a_refusal_quoting_a_huge_value_stays_short(world, manager_client, htmx):
    """Django's choice error quotes the value sent; the toast (a response header) and the
    message show at most SHOWN_MAX characters of it (`make fuzz` met a 64 KB HX-Trigger)."""
    notes = write_notes(world, 1)
    response = manager_client.post(
        reverse("dashboard:notes-bulk", args=[SLUG]),
        {"action": "x" * 70_000, "ids": [notes[0].pk]},
        **(HTMX if htmx else {}),
    )
    if htmx:
        assert response.status_code == 200 and len(response["HX-Trigger"]) < 1000
        message = json.loads(response["HX-Trigger"])["toast"]["message"]
    else:
        assert response.status_code == 302
        message = " ".join(str(m) for m in get_messages(response.wsgi_request))
    assert message.startswith("Select a valid choice.") and len(message) == SHOWN_MAX
    assert message.endswith("…")
    assert Note.objects.get(pk=notes[0].pk).status == "active"


# --- The log-in form ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "username=a%00b&password=wrong",
        "username=ana&password=a%00b",
        "username=%ED%A0%80&password=wrong",
        "username=ana&password=%ED%A0%80",
        "username=" + "u" * 100_000 + "&password=wrong",
    ],
)
def test_login_with_fields_that_are_not_text_is_the_normal_error_page(world, body):
    response = Client().post(
        reverse("login"), data=body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    assert b"<form" in response.content


def test_the_agent_fact_form_refuses_what_is_not_text(world, manager_client):
    save_fact(world, "A first fact")  # the agent has a routine, so its page is complete
    url = reverse("dashboard:agent-fact", args=[SLUG, world.agent.pk])
    for body in ("text=a%00b", "text=%ED%A0%80"):
        response = manager_client.post(
            url, data=body, content_type="application/x-www-form-urlencoded"
        )
        assert response.status_code in {302, 400}, (body, response.status_code)
    assert all("\x00" not in text for text in Note.objects.values_list("content", flat=True))


# --- Where a form returns -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "next_url",
    ["471", "\\", "logout", "login", "//evil.example/", "http://x/", "/p/" + "x" * 3000],
)
def test_a_next_that_is_not_a_path_returns_to_the_project_page(world, manager_client, next_url):
    """`next` must be a path on this site: a bare word is not resolved as a URL name."""
    response = manager_client.post(
        reverse("dashboard:notes-bulk", args=[SLUG]), {"action": "veto", "next": next_url}
    )
    assert response.status_code == 302
    assert response.url == reverse("dashboard:project", args=[SLUG])
