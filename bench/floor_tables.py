"""The durable write's floor's two tables (bench/floor.py serves it; `memory_bench_floor`
makes them before the servers start and drops them after): no Django here, so the command
imports them without the floor's settings."""

from __future__ import annotations

import hashlib

TOKENS = "bench_floor_token"
ROWS = "bench_floor_row"


def secret_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_tables(cursor, token: str) -> None:
    """The tables, with `token` as the one bearer token they know."""
    cursor.execute(f"CREATE TABLE {TOKENS} (secret_hash text PRIMARY KEY, owner text NOT NULL)")
    cursor.execute(
        f"CREATE TABLE {ROWS} (id bigserial PRIMARY KEY, owner text NOT NULL,"
        " content text NOT NULL, created_at timestamptz NOT NULL)"
    )
    cursor.execute(f"INSERT INTO {TOKENS} VALUES (%s, 'floor')", [secret_hash(token)])


def drop_tables(cursor) -> None:
    cursor.execute(f"DROP TABLE IF EXISTS {TOKENS}, {ROWS}")
