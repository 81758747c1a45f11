"""At most `RUN_IN_FLIGHT` (8) calls of one top-level run in flight at once (seed 000: eight
concurrent requests per child), across every web process and host: a call takes one of the
run's slots for as long as it runs; when all are taken it waits up to `RUN_IN_FLIGHT_WAIT_MS`
(1 s) for one to come free, then is refused with 429 `memory_run_busy` and `Retry-After` —
before anything is read or written, so sending it again is safe.

On PostgreSQL a slot is a row of `memory_run_slot` (the run's id, the slot's number, when it
expires), taken by one statement and deleted by another when the call ends. A row outlives
its call only when the host serving it died, froze or was cut off mid-call; it expires when
that call could no longer be running (`hold_seconds`: the call's time bound and a margin) and
the next call takes it over — a vanished host holds a run's slot for seconds, not until
PostgreSQL notices its connection is gone (hours, with default keepalives). Rows hold no
session state, so slots work the same behind a pooler in transaction mode. SQLite serves one
process (gunicorn.conf.py runs one worker on it): the slots are counted in it."""

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

# Take one free slot of the run — a slot with no row, or whose row has expired (its call's
# host is gone) — in one round trip: a random free one, so calls arriving together seldom race
# for the same; one that loses the race (the other's row is live) takes nothing and polls
# again. The same round trip bounds the session's statements by the time the call has left
# (memory/deadline.py), and giving the slot back restores the configured bound.
_TAKE = """
WITH free AS (
    SELECT s FROM generate_series(0, %(limit)s - 1) AS s
    WHERE NOT EXISTS (
        SELECT 1 FROM memory_run_slot AS held
        WHERE held.run_id = %(run)s AND held.slot = s AND held.expires_at > clock_timestamp()
    )
    ORDER BY random() LIMIT 1
), taken AS (
    INSERT INTO memory_run_slot AS held (run_id, slot, expires_at)
    SELECT %(run)s, s, clock_timestamp() + make_interval(secs => %(hold)s) FROM free
    ON CONFLICT (run_id, slot) DO UPDATE SET expires_at = EXCLUDED.expires_at
        WHERE held.expires_at <= clock_timestamp()
    RETURNING held.slot
)
SELECT slot, set_config('statement_timeout', %(bound)s, false) FROM taken
"""
_GIVE_BACK = """
WITH given AS (DELETE FROM memory_run_slot WHERE run_id = %s AND slot = %s)
SELECT set_config('statement_timeout', %s, false)
"""
# Expired rows of runs nobody calls any more (their host died mid-call): swept by the routine
# runner (slots_sweep), an hour after they expired.
SWEEP_AFTER_SECONDS = 3600
HOLD_MARGIN_SECONDS = 2


def _limits() -> tuple[int, float]:
    conf = settings.MEMORY_PORTAL
    return conf["RUN_IN_FLIGHT"], conf["RUN_IN_FLIGHT_WAIT_MS"] / 1000


def hold_seconds() -> float:
    """How long a slot's row stands for its call: past the call's time bound (and a margin
    for the answer to leave) the call cannot be running any more. Without a bound, the
    statement timeout stands for it."""
    call = deadline.call_seconds() or settings.DB_STATEMENT_TIMEOUT_MS / 1000
    return call + HOLD_MARGIN_SECONDS


def slots_sweep() -> int:
    """Delete the slot rows that expired an hour ago (PostgreSQL; nothing on SQLite): the
    number deleted."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql":
        return 0
    with db.cursor() as cursor:
        cursor.execute(
            "DELETE FROM memory_run_slot"
            " WHERE expires_at < clock_timestamp() - make_interval(secs => %s)",
            [SWEEP_AFTER_SECONDS],
        )
        return cursor.rowcount


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
        with _row_slot(db, top_level_run_id, limit, wait):
            yield
    else:
        with _local_slot(top_level_run_id, limit, wait):
            yield


@contextmanager
def _row_slot(db, run_id: str, limit: int, wait: float) -> Iterator[None]:
    gives_up = time.monotonic() + wait
    hold = hold_seconds()
    while True:
        bound = deadline.statement_ms(settings.DB_STATEMENT_TIMEOUT_MS)
        with db.cursor() as cursor:
            cursor.execute(
                _TAKE, {"limit": limit, "run": run_id, "hold": hold, "bound": str(bound)}
            )
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
        # A connection closed or broken during the call cannot give the slot back: its row
        # expires instead (hold_seconds).
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
