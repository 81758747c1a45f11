"""The JSON API: one NinjaAPI with bearer auth, and every error in one envelope
`{"error": {"code", "message", "hint"}}` — refusals, validation errors, unknown routes and
methods, and unexpected failures (500, no stack trace or note text)."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.renderers import JSONRenderer

from memory_portal.failures import failure_response, json_error
from memory_portal.memory.errors import MemoryPortalError

from .admin import router as admin_router
from .auth import BearerAuth
from .calls import invalid_input
from .keys import router as keys_router
from .tools import router as tools_router
from .tracing import record_rejected_call
from .v1 import router as v1_router


class Utf8Renderer(JSONRenderer):
    """UTF-8 JSON, non-ASCII unescaped: what the 12,000-byte page budget measures."""

    json_dumps_params = {"ensure_ascii": False}


class PortalAPI(NinjaAPI):
    """The OpenAPI document is built once per process (per path prefix): it depends on the
    code alone, and building it again on every request took seconds on a loaded machine."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        built = self.__dict__.setdefault("_openapi_documents", {})
        if path_prefix not in built:
            built[path_prefix] = super().get_openapi_schema(path_prefix=path_prefix)
        return built[path_prefix]


api = PortalAPI(
    renderer=Utf8Renderer(),
    title="Memory Portal API",
    version="1.0",
    description=(
        "Long-term memory for AI agents. Agent runs call the tools and v1 routes with their run "
        "token; people call v1 and admin routes with a user token; an agent key only starts "
        "runs (POST /api/runs, or an MCP session on /mcp). Every error is "
        '`{"error": {"code", "message", "hint"}}`.'
    ),
    auth=BearerAuth(),
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)
api.add_router("/tools", tools_router)
api.add_router("/v1", v1_router)
api.add_router("/admin", admin_router)
api.add_router("/runs", keys_router)


def error_response(
    code: str, message: str, *, hint: str | None = None, status: int | None = None, **extra
) -> JsonResponse:
    return json_error(MemoryPortalError(code, message, hint=hint), status=status, **extra)


@api.exception_handler(MemoryPortalError)
def on_refusal(request, exc: MemoryPortalError):
    return json_error(exc)


@api.exception_handler(ValidationError)
def on_invalid(request, exc: ValidationError):
    refusal = invalid_input(exc.errors)
    record_rejected_call(request, "memory_invalid")
    return error_response("memory_invalid", refusal.message, hint=refusal.hint, field=refusal.field)


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request, exc: AuthenticationError):
    return error_response("auth_required", "This route needs a bearer token.")


@api.exception_handler(Http404)
def on_not_found(request, exc: Http404):
    return error_response("not_found", "No such resource.", status=404)


@api.exception_handler(HttpError)
def on_http_error(request, exc: HttpError):
    code = "memory_invalid" if exc.status_code == 400 else "not_found"
    return error_response(code, str(exc), status=exc.status_code)


@api.exception_handler(Exception)
def on_crash(request, exc: Exception):
    """Retryable database trouble is a 503 with Retry-After, anything else a 500 — decided in
    one place for every transport (memory_portal/failures.py)."""
    return failure_response(request, exc, log=True)


def unknown_route(request, rest: str = ""):
    """Anything under /api/ that no route matches."""
    return error_response(
        "not_found",
        f"No API route {request.method} {request.path}.",
        hint="See /api/docs for the routes.",
        status=404,
    )
