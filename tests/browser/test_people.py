"""A team's server in a real browser: an administrator creates a project, invites a colleague
(the email arrives on a real SMTP server started by the test), the colleague sets a password
through the link and sees the project as a member, and a manager raises them to manager — at
1280 and 390 px, axe-clean; another colleague signs in through a real OpenID provider and
lands with the role their group gives."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory_portal.dashboard import sso
from memory_portal.memory import services
from memory_portal.memory.models import Membership, Role

from ..memory.test_notifications import smtp  # noqa: F401 - the SMTP server fixture
from ..oidc_provider import OpenIDProvider
from .conftest import axe_violations


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_from_a_new_project_to_an_invited_manager(make_user, open_page, smtp, width):  # noqa: F811
    admin = make_user("root", superuser=True)
    page = open_page(admin, width)
    page.goto("/")
    if not page.page.locator(".new-project[open]").count():  # open when there is no project
        page.page.locator(".new-project summary").click()
    page.page.get_by_label("Id").fill("payments")
    page.page.get_by_label("Name").fill("Payments")
    page.page.get_by_role("button", name="Create project").click()
    expect(page.page.locator(".messages")).to_contain_text("Project payments created")
    assert not axe_violations(page.page)
    page.page.get_by_label("Email", exact=True).fill("cleo@example.com")
    page.page.get_by_role("button", name="Invite").click()
    expect(page.page.locator(".messages")).to_contain_text("Invited cleo@example.com")
    page.screenshot(f"members-{page.page.viewport_size['width']}", full_page=False)

    (email,) = smtp.to("cleo@example.com")
    path = re.search(r"https?://[^/\s]+(/password/set/\S+/)", email.get_content()).group(1)
    colleague = open_page(None, width)
    colleague.goto(path)
    colleague.page.get_by_label("New password").fill("cleo-pass-4821")
    colleague.page.get_by_label("The same again").fill("cleo-pass-4821")
    colleague.page.get_by_role("button", name="Set the password").click()
    colleague.page.get_by_role("link", name="Sign in").click()
    colleague.page.fill("#id_username", "cleo@example.com")
    colleague.page.fill("#id_password", "cleo-pass-4821")
    colleague.page.get_by_role("button", name="Log in").click()
    expect(colleague.page.locator(".project-card")).to_contain_text("Payments")
    assert Membership.objects.get(user__username="cleo@example.com").role == Role.MEMBER

    page.page.reload()
    row = page.page.locator("#member-cleo\\@example\\.com")
    row.get_by_label("Role of cleo@example.com").select_option("manager")
    row.get_by_role("button", name="Save").click()
    expect(page.page.locator(".messages")).to_contain_text("cleo@example.com is now a manager")
    assert Membership.objects.get(user__username="cleo@example.com").role == Role.MANAGER
    assert not axe_violations(page.page)
    assert page.errors == [] and colleague.errors == []


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_single_sign_on_lands_with_the_role_the_groups_give(
    db, settings, monkeypatch, live_server, open_page, width
):
    """Another colleague signs in through the test's OpenID provider (tests/oidc_provider.py)
    and lands as the manager their group makes them."""
    services.project_create(actor=None, slug="payments", name="Payments")
    claims = {
        "sub": "dana-1",
        "email": "dana@example.com",
        "email_verified": True,
        "name": "Dana Scully",
        "groups": ["payments-leads"],
    }
    provider = OpenIDProvider({"dana": claims}, [f"{live_server.url}/sso/callback/"]).start()
    try:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", provider.ca_bundle)
        for name, value in provider.settings().items():
            setattr(settings, name, value)
        settings.OIDC_ROLES = (("payments-leads", "payments", "manager"),)
        sso.forget_provider()
        page = open_page(None, width, trust=provider.issuer)
        page.goto("/login/")
        assert not axe_violations(page.page)
        page.screenshot(f"login-sso-{page.page.viewport_size['width']}", full_page=False)
        provider.mischief = "expired"  # first, a provider whose ID token has expired
        page.page.get_by_role("link", name="Sign in with Test IdP").click()
        page.page.get_by_label("Login").fill("dana")
        page.page.get_by_role("button", name="Sign in").click()
        expect(page.page.get_by_role("alert")).to_contain_text("ID token has expired")
        assert not axe_violations(page.page)
        page.screenshot(f"sso-refused-{page.page.viewport_size['width']}", full_page=False)
        assert not Membership.objects.filter(user__email="dana@example.com").exists()
        assert page.errors == [
            "Failed to load resource: the server responded with a status of 400 (Bad Request)"
        ]  # the refusal's own status, and nothing else
        page.errors.clear()
        provider.mischief = None
        page.page.get_by_role("link", name="Back to the login page").click()
        page.page.get_by_role("link", name="Sign in with Test IdP").click()
        page.page.get_by_label("Login").fill("dana")
        page.page.get_by_role("button", name="Sign in").click()
        expect(page.page.locator(".project-card")).to_contain_text("Payments")
        assert not axe_violations(page.page)
        membership = Membership.objects.get(user__email="dana@example.com")
        assert (membership.project.slug, membership.role) == ("payments", Role.MANAGER)
        page.goto("/p/payments/members/")
        expect(page.page.locator("#member-dana\\@example\\.com")).to_contain_text("Dana")
        assert page.errors == []
    finally:
        provider.stop()
        sso.forget_provider()
