"""The product's PostgreSQL backend (`ENGINE: memory_portal.database`, settings.py): Django's
own, with a health check that costs no round trip and the hot path's cursor.

Django checks a persistent connection before its first use in each request
(`CONN_HEALTH_CHECKS`) with `SELECT 1`: a round trip in every request, a third of a clean
write's. A connection the server ended (a restart, a terminated backend, a closed socket) has
something to read while it is idle — the server's last message or the end of the stream — so
an idle connection with nothing to read is taken as usable, and anything else gets Django's
`SELECT 1`. A host that vanished without a word is found by the keepalives either way
(memory_portal/database/__init__.py)."""

from __future__ import annotations

import re
import select
from functools import lru_cache

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq

_PLACEHOLDER = re.compile(r"%(.)")


@lru_cache(maxsize=512)
def numbered(sql: str) -> str:
    """`%s` placeholders as PostgreSQL's own `$1`, `$2`, … (and `%%` as `%`). psycopg converts
    a statement's placeholders on every execution once it is longer than 4 KB or has more than
    50 parameters, as a clean write's has (about half a millisecond of parsing); the hot path's
    few statement texts are converted once here instead."""
    count = 0

    def number(match: re.Match) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise ValueError(f"only %s placeholders are supported: {match.group(0)!r}")
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql)


class PreparedCursor(base.CursorMixin, psycopg.RawCursor):
    """Binds on the server with PostgreSQL's placeholders (psycopg's RawCursor), given the
    `%s` ones every other statement of the product uses."""

    def execute(self, query, params=None, **kwargs):
        if params is not None and isinstance(query, str):
            query = numbered(query)
        return super().execute(query, params, **kwargs)


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None or conn.closed:
            return False
        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            return super().is_usable()
        try:
            poll = select.poll()
            poll.register(conn.fileno(), select.POLLIN | select.POLLPRI)
            waiting = poll.poll(0)
        except (OSError, ValueError):
            return False
        return super().is_usable() if waiting else True

    def prepared_cursor(self):
        """A cursor that binds its parameters on the server, so psycopg prepares its statements
        on the connection (`prepare_threshold`, settings.py): the hot path's
        (memory/fastsql.py, `prepared_cursor`). Django's own wrapper around it, so execute
        wrappers, the debug log and error translation see its statements as any other."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            return self._prepare_cursor(PreparedCursor(self.connection))
