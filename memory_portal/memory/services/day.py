"""An agent's day log: one live row a day, appended to under the setting-row lock, never
edited or superseded."""

from __future__ import annotations

from django.utils import timezone

from .. import counters
from ..access import check_agent_gate
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import Kind, Note, Status, Target
from ..validation import (
    DAY_LINE_MAX,
    DAY_ROW_MAX,
    day_row_identity,
    gate,
    stamp_identity,
)
from .change import current_setting, project_change
from .notes import agent_note
from .schedule import routine_ensure
from .write import stamp_provenance


def day_append(*, actor: Actor, line: str) -> Note:
    """`memory day`: append `HH:MM TASK-KEY line` to the agent's live day row for today (UTC),
    creating the row with the first line."""
    if not actor.is_agent:
        raise MemoryPortalError("memory_day_agent_only", "Only an agent keeps a day log.")
    run = actor.run
    agent = run.agent
    project = run.project
    setting = current_setting(actor, project)
    check_agent_gate(actor, setting, write=True)
    epoch = setting.revocation_epoch
    text = gate(
        "line", line, max_len=DAY_LINE_MAX, line=True, too_long_code="memory_text_too_long"
    )
    now = timezone.now()
    today = now.date()
    stamped = " ".join(part for part in (now.strftime("%H:%M"), run.task_key, text) if part)
    with project_change(project, actor=actor, epoch=epoch, gate=True) as change:
        row = (
            Note.objects.select_for_update()
            .filter(owner_agent=agent, kind=Kind.DAY, day=today, status=Status.ACTIVE)
            .first()
        )
        if row is not None:
            content = row.content + "\n" + stamped
            if len(content) > DAY_ROW_MAX:
                raise MemoryPortalError(
                    "memory_day_full", f"Today's day log would exceed {DAY_ROW_MAX} characters."
                )
            row.content = content
            row.updated_at = now
            stamp_identity(row)
            row.save(update_fields=["content", "content_key", "updated_at"])
            action = AuditAction.DAY_APPEND
            change.changed(wrote_note=True)
        else:
            key = day_row_identity(owner_agent_id=agent.pk, day=today)
            fields = {"day": today, "place_key": key, "created_at": now, "updated_at": now}
            row = agent_note(
                agent, Kind.DAY, stamped, project=project, target=Target.DAILY, **fields
            )
            change.check_caps(row)
            stamp_provenance(actor, row)
            row.save(force_insert=True)
            action = AuditAction.DAY_CREATE
            change.changed(wrote_note=True, counted=counters.moved(None, row))
        change.audit(action, note=row, details={"day": str(today)})
        if action == AuditAction.DAY_CREATE:
            routine_ensure(actor=actor, agent=agent)  # the day log feeds the daily review too
    return row
