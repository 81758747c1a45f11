"""At most `RUN_IN_FLIGHT` (8) calls of one top-level run in flight at once (seed 000: eight
concurrent requests per child), across every web process: a call takes one of the run's slots
for as long as it runs; when all are taken it waits up to `RUN_IN_FLIGHT_WAIT_MS` (1 s) for one
to come free, then is refused with 429 `memory_run_busy` and `Retry-After` — before anything
is read or written, so sending it again is safe.

On PostgreSQL a slot is a session advisory lock (the run's key, the slot's number): shared by
every process on the database, and let go by the database itself when a process dies with its
connection. SQLite serves one process: the slots are counted in it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from . import deadline
from .errors import MemoryPortalError

POLL_SECONDS = 0.02

# Try the run's slots in turn; the first one free is taken (a LIMIT stops at it, so no other
# is locked). hashtext() maps the run's id to the lock's first key, the same in every process.
# The same round trip bounds the session's statements by the time the call has left
# (memory/deadline.py), and giving the slot back restores the configured bound.
_TAKE = (
    "SELECT s, set_config('statement_timeout', %s, false) FROM generate_series(0, %s - 1) AS s"
    " WHERE pg_try_advisory_lock(hashtext(%s), s) LIMIT 1"
)
_GIVE_BACK = (
    "SELECT pg_advisory_unlock(hashtext(%s), %s), set_config('statement_timeout', %s, false)"
)


def _limits() -> tuple[int, float]:
    conf = settings.MEMORY_PORTAL
    return conf["RUN_IN_FLIGHT"], conf["RUN_IN_FLIGHT_WAIT_MS"] / 1000


def run_busy(run_id: str, limit: int) -> MemoryPortalError:
    return MemoryPortalError(
        "memory_run_busy",
        f"Run {run_id} has {limit} calls in flight, the most one run may.",
        hint=f"Wait for a call to answer, then send this one again (at most {limit} at once).",
    )


@contextmanager
def call_slot(top_level_run_id: str) -> Iterator[None]:
    """Hold one of the run's slots while the block runs (see the module)."""
    limit, wait = _limits()
    if limit <= 0:
        yield
        return
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor == "postgresql":
        with _advisory_slot(db, top_level_run_id, limit, wait):
            yield
    else:
        with _local_slot(top_level_run_id, limit, wait):
            yield


@contextmanager
def _advisory_slot(db, run_id: str, limit: int, wait: float) -> Iterator[None]:
    gives_up = time.monotonic() + wait
    while True:
        bound = deadline.statement_ms(settings.DB_STATEMENT_TIMEOUT_MS)
        with db.cursor() as cursor:
            cursor.execute(_TAKE, [str(bound), limit, run_id])
            row = cursor.fetchone()
        if row is not None:
            break
        if time.monotonic() >= gives_up:
            raise run_busy(run_id, limit)
        time.sleep(POLL_SECONDS)
    slot = row[0]
    try:
        yield
    finally:
        # A connection closed or broken during the call has let go of the lock already.
        with contextlib.suppress(Exception):
            if db.connection is not None and not db.needs_rollback:
                configured = str(settings.DB_STATEMENT_TIMEOUT_MS)
                with db.cursor() as cursor:
                    cursor.execute(_GIVE_BACK, [run_id, slot, configured])


# SQLite: the slots taken per run in this process, and the condition a waiting call waits on.
_slots_changed = threading.Condition()
_taken: dict[str, int] = {}


@contextmanager
def _local_slot(run_id: str, limit: int, wait: float) -> Iterator[None]:
    with _slots_changed:
        if not _slots_changed.wait_for(lambda: _taken.get(run_id, 0) < limit, timeout=wait):
            raise run_busy(run_id, limit)
        _taken[run_id] = _taken.get(run_id, 0) + 1
    try:
        yield
    finally:
        with _slots_changed:
            _taken[run_id] -= 1
            if not _taken[run_id]:
                del _taken[run_id]
            _slots_changed.notify_all()
