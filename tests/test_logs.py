"""Logs: one line per request under a request id every line of it carries; LOG_FORMAT=json
writes one JSON object a line of allowlisted fields, through the secret redactor; no path,
query string or note text in any line. The format itself is checked in a subprocess that
configures logging as production does."""

from __future__ import annotations

import json
import logging
import sys
import textwrap

from django.test import Client

from memory_portal.logs import JsonFormatter, RequestIdFilter, request_id_var
from memory_portal.memory import services
from memory_portal.memory.secrets import RedactingFilter
from tests.dashboard.test_setup import clean_env, run

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_each_request_logs_one_line_with_its_id_and_no_path_or_query(world, caplog):
    token = services.token_create(actor=None, run=world.run)[1]
    caplog.set_level(logging.INFO, logger="memory_portal.request")
    response = Client().post(
        "/api/tools/memory_search?debug=walrus",
        data=json.dumps({"query": "walrus migration"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_X_REQUEST_ID="trace-42.a_b",
    )
    assert response.status_code == 200 and response["X-Request-ID"] == "trace-42.a_b"
    [line] = [r for r in caplog.records if r.name == "memory_portal.request"]
    assert line.getMessage().startswith("POST api/tools/memory_search 200 ")
    assert (line.method, line.route, line.status) == ("POST", "api/tools/memory_search", 200)
    assert line.run_id == world.run.pk and line.agent_id == world.run.agent_id
    assert "walrus" not in line.getMessage()

    odd = Client().get("/healthz", HTTP_X_REQUEST_ID="not a token\n")
    assert odd["X-Request-ID"] != "not a token\n" and len(odd["X-Request-ID"]) == 32


def test_the_request_line_skips_the_redactor_only_when_the_client_chose_nothing_in_it(
    world, caplog, monkeypatch
):
    """The request line is a known method, a URL pattern, a status and a duration: passed
    unscanned. A method the client made up goes through the redactor like any message."""
    from memory_portal.memory import secrets

    scanned = []
    redact = secrets.redact
    monkeypatch.setattr(secrets, "redact", lambda text: scanned.append(text) or redact(text))
    caplog.set_level(logging.INFO, logger="memory_portal.request")
    Client().get("/healthz")
    key = "AKIAQ3EGRT5YF7XJ2M4P"  # an AWS key id: a method is upper-cased
    Client().generic(key, "/healthz")
    lines = [r for r in caplog.records if r.name == "memory_portal.request"]
    assert [r.method for r in lines] == ["GET", key]
    for line in lines:  # as the handler's filter passes each (the settings' own handler does)
        RedactingFilter().filter(line)
    assert not [text for text in scanned if text.startswith("GET healthz")], scanned
    assert [text for text in scanned if text.startswith(key)]
    assert key not in lines[1].getMessage() and "GET healthz 200" in lines[0].getMessage()


def test_a_signed_in_person_is_named_by_id(world, caplog):
    caplog.set_level(logging.INFO, logger="memory_portal.request")
    client = Client()
    client.force_login(world.manager)
    assert client.get("/p/acme-web/?q=secret+plans").status_code == 200
    [line] = [r for r in caplog.records if r.name == "memory_portal.request"]
    assert line.user_id == world.manager.pk and line.route == "p/<slug:slug>/"
    assert "secret" not in line.getMessage()


def record(message: str, **extra) -> logging.LogRecord:
    made = logging.LogRecord("memory_portal.x", logging.WARNING, __file__, 1, message, None, None)
    made.__dict__.update(extra)
    return made


def test_the_json_line_keeps_only_its_fields_and_the_redacted_text():
    formatter = JsonFormatter()
    token = request_id_var.set("rid-1")
    try:
        line = record(f"token {SECRET} in a message", request=object(), content="a note's text")
        RedactingFilter().filter(line)
        RequestIdFilter().filter(line)
        try:
            raise ValueError(f"failed with {SECRET}")
        except ValueError:
            line.exc_info = sys.exc_info()
            RedactingFilter().filter(line)
        out = json.loads(formatter.format(line))
    finally:
        request_id_var.reset(token)
    assert set(out) == {"time", "level", "logger", "message", "request_id", "exc_info"}
    assert out["level"] == "WARNING" and out["request_id"] == "rid-1"
    assert SECRET not in json.dumps(out) and "ValueError" in out["exc_info"]


PRODUCTION_LOGGING = textwrap.dedent(
    """
    import django, logging
    django.setup()
    from django.test import Client
    Client().get("/healthz", HTTP_X_REQUEST_ID="abc-123")
    Client().get("/no-such-page/", HTTP_X_REQUEST_ID="rid-404")
    logging.getLogger("memory_portal.x").warning("with %s", "a value")
    """
)


def test_log_format_json_writes_one_object_a_line(tmp_path):
    env = clean_env(LOG_FORMAT="json", DEBUG="true", MEMORY_PORTAL_VAR_DIR=str(tmp_path))
    result = run([sys.executable, "-c", PRODUCTION_LOGGING], env)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    request = next(line for line in lines if line["logger"] == "memory_portal.request")
    assert request["route"] == "healthz" and request["status"] == 200
    assert request["request_id"] == "abc-123" and request["method"] == "GET"
    assert request["client"] == "127.0.0.1"  # the test client's REMOTE_ADDR
    assert isinstance(request["duration_ms"], float) and request["time"]
    # Django's own line for a 4xx is logged after the middleware has answered: it carries
    # the request's id all the same, and a line logged after the request carries none.
    not_found = next(line for line in lines if line["logger"] == "django.request")
    assert not_found["request_id"] == "rid-404" and not_found["level"] == "WARNING"
    after = next(line for line in lines if line["message"] == "with a value")
    assert after["request_id"] == ""
    text = run([sys.executable, "-c", PRODUCTION_LOGGING], {**env, "LOG_FORMAT": "text"})
    assert "[abc-123] GET healthz 200" in text.stderr
    bad = run([sys.executable, "-c", PRODUCTION_LOGGING], {**env, "LOG_FORMAT": "xml"})
    assert bad.returncode != 0 and "LOG_FORMAT must be text or json" in bad.stderr
