"""Every agent call is counted: the run's 512-call budget first, then one trace row per tool
and outcome code (SPEC §2.10). A write takes both inside its own transaction
(services.OpenCall); every other call takes them around its block."""

from __future__ import annotations

import logging
from contextlib import contextmanager

from django.utils import timezone

from memory_portal import metrics
from memory_portal.memory import run_slots, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError, retryable

from . import after_answer

logger = logging.getLogger("memory_portal.api")

# url_name prefixes of traced routes: "tool-write", "v1-save", …
TRACED_PREFIXES = ("tool-", "v1-")


def trace_name(url_name: str | None) -> str | None:
    if not url_name:
        return None
    for prefix in TRACED_PREFIXES:
        if url_name.startswith(prefix):
            return url_name if prefix == "v1-" else url_name[len(prefix) :]
    return None


@contextmanager
def traced(actor: Actor, tool: str, *, settles: bool = False):
    """Take one call from the budget and record the outcome of the block (the run's trace and
    the tool-call metric). People's calls to v1 routes are not agent calls and are not traced.
    `settles`: the block's write may take the call and count it `ok` in its own transaction —
    the block gets the `OpenCall` to hand it; a run whose budget was spent when its token was
    checked is refused before anything runs, as always."""
    if not actor.is_agent:
        yield None
        return
    outcome = "ok"
    try:
        with _traced(actor, tool, settles) as call:
            yield call
    except MemoryPortalError as exc:
        outcome = exc.code
        raise
    except Exception as exc:
        refusal = retryable(exc)
        outcome = refusal.code if refusal is not None else "internal_error"
        raise
    finally:
        metrics.tool_call(tool, outcome)


@contextmanager
def _traced(actor: Actor, tool: str, settles: bool):
    run = actor.run
    if settles and not services.run_budget_spent(run=run):
        yield from _outcome(run, tool, services.OpenCall(run=run, tool=tool))
        return
    try:
        services.run_call_consume(run=run)
    except MemoryPortalError as exc:
        services.tool_call_record(run=run, tool=tool, outcome=exc.code)
        raise
    yield from _outcome(run, tool, None)


def _record(run, tool: str, outcome: str, call) -> None:
    """One trace row for the outcome. An open call that its write did not settle (refused,
    rolled back, an idempotent repeat) is taken from the budget now; a spent budget then
    replaces the outcome, as if the call had been refused first."""
    if call is not None and not call.settled:
        try:
            services.run_call_consume(run=run)
        except MemoryPortalError as exc:
            services.tool_call_record(run=run, tool=tool, outcome=exc.code)
            raise
    services.tool_call_record(run=run, tool=tool, outcome=outcome)


def _outcome(run, tool: str, call):
    try:
        yield call
    except MemoryPortalError as exc:
        _record(run, tool, exc.code, call)
        raise
    except Exception as exc:
        refusal = retryable(exc)
        if refusal is None:
            _record(run, tool, "internal_error", call)
            raise
        # The database is busy or away: count the call if it can be counted now; the caller's
        # answer is the 503 either way.
        try:
            _record(run, tool, refusal.code, call)
        except Exception as trace_failure:  # noqa: BLE001 - the 503 below says what happened
            if retryable(trace_failure) is None:
                raise
        raise
    if call is not None and call.settled:
        return  # counted with the write, in its transaction
    if call is None and _recorded_after_answer(run, tool):
        return
    # The call has done its work (a write is committed): losing the database now must not
    # turn its answer into an error, so a retryable failure of the trace row is only logged.
    try:
        _record(run, tool, "ok", call)
    except Exception as exc:
        refusal = retryable(exc)
        if refusal is None:
            raise
        logger.warning("%s while tracing a completed %s call of %s", refusal.code, tool, run.pk)


def _recorded_after_answer(run, tool: str) -> bool:
    """An `ok` call already taken from its run's budget: nothing left can change its answer,
    so its trace row — and the slot's give-back, in the row's round trip — is written after
    the answer has left (api/after_answer.py). False outside an API request."""
    if not after_answer.available():
        return False
    at, slot = timezone.now(), run_slots.hand_over()
    after_answer.defer(
        lambda: services.tool_call_record(run=run, tool=tool, outcome="ok", at=at, slot=slot)
    )
    return True


def record_rejected_call(request, code: str) -> None:
    """A call refused before its view ran (invalid body): still one call, with its outcome."""
    actor = getattr(request, "actor", None)
    match = getattr(request, "resolver_match", None)
    tool = trace_name(match.url_name if match else None)
    if actor is None or tool is None or not actor.is_agent:
        return
    try:
        services.run_call_consume(run=actor.run)
    except MemoryPortalError as exc:
        code = exc.code
    services.tool_call_record(run=actor.run, tool=tool, outcome=code)
    metrics.tool_call(tool, code)
