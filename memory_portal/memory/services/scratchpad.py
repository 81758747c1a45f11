"""Scratchpad services: a top-level run's shared to-do list (SPEC §2.6)."""

from __future__ import annotations

from django.utils import timezone

from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import ScratchpadItem
from ..validation import SCRATCHPAD_TEXT_MAX, require_text
from .change import project_change

SCRATCHPAD_MAX_ITEMS = 100


def _agent_only(actor: Actor) -> None:
    if not actor.is_agent:
        raise MemoryPortalError("memory_tool_forbidden", "The scratchpad belongs to agent runs.")


def scratchpad_add(*, actor: Actor, text: str) -> ScratchpadItem:
    _agent_only(actor)
    run = actor.run
    body = require_text("text", text, max_len=SCRATCHPAD_TEXT_MAX)
    with project_change(run.project, actor=actor, gate=True) as change:
        items = ScratchpadItem.objects.filter(top_level_run_id=run.top_level_run_id)
        if items.count() >= SCRATCHPAD_MAX_ITEMS:
            raise MemoryPortalError(
                "scratchpad_full", f"The scratchpad holds {SCRATCHPAD_MAX_ITEMS} items."
            )
        item = ScratchpadItem.objects.create(
            project_id=run.project_id,
            top_level_run_id=run.top_level_run_id,
            text=body,
            created_by_run_id=run.pk,
        )
        change.changed()
        change.audit(AuditAction.SCRATCHPAD_ADD, target=item.pk)
    return item


def _set_done(*, actor: Actor, item_id: str, done: bool) -> ScratchpadItem:
    _agent_only(actor)
    run = actor.run
    if not isinstance(item_id, str) or not item_id:
        raise invalid("itemId", "itemId is required.")
    with project_change(run.project, actor=actor, gate=True) as change:
        item = (
            ScratchpadItem.objects.select_for_update()
            .filter(pk=item_id, top_level_run_id=run.top_level_run_id)
            .first()
        )
        if item is None:
            raise MemoryPortalError(
                "scratchpad_item_not_found", f"No item {item_id} on this run's scratchpad."
            )
        if item.done == done:
            return item
        item.done = done
        item.updated_at = timezone.now()
        item.save(update_fields=["done", "updated_at"])
        change.changed()
        action = AuditAction.SCRATCHPAD_DONE if done else AuditAction.SCRATCHPAD_UNDO
        change.audit(action, target=item.pk)
    return item


def scratchpad_done(*, actor: Actor, item_id: str) -> ScratchpadItem:
    return _set_done(actor=actor, item_id=item_id, done=True)


def scratchpad_undo(*, actor: Actor, item_id: str) -> ScratchpadItem:
    return _set_done(actor=actor, item_id=item_id, done=False)


def scratchpad_clear(*, actor: Actor) -> int:
    """Remove the completed items; returns how many went."""
    _agent_only(actor)
    run = actor.run
    with project_change(run.project, actor=actor, gate=True) as change:
        removed = ScratchpadItem.objects.filter(
            top_level_run_id=run.top_level_run_id, done=True
        ).delete()[0]
        if removed:
            change.changed()
            change.audit(AuditAction.SCRATCHPAD_CLEAR, details={"removed": removed})
    return removed
