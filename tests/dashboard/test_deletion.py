"""The settings page: a manager deletes an application and an administrator deletes the project,
each behind the typed id, without JavaScript; everyone else is refused."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from memory_portal.memory import services
from memory_portal.memory.models import Agent, Application, AuditEvent, Note, Project

from .conftest import HTMX, client_for, write_note

SLUG = "acme-web"
SETTINGS = f"/p/{SLUG}/settings/"


def app_delete_url(app_slug: str = "storefront") -> str:
    return reverse("dashboard:application-delete", args=[SLUG, app_slug])


def project_delete_url() -> str:
    return reverse("dashboard:project-delete", args=[SLUG])


def message_texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def events(action: str):
    return AuditEvent.objects.filter(action=action)


@pytest.fixture
def admin_client(make_user):
    return client_for(make_user("root", superuser=True))


@pytest.fixture
def scoped(world):
    """Two notes scoped to the storefront application and one shared note."""
    notes = [write_note(world, f"Storefront note {i}", scope="application") for i in range(2)]
    write_note(world, "Shared note")
    return notes


# --- The page -------------------------------------------------------------------------------


def test_the_settings_page_lists_the_applications(world, scoped, manager_client):
    html = manager_client.get(SETTINGS).content.decode()
    assert 'aria-current="page">Settings<' in html
    row = html.split('id="application-storefront"')[1].split("</tr>")[0]
    for cell in (">storefront<", ">Storefront<", 'data-label="Scoped notes">2<'):
        assert cell in row, cell
    assert 'data-label="Agents">3<' in row and 'data-label="Runs">3<' in row
    assert f'action="{app_delete_url()}"' in row
    assert 'name="confirm"' in row and 'data-confirm-value="storefront"' in row
    assert 'id="application-billing"' in html
    # The project's delete is for administrators only.
    assert project_delete_url() not in html
    assert "Only an administrator can delete the project." in html


def test_members_see_the_applications_without_delete_controls(world, scoped, member_client):
    html = member_client.get(SETTINGS).content.decode()
    assert 'id="application-storefront"' in html
    assert "Delete application" not in html and app_delete_url() not in html
    assert "Only a project manager can delete an application." in html


def test_administrators_see_the_danger_zone(world, admin_client):
    html = admin_client.get(SETTINGS).content.decode()
    zone = html.split('id="danger-title"')[1]
    assert f'action="{project_delete_url()}"' in zone
    assert 'data-confirm-value="acme-web"' in zone and "Delete project acme-web" in zone


def test_outsiders_get_404_for_the_page_and_the_deletes(world, scoped, outsider_client):
    assert outsider_client.get(SETTINGS).status_code == 404
    assert outsider_client.post(app_delete_url(), {"confirm": "storefront"}).status_code == 404
    assert outsider_client.post(project_delete_url(), {"confirm": SLUG}).status_code == 404
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert Project.objects.filter(slug=SLUG).exists()
    assert not events("application.delete").exists() and not events("project.delete").exists()


def test_the_page_queries_do_not_grow_with_applications(
    world, manager_client, django_assert_max_num_queries
):
    def count() -> int:
        with django_assert_max_num_queries(12) as captured:
            assert manager_client.get(SETTINGS).status_code == 200
        return len(captured.captured_queries)

    few = count()
    for i in range(5):
        services.application_create(actor=None, project=world.project, slug=f"app-{i}", name="")
    assert count() == few


# --- Deleting an application ------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["", "storefron", "Storefront", "billing"])
def test_a_wrong_application_id_deletes_nothing(world, scoped, manager_client, typed):
    response = manager_client.post(app_delete_url(), {"confirm": typed})
    assert response.status_code == 302 and response.url == SETTINGS
    assert "nothing was deleted" in message_texts(response)[0].lower()
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert Note.objects.filter(application=world.app).count() == 2
    assert not events("application.delete").exists()


def test_a_manager_deletes_an_application(world, scoped, manager_client):
    response = manager_client.post(app_delete_url(), {"confirm": " storefront "})
    assert response.status_code == 302 and response.url == f"/p/{SLUG}/"
    message = message_texts(response)[0]
    assert message.startswith("Deleted application storefront: 2 notes scoped to it")
    assert "3 agents and 3 runs were detached" in message
    assert not Application.objects.filter(pk=world.app.pk).exists()
    assert not Note.objects.filter(pk__in=[n.pk for n in scoped]).exists()
    assert Note.objects.filter(content="Shared note").exists()
    assert Agent.objects.get(pk=world.agent.pk).application is None
    event = events("application.delete").get()
    assert event.actor_user == world.manager and event.details["notes"] == 2
    page = manager_client.get(SETTINGS).content.decode()
    assert 'id="application-storefront"' not in page and 'id="application-billing"' in page


def test_members_are_refused_with_a_message(world, scoped, member_client):
    response = member_client.post(app_delete_url(), {"confirm": "storefront"})
    assert response.status_code == 302 and response.url == SETTINGS
    assert "manager" in message_texts(response)[0]
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert not events("application.delete").exists()


def test_an_unknown_application_is_404(world, manager_client):
    assert manager_client.post(app_delete_url("nope"), {"confirm": "nope"}).status_code == 404


def test_over_htmx_the_browser_is_sent_on(world, manager_client):
    response = manager_client.post(app_delete_url(), {"confirm": "storefront"}, **HTMX)
    assert response["HX-Redirect"] == f"/p/{SLUG}/"
    assert not Application.objects.filter(pk=world.app.pk).exists()


def test_get_is_not_allowed_on_the_delete_urls(world, manager_client):
    assert manager_client.get(app_delete_url()).status_code == 405
    assert manager_client.get(project_delete_url()).status_code == 405


# --- Deleting the project ---------------------------------------------------------------------


def test_an_administrator_deletes_the_project(world, scoped, admin_client):
    wrong = admin_client.post(project_delete_url(), {"confirm": "acme"})
    assert wrong.status_code == 302 and wrong.url == SETTINGS
    assert "Nothing was deleted" in message_texts(wrong)[0]
    assert Project.objects.filter(slug=SLUG).exists() and not events("project.delete").exists()

    response = admin_client.post(project_delete_url(), {"confirm": SLUG})
    assert response.status_code == 302 and response.url == reverse("dashboard:projects")
    message = message_texts(response)[-1]
    assert message.startswith("Deleted project acme-web: 3 notes,") and "4 agents" in message
    assert not Project.objects.filter(slug=SLUG).exists()
    event = events("project.delete").get()
    assert event.project_ref == SLUG and event.details["notes"] == 3
    projects = admin_client.get(reverse("dashboard:projects")).content.decode()
    assert "Deleted project acme-web" in projects and 'href="/p/acme-web/"' not in projects
    assert admin_client.get(f"/p/{SLUG}/").status_code == 404
    audit = admin_client.get(reverse("dashboard:audit") + "?action=project.delete")
    assert audit.status_code == 200 and "project.delete" in audit.content.decode()


@pytest.mark.parametrize("persona", ["manager", "member"])
def test_only_administrators_delete_the_project(world, scoped, persona):
    client = client_for(getattr(world, persona))
    response = client.post(project_delete_url(), {"confirm": SLUG})
    assert response.status_code == 302 and response.url == SETTINGS
    assert "administrator" in message_texts(response)[0]
    assert Project.objects.filter(slug=SLUG).exists()
    assert not events("project.delete").exists()


def test_the_deletes_need_the_csrf_token(world, scoped, make_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("root", superuser=True))
    for url, data in [
        (app_delete_url(), {"confirm": "storefront"}),
        (project_delete_url(), {"confirm": SLUG}),
    ]:
        assert client.post(url, data).status_code == 403, url
        assert client.post(url, data, **HTMX).status_code == 403, url
    assert Application.objects.filter(pk=world.app.pk).exists()
    assert Project.objects.filter(slug=SLUG).exists()
