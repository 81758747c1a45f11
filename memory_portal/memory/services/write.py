"""The write protocol (SPEC §2.4), the one way a note is inserted: the epoch, the gate,
idempotency, never-resurrect, the caps and the supersede, judged under the setting-row lock."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from .. import counters, fastsql
from ..access import (
    check_agent_gate,
    request_setting,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import (
    REASON_SUPERSEDED,
    REASON_VETOED,
    Agent,
    Kind,
    MemorySetting,
    Note,
    Project,
    Scope,
    Status,
    Trust,
)
from ..selectors import (
    note_get,
    note_not_found,
    setting_get,
)
from ._common import audit_event, is_manager, lock_setting
from .schedule import routine_ensure
from .trace import call_taken, call_to_take, call_unsettle


@dataclass(frozen=True)
class WriteResult:
    note: Note
    created: bool


def _provenance(actor: Actor, note: Note) -> None:
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


def _refuse_resurrection(same: list[fastsql.SameContent]) -> str | None:
    """Under the lock: the id of an identical active note in the same place (an idempotent
    write returns it); content that was forgotten, rejected or vetoed anywhere in the project,
    in any kind, place or route, is refused — a write never brings it back (SPEC §2.3)."""
    active = next((row for row in same if row.same_place and row.status == Status.ACTIVE), None)
    if active is not None and active.trust != Trust.REJECTED:
        return active.id
    hint = "A person decided against this content; write something else."
    for row in same:
        if row.status == Status.FORGOTTEN:
            raise MemoryPortalError(
                "memory_forgotten",
                f"The same content was forgotten ({row.id}).",
                hint="A manager can restore it from Recoveries; do not write it again.",
            )
    for row in same:
        if row.trust == Trust.REJECTED:
            raise MemoryPortalError(
                "memory_rejected",
                f"The same content was rejected by a manager ({row.id}).",
                hint=hint,
            )
    for row in same:
        if row.status == Status.ARCHIVED and row.archive_reason == REASON_VETOED:
            raise MemoryPortalError(
                "memory_vetoed", f"The same content was vetoed ({row.id}).", hint=hint
            )
    return None


def _check_caps(actor: Actor, project: Project, check: fastsql.WriteCheck) -> None:
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    if check.total >= cap:
        raise MemoryPortalError(
            "memory_project_full", f"Project {project.slug} stores {cap} notes, its limit."
        )
    quota = settings.MEMORY_PORTAL["RUN_NOTE_QUOTA"]
    if actor.is_agent and check.by_run >= quota:
        raise MemoryPortalError(
            "memory_run_quota",
            f"Run {actor.run.top_level_run_id} already wrote {quota} new notes.",
            hint=f"A run writes at most {quota} new notes; finish the task, or start a new run.",
        )


def _write_check(
    actor: Actor, project: Project, note: Note, call: fastsql.CallToTake | None = None
) -> fastsql.WriteCheck:
    top = actor.run.top_level_run_id if actor.is_agent else ""
    return fastsql.write_check(project.pk, note.content_hash, note.content_key, top, call)


def _current_setting(actor: Actor, project: Project):
    """The switch and epoch as they are now, read outside the lock (step 1 of the protocol):
    as this request's token check read them, or read now."""
    return (
        request_setting(actor, project)
        or fastsql.read_setting_row(project.pk)
        or setting_get(project=project)
    )


def _check_epoch(setting: MemorySetting, epoch: int) -> None:
    if setting.revocation_epoch != epoch:
        raise MemoryPortalError(
            "memory_write_revoked",
            "Memory was disabled or reset while this write was being checked.",
            hint="Check memory_status, then send the write again.",
        )


def _insert(
    actor: Actor,
    project: Project,
    epoch: int,
    note: Note,
    supersede_id: str | None = None,
    action: AuditAction = AuditAction.NOTE_WRITE,
    start_review_of: Agent | None = None,
) -> WriteResult:
    """Step 2 of the protocol, retried once when a concurrent identical insert wins the
    unique constraint (step 3): the retry then finds that note and returns its id. A new
    note of `start_review_of` starts that agent's daily review in the same transaction."""
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                existing_id = _insert_locked(actor, project, epoch, note, supersede_id, action)
                if existing_id is not None:
                    transaction.set_rollback(True)  # undo the revision bump: nothing changed
                    call_unsettle()  # and the API call taken with it
                elif start_review_of is not None:
                    routine_ensure(actor=actor, agent=start_review_of)
        except BaseException as exc:
            call_unsettle()  # the API call's budget and trace row rolled back too
            if not isinstance(exc, IntegrityError) or attempt == 2:
                raise
            note = _fresh_copy(note)
            continue
        if existing_id is not None:
            return WriteResult(Note.objects.get(pk=existing_id), created=False)
        return WriteResult(note, created=True)
    raise AssertionError("unreachable")


def _insert_locked(
    actor: Actor,
    project: Project,
    epoch: int,
    note: Note,
    supersede_id: str | None,
    action: AuditAction,
) -> str | None:
    """Under the setting-row lock, on hand-built SQL (memory/fastsql.py): the epoch, the gate,
    idempotency and never-resurrect, both caps, then the insert and its audit event. Returns
    the id of an identical live note instead of inserting, when there is one."""
    now = timezone.now()
    counted = counters.moved(None, note)  # the new note, counted with the lock's bump
    setting = fastsql.lock_and_bump(project.pk, now=now, counted=counted)
    if setting is None:  # a project made before its setting row: make the row first
        lock_setting(project)
        setting = fastsql.lock_and_bump(project.pk, now=now, counted=counted)
    _check_epoch(setting, epoch)
    check_agent_gate(actor, setting, write=True)
    call = call_to_take()  # the API call that makes this write: its budget and trace row
    check = _write_check(actor, project, note, call)
    if call is not None:
        call_taken(check.calls_used)
    existing_id = _refuse_resurrection(check.same)
    old = _lock_superseded(actor, project, supersede_id, note) if supersede_id else None
    if existing_id is not None:
        if old is not None:
            raise MemoryPortalError(
                "memory_duplicate_active",
                f"The replacement text is already live as {existing_id}.",
            )
        return existing_id
    _check_caps(actor, project, check)
    note.created_at = note.updated_at = now
    details = {"kind": note.kind, "scope": note.scope, "target": note.target}
    if old is not None:
        note.supersedes = old
        details["supersedes"] = old.pk
    event = audit_event(actor=actor, action=action, project=project, note=note, details=details)
    fastsql.insert_pair(note, event)
    if old is not None:
        archived = counters.moved(counters.state_of(old), (Status.ARCHIVED, old.trust))
        old.status = Status.ARCHIVED
        old.archive_reason = REASON_SUPERSEDED
        old.archived_at = now
        old.superseded_by = note
        old.updated_at = now
        old.save(
            update_fields=["status", "archive_reason", "archived_at", "superseded_by", "updated_at"]
        )
        counters.apply(setting.id, archived)
    return None


def _fresh_copy(note: Note) -> Note:
    """The unsaved note again, with a new id, for the retry after a lost race."""
    from ..ids import new_note_id

    note.pk = new_note_id()
    note._state.adding = True
    return note


def _lock_superseded(actor: Actor, project: Project, note_id: str, new: Note) -> Note:
    """The one supersede rule (SPEC §2.3), for every caller and route, under the lock: the old
    note is one the caller can see, in the same place as its replacement (in v1: a fact of
    the same agent, never a shared note), live, not a day log; a reviewed or rejected note is
    replaced only by a manager. Superseding never does what the caller could not do
    directly."""
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
    if old.trust != Trust.LEARNED and not is_manager(actor, project):
        raise MemoryPortalError(
            "memory_trust_locked",
            f"{note_id} is {old.trust}; only a project manager can replace it.",
            hint="Ask a project manager, or save a new memory beside it.",
        )
    return old
