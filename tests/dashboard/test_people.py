"""The server's people (administrators): switch a person off — no sign-in, their API tokens
stop at once — or on, make or unmake an administrator; never oneself, never the last active
administrator. The dashboard's People page and the admin API, one service."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent

from .conftest import client_for


def said(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


@pytest.fixture
def admin(make_user):
    return make_user("root", superuser=True)


def test_an_administrator_switches_a_person_off_and_their_token_stops(world, admin, client):
    token = services.token_create(actor=None, user=world.member)[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert client.get("/api/admin/projects/acme-web/members", **auth).status_code == 200
    root = client_for(admin)
    html = root.get(reverse("dashboard:people")).content.decode()
    assert world.member.username in html and "Switch off" in html
    off = reverse("dashboard:person-change", args=[world.member.username, "deactivate"])
    assert "is switched off" in said(root.post(off))
    world.member.refresh_from_db()
    assert not world.member.is_active
    assert client.get("/api/admin/projects/acme-web/members", **auth).status_code == 401
    on = reverse("dashboard:person-change", args=[world.member.username, "activate"])
    root.post(on)
    assert client.get("/api/admin/projects/acme-web/members", **auth).status_code == 200
    made = reverse("dashboard:person-change", args=[world.member.username, "make-admin"])
    root.post(made)
    world.member.refresh_from_db()
    assert world.member.is_superuser
    changes = AuditEvent.objects.filter(action="person.change", target_ref=world.member.username)
    assert [e.details for e in changes.order_by("id")] == [
        {"active": False}, {"active": True}, {"administrator": True},
    ]  # fmt: skip


def test_never_oneself_so_an_administrator_always_remains(world, admin):
    root = client_for(admin)
    for verb in ("deactivate", "unmake-admin"):
        response = root.post(reverse("dashboard:person-change", args=["root", verb]))
        assert "cannot switch yourself off" in said(response)
    admin.refresh_from_db()
    assert admin.is_active and admin.is_superuser


def test_people_are_for_administrators_only(world, manager_client, admin):
    assert manager_client.get(reverse("dashboard:people")).status_code == 403
    url = reverse("dashboard:person-change", args=[world.member.username, "deactivate"])
    manager_client.post(url)
    world.member.refresh_from_db()
    assert world.member.is_active
    unknown = reverse("dashboard:person-change", args=["x", "boom"])
    assert client_for(admin).post(unknown).status_code == 404
    nobody = reverse("dashboard:person-change", args=["nobody", "deactivate"])
    assert client_for(admin).post(nobody).status_code == 404


def test_the_admin_api_lists_and_changes_people(world, admin, client):
    token = services.token_create(actor=None, user=admin)[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    people = client.get("/api/admin/people", **auth).json()["people"]
    row = next(p for p in people if p["username"] == world.member.username)
    assert row["active"] and not row["administrator"] and row["projects"] == 1
    url = f"/api/admin/people/{world.member.username}"
    changed = client.patch(url, '{"active": false}', content_type="application/json", **auth)
    assert changed.status_code == 200 and changed.json()["active"] is False
    self_off = client.patch("/api/admin/people/root", '{"active": false}',
                            content_type="application/json", **auth)  # fmt: skip
    assert self_off.status_code == 403
    member = services.token_create(actor=None, user=world.manager)[1]
    refused = client.get("/api/admin/people", HTTP_AUTHORIZATION=f"Bearer {member}")
    assert refused.status_code == 403


def test_an_administrator_unmade_meanwhile_changes_nothing(world, admin, make_user):
    """Two administrators unmaking each other at once: the second, checked again under the
    administrators' lock, is no longer one and is refused — one administrator remains."""
    from memory_portal.memory.actors import Actor
    from memory_portal.memory.errors import MemoryPortalError

    other = make_user("other-root", superuser=True)
    stale = Actor.person(other)  # checked as an administrator before the first change lands
    services.person_change(actor=Actor.person(admin), user=other, administrator=False)
    with pytest.raises(MemoryPortalError) as refused:
        services.person_change(actor=stale, user=admin, administrator=False)
    assert refused.value.code == "memory_forbidden"
    admin.refresh_from_db()
    assert admin.is_superuser
