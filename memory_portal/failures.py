"""The one edge for errors every transport shares. `json_error` builds every JSON error the
server sends (`{"error": {"code", "message", "hint", …}}`, the code's status, Retry-After for
retryable trouble). Unexpected failures: a database failure that passes by itself
(errors.retryable) is a 503 with Retry-After — the JSON envelope under /api/ and /mcp, a plain
page in the dashboard — and anything else is a 500 `internal_error`. The API's crash handler
and Django's handler500 both answer through `failure_response`, so a failure in a view, a
middleware or the token check gets the same answer."""

from __future__ import annotations

import logging
import sys

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from memory_portal.memory.errors import MemoryPortalError, retryable

logger = logging.getLogger("memory_portal.failures")

INTERNAL_ERROR = MemoryPortalError(
    "internal_error",
    "Something went wrong on the server; nothing was half written.",
    hint="Retry later; if it persists, tell the operators the time of the call.",
)


def json_error(refusal: MemoryPortalError, *, status: int | None = None, **extra) -> JsonResponse:
    """The JSON error envelope of `refusal`: its code, message and hint (and field, reason), the
    `extra` members (those not None), the code's status unless `status` says otherwise, and
    `Retry-After` when the code is retryable."""
    body = refusal.as_dict()
    body.update({name: value for name, value in extra.items() if value is not None})
    response = JsonResponse({"error": body}, status=status or refusal.status)
    if refusal.retry_after:
        response["Retry-After"] = str(refusal.retry_after)
    return response


def is_api(request) -> bool:
    """The JSON API (/api/) and the MCP endpoint (/mcp) answer errors in JSON, never HTML."""
    return request.path.startswith(("/api/", "/mcp/")) or request.path == "/mcp"


def refusal_response(request, refusal: MemoryPortalError) -> HttpResponse:
    """A retryable refusal (status 503 and a Retry-After) for either transport."""
    if is_api(request):
        return json_error(refusal)
    # A standalone page: rendering it touches neither the session nor the database.
    html = render_to_string("errors/503.html", {"message": refusal.message, "hint": refusal.hint})
    response = HttpResponse(html, status=refusal.status)
    if refusal.retry_after:
        response["Retry-After"] = str(refusal.retry_after)
    return response


def failure_response(request, exc: BaseException | None, *, log: bool = False) -> HttpResponse:
    """`log`: record a bug's traceback here (the API's handler; Django's handler500 has
    logged it already)."""
    refusal = retryable(exc) if exc is not None else None
    if refusal is None and log:
        logger.error("unexpected failure on %s %s", request.method, request.path, exc_info=exc)
    if refusal is not None:
        logger.warning(
            "%s on %s %s (%s)", refusal.code, request.method, request.path, type(exc).__name__
        )
        return refusal_response(request, refusal)
    if is_api(request):
        return json_error(INTERNAL_ERROR)
    return HttpResponse(render_to_string("errors/500.html"), status=500)


def server_error(request) -> HttpResponse:
    """handler500: Django calls it while handling the exception, so it is still at hand
    (Django has logged it already)."""
    return failure_response(request, sys.exc_info()[1])


def bad_request(request, exception) -> HttpResponse:
    """handler400 (a Host that is not served, a malformed request Django refuses before any
    view): the API's envelope under /api/ and /mcp, Django's page elsewhere."""
    if not is_api(request):
        from django.views.defaults import bad_request as page

        return page(request, exception)
    refusal = MemoryPortalError(
        "memory_invalid",
        "The request was refused before it reached the API (its Host header is not one this "
        "server answers, or it is malformed).",
        hint="Call the server by the host name it is configured for (ALLOWED_HOSTS).",
        field="Host",
    )
    return json_error(refusal)


def _page(request, template: str, status: int, **context) -> HttpResponse:
    return HttpResponse(render_to_string(template, context, request=None), status=status)


class DebugErrorPages:
    """Under DEBUG only (`make run`; settings.py adds it last): the product's own 404 and 500
    pages where Django would answer with its technical ones, so the demo shows what people see
    in production — an address that matches no page, a view's Http404, a view's crash (its
    traceback still logged on the console). `?debug=1` keeps Django's page, for a developer;
    the API keeps its JSON envelope."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        unmatched = response.status_code == 404 and request.resolver_match is None
        if unmatched and self._shown(request):
            return not_found(request, None)
        return response

    def process_exception(self, request, exception):
        if not self._shown(request):
            return None
        if isinstance(exception, Http404):
            return not_found(request, exception)
        if isinstance(exception, PermissionDenied | SuspiciousOperation):
            return None  # Django answers these with the product's handlers already
        logger.error(
            "unexpected failure on %s %s", request.method, request.path, exc_info=exception
        )
        return failure_response(request, exception)

    @staticmethod
    def _shown(request) -> bool:
        return not is_api(request) and "debug" not in request.GET


def _back_here(request) -> str:
    """Where a person lands after signing in again: this page, or the page the refused form
    was on (its Referer, when it is this site's)."""
    from django.utils.http import url_has_allowed_host_and_scheme

    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()}):
        from urllib.parse import urlsplit

        parts = urlsplit(referer)
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return request.get_full_path() if request.method == "GET" else "/"


def not_found(request, exception) -> HttpResponse:
    """handler404: the API's envelope under /api/ and /mcp; a page of the product's own
    elsewhere (a project a person does not belong to is a 404 too, by design)."""
    if is_api(request):
        return json_error(MemoryPortalError("not_found", "No such resource."), status=404)
    return _page(request, "errors/404.html", 404)


def forbidden(request, exception) -> HttpResponse:
    if is_api(request):
        refusal = MemoryPortalError("memory_forbidden", "This is not yours to do.")
        return json_error(refusal, status=403)
    return _page(
        request,
        "errors/refused.html",
        403,
        title="Not allowed",
        message="Your role in this project does not allow this.",
        hint="A project manager can do it, or give you the manager role.",
    )


def csrf_failure(request, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form sent from a page whose session has ended (or from another
    site) — nothing was changed; sign in again and come back to the same place."""
    from urllib.parse import urlencode

    from django.conf import settings
    from django.shortcuts import resolve_url

    login = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': _back_here(request)})}"
    return _page(request, "errors/session.html", 403, login_url=login)
