"""CSRF on every POST, the CSP with nonces and no inline script, htmx served by the app, and
login throttling."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memory_portal.dashboard.models import LoginThrottle
from memory_portal.memory import services
from memory_portal.memory.models import AuditEvent, MemorySetting, Note

from .conftest import HTMX, write_note

SLUG = "acme-web"


def post_urls(world, note, recovery):
    return [
        (reverse("dashboard:note-approve", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:note-reject", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:note-veto", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:note-undo", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:note-archive", args=[SLUG, note.pk]), {"reason": "x"}),
        (reverse("dashboard:note-unarchive", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:note-edit", args=[SLUG, note.pk]), {"content": "changed"}),
        (reverse("dashboard:note-forget", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:note-reverify", args=[SLUG, note.pk]), {}),
        (reverse("dashboard:restore", args=[SLUG, recovery.pk]), {}),
        (reverse("dashboard:notes-bulk", args=[SLUG]), {"action": "veto", "ids": [note.pk]}),
        (reverse("dashboard:memory-enable", args=[SLUG]), {}),
        (reverse("dashboard:memory-disable", args=[SLUG]), {}),
        (reverse("dashboard:memory-reset", args=[SLUG]), {"confirm_slug": SLUG}),
        (reverse("dashboard:agent-fact", args=[SLUG, world.agent.pk]), {"text": "a fact"}),
        (reverse("dashboard:lift", args=[SLUG]), {"note": note.pk, "line": 0}),
        (reverse("dashboard:run-delete", args=[SLUG, world.run.pk]), {"confirm": "on"}),
        (reverse("dashboard:run-status", args=[SLUG, world.run.pk]), {"status": "failed"}),
        (reverse("dashboard:application-delete", args=[SLUG, "storefront"]), {"confirm": "x"}),
        (reverse("dashboard:project-delete", args=[SLUG]), {"confirm": SLUG}),
        (reverse("logout"), {}),
    ]


def test_every_post_needs_the_csrf_token(world):
    note = write_note(world, "Guarded")
    forgotten = write_note(world, "Forgotten one")
    recovery = services.note_forget(actor=world.as_manager, note_id=forgotten.pk)
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.manager)
    before = (AuditEvent.objects.count(), Note.objects.count())
    for url, data in post_urls(world, note, recovery):
        assert client.post(url, data).status_code == 403, url
        assert client.post(url, data, **HTMX).status_code == 403, url
    assert (AuditEvent.objects.count(), Note.objects.count()) == before
    assert MemorySetting.objects.get(project=world.project).enabled


def test_htmx_posts_pass_with_the_token_from_hx_headers(world):
    note = write_note(world, "Guarded")
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.member)
    page = client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    token = re.search(r'hx-headers=\'\{"X-CSRFToken": "([^"]+)"\}\'', page).group(1)
    response = client.post(
        reverse("dashboard:note-veto", args=[SLUG, note.pk]), {}, HTTP_X_CSRFTOKEN=token, **HTMX
    )
    assert response.status_code == 200 and "Vetoed" in response.content.decode()


def test_login_form_needs_the_csrf_token(world):
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        reverse("login"), {"username": world.manager.username, "password": "pw-12345!"}
    )
    assert response.status_code == 403


def test_csp_with_nonce_and_no_inline_script(world, manager_client):
    write_note(world, "A note")
    for url in [
        reverse("login"),
        reverse("dashboard:projects"),
        reverse("dashboard:project", args=[SLUG]),
        reverse("dashboard:review", args=[SLUG]),
        reverse("dashboard:settings", args=[SLUG]),
        reverse("dashboard:audit"),
    ]:
        client = manager_client if url != reverse("login") else Client()
        response = client.get(url)
        policy = response["Content-Security-Policy"]
        nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
        assert "script-src 'self' 'nonce-" in policy and "unsafe-inline" not in policy
        assert "style-src 'self'" in policy
        html = response.content.decode()
        scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.S)
        assert scripts, url
        for attrs, body in scripts:
            assert 'src="/static/' in attrs, f"external or inline script on {url}"
            assert body.strip() == "", f"inline script on {url}"
            assert f'nonce="{nonce}"' in attrs
        assert "/static/django_htmx/htmx-2.min.js" in html
        assert not re.search(r'\sstyle="', html), f"inline style on {url}"
        assert not re.search(r"<[^>]+\son[a-z]+=", html), f"inline handler on {url}"


def test_no_external_assets(world, manager_client):
    html = manager_client.get(reverse("dashboard:project", args=[SLUG])).content.decode()
    for src in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert not src.startswith(("http:", "https:", "//")), src


# --- Login throttling ---------------------------------------------------------------------------


def login(client, username, password, address="10.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_login_and_logout(world, client):
    response = login(client, world.manager.username, "pw-12345!")
    assert response.status_code == 302 and response.url == "/"
    assert client.get("/").status_code == 200
    assert client.post(reverse("logout")).status_code == 302
    assert client.get("/").status_code == 302


def test_five_failures_lock_the_username_from_that_address(world, client):
    for _ in range(5):
        assert login(client, world.manager.username, "wrong").status_code == 200
    locked = login(client, world.manager.username, "pw-12345!")
    assert locked.status_code == 429
    assert b"Too many failed log-in attempts" in locked.content
    assert "_auth_user_id" not in client.session
    # Another address, or another username from the same address, is not locked.
    assert (
        login(Client(), world.manager.username, "pw-12345!", address="10.0.0.2").status_code == 302
    )
    assert login(Client(), world.member.username, "pw-12345!").status_code == 302


def test_a_success_clears_the_failures(world, client):
    for _ in range(4):
        login(client, world.manager.username, "wrong")
    assert login(client, world.manager.username, "pw-12345!").status_code == 302
    client.post(reverse("logout"))
    for _ in range(4):
        assert login(client, world.manager.username, "wrong").status_code == 200
    assert login(client, world.manager.username, "pw-12345!").status_code == 302


def test_many_usernames_from_one_address_are_throttled(world, client, settings):
    from memory_portal.dashboard import throttling

    for i in range(throttling.FAILURES_PER_ADDRESS):
        login(Client(), f"guess-{i}", "wrong", address="10.9.9.9")
    assert (
        login(Client(), world.manager.username, "pw-12345!", address="10.9.9.9").status_code == 429
    )


def test_behind_the_proxy_the_forwarded_address_is_throttled(world, settings):
    """Behind the reverse proxy every request comes from the proxy's address; the client's is
    the last X-Forwarded-For hop, so one client's failures do not lock everyone out."""
    settings.BEHIND_PROXY = True

    def attempt(password, client_ip):
        return Client().post(
            reverse("login"),
            {"username": world.manager.username, "password": password},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR=f"203.0.113.50, {client_ip}",
        )

    for _ in range(5):
        attempt("wrong", "198.51.100.7")
    assert attempt("pw-12345!", "198.51.100.7").status_code == 429
    assert attempt("pw-12345!", "198.51.100.8").status_code == 302


def test_behind_two_proxies_the_client_is_the_address_the_outer_one_saw(world, settings):
    """A load balancer in front of each host's proxy: the proxy appends the balancer's address
    to what the balancer sent, so the last hop is the balancer for everyone. With
    MEMORY_PORTAL_PROXY_HOPS=2 one client's failures lock out that client only, and what the
    client itself puts in X-Forwarded-For changes nothing."""
    settings.BEHIND_PROXY = True
    settings.PROXY_HOPS = 2
    balancer = "10.0.0.5"

    def attempt(password, client_ip, claimed="", username=None):
        forwarded = ", ".join(filter(None, [claimed, client_ip, balancer]))
        return Client().post(
            reverse("login"),
            {"username": username or world.manager.username, "password": password},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR=forwarded,
        )

    def fail_from(client_ip):
        for i in range(throttling_failures_per_address()):
            attempt("wrong", client_ip, claimed=f"192.0.2.{i}", username=f"guess-{i}")

    # Counted as one proxy, everyone is the balancer: one client's failures lock out all.
    settings.PROXY_HOPS = 1
    fail_from("198.51.100.7")
    assert attempt("pw-12345!", "198.51.100.8").status_code == 429
    LoginThrottle.objects.all().delete()

    settings.PROXY_HOPS = 2
    fail_from("198.51.100.7")
    assert attempt("pw-12345!", "198.51.100.7").status_code == 429
    assert attempt("pw-12345!", "198.51.100.8").status_code == 302


def throttling_failures_per_address() -> int:
    from memory_portal.dashboard import throttling

    return throttling.FAILURES_PER_ADDRESS


@pytest.mark.parametrize("name", ["dashboard:projects", "dashboard:audit"])
def test_logged_in_pages_send_security_headers(world, manager_client, name):
    response = manager_client.get(reverse(name))
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]


def test_check_deploy_is_clean_under_production_settings(tmp_path):
    """README's production settings and steps (collectstatic, then `manage.py check --deploy`)
    pass without a warning; without a mail server they say so (an Info, not a warning)."""
    import os
    import secrets
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DEBUG"))},
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "memory.example.com",
        "MEMORY_PORTAL_HTTPS": "true",
        "STATIC_ROOT": str(tmp_path / "static"),
    }
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stderr

    def check(**extra):
        return subprocess.run(
            [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
            cwd=root,
            env={
                **{
                    k: v
                    for k, v in env.items()
                    if not k.startswith(("EMAIL_", "MEMORY_PORTAL_BASE"))
                },
                **extra,
            },
            capture_output=True,
            text=True,
            timeout=120,
        )

    result = check(
        EMAIL_URL="smtp://portal:secret@mail.example.com:587/?tls=True",
        MEMORY_PORTAL_BASE_URL="https://memory.example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    # Without a mail server it still passes, and says that nobody is emailed.
    result = check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "memory_portal.I003" in result.stdout + result.stderr
    # Emails whose links would be bare paths are a warning.
    result = check(EMAIL_URL="smtp://mail.example.com:25")
    assert result.returncode != 0
    assert "memory_portal.W004" in result.stdout + result.stderr


def test_single_sign_on_settings_are_checked_at_start(settings):
    """A provider over plain HTTP is a deployment warning; SSO half configured, ONLY without a
    provider, role rules without a groups claim or in a bad shape stop the start."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from memory_portal.checks import sign_on_over_https

    settings.SSO_ENABLED, settings.OIDC_ISSUER = True, "http://idp.example.com"
    assert [m.id for m in sign_on_over_https()] == ["memory_portal.W005"]
    settings.OIDC_ISSUER = "https://idp.example.com"
    assert sign_on_over_https() == []
    root = Path(__file__).resolve().parents[2]
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PORTAL_OIDC")}
    issuer = {"MEMORY_PORTAL_OIDC_ISSUER": "https://idp.example.com"}
    client = {"MEMORY_PORTAL_OIDC_CLIENT_ID": "portal", "MEMORY_PORTAL_OIDC_CLIENT_SECRET": "s"}
    cases = [
        (issuer, "MEMORY_PORTAL_OIDC_CLIENT_ID"),
        ({"MEMORY_PORTAL_OIDC_ONLY": "true"}, "needs MEMORY_PORTAL_OIDC_ISSUER"),
        ({**issuer, **client, "MEMORY_PORTAL_OIDC_ROLES": "a=b:member"}, "GROUPS_CLAIM"),
        (
            {
                **issuer,
                **client,
                "MEMORY_PORTAL_OIDC_GROUPS_CLAIM": "groups",
                "MEMORY_PORTAL_OIDC_ROLES": "leads=payments:owner",
            },
            "GROUP=PROJECT:ROLE",
        ),
    ]
    for extra, said in cases:
        result = subprocess.run(
            [sys.executable, "-c", "import memory_portal.settings"],
            cwd=root,
            env={**base, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0 and said in result.stderr, (extra, result.stderr[-500:])
    fine = {
        **issuer,
        **client,
        "MEMORY_PORTAL_OIDC_GROUPS_CLAIM": "groups",
        "MEMORY_PORTAL_OIDC_ROLES": "leads=payments:manager, team=payments:member",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import memory_portal.settings as s; print(s.OIDC_ROLES, s.SSO_ENABLED)",
        ],
        cwd=root,
        env={**base, **fine},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == (
        "(('leads', 'payments', 'manager'), ('team', 'payments', 'member')) True"
    ), result.stderr
