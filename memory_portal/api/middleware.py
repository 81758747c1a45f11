"""Wrap non-JSON error responses under /api/ (e.g. 405 Method Not Allowed from the router)
in the API's error envelope, so clients see one error shape everywhere."""

from __future__ import annotations

import json

from django.http import HttpResponseBadRequest, JsonResponse

STATUS_CODES = {405: "method_not_allowed", 404: "not_found", 400: "memory_invalid"}


class ApiErrorEnvelopeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith("/api/") or response.status_code < 400:
            return response
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
        wrapped = JsonResponse(
            {
                "error": {
                    "code": code,
                    "message": messages.get(status, "The request could not be served."),
                    "hint": "See /api/docs for the routes and their methods.",
                }
            },
            status=status,
        )
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
            if request.path.startswith("/api/"):
                return JsonResponse(
                    {
                        "error": {
                            "code": "memory_invalid",
                            "message": "The URL contains a NUL character.",
                            "hint": "Remove it and retry.",
                            "field": "url",
                        }
                    },
                    status=400,
                )
            return HttpResponseBadRequest("The URL contains a NUL character.")
        return self.get_response(request)
