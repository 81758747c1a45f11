"""The framework's floor: a django-ninja hello-world, as `django-admin startproject` and
django-ninja's tutorial make one — Django's default middleware, one JSON route — served by the
product's gunicorn settings (bench/gunicorn_floor.py) beside the product in
`memory_bench_floor`. What an agent's call costs above this is the product's own work.

Beside it, a durable write's floor: a bearer token looked up by its hash (one indexed SELECT,
django-ninja's `HttpBearer`) and one row inserted and committed (Django's autocommit: the
commit waits for the WAL's flush), on the bench's database (DATABASE_URL) with Django's default
connection settings kept for a minute. Two round trips and a durable commit, as an agent's
write has: what any authenticated write costs on this machine, before the product's rules.

gunicorn bench.floor:application -c bench/gunicorn_floor.py"""

from __future__ import annotations

import os

import dj_database_url
import django
from django.conf import settings

from bench.floor_tables import ROWS, TOKENS, secret_hash

if not settings.configured:
    _url = os.environ.get("DATABASE_URL", "")
    settings.configure(
        DEBUG=False,
        SECRET_KEY="floor-" + "x" * 60,
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "ninja",
        ],
        MIDDLEWARE=[
            "django.middleware.security.SecurityMiddleware",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
            "django.middleware.clickjacking.XFrameOptionsMiddleware",
        ],
        DATABASES={"default": dj_database_url.parse(_url, conn_max_age=60)} if _url else {},
        USE_TZ=True,
    )
    django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import connection  # noqa: E402
from django.urls import path  # noqa: E402
from ninja import NinjaAPI, Schema  # noqa: E402
from ninja.security import HttpBearer  # noqa: E402

api = NinjaAPI(urls_namespace="floor", docs_url=None)


class Hello(Schema):
    message: str


class Row(Schema):
    content: str


class Written(Schema):
    id: int


class Bearer(HttpBearer):
    def authenticate(self, request, token):
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT owner FROM {TOKENS} WHERE secret_hash = %s", [secret_hash(token)]
            )
            found = cursor.fetchone()
        return found[0] if found else None


@api.post("/hello", response=Hello)
def hello(request, body: Hello):
    """Echo the message: a JSON body parsed and validated, a JSON answer, as a tool call has."""
    return {"message": f"hello, {body.message}"}


@api.post("/write", auth=Bearer(), response=Written)
def write(request, body: Row):
    """One row stored for the token's owner, committed before the answer."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ROWS} (owner, content, created_at) VALUES (%s, %s, now()) RETURNING id",
            [request.auth, body.content],
        )
        return {"id": cursor.fetchone()[0]}


@api.get("/readyz")
def ready(request):
    return {"status": "ok"}


urlpatterns = [path("", api.urls)]
application = get_wsgi_application()
