"""No tool call runs past `CALL_TIMEOUT_MS` (10 s; seed 000: a ten-second response timeout).

The call path (api/calls.perform) opens `bounded_call()` for each agent-facing call, the wait
for a slot included. What could run long is bounded by the time the call has left: the lock
wait and statements of a change (`statement_ms`), the git of an evidence check, a call to an
embeddings endpoint, recall's scoring. A change checks the bound before it starts its
transaction (`check`), and a bound that runs out inside it rolls the transaction back, so a
call that is out of time answers 503 `memory_timeout` with `Retry-After` and has written
nothing; a change that committed before the bound ran out is answered as done. On PostgreSQL
the call's statements run under a session `statement_timeout` of the bound too (set with
the run's slot, run_slots.py), so a read cannot run past it either.

Outside a call (the dashboard, commands, tasks) there is no bound: every function here then
leaves things as they were."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings

from .errors import MemoryPortalError

clock = time.monotonic  # tests move it

_ends: ContextVar[float | None] = ContextVar("memory_portal_call_ends", default=None)


def call_seconds() -> float:
    """The configured bound of one call, in seconds; 0 when there is none."""
    return max(0, settings.MEMORY_PORTAL["CALL_TIMEOUT_MS"]) / 1000


@contextmanager
def bounded_call() -> Iterator[None]:
    """Bound the block to the configured time of one call (nothing when it is 0)."""
    seconds = call_seconds()
    if not seconds:
        yield
        return
    token = _ends.set(clock() + seconds)
    try:
        yield
    finally:
        _ends.reset(token)


def remaining() -> float | None:
    """Seconds the current call has left (≤ 0 once out of time); None outside a call."""
    ends = _ends.get()
    return None if ends is None else ends - clock()


def expired() -> bool:
    left = remaining()
    return left is not None and left <= 0


def timed_out() -> MemoryPortalError:
    limit = call_seconds()
    return MemoryPortalError(
        "memory_timeout",
        f"The call ran out of its {limit:g} s; nothing was written.",
    )


def check() -> None:
    """Refuse to start a change the call has no time left for."""
    if expired():
        raise timed_out()


def seconds(bound: float) -> float:
    """`bound` seconds, or what the call has left when that is less (never below 1 ms)."""
    left = remaining()
    return bound if left is None else max(0.001, min(bound, left))


def statement_ms(bound_ms: int) -> int:
    """A statement or lock wait bound in milliseconds, cut to what the call has left."""
    return max(1, int(seconds(bound_ms / 1000) * 1000))
