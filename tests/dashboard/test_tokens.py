"""“Your API tokens”: a person creates (label, optional expiry, read-only), lists and revokes
their own tokens; the token is shown once; an expired or revoked token is refused by the API;
nobody revokes another person's token."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.models import ApiToken, AuditEvent

PAGE = "/tokens/"


def _secret(page: str) -> str:
    return re.search(r'<code id="secret" class="secret">(mp_[^<]+)</code>', page).group(1)


def _api(client, secret):
    return client.get("/api/admin/projects/acme-web/memory", HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_a_person_creates_uses_and_revokes_a_token(world, manager_client, client):
    response = manager_client.post(PAGE, {"label": "release script", "expires": "30"})
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    secret = _secret(response.content.decode())
    token = ApiToken.objects.get(user=world.manager, label="release script")
    assert token.can_write and timedelta(days=29) < token.expires_at - timezone.now()
    assert secret not in str(list(AuditEvent.objects.values()))

    answer = _api(client, secret)
    assert answer.status_code == 200
    listed = manager_client.get(PAGE).content.decode()
    assert "release script" in listed and f"tok_{token.prefix}" in listed and secret not in listed

    manager_client.post(f"/tokens/{token.prefix}/revoke/")
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    answer = _api(client, secret)
    assert answer.status_code == 401


def test_read_only_and_expired_tokens(world, manager_client, client):
    response = manager_client.post(PAGE, {"label": "reader", "read_only": "on"})
    secret = _secret(response.content.decode())
    token = ApiToken.objects.get(label="reader")
    assert not token.can_write and token.expires_at is None
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    answer = _api(client, secret)
    assert answer.status_code == 401 and "expired" in answer.json()["error"]["message"]
    assert "expired" in manager_client.get(PAGE).content.decode()


def test_labels_are_gated_and_tokens_are_ones_own(world, manager_client, member_client):
    refused = manager_client.post(PAGE, {"label": "see AKIA" + "Q7XK2M9PLR4TWZ3B"})
    assert refused.status_code == 400 and not ApiToken.objects.filter(user=world.manager).exists()
    token, _secret_text = services.token_create(actor=None, user=world.manager, label="mine")
    member_client.post(f"/tokens/{token.prefix}/revoke/")
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert "mine" not in member_client.get(PAGE).content.decode()


def test_the_tokens_page_does_not_grow_with_tokens(world, manager_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count():
        with CaptureQueriesContext(connection) as queries:
            assert manager_client.get(PAGE).status_code == 200
        return len(queries)

    few = count()
    for i in range(8):
        services.token_create(actor=None, user=world.manager, label=f"script {i}")
    assert count() == few <= 4
