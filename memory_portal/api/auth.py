"""Bearer-token authentication: the token decides who calls (an agent run or a person) and
with which scope. The session cookie is never read here, so CSRF cannot reach the API."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest
from ninja.security import HttpBearer

from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Project
from memory_portal.memory.tokens import token_authenticate


def bearer_value(request) -> str:
    """The value of `Authorization: Bearer <value>` ("" for no or another scheme)."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    return raw.strip() if scheme.lower() == "bearer" else ""


class BearerAuth(HttpBearer):
    openapi_description = (
        "A run token (mp_…, an agent run: the tools, v1 and /mcp) or a person's token (the "
        "v1 and admin routes). An agent key is refused here: it only starts runs."
    )

    def __call__(self, request):
        header = request.headers.get("Authorization", "")
        if not header:
            raise MemoryPortalError("auth_required", "This route needs a bearer token.")
        raw = bearer_value(request)
        if not raw:
            raise MemoryPortalError(
                "auth_invalid",
                "The Authorization header must be 'Bearer <token>'.",
            )
        return self.authenticate(request, raw)

    def __init__(self, takes: Callable[[HttpRequest], tuple[bool, bool]] | None = None):
        """`takes`: what the token check of a request takes for its call, (a slot of its run,
        the call from its budget): a round trip fewer each (memory/run_slots.py), given back
        when the request ends if unused. None: nothing (every route but the agent tools)."""
        super().__init__()
        self.takes = takes

    def authenticate(self, request, token: str) -> Actor:
        take_slot, count = self.takes(request) if self.takes is not None else (False, False)
        api_token = token_authenticate(token, take_slot=take_slot, count=count)
        if api_token.run_id is not None:
            project = api_token.run.project
            setting = project.memory_setting if Project.memory_setting.is_cached(project) else None
            actor = Actor.agent_run(api_token.run, can_write=api_token.can_write, setting=setting)
        else:
            actor = Actor.person(api_token.user, can_write=api_token.can_write)
        request.actor = actor
        return actor


def person(request) -> Actor:
    """The calling person; agent tokens get memory_forbidden on person-only routes. (A
    read-only token's changes are refused by the services themselves.)"""
    actor: Actor = request.auth
    if not actor.is_person:
        raise MemoryPortalError(
            "memory_forbidden",
            "This route is for people (user tokens), not agent runs.",
            hint="Use a user token from `manage.py create_api_token`.",
        )
    return actor


def agent(request) -> Actor:
    return agent_only(request.auth)


def agent_only(actor: Actor) -> Actor:
    """The calling agent run; people's tokens get memory_tool_forbidden."""
    if not actor.is_agent:
        raise MemoryPortalError(
            "memory_tool_forbidden",
            "Agent tools are called with a run token.",
            hint="Start a run and use its token.",
        )
    return actor
