"""The per-run tool-call trace and the 512-call budget.

An API call takes one call from its run's budget and adds one to the trace row of its tool and
outcome (api/tracing.py); on PostgreSQL an agent tool's token check takes the call already, in
its statement (run_slots.pretake_sql), and the call finds it taken. A call whose service
changes memory in one transaction of its own (`memory_write`, v1 save) hands the write an
`OpenCall` instead: the write takes the call and counts it `ok` under its lock, in the
statement that checks its caps (`ProjectChange.admit`), so budget, trace and note commit
together, in two statements fewer; if the write refuses, repeats an identical note or rolls
back, the call path counts the call as before."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from .. import fastsql, run_slots
from ..errors import MemoryPortalError
from ..models import Run


def _budget() -> int:
    return settings.MEMORY_PORTAL["RUN_CALL_BUDGET"]


def run_call_consume(*, run: Run) -> int:
    """Take one call from the run's budget atomically (no read-then-write race); refuse with
    memory_call_budget once it is spent. Returns the calls used so far. A call the request's
    token check took already (an agent tool's, run_slots.pretake_sql) is this call's."""
    counted = run_slots.counted_call(run.pk)
    if counted is not None:
        used = counted.used
    else:
        used = fastsql.call_consume(run.pk, _budget())
    if used is None:
        raise budget_spent(run)
    run.tool_calls = used
    return used


def budget_spent(run: Run) -> MemoryPortalError:
    """The refusal of a call beyond the run's budget."""
    budget = _budget()
    return MemoryPortalError(
        "memory_call_budget",
        f"Run {run.pk} used its {budget} calls.",
        hint=f"A run makes at most {budget} memory calls; finish the task, or start a new run.",
    )


def run_budget_spent(*, run: Run) -> bool:
    """Whether the run had used its budget when it was loaded (the count only grows)."""
    return run.tool_calls >= _budget()


def tool_call_record(
    *,
    run: Run,
    tool: str,
    outcome: str,
    at: datetime | None = None,
    slot: run_slots.HeldSlot | None = None,
) -> None:
    """Count one call of `tool` that ended with `outcome` (`ok` or an error code) `at` (now);
    `slot`: the call's, handed over to be given back with the row (run_slots.hand_over)."""
    fastsql.call_record(run.pk, tool, outcome, now=at or timezone.now(), slot=slot)


@dataclass
class OpenCall:
    """An API call whose budget and `ok` trace row the write it makes may take, in the write's
    own transaction (`ProjectChange.admit`); `settled` while that transaction stands."""

    run: Run
    tool: str
    settled: bool = False

    def to_take(self, now) -> fastsql.CallToTake | None:
        """The call for the write's statement to take, or None once it is settled."""
        return None if self.settled else fastsql.CallToTake(self.run.pk, self.tool, _budget(), now)
