"""What the services share beside `project_change` (change.py): the audit row of an action,
the live-twin subquery, the manager check and how tasks run."""

from __future__ import annotations

from django.db.models import OuterRef, Subquery
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from django.tasks.backends.immediate import ImmediateBackend

from .. import fastsql
from ..access import actor_role
from ..actors import Actor
from ..audit_actions import AuditAction
from ..models import AuditEvent, Note, Project, Role, live_in_place_q


def audit(**kwargs) -> AuditEvent:
    """Record who did what, for an action that changes no project's memory (an agent or a run
    made, a routine paused); a change to a project audits through its `ProjectChange`.
    `details` carries ids, counts and reasons, never note content."""
    return fastsql.insert(audit_event(**kwargs))


def audit_event(
    *,
    actor: Actor | None,
    action: AuditAction,
    project: Project | None,
    note: Note | None = None,
    recovery_id: str = "",
    target: str = "",
    details: dict | None = None,
) -> AuditEvent:
    """The unsaved audit row of an action (see `audit`). An action outside `AuditAction` is a
    bug: it raises ValueError rather than record a name the audit log does not know."""
    event = AuditEvent(
        project=project,
        project_ref=project.slug if project is not None else "",
        action=AuditAction(action).value,
        note_ref=note.pk if note is not None else "",
        recovery_ref=recovery_id,
        target_ref=target,
        details=details or {},
    )
    if actor is None:
        event.actor_label = "system"
    elif actor.is_person:
        event.actor_user = actor.user
        event.actor_label = actor.user.get_username()
    else:
        event.actor_agent_id = actor.run.agent_id
        event.actor_run_id = actor.run.pk
        event.actor_label = actor.run.agent.name
    return event


def live_twin() -> Subquery:
    """Another active note of the project with the same content hash (read with the note)."""
    twins = Note.objects.filter(
        live_in_place_q(OuterRef("place_key")), project_id=OuterRef("project_id")
    ).exclude(pk=OuterRef("pk"))
    return Subquery(twins.values("pk")[:1])


def is_manager(actor: Actor, project: Project) -> bool:
    return actor.is_person and actor_role(actor, project) == Role.MANAGER


def tasks_run_in_process() -> bool:
    """True when an enqueued task runs at once where it was enqueued (the immediate backend,
    `make run`); False when it waits in the database for a `db_worker`
    (MEMORY_PORTAL_TASKS=database). Every task here uses the default backend."""
    return isinstance(task_backends[DEFAULT_TASK_BACKEND_ALIAS], ImmediateBackend)
