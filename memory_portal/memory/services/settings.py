"""The project's memory switch: enable, disable (revokes in-flight writes) and reset."""

from __future__ import annotations

from django.utils import timezone

from .. import counters
from ..access import require_manager
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import invalid
from ..models import MemorySetting, Note, Project, Recovery, ReviewPolicy, ScratchpadItem
from ..selectors import held_q
from .change import project_change


def _require_manager(actor: Actor | None, project: Project) -> None:
    if actor is not None:  # None is the system itself (management commands)
        require_manager(actor, project)


def _who(actor: Actor | None):
    return actor.user if actor is not None else None


def memory_enable(*, actor: Actor | None, project: Project) -> MemorySetting:
    """Eligible agents are offered memory tools from their next call."""
    _require_manager(actor, project)
    with project_change(project, actor=actor) as change:
        if change.setting.enabled:
            return change.setting
        change.changed(enabled=True, changed_by=_who(actor), changed_at=timezone.now())
        change.audit(AuditAction.MEMORY_ENABLE)
    return change.setting


def memory_disable(*, actor: Actor | None, project: Project) -> MemorySetting:
    """Every agent call answers memory_disabled; the epoch advances so writes being validated
    fail. Notes, recoveries and scratchpads stay for re-enable."""
    _require_manager(actor, project)
    with project_change(project, actor=actor) as change:
        setting = change.setting
        if not setting.enabled:
            return setting
        change.changed(
            enabled=False,
            revocation_epoch=setting.revocation_epoch + 1,
            changed_by=_who(actor),
            changed_at=timezone.now(),
        )
        change.audit(AuditAction.MEMORY_DISABLE)
    return setting


def memory_policy_set(*, actor: Actor | None, project: Project, policy: str) -> MemorySetting:
    """Switch the project's review policy (SPEC §2.2): `hold` keeps every learned note an
    untrusted agent's run wrote from other runs until a person reviews it — the notes not yet
    reviewed are held from the next call on; `open` serves them at once again, as learned.
    Audited (from, to, how many learned notes it holds or releases); the revision advances, so
    every fingerprint that saw them changes."""
    _require_manager(actor, project)
    if policy not in ReviewPolicy.values:
        raise invalid("reviewPolicy", "reviewPolicy must be open or hold.")
    with project_change(project, actor=actor) as change:
        before = change.setting.review_policy
        if before == policy:
            return change.setting
        affected = Note.objects.filter(held_q(), project=project).exclude(status="forgotten")
        change.changed(review_policy=policy, changed_by=_who(actor), changed_at=timezone.now())
        change.audit(
            AuditAction.MEMORY_POLICY,
            details={
                "from": before,
                "to": policy,
                ("held" if policy == ReviewPolicy.HOLD else "released"): affected.count(),
            },
        )
    return change.setting


def memory_reset(*, actor: Actor | None, project: Project) -> dict[str, int]:
    """Delete every note, recovery record and scratchpad item of the project for good and
    advance the epoch; the switch keeps its state. Irreversible."""
    _require_manager(actor, project)
    with project_change(project, actor=actor) as change:
        recoveries = Recovery.objects.filter(project=project).delete()[0]
        Note.objects.filter(project=project).update(supersedes=None, superseded_by=None)
        notes = Note.objects.filter(project=project).count()
        Note.objects.filter(project=project).delete()
        items = ScratchpadItem.objects.filter(project=project).delete()[0]
        change.changed(
            revocation_epoch=change.setting.revocation_epoch + 1,
            changed_by=_who(actor),
            changed_at=timezone.now(),
            **counters.tally([]),
        )
        counts = {"notes": notes, "recoveries": recoveries, "scratchpad_items": items}
        change.audit(AuditAction.MEMORY_RESET, details=counts)
    return counts
