"""Deployment checks. Static files that would otherwise surface as a 500 on every page: with
hashed static file names (DEBUG off), every page's `{% static %}` needs the manifest
`collectstatic` writes. `manage.py check --deploy` reports it (memory_portal.E001), and the WSGI
application refuses to start without it (`refuse_to_start_without_collected_static`), naming the
command to run. And SQLite asked to serve several processes (memory_portal.W002). And, for the
operator's information, a server that sends no email (memory_portal.I003), or emails whose
links lead nowhere (memory_portal.W004)."""

from __future__ import annotations

import os

from django.apps import apps
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

COLLECT_HINT = (
    "Run `manage.py collectstatic --noinput` (README, Production) after every install or "
    "upgrade, before the server starts."
)


def static_problem() -> str | None:
    """Why the static files cannot be served as collected, or None."""
    storage = staticfiles_storage
    if not isinstance(storage, ManifestFilesMixin):
        return None  # plain names (DEBUG): served straight from the source tree
    if not storage.manifest_storage.exists(storage.manifest_name):
        return (
            f"Static files have not been collected: {storage.manifest_name} is missing from "
            f"{storage.location}, so every page would fail."
        )
    collected, _ = storage.load_manifest()
    ignore = apps.get_app_config("staticfiles").ignore_patterns  # as collectstatic skips them
    found = {path for finder in finders.get_finders() for path, _ in finder.list(ignore)}
    missing = sorted(found - set(collected))
    if missing:
        return (
            f"Static files changed since they were collected: {', '.join(missing[:3])}"
            f"{' …' if len(missing) > 3 else ''} not in {storage.manifest_name}, so pages "
            "using them would fail."
        )
    return None


def static_files_collected(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problem = static_problem()
    if problem is None:
        return []
    return [checks.Error(problem, hint=COLLECT_HINT, id="memory_portal.E001")]


def refuse_to_start_without_collected_static() -> None:
    """Called by the WSGI entry point: a server that would answer 500 on every page does not
    start, and says why (gunicorn shows it and exits: "Worker failed to boot")."""
    problem = static_problem()
    if problem is not None:
        raise ImproperlyConfigured(f"{problem} {COLLECT_HINT}")


def one_process_on_sqlite(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """SQLite serves one process: gunicorn.conf.py runs one worker on it, so a WEB_CONCURRENCY
    of more is not what runs (and the per-run limit of calls in flight is counted in that one
    process)."""
    from django.db import connections

    wanted = os.environ.get("WEB_CONCURRENCY", "").strip()
    if connections["default"].vendor != "sqlite" or not wanted.isdigit() or int(wanted) <= 1:
        return []
    return [
        checks.Warning(
            f"WEB_CONCURRENCY={wanted} on SQLite: gunicorn.conf.py runs one worker on SQLite "
            "(it serves one process; the per-run limit of calls in flight is counted there).",
            hint="Set DATABASE_URL to PostgreSQL for several processes or hosts, or drop "
            "WEB_CONCURRENCY; the worker's threads (MEMORY_PORTAL_THREADS) absorb waits.",
            id="memory_portal.W002",
        )
    ]


def email_configured(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """No EMAIL_URL: nobody gets the daily digest or alerts by email (webhooks still do). Not a
    fault, some teams want only webhooks, so it is said, not warned."""
    from django.conf import settings

    if settings.EMAIL_ENABLED:
        if settings.DEBUG or settings.MEMORY_PORTAL_BASE_URL:
            return []
        return [
            checks.Warning(
                "EMAIL_URL is set but MEMORY_PORTAL_BASE_URL is not: the links in digest and "
                "alert emails (the review queue, unsubscribe) would be bare paths.",
                hint="Set MEMORY_PORTAL_BASE_URL to the dashboard's public address "
                "(https://memory.example.com).",
                id="memory_portal.W004",
            )
        ]
    return [
        checks.Info(
            "EMAIL_URL is not set: no digest or alert emails are sent; the review.digest "
            "event still reaches webhooks.",
            hint="Set EMAIL_URL (smtp://user:password@mail.example.com:587/?tls=True) and "
            "MEMORY_PORTAL_BASE_URL, so emails link back to the dashboard.",
            id="memory_portal.I003",
        )
    ]


def sign_on_over_https(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Single sign-on's provider reached over plain HTTP: its keys, and so every token it
    signs, could be anyone's on the way."""
    from django.conf import settings

    if not settings.SSO_ENABLED or settings.OIDC_ISSUER.startswith("https://"):
        return []
    return [
        checks.Warning(
            f"MEMORY_PORTAL_OIDC_ISSUER is {settings.OIDC_ISSUER}, not an https:// address: "
            "the provider's keys and answers travel unprotected.",
            hint="Use the provider's https:// issuer (its discovery document names it).",
            id="memory_portal.W005",
        )
    ]
