"""Hand-built SQL for the write protocol's hot path. Inside the setting-row lock every
millisecond of Python is a millisecond other writers of the project wait, and the ORM costs
about ten times the SQL it sends (docs/PERFORMANCE.md). These helpers build each statement
once from the model's own field definitions (so they cannot drift from the schema) and send it
on a plain cursor; everything else keeps using the ORM."""

from __future__ import annotations

import contextlib
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, models

from . import counters, deadline, run_slots
from .models import MemorySetting


def _db():
    """The default database's connection itself. `django.db.connection` is a proxy that looks
    it up (a thread- or task-local read, about a microsecond) on every attribute, and Django
    reads a few attributes for each value it prepares: a write read it some thirty times."""
    return connections[DEFAULT_DB_ALIAS]


def prepared_cursor(db=None):
    """A cursor for the hot path's statements (the token check, the clean write, a call's
    budget and trace, a read's records): on PostgreSQL it binds its parameters on the server,
    so psycopg prepares each statement on its connection at its first use
    (`prepare_threshold`, settings.py) and PostgreSQL plans it once: a generic plan, which the
    session keeps (`plan_cache_mode`, memory_portal/database/). Planning was most of these
    statements' time (the token check's seven-table join planned for a millisecond and ran in
    a fifth of one). Every other cursor binds on the client, and the ORM's statements are
    planned with their values, as a search's full-text candidates need. Elsewhere than
    PostgreSQL, the connection's own cursor."""
    db = db or _db()
    prepared = getattr(db, "prepared_cursor", None)  # memory_portal/database/base.py
    return prepared() if prepared is not None else db.cursor()


_INSERTS: dict[tuple[type, str], tuple[str, list, bool]] = {}
_DATETIME = models.DateTimeField()  # to send a timestamp as the ORM would
_STATEMENTS: dict[tuple, str] = {}


def _insert_plan(model: type[models.Model], db) -> tuple[str, list, bool]:
    """`INSERT INTO table (every column) VALUES ({values})`, its fields, and whether the id is
    the database's (then read back with RETURNING)."""
    key = (model, db.vendor)
    plan = _INSERTS.get(key)
    if plan is None:
        qn = db.ops.quote_name
        pk = model._meta.pk
        auto_pk = isinstance(pk, models.AutoField)
        fields = [f for f in model._meta.concrete_fields if not (auto_pk and f is pk)]
        columns = ", ".join(qn(f.column) for f in fields)
        sql = f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({{values}})"
        if auto_pk:
            sql += f" RETURNING {qn(pk.column)}"
        plan = (sql, fields, auto_pk)
        _INSERTS[key] = plan
    return plan


_AS_IS: dict[type, list[bool]] = {}


def _as_is(model: type[models.Model], fields: list) -> list[bool]:
    """Per field: whether a str or None goes to the database as it is (text columns and keys
    to them), so the ORM's preparation (a no-op for them) can be skipped: most of a note."""
    flags = _AS_IS.get(model)
    if flags is None:
        text = {models.CharField, models.TextField, models.SlugField}
        flags = _AS_IS[model] = [
            type(f.target_field if f.is_relation else f) in text for f in fields
        ]
    return flags


def _insert_statement(obj: models.Model, db, *, when: str = "") -> tuple[str, list, bool]:
    """The INSERT of `obj` and its parameters. NULLs are written into the statement, not sent:
    a note has 39 columns, most of them empty, and psycopg re-parses a statement of more than
    50 parameters on every call (about a millisecond), so the note and its audit event in one
    statement stay under that. One statement text per pattern of empty columns. `when`: a
    condition; the row is inserted only if it holds (INSERT … SELECT … WHERE when)."""
    template, fields, auto_pk = _insert_plan(type(obj), db)
    if when:
        template = template.replace(" VALUES ({values})", f" SELECT {{values}} WHERE {when}", 1)
    values = []
    for field, as_is in zip(fields, _as_is(type(obj), fields), strict=True):
        value = getattr(obj, field.attname)
        if not (as_is and (value is None or type(value) is str)):
            value = field.get_db_prep_save(value, connection=db)
        values.append(value)
    nulls = tuple(value is None for value in values)
    key = (template, nulls)  # the template holds `when`
    sql = _STATEMENTS.get(key)
    if sql is None:
        sql = _STATEMENTS[key] = template.format(
            values=", ".join("NULL" if null else "%s" for null in nulls)
        )
    return sql, [value for value in values if value is not None], auto_pk


def _saved(obj: models.Model, db) -> models.Model:
    obj._state.adding = False
    obj._state.db = db.alias
    return obj


def insert(obj: models.Model) -> models.Model:
    """INSERT one new model instance with every concrete field, as `save(force_insert=True)`
    would, minus signals (no model here has any)."""
    db = _db()
    sql, params, auto_pk = _insert_statement(obj, db)
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        if auto_pk:
            obj.pk = cursor.fetchone()[0]
    return _saved(obj, db)


def insert_pair(first: models.Model, second: models.Model) -> None:
    """INSERT two rows in one round trip on PostgreSQL (the first as a data-modifying CTE);
    elsewhere, two statements. The second row's auto id is read back."""
    db = _db()
    if db.vendor != "postgresql":
        insert(first)
        insert(second)
        return
    sql1, params1, auto1 = _insert_statement(first, db)
    sql2, params2, auto2 = _insert_statement(second, db)
    if auto1:
        raise ValueError("insert_pair: the first row needs its own id")
    with db.cursor() as cursor:
        cursor.execute(f"WITH first_row AS ({sql1}) {sql2}", params1 + params2)
        if auto2:
            second.pk = cursor.fetchone()[0]
    _saved(first, db)
    _saved(second, db)


_ROWS: dict[tuple, tuple[str, list, list[str] | None]] = {}


def _row_plan(
    model: type[models.Model], db, skip: tuple[str, ...] = ()
) -> tuple[str, list, list[str] | None]:
    """Every concrete column of `model` but the fields `skip`, for a SELECT list or a
    RETURNING clause; the conversions the ORM applies to each (SQLite's text datetimes, …);
    and the fields read when some are skipped (None: all), which the instance leaves deferred."""
    key = (model, db.vendor, skip)
    plan = _ROWS.get(key)
    if plan is None:
        qn = db.ops.quote_name
        fields = [f for f in model._meta.concrete_fields if f.name not in skip]
        converters = []
        for i, f in enumerate(fields):
            col = f.get_col(model._meta.db_table)
            found = db.ops.get_db_converters(col) + col.get_db_converters(db)
            if found:
                converters.append((i, col, found))
        names = [f.attname for f in fields] if skip else None
        plan = _ROWS[key] = (", ".join(qn(f.column) for f in fields), converters, names)
    return plan


def _instance(
    model: type[models.Model], row, converters: list, db, names: list[str] | None = None
) -> models.Model:
    values = list(row)
    for i, col, found in converters:
        for convert in found:
            values[i] = convert(values[i], col, db)
    return model.from_db(db.alias, names, values)


def read_setting(project_id: int) -> MemorySetting | None:
    """The project's setting row as it is now, without a lock (step 1 of the write protocol)."""
    db = _db()
    columns, converters, _ = _row_plan(MemorySetting, db)
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM project_memory_setting WHERE project_id = %s", [project_id]
        )
        row = cursor.fetchone()
    return None if row is None else _instance(MemorySetting, row, converters, db)


def _busy(exc: OperationalError):
    """The lock wait's bound ran out (statement or lock timeout): `memory_busy`, counted once;
    None for any other failure."""
    if getattr(exc.__cause__, "sqlstate", None) not in {"57014", "55P03"}:
        return None
    if deadline.expired():  # the wait was cut to the call's time, and that ran out
        return deadline.timed_out()
    from memory_portal import metrics

    from .errors import MemoryPortalError

    metrics.busy(exc)
    return MemoryPortalError("memory_busy", "Another change to this project holds its lock.")


@contextmanager
def bounded_lock_wait(*, restore: bool = True, inline: bool = False):
    """Bound the wait for a project's lock as a whole. PostgreSQL's lock_timeout applies to
    each lock a statement waits for, and a queued row lock is two waits (the row, then the
    holder's transaction), so a second waiter could wait twice as long: the locking statement
    runs under a statement_timeout of MEMORY_PORTAL_LOCK_WAIT_MS instead, and running out of it
    is `memory_busy`. `restore=False` leaves that bound on for the rest of a short transaction
    (the write protocol's own, which saves a statement on the hot path).

    Yields "" once the bound is set, or with `inline=True` (and `restore=False`) the `SET
    LOCAL …; ` for the caller to send ahead of its locking statement in the same query: one
    round trip instead of two. Django's psycopg cursors bind parameters on the client, so one
    query may hold several statements, and PostgreSQL (13 on) runs each statement of such a
    query under the statement_timeout in force when that statement starts."""
    db = _db()
    if db.vendor != "postgresql":
        yield ""  # SQLite: the busy timeout is one wait already
        return
    bound = f"SET LOCAL statement_timeout = {deadline.statement_ms(settings.DB_LOCK_TIMEOUT_MS)}"
    # Server-side binding (an OPTIONS choice this project does not make) takes one statement.
    inline = inline and not restore
    inline = inline and not db.settings_dict["OPTIONS"].get("server_side_binding")
    if not inline:
        with db.cursor() as cursor:
            cursor.execute(bound)
    try:
        yield f"{bound}; " if inline else ""
    except OperationalError as exc:
        refusal = _busy(exc)
        if refusal is None:
            raise
        raise refusal from exc
    if restore:
        with db.cursor() as cursor:
            statement_ms = deadline.statement_ms(settings.DB_STATEMENT_TIMEOUT_MS)
            cursor.execute(f"SET LOCAL statement_timeout = {statement_ms}")


def lock_and_bump(
    project_id: int, *, now, counted: dict[str, int] | None = None
) -> MemorySetting | None:
    """Take the setting row's lock by bumping its revision (and adding `counted` to its note
    counters: the note about to be written), and read it back, in one statement. A write that
    then refuses or finds an identical note rolls the bump back with its transaction."""
    db = _db()
    value = _DATETIME.get_db_prep_save(now, connection=db)
    columns, converters, _ = _row_plan(MemorySetting, db)
    adds, added = counters.sql_adds(counted or {})
    sets = ", ".join(["revision = revision + 1", "last_write_at = %s", *adds])
    with bounded_lock_wait(restore=False, inline=True) as bound, db.cursor() as cursor:
        cursor.execute(
            f"{bound}UPDATE project_memory_setting SET {sets}"
            f" WHERE project_id = %s RETURNING {columns}",
            [value, *added, project_id],
        )
        if bound:
            cursor.nextset()  # past the SET's empty result to the UPDATE's row
        row = cursor.fetchone()
    return None if row is None else _instance(MemorySetting, row, converters, db)


@dataclass(frozen=True)
class SameContent:
    """A stored note with the same normalised content as the one being written."""

    id: str
    status: str
    trust: str
    archive_reason: str
    same_place: bool  # also the same kind, scope, target, day and owner (the idempotency key)


@dataclass
class WriteCheck:
    """What the write protocol must know under the lock, read in one statement."""

    total: int
    by_run: int
    same: list[SameContent]
    calls_used: int | None = None  # with a call to take: its run's calls so far, None: spent


@dataclass(frozen=True)
class CallToTake:
    """An API call a write takes from its run's budget and counts `ok` (services/trace.py)."""

    run_id: str
    tool: str
    budget: int
    now: datetime


_WRITE_CHECK = (
    "SELECT c.total, c.by_run, e.id, e.status, e.trust, e.archive_reason, e.place_key{taken}"
    " FROM ("
    " SELECT (SELECT COUNT(*) FROM project_memory_entry WHERE project_id = %s) AS total,"
    " (SELECT COUNT(*) FROM project_memory_entry"
    "  WHERE project_id = %s AND top_level_run_id = %s) AS by_run) c"
    " LEFT JOIN project_memory_entry e"
    " ON e.project_id = %s AND (e.place_key = %s OR e.content_key = %s)"
)
_TAKE_CALL = (
    "WITH taken AS (UPDATE memory_run SET tool_calls = tool_calls + 1"
    " WHERE id = %s AND tool_calls < %s RETURNING tool_calls),"
    " counted AS ({counted}) "
)


def write_check(
    project_id: int,
    place_key: str,
    content_key: str,
    top_level_run_id: str,
    call: CallToTake | None = None,
) -> WriteCheck:
    """The project's stored notes (every status), the top-level run's new notes, and every
    note of the project with the same place identity or the same normalised content. With
    `call`, the call is also taken from its run's budget and counted `ok`: in the same
    statement on PostgreSQL (data-modifying CTEs), before it elsewhere."""
    db = _db()
    params = [project_id, project_id, top_level_run_id, project_id, place_key, content_key]
    sql = _WRITE_CHECK.format(taken="")
    used = None
    if call is not None and db.vendor != "postgresql":
        used = call_consume_and_record(call.run_id, call.tool, call.budget, now=call.now)
    elif call is not None:
        counted = _COUNT_CALL.format(rows="SELECT %s, %s, 'ok', 1, %s FROM taken")
        sql = _TAKE_CALL.format(counted=counted) + _WRITE_CHECK.format(
            taken=", (SELECT tool_calls FROM taken)"
        )
        now = _DATETIME.get_db_prep_save(call.now, connection=db)
        params = [call.run_id, call.budget, call.run_id, call.tool, now, *params]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    same = [
        SameContent(r[2], r[3], r[4], r[5], same_place=r[6] == place_key)
        for r in rows
        if r[2] is not None
    ]
    if call is not None and db.vendor == "postgresql":
        used = rows[0][7]
    return WriteCheck(total=rows[0][0], by_run=rows[0][1], same=same, calls_used=used)


@dataclass(frozen=True)
class CleanWrite:
    """A new note the write protocol may insert at once if nothing objects: the epoch read
    before the lock, the caps, the top-level run and the note's identity keys, the counters
    it moves, and the API call it takes from its run's budget."""

    project_id: int
    epoch: int
    cap: int
    quota: int
    top_level_run_id: str
    place_key: str
    content_key: str
    counted: dict[str, int]
    now: datetime
    call: CallToTake | None


# `SET LOCAL statement_timeout`, as one statement text whatever the bound (prepared once).
_BOUND_LOCAL = "SELECT set_config('statement_timeout', %s, true)"
_CLEAN_LOCK = "SELECT 1 FROM project_memory_setting WHERE project_id = %s FOR UPDATE"
_CLEAN_WRITE = (
    "WITH s AS (SELECT enabled, revocation_epoch FROM project_memory_setting"
    "  WHERE project_id = %s),"
    " clean AS (SELECT 1 FROM s WHERE s.enabled AND s.revocation_epoch = %s"
    "  AND (SELECT COUNT(*) FROM project_memory_entry WHERE project_id = %s) < %s"
    "  AND (SELECT COUNT(*) FROM project_memory_entry"
    "   WHERE project_id = %s AND top_level_run_id = %s) < %s"
    "  AND NOT EXISTS (SELECT 1 FROM project_memory_entry"
    "   WHERE project_id = %s AND (place_key = %s OR content_key = %s))),"
    " {taken},"
    " ins AS ({note} RETURNING id),"
    " bump AS (UPDATE project_memory_setting SET {sets}"
    "  WHERE project_id = %s AND EXISTS (SELECT 1 FROM ins) RETURNING {columns}),"
    " event AS ({event}),"
    " outbox AS (INSERT INTO memory_event (project_id, number, type, data, created_at)"
    "  SELECT %s, bump.event_seq, %s, %s, %s FROM bump){given}"
    " SELECT (SELECT id FROM event), (SELECT tool_calls FROM taken), bump.*"
    " FROM (SELECT 1) one LEFT JOIN bump ON true{restored}"
)
_TAKEN_CALL = (
    "taken AS (UPDATE memory_run SET tool_calls = tool_calls + 1"
    " WHERE id = %s AND tool_calls < %s AND EXISTS (SELECT 1 FROM clean) RETURNING tool_calls),"
    " counted AS ({counted})"
)
_TAKEN_NONE = "taken AS (SELECT NULL::integer AS tool_calls FROM clean)"
# The call's slot given back with the note (memory/run_slots.py): deleted, and the session's
# statement bound restored, only if the note was written.
_GIVEN = (
    ", given AS (DELETE FROM memory_run_slot WHERE run_id = %s AND slot = %s"
    "  AND EXISTS (SELECT 1 FROM ins)),"
    " restored AS (SELECT set_config('statement_timeout', %s, false) AS bound FROM ins)"
)
_RESTORED = " LEFT JOIN restored ON true"


def write_clean(
    note: models.Model, event: models.Model, write: CleanWrite, outbox: models.Model
) -> tuple[MemorySetting, int | None] | None:
    """The write protocol's common case on PostgreSQL in one round trip: take the project's
    lock, then — in one statement under it — insert the note, its audit event, its outbox
    event (numbered by the project's advanced `event_seq`) and the call's place in the run's
    budget, and advance the revision with the counters, only if nothing
    objects (memory on and the epoch unchanged, both caps, no stored note of the same place
    or content, the budget), and commit. The lock is held inside the database only: no
    Python runs while it is held, so threads waiting for a CPU never hold it (a convoy).

    Returns the setting row after the write and the run's calls so far; or None when nothing
    was written — anything else than a clean new note (an identical repeat, content that was
    removed, a cap, a switched-off project, a project without its setting row yet) goes the
    full way (services/write.py), which says why. Inside a transaction the same statements
    run in a savepoint, and the lock is held until that transaction ends. Elsewhere than
    PostgreSQL, None at once."""
    db = _db()
    if db.vendor != "postgresql":
        return None
    sql_note, note_params, _ = _insert_statement(note, db, when="EXISTS (SELECT 1 FROM taken)")
    sql_event, event_params, _ = _insert_statement(event, db, when="EXISTS (SELECT 1 FROM ins)")
    columns, converters, _ = _row_plan(MemorySetting, db)
    adds, added = counters.sql_adds(write.counted)
    sets = ", ".join(
        ["revision = revision + 1", "event_seq = event_seq + 1", "last_write_at = %s", *adds]
    )
    now = _DATETIME.get_db_prep_save(write.now, connection=db)
    call = write.call
    if call is None:
        taken, taken_params = _TAKEN_NONE, []
    else:
        counted = _COUNT_CALL.format(rows="SELECT %s, %s, 'ok', 1, %s FROM taken")
        taken = _TAKEN_CALL.format(counted=counted)
        call_now = _DATETIME.get_db_prep_save(call.now, connection=db)
        taken_params = [call.run_id, call.budget, call.run_id, call.tool, call_now]
    inside = db.in_atomic_block
    # Outside a transaction of the caller's, the call's slot goes back in this one.
    slot = None if inside else run_slots.held()
    given_params = []
    if slot is not None:
        given_params = [slot.run_id, slot.slot, str(settings.DB_STATEMENT_TIMEOUT_MS)]
    sql = _CLEAN_WRITE.format(
        given=_GIVEN if slot is not None else "",
        restored=_RESTORED if slot is not None else "",
        taken=taken,
        note=sql_note,
        sets=sets,
        columns=columns,
        event=sql_event,
    )
    p = write.project_id
    data = outbox._meta.get_field("data").get_db_prep_save(outbox.data, connection=db)
    created = _DATETIME.get_db_prep_save(outbox.created_at, connection=db)
    params = [
        p, write.epoch, p, write.cap, p, write.top_level_run_id, write.quota,
        p, write.place_key, write.content_key,
        *taken_params, *note_params, now, *added, p, *event_params,
        p, outbox.type, data, created, *given_params,
    ]  # fmt: skip
    lock_ms = deadline.statement_ms(settings.DB_LOCK_TIMEOUT_MS)
    statement_ms = deadline.statement_ms(settings.DB_STATEMENT_TIMEOUT_MS)
    with prepared_cursor(db) as cursor, prepared_cursor(db) as answer:
        try:
            # One round trip: the statements go out together and are answered at one sync.
            # Outside a transaction they are the pipeline's implicit transaction, committed
            # by that sync, whose answer the server sends at once: no explicit COMMIT, which
            # the server would run on its own and whose answer a connection ended before the
            # sync would lose (a refused write that was stored).
            with db.wrap_database_errors, db.connection.pipeline():
                if inside:
                    cursor.execute("SAVEPOINT clean_write")
                cursor.execute(_BOUND_LOCAL, [str(lock_ms)])
                cursor.execute(_CLEAN_LOCK, [p])
                cursor.execute(_BOUND_LOCAL, [str(statement_ms)])
                answer.execute(sql, params)
                if inside:
                    cursor.execute("RELEASE SAVEPOINT clean_write")
        except BaseException as exc:
            if inside:  # outside, the failed sync rolled the implicit transaction back
                with contextlib.suppress(Exception):  # a broken connection keeps its error
                    cursor.execute("ROLLBACK TO SAVEPOINT clean_write")
            refusal = _busy(exc) if isinstance(exc, OperationalError) else None
            if refusal is None:
                raise
            raise refusal from exc
        row = answer.fetchone()
    event_id, calls_used, setting_row = row[0], row[1], row[2:]
    if event_id is None:
        return None
    if slot is not None:
        slot.given = True
    event.pk = event_id
    _saved(note, db)
    _saved(event, db)
    setting = _instance(MemorySetting, setting_row, converters, db)
    outbox.number = setting.event_seq
    return setting, calls_used


# --- Reads with joins, the token check's --------------------------------------------------


@dataclass(frozen=True)
class Joined:
    """One table of a hand-built SELECT: its model, its alias, (for every table but the
    first) the condition of its LEFT JOIN, and the fields not read (left deferred)."""

    model: type[models.Model]
    alias: str
    on: str = ""
    skip: tuple[str, ...] = ()


_SELECTS: dict[tuple, tuple[str, str, list]] = {}


def _select_plan(tables: tuple[Joined, ...], where: str, db) -> tuple[str, str, list]:
    """The SELECT's column list, its FROM … WHERE, and how to split a row into instances."""
    key = (tables, where, db.vendor)
    plan = _SELECTS.get(key)
    if plan is None:
        qn = db.ops.quote_name
        columns, parts = [], []
        for table in tables:
            fields = [f for f in table.model._meta.concrete_fields if f.name not in table.skip]
            columns += [f"{table.alias}.{qn(f.column)}" for f in fields]
            _, converters, names = _row_plan(table.model, db, table.skip)
            parts.append((table.model, len(fields), converters, names))
        first, *rest = tables
        sql = f"FROM {qn(first.model._meta.db_table)} {first.alias}"
        for table in rest:
            sql += f" LEFT JOIN {qn(table.model._meta.db_table)} {table.alias} ON {table.on}"
        plan = (", ".join(columns), f"{sql} WHERE {where}", parts)
        _SELECTS[key] = plan
    return plan


def select_joined(
    tables: tuple[Joined, ...],
    where: str,
    params: list,
    *,
    before: tuple[str, list] | None = None,
    after: tuple[str, list] | None = None,
) -> tuple[list[models.Model | None] | None, tuple]:
    """The first row of `SELECT <every concrete column of each table> FROM … LEFT JOIN … WHERE
    where`, as one model instance per table (None where a join found no row), or None when no
    row matches; relations between the instances are left for the caller to wire. `before`:
    a `WITH` clause and its params, put before the SELECT; `after`: more columns and their
    params, whose values come back as the second item (empty without a row)."""
    db = _db()
    columns, rest, parts = _select_plan(tables, where, db)
    sql, all_params = f"SELECT {columns}", []
    if before is not None:
        sql, all_params = f"{before[0]} {sql}", [*before[1]]
    if after is not None:
        sql, all_params = f"{sql}, {after[0]}", [*all_params, *after[1]]
    with prepared_cursor(db) as cursor:
        cursor.execute(f"{sql} {rest}", [*all_params, *params])
        row = cursor.fetchone()
    if row is None:
        return None, ()
    objects, start = _split(row, parts, db)
    return objects, tuple(row[start:])


def select_joined_rows(
    tables: tuple[Joined, ...], where: str, params: list
) -> list[list[models.Model | None]]:
    """Every row of `select_joined`'s SELECT (no `before` or `after`), in the database's
    order, each as one model instance per table."""
    db = _db()
    columns, rest, parts = _select_plan(tables, where, db)
    with prepared_cursor(db) as cursor:
        cursor.execute(f"SELECT {columns} {rest}", params)
        rows = cursor.fetchall()
    return [_split(row, parts, db)[0] for row in rows]


def _split(row, parts: list, db) -> tuple[list[models.Model | None], int]:
    """A joined row as one instance per table (None where a join found no row), and where the
    tables' columns end."""
    objects: list[models.Model | None] = []
    start = 0
    for model, width, converters, names in parts:
        values = list(row[start : start + width])
        start += width
        if values[0] is None and model._meta.concrete_fields[0].primary_key:
            objects.append(None)  # the LEFT JOIN found nothing
            continue
        objects.append(_instance(model, values, converters, db, names))
    return objects, start


# --- The call budget and the trace, for the API's call path -----------------------------------


def call_consume(run_id: str, budget: int) -> int | None:
    """Take one call from the run's budget in one statement: the calls used so far, or None
    when the budget is spent."""
    with prepared_cursor() as cursor:
        cursor.execute(
            "UPDATE memory_run SET tool_calls = tool_calls + 1"
            " WHERE id = %s AND tool_calls < %s RETURNING tool_calls",
            [run_id, budget],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


_COUNT_CALL = (
    "INSERT INTO memory_toolcallcount (run_id, tool, outcome, count, last_called_at)"
    " {rows} ON CONFLICT (run_id, tool, outcome) DO UPDATE"
    " SET count = memory_toolcallcount.count + 1, last_called_at = excluded.last_called_at"
)


def call_record(
    run_id: str, tool: str, outcome: str, *, now, slot: run_slots.HeldSlot | None = None
) -> None:
    """Count one call of `tool` with `outcome` in one statement (insert or add one). The
    trace row is a call's last statement: on PostgreSQL, outside a caller's transaction, the
    slot the call holds — or `slot`, handed over to this statement (api/after_answer.py) —
    goes back in the same round trip (memory/run_slots.py)."""
    db = _db()
    value = _DATETIME.get_db_prep_save(now, connection=db)
    sql = _COUNT_CALL.format(rows="VALUES (%s, %s, %s, 1, %s)")
    params = [run_id, tool, outcome, value]
    if slot is None and db.vendor == "postgresql" and not db.in_atomic_block:
        slot = run_slots.held()
    if slot is None:
        with prepared_cursor(db) as cursor:
            cursor.execute(sql, params)
        return
    given = [slot.run_id, slot.slot, str(settings.DB_STATEMENT_TIMEOUT_MS)]
    with prepared_cursor(db) as cursor, db.wrap_database_errors, db.connection.pipeline():
        cursor.execute(sql, params)
        cursor.execute(run_slots.GIVE_BACK, given)
    slot.given = True


def call_consume_and_record(run_id: str, tool: str, budget: int, *, now) -> int | None:
    """`call_consume`, then `call_record(outcome="ok")` when the budget allowed the call."""
    used = call_consume(run_id, budget)
    if used is not None:
        call_record(run_id, tool, "ok", now=now)
    return used
