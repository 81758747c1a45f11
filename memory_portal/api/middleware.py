"""Edge middlewares: wrap non-JSON error responses under /api/ (e.g. 405 Method Not Allowed
from the router) in the API's error envelope, so clients see one error shape everywhere;
refuse bodies past the upload limit and NUL characters in URLs before anything parses them."""

from __future__ import annotations

import contextlib
import functools
import io
import json

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpResponse, HttpResponseBadRequest
from django.template.loader import render_to_string
from django.urls import reverse

from memory_portal.failures import is_api, json_error
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.run_slots import release_pretaken
from memory_portal.memory.validation import CONTENT_MAX, FACT_MAX

from . import after_answer

STATUS_CODES = {405: "method_not_allowed", 404: "not_found", 400: "memory_invalid"}


class ApiErrorEnvelopeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        # A JSON API call leaves its trace row for after its answer (api/after_answer.py);
        # /mcp, whose answers may stream, writes it at once.
        api = request.path.startswith("/api/")
        with after_answer.collecting() if api else contextlib.nullcontext([]) as pending:
            try:
                response = self.get_response(request)  # an exception is a response by now
            finally:
                # A slot the token check took for a call that never ran (the request was
                # refused before it) is given back (memory/run_slots.py).
                release_pretaken()
        if api and response.status_code >= 400:
            response = self.enveloped(request, response)
        if pending:  # run as the server closes the answer it has sent (WSGI)
            response._resource_closers.append(lambda: after_answer.run(pending))
        return response

    @staticmethod
    def enveloped(request, response):
        if response.get("Content-Type", "").startswith("application/json"):
            try:
                if "error" in json.loads(response.content or b"{}"):
                    return response
            except ValueError:
                pass
        status = response.status_code
        code = STATUS_CODES.get(status, "internal_error" if status >= 500 else "memory_invalid")
        messages = {
            405: f"{request.method} is not allowed on {request.path}.",
            404: f"No API route {request.method} {request.path}.",
        }
        refusal = MemoryPortalError(
            code,
            messages.get(status, "The request could not be served."),
            hint="See /api/docs for the routes and their methods.",
        )
        wrapped = json_error(refusal, status=status)
        if status == 405 and response.has_header("Allow"):
            wrapped["Allow"] = response["Allow"]
        return wrapped


class RejectNulMiddleware:
    """A NUL character in the path or query string is never a valid id or filter, and
    PostgreSQL refuses it: answer 400 at once (the API's envelope under /api/)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or any(
            "\x00" in value for values in request.GET.lists() for value in values[1]
        ):
            if is_api(request):
                refusal = MemoryPortalError(
                    "memory_invalid",
                    "The URL contains a NUL character.",
                    hint="Remove it and retry.",
                    field="url",
                )
                return json_error(refusal)
            return HttpResponseBadRequest("The URL contains a NUL character.")
        return self.get_response(request)


# A whole project's export: the admin API's import and the dashboard's (read line by line).
IMPORT_URL_NAMES = ("api:admin-import", "dashboard:import-check", "dashboard:import-run")


@functools.cache
def import_paths() -> frozenset[str]:
    return frozenset(reverse(name) for name in IMPORT_URL_NAMES)


class RequestSizeLimitMiddleware:
    """A body past DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) is refused with 413 before anything
    reads it: the API's envelope (`memory_payload_too_large`) under /api/, a plain page in the
    dashboard. Django itself would raise RequestDataTooBig wherever the body is first read —
    inside a view, the CSRF check or the API's parser — and answer 400 or 500.

    A chunked body has no Content-Length. When the server has de-chunked it and marks its end
    (`wsgi.input_terminated`, as gunicorn does), it is read here up to the limit, refused past
    it, and otherwise handed on with its length; without that mark Django reads no body, as
    before."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if request.path in import_paths():
            limit = settings.MEMORY_PORTAL_IMPORT_MAX_BYTES
        if limit is None:
            return self.get_response(request)
        declared = request.META.get("CONTENT_LENGTH")
        if declared:
            try:
                too_large = int(declared) > limit
            except ValueError:
                too_large = False  # Django reads no body then
            if too_large:
                return self.refuse(request, limit)
        elif self.chunked(request):
            body = self.read_at_most(request.META["wsgi.input"], limit + 1)
            if len(body) > limit:
                return self.refuse(request, limit)
            request._stream = LimitedStream(io.BytesIO(body), len(body))
            request.META["CONTENT_LENGTH"] = str(len(body))
        return self.get_response(request)

    @staticmethod
    def chunked(request) -> bool:
        return (
            bool(request.META.get("wsgi.input_terminated"))
            and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        )

    @staticmethod
    def read_at_most(stream, size: int) -> bytes:
        chunks: list[bytes] = []
        remaining = size
        while remaining > 0:
            chunk = stream.read(min(remaining, 64 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    @staticmethod
    def refuse(request, limit: int) -> HttpResponse:
        message = f"The request body is larger than {limit:,} bytes, the most this server reads."
        if is_api(request):
            refusal = MemoryPortalError(
                "memory_payload_too_large",
                message,
                hint=f"Send less: a note holds at most {CONTENT_MAX:,} characters and a fact "
                f"{FACT_MAX:,}; split bulk work into several calls.",
            )
            return json_error(refusal, status=413)
        limits = {"content_max": f"{CONTENT_MAX:,}", "fact_max": f"{FACT_MAX:,}"}
        html = render_to_string("errors/413.html", {"message": message, **limits})
        return HttpResponse(html, status=413)
