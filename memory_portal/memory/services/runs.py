"""Run services: agents, the runs an orchestrator starts and reports on, and API tokens (a run's
and a person's)."""

from __future__ import annotations

from typing import TypedDict, Unpack

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from .. import tokens
from ..access import require_manager, require_member, require_person, require_run_reporter
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import (
    Agent,
    ApiToken,
    Application,
    Project,
    Run,
    RunStatus,
    ScratchpadItem,
    Stage,
)
from ..validation import TASK_KEY_MAX, gate, require_name, run_task, task_text
from ._common import audit
from .change import project_change
from .vectors import task_vector

STEP_MAX = 100  # Note.step and Run.current_step
TOKEN_LABEL_MAX = 100  # ApiToken.label


def agent_create(
    *,
    actor: Actor | None,
    project: Project,
    name: str,
    stage: str,
    application: Application | None = None,
) -> Agent:
    if actor is not None:
        require_manager(actor, project)
    require_stage(stage)
    name = require_name("name", name)
    if application is not None and application.project_id != project.pk:
        raise invalid("applicationId", "The application belongs to another project.")
    with transaction.atomic():
        agent = Agent.objects.create(
            project=project, application=application, name=name, stage=stage
        )
        audit(actor=actor, action=AuditAction.AGENT_CREATE, project=project, target=agent.pk)
    return agent


def require_stage(stage: str) -> None:
    if stage not in Stage.values:
        raise invalid("stage", f"stage must be one of {', '.join(Stage.values)}.")


def require_active_agent(agent: Agent) -> None:
    """A retired agent starts no runs and takes no new keys (its notes and runs stay)."""
    if agent.retired_at is not None:
        raise MemoryPortalError(
            "memory_forbidden",
            f"Agent {agent.pk} is retired; it starts no runs and takes no new keys.",
            hint="Create a new agent for new work.",
        )


def run_create(
    *,
    actor: Actor | None,
    agent: Agent,
    parent: Run | None = None,
    task_key: str = "",
    task_title: str = "",
    task_description: str = "",
    audited: bool = True,
) -> Run:
    """Start a run of an agent (the orchestrator does this); a nested run shares its parent's
    top-level run and so its scratchpad and note quota. The task (title and description,
    optional) is what a start recall without a query scores against. A retired agent starts
    no runs. `audited=False`: the caller records the start itself (services.keys)."""
    if actor is not None:
        require_manager(actor, agent.project)
    require_active_agent(agent)
    if parent is not None and parent.project_id != agent.project_id:
        raise invalid("parentRunId", "The parent run belongs to another project.")
    task_key = gate("taskKey", task_key or "", max_len=TASK_KEY_MAX, line=True, required=False)
    task_title, task_description = run_task(task_title, task_description)
    # Embedded once, here, before any row is written: every start recall of the run reads it.
    task_embedding, task_embedding_model = task_vector(task_text(task_title, task_description))
    with transaction.atomic():
        run = Run(
            agent=agent,
            project_id=agent.project_id,
            application_id=agent.application_id,
            parent=parent,
            task_key=task_key,
            task_title=task_title,
            task_description=task_description,
            task_embedding=task_embedding,
            task_embedding_model=task_embedding_model,
        )
        run.save(force_insert=True)
        if audited:
            audit(actor=actor, action=AuditAction.RUN_CREATE, project=agent.project, target=run.pk)
    return run


def run_update(
    *,
    actor: Actor | None,
    run: Run,
    status: str | None = None,
    step: str | None = None,
    reason: str = "",
) -> Run:
    """The orchestrator's report on a run (a manager, or the run's own token when an agent key
    started it: access.require_run_reporter): its status and / or the step it is in now (every
    note the run writes from then on records that step). A run that leaves `running` has
    finished: its tokens are revoked in the same transaction, so they stop working at once
    (SPEC §2.3), and it cannot run again or change step; its final status may still be
    corrected between succeeded and failed. `reason`: why the portal itself finished it (an
    MCP session ended or idle), recorded in the audit row."""
    if actor is not None:
        require_run_reporter(actor, run)
    if status is None and step is None:
        raise invalid("status", "Send status, step or both.")
    if status is not None and status not in RunStatus.values:
        raise invalid("status", "status must be running, succeeded or failed.")
    if step is not None:
        step = gate("step", step, max_len=STEP_MAX, line=True, required=False)
    with project_change(run.project, actor=actor) as change:
        run = Run.objects.select_for_update().select_related("project").get(pk=run.pk)
        if run.status != RunStatus.RUNNING and (
            status == RunStatus.RUNNING or (step is not None and step != run.current_step)
        ):
            raise invalid(
                "status" if status == RunStatus.RUNNING else "step",
                f"Run {run.pk} has finished ({run.status}); a finished run does not run again.",
                hint="Start a new run (POST …/runs) for new work.",
            )
        now = timezone.now()
        changed: list[str] = []
        details: dict = {}
        if step is not None and step != run.current_step:
            run.current_step = step
            changed.append("current_step")
            details["step"] = step
        if status is not None and status != run.status:
            run.status = status
            run.finished_at = now
            changed += ["status", "finished_at"]
            details["status"] = status
            if reason:
                details["reason"] = reason
            details["tokens_revoked"] = ApiToken.objects.filter(
                run=run, revoked_at__isnull=True
            ).update(revoked_at=now)
        if not changed:
            return run
        run.save(update_fields=changed)
        if "status" in details:
            change.changed()  # producer status is visible on every note the run wrote
        change.audit(
            AuditAction.RUN_STATUS if "status" in details else AuditAction.RUN_STEP,
            target=run.pk,
            details=details,
        )
    return run


def run_delete(*, actor: Actor | None, run: Run) -> dict[str, int]:
    """Delete a run: its scratchpad (when it is a top-level run) goes, live references are
    cleared; notes keep the stage, agent and run id as text (producer status `unknown`)."""
    if actor is not None:
        require_manager(actor, run.project)
    project = run.project
    run_id = run.pk
    with project_change(project, actor=actor) as change:
        items = 0
        if run.top_level_run_id == run_id:
            items = ScratchpadItem.objects.filter(top_level_run_id=run_id).delete()[0]
        run.delete()
        change.changed()
        change.audit(AuditAction.RUN_DELETE, target=run_id, details={"scratchpad_items": items})
    return {"scratchpad_items": items}


class RunFields(TypedDict, total=False):
    """What `run_create` takes besides the actor and the agent."""

    parent: Run | None
    task_key: str
    task_title: str
    task_description: str


def run_start(
    *, actor: Actor | None, agent: Agent, can_write: bool = True, **run_fields: Unpack[RunFields]
) -> tuple[Run, str]:
    """What an orchestrator does to start an agent: the run and its token, in one transaction
    (a run never exists without its token: if minting fails, no run is left). The token's
    plaintext is returned once."""
    with transaction.atomic():
        run = run_create(actor=actor, agent=agent, **run_fields)
        _token, plaintext = token_create(actor=actor, run=run, can_write=can_write)
    return run, plaintext


def token_create(
    *,
    actor: Actor | None,
    run: Run | None = None,
    user=None,
    can_write: bool = True,
    label: str = "",
    expires_at=None,
    audited: bool = True,
) -> tuple[ApiToken, str]:
    """Mint a token for a run (an agent caller) or a user (a person, with an optional label
    and expiry). The plaintext is returned once and never stored. `audited=False`: the caller
    records it (a key's run start)."""
    if (run is None) == (user is None):
        raise ValueError("A token is bound to a run or to a user.")
    if actor is not None:
        if run is not None:
            require_manager(actor, run.project)
        else:
            require_person(actor, what="minting a person's token")
            if actor.user.pk != user.pk and not actor.user.is_superuser:
                raise MemoryPortalError("memory_forbidden", "Mint tokens for yourself only.")
    if user is not None and not isinstance(user, get_user_model()):
        raise ValueError("user must be a user")
    if run is not None and run.status != RunStatus.RUNNING:
        raise invalid(
            "runId",
            f"Run {run.pk} has finished ({run.status}); its tokens are revoked for good.",
            hint="Start a new run for new work.",
        )
    label = gate("label", label, max_len=TOKEN_LABEL_MAX, line=True, required=False)
    if expires_at is not None and expires_at <= timezone.now():
        raise invalid("expiresAt", "A token's expiry must be in the future.")
    plaintext, prefix, secret_hash = tokens.generate()
    with transaction.atomic():
        token = ApiToken.objects.create(
            prefix=prefix,
            secret_hash=secret_hash,
            run=run,
            user=user,
            can_write=can_write,
            label=label,
            expires_at=expires_at,
        )
        if audited:
            audit(
                actor=actor,
                action=AuditAction.TOKEN_CREATE,
                project=run.project if run is not None else None,
                target=f"tok_{prefix}",
                details={"scopes": token.scopes, "run": run.pk if run else ""},
            )
    return token, plaintext


def token_revoke(*, actor: Actor | None, token: ApiToken) -> ApiToken:
    """Revoke a token at once: a run's by a manager of its project, a person's by that person
    (or a superuser)."""
    if actor is not None and token.run is not None:
        require_member(actor, token.run.project)
        require_manager(actor, token.run.project)
    if actor is not None and token.user_id is not None:
        require_person(actor, what="revoking a token")
        if actor.user.pk != token.user_id and not actor.user.is_superuser:
            raise MemoryPortalError("memory_forbidden", "Revoke your own tokens only.")
    if token.revoked_at is not None:
        return token
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit(
            actor=actor,
            action=AuditAction.TOKEN_REVOKE,
            project=token.run.project if token.run_id else None,
            target=f"tok_{token.prefix}",
        )
    return token
