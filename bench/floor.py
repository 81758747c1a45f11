"""The framework's floor: a django-ninja hello-world, as `django-admin startproject` and
django-ninja's tutorial make one — Django's default middleware, no database, one JSON route —
served by the product's gunicorn settings (bench/gunicorn_floor.py) beside the product in
`memory_bench_floor`. What an agent's call costs above this is the product's own work.

gunicorn bench.floor:application -c bench/gunicorn_floor.py"""

from __future__ import annotations

import django
from django.conf import settings

if not settings.configured:
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
        DATABASES={},
        USE_TZ=True,
    )
    django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.urls import path  # noqa: E402
from ninja import NinjaAPI, Schema  # noqa: E402

api = NinjaAPI(urls_namespace="floor", docs_url=None)


class Hello(Schema):
    message: str


@api.post("/hello", response=Hello)
def hello(request, body: Hello):
    """Echo the message: a JSON body parsed and validated, a JSON answer, as a tool call has."""
    return {"message": f"hello, {body.message}"}


@api.get("/readyz")
def ready(request):
    return {"status": "ok"}


urlpatterns = [path("", api.urls)]
application = get_wsgi_application()
