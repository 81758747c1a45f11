"""The product's PostgreSQL backend (memory_portal/database/): the hot path's statements
prepared on their generic plan, and a health check of kept connections that costs no round
trip but still finds a connection the server ended."""

from __future__ import annotations

import select
import time
from contextlib import contextmanager

import pytest
from django.db import close_old_connections, connection, connections

from memory_portal.database.base import numbered
from memory_portal.memory.models import Note

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_placeholders_are_numbered_once_and_percent_signs_kept():
    assert numbered("SELECT %s, %s WHERE a LIKE 'x%%'") == "SELECT $1, $2 WHERE a LIKE 'x%'"
    with pytest.raises(ValueError):
        numbered("SELECT %(name)s")


def test_the_hot_path_is_prepared_on_its_generic_plan(api, tokens, world):
    """Two writes of one run: the token check, the lock and the write statement are each a
    prepared statement of the connection, executed on a generic plan; the ORM's are not."""
    for content in ("The nightly export runs at two", "The cache warms up after it"):
        response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": content})
        assert response.status_code == 200, response.json()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        prepared = cursor.fetchall()
    texts = {
        "token check": "WITH callee AS",
        "lock": "FOR UPDATE",
        "write": "INSERT INTO memory_event",
    }
    for what, marker in texts.items():
        found = [row for row in prepared if marker in row[0]]
        assert found, f"the {what} is not prepared: {[row[0][:80] for row in prepared]}"
        assert all(row[1] >= 1 and row[2] == 0 for row in found), (what, found)
    assert not [row for row in prepared if '"memory_' in row[0] and "SELECT" in row[0][:10]]


def test_a_connection_the_server_ended_is_found_without_a_round_trip_per_request(
    api, tokens, world, monkeypatch
):
    """A kept connection the server ended (a restart, a terminated backend) has something to
    read: the check at the next request's start (which Django's test client leaves out, so it
    is called here as a server calls it) finds it, and the request reconnects and answers. A
    live connection is taken as usable without a statement."""
    db = connections["default"]
    assert api.tool("memory_status", tokens.agent, {}).status_code == 200
    opened = []  # Django's own check sends SELECT 1 on a cursor of the raw connection
    cursor = db.connection.cursor
    monkeypatch.setattr(
        db.connection, "cursor", lambda *a, **k: opened.append(a) or cursor(*a, **k)
    )
    close_old_connections()
    assert db.is_usable() and opened == []
    monkeypatch.undo()
    pid = db.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()
    deadline = time.monotonic() + 5
    while not select.select([db.connection.fileno()], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "the server never ended the connection"
    close_old_connections()
    answer = api.tool("memory_status", tokens.agent, {})
    assert answer.status_code == 200, answer.json()
    assert db.connection.info.backend_pid != pid


def test_a_write_whose_connection_ends_before_its_answer_is_refused_only_if_not_stored(
    api, tokens, world, monkeypatch
):
    """The clean write goes out as one pipeline. Its backend is ended (as a fast shutdown or
    a restart ends it) after every statement was sent and run, before the pipeline's end was:
    the caller's 503 must then mean that nothing was stored — a commit that ran ahead of the
    answer would leave a stored note behind a refusal (the fault suite's "nothing refused is
    stored")."""
    db = connections["default"]
    assert api.tool("memory_status", tokens.agent, {}).status_code == 200
    real = type(db.connection).pipeline
    ended = []

    @contextmanager
    def ended_before_the_answer(conn):
        with real(conn) as pipeline:
            yield pipeline
            time.sleep(0.2)  # the server has run what was sent
            pid = conn.info.backend_pid
            other = connections.create_connection("default")
            try:
                with other.cursor() as cursor:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            finally:
                other.close()
            ended.append(pid)
            deadline = time.monotonic() + 5
            while not select.select([conn.fileno()], [], [], 0.05)[0]:
                assert time.monotonic() < deadline, "the server never ended the connection"

    monkeypatch.setattr(type(db.connection), "pipeline", ended_before_the_answer)
    content = "The deploy window closes at six"
    answer = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": content})
    monkeypatch.undo()
    assert ended, "the write did not go out as a pipeline"
    db.close()
    stored = Note.objects.filter(content=content).count()
    assert answer.status_code == 503 and stored == 0, (answer.status_code, stored)
    again = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": content})
    assert again.status_code == 200 and again.json()["created"] is True, again.json()
