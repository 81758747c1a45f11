"""Prometheus metrics (prometheus-client): what the server does, never what it holds — tool
names, outcome codes and URL patterns as labels; no content, no query, no id.

`/metrics` is served only when MEMORY_PORTAL_METRICS_TOKEN is set, to a scraper that sends it
as a bearer token (otherwise it is a 404, or a 401). Under gunicorn (gunicorn.conf.py) every
worker writes its samples to PROMETHEUS_MULTIPROC_DIR and one scrape adds them up, so the
figures are the server's whatever worker answers; a single process (`runserver`) keeps them in
memory. Counted here, each in its one place:

- `memory_portal_tool_calls_total{tool,outcome}`: every agent call (HTTP tools, v1, MCP), its
  outcome `ok` or the refusal's code (api/tracing.py);
- `memory_portal_notes_written_total`: notes inserted by the write protocol, once committed
  (services/write.py; an identical repeat inserts nothing);
- `memory_portal_busy_total`: changes refused with 503 `memory_busy`, a project's lock held past
  the wait bound (where that is decided: errors.retryable and fastsql.bounded_lock_wait);
- `memory_portal_request_seconds{route}`: until a response starts, by URL pattern
  (logs.RequestLogMiddleware);
- `memory_portal_recall_seconds`: one recall, scored and rendered (recall/service.py);
- `memory_portal_task_queue_depth`: tasks waiting in the database queue, read at scrape time
  (0 with MEMORY_PORTAL_TASKS=immediate)."""

from __future__ import annotations

import hmac
import logging
import os

from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.decorators.cache import never_cache
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger("memory_portal.metrics")

TOOL_CALLS = Counter(
    "memory_portal_tool_calls_total",
    "Agent tool calls (HTTP tools, v1, MCP) by tool and outcome: ok or the refusal's code.",
    ["tool", "outcome"],
)
NOTES_WRITTEN = Counter(
    "memory_portal_notes_written_total", "Notes inserted by the write protocol (committed)."
)
BUSY = Counter(
    "memory_portal_busy_total",
    "Changes refused with 503 memory_busy: a project's lock was held past the wait bound.",
)
REQUEST_SECONDS = Histogram(
    "memory_portal_request_seconds",
    "Time until a response starts, by URL pattern.",
    ["route"],
)
RECALL_SECONDS = Histogram(
    "memory_portal_recall_seconds",
    "One recall: the facts read, scored and the block rendered.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)


def tool_call(tool: str, outcome: str) -> None:
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()


def busy(exc: BaseException | None = None) -> None:
    """One busy refusal; `exc`, the failure it was read from, is counted once however many
    times it is classified."""
    if exc is not None:
        if getattr(exc, "_memory_busy_counted", False):
            return
        exc._memory_busy_counted = True  # type: ignore[attr-defined]
    BUSY.inc()


def note_written() -> None:
    NOTES_WRITTEN.inc()


class QueueDepth:
    """The database queue's waiting tasks, counted when scraped (one query)."""

    def collect(self):
        gauge = GaugeMetricFamily(
            "memory_portal_task_queue_depth",
            "Tasks waiting in the database queue (MEMORY_PORTAL_TASKS=database); 0 otherwise.",
        )
        gauge.add_metric([], self.depth())
        yield gauge

    @staticmethod
    def depth() -> float:
        if settings.TASKS_MODE != "database":
            return 0
        from django_tasks_db.models import DBTaskResult

        try:
            return DBTaskResult.objects.ready().count()
        except Exception:  # noqa: BLE001 - a scrape while the database is away still answers
            logger.warning("the task queue could not be counted for /metrics")
            return float("nan")


# No auto-describe: registering must not query (the apps are not loaded when this is imported).
_AT_SCRAPE = CollectorRegistry()
_AT_SCRAPE.register(QueueDepth())


def exposition() -> bytes:
    """Every metric in Prometheus' text format: the workers' samples added up (multiprocess
    mode) or this process's, then the figures read at scrape time."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY)
    return body + generate_latest(_AT_SCRAPE)


@never_cache
def metrics_view(request) -> HttpResponse:
    token = settings.MEMORY_PORTAL_METRICS_TOKEN
    if not token:
        raise Http404("No metrics here: MEMORY_PORTAL_METRICS_TOKEN is not set.")
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        response = HttpResponse(
            "A bearer token is needed.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def route_of(request) -> str:
    """A request's URL pattern (`p/<slug:slug>/notes/<str:note_id>/`, never the path itself):
    static files are `static`, a path no pattern matched is `unmatched`. Observed by
    logs.RequestLogMiddleware, which also logs it."""
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return match.route or match.view_name or "unnamed"
    if request.path.startswith(settings.STATIC_URL):
        return "static"
    return "unmatched"
