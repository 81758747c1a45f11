"""Undo a revert of a run (SPEC §3.5): put back exactly what the revert changed, as its
RunRevert row recorded it (services/revert.py), and leave alone what was changed since."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import counters
from ..access import require_manager, require_person
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import REASON_SUPERSEDED, Note, Recovery, RunRevert, Status
from . import lifecycle
from .change import ProjectChange, project_change
from .revert import RECOVERY_KEPT, record_revert


def _undo_item(change: ProjectChange, item: dict) -> str | None:
    """Put one note back as it was before the revert; None, or why it was left alone (a
    person or agent changed it since)."""
    actor = change.actor
    note = Note.objects.select_for_update().filter(pk=item["note"]).first()
    if note is None:
        return "note_gone"
    action = item["action"]
    if action == "forget":
        if not Recovery.objects.filter(pk=item["recovery"]).exists():
            return "recovery_gone"
        lifecycle.note_restore(actor=actor, recovery_id=item["recovery"], within=change)
        return None
    if action == "veto":
        if not note.is_vetoed:
            return "changed_since"
        lifecycle.note_undo(actor=actor, note_id=note.pk, within=change)
        return None
    if action == "restore":
        if note.status != item["previous_status"] or Recovery.objects.filter(note=note).exists():
            return "changed_since"
        Recovery.objects.create(
            id=item["recovery"],
            project_id=note.project_id,
            note=note,
            forgotten_by_user_id=item["forgotten_by_user"],
            created_at=parse_datetime(item["created_at"]),
            **{name: item[name] for name in RECOVERY_KEPT},
        )
        was = counters.state_of(note)
        note.status = Status.FORGOTTEN
        forget, recovery_id = AuditAction.NOTE_FORGET, item["recovery"]
        change.save_note(note, ("status",), forget, was=was, recovery_id=recovery_id)
        return None
    if note.status != Status.ACTIVE:
        return "changed_since"
    archived_at = parse_datetime(item["archived_at"]) if item["archived_at"] else timezone.now()
    was = counters.state_of(note)
    note.status = Status.ARCHIVED
    note.archived_at = archived_at
    if action == "unsupersede":
        note.archive_reason = REASON_SUPERSEDED
        note.superseded_by_id = (
            item["superseded_by"]
            if Note.objects.filter(pk=item["superseded_by"]).exists()
            else None
        )
        fields = ("status", "archive_reason", "archived_at", "superseded_by")
    else:
        note.archive_reason = item["reason"]
        fields = ("status", "archive_reason", "archived_at")
    details = {"reason": note.archive_reason}
    change.save_note(note, fields, AuditAction.NOTE_ARCHIVE, was=was, details=details)
    return None


@dataclass(frozen=True)
class UndoResult:
    revert: RunRevert
    restored: list[str]
    skipped: dict[str, str]  # note id -> why it was left alone


def run_revert_undo(*, actor: Actor, revert_id: str) -> UndoResult:
    """Undo a revert: put back exactly what it changed (each note it forgot while its
    recovery record exists, each note it vetoed while still vetoed; what it brought back is
    archived, superseded or forgotten again). Notes changed since are left alone and listed in
    the audit event. One transaction, audited `run.revert_undo`."""
    require_person(actor, what="an undo of a revert")
    revert = RunRevert.objects.select_related("project").filter(pk=revert_id).first()
    if revert is None:
        raise MemoryPortalError("not_found", f"No revert {revert_id}.", hint="Check the rvt_ id.")
    require_manager(actor, revert.project)
    with project_change(revert.project, actor=actor) as change:
        revert = RunRevert.objects.select_for_update().get(pk=revert_id)
        if revert.undone:
            raise MemoryPortalError(
                "memory_revert_undone", f"Revert {revert.pk} was already undone."
            )
        # Hide again what came back first, so a restored note never meets a live twin.
        order = {"unsupersede": 0, "unarchive": 0, "restore": 0, "veto": 1, "forget": 1}
        items = sorted(revert.items, key=lambda item: order[item["action"]])
        restored: list[str] = []
        skipped: dict[str, str] = {}
        # Every note's event names the revert undone and its run.
        change.audit_details = {"revert_undo": revert.pk, "reverted_with_run": revert.run_ref}
        for item in items:
            try:
                with project_change(revert.project, actor=actor, within=change):
                    reason = _undo_item(change, item)
            except MemoryPortalError as err:
                reason = err.code  # e.g. a live twin written since: leave it
            if reason is None:
                restored.append(item["note"])
            else:
                skipped[item["note"]] = reason
        change.audit_details = {}
        revert.undone_at = timezone.now()
        revert.undone_by = actor.user
        revert.save(update_fields=["undone_at", "undone_by"])
        record_revert(
            change,
            revert,
            AuditAction.RUN_REVERT_UNDO,
            {
                "counts": {"restored": len(restored), "skipped": len(skipped)},
                "restored": restored,
                "skipped": skipped,
            },
        )
    return UndoResult(revert=revert, restored=restored, skipped=skipped)
