"""Bearer tokens: `mp_<prefix>_<secret>`. The prefix finds the row; only a SHA-256 of the
secret is stored and it is compared in constant time. A 256-bit random secret needs no
password stretching."""

from __future__ import annotations

import hashlib
import secrets
from functools import cache

from django.contrib.auth import get_user_model
from django.utils import timezone

from . import fastsql
from .errors import MemoryPortalError
from .models import Agent, ApiToken, Application, MemorySetting, Project, Run, RunStatus

TOKEN_PREFIX = "mp_"


def generate() -> tuple[str, str, str]:
    """A new (plaintext, prefix, secret hash)."""
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return f"{TOKEN_PREFIX}{prefix}_{secret}", prefix, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@cache
def _tables() -> tuple[fastsql.Joined, ...]:
    return (
        fastsql.Joined(ApiToken, "t"),
        fastsql.Joined(Run, "r", "r.id = t.run_id"),
        fastsql.Joined(Agent, "a", "a.id = r.agent_id"),
        fastsql.Joined(Project, "p", "p.id = r.project_id"),
        fastsql.Joined(Application, "ap", "ap.id = r.application_id"),
        fastsql.Joined(MemorySetting, "s", "s.project_id = r.project_id"),
        fastsql.Joined(get_user_model(), "u", "u.id = t.user_id"),
    )


def _load(prefix: str, secret_hash: str) -> ApiToken | None:
    """The token of `prefix` whose secret hashes to `secret_hash`, with everything a call needs,
    in one statement: its run with the run's agent, project, application and the project's
    setting row (`project.memory_setting`: the switch and epoch as the call found them), or its
    user. A wrong secret finds no row, exactly as an unknown prefix does, so the two cost the
    same (no instances are built for either) and timing cannot tell a known prefix apart."""
    row = fastsql.select_joined(
        _tables(), "t.prefix = %s AND t.secret_hash = %s", [prefix, secret_hash]
    )
    if row is None:
        return None
    token, run, agent, project, application, setting, user = row
    if run is not None:
        run.agent = agent
        run.project = project
        run.application = application
        if setting is not None:
            project.memory_setting = setting
    token.run = run
    token.user = user
    return token


def token_authenticate(raw: str | None) -> ApiToken:
    """The live token for a bearer value, or auth_required / auth_invalid."""
    if raw is None or raw == "":
        raise MemoryPortalError("auth_required", "This route needs a bearer token.")
    invalid = MemoryPortalError("auth_invalid", "The bearer token is not valid.")
    if not raw.startswith(TOKEN_PREFIX) or raw.count("_") < 2:
        raise invalid
    prefix, _, secret = raw[len(TOKEN_PREFIX) :].partition("_")
    if len(prefix) != 12 or not secret:
        raise invalid
    token = _load(prefix, hash_secret(secret))
    if token is None:
        raise invalid
    if token.run is not None and token.run.status != RunStatus.RUNNING:
        # Checked before `revoked_at` (finishing a run revokes its tokens too) to say why.
        raise MemoryPortalError(
            "auth_invalid",
            f"Run {token.run_id} has finished ({token.run.status}); its token no longer works.",
            hint="Start a new run for new work; a finished run's token is revoked for good.",
        )
    if token.revoked_at is not None:
        raise invalid
    if token.user is not None and not token.user.is_active:
        raise invalid
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
