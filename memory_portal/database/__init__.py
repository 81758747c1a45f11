"""The PostgreSQL session each new connection starts with: its bounds (how long a statement
may run and a lock may be waited for), and how soon the database gives up on a client that
vanished — a host frozen or cut off mid-transaction would otherwise keep a project's lock for
the two hours of TCP's default keepalive.

They are set by one statement when the connection opens, not as startup options: a pooler in
front of PostgreSQL (PgBouncer) refuses or drops those (docs/OPERATIONS.md, "Several hosts").
The backend itself (ENGINE `memory_portal.database`) is `base.py`."""

from __future__ import annotations

from django.conf import settings

# Probes start after 15 s of silence, every 5 s, 3 unanswered end it; unacknowledged data is
# given up on after 30 s. Ignored on a Unix socket (nothing can vanish there).
TCP_KEEPALIVES = {"idle": 15, "interval": 5, "count": 3}
TCP_USER_TIMEOUT_MS = 30_000
# No transaction of the product waits between its statements for long; one that does belongs
# to a client that stopped (frozen, cut off), and holds locks others wait for.
IDLE_IN_TRANSACTION_MS = 60_000


def session_settings() -> dict[str, str]:
    return {
        "lock_timeout": str(settings.DB_LOCK_TIMEOUT_MS),
        "statement_timeout": str(settings.DB_STATEMENT_TIMEOUT_MS),
        "idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_MS),
        **{f"tcp_keepalives_{name}": str(value) for name, value in TCP_KEEPALIVES.items()},
        "tcp_user_timeout": str(TCP_USER_TIMEOUT_MS),
        # Only the hot path's statements are prepared (fastsql.prepared_cursor): planned once,
        # never again for their values.
        "plan_cache_mode": "force_generic_plan",
    }


def client_keepalives() -> dict[str, int]:
    """libpq's own keepalives (the client notices a vanished database as soon), for the
    connection's OPTIONS."""
    return {
        "keepalives": 1,
        **{f"keepalives_{name}": value for name, value in TCP_KEEPALIVES.items()},
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
    }


def start_session(sender, connection, **kwargs) -> None:
    """connection_created: the session's settings, in one round trip."""
    if connection.vendor != "postgresql":
        return
    wanted = session_settings()
    calls = ", ".join("set_config(%s, %s, false)" for _ in wanted)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {calls}", [v for pair in wanted.items() for v in pair])
