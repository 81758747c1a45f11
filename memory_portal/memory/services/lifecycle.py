"""Changes to an existing note's life, each under the setting-row lock and recorded by
`change_note`: archive, unarchive, veto, undo, forget, restore, merge, renew, expire."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..access import (
    actor_role,
    check_agent_gate,
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
    Recovery,
    Status,
    Trust,
    is_expired,
)
from ..selectors import (
    note_not_found,
    recoveries_for_actor,
)
from ..validation import (
    ARCHIVE_REASON_MAX,
    future_expiry,
    require_text,
)
from ._common import (
    change_note,
    is_manager,
    live_twin,
    lock_setting,
    locked_note,
)

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


def note_archive(
    *, actor: Actor, note_id: str, reason: str, project: Project | None = None
) -> Note:
    """Archive with a reason: the owning agent (its own notes) or a person."""
    text = require_text("reason", reason, max_len=ARCHIVE_REASON_MAX)
    if text.lower() in RESERVED_REASONS:
        raise invalid("reason", f"The reason {text!r} is set by Memory Portal itself.")
    with transaction.atomic():
        note, setting = locked_note(actor, note_id, project)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status == Status.FORGOTTEN:
            raise invalid("id", f"{note.pk} is forgotten; restore it first.")
        if note.status == Status.ARCHIVED:
            return note
        change_note(actor, setting, note, AuditAction.NOTE_ARCHIVE, _archived(text))
    return note


def _unarchive(*, actor: Actor, note_id: str, action: AuditAction, project: Project | None) -> Note:
    with transaction.atomic():
        note, setting = locked_note(actor, note_id, project)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status == Status.ACTIVE:
            return note
        if note.status == Status.FORGOTTEN:
            raise invalid("id", f"{note.pk} is forgotten; restore it with its recoveryId.")
        if note.superseded_by_id or note.archive_reason == REASON_SUPERSEDED:
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
        change_note(actor, setting, note, action, live, details=details)
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


def note_unarchive(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Bring an archived note back: never a superseded one; a vetoed one only by a person."""
    return _unarchive(
        actor=actor, note_id=note_id, action=AuditAction.NOTE_UNARCHIVE, project=project
    )


def note_veto(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """A person's one-click veto: archive with reason `vetoed`, recording who."""
    require_person(actor, code="memory_veto_human_only", what="a veto")
    with transaction.atomic():
        note, setting = locked_note(actor, note_id, project)
        if note.is_vetoed:
            return note
        if note.status != Status.ACTIVE:
            raise invalid(
                "id", f"{note.pk} is not live ({note.status}); only live notes are vetoed."
            )
        vetoed = _archived(REASON_VETOED, vetoed_by=actor.user)
        change_note(actor, setting, note, AuditAction.NOTE_VETO, vetoed)
    return note


def note_undo(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Undo a veto (or any archive) — a person's unarchive."""
    require_person(actor, code="memory_veto_human_only", what="an undo")
    return _unarchive(actor=actor, note_id=note_id, action=AuditAction.NOTE_UNDO, project=project)


def note_forget(*, actor: Actor, note_id: str, project: Project | None = None) -> Recovery:
    """Hide a note and keep a recovery record. Agents forget learned notes in their reach;
    managers forget any note."""
    with transaction.atomic():
        note, setting = locked_note(actor, note_id, project)
        if actor.is_agent:
            check_agent_gate(actor, setting, write=True)
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
        change_note(
            actor, setting, note, AuditAction.NOTE_FORGET, forgotten, recovery_id=recovery.pk
        )
    return recovery


def note_restore(*, actor: Actor, recovery_id: str) -> Note:
    """Bring a forgotten note back to the status it had, trust unchanged; the recovery record
    is consumed."""
    not_found = MemoryPortalError(
        "memory_recovery_not_found", f"No recovery {recovery_id} you can restore."
    )
    with transaction.atomic():
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
        setting = lock_setting(project)
        if actor.is_agent:
            check_agent_gate(actor, setting, write=True)
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
        change_note(
            actor,
            setting,
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
    """Count a recall pick: bumps recall_count and last_recalled_at. Not a memory change, so
    the revision and fingerprint stay."""
    if not note_ids:
        return 0
    return Note.objects.filter(project=project, pk__in=note_ids).update(
        recall_count=F("recall_count") + 1, last_recalled_at=now or timezone.now()
    )


# --- The daily review's changes -----------------------------------------------------------


def note_merge(*, actor: Actor, note_id: str, into_id: str) -> Note:
    """Archive a duplicate fact as superseded by an existing live one of the same agent (the
    daily review's merge: the newest copy stays)."""
    with transaction.atomic():
        old, setting = locked_note(actor, note_id)
        check_agent_gate(actor, setting, write=True)
        keeper = Note.objects.select_for_update().filter(pk=into_id, project=old.project).first()
        if keeper is None or keeper.status != Status.ACTIVE:
            raise note_not_found(into_id)
        if keeper.owner_agent_id != old.owner_agent_id or keeper.pk == old.pk:
            raise MemoryPortalError(
                "memory_agent_mismatch", "Only one agent's own facts can be merged."
            )
        if old.kind == Kind.DAY or keeper.kind == Kind.DAY:
            raise MemoryPortalError("memory_day_append_only", "Day logs are not merged.")
        if old.status != Status.ACTIVE:
            raise MemoryPortalError("memory_supersede_archived", f"{old.pk} is not live.")
        if old.trust != Trust.LEARNED and not is_manager(actor, old.project):
            raise MemoryPortalError(
                "memory_trust_locked", f"{old.pk} is {old.trust}; only a manager retires it."
            )
        merged = _archived(REASON_SUPERSEDED, superseded_by=keeper)
        change_note(
            actor, setting, old, AuditAction.NOTE_MERGE, merged, details={"into": keeper.pk}
        )
    return old


def note_renew(*, actor: Actor, note_id: str, expires_at: datetime) -> Note:
    """Push a fact's expiry forward (the daily review renews facts still being recalled)."""
    expires_at = future_expiry(expires_at, now=timezone.now())
    with transaction.atomic():
        note, setting = locked_note(actor, note_id)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status != Status.ACTIVE:
            raise invalid("id", f"{note.pk} is not live.")
        previous = note.expires_at.isoformat() if note.expires_at else None
        details = {"from": previous, "to": expires_at.isoformat()}
        renewed = {"expires_at": expires_at}
        change_note(actor, setting, note, AuditAction.NOTE_RENEW, renewed, details=details)
    return note


def note_expire(*, actor: Actor, note_id: str, now: datetime | None = None) -> Note:
    """Archive an expired fact with reason `expired` (the daily review's clean-up). `now` is
    the review's clock."""
    now = now or timezone.now()
    with transaction.atomic():
        note, setting = locked_note(actor, note_id)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status != Status.ACTIVE:
            return note
        if not is_expired(note.expires_at, now):
            raise invalid("id", f"{note.pk} has not expired.")
        change_note(actor, setting, note, AuditAction.NOTE_EXPIRE, _archived(REASON_EXPIRED))
    return note
