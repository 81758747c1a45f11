"""No set-up footguns: a database made by `migrate` alone serves the login, and a production
server whose static files were never collected refuses to start, naming `collectstatic`,
instead of answering 500 on every page. Each runs the real commands in a subprocess."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

LOGIN_WITH_A_WRONG_PASSWORD = textwrap.dedent(
    """
    import django
    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.contrib.auth import get_user_model

    call_command("migrate", "--noinput", verbosity=0)
    get_user_model().objects.create_user("ana", password="right-password-1")
    response = Client().post("/login/", {"username": "ana", "password": "wrong"})
    print("STATUS", response.status_code)
    print("FORM", b"<form" in response.content)
    """
)


def clean_env(**overrides) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DEBUG", "SQLITE_", "STATIC_", "MEMORY_PORTAL_"))
    }
    env.pop("DATABASE_URL", None)
    env["DJANGO_SETTINGS_MODULE"] = "memory_portal.settings"
    env.update(overrides)
    return env


def run(args, env, timeout=300):
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def fresh_database(tmp_path):
    """The environment of a database nobody has touched: a new SQLite file, or a new
    PostgreSQL database beside the test database when the suite runs on PostgreSQL."""
    if connection.vendor != "postgresql":
        yield {
            "SQLITE_PATH": str(tmp_path / "fresh.sqlite3"),
            "MEMORY_PORTAL_VAR_DIR": str(tmp_path),
        }
        return
    params = connection.settings_dict
    name = f"{params['NAME']}_fresh"
    admin = psycopg.connect(
        host=params["HOST"] or "127.0.0.1",
        port=params["PORT"] or 5432,
        user=params["USER"],
        password=params["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    admin.execute(f'CREATE DATABASE "{name}"')
    auth = params["USER"] + (f":{params['PASSWORD']}" if params["PASSWORD"] else "")
    url = f"postgres://{auth}@{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}/{name}"
    try:
        yield {"DATABASE_URL": url, "MEMORY_PORTAL_VAR_DIR": str(tmp_path)}
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_a_database_made_by_migrate_alone_serves_the_login(fresh_database):
    env = clean_env(DEBUG="true", **fresh_database)
    result = run([sys.executable, "-c", LOGIN_WITH_A_WRONG_PASSWORD], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "STATUS 200" in result.stdout and "FORM True" in result.stdout, result.stdout


def production_env(tmp_path, **overrides) -> dict:
    return clean_env(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="memory.example.com,testserver",
        MEMORY_PORTAL_HTTPS="true",
        STATIC_ROOT=str(tmp_path / "static"),
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        MEMORY_PORTAL_VAR_DIR=str(tmp_path),
        **overrides,
    )


SERVE_THE_LOGIN_PAGE = textwrap.dedent(
    """
    from memory_portal.wsgi import application
    from django.test import Client
    response = Client().get("/login/", secure=True, HTTP_HOST="memory.example.com")
    print("STATUS", response.status_code)
    """
)


def test_without_collectstatic_the_server_refuses_to_start_and_says_why(tmp_path):
    env = production_env(tmp_path)
    started = run([sys.executable, "-c", SERVE_THE_LOGIN_PAGE], env)
    assert started.returncode != 0, started.stdout
    assert "collectstatic" in started.stderr and "STATUS" not in started.stdout
    check = run([sys.executable, "manage.py", "check", "--deploy"], env)
    assert check.returncode != 0
    assert "memory_portal.E001" in check.stderr and "collectstatic" in check.stderr
    # The README's step fixes it: collected, the server starts and serves the page.
    collect = run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], env)
    assert collect.returncode == 0, collect.stderr
    served = run([sys.executable, "-c", SERVE_THE_LOGIN_PAGE], env)
    assert served.returncode == 0, served.stderr
    assert "STATUS 200" in served.stdout


def test_a_static_file_added_after_collectstatic_is_reported(tmp_path, settings):
    """An upgrade that adds a stylesheet needs collectstatic again; the check says which."""
    from django.core.management import call_command

    from memory_portal.checks import static_problem

    source = tmp_path / "source"
    (source / "extra").mkdir(parents=True)
    (source / "extra" / "first.css").write_text("p { color: black; }")
    settings.STATICFILES_DIRS = [source]
    settings.STATIC_ROOT = tmp_path / "collected"
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
    }
    assert "have not been collected" in static_problem()
    call_command("collectstatic", "--noinput", verbosity=0)
    assert static_problem() is None
    (source / "extra" / "second.css").write_text("p { color: blue; }")
    assert "extra/second.css" in static_problem()


SERVE_A_STATIC_FILE = textwrap.dedent(
    """
    from memory_portal.wsgi import application
    from django.test import Client
    client = Client()
    css = client.get("/static/dashboard/portal.css", secure=True, HTTP_HOST="memory.example.com")
    page = client.get("/login/", secure=True, HTTP_HOST="memory.example.com")
    linked = "/static/dashboard/portal.css" in page.content.decode()
    print("CSS", css.status_code, "PAGE", page.status_code, linked)
    """
)


def test_plain_static_serves_the_source_tree_without_collectstatic(tmp_path):
    env = production_env(tmp_path, MEMORY_PORTAL_PLAIN_STATIC="true")
    served = run([sys.executable, "-c", SERVE_A_STATIC_FILE], env)
    assert served.returncode == 0, served.stderr
    assert "CSS 200 PAGE 200 True" in served.stdout, served.stdout
