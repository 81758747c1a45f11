"""Hand-built SQL for the write protocol's hot path. Inside the setting-row lock every
millisecond of Python is a millisecond other writers of the project wait, and the ORM costs
about ten times the SQL it sends (docs/PERFORMANCE.md). These helpers build each statement
once from the model's own field definitions (so they cannot drift from the schema) and send it
on a plain cursor; everything else keeps using the ORM."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError, connection, models

_INSERTS: dict[tuple[type, str], tuple[str, list, bool]] = {}


def _insert_plan(model: type[models.Model]) -> tuple[str, list, bool]:
    key = (model, connection.vendor)
    plan = _INSERTS.get(key)
    if plan is None:
        qn = connection.ops.quote_name
        pk = model._meta.pk
        auto_pk = isinstance(pk, models.AutoField)
        fields = [f for f in model._meta.concrete_fields if not (auto_pk and f is pk)]
        columns = ", ".join(qn(f.column) for f in fields)
        values = ", ".join(["%s"] * len(fields))
        sql = f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({values})"
        if auto_pk:
            sql += f" RETURNING {qn(pk.column)}"
        plan = (sql, fields, auto_pk)
        _INSERTS[key] = plan
    return plan


def _params(obj: models.Model, fields: list) -> list:
    return [f.get_db_prep_save(getattr(obj, f.attname), connection=connection) for f in fields]


def _saved(obj: models.Model) -> models.Model:
    obj._state.adding = False
    obj._state.db = connection.alias
    return obj


def insert(obj: models.Model) -> models.Model:
    """INSERT one new model instance with every concrete field, as `save(force_insert=True)`
    would, minus signals (no model here has any)."""
    sql, fields, auto_pk = _insert_plan(type(obj))
    with connection.cursor() as cursor:
        cursor.execute(sql, _params(obj, fields))
        if auto_pk:
            obj.pk = cursor.fetchone()[0]
    return _saved(obj)


def insert_pair(first: models.Model, second: models.Model) -> None:
    """INSERT two rows in one round trip on PostgreSQL (the first as a data-modifying CTE);
    elsewhere, two statements. The second row's auto id is read back."""
    if connection.vendor != "postgresql":
        insert(first)
        insert(second)
        return
    sql1, fields1, auto1 = _insert_plan(type(first))
    sql2, fields2, _auto2 = _insert_plan(type(second))
    if auto1:
        raise ValueError("insert_pair: the first row needs its own id")
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH first_row AS ({sql1}) {sql2}",
            _params(first, fields1) + _params(second, fields2),
        )
        if _auto2:
            second.pk = cursor.fetchone()[0]
    _saved(first)
    _saved(second)


@dataclass
class LockedSetting:
    """The project's setting row as the write protocol needs it."""

    id: int
    project_id: int
    enabled: bool
    revocation_epoch: int
    revision: int


def read_setting_row(project_id: int) -> LockedSetting | None:
    """The setting row as it is now, without a lock (step 1 of the write protocol)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, enabled, revocation_epoch, revision FROM project_memory_setting"
            " WHERE project_id = %s",
            [project_id],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return LockedSetting(row[0], project_id, bool(row[1]), row[2], row[3])


@contextmanager
def bounded_lock_wait(*, restore: bool = True):
    """Bound the wait for a project's lock as a whole. PostgreSQL's lock_timeout applies to
    each lock a statement waits for, and a queued row lock is two waits (the row, then the
    holder's transaction), so a second waiter could wait twice as long: the locking statement
    runs under a statement_timeout of MEMORY_PORTAL_LOCK_WAIT_MS instead, and running out of it
    is `memory_busy`. `restore=False` leaves that bound on for the rest of a short transaction
    (the write protocol's own, which saves a statement on the hot path)."""
    if connection.vendor != "postgresql":
        yield  # SQLite: the busy timeout is one wait already
        return
    from .errors import MemoryPortalError

    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL statement_timeout = {int(settings.DB_LOCK_TIMEOUT_MS)}")
    try:
        yield
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) in {"57014", "55P03"}:
            raise MemoryPortalError(
                "memory_busy", "Another change to this project holds its lock."
            ) from exc
        raise
    if restore:
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = {int(settings.DB_STATEMENT_TIMEOUT_MS)}")


def lock_and_bump(project_id: int, *, now) -> LockedSetting | None:
    """Take the setting row's lock by bumping its revision, and read it back, in one
    statement. A write that then refuses or finds an identical note rolls the bump back with
    its transaction."""
    value = models.DateTimeField().get_db_prep_save(now, connection=connection)
    with bounded_lock_wait(restore=False), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE project_memory_setting SET revision = revision + 1, last_write_at = %s"
            " WHERE project_id = %s RETURNING id, enabled, revocation_epoch, revision",
            [value, project_id],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return LockedSetting(row[0], project_id, bool(row[1]), row[2], row[3])


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


def write_check(
    project_id: int, content_hash: str, content_key: str, top_level_run_id: str
) -> WriteCheck:
    """The project's stored notes (every status), the top-level run's new notes, and every
    note of the project with the same place identity or the same normalised content."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.total, c.by_run, e.id, e.status, e.trust, e.archive_reason,"
            " e.content_hash FROM ("
            " SELECT (SELECT COUNT(*) FROM project_memory_entry WHERE project_id = %s) AS total,"
            " (SELECT COUNT(*) FROM project_memory_entry"
            "  WHERE project_id = %s AND top_level_run_id = %s) AS by_run) c"
            " LEFT JOIN project_memory_entry e"
            " ON e.project_id = %s AND (e.content_hash = %s OR e.content_key = %s)",
            [
                project_id,
                project_id,
                top_level_run_id,
                project_id,
                content_hash,
                content_key,
            ],
        )
        rows = cursor.fetchall()
    same = [
        SameContent(r[2], r[3], r[4], r[5], same_place=r[6] == content_hash)
        for r in rows
        if r[2] is not None
    ]
    return WriteCheck(total=rows[0][0], by_run=rows[0][1], same=same)
