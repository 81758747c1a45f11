"""A person's judgement of a note: its trust (approve, reject, or taken back to learned) and
its evidence re-verified."""

from __future__ import annotations

from .. import evidence as evidence_checks
from ..access import (
    require_manager,
    require_member,
    require_person,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import (
    Note,
    Project,
    RepositoryLink,
    Status,
    Trust,
)
from ..selectors import (
    note_get,
)
from ..validation import review_reason
from .change import note_project, project_change

# What each trust a person sets is called, as the refusal of a forgotten note says it.
TRUST_VERBS = {Trust.REVIEWED: "approve", Trust.REJECTED: "reject", Trust.LEARNED: "unreview"}


def _set_trust(
    actor: Actor,
    note_id: str,
    project: Project | None,
    trust: str,
    action: AuditAction,
    reason: str = "",
) -> Note:
    """Set the note's trust, and the decision's reason (a reject's; any other trust clears
    it). The note answered carries `trust_before` (what it was: the toast's Undo sets it
    back)."""
    why = review_reason(reason)
    project = note_project(actor, note_id, project)
    with project_change(project, actor=actor) as change:
        note = change.note(note_id)
        require_manager(actor, note.project)
        note.trust_before = note.trust
        if note.trust == trust:
            return note
        if note.status == Status.FORGOTTEN:  # access.note_actions: restore it first
            verb = TRUST_VERBS[trust]
            raise MemoryPortalError(
                "memory_forgotten",
                f"Note {note.pk} is forgotten; its trust does not change.",
                hint=f"Restore it from Recoveries first, then {verb} it.",
            )
        details = {"from": note.trust, "to": trust, **({"reason": why} if why else {})}
        change.change_note(note, action, {"trust": trust, "review_reason": why}, details=details)
    return note


def note_approve(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Mark reviewed (API word: approved). Managers only; persistence is unchanged."""
    return _set_trust(actor, note_id, project, Trust.REVIEWED, AuditAction.NOTE_APPROVE)


def note_reject(
    *, actor: Actor, note_id: str, reason: str = "", project: Project | None = None
) -> Note:
    """Reject: never served to agents again in lists, search or recall; `reason` (optional,
    one line) says why, on the note and to its agent."""
    return _set_trust(
        actor, note_id, project, Trust.REJECTED, AuditAction.NOTE_REJECT, reason=reason
    )


def note_unreview(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Take a person's approval or rejection back: the note is learned again and awaits
    review (the Undo of an approve or a reject). Managers only."""
    return _set_trust(actor, note_id, project, Trust.LEARNED, AuditAction.NOTE_UNREVIEW)


def note_reverify(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Re-bind a stale evidence-bound note to the current pinned revision when its file (and
    quote) still match there."""
    require_person(actor, what="a re-verify")
    note = note_get(actor=actor, note_id=note_id, project=project)
    require_member(actor, note.project)
    if not note.evidence_commit or note.evidence_repository_id is None:
        raise MemoryPortalError(
            "memory_evidence_invalid",
            f"{note.pk} has no evidence to re-verify.",
            reason="no_evidence",
        )
    links = RepositoryLink.objects.filter(
        application__project_id=note.project_id, repository_id=note.evidence_repository_id
    ).select_related("repository")
    if note.application_id:
        links = links.filter(application_id=note.application_id)
    link = links.order_by("-updated_at").first()
    if link is None:
        raise MemoryPortalError(
            "memory_evidence_invalid",
            "The evidence repository is no longer linked in this project.",
            reason="repository_not_linked",
        )
    verified = evidence_checks.verify_evidence(
        repo_path=link.repository.path,
        revision=link.revision,
        path=note.evidence_path,
        quote=note.evidence_quote or None,
    )
    with project_change(note.project, actor=actor) as change:
        note = change.note(note.pk, twin=False)
        if note.evidence_commit == verified.commit:
            return note
        details = {"from": note.evidence_commit, "to": verified.commit}
        rebound = {"evidence_commit": verified.commit}
        change.change_note(note, AuditAction.NOTE_REVERIFY, rebound, details=details)
    return note
