"""When an agent's daily review is due, and the routine its first save starts. Apart from
routines.py so that the note services can start a routine inside their own transaction
without importing the review (which is built on them)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from django.utils import timezone

from ..actors import Actor
from ..audit_actions import AuditAction
from ..models import Agent, ReviewRoutine
from ._common import audit

DUE_HOUR_UTC = 4


def next_due(after: datetime) -> datetime:
    """The first 04:00 UTC strictly after `after`."""
    after = after.astimezone(UTC)
    due = datetime.combine(after.date(), time(DUE_HOUR_UTC), tzinfo=UTC)
    return due if due > after else due + timedelta(days=1)


def routine_ensure(
    *, actor: Actor | None, agent: Agent, now: datetime | None = None
) -> ReviewRoutine:
    """Create the agent's routine on its first save, audited as `routine.create`; never
    revive one a person deleted. Called inside the save's transaction, under its lock."""
    now = now or timezone.now()
    routine, created = ReviewRoutine.objects.get_or_create(
        agent=agent, defaults={"next_run_at": next_due(now), "created_at": now}
    )
    if created:
        audit(
            actor=actor,
            action=AuditAction.ROUTINE_CREATE,
            project=agent.project,
            target=agent.pk,
            details={"next_run_at": routine.next_run_at.isoformat()},
        )
    return routine
