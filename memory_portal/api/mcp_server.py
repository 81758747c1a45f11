"""`/mcp`: the agent tools and the agent-memory operations as an MCP server (Streamable HTTP,
JSON responses), on the official `mcp` SDK's low-level server.

The bearer is checked before any MCP session starts (401 in the API's envelope). With a run
token every request is stateless. With an agent key each MCP session is one run of the key's
agent (`_key_session`): the server answers an Mcp-Session-Id and maps it to the run; each
request is still served by a stateless SDK server for that run.
Each tool call goes through the same call path as its HTTP route (api/calls.py): the same
trace rows (counted apart as `mcp:<tool>`), limits, services and refusals; a refusal is a tool
result with isError whose text is the JSON `{"code", "message", "hint"}`. The SDK runs on
an event loop of its own per request (async_to_sync); every database access is sent back to
the request's thread (sync_to_async, thread_sensitive), where Django's connection lives."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import async_to_sync, sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from memory_portal.failures import INTERNAL_ERROR, json_error
from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError, retryable
from memory_portal.memory.tokens import is_agent_key, key_authenticate
from memory_portal.memory.validation import TASK_KEY_MAX

from . import tools as http_tools
from . import v1
from .auth import BearerAuth, agent_only, bearer_value
from .calls import MCP, Operation, as_json, perform

logger = logging.getLogger("memory_portal.api")

SERVER_NAME = "memory-portal"
START_PROMPT = "memory_start"
MEMORY_OPERATIONS: list[Operation] = v1.OPERATIONS
# The SDK's own limit is 4 MiB; nothing an agent sends needs more than the API's bodies do.
MAX_BODY_BYTES = 1024 * 1024


def operations_for(actor: Actor) -> list[Operation]:
    """What GET /api/tools offers this run, then the agent-memory operations — none while
    memory is off or for an ineligible stage, only the reads for a read-only token (the
    others would only be refused)."""
    offer = http_tools.tools_offer(actor)
    if not (offer.enabled and offer.eligible):
        return []
    # A reviewer, like a read-only token, is refused every write: it is offered the reads.
    writes = actor.can_write and not actor.run.agent.is_reviewer
    memory = MEMORY_OPERATIONS if writes else v1.READ_ONLY_OPERATIONS
    return [*offer.tools, *memory]


def input_schema(operation: Operation) -> dict:
    """The same JSON Schema GET /api/tools gives for the tool (one Pydantic model)."""
    return http_tools.tool_definition(operation)["parameters"]


def refusal_result(exc: MemoryPortalError) -> types.CallToolResult:
    """A refusal as a tool error: the API's envelope, plus `retryAfter` (seconds) for the
    retryable ones, which over HTTP is the Retry-After header."""
    body = exc.as_dict()
    if exc.retry_after:
        body["retryAfter"] = exc.retry_after
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))], is_error=True
    )


OPERATIONS_BY_NAME = {op.name: op for op in [*http_tools.TOOLS, *MEMORY_OPERATIONS]}


def _operation(name: str) -> Operation:
    """Any tool by name: one this run is not offered is refused by its own gate (traced),
    exactly as over HTTP; a name no transport knows is refused at once."""
    if name in OPERATIONS_BY_NAME:
        return OPERATIONS_BY_NAME[name]
    raise MemoryPortalError(
        "memory_tool_forbidden",
        f"{name} is not a Memory Portal tool.",
        hint="List the tools (tools/list) for the ones you may use.",
    )


def call_tool(actor: Actor, name: str, arguments: dict | None) -> types.CallToolResult:
    """One tool call, on the request's thread: the answer as JSON (text and structured), or
    the refusal as a tool error."""
    try:
        operation = _operation(name)
        answer = as_json(
            operation, perform(operation, actor=actor, arguments=arguments, transport=MCP)
        )
    except MemoryPortalError as exc:
        return refusal_result(exc)
    except Exception as exc:
        # The same classification as the API's 503 / 500 (memory_portal/failures.py): the
        # client sees a code and a hint, never an exception's text.
        refusal = retryable(exc)
        if refusal is None:
            logger.error("unexpected failure in MCP tool %s", name, exc_info=exc)
            refusal = INTERNAL_ERROR
        return refusal_result(refusal)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answer)],
        structured_content=json.loads(answer),
    )


def _start_block(actor: Actor) -> str:
    try:
        answer = perform(v1.RECALL, actor=actor, arguments={"start": True}, transport=MCP)
    except MemoryPortalError as exc:
        return json.dumps(exc.as_dict())
    return answer["block"]


def build_server(actor: Actor) -> Server:
    """A server for this one request's run (stateless: nothing outlives the request)."""
    to_db = sync_to_async(thread_sensitive=True)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        operations = await to_db(operations_for)(actor)
        return types.ListToolsResult(
            tools=[
                types.Tool(name=op.name, description=op.description, input_schema=input_schema(op))
                for op in operations
            ]
        )

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await to_db(call_tool)(actor, params.name, params.arguments)

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=START_PROMPT,
                    description=(
                        "The start-of-run `--- MEMORY ---` block (your facts scored against "
                        "this run's task, and today's day log), to put at the start of a session."
                    ),
                )
            ]
        )

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != START_PROMPT:
            raise MCPError(
                types.INVALID_PARAMS, f"No prompt {params.name}; the prompt is {START_PROMPT}."
            )
        block = await to_db(_start_block)(actor)
        return types.GetPromptResult(
            description="Memory Portal: what this agent remembers at the start of the run.",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=block))
            ],
        )

    return Server(
        SERVER_NAME,
        version="1.0",
        instructions=(
            "Memory Portal: project memory (memory_* tools, scratchpad) and your own agent "
            f"memory (facts, day log, recall). Get the prompt {START_PROMPT} at the start."
        ),
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def _scope(request: HttpRequest) -> dict[str, Any]:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (request.get_host(), int(request.get_port())),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _serve(actor: Actor, scope: dict, body: bytes) -> tuple[int, list, bytes]:
    manager = StreamableHTTPSessionManager(
        build_server(actor),
        json_response=True,
        stateless=True,
        max_request_body_size=MAX_BODY_BYTES,
    )
    sent_body = False
    status = 500
    headers: list = []
    chunks: list[bytes] = []

    async def receive():
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()  # the client is there until the answer is sent

    async def send(message):
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], message.get("headers", [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


# What the SDK refuses at the HTTP level (a body it cannot take, headers it needs), as the API's
# envelope: a client or a person reading the answer gets a code, a message and a hint.
_TRANSPORT_HINTS = {
    400: "Send one JSON-RPC message as a JSON body with Content-Type: application/json.",
    406: "Send Accept: application/json, text/event-stream.",
    413: f"Send at most {MAX_BODY_BYTES // 1024} KiB in one message.",
    415: "Send Content-Type: application/json.",
}


def transport_error(status: int, body: bytes) -> JsonResponse:
    """The SDK's HTTP-level refusal in the API's envelope (its own text as the message)."""
    message = body.decode("utf-8", "replace").strip()
    with contextlib.suppress(ValueError, KeyError, TypeError):
        message = json.loads(message)["error"]["message"]
    code = "memory_payload_too_large" if status == 413 else "memory_invalid"
    header = "Accept" if status == 406 else "Content-Type" if status == 415 else None
    if header is None and "content-type" in message.lower():
        header, status = "Content-Type", 415
    refusal = MemoryPortalError(
        code,
        message[:300] or f"The MCP request was refused ({status}).",
        hint=_TRANSPORT_HINTS.get(status, _TRANSPORT_HINTS[400]),
        field=None if status == 413 else header or "body",
    )
    return json_error(refusal, status=status)


def _unauthenticated(exc: MemoryPortalError) -> JsonResponse:
    response = json_error(exc)
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="memory-portal"'
    return response


def _method_refused(request: HttpRequest, *, sessions: bool) -> JsonResponse:
    """No server-initiated stream (GET): the spec's answer is 405; a GET handed to the SDK
    would hold its thread. A run token's requests are stateless: no session to DELETE."""
    allowed = "POST, DELETE" if sessions else "POST"
    refusal = MemoryPortalError(
        "method_not_allowed",
        f"{request.method} is not served on /mcp; it answers {allowed}"
        + (" (DELETE ends the session)." if sessions else " (stateless with a run token)."),
        hint="Send each JSON-RPC message as a POST.",
    )
    response = json_error(refusal, status=405)
    response["Allow"] = allowed
    return response


def _answer(actor: Actor, request: HttpRequest, session: str | None = None) -> HttpResponse:
    request.actor = actor  # for the request's log line, as the API's auth does
    status, headers, body = async_to_sync(_serve)(actor, _scope(request), request.body)
    if status >= 400:
        return transport_error(status, body)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        key = name.decode("latin-1")
        if key.lower() not in {"content-length"}:
            response[key] = value.decode("latin-1")
    if session:
        response[SESSION_HEADER] = session
    return response


@csrf_exempt
def mcp_view(request: HttpRequest) -> HttpResponse:
    """The MCP endpoint. Authenticates first: no session starts without a live run token or
    agent key. A run token's requests are stateless; an agent key's session is one run."""
    if is_agent_key(bearer_value(request)):
        return _key_session(request)
    try:
        actor = agent_only(BearerAuth()(request))
    except MemoryPortalError as exc:
        return _unauthenticated(exc)
    if request.method != "POST":
        return _method_refused(request, sessions=False)
    return _answer(actor, request)


# --- Sessions opened with an agent key ---------------------------------------------------------

SESSION_HEADER = "Mcp-Session-Id"
TASK_HEADER = "X-Memory-Task"


DISCOVER = "server/discover"


def _message(body: bytes) -> dict:
    """The JSON-RPC message a request carries ({} for anything else)."""
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _legacy_only(message: dict) -> HttpResponse:
    """A key's sessions are the initialize handshake's (each one a run): a client that probes
    for the stateless protocol first (`server/discover`) is told so in JSON-RPC's own error
    (the SDK's type), and falls back to initialize, without an HTTP refusal in the log."""
    answer = types.JSONRPCError(
        jsonrpc="2.0",
        id=message.get("id"),
        error=types.ErrorData(
            code=types.METHOD_NOT_FOUND,
            message="A session opened with an agent key starts with initialize.",
        ),
    )
    return HttpResponse(
        answer.model_dump_json(by_alias=True, exclude_none=True), content_type="application/json"
    )


def _initialize_client(message: dict) -> str | None:
    """The client's name when `message` is an MCP initialize request (None for anything
    else)."""
    if message.get("method") != "initialize":
        return None
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    info = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
    name = info.get("name")
    return name if isinstance(name, str) else ""


def _session_refused(status: int, message: str, hint: str) -> JsonResponse:
    code = "not_found" if status == 404 else "memory_invalid"
    field = None if status == 404 else SESSION_HEADER
    return json_error(MemoryPortalError(code, message, hint=hint, field=field), status=status)


def _key_session(request: HttpRequest) -> HttpResponse:
    """An MCP session opened with an agent key is one top-level run of the key's agent: the
    initialize request starts it (task key from X-Memory-Task, else the client's name) and
    answers its Mcp-Session-Id; every later request names the session and acts as that run;
    DELETE ends it (the run has succeeded, its token revoked), as does an idle spell of
    MEMORY_PORTAL_MCP_IDLE_MINUTES. An unknown or ended session is a 404: the client starts
    a new one."""
    try:
        key = key_authenticate(bearer_value(request))
    except MemoryPortalError as exc:
        return _unauthenticated(exc)
    session = request.headers.get(SESSION_HEADER, "").strip()
    ended = (
        f"No open MCP session {session[:80]} for this key: it ended, idled out or never began.",
        "Start a new session (initialize); each session is a run of its own.",
    )
    if request.method == "DELETE":
        if not session:
            return _session_refused(400, f"DELETE ends a session: send {SESSION_HEADER}.", ended[1])
        if not services.mcp_session_close(key=key, session=session):
            return _session_refused(404, *ended)
        return HttpResponse(status=204)
    if request.method != "POST":
        return _method_refused(request, sessions=True)
    if session:
        run = services.mcp_session_run(key=key, session=session)
        if run is None:
            return _session_refused(404, *ended)
        return _answer(Actor.agent_run(run), request)
    message = _message(request.body)
    if message.get("method") == DISCOVER:
        return _legacy_only(message)
    client = _initialize_client(message)
    if client is None:
        return _session_refused(
            400,
            f"A session opened with an agent key starts with initialize; later requests send "
            f"its {SESSION_HEADER}.",
            "Let the MCP client connect; it sends the session id by itself.",
        )
    # The header is the caller's own choice (refused when it is no task key); the client's
    # name is the software's, so only its visible characters are kept.
    fallback = "".join(c for c in client if c.isprintable()).strip()[:TASK_KEY_MAX]
    task_key = request.headers.get(TASK_HEADER, "").strip() or fallback
    try:
        run, session = services.mcp_session_open(key=key, task_key=task_key)
    except MemoryPortalError as exc:
        return json_error(exc)
    response = _answer(Actor.agent_run(run), request, session=session)
    if response.status_code >= 400:  # the SDK refused the request: no session began
        services.run_delete(actor=None, run=run)
    return response
