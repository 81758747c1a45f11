"""Changes to an existing note's life, each one `project_change` recorded by its
`change_note`: archive, unarchive, veto, undo, forget, restore. `within`: the change a run's
revert (or its undo) makes them part of."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from ..access import (
    actor_role,
    is_replaced,
    require_manager,
    require_person,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import (
    REASON_EXPIRED,
    REASON_SUPERSEDED,
    REASON_VETOED,
    Kind,
    Note,
    Project,
    RecallDay,
    Recovery,
    Status,
    Trust,
)
from ..selectors import (
    note_not_found,
    recoveries_for_actor,
)
from ..validation import ARCHIVE_REASON_MAX, require_text, review_reason
from ._common import live_twin
from .change import ProjectChange, note_project, project_change

RESERVED_REASONS = {REASON_VETOED, REASON_SUPERSEDED, REASON_EXPIRED}


def _require_own(actor: Actor, note: Note) -> None:
    if actor.is_agent:
        agent_id = actor.run.agent_id
        if note.owner_agent_id != agent_id and note.created_by_agent_id != agent_id:
            raise MemoryPortalError("memory_not_own", f"{note.pk} is another agent's memory.")


def _archived(reason: str, **also) -> dict:
    """The changes that archive a note with `reason` (and `also`, who or what replaced it)."""
    return {
        "status": Status.ARCHIVED,
        "archive_reason": reason,
        "archived_at": timezone.now(),
        **also,
    }


def _note_change(
    actor: Actor, note_id: str, project: Project | None, within: ProjectChange | None, **checks
):
    """The change of one note's project (the note is read with `ProjectChange.note`)."""
    project = within.project if within is not None else note_project(actor, note_id, project)
    return project_change(project, actor=actor, within=within, **checks)


def note_archive(
    *,
    actor: Actor,
    note_id: str,
    reason: str,
    project: Project | None = None,
    within: ProjectChange | None = None,
) -> Note:
    """Archive with a reason: the owning agent (its own notes) or a person."""
    text = require_text("reason", reason, max_len=ARCHIVE_REASON_MAX)
    if text.lower() in RESERVED_REASONS:
        raise invalid("reason", f"The reason {text!r} is set by Memory Portal itself.")
    with _note_change(actor, note_id, project, within, gate=True) as change:
        note = change.note(note_id)
        _require_own(actor, note)
        if note.status == Status.FORGOTTEN:
            raise invalid("id", f"{note.pk} is forgotten; restore it first.")
        if note.status == Status.ARCHIVED:
            return note
        change.change_note(note, AuditAction.NOTE_ARCHIVE, _archived(text))
    return note


def _unarchive(
    *,
    actor: Actor,
    note_id: str,
    action: AuditAction,
    project: Project | None,
    within: ProjectChange | None,
) -> Note:
    with _note_change(actor, note_id, project, within, gate=True) as change:
        note = change.note(note_id)
        _require_own(actor, note)
        if note.status == Status.ACTIVE:
            return note
        if note.status == Status.FORGOTTEN:
            raise invalid("id", f"{note.pk} is forgotten; restore it with its recoveryId.")
        if is_replaced(note):
            raise MemoryPortalError(
                "memory_superseded",
                f"{note.pk} was replaced by {note.superseded_by_id or 'a newer memory'}.",
            )
        if note.is_vetoed and actor.is_agent:
            raise MemoryPortalError(
                "memory_veto_human_only", f"{note.pk} was vetoed; only a person can undo that."
            )
        _check_unique_live(note)
        details = {"was_vetoed": note.is_vetoed}
        live = {
            "status": Status.ACTIVE,
            "archive_reason": "",
            "archived_at": None,
            "vetoed_by": None,
        }
        if note.is_vetoed:
            live["review_reason"] = ""  # the veto taken back, its reason with it
        change.change_note(note, action, live, details=details)
    return note


def _check_unique_live(note: Note) -> None:
    """`note` was read under the lock with `live_twin()` as `live_twin_id`."""
    twin = note.live_twin_id
    if twin is None:
        return
    if note.kind == Kind.DAY:
        raise MemoryPortalError(
            "memory_day_exists", f"The day log of {note.day} is already live ({twin})."
        )
    raise MemoryPortalError(
        "memory_duplicate_active", f"The same content is already live as {twin}."
    )


def note_unarchive(
    *,
    actor: Actor,
    note_id: str,
    project: Project | None = None,
    within: ProjectChange | None = None,
) -> Note:
    """Bring an archived note back: never a superseded one; a vetoed one only by a person."""
    return _unarchive(
        actor=actor,
        note_id=note_id,
        action=AuditAction.NOTE_UNARCHIVE,
        project=project,
        within=within,
    )


def note_veto(
    *,
    actor: Actor,
    note_id: str,
    reason: str = "",
    project: Project | None = None,
    within: ProjectChange | None = None,
) -> Note:
    """A person's one-click veto: archive with reason `vetoed`, recording who and, when
    given, why (`reason`, one line: the note's `review_reason`)."""
    require_person(actor, code="memory_veto_human_only", what="a veto")
    why = review_reason(reason)
    with _note_change(actor, note_id, project, within) as change:
        note = change.note(note_id)
        if note.is_vetoed:
            return note
        if note.status != Status.ACTIVE:
            raise invalid(
                "id", f"{note.pk} is not live ({note.status}); only live notes are vetoed."
            )
        vetoed = _archived(REASON_VETOED, vetoed_by=actor.user, review_reason=why)
        change.change_note(note, AuditAction.NOTE_VETO, vetoed, details=_why(why))
    return note


def _why(reason: str) -> dict:
    """An audit event's details for a decision's reason (none when not given)."""
    return {"reason": reason} if reason else {}


def note_undo(
    *,
    actor: Actor,
    note_id: str,
    project: Project | None = None,
    within: ProjectChange | None = None,
) -> Note:
    """Undo a veto (or any archive) — a person's unarchive."""
    require_person(actor, code="memory_veto_human_only", what="an undo")
    return _unarchive(
        actor=actor, note_id=note_id, action=AuditAction.NOTE_UNDO, project=project, within=within
    )


def note_forget(
    *,
    actor: Actor,
    note_id: str,
    project: Project | None = None,
    within: ProjectChange | None = None,
) -> Recovery:
    """Hide a note and keep a recovery record. Agents forget learned notes in their reach;
    managers forget any note."""
    with _note_change(actor, note_id, project, within) as change:
        note = change.note(note_id)
        if actor.is_agent:
            change.check_gate()
            if note.status != Status.ACTIVE:
                raise note_not_found(note_id)
            if note.trust != Trust.LEARNED:
                raise MemoryPortalError(
                    "memory_trust_locked", f"{note.pk} is {note.trust}; an agent cannot forget it."
                )
        else:
            require_manager(actor, note.project)
            if note.status == Status.FORGOTTEN:
                return note.recovery
        recovery = Recovery(
            project_id=note.project_id,
            note=note,
            previous_status=note.status,
        )
        if actor.is_agent:
            recovery.forgotten_by_agent_id = actor.run.agent_id
            recovery.forgotten_by_run_id = actor.run.pk
            recovery.forgotten_by_top_level_run_id = actor.run.top_level_run_id
        else:
            recovery.forgotten_by_user = actor.user
        recovery.save(force_insert=True)
        forgotten = {"status": Status.FORGOTTEN}
        change.change_note(note, AuditAction.NOTE_FORGET, forgotten, recovery_id=recovery.pk)
    return recovery


def note_restore(*, actor: Actor, recovery_id: str, within: ProjectChange | None = None) -> Note:
    """Bring a forgotten note back to the status it had, trust unchanged; the recovery record
    is consumed."""
    not_found = MemoryPortalError(
        "memory_recovery_not_found", f"No recovery {recovery_id} you can restore."
    )
    recovery = Recovery.objects.select_related("note", "project").filter(pk=recovery_id).first()
    if recovery is None:
        raise not_found
    project = recovery.project
    if actor.is_agent:
        # The recoveries this agent may list (the visibility rule) are the ones it restores.
        if not recoveries_for_actor(actor=actor).filter(pk=recovery_id).exists():
            raise not_found
    else:
        if actor_role(actor, project) is None:
            raise not_found
        require_manager(actor, project)
    if within is not None and within.project.pk != project.pk:
        raise not_found
    with project_change(project, actor=actor, gate=actor.is_agent, within=within) as change:
        recovery = Recovery.objects.select_for_update().filter(pk=recovery_id).first()
        if recovery is None:
            raise not_found
        note = (
            Note.objects.select_for_update()
            .annotate(live_twin_id=live_twin())
            .get(pk=recovery.note_id)
        )
        if recovery.previous_status == Status.ACTIVE:
            _check_unique_live(note)
        note.project = project
        status = recovery.previous_status
        recovery.delete()
        change.change_note(
            note,
            AuditAction.NOTE_RESTORE,
            {"status": status},
            recovery_id=recovery_id,
            details={"status": status},
        )
    return note


def notes_mark_recalled(
    *, project: Project, note_ids: list[str], now: datetime | None = None
) -> int:
    """Count a recall's picks: bumps recall_count and last_recalled_at, and the project's
    recalls of the day (RecallDay). Not a memory change, so the revision and fingerprint
    stay."""
    if not note_ids:
        return 0
    now = now or timezone.now()
    marked = Note.objects.filter(project=project, pk__in=note_ids).update(
        recall_count=F("recall_count") + 1, last_recalled_at=now
    )
    day = now.astimezone(UTC).date()
    counted = {"recalls": F("recalls") + 1, "picks": F("picks") + len(note_ids)}
    if not RecallDay.objects.filter(project=project, day=day).update(**counted):
        try:
            with transaction.atomic():
                RecallDay.objects.create(project=project, day=day, recalls=1, picks=len(note_ids))
        except IntegrityError:  # another recall made the day's row first
            RecallDay.objects.filter(project=project, day=day).update(**counted)
    return marked
