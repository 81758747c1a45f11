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
process (gunicorn.conf.py runs one worker on it): the slots are counted in it.

The hot path spends no round trip of its own on the slot: an agent tool's token check takes it
in the same statement (`pretake_sql`, tokens.py; the call then holds what was taken), and a
clean write gives it back in its own transaction (fastsql.write_clean, `held`), any other call
with its trace row (fastsql.call_record). Other transports take it in a statement of its own.
The same statement takes the call from its run's budget too, for a tool whose write does not
take it itself (services/trace.py: `run_call_consume` finds it taken)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from . import deadline
from .errors import MemoryPortalError

POLL_SECONDS = 0.02

# Take one free slot of the run named by `callee` — a slot with no row, or whose row has
# expired (its call's host is gone): a random free one, so calls arriving together seldom race
# for the same; one that loses the race (the other's row is live) takes nothing and polls
# again. Params: the slots' limit, the row's hold in seconds. The same round trip bounds the
# session's statements by the time the call has left (memory/deadline.py), and giving the
# slot back restores the configured bound.
_TAKING = (
    " free AS (SELECT callee.run, s FROM callee, generate_series(0, %s - 1) AS s"
    "  WHERE NOT EXISTS (SELECT 1 FROM memory_run_slot AS held"
    "   WHERE held.run_id = callee.run AND held.slot = s"
    "   AND held.expires_at > clock_timestamp())"
    "  ORDER BY random() LIMIT 1),"
    " taken AS (INSERT INTO memory_run_slot AS held (run_id, slot, expires_at)"
    "  SELECT run, s, clock_timestamp() + make_interval(secs => %s) FROM free"
    "  ON CONFLICT (run_id, slot) DO UPDATE SET expires_at = EXCLUDED.expires_at"
    "   WHERE held.expires_at <= clock_timestamp()"
    "  RETURNING held.run_id, held.slot)"
)
_BOUND = "set_config('statement_timeout', %s, false)"
# A statement that takes a slot (and the call from its run's budget with it) is a transaction
# of its own whose commit does not wait for the WAL's flush to disk (0.2 ms here): the slots'
# table is unlogged anyway, and a count lost with a crash of the database gives a run back at
# most the calls of its last moments. The next durable commit on the server (a write's)
# flushes it with its own. Inside a caller's transaction it is not sent: it would hold for the
# whole of that transaction.
_QUICK_COMMIT = "set_config('synchronous_commit', 'off', true)"


def _quick_commit(db) -> str:
    """The column that makes a slot-taking statement's commit quick: "" inside a caller's
    transaction."""
    return "" if db.in_atomic_block else f", (SELECT {_QUICK_COMMIT} FROM taken)"


# A call's own take (`{quick}`: `_quick_commit`). Params: the run, the limit, the hold, the
# statement bound.
_TAKE = (
    f"WITH callee AS (SELECT %s::text AS run),{_TAKING}"
    f" SELECT slot, {_BOUND}{{quick}} FROM taken"
)
# Params: the run, the slot, the configured statement timeout. Also sent after the trace row
# of a call, in its round trip (fastsql.call_record).
GIVE_BACK = (
    "WITH given AS (DELETE FROM memory_run_slot WHERE run_id = %s AND slot = %s)"
    " SELECT set_config('statement_timeout', %s, false)"
)
# Expired rows of runs nobody calls any more (their host died mid-call): swept by the routine
# runner (slots_sweep), an hour after they expired.
SWEEP_AFTER_SECONDS = 3600
HOLD_MARGIN_SECONDS = 2


@dataclass
class HeldSlot:
    """A slot a call holds: its run's row and number; `given` once a statement of the call
    has given it back (a clean write's own transaction)."""

    run_id: str
    slot: int
    given: bool = False


# The slot the token check took for the call to come (until the call holds it), the call it
# took from the budget (until the call counts it), and the slot the current call holds. Each
# request of a worker thread starts with none (release_pretaken).
_pretaken: ContextVar[HeldSlot | None] = ContextVar("memory_portal_pretaken_slot", default=None)
_counted: ContextVar[CountedCall | None] = ContextVar("memory_portal_counted_call", default=None)
_held: ContextVar[HeldSlot | None] = ContextVar("memory_portal_held_slot", default=None)


def held() -> HeldSlot | None:
    """The slot (a row, PostgreSQL) the current call holds, for a statement that can give it
    back with its own work."""
    slot = _held.get()
    return slot if slot is not None and not slot.given else None


def hand_over() -> HeldSlot | None:
    """The slot the current call holds, handed to a statement sent after the call's block
    (its trace row after the answer, api/after_answer.py): the call's end leaves it to that
    statement. None when it holds none (SQLite, no limit, or given back already)."""
    slot = held()
    if slot is not None:
        slot.given = True
    return slot


# With a slot taken, one call from the budget of the token's own run (`callee.own`), if any is
# left. Param: the budget. Its column: the calls used with this one (None: none was left).
_COUNTING = (
    " counted AS (UPDATE memory_run AS counted SET tool_calls = counted.tool_calls + 1"
    "  FROM callee WHERE counted.id = callee.own AND counted.tool_calls < %s"
    "  AND EXISTS (SELECT 1 FROM taken) RETURNING counted.tool_calls)"
)
# A call taken from the budget by a token check whose call never came, given back.
_UNCOUNT = "UPDATE memory_run SET tool_calls = tool_calls - 1 WHERE id = %s AND tool_calls > 0"


def pretake_sql(run_of_token: str, *, count: bool) -> tuple[str, str] | None:
    """For the token check of an agent tool's call (PostgreSQL, a limit set): a `WITH` clause
    that takes one of the run's slots and the two columns that say which (None: none free) and
    set the session's statement bound, as `_TAKE` does; `count`: with a slot, it also takes
    the call from the budget of the token's run (a third column: the calls used, None: the
    budget was spent). `run_of_token` is a query naming the top-level run of the token's live
    run as `run` and that run as `own` (no row for any other token). Params of the clause, in
    order: those of `run_of_token`, then `pretake_params(count=…)`."""
    limit, _ = _limits()
    db = connections[DEFAULT_DB_ALIAS]
    if limit <= 0 or db.vendor != "postgresql":
        return None
    with_sql = f"WITH callee AS ({run_of_token}),{_TAKING}"
    columns = f"(SELECT slot FROM taken), (SELECT {_BOUND} FROM taken)"
    if count:
        with_sql = f"{with_sql},{_COUNTING}"
        columns = f"{columns}, (SELECT tool_calls FROM counted)"
    return with_sql, columns + _quick_commit(db)


def pretake_params(*, count: bool) -> tuple[list, list]:
    """The parameters of `pretake_sql`'s clause (after the run query's) and of its columns."""
    limit, _ = _limits()
    call = deadline.call_seconds() * 1000
    bound = settings.DB_STATEMENT_TIMEOUT_MS
    if call:
        bound = min(bound, int(call))
    clause = [limit, hold_seconds()]
    if count:
        clause.append(settings.MEMORY_PORTAL["RUN_CALL_BUDGET"])
    return clause, [str(bound)]


@dataclass(frozen=True)
class CountedCall:
    """A call the token check took from its run's budget: the run, and the calls it has used
    with this one (None: its budget was spent, nothing was taken)."""

    run_id: str
    used: int | None


def pretaken(top_level_run_id: str, columns: tuple, *, run_id: str, count: bool) -> None:
    """What the token check took for this request's call, from the columns of `pretake_sql`:
    a slot (none: every slot was busy; the call waits for one as any other) and, with one and
    `count`, the call from `run_id`'s budget."""
    slot = columns[0]
    _pretaken.set(HeldSlot(top_level_run_id, slot) if slot is not None else None)
    counted = CountedCall(run_id, columns[2]) if count and slot is not None else None
    _counted.set(counted)


def counted_call(run_id: str) -> CountedCall | None:
    """The call the token check took from `run_id`'s budget, now the call's own (None: it took
    none, the call takes its own)."""
    counted = _counted.get()
    if counted is None or counted.run_id != run_id:
        return None
    _counted.set(None)
    return counted


def release_pretaken() -> None:
    """At the end of every API request: a slot taken by its token check that no call came to
    hold, and a call taken from the budget that no call came to count (the request failed
    before), are given back."""
    counted = _counted.get()
    if counted is not None:
        _counted.set(None)
        if counted.used is not None:
            _uncount(connections[DEFAULT_DB_ALIAS], counted.run_id)
    slot = _pretaken.get()
    if slot is None:
        return
    _pretaken.set(None)
    _give_back(connections[DEFAULT_DB_ALIAS], slot)


def _uncount(db, run_id: str) -> None:
    _send_if_usable(db, _UNCOUNT, [run_id])


def _give_back(db, slot: HeldSlot) -> None:
    configured = str(settings.DB_STATEMENT_TIMEOUT_MS)
    _send_if_usable(db, GIVE_BACK, [slot.run_id, slot.slot, configured])


def _send_if_usable(db, sql: str, params: list) -> None:
    """A statement that hands back what a call took, as its request ends. A connection closed
    or broken during the call cannot send it: a slot's row expires instead (hold_seconds), and
    a call taken from the budget stays counted."""
    with contextlib.suppress(Exception):
        if db.connection is not None and not db.needs_rollback:
            with db.cursor() as cursor:
                cursor.execute(sql, params)


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
    taken = _pretaken.get()
    if taken is not None and taken.run_id == run_id:
        _pretaken.set(None)  # the token check took it: held from here
    else:
        taken = HeldSlot(run_id, _take(db, run_id, limit, wait))
    token = _held.set(taken)
    try:
        yield
    finally:
        _held.reset(token)
        if not taken.given:
            _give_back(db, taken)


def _take(db, run_id: str, limit: int, wait: float) -> int:
    gives_up = time.monotonic() + wait
    hold = hold_seconds()
    while True:
        bound = deadline.statement_ms(settings.DB_STATEMENT_TIMEOUT_MS)
        with db.cursor() as cursor:
            take = _TAKE.format(quick=_quick_commit(db))
            cursor.execute(take, [run_id, limit, hold, str(bound)])
            row = cursor.fetchone()
        if row is not None:
            return row[0]
        if time.monotonic() >= gives_up:
            raise run_busy(run_id, limit)
        time.sleep(POLL_SECONDS)


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
