"""Work an API call leaves for after its answer has left: the trace row of a call that ended
well, with its slot's give-back (api/tracing.py). The server writes the answer, then closes
the response (WSGI), and the work runs then, on the same thread and connection, before the
connection's next request is read: the agent has its answer one round trip sooner, and the
work is still done before anything else of that worker thread.

Only work whose outcome cannot change the answer is left: an `ok` call already taken from its
run's budget. A failure is logged (a slot whose give-back failed expires, as a dead host's
does); nothing is retried. Outside a request of the JSON API (/mcp, whose answers may stream,
a management command, a test calling a service) nothing is collected and the work runs at
once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

logger = logging.getLogger("memory_portal.api")

_pending: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "memory_portal_after_answer", default=None
)


@contextmanager
def collecting() -> Iterator[list[Callable[[], None]]]:
    """The request's list of work for after its answer (api/middleware.py)."""
    pending: list[Callable[[], None]] = []
    token = _pending.set(pending)
    try:
        yield pending
    finally:
        _pending.reset(token)


def available() -> bool:
    """Whether work can be left for after the answer: inside an API request only."""
    return _pending.get() is not None


def defer(work: Callable[[], None]) -> None:
    """Leave `work` for after the answer (`available` said it can be)."""
    pending = _pending.get()
    if pending is None:
        raise RuntimeError("No answer to leave work after: outside an API request.")
    pending.append(work)


def run(pending: list[Callable[[], None]]) -> None:
    """Run what was left, each on its own: one failing does not stop the next."""
    while pending:
        work = pending.pop(0)
        try:
            work()
        except Exception:
            logger.exception("work left for after an answer failed")
