"""Logging's request edge: one line per request (method, URL pattern, status, duration, the
client's address, the actor's ids) under a request id that every line logged while serving it
carries, and the JSON format (`LOG_FORMAT=json`, python-json-logger) that writes one object a
line.

What a line may hold is an allowlist (`JsonFormatter.FIELDS`): a record's other attributes —
Django's own `request`, whose text includes the query string, or anything a library passes as
`extra` — are dropped, and the message has been through the secret redactor
(memory/secrets.RedactingFilter) on the handler. No line holds a query string, a note's text
or a search: the request line names the URL pattern, not the path (Django's own warnings,
"Not Found: /…", name the path without its query string). A request id comes from the client's
`X-Request-ID` when it is a plain token (letters, digits, `.`, `_`, `-`, up to 64), else a new
one, and is sent back in the same header."""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextvars import ContextVar

from django.conf import settings
from django.core.signals import request_finished
from django.utils.functional import empty
from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

from memory_portal import metrics

REQUEST_HEADER = "X-Request-ID"
_REQUEST_ID_SHAPE = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The id of the request this thread is serving: logging's context, read by the filter below.
request_id_var: ContextVar[str] = ContextVar("request_id", default="")

request_log = logging.getLogger("memory_portal.request")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestIdFilter(logging.Filter):
    """Every record gets the id of the request being served ("" outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class JsonFormatter(_LibraryJsonFormatter):
    """One JSON object a line, of these fields only (those a record has)."""

    FIELDS = (
        "time", "level", "logger", "message", "request_id", "method", "route", "status",
        "duration_ms", "client", "user_id", "agent_id", "run_id", "exc_info",
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", "time")
        super().__init__("%(levelname)s %(name)s %(message)s", *args, **kwargs)

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and record.exc_text:
            # The redactor has written the traceback's text: use it, not a fresh one.
            kept, record.exc_info = record.exc_info, None
            try:
                return super().format(record)
            finally:
                record.exc_info = kept
        return super().format(record)

    def add_fields(self, log_data, record, message_dict) -> None:
        super().add_fields(log_data, record, message_dict)
        for name in list(log_data):
            if name not in self.FIELDS:
                del log_data[name]


def client_address(request) -> str:
    """The client's address. Directly exposed, REMOTE_ADDR: X-Forwarded-For is whatever the
    client sends, and trusting it would let anyone pick a fresh address per attempt. Behind
    MEMORY_PORTAL_PROXY_HOPS trusted proxies (MEMORY_PORTAL_BEHIND_PROXY), each appending the
    address it saw, REMOTE_ADDR is the nearest proxy for everyone: the client is the entry that
    many places from the right — what the outermost proxy saw; anything left of it is the
    client's own say. A request with fewer entries came in past the outer proxies: its
    leftmost entry is the nearest proxy's view of the client."""
    if settings.BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(settings.PROXY_HOPS, len(hops))]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def request_id_of(request) -> str:
    sent = request.headers.get(REQUEST_HEADER, "")
    return sent if _REQUEST_ID_SHAPE.fullmatch(sent) else uuid.uuid4().hex


def actor_ids(request) -> dict[str, object]:
    """Who made the request, as ids: the API's actor (an agent run or a person's token), or
    the dashboard's signed-in person — read only if the request already loaded them."""
    actor = getattr(request, "actor", None)
    if actor is not None:
        if actor.is_agent:
            return {"agent_id": actor.run.agent_id, "run_id": actor.run.pk}
        return {"user_id": actor.user.pk}
    user = getattr(request, "user", None)
    loaded = user is not None and getattr(user, "_wrapped", None) is not empty
    if loaded and user.is_authenticated:
        return {"user_id": user.pk}
    return {}


def _request_served(**_kwargs) -> None:
    """The request's id is cleared once its response is closed, not when the middleware
    returns: Django logs a 4xx / 5xx (`django.request`, "Not Found: …") after the middleware
    chain has answered, and that line belongs to the request too."""
    request_id_var.set("")


request_finished.connect(_request_served, dispatch_uid="memory_portal.logs.request_served")


class RequestLogMiddleware:
    """The first middleware: the request's id set for every line logged while it is served
    (until its response is closed: `_request_served`), sent back in X-Request-ID; then the
    time until its response starts, as the request-time metric and as one log line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = request_id_of(request)
        request_id_var.set(request.request_id)
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        route = metrics.route_of(request)
        metrics.REQUEST_SECONDS.labels(route=route).observe(elapsed)
        response[REQUEST_HEADER] = request.request_id
        fields = {
            "method": request.method,
            "route": route,
            "status": response.status_code,
            "duration_ms": round(elapsed * 1000, 1),
            "client": client_address(request),
            **actor_ids(request),
        }
        request_log.info(
            "%s %s %s %.1f ms",
            request.method,
            route,
            response.status_code,
            fields["duration_ms"],
            # Nothing in the line the client chose but a method it names from the known few.
            extra={**fields, "vetted": request.method in _METHODS},
        )
        return response
