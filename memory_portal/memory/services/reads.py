"""Read records (SPEC §2.10): every note served to an agent's run, recorded before the answer.

- `reads_record`: called by each agent-facing read (memory_read, memory_search, v1 recall and
  list, the start-of-run recall) with the notes its answer holds, in the order it holds them.
  One multi-row INSERT for the call (atomic alone), never under the project's lock. If it
  cannot be written the call is refused with the retryable 503 `memory_read_unrecorded`: no
  note is ever served without its record. A person's reads (the dashboard, a user token's
  recall preview) are not recorded.
- `reads_prune`: the routine runner's pass, deleting records older than
  MEMORY_PORTAL_READ_RETENTION_DAYS in bounded batches, oldest first.

A note's and a run's records go with the note and the run (a reset, a deletion): the foreign
keys cascade."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

from ..actors import Actor
from ..errors import MemoryPortalError
from ..models import NoteRead

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
    run_id = actor.run.pk
    rows = [
        (note_id, run_id, tool, min(rank, 32_767), score, trust, now)
        for rank, (note_id, trust, score) in enumerate(served, start=first_rank)
    ]
    if not rows:
        return 0
    try:
        _insert(rows)
    except DatabaseError as exc:
        log.warning(
            "read records not written (%s): %d notes withheld", type(exc).__name__, len(rows)
        )
        raise MemoryPortalError(
            "memory_read_unrecorded",
            f"The {len(rows)} note(s) found could not be recorded as read; none were served.",
        ) from exc
    return len(rows)


def _insert(rows: list[tuple]) -> None:
    """The call's records as one multi-row INSERT: atomic on its own, so outside a transaction
    it is one round trip (`bulk_create` would add a BEGIN and a COMMIT around it, and read the
    new ids back)."""
    db = connections[NoteRead.objects.db]
    quote = db.ops.quote_name
    columns = ("note_id", "run_id", "tool", "rank", "score", "trust", "read_at")
    read_at = NoteRead._meta.get_field("read_at")
    values = []
    for row in rows:
        values.extend((*row[:-1], read_at.get_db_prep_value(row[-1], db)))
    one = f"({', '.join(['%s'] * len(columns))})"
    sql = (
        f"INSERT INTO {quote(NoteRead._meta.db_table)} ({', '.join(map(quote, columns))}) "
        f"VALUES {', '.join([one] * len(rows))}"
    )
    with db.cursor() as cursor:
        cursor.execute(sql, values)


def reads_prune(*, now: datetime | None = None, batches: int = 20) -> int:
    """Delete the read records past their retention, PRUNE_BATCH at a time, at most `batches`
    batches a pass (the next pass goes on). Ids grow with time, so the oldest come first on the
    primary key. Returns how many were deleted."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.MEMORY_PORTAL["READ_RETENTION_DAYS"])
    deleted = 0
    for _ in range(batches):
        ids = list(
            NoteRead.objects.filter(read_at__lt=cutoff)
            .order_by("id")
            .values_list("id", flat=True)[:PRUNE_BATCH]
        )
        if not ids:
            break
        deleted += NoteRead.objects.filter(id__in=ids).delete()[0]
        if len(ids) < PRUNE_BATCH:
            break
    return deleted
