"""The agent page's recall preview and daily-review controls."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, Note, ReviewRoutine, ReviewRun


@pytest.fixture
def agent_page(world):
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN switched on")
    services.fact_save(actor=world.as_agent, text="Ana prefers squash merges on billing")
    return reverse("dashboard:agent", args=["acme-web", world.agent.id])


def recall_url(world):
    return reverse("dashboard:agent-recall", args=["acme-web", world.agent.id])


def routine_url(world, verb):
    return reverse("dashboard:agent-routine", args=["acme-web", world.agent.id, verb])


def test_recall_preview_shows_picks_with_scores_and_counts_nothing(client, world, agent_page):
    client.force_login(world.member)
    page = client.get(recall_url(world), {"query": "deploy to staging"})
    html = page.content.decode()
    preview = html[html.index('id="recall-result"') : html.index('id="routine"')]
    assert page.status_code == 200 and "VPN switched on" in preview and "squash" not in preview
    assert "--- MEMORY ---" in preview
    fragment = client.get(recall_url(world), {"query": "deploy to staging"}, HTTP_HX_REQUEST="true")
    text = fragment.content.decode()
    assert "VPN switched on" in text and "squash" not in text and "<html" not in text
    assert Note.objects.filter(recall_count__gt=0).count() == 0


def test_recall_preview_shows_the_possibly_related_tier(client, world, agent_page, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}
    for text in (
        "Celery workers ship in their own chart and must be restarted after any change.",
        "The readiness probe also checks Redis: with Redis down the pods never become ready.",
    ):
        services.fact_save(actor=world.as_agent, text=text)
    client.force_login(world.member)
    query = "Our pre-live shipment job sits idle for ages and then aborts"
    html = client.get(recall_url(world), {"query": query}, HTTP_HX_REQUEST="true").content.decode()
    assert "No fact of" in html and "Possibly related (lower confidence)" in html
    assert "Celery workers ship" in html.split("Possibly related")[1]
    assert Note.objects.filter(recall_count__gt=0).count() == 0


def test_recall_preview_is_for_members_only(client, world, agent_page):
    client.force_login(world.outsider)
    assert client.get(recall_url(world), {"query": "deploy"}).status_code == 404


def test_agent_page_shows_the_routine(client, world, agent_page):
    client.force_login(world.member)
    html = client.get(agent_page).content.decode()
    assert "Memory dreaming" in html and "Run now" in html and "04:00 UTC" in html


def test_routine_controls(client, world, agent_page):
    client.force_login(world.member)
    response = client.post(routine_url(world, "pause"))
    assert response.status_code == 302 and response["Location"] == agent_page
    assert ReviewRoutine.objects.get(agent=world.agent).paused
    client.post(routine_url(world, "resume"))
    assert not ReviewRoutine.objects.get(agent=world.agent).paused
    client.post(routine_url(world, "run"))
    review = ReviewRun.objects.get()
    assert review.trigger == "manual" and review.status == "succeeded"
    html = client.get(agent_page).content.decode()
    assert "manual" in html and "succeeded" in html
    client.post(routine_url(world, "delete"))
    assert ReviewRoutine.objects.get(agent=world.agent).state == "deleted"
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "routine.pause",
        "routine.resume",
        "routine.run_now",
        "routine.run",
        "routine.delete",
    } <= actions


def test_routine_controls_refuse_outsiders_and_unknown_verbs(client, world, agent_page):
    client.force_login(world.outsider)
    assert client.post(routine_url(world, "pause")).status_code == 404
    client.force_login(world.member)
    assert client.post(routine_url(world, "explode")).status_code == 404
    assert not ReviewRoutine.objects.get(agent=world.agent).paused


def test_routine_controls_need_csrf(world, agent_page):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.member)
    assert strict.post(routine_url(world, "pause")).status_code == 403
    assert not ReviewRoutine.objects.get(agent=world.agent).paused
