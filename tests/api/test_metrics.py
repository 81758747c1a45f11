"""/metrics: served only to a scraper with MEMORY_PORTAL_METRICS_TOKEN, each figure counted in
its one place, never content or a query. (Several gunicorn workers adding up in one scrape is
checked by the fault suite against the database: `make faults`.)"""

from __future__ import annotations

import sqlite3

import pytest
from django.db import OperationalError
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from memory_portal.memory.errors import retryable

from .conftest import Api

TOKEN = "scrape-token-for-tests"


@pytest.fixture
def scrape(client, settings):
    settings.MEMORY_PORTAL_METRICS_TOKEN = TOKEN

    def get() -> str:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.status_code
        assert response["Content-Type"].startswith("text/plain; version=")
        return response.content.decode()

    return get


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_no_token_no_metrics_and_a_scraper_must_send_it(client, settings, db):
    settings.MEMORY_PORTAL_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    settings.MEMORY_PORTAL_METRICS_TOKEN = TOKEN
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_tool_calls_notes_and_recalls_are_counted_and_no_content_is(
    api: Api, tokens, world, scrape, django_capture_on_commit_callbacks
):
    ok = value("memory_portal_tool_calls_total", tool="write", outcome="ok")
    refused = value("memory_portal_tool_calls_total", tool="write", outcome="memory_invalid")
    written = value("memory_portal_notes_written_total")
    recalls = value("memory_portal_recall_seconds_count")
    secret_words = "Ultramarine-walrus deploys on Thursdays"

    body = {"kind": "fact", "target": "long_term", "content": secret_words}
    with django_capture_on_commit_callbacks(execute=True):  # a note counts once committed
        assert api.tool("memory_write", tokens.agent, body).status_code == 200
        assert api.tool("memory_write", tokens.agent, body).status_code == 200  # a repeat
    assert api.tool("memory_write", tokens.agent, {"kind": "nonsense"}).status_code == 400
    query = {"query": "walrus deploy thursdays"}
    assert api.post("/api/v1/memories/recall", tokens.agent, query).status_code == 200

    assert value("memory_portal_tool_calls_total", tool="write", outcome="ok") == ok + 2
    assert (
        value("memory_portal_tool_calls_total", tool="write", outcome="memory_invalid")
        == refused + 1
    )
    assert value("memory_portal_notes_written_total") == written + 1
    assert value("memory_portal_recall_seconds_count") == recalls + 1
    text = scrape()
    assert "walrus" not in text.lower() and "thursday" not in text.lower()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {
        "memory_portal_tool_calls",
        "memory_portal_notes_written",
        "memory_portal_busy",
        "memory_portal_request_seconds",
        "memory_portal_recall_seconds",
        "memory_portal_task_queue_depth",
    } <= set(families)
    routes = {s.labels.get("route") for s in families["memory_portal_request_seconds"].samples}
    assert "api/tools/memory_write" in routes and "api/v1/memories/recall" in routes
    assert not any(r and "walrus" in r for r in routes)


def test_a_busy_failure_is_counted_once_however_often_it_is_classified(db):
    try:
        try:
            raise sqlite3.OperationalError("database is locked")
        except sqlite3.OperationalError as cause:
            raise OperationalError("database is locked") from cause
    except OperationalError as exc:
        failure = exc
    before = value("memory_portal_busy_total")
    assert retryable(failure).code == "memory_busy"
    assert retryable(failure).code == "memory_busy"  # the call path, then the answer
    assert value("memory_portal_busy_total") == before + 1


def test_the_queue_depth_is_read_at_scrape_time(scrape, settings, db):
    from django_tasks_db.models import DBTaskResult

    from memory_portal.metrics import QueueDepth

    assert QueueDepth.depth() == 0  # immediate tasks: nothing waits
    settings.TASKS_MODE = "database"
    assert QueueDepth.depth() == DBTaskResult.objects.ready().count() == 0
    assert "memory_portal_task_queue_depth 0.0" in scrape()


def test_importing_the_metrics_with_the_database_queue_touches_no_model(tmp_path):
    """Logging imports memory_portal.logs (and so the metrics) before the apps are loaded."""
    import subprocess
    import sys

    from tests.dashboard.test_setup import clean_env

    code = "import django; django.setup(); print('ready')"
    env = clean_env(MEMORY_PORTAL_TASKS="database", MEMORY_PORTAL_VAR_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "ready" in done.stdout, done.stderr[-1500:]
