"""Every agent call is counted: the run's 512-call budget first, then one trace row per tool
and outcome code (SPEC §2.10)."""

from __future__ import annotations

import logging
from contextlib import contextmanager

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError, retryable

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
def traced(actor: Actor, tool: str):
    """Take one call from the budget and record the outcome of the block. People's calls to
    v1 routes are not agent calls and are not traced."""
    if not actor.is_agent:
        yield
        return
    run = actor.run
    try:
        services.run_call_consume(run=run)
    except MemoryPortalError as exc:
        services.tool_call_record(run=run, tool=tool, outcome=exc.code)
        raise
    try:
        yield
    except MemoryPortalError as exc:
        services.tool_call_record(run=run, tool=tool, outcome=exc.code)
        raise
    except Exception as exc:
        refusal = retryable(exc)
        if refusal is None:
            services.tool_call_record(run=run, tool=tool, outcome="internal_error")
            raise
        # The database is busy or away: count the call if it can be counted now; the caller's
        # answer is the 503 either way.
        try:
            services.tool_call_record(run=run, tool=tool, outcome=refusal.code)
        except Exception as trace_failure:  # noqa: BLE001 - the 503 below says what happened
            if retryable(trace_failure) is None:
                raise
        raise
    # The call has done its work (a write is committed): losing the database now must not
    # turn its answer into an error, so a retryable failure of the trace row is only logged.
    try:
        services.tool_call_record(run=run, tool=tool, outcome="ok")
    except Exception as exc:
        refusal = retryable(exc)
        if refusal is None:
            raise
        logger.warning("%s while tracing a completed %s call of %s", refusal.code, tool, run.pk)


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
