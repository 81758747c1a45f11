"""A project's Members page and an administrator's new project: every member reads the list,
managers add a person, change a role and take someone out, never the last manager; each change
a service, audited; refusals say why and change nothing."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from memory_portal.memory.models import AuditEvent, Membership, MemorySetting, Project, Role

SLUG = "acme-web"


def said(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def role_of(world, user) -> str | None:
    found = Membership.objects.filter(project=world.project, user=user).first()
    return found.role if found else None


@pytest.fixture
def colleague(make_user):
    user = make_user("ana")
    user.email = "Ana@Example.com"
    user.save(update_fields=["email"])
    return user


def test_members_read_the_list_managers_change_it(world, colleague, manager_client, member_client):
    url = reverse("dashboard:members", args=[SLUG])
    html = member_client.get(url).content.decode()
    assert world.manager.username in html and world.member.username in html
    assert "Only a project manager adds people" in html and "Add a person" not in html
    add = reverse("dashboard:member-add", args=[SLUG])
    assert member_client.post(add, {"person": "ana", "role": "member"}).status_code == 302
    assert role_of(world, colleague) is None  # refused: a member changes nothing

    response = manager_client.post(add, {"person": "ana@example.com", "role": "member"})
    assert "ana is a member" in said(response) and role_of(world, colleague) == Role.MEMBER
    change = reverse("dashboard:member-change", args=[SLUG, "ana", "role"])
    manager_client.post(change, {"role": "manager"})
    assert role_of(world, colleague) == Role.MANAGER
    remove = reverse("dashboard:member-change", args=[SLUG, "ana", "remove"])
    manager_client.post(remove)
    assert role_of(world, colleague) is None
    actions = AuditEvent.objects.filter(project=world.project, target_ref="ana")
    assert list(actions.values_list("action", flat=True).order_by("id")) == [
        "membership.set", "membership.set", "membership.remove",
    ]  # fmt: skip


def test_the_last_manager_stays_one(world, manager_client):
    for verb, data in (("role", {"role": "member"}), ("remove", {})):
        url = reverse("dashboard:member-change", args=[SLUG, world.manager.username, verb])
        response = manager_client.post(url, data)
        assert "is the last manager of acme-web" in said(response)
        assert role_of(world, world.manager) == Role.MANAGER


def test_bad_people_and_roles_are_refused(world, colleague, manager_client):
    add = reverse("dashboard:member-add", args=[SLUG])
    for data in ({"person": "nobody"}, {"person": "ana", "role": "owner"}, {"person": ""}):
        response = manager_client.post(add, data)
        assert response.status_code == 302 and said(response), data
    assert role_of(world, colleague) is None
    bad_verb = reverse("dashboard:member-change", args=[SLUG, "ana", "promote"])
    assert manager_client.post(bad_verb).status_code == 404


def test_an_administrator_creates_a_project_and_manages_it(make_user, client, manager_client):
    admin = make_user("root", superuser=True)
    client.force_login(admin)
    assert "New project" in client.get("/").content.decode()
    assert "New project" not in manager_client.get("/").content.decode()
    create = reverse("dashboard:project-create")
    response = client.post(create, {"slug": "payments", "name": "Payments"})
    assert response.url == reverse("dashboard:members", args=["payments"])
    project = Project.objects.get(slug="payments")
    assert not MemorySetting.objects.get(project=project).enabled
    assert Membership.objects.get(project=project, user=admin).role == Role.MANAGER
    again = client.post(create, {"slug": "payments", "name": "X"})
    assert "already exists" in said(again) and Project.objects.filter(slug="payments").count() == 1
    refused = manager_client.post(create, {"slug": "mine", "name": "M"})
    assert refused.status_code in (302, 403) and not Project.objects.filter(slug="mine").exists()
