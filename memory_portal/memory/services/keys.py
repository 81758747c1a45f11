"""Agents as a manager keeps them (rename, retire) and their keys: a long-lived credential of
one agent that only starts runs (SPEC §3.4a) — a run per `POST /api/runs`, or one per MCP
session on `/mcp`, finished when the client ends the session or after
MEMORY_PORTAL_MCP_IDLE_MINUTES without a call."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Unpack

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .. import tokens
from ..access import require_manager
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import Agent, AgentKey, Run, RunStatus
from ..validation import NAME_MAX, require_name
from ._common import audit
from .change import project_change
from .runs import (
    RunFields,
    require_active_agent,
    require_stage,
    run_create,
    run_update,
    token_create,
)

KEY_LABEL_MAX = 100
AGENT_CHANGE_AUDIT = {
    "name": AuditAction.AGENT_RENAME,
    "stage": AuditAction.AGENT_STAGE,
    "trusted": AuditAction.AGENT_TRUST,
}


def agent_change(
    *,
    actor: Actor,
    agent: Agent,
    name: str | None = None,
    stage: str | None = None,
    trusted: bool | None = None,
) -> Agent:
    """Rename an agent, change its stage and / or trust it (managers), each checked before any
    is written, in one transaction, each change audited (`agent.rename`, `agent.stage`,
    `agent.trust`, from / to). A new stage holds from the agent's next call — memory tools or
    none (MEMORY_ELIGIBLE_STAGES), a reviewer's reads or every note's; its keys and runs stay,
    and the notes it wrote keep the stage they were written with. A trusted agent's notes are
    served to other runs at once under the `hold` review policy (still learned, still to
    review): a change of trust is a change of what agents see, so it advances the project's
    revision."""
    require_manager(actor, agent.project)
    if name is None and stage is None and trusted is None:
        raise invalid("name", "Send name, stage, trusted or more than one.")
    wanted: dict = {}
    if name is not None:
        wanted["name"] = require_name("name", name, max_len=NAME_MAX)
    if stage is not None:
        require_stage(stage)
        wanted["stage"] = stage
    if trusted is not None:
        wanted["trusted"] = bool(trusted)
    changed = {f: (getattr(agent, f), v) for f, v in wanted.items() if getattr(agent, f) != v}
    if not changed:
        return agent
    with project_change(agent.project, actor=actor) as change:
        for field, (_before, value) in changed.items():
            setattr(agent, field, value)
        agent.save(update_fields=list(changed))
        if "trusted" in changed:
            change.changed()
        for field, (before, value) in changed.items():
            change.audit(
                AGENT_CHANGE_AUDIT[field], target=agent.pk, details={"from": before, "to": value}
            )
    return agent


def agent_retire(*, actor: Actor, agent: Agent) -> Agent:
    """Retire an agent: its keys stop working at once (revoked with it, and the runs they
    opened finished: `_finish_key_runs`) and it starts no new runs; its notes stay, and runs a
    manager started for it are its orchestrator's to finish."""
    require_manager(actor, agent.project)
    if agent.retired_at is not None:
        return agent
    now = timezone.now()
    with transaction.atomic():
        agent.retired_at = now
        agent.save(update_fields=["retired_at"])
        keys = AgentKey.objects.filter(agent=agent, revoked_at__isnull=True)
        runs = _finish_key_runs(keys)
        revoked = keys.update(revoked_at=now)
        audit(
            actor=actor,
            action=AuditAction.AGENT_RETIRE,
            project=agent.project,
            target=agent.pk,
            details={"keys_revoked": revoked, "runs_finished": runs},
        )
    return agent


def key_create(*, actor: Actor, agent: Agent, label: str) -> tuple[AgentKey, str]:
    """A new key of `agent`; its plaintext is returned once and never stored (nor audited)."""
    require_manager(actor, agent.project)
    require_active_agent(agent)
    label = require_name("label", label, max_len=KEY_LABEL_MAX)
    plaintext, prefix, secret_hash = tokens.generate(tokens.KEY_PREFIX)
    with transaction.atomic():
        key = AgentKey.objects.create(
            agent=agent, label=label, prefix=prefix, secret_hash=secret_hash, created_by=actor.user
        )
        audit(
            actor=actor,
            action=AuditAction.KEY_CREATE,
            project=agent.project,
            target=key.pk,
            details={"agent": agent.pk, "label": label},
        )
    return key, plaintext


def key_revoke(*, actor: Actor, key: AgentKey) -> AgentKey:
    """Revoke a key at once: it starts no more runs and opens no more sessions, and the runs it
    opened (its MCP sessions included) are finished with it, their tokens revoked, in the same
    transaction: a leaked key leaves nothing running behind it."""
    require_manager(actor, key.agent.project)
    if key.revoked_at is not None:
        return key
    with transaction.atomic():
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        runs = _finish_key_runs(AgentKey.objects.filter(pk=key.pk))
        audit(
            actor=actor,
            action=AuditAction.KEY_REVOKE,
            project=key.agent.project,
            target=key.pk,
            details={"agent": key.agent_id, "runs_finished": runs},
        )
    return key


def _finish_key_runs(keys) -> int:
    """Finish the running runs the `keys` opened, as `failed` (a person cut them off: what
    they wrote shows a failed producer, for review) with the reason `key_revoked`; their tokens
    are revoked with them. The number finished."""
    runs = Run.objects.filter(agent_key__in=keys, status=RunStatus.RUNNING).select_related(
        "project"
    )
    finished = 0
    for run in runs.order_by("started_at"):
        run_update(actor=None, run=run, status=RunStatus.FAILED, reason="key_revoked")
        finished += 1
    return finished


def _parent_of(key: AgentKey, parent_id: str) -> Run:
    """The run `parent_id` a run of the key may nest under: one the same key started, or one
    of the key's agent a manager (an orchestrator) started for it — never another agent's run,
    nor a run another key of the agent opened. Anything else is the 404 of an unknown id, so a
    run id read off a note's provenance reveals nothing (nor lends its slots, budget, quota or
    scratchpad)."""
    parent = (
        Run.objects.filter(pk=parent_id, agent_id=key.agent_id)
        .filter(Q(agent_key=key) | Q(agent_key__isnull=True))
        .first()
    )
    if parent is None:
        raise MemoryPortalError(
            "not_found",
            f"No run {parent_id} of this key's agent.",
            hint="Nest under a run this key started (its id is in the POST /api/runs answer).",
        )
    if parent.status != RunStatus.RUNNING:
        raise invalid(
            "parentRunId",
            f"Run {parent.pk} has finished ({parent.status}); nest under a running one.",
        )
    return parent


def key_run_start(
    *,
    key: AgentKey,
    parent_id: str | None = None,
    mcp_session: str = "",
    **run_fields: Unpack[RunFields],
) -> tuple[Run, str]:
    """A top-level (or, nested under the running run `parent_id`: _parent_of) run of the
    key's agent and its token, as an orchestrator's `run_start` makes them: every run rule
    holds. The run is audited as the agent's, naming the key."""
    agent = key.agent
    if parent_id:
        run_fields["parent"] = _parent_of(key, parent_id)
    with transaction.atomic():
        run = run_create(actor=None, agent=agent, audited=False, **run_fields)
        run.agent_key = key
        run.mcp_session = mcp_session
        run.last_call_at = run.started_at
        run.save(update_fields=["agent_key", "mcp_session", "last_call_at"])
        _token, plaintext = token_create(actor=None, run=run, audited=False)
        audit(
            actor=Actor.agent_run(run),
            action=AuditAction.RUN_CREATE,
            project=agent.project,
            target=run.pk,
            details={"key": key.pk, **({"mcp": True} if mcp_session else {})},
        )
    return run, plaintext


# --- MCP sessions ------------------------------------------------------------------------------


def _idle_limit() -> timedelta:
    return timedelta(minutes=settings.MEMORY_PORTAL["MCP_IDLE_MINUTES"])


def mcp_session_open(*, key: AgentKey, task_key: str) -> tuple[Run, str]:
    """A new MCP session of the key: (its run, the session id the client sends back). Idle
    sessions of the same agent are finished first."""
    runs_finish_idle(agent=key.agent)
    session = secrets.token_urlsafe(24)
    run, _token = key_run_start(key=key, mcp_session=session, task_key=task_key)
    return run, session


def mcp_session_run(*, key: AgentKey, session: str) -> Run | None:
    """The running run of the key's session `session`, its latest call recorded (to a
    minute); None when there is none — never opened, ended, or idle past the limit (then
    finished now)."""
    run = (
        Run.objects.filter(mcp_session=session, agent_key=key)
        .select_related("agent", "project", "application")
        .first()
    )
    if run is None or run.status != RunStatus.RUNNING:
        return None
    now = timezone.now()
    if run.last_call_at is not None and now - run.last_call_at > _idle_limit():
        _finish(run, reason="mcp_idle")
        return None
    if run.last_call_at is None or (now - run.last_call_at).total_seconds() > 60:
        Run.objects.filter(pk=run.pk).update(last_call_at=now)
        run.last_call_at = now
    return run


def mcp_session_close(*, key: AgentKey, session: str) -> bool:
    """The client ended the session: its run has succeeded (its token revoked)."""
    run = Run.objects.filter(mcp_session=session, agent_key=key).select_related("project").first()
    if run is None:
        return False
    if run.status == RunStatus.RUNNING:
        _finish(run, reason="mcp_session_end")
    return True


def runs_finish_idle(*, agent: Agent | None = None, now: datetime | None = None) -> int:
    """Finish the MCP sessions (of `agent`, or of every agent) idle past the limit; the
    number finished."""
    cutoff = (now or timezone.now()) - _idle_limit()
    idle = Run.objects.filter(
        status=RunStatus.RUNNING, last_call_at__lt=cutoff
    ).exclude(mcp_session="").select_related("project")
    if agent is not None:
        idle = idle.filter(agent=agent)
    finished = 0
    for run in idle[:500]:
        _finish(run, reason="mcp_idle")
        finished += 1
    return finished


def _finish(run: Run, *, reason: str) -> None:
    run_update(actor=None, run=run, status=RunStatus.SUCCEEDED, reason=reason)

