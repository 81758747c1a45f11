"""Single sign-on against a real OpenID provider (tests/oidc_provider.py, pyop on a local port):
a person is made on first sign-in and found by verified email after that; their groups give
their roles; a token with a bad signature, another audience or an expiry passed, a replayed or
foreign `state`, an unverified email, a switched-off account and a provider that cannot be
reached are each refused with a page that says so, and nothing changes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory_portal.dashboard import sso
from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, Membership, Role

from ..memory.test_notifications import BASE, smtp  # noqa: F401 - the SMTP server fixture
from ..oidc_provider import OpenIDProvider

CALLBACK = "http://testserver/sso/callback/"
USERS = {
    "ada": {
        "sub": "ada-1",
        "email": "Ada@Example.com",
        "email_verified": True,
        "name": "Ada Lovelace",
        "groups": ["platform-leads", "platform"],
    },
    "bob": {
        "sub": "bob-1",
        "email": "bob@example.com",
        "email_verified": True,
        "name": "Bob",
        "groups": ["platform"],
    },
    "eve": {"sub": "eve-1", "email": "eve@example.com", "email_verified": False, "groups": []},
}
ROLES = (
    ("platform-leads", "acme-web", "manager"),
    ("platform", "acme-web", "member"),
    ("platform-leads", "search", "member"),
)


@pytest.fixture
def idp(settings, db, monkeypatch):
    provider = OpenIDProvider({k: dict(v) for k, v in USERS.items()}, [CALLBACK]).start()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", provider.ca_bundle)
    for name, value in provider.settings().items():
        setattr(settings, name, value)
    settings.OIDC_ROLES = ROLES
    sso.forget_provider()
    yield provider
    provider.stop()
    sso.forget_provider()


def people():
    return get_user_model().objects


def sign_in(client: Client, idp: OpenIDProvider, login: str, *, next: str = ""):
    start = client.get("/sso/start/" + (f"?next={next}" if next else ""))
    assert start.status_code == 302, start.content
    assert start["Location"].startswith(f"{idp.issuer}/authorize?")
    callback = idp.sign_in(start["Location"], login)
    assert callback.startswith(CALLBACK)
    path = callback.removeprefix("http://testserver")
    return client.get(path), path


def signed_in_as(client: Client):
    return client.get("/").wsgi_request.user


def test_a_first_sign_in_makes_the_person_with_the_roles_their_groups_give(world, idp):
    client = Client()
    response, _ = sign_in(client, idp, "ada", next="/p/acme-web/")
    assert response.status_code == 302 and response["Location"] == "/p/acme-web/"
    ada = people().get(email="Ada@Example.com")
    assert ada.username == "ada@example.com" and not ada.has_usable_password()
    assert (ada.first_name, ada.last_name) == ("Ada", "Lovelace")
    assert signed_in_as(client) == ada
    assert Membership.objects.get(user=ada, project=world.project).role == Role.MANAGER
    assert not Membership.objects.filter(user=ada, project__slug="search").exists()  # no project
    made = AuditEvent.objects.get(action="person.sso")
    assert made.actor_label == "system" and made.target_ref == "ada@example.com"
    page = client.get("/p/acme-web/members/")
    assert page.status_code == 200 and b"ada@example.com" in page.content


def test_the_next_sign_in_finds_the_person_by_email_and_follows_their_groups(world, idp):
    sign_in(Client(), idp, "bob")
    bob = people().get(email="bob@example.com")
    assert Membership.objects.get(user=bob, project=world.project).role == Role.MEMBER
    idp.users["bob"]["groups"] = ["platform-leads"]
    sign_in(Client(), idp, "bob")
    assert people().filter(email__iexact="bob@example.com").count() == 1
    assert Membership.objects.get(user=bob, project=world.project).role == Role.MANAGER
    idp.users["bob"]["groups"] = []
    client = Client()
    sign_in(client, idp, "bob")
    assert not Membership.objects.filter(user=bob, project=world.project).exists()
    assert signed_in_as(client) == bob  # signed in, a member of nothing now
    assert client.get("/p/acme-web/").status_code == 404


def test_an_account_made_here_is_found_by_its_address(world, idp):
    """An invited person (username and email the address) or a password account with the same
    email signs in as that account, keeping its password and memberships."""
    bob = get_user_model().objects.create_user("bobby", "BOB@example.com", "pw-12345!")
    services.membership_set(actor=None, project=world.project, user=bob, role=Role.MANAGER)
    idp.users["bob"]["groups"] = ["platform-leads"]
    client = Client()
    sign_in(client, idp, "bob")
    assert signed_in_as(client) == bob
    assert people().count() == 4 and bob.has_usable_password()  # world's three and bob


def test_the_last_manager_stays_one_whatever_the_groups_say(world, idp):
    idp.users["ada"]["groups"] = ["platform-leads"]
    sign_in(Client(), idp, "ada")
    ada = people().get(email="Ada@Example.com")
    Membership.objects.filter(project=world.project).exclude(user=ada).delete()
    idp.users["ada"]["groups"] = []
    client = Client()
    sign_in(client, idp, "ada")
    assert Membership.objects.get(user=ada, project=world.project).role == Role.MANAGER
    assert signed_in_as(client) == ada


@pytest.mark.parametrize(
    ("mischief", "said"),
    [
        ("signature", "signature is not the provider"),
        ("audience", "issued for another application"),
        ("expired", "has expired"),
        ("nonce", "does not answer this sign-in"),
    ],
)
def test_a_bad_id_token_is_refused_and_nothing_changes(world, idp, mischief, said):
    idp.mischief = mischief
    client = Client()
    response, _ = sign_in(client, idp, "ada")
    assert response.status_code == 400
    assert said in response.content.decode() and b"Back to the login page" in response.content
    assert not people().filter(email__iexact="ada@example.com").exists()
    assert not signed_in_as(client).is_authenticated
    assert (
        not AuditEvent.objects.filter(action__in=["person.sso", "membership.set"])
        .exclude(target_ref__startswith="acme-web-")
        .exists()
    )


def test_a_replayed_or_foreign_state_is_refused(world, idp):
    client = Client()
    response, callback = sign_in(client, idp, "bob")
    assert response.status_code == 302
    client.logout()
    again = client.get(callback)
    assert again.status_code == 400 and b"already used" in again.content
    assert not signed_in_as(client).is_authenticated
    # A callback carried to another browser (a session that never started this sign-in).
    start = Client().get("/sso/start/")
    foreign = idp.sign_in(start["Location"], "bob").removeprefix("http://testserver")
    stranger = Client()
    refused = stranger.get(foreign)
    assert refused.status_code == 400 and b"not started in this browser" in refused.content
    assert not signed_in_as(stranger).is_authenticated
    # A state this session did start, but another one's code-less answer.
    mine = Client()
    mine.get("/sso/start/")
    tampered = mine.get("/sso/callback/?code=forged&state=not-mine")
    assert tampered.status_code == 400
    assert idp.tokens_issued == 1  # neither the replay nor the others reached the provider


def test_an_unverified_email_or_a_switched_off_account_is_refused(world, idp):
    client = Client()
    response, _ = sign_in(client, idp, "eve")
    assert response.status_code == 403 and b"vouch for an email" in response.content
    assert not people().filter(email="eve@example.com").exists()
    sign_in(Client(), idp, "bob")
    people().filter(email="bob@example.com").update(is_active=False)
    response, _ = sign_in(client, idp, "bob")
    assert response.status_code == 403 and b"switched off" in response.content
    assert not signed_in_as(client).is_authenticated


def test_the_provider_saying_no_is_shown(world, idp):
    client = Client()
    client.get("/sso/start/")
    state = next(iter(client.session["oidc_states"]))
    response = client.get(
        f"/sso/callback/?error=access_denied&error_description=Not+today&state={state}"
    )
    assert response.status_code == 400 and b"Not today" in response.content
    assert client.session["oidc_states"] == {}  # that state cannot be used again


def test_a_provider_that_cannot_be_reached_is_a_503_with_retry_after(settings, db):
    settings.SSO_ENABLED = True
    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # discard: nothing listens
    settings.OIDC_TIMEOUT = 2
    sso.forget_provider()
    response = Client().get("/sso/start/")
    assert response.status_code == 503 and response["Retry-After"] == "60"
    assert b"cannot be reached" in response.content


def test_the_login_page_offers_the_provider_and_oidc_only_hides_passwords(world, idp, settings):
    page = Client().get("/login/").content.decode()
    assert "Sign in with Test IdP" in page and 'name="password"' in page
    settings.OIDC_ONLY = True
    page = Client().get("/login/").content.decode()
    assert "Sign in with Test IdP" in page and 'name="password"' not in page
    refused = Client().post(
        "/login/", {"username": world.manager.username, "password": "pw-12345!"}
    )
    assert refused.status_code == 403
    assert not refused.wsgi_request.user.is_authenticated
    assert Client().get("/password/reset/").status_code == 404
    assert Client().get("/password/set/done/").status_code == 404


def test_without_an_issuer_there_is_no_single_sign_on(db):
    assert Client().get("/sso/start/").status_code == 404
    assert Client().get("/sso/callback/?code=x&state=y").status_code == 404
    assert b"Sign in with" not in Client().get("/login/").content


def test_under_oidc_only_an_invitation_leads_to_the_provider(world, idp, settings, smtp):  # noqa: F811
    settings.OIDC_ONLY = True
    manager = Client()
    manager.force_login(world.manager)
    manager.post("/p/acme-web/members/invite/", {"email": "bob@example.com", "role": "manager"})
    (email,) = smtp.to("bob@example.com")
    text = email.get_content()
    assert "Sign in with Test IdP" in text and f"{BASE}/login/" in text and "password" not in text
    client = Client()
    sign_in(client, idp, "bob")
    bob = signed_in_as(client)
    assert (
        bob.username == "bob@example.com" and people().filter(email="bob@example.com").count() == 1
    )
    assert Membership.objects.get(user=bob, project=world.project).role == Role.MEMBER


def test_email_verified_as_the_string_some_providers_send(world, idp, monkeypatch):
    """Amazon Cognito sends `email_verified` as the string "true" (the test provider, strict,
    sends booleans only: the claims are rewritten as they arrive)."""
    answered = sso.SignInBackend.get_userinfo

    def as_strings(self, access_token, id_token, payload):
        claims = answered(self, access_token, id_token, payload)
        return {**claims, "email_verified": str(claims["email_verified"]).lower()}

    monkeypatch.setattr(sso.SignInBackend, "get_userinfo", as_strings)
    client = Client()
    response, _ = sign_in(client, idp, "bob")
    assert response.status_code == 302
    assert signed_in_as(client).email == "bob@example.com"
    refused, _ = sign_in(Client(), idp, "eve")  # "false"
    assert refused.status_code == 403
