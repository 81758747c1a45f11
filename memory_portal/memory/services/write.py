"""The write protocol (SPEC §2.4), the one way a note is inserted: the epoch, the gate,
idempotency, never-resurrect, the caps and the supersede, judged under the project's lock by
one `project_change` (services/change.py)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory_portal import metrics

from .. import counters, deadline, fastsql, outbox
from ..access import replacing_needs_manager
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..ids import new_note_id
from ..models import (
    REASON_SUPERSEDED,
    Agent,
    Kind,
    Note,
    Project,
    Scope,
    Status,
)
from ..selectors import note_get, note_not_found
from ._common import audit_event, is_manager
from .change import ProjectChange, project_change
from .schedule import routine_ensure
from .trace import OpenCall


@dataclass(frozen=True)
class WriteResult:
    note: Note
    created: bool


def stamp_provenance(actor: Actor, note: Note) -> None:
    """Who wrote the note: the agent run (its agent, stage, run, task and step) or the person."""
    if actor.is_agent:
        run = actor.run
        note.created_by_agent_id = run.agent_id
        note.created_by_stage = run.agent.stage
        note.origin_run = run
        note.origin_run_ref = run.pk
        note.top_level_run_id = run.top_level_run_id
        note.task_key = run.task_key
        note.step = run.current_step  # the step the orchestrator last reported
    else:
        note.created_by_user = actor.user


def insert_note(
    actor: Actor,
    project: Project,
    epoch: int,
    note: Note,
    *,
    supersede_id: str | None = None,
    action: AuditAction = AuditAction.NOTE_WRITE,
    start_review_of: Agent | None = None,
    call: OpenCall | None = None,
) -> WriteResult:
    """Step 2 of the protocol, retried once when a concurrent identical insert wins the
    unique constraint (step 3): the retry then finds that note and returns its id. A new
    note of `start_review_of` starts that agent's daily review in the same transaction;
    `call` is the API call the write takes from its run's budget."""
    if supersede_id is None and start_review_of is None:
        written = _write_clean(actor, project, epoch, note, action, call)
        if written is not None:
            return written
    for attempt in (1, 2):
        inserting = counters.moved(None, note)  # the new note, counted with the lock
        try:
            with project_change(
                project, actor=actor, epoch=epoch, gate=True, inserting=inserting, call=call
            ) as change:
                existing_id = _insert_locked(change, note, supersede_id, action)
                if existing_id is not None:
                    change.discard()  # nothing changed: the lock's revision advance goes too
                else:
                    transaction.on_commit(metrics.note_written)
                    if start_review_of is not None:
                        routine_ensure(actor=actor, agent=start_review_of)
        except IntegrityError:
            if attempt == 2:
                raise
            note = _fresh_copy(note)
            continue
        if existing_id is not None:
            return WriteResult(Note.objects.get(pk=existing_id), created=False)
        return WriteResult(note, created=True)
    raise AssertionError("unreachable")


def _write_details(note: Note) -> dict:
    """A new note's audit details (never its content)."""
    return {"kind": note.kind, "scope": note.scope, "target": note.target}


def _write_clean(
    actor: Actor,
    project: Project,
    epoch: int,
    note: Note,
    action: AuditAction,
    call: OpenCall | None,
) -> WriteResult | None:
    """The common case — a new note nothing objects to — in one round trip that holds the
    project's lock inside the database only (fastsql.write_clean): the same checks as
    `project_change` + `admit`, written as the condition of the insert. None when it did not
    write (or elsewhere than PostgreSQL): the full protocol below then judges the note and says
    why. Everything is prepared before the lock: the note, its audit event, the counters."""
    if actor is None or not actor.is_agent or (call is not None and call.settled):
        return None  # people's saves and edits take the full protocol (a supersede, a review)
    now = timezone.now()
    note.created_at = note.updated_at = now
    details = _write_details(note)
    event = audit_event(actor=actor, action=action, project=project, note=note, details=details)
    announced = outbox.event_of(event, project=project, note=note)
    clean = fastsql.CleanWrite(
        project_id=project.pk,
        epoch=epoch,
        cap=settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"],
        quota=settings.MEMORY_PORTAL["RUN_NOTE_QUOTA"],
        top_level_run_id=actor.run.top_level_run_id,
        place_key=note.place_key,
        content_key=note.content_key,
        counted=counters.moved(None, note),
        now=now,
        call=call.to_take(now) if call is not None else None,
    )
    deadline.check()
    try:
        done = fastsql.write_clean(note, event, clean, announced)
    except IntegrityError:
        return None  # a concurrent identical insert won: the full protocol finds it
    if done is None:
        return None
    setting, calls_used = done
    project.memory_setting = setting
    outbox.announce_after_commit(project.pk, listeners=setting.listeners)
    if call is not None:
        call.run.tool_calls = calls_used
        call.settled = True
    transaction.on_commit(metrics.note_written)
    return WriteResult(note, created=True)


def _insert_locked(
    change: ProjectChange, note: Note, supersede_id: str | None, action: AuditAction
) -> str | None:
    """Under the lock: idempotency, never-resurrect and both caps (`change.admit`), then the
    insert and its audit event on hand-built SQL (memory/fastsql.py). Returns the id of an
    identical live note instead of inserting, when there is one."""
    existing_id = change.admit(note)
    old = _lock_superseded(change, supersede_id, note) if supersede_id else None
    if existing_id is not None:
        if old is not None:
            raise MemoryPortalError(
                "memory_duplicate_active",
                f"The replacement text is already live as {existing_id}.",
            )
        return existing_id
    now = change.now
    note.created_at = note.updated_at = now
    details = _write_details(note)
    if old is not None:
        note.supersedes = old
        details["supersedes"] = old.pk
    fastsql.insert_pair(note, change.event(action, note=note, details=details))
    if old is not None:
        archived = counters.moved(counters.state_of(old), counters.archived_state(old))
        old.status = Status.ARCHIVED
        old.archive_reason = REASON_SUPERSEDED
        old.archived_at = now
        old.superseded_by = note
        old.updated_at = now
        old.save(
            update_fields=["status", "archive_reason", "archived_at", "superseded_by", "updated_at"]
        )
        change.changed(counted=archived)
    return None


def _fresh_copy(note: Note) -> Note:
    """The unsaved note again, with a new id, for the retry after a lost race."""
    note.pk = new_note_id()
    note._state.adding = True
    return note


def _lock_superseded(change: ProjectChange, note_id: str, new: Note) -> Note:
    """The one supersede rule (SPEC §2.3), for every caller and route, under the lock: the old
    note is one the caller can see, in the same place as its replacement (in v1: a fact of
    the same agent, never a shared note), live, not a day log; a reviewed or rejected note is
    replaced only by a manager. Superseding never does what the caller could not do
    directly."""
    actor, project = change.actor, change.project
    old = Note.objects.select_for_update().filter(pk=note_id, project=project).first()
    if old is None or old.status == Status.FORGOTTEN:
        raise note_not_found(note_id)
    if old.kind == Kind.DAY:
        raise MemoryPortalError("memory_day_append_only", "A day log cannot be superseded.")
    same_place = (
        old.scope == new.scope
        and old.owner_agent_id == new.owner_agent_id
        and old.application_id == new.application_id
    )
    if not same_place:
        if new.scope == Scope.AGENT and old.scope != Scope.AGENT:
            message = f"{note_id} is a shared note; v1 supersedes an agent's own facts only."
            hint = "Correct a shared note with memory_forget and a new memory_write."
        else:
            message = f"{note_id} is not a fact of {new.owner_agent_id}; supersede its own."
            hint = "Name the agent whose fact this is, or save a new fact."
        raise MemoryPortalError("memory_agent_mismatch", message, hint=hint)
    note_get(actor=actor, note_id=note_id)  # and one the caller may see (not found otherwise)
    if old.status != Status.ACTIVE:
        raise MemoryPortalError(
            "memory_supersede_archived",
            f"{note_id} is {old.archive_reason or old.status}; only a live note is superseded.",
        )
    if replacing_needs_manager(old) and not is_manager(actor, project):
        raise MemoryPortalError(
            "memory_trust_locked",
            f"{note_id} is {old.trust}; only a project manager can replace it.",
            hint="Ask a project manager, or save a new memory beside it.",
        )
    return old
