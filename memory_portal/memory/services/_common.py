"""What every service shares: the setting-row lock, the revision bump and the audit row,
all inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction
from django.db.models import OuterRef, Q, Subquery
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from django.tasks.backends.immediate import ImmediateBackend
from django.utils import timezone

from .. import counters, fastsql
from ..access import actor_role, project_not_found
from ..actors import Actor
from ..audit_actions import AuditAction
from ..models import AuditEvent, MemorySetting, Note, Project, Role, Status
from ..selectors import note_by_id_q, note_get, note_not_found

# Details every audit event written inside `audit_context` carries (a run revert marks the
# per-note events of the services it calls with its id and run).
_audit_extra: ContextVar[dict | None] = ContextVar("audit_extra", default=None)


@contextmanager
def audit_context(**details) -> Iterator[None]:
    token = _audit_extra.set({**(_audit_extra.get() or {}), **details})
    try:
        yield
    finally:
        _audit_extra.reset(token)


def lock_setting(project: Project) -> MemorySetting:
    """Lock the project's setting row for the rest of the transaction. PostgreSQL takes a row
    lock; SQLite runs every write transaction IMMEDIATE, so one writer holds the database.
    The locked row becomes `project.memory_setting`: a caller holding the same project object
    (the dashboard re-rendering its counters) sees the state this change leaves, unread."""
    assert transaction.get_connection().in_atomic_block, "lock_setting needs a transaction"
    with fastsql.bounded_lock_wait():
        setting = MemorySetting.objects.select_for_update().filter(project_id=project.pk).first()
    if setting is None:
        if not Project.objects.filter(pk=project.pk).exists():
            # Deleted while this call was on its way (project_delete holds this lock): refuse
            # cleanly rather than fail on the foreign key.
            raise project_not_found(project.slug)
        MemorySetting.objects.get_or_create(
            project_id=project.pk, defaults=counters.recounted(project.pk)
        )
        setting = MemorySetting.objects.select_for_update().get(project_id=project.pk)
    project.memory_setting = setting
    return setting


def bump(
    setting: MemorySetting,
    *,
    wrote_note: bool = False,
    counted: dict[str, int] | None = None,
    **fields,
) -> None:
    """Advance the project's memory revision (and any other setting fields) in place, in one
    UPDATE. `counted` is the change to the stored note counters (counters.moved), added in
    the database to the values the locked row holds."""
    setting.revision += 1
    if wrote_note:
        fields["last_write_at"] = timezone.now()
    for name, value in fields.items():
        setattr(setting, name, value)
    values = {"revision": setting.revision, **fields, **counters.changes(setting, counted or {})}
    MemorySetting.objects.filter(pk=setting.pk).update(**values)


def save_note_change(
    actor: Actor | None,
    setting: MemorySetting,
    note: Note,
    fields: tuple[str, ...],
    action: AuditAction,
    *,
    was: counters.State | None = None,
    **audit_fields,
) -> None:
    """One change to an existing note, recorded: its `fields` saved (with `updated_at`), the
    project's revision advanced (`setting` is locked), the stored counters moved when the note
    left the state `was` (its status and trust before), and the action audited
    (`audit_fields`: details, recovery_id)."""
    note.updated_at = timezone.now()
    note.save(update_fields=[*fields, "updated_at"])
    bump(setting, counted=counters.moved(was, note) if was is not None else None)
    audit(actor=actor, action=action, project=note.project, note=note, **audit_fields)


def change_note(
    actor: Actor | None,
    setting: MemorySetting,
    note: Note,
    action: AuditAction,
    changes: dict,
    **audit_fields,
) -> None:
    """Set `changes` (field: value) on `note` and record them with `save_note_change`, the
    stored counters moved from the note's state before."""
    before = counters.state_of(note)
    for name, value in changes.items():
        setattr(note, name, value)
    save_note_change(actor, setting, note, tuple(changes), action, was=before, **audit_fields)


def audit(**kwargs) -> AuditEvent:
    """Record who did what. `details` carries ids, counts and reasons, never note content."""
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
        details={**(_audit_extra.get() or {}), **(details or {})},
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
        project_id=OuterRef("project_id"),
        content_hash=OuterRef("content_hash"),
        status=Status.ACTIVE,
    ).exclude(pk=OuterRef("pk"))
    return Subquery(twins.values("pk")[:1])


def locked_note(
    actor: Actor, note_id: str, project: Project | None = None
) -> tuple[Note, MemorySetting]:
    """Load and authorise once: find the note as the actor sees it, lock the project's setting
    row, and read the note under the lock, so every rule below judges the current state. With
    `project` (the caller knows it, as the dashboard's URL does) the note is read only under
    the lock, and must be of that project."""
    if project is None:
        project = note_get(actor=actor, note_id=note_id).project
        by_id = Q(pk=note_id)
    else:
        by_id = note_by_id_q(actor=actor, project=project, note_id=note_id)
    setting = lock_setting(project)
    note = Note.objects.select_for_update().filter(by_id).annotate(live_twin_id=live_twin())
    note = note.first()
    if note is None:
        raise note_not_found(note_id)
    note.project = project
    return note, setting


def is_manager(actor: Actor, project: Project) -> bool:
    return actor.is_person and actor_role(actor, project) == Role.MANAGER


def tasks_run_in_process() -> bool:
    """True when an enqueued task runs at once where it was enqueued (the immediate backend,
    `make run`); False when it waits in the database for a `db_worker`
    (MEMORY_PORTAL_TASKS=database). Every task here uses the default backend."""
    return isinstance(task_backends[DEFAULT_TASK_BACKEND_ALIAS], ImmediateBackend)
