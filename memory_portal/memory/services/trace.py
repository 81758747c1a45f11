"""The per-run tool-call trace and the 512-call budget.

An API call takes one call from its run's budget and adds one to the trace row of its tool and
outcome (api/tracing.py). A call whose service changes memory in one transaction of its own
(`memory_write`, v1 save) may leave both to that transaction (`call_opened`): the write then
takes the call and counts it `ok` under its lock, in the statement that checks its caps
(`call_to_take`, `call_taken`), so budget, trace and note commit together, in two statements
fewer; if the write refuses, repeats an identical note or rolls back, the call path counts the
call as before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from .. import fastsql
from ..errors import MemoryPortalError
from ..models import Run


def _budget() -> int:
    return settings.MEMORY_PORTAL["RUN_CALL_BUDGET"]


def run_call_consume(*, run: Run) -> int:
    """Take one call from the run's budget atomically (no read-then-write race); refuse with
    memory_call_budget once it is spent. Returns the calls used so far."""
    budget = _budget()
    used = fastsql.call_consume(run.pk, budget)
    if used is None:
        raise _budget_spent(run, budget)
    run.tool_calls = used
    return used


def _budget_spent(run: Run, budget: int) -> MemoryPortalError:
    return MemoryPortalError(
        "memory_call_budget",
        f"Run {run.pk} used its {budget} calls.",
        hint=f"A run makes at most {budget} memory calls; finish the task, or start a new run.",
    )


def run_budget_spent(*, run: Run) -> bool:
    """Whether the run had used its budget when it was loaded (the count only grows)."""
    return run.tool_calls >= _budget()


def tool_call_record(*, run: Run, tool: str, outcome: str) -> None:
    """Count one call of `tool` that ended with `outcome` (`ok` or an error code)."""
    fastsql.call_record(run.pk, tool, outcome, now=timezone.now())


@dataclass
class OpenCall:
    """A call whose budget and `ok` trace row its write's transaction may take."""

    run: Run
    tool: str
    settled: bool = False  # taken and counted in a transaction that has not rolled back


_open_call: ContextVar[OpenCall | None] = ContextVar("open_call", default=None)


@contextmanager
def call_opened(*, run: Run, tool: str) -> Iterator[OpenCall]:
    """Leave the call's budget and `ok` row to the write made inside the block, if any."""
    call = OpenCall(run, tool)
    token = _open_call.set(call)
    try:
        yield call
    finally:
        _open_call.reset(token)


def call_to_take() -> fastsql.CallToTake | None:
    """The open call a write's transaction is to take (`fastsql.write_check` takes it under
    the write's lock, to commit or roll back with the write); None when there is none (a
    service called directly) or it is taken already."""
    call = _open_call.get()
    if call is None or call.settled:
        return None
    return fastsql.CallToTake(call.run.pk, call.tool, _budget(), timezone.now())


def call_taken(used: int | None) -> None:
    """`call_to_take`'s call was taken (`used`: the run's calls so far), or the run's budget
    was spent: memory_call_budget, which rolls the write back."""
    call = _open_call.get()
    if used is None:
        raise _budget_spent(call.run, _budget())
    call.run.tool_calls = used
    call.settled = True


def call_unsettle() -> None:
    """The write's transaction rolled back, and with it what `call_settle` did."""
    call = _open_call.get()
    if call is not None:
        call.settled = False
