"""The per-run tool-call trace and the 512-call budget."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from ..errors import MemoryPortalError
from ..models import Run, ToolCallCount


def run_call_consume(*, run: Run) -> int:
    """Take one call from the run's budget atomically (no read-then-write race); refuse with
    memory_call_budget once it is spent. Returns the calls used so far."""
    budget = settings.MEMORY_PORTAL["RUN_CALL_BUDGET"]
    taken = Run.objects.filter(pk=run.pk, tool_calls__lt=budget).update(
        tool_calls=F("tool_calls") + 1
    )
    if not taken:
        raise MemoryPortalError("memory_call_budget", f"Run {run.pk} used its {budget} calls.")
    run.refresh_from_db(fields=["tool_calls"])
    return run.tool_calls


def tool_call_record(*, run: Run, tool: str, outcome: str) -> None:
    """Count one call of `tool` that ended with `outcome` (`ok` or an error code)."""
    now = timezone.now()
    updated = ToolCallCount.objects.filter(run=run, tool=tool, outcome=outcome).update(
        count=F("count") + 1, last_called_at=now
    )
    if updated:
        return
    try:
        with transaction.atomic():
            ToolCallCount.objects.create(
                run=run, tool=tool, outcome=outcome, count=1, last_called_at=now
            )
    except IntegrityError:
        ToolCallCount.objects.filter(run=run, tool=tool, outcome=outcome).update(
            count=F("count") + 1, last_called_at=now
        )
