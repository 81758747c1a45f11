"""Read records (SPEC §2.10): every note served to an agent's run, recorded before the answer.

- `reads_record`: called by each agent-facing read (memory_read, memory_search, v1 recall and
  list, the start-of-run recall) with the notes its answer holds, in the order it holds them.
  One multi-row INSERT for the call (atomic alone), never under the project's lock. If it
  cannot be written the call is refused with the retryable 503 `memory_read_unrecorded`: no
  note is ever served without its record. A person's reads (the dashboard, a user token's
  recall preview) are not recorded.
- `reads_prune`: the routine runner's pass, deleting records older than
  MEMORY_PORTAL_READ_RETENTION_DAYS in bounded batches.

A note's and a run's records go with the note and the run (a reset, a deletion): the foreign
keys cascade."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

from .. import fastsql
from ..actors import Actor
from ..errors import MemoryPortalError
from ..models import Note, NoteRead, Run

log = logging.getLogger(__name__)

PRUNE_BATCH = 5_000


def reads_record(
    *,
    actor: Actor,
    tool: str,
    served: Iterable[tuple[str, str, float | None]],
    first_rank: int = 1,
    now: datetime | None = None,
) -> int:
    """Record the notes `served` — (note id, its trust now, its score or None), in the
    answer's order, ranked from `first_rank` (a page's offset + 1) — as read by the actor's
    run. Returns how many were recorded."""
    if not actor.is_agent:
        return 0
    now = now or timezone.now()
    rows, seen = [], set()
    for rank, (note_id, trust, score) in enumerate(served, start=first_rank):
        if note_id not in seen:  # a note twice in one answer is one read, at its first place
            seen.add(note_id)
            rows.append((note_id, score, min(rank, 32_767), tool, trust))
    if not rows:
        return 0
    try:
        _insert(actor.run.pk, now, rows)
    except DatabaseError as exc:
        log.warning(
            "read records not written (%s): %d notes withheld", type(exc).__name__, len(rows)
        )
        raise MemoryPortalError(
            "memory_read_unrecorded",
            f"The {len(rows)} note(s) found could not be recorded as read; none were served.",
        ) from exc
    return len(rows)


def _insert(run_id: str, now: datetime, rows: list[tuple]) -> None:
    """The call's records as one multi-row INSERT: atomic on its own, so outside a transaction
    it is one round trip (`bulk_create` would add a BEGIN and a COMMIT around it). The run's
    and each note's `read_key` are looked up inside it by their ids (primary key lookups);
    a note deleted meanwhile has none, so the INSERT fails whole and nothing is served."""
    db = connections[NoteRead.objects.db]
    quote = db.ops.quote_name
    columns = ("run_key", "read_at", "note_key", "score", "rank", "tool", "trust")
    key_of = "(SELECT read_key FROM {} WHERE id = %s)"
    run_key, note_key = key_of.format(quote(Run._meta.db_table)), key_of.format(
        quote(Note._meta.db_table)
    )
    one = f"({run_key}, %s, {note_key}, %s, %s, %s, %s)"
    tool, trust = NoteRead._meta.get_field("tool"), NoteRead._meta.get_field("trust")
    read_at = NoteRead._meta.get_field("read_at").get_db_prep_value(now, db)
    values = []
    for note_id, score, rank, tool_name, trust_name in rows:
        values += (run_id, read_at, note_id, score, rank)
        values += (tool.get_prep_value(tool_name), trust.get_prep_value(trust_name))
    sql = (
        f"INSERT INTO {quote(NoteRead._meta.db_table)} ({', '.join(map(quote, columns))}) "
        f"VALUES {', '.join([one] * len(rows))}"
    )
    with fastsql.prepared_cursor(db) as cursor:  # planned once per connection and row count
        cursor.execute(sql, values)


def reads_prune(*, now: datetime | None = None, batches: int = 20) -> int:
    """Delete the read records past their retention, PRUNE_BATCH at a time, at most `batches`
    batches a pass (the next pass goes on). They are found by the index on `read_at` (a BRIN
    index on PostgreSQL, migration 0022) and deleted by their place in the table: the table has
    no key of its own. Returns how many were deleted."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.MEMORY_PORTAL["READ_RETENTION_DAYS"])
    db = connections[NoteRead.objects.db]
    table = db.ops.quote_name(NoteRead._meta.db_table)
    place = "ctid" if db.vendor == "postgresql" else "rowid"
    old = f"SELECT {place} FROM {table} WHERE read_at < %s LIMIT %s"
    sql = (
        f"DELETE FROM {table} WHERE ctid = ANY(ARRAY({old}))"
        if db.vendor == "postgresql"
        else f"DELETE FROM {table} WHERE rowid IN ({old})"
    )
    params = [NoteRead._meta.get_field("read_at").get_db_prep_value(cutoff, db), PRUNE_BATCH]
    deleted = 0
    for _ in range(batches):
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            count = cursor.rowcount
        deleted += count
        if count < PRUNE_BATCH:
            break
    return deleted
