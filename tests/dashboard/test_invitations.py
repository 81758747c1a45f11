"""Inviting someone new by email and resetting a password: the email arrives on a real SMTP
server started by the test; its link sets a password once; a link used, changed or sent for
no account changes nothing and says so; an address already taken is refused; a mail server
that refuses the email leaves no account behind."""

from __future__ import annotations

import re

from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from memory_portal.memory.models import AuditEvent, Membership

from ..memory.test_notifications import BASE, smtp  # noqa: F401 - the SMTP server fixture

SLUG = "acme-web"


def said(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def link_in(message) -> str:
    found = re.search(rf"{re.escape(BASE)}(/password/set/\S+/)", message.get_content())
    assert found, message.get_content()
    return found.group(1)


def test_an_invited_colleague_sets_a_password_and_sees_the_project(
    world, manager_client, smtp  # noqa: F811
):
    invite = reverse("dashboard:member-invite", args=[SLUG])
    response = manager_client.post(invite, {"email": "Bea@Example.com", "role": "member"})
    assert "Invited Bea@Example.com" in said(response)
    (email,) = smtp.to("Bea@Example.com")
    assert "Acme Web" in email["Subject"] and "as a member" in email.get_content()
    person = Membership.objects.get(project=world.project, user__email="Bea@Example.com").user
    assert person.username == "bea@example.com" and not person.has_usable_password()
    assert AuditEvent.objects.filter(action="person.invite", target_ref=person.username).exists()

    browser = Client()
    form = browser.get(link_in(email), follow=True)
    assert "Set your password" in form.content.decode()
    done = browser.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-long-new-pass-23", "new_password2": "a-long-new-pass-23"},
    )
    assert done.url == reverse("password_reset_complete")
    assert browser.login(username="bea@example.com", password="a-long-new-pass-23")
    assert SLUG in browser.get("/").content.decode()
    # The link works once.
    again = Client().get(link_in(email), follow=True).content.decode()
    assert "This link does not work" in again


def test_bad_invitations_are_refused_and_change_nothing(world, manager_client, smtp):  # noqa: F811
    invite = reverse("dashboard:member-invite", args=[SLUG])
    taken = world.member.email or "taken@example.com"
    world.member.email = taken
    world.member.save(update_fields=["email"])
    for data, why in [
        ({"email": taken, "role": "member"}, "already has an account"),
        ({"email": "not an address", "role": "member"}, "is not an email address"),
        ({"email": "c@example.com", "role": "owner"}, "role must be"),
    ]:
        assert why in said(manager_client.post(invite, data)), data
    member = Client()
    member.force_login(world.member)
    member.post(invite, {"email": "d@example.com", "role": "manager"})
    assert smtp.messages == [] and not Membership.objects.filter(user__email__in=[
        "c@example.com", "d@example.com"]).exists()  # fmt: skip


def test_a_refused_email_leaves_no_account(world, manager_client, settings):
    settings.EMAIL_ENABLED = True
    settings.MAILERS = {"default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {"host": "127.0.0.1", "port": 9, "timeout": 2}}}  # fmt: skip
    invite = reverse("dashboard:member-invite", args=[SLUG])
    response = manager_client.post(invite, {"email": "e@example.com", "role": "member"})
    assert "could not be sent, so nobody was invited" in said(response)
    assert not Membership.objects.filter(user__email="e@example.com").exists()


def test_a_password_reset_never_says_whether_an_address_has_an_account(
    world, smtp  # noqa: F811
):
    world.member.email = "member@example.com"
    world.member.set_password("old-password-123")
    world.member.save()
    browser = Client()
    known = browser.post(reverse("password_reset"), {"email": "member@example.com"})
    unknown = browser.post(reverse("password_reset"), {"email": "nobody@example.com"})
    assert known.url == unknown.url == reverse("password_reset_done")
    (email,) = smtp.messages
    assert email["To"] == "member@example.com"
    tampered = link_in(email).replace("/password/set/", "/password/set/x")
    assert "This link does not work" in browser.get(tampered, follow=True).content.decode()
