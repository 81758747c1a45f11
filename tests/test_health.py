"""/healthz and /readyz: the process answers without the database; readiness names the check
that fails — with the real causes in a subprocess (a database nobody listens for, one never
migrated) and in the fault suite (the database stopped under the production server)."""

from __future__ import annotations

import json
import sys
import textwrap

from django.test import Client

from memory_portal import health
from tests.dashboard.test_setup import clean_env, run

PROBE = textwrap.dedent(
    """
    import django, json
    django.setup()
    from django.test import Client
    for path in ("/healthz", "/readyz"):
        response = Client().get(path)
        print(path, response.status_code, response.get("Retry-After"), response.content.decode())
    """
)


def probe(env) -> dict[str, tuple[int, str, dict]]:
    result = run([sys.executable, "-c", PROBE], env)
    assert result.returncode == 0, result.stderr
    answers = {}
    for line in result.stdout.splitlines():
        path, status, retry, body = line.split(" ", 3)
        answers[path] = (int(status), retry, json.loads(body))
    return answers


def test_healthz_touches_no_database(db, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]
    assert Client().post("/healthz").status_code == 405


def test_readyz_says_every_check_passed(db):
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "migrations", "static"}
    assert all(said.startswith("ok") for said in body["checks"].values())


def test_readyz_without_a_database_is_503_naming_it(tmp_path):
    # A PostgreSQL port nobody listens on: the database is down.
    env = clean_env(
        DEBUG="true",
        DATABASE_URL="postgres://postgres@127.0.0.1:9/memory_portal",
        MEMORY_PORTAL_VAR_DIR=str(tmp_path),
    )
    answers = probe(env)
    assert answers["/healthz"][0] == 200
    status, retry, body = answers["/readyz"]
    assert status == 503 and retry == str(health.RETRY_AFTER_SECONDS)
    assert body["status"] == "unready"
    assert body["checks"]["database"] == "failed (OperationalError)"
    assert body["checks"]["migrations"] == "not checked: the database is unreachable"


def test_readyz_before_migrate_is_503_naming_the_migrations(tmp_path):
    env = clean_env(
        DEBUG="true", SQLITE_PATH=str(tmp_path / "new.sqlite3"), MEMORY_PORTAL_VAR_DIR=str(tmp_path)
    )
    status, _, body = probe(env)["/readyz"]
    assert status == 503 and body["checks"]["database"] == "ok"
    assert "not applied (manage.py migrate)" in body["checks"]["migrations"]


def test_readyz_without_collected_static_files_names_collectstatic(db, settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    settings.STATIC_ROOT = tmp_path / "empty"
    health._passed.discard("static")
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert "collectstatic" in response.json()["checks"]["static"]


def test_the_probes_answer_over_plain_http_behind_https(db, settings):
    """A container runtime or load balancer probes the process over plain HTTP: with HTTPS
    redirects on, /healthz and /readyz answer; every other page still redirects."""
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/login/").status_code == 301
