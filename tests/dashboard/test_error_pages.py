"""The product's own 403, 404 and session-ended pages (the API keeps its JSON envelope)."""

from __future__ import annotations

import json

from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import Client, RequestFactory

from memory_portal.dashboard.views.base import person_view
from memory_portal.memory.errors import MemoryPortalError

from .conftest import client_for, write_note


def test_not_found_pages(world, outsider_client):
    page = outsider_client.get("/p/acme-web/")
    assert page.status_code == 404 and "Not found" in page.content.decode()
    assert "not a member" in page.content.decode()
    assert "Not found" in outsider_client.get("/no/such/page/").content.decode()
    api = outsider_client.get("/api/no-such-route")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_a_form_from_an_ended_session_says_so_and_leads_back(world):
    note = write_note(world, "A note to veto")
    client = client_for(world.member)
    client.handler.enforce_csrf_checks = True
    referer = "http://testserver/p/acme-web/review/"
    response = client.post(f"/p/acme-web/notes/{note.pk}/veto/", HTTP_REFERER=referer)
    assert response.status_code == 403
    body = response.content.decode()
    assert "Your session has ended" in body and "nothing was changed" in body
    assert 'href="/login/?next=%2Fp%2Facme-web%2Freview%2F"' in body
    note.refresh_from_db()
    assert not note.is_vetoed
    # A foreign Referer is not followed back.
    url = f"/p/acme-web/notes/{note.pk}/veto/"
    response = client.post(url, HTTP_REFERER="https://evil.example/")
    assert 'next=%2F"' in response.content.decode()


def test_the_api_keeps_its_envelope_without_csrf(world):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/tools/memory_status", content_type="application/json")
    assert response.status_code == 401 and response.json()["error"]["code"] == "auth_required"


def _refusing_view(request):
    raise MemoryPortalError("memory_superseded", "The note changed meanwhile.", hint="Reload it.")


def test_a_refusal_no_view_expected_is_a_page_a_message_or_a_toast(world):
    view = person_view(_refusing_view)
    factory = RequestFactory()

    page = factory.get("/p/acme-web/somewhere/")
    page.user, page.htmx = world.member, False
    response = view(page)
    body = response.content.decode()
    assert response.status_code == 409
    assert "The note changed meanwhile." in body and "Reload it." in body

    form = factory.post("/p/acme-web/x/", {"next": "/p/acme-web/review/"})
    form.user, form.htmx, form.session = world.member, False, {}
    form._messages = FallbackStorage(form)
    response = view(form)
    assert response.status_code == 302 and response["Location"] == "/p/acme-web/review/"
    assert [str(m) for m in form._messages] == ["The note changed meanwhile. Reload it."]

    htmx = factory.post("/p/acme-web/x/")
    htmx.user, htmx.htmx = world.member, True
    response = view(htmx)
    assert response.status_code == 200 and response["HX-Reswap"] == "none"
    assert "The note changed meanwhile." in response["HX-Trigger"]


def test_django_s_403_is_the_same_refused_page():
    from memory_portal.failures import forbidden

    response = forbidden(RequestFactory().get("/p/acme-web/"), None)
    body = response.content.decode()
    assert response.status_code == 403 and "<h1>Not allowed</h1>" in body
    assert "does not allow this. Nothing was changed." in body
    api = forbidden(RequestFactory().get("/api/tools/memory_status"), None)
    assert json.loads(api.content)["error"]["code"] == "memory_forbidden"
