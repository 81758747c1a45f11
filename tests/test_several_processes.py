"""What several processes and hosts share: gunicorn runs one worker on SQLite (the per-run
limit of calls in flight is counted in the process there), and `check --deploy` says so of a
WEB_CONCURRENCY asking for more; on PostgreSQL every new connection starts its session with the
product's bounds and keepalives, set by a statement (a pooler drops startup options)."""

from __future__ import annotations

import runpy

import pytest
from django.conf import settings
from django.core import checks

from memory_portal.checks import one_process_on_sqlite

CONF = str(settings.BASE_DIR / "gunicorn.conf.py")


def test_gunicorn_runs_one_worker_on_sqlite_whatever_web_concurrency_says(monkeypatch):
    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert runpy.run_path(CONF)["workers"] == 1
    monkeypatch.setenv("DATABASE_URL", "postgres://db.internal/memory_portal")
    assert runpy.run_path(CONF)["workers"] == 4


def test_check_deploy_warns_of_several_processes_on_sqlite(monkeypatch):
    from django.db import connections

    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    found = one_process_on_sqlite()
    if connections["default"].vendor == "sqlite":
        assert [m.id for m in found] == ["memory_portal.W002"]
        assert found[0].level == checks.WARNING and "WEB_CONCURRENCY=3" in found[0].msg
    else:
        assert found == []
    monkeypatch.setenv("WEB_CONCURRENCY", "1")
    assert one_process_on_sqlite() == []


@pytest.mark.postgres
def test_a_new_connection_starts_with_the_products_session(db):
    from django.db import connections

    from memory_portal import database

    connection = connections.create_connection("default")
    try:
        with connection.cursor() as cursor:
            shown = {}
            # pg_settings: each value in its own unit (milliseconds, seconds, a count)
            cursor.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                [list(database.session_settings())],
            )
            shown = dict(cursor.fetchall())
    finally:
        connection.close()
    assert shown == database.session_settings()
    assert shown["lock_timeout"] == str(settings.DB_LOCK_TIMEOUT_MS)
    assert settings.DATABASES["default"]["OPTIONS"]["keepalives_idle"] == 15
