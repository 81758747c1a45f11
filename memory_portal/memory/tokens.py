"""Bearer tokens: `mp_<prefix>_<secret>` (a run's or a person's) and agent keys
`mpk_<prefix>_<secret>` (an agent's, that only start runs). The prefix finds the row; only a
SHA-256 of the secret is stored and it is compared in constant time. A 256-bit random secret
needs no password stretching."""

from __future__ import annotations

import hashlib
import secrets
from functools import cache

from django.contrib.auth import get_user_model
from django.utils import timezone

from . import fastsql, run_slots
from .errors import MemoryPortalError
from .models import (
    Agent,
    AgentKey,
    ApiToken,
    Application,
    MemorySetting,
    Project,
    Run,
    RunStatus,
)

TOKEN_PREFIX = "mp_"
KEY_PREFIX = "mpk_"


def generate(kind: str = TOKEN_PREFIX) -> tuple[str, str, str]:
    """A new (plaintext, prefix, secret hash): a token, or an agent key with KEY_PREFIX."""
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return f"{kind}{prefix}_{secret}", prefix, hash_secret(secret)


def is_agent_key(raw: str) -> bool:
    return raw.startswith(KEY_PREFIX)


def _parts(raw: str, kind: str) -> tuple[str, str] | None:
    """(prefix, secret hash) of a bearer value of this kind, None if it has not its shape."""
    if not raw.startswith(kind) or raw.count("_") < 2:
        return None
    prefix, _, secret = raw[len(kind) :].partition("_")
    if len(prefix) != 12 or not secret:
        return None
    return prefix, hash_secret(secret)


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


_WHERE = "t.prefix = %s AND t.secret_hash = %s"


@cache
def _run_of_token() -> str:
    """The top-level run of a live run token (the slot's run) and its own run (the budget's),
    run_slots.pretake_sql."""
    return (
        f"SELECT r.top_level_run_id AS run, r.id AS own FROM {ApiToken._meta.db_table} t"
        f" JOIN {Run._meta.db_table} r ON r.id = t.run_id"
        f" WHERE {_WHERE} AND t.revoked_at IS NULL AND r.status = '{RunStatus.RUNNING}'"
        " AND (t.expires_at IS NULL OR t.expires_at > now())"
    )


def _load(prefix: str, secret_hash: str, *, take_slot: bool, count: bool) -> ApiToken | None:
    """The token of `prefix` whose secret hashes to `secret_hash`, with everything a call needs,
    in one statement: its run with the run's agent, project, application and the project's
    setting row (`project.memory_setting`: the switch and epoch as the call found them), or its
    user. A wrong secret finds no row, exactly as an unknown prefix does, so the two cost the
    same (no instances are built for either) and timing cannot tell a known prefix apart.
    `take_slot`: a live run token's statement also takes one of its run's slots for the call to
    come, and with `count` the call from its run's budget (run_slots.pretake_sql)."""
    before = after = None
    pretake = run_slots.pretake_sql(_run_of_token(), count=count) if take_slot else None
    if pretake is not None:
        clause_params, column_params = run_slots.pretake_params(count=count)
        before = (pretake[0], [prefix, secret_hash, *clause_params])
        after = (pretake[1], column_params)
    row, extra = fastsql.select_joined(
        _tables(), _WHERE, [prefix, secret_hash], before=before, after=after
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
        if pretake is not None:
            run_slots.pretaken(run.top_level_run_id, extra, run_id=run.pk, count=count)
    token.run = run
    token.user = user
    return token


def token_authenticate(
    raw: str | None, *, take_slot: bool = False, count: bool = False
) -> ApiToken:
    """The live token for a bearer value, or auth_required / auth_invalid. `take_slot`: the
    request is an agent tool's call, whose slot the same statement takes, and with `count` the
    call from the run's budget (a tool whose write does not take it: given back at the
    request's end if the call never comes, run_slots.release_pretaken)."""
    if raw is None or raw == "":
        raise MemoryPortalError("auth_required", "This route needs a bearer token.")
    invalid = MemoryPortalError("auth_invalid", "The bearer token is not valid.")
    if is_agent_key(raw):
        raise MemoryPortalError(
            "auth_invalid",
            "An agent key only starts runs; this route takes a run token or a person's token.",
            hint=KEY_PLACES_HINT,
        )
    parts = _parts(raw, TOKEN_PREFIX)
    if parts is None:
        raise invalid
    token = _load(*parts, take_slot=take_slot, count=count)
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
    if token.expires_at is not None and token.expires_at <= now:
        raise MemoryPortalError(
            "auth_invalid",
            "The token has expired.",
            hint="Create a new one on the dashboard's “Your API tokens” page.",
        )
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


# Where an agent key is taken (SPEC §3.4a); every other route refuses it with this hint.
KEY_PLACES_HINT = (
    "Use an agent key in two places only: POST /api/runs (it answers a run token for the "
    "other routes) and as the bearer token of /mcp or `memory mcp`."
)


@cache
def _key_tables() -> tuple[fastsql.Joined, ...]:
    return (
        fastsql.Joined(AgentKey, "k"),
        fastsql.Joined(Agent, "a", "a.id = k.agent_id"),
        fastsql.Joined(Project, "p", "p.id = a.project_id"),
        fastsql.Joined(Application, "ap", "ap.id = a.application_id"),
    )


def key_authenticate(raw: str | None) -> AgentKey:
    """The live agent key for a bearer value (with its agent and the agent's project and
    application, in one statement), or auth_required / auth_invalid. A revoked key and a
    retired agent's key are refused as a wrong one is; the key's first and latest use are
    recorded (the latest to a minute)."""
    if raw is None or raw == "":
        raise MemoryPortalError("auth_required", "This route needs an agent key.")
    invalid = MemoryPortalError(
        "auth_invalid",
        "The agent key is not valid (revoked, its agent retired, or never issued).",
        hint="Create a key on the project's Connect page or the agent's page.",
    )
    parts = _parts(raw, KEY_PREFIX)
    if parts is None:
        raise invalid
    prefix, secret_hash = parts
    row, _ = fastsql.select_joined(
        _key_tables(), "k.prefix = %s AND k.secret_hash = %s", [prefix, secret_hash]
    )
    if row is None:
        raise invalid
    key, agent, project, application = row
    if key.revoked_at is not None or agent.retired_at is not None:
        raise invalid
    agent.project = project
    agent.application = application
    key.agent = agent
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        used = {"last_used_at": now}
        if key.first_used_at is None:
            used["first_used_at"] = key.first_used_at = now
        AgentKey.objects.filter(pk=key.pk).update(**used)
        key.last_used_at = now
    return key
