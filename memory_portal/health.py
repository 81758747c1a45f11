"""Health and readiness, for load balancers, orchestrators and the test harnesses.

`/healthz` says the process answers: it touches no database, so a database outage never gets
a healthy process restarted. `/readyz` says this process can serve: the database answers,
every migration is applied and the static files' manifest is there (when the manifest storage
is in use). Otherwise it is a 503 with Retry-After naming the failing check. Both answer JSON,
need no login and say nothing about the data."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from memory_portal.checks import static_problem

logger = logging.getLogger("memory_portal.health")

RETRY_AFTER_SECONDS = 5
# Once true in a process a check stays true (migrations are not unapplied under a running
# server; the manifest is written before it starts), so a probe costs one query.
_passed: set[str] = set()


def _database() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _migrations() -> str:
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        raise NotReady(f"{len(pending)} migration(s) not applied (manage.py migrate)")
    return "ok"


def _static() -> str:
    problem = static_problem()
    if problem is not None:
        raise NotReady(f"{problem} Run manage.py collectstatic.")
    return "ok"


class NotReady(Exception):
    pass


CHECKS: dict[str, Callable[[], str]] = {
    "database": _database,
    "migrations": _migrations,
    "static": _static,
}
NEEDS_DATABASE = {"migrations"}


def readiness() -> tuple[bool, dict[str, str]]:
    """Every check's outcome ("ok…" or why not) and whether all passed."""
    results: dict[str, str] = {}
    for name, check in CHECKS.items():
        if name in _passed:
            results[name] = "ok"
            continue
        if name in NEEDS_DATABASE and not results["database"].startswith("ok"):
            results[name] = "not checked: the database is unreachable"
            continue
        try:
            results[name] = check()
        except NotReady as exc:
            results[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - a probe reports the failure, never raises
            logger.warning("readiness check %s failed: %s", name, type(exc).__name__)
            results[name] = f"failed ({type(exc).__name__})"
        else:
            if name != "database":
                _passed.add(name)
    return all(r.startswith("ok") for r in results.values()), results


@never_cache
@require_safe
def healthz(request) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request) -> JsonResponse:
    ready, checks = readiness()
    response = JsonResponse({"status": "ready" if ready else "unready", "checks": checks})
    if not ready:
        response.status_code = 503
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
