"""Failures without damage: a database failure that passes by itself is a 503 with Retry-After
(the JSON envelope on the API, a plain page in the dashboard); anything else stays a 500. One
classification (errors.retryable), one edge (memory_portal/failures.py)."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager

import psycopg
import pytest
from django.db import InterfaceError, OperationalError, connection, connections
from django.test import Client

from memory_portal.memory import services
from memory_portal.memory.errors import retryable
from memory_portal.memory.models import MemorySetting, Note, ToolCallCount

from .conftest import error_code


def wrapped(cause: BaseException, kind=OperationalError) -> BaseException:
    """A database error as Django raises it: its own class, the driver's error as the cause."""
    try:
        try:
            raise cause
        except BaseException as exc:
            raise kind(str(cause)) from exc
    except BaseException as exc:  # noqa: BLE001 - returned for inspection
        return exc


@pytest.mark.parametrize(
    ("cause", "kind", "code"),
    [
        (sqlite3.OperationalError("database is locked"), OperationalError, "memory_busy"),
        (sqlite3.OperationalError("disk I/O error"), OperationalError, "service_unavailable"),
        (sqlite3.OperationalError("no such table: x"), OperationalError, None),
        (psycopg.errors.LockNotAvailable("lock timeout"), OperationalError, "memory_busy"),
        (psycopg.errors.DeadlockDetected("deadlock"), OperationalError, "memory_busy"),
        (psycopg.errors.AdminShutdown("terminating"), OperationalError, "service_unavailable"),
        (psycopg.errors.CannotConnectNow("starting up"), OperationalError, "service_unavailable"),
        (
            psycopg.OperationalError("server closed the connection"),
            OperationalError,
            "service_unavailable",
        ),
        (
            psycopg.errors.QueryCanceled("statement timeout"),
            OperationalError,
            "service_unavailable",
        ),
        (
            psycopg.InterfaceError("connection already closed"),
            InterfaceError,
            "service_unavailable",
        ),
        (psycopg.errors.UndefinedTable("no such table"), OperationalError, None),
        (RuntimeError("a bug"), RuntimeError, None),
    ],
)
def test_one_classification_of_retryable_failures(cause, kind, code):
    exc = wrapped(cause, kind) if kind is not RuntimeError else cause
    refusal = retryable(exc)
    assert (refusal.code if refusal else None) == code
    if refusal:
        assert refusal.status == 503 and refusal.retry_after and refusal.hint


def break_write(monkeypatch, cause):
    """The forced failure, at the database boundary: the write protocol's lock statement (the
    one round trip of a clean write on PostgreSQL, the lock and bump of the full protocol)."""
    from memory_portal.memory import fastsql

    def fail(*args, **kwargs):
        raise wrapped(cause)

    monkeypatch.setattr(fastsql, "write_clean", fail)
    monkeypatch.setattr(fastsql, "lock_and_bump", fail)


@pytest.mark.parametrize(
    ("cause", "code", "retry_after"),
    [
        (sqlite3.OperationalError("database is locked"), "memory_busy", "2"),
        (psycopg.OperationalError("server closed the connection"), "service_unavailable", "5"),
    ],
)
def test_a_retryable_failure_is_a_503_envelope_with_retry_after(
    api, tokens, world, monkeypatch, cause, code, retry_after
):
    break_write(monkeypatch, cause)
    response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "Busy"})
    assert response.status_code == 503 and error_code(response) == code
    assert response["Retry-After"] == retry_after
    assert "nothing was written" in response.json()["error"]["hint"]
    assert not Note.objects.exists()
    trace = ToolCallCount.objects.get(run=world.run, tool="write")
    assert trace.outcome == code, "the call is counted with its outcome"


def test_a_bug_stays_a_500(api, tokens, monkeypatch):
    break_write(monkeypatch, psycopg.errors.UndefinedColumn("no such column"))
    response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "Bug"})
    assert response.status_code == 500 and error_code(response) == "internal_error"
    assert not response.has_header("Retry-After")


def test_the_dashboard_answers_a_plain_503_page(world, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(world.member)
    note = services.note_write(actor=world.as_agent, kind="fact", content="Veto me").note
    from memory_portal.memory.services.change import ProjectChange

    def fail(change, inserting):
        raise wrapped(sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr(ProjectChange, "_lock", fail)
    response = client.post(f"/p/acme-web/notes/{note.pk}/veto/", {"next": "/p/acme-web/"})
    assert response.status_code == 503 and response["Retry-After"] == "2"
    html = response.content.decode()
    assert "Busy for a moment" in html and "Nothing was changed" in html
    assert Note.objects.get(pk=note.pk).status == "active"


def test_the_dashboard_answers_a_styled_500_page_for_a_bug(world, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(world.member)

    def explode(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("memory_portal.dashboard.views.pages.selectors.projects_overview", explode)
    response = client.get("/")
    assert response.status_code == 500 and "Something went wrong" in response.content.decode()
    assert "boom" not in response.content.decode()


def test_the_error_pages_keep_the_navigation(world, monkeypatch):
    """404, 403 and 500 pages are the product's, with the main navigation (plain links: they
    touch neither the session nor the database)."""
    client = Client(raise_request_exception=False)
    client.force_login(world.member)
    monkeypatch.setattr(
        "memory_portal.dashboard.views.pages.selectors.projects_overview",
        lambda **kwargs: (_ for _ in ()).throw(RuntimeError("boom")),
    )
    pages = [client.get("/no/such/page/"), client.get("/p/no-such-project/"), client.get("/")]
    assert [page.status_code for page in pages] == [404, 404, 500]
    for page in pages:
        html = page.content.decode()
        assert '<nav class="topnav" aria-label="Main">' in html
        assert 'href="/audit/">Audit log</a>' in html and 'href="/tokens/">API tokens</a>' in html


def test_make_run_shows_the_products_error_pages_where_django_shows_its_own(
    world, monkeypatch, caplog
):
    """Under DEBUG (`make run`) DebugErrorPages answers with the product's 404 and 500 pages
    (the 500's traceback logged); `?debug=1` and the API keep what Django and the API say."""
    from django.http import Http404, HttpResponseNotFound
    from django.test import RequestFactory

    from memory_portal.failures import DebugErrorPages

    factory = RequestFactory()
    technical = HttpResponseNotFound("<h1>Page not found (404)</h1> URLconf …")
    pages = DebugErrorPages(lambda request: technical)

    def unmatched(path):
        request = factory.get(path)
        request.resolver_match = None
        return pages(request)

    assert b"There is no such page here" in unmatched("/nope/").content
    assert unmatched("/nope/?debug=1") is technical and unmatched("/api/nope") is technical
    request = factory.get("/p/acme-web/")
    assert pages.process_exception(request, Http404()).status_code == 404
    with caplog.at_level("ERROR", logger="memory_portal.failures"):
        crash = pages.process_exception(request, RuntimeError("boom"))
    assert crash.status_code == 500 and b"Something went wrong" in crash.content
    assert "boom" not in crash.content.decode() and "RuntimeError: boom" in caplog.text
    assert pages.process_exception(factory.get("/api/v1/memories"), RuntimeError()) is None
    assert pages.process_exception(factory.get("/?debug=1"), RuntimeError()) is None


def test_debug_error_pages_are_a_middleware_under_debug_only():
    import os
    import subprocess
    import sys

    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'memory_portal.settings';"
        "django.setup(); from django.conf import settings;"
        "print('memory_portal.failures.DebugErrorPages' in settings.MIDDLEWARE)"
    )
    for debug, shown in (("1", "True"), ("0", "False")):
        out = subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "DEBUG": debug},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert out.stdout.strip() == shown


# --- A real lock held on PostgreSQL --------------------------------------------------------


@contextmanager
def setting_row_held(project):
    """Another connection holds the project's setting-row lock, as a long change would."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with connections["default"].cursor() as cur:  # this thread's own connection
            cur.execute("BEGIN")
            cur.execute(
                "SELECT id FROM project_memory_setting WHERE project_id = %s FOR UPDATE",
                [project.pk],
            )
            held.set()
            release.wait(30)
            cur.execute("ROLLBACK")
        connections["default"].close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        holder.join(10)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_held_project_lock_is_memory_busy_and_other_projects_go_on(make_user, settings):
    from tests.conftest import build_world

    from .conftest import Api

    a = build_world(make_user, slug="proj-a")
    b = build_world(make_user, slug="proj-b")
    token_a = services.token_create(actor=None, run=a.run)[1]
    token_b = services.token_create(actor=None, run=b.run)[1]

    with setting_row_held(a.project):
        with connection.cursor() as cur:
            cur.execute("SET lock_timeout = 300")  # the request path's bound, shortened
        api = Api(Client())
        busy = api.tool("memory_write", token_a, {"kind": "fact", "content": "Waits"})
        assert busy.status_code == 503 and error_code(busy) == "memory_busy"
        assert busy["Retry-After"] == "2"
        other = api.tool("memory_write", token_b, {"kind": "fact", "content": "Goes on"})
        assert other.status_code == 200, other.json()
    assert not Note.objects.filter(project=a.project).exists()
    assert Note.objects.filter(project=b.project, content="Goes on").count() == 1
    revision = MemorySetting.objects.get(project=a.project).revision
    retried = Api(Client()).tool("memory_write", token_a, {"kind": "fact", "content": "Waits"})
    assert retried.status_code == 200, "the same call works once the lock is free"
    assert MemorySetting.objects.get(project=a.project).revision == revision + 1


def test_a_completed_call_keeps_its_answer_when_only_the_trace_fails(api, tokens, monkeypatch):
    from memory_portal.api import tracing

    record = tracing.services.tool_call_record

    def flaky(*, run, tool, outcome):
        if outcome == "ok":
            raise wrapped(psycopg.OperationalError("server closed the connection"))
        return record(run=run, tool=tool, outcome=outcome)

    monkeypatch.setattr(tracing.services, "tool_call_record", flaky)
    response = api.tool("memory_write", tokens.agent, {"kind": "fact", "content": "Stored"})
    assert response.status_code == 200, "the note is stored, so the answer says so"
    assert Note.objects.filter(pk=response.json()["id"]).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_every_waiter_on_a_held_lock_gets_its_503_within_the_bound(make_user, settings):
    import time

    from tests.conftest import build_world

    from .conftest import Api

    settings.DB_LOCK_TIMEOUT_MS = 600
    a = build_world(make_user, slug="proj-a")
    tokens = [services.token_create(actor=None, run=a.run)[1] for _ in range(3)]

    results: list[tuple[int, float]] = []
    # The process's first API call loads the URLconf and the secret rules (about a second):
    # paid before the clock starts, so the test holds when it runs alone.
    assert Api(Client()).tool("memory_status", tokens[0], {}).status_code == 200

    def write(token: str, n: int) -> None:
        started = time.monotonic()
        response = Api(Client()).tool("memory_write", token, {"kind": "fact", "content": f"W{n}"})
        results.append((response.status_code, time.monotonic() - started))
        connections["default"].close()

    with setting_row_held(a.project):
        writers = [threading.Thread(target=write, args=(t, i)) for i, t in enumerate(tokens)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(30)
    assert sorted(code for code, _ in results) == [503, 503, 503]
    # Queued behind one another, each still waits one bound, not one per lock (+ set-up slack).
    assert max(elapsed for _, elapsed in results) < 0.6 * 1.8, results
