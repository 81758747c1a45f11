"""The one call path of an agent-facing operation, whatever the transport (HTTP tools, v1
routes, MCP): trace (the run's call budget and one trace row per outcome), gate, then the
service — so limits, trace rows and refusals cannot drift apart between transports.

Authentication happens at each transport's edge (the bearer token, before anything else) and
each transport maps a refusal to its own shape once: the JSON envelope under /api/, an MCP
tool result with isError under /mcp."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import InterfaceError, OperationalError
from ninja.responses import NinjaJSONEncoder
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from memory_portal import metrics
from memory_portal.memory import deadline, selectors
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.run_slots import call_slot

from .tracing import traced

HTTP = "http"
MCP = "mcp"


@dataclass(frozen=True)
class Operation:
    """An agent-facing operation: its name (the tool name), its trace name, the Pydantic model
    of its arguments, its answer's type and the function that does it. `gate` refuses a
    caller before the function runs (the tools' offer, the agent gate of v1 routes)."""

    name: str
    trace: str
    args: type[BaseModel]
    returns: Any
    function: Callable[..., Any]
    description: str
    gate: Callable[[Actor, Operation], None] | None = None
    # Its service changes memory in one transaction of its own, which takes the call from the
    # budget and counts it (tracing.traced's `settles`): the function is then called with the
    # call to hand over too, `function(actor, args, call)` (an OpenCall, or None for a person).
    settles: bool = False

    def trace_name(self, transport: str) -> str:
        """The trace row's tool: MCP calls are counted apart (`mcp:write`) on the run page."""
        return self.trace if transport == HTTP else f"{transport}:{self.trace}"


def gate_setting(actor: Actor):
    """The run's project setting row the gate of this request's call checks: as the token
    check read it (no second read), or read now."""
    return selectors.setting_now(actor=actor, project=actor.run.project)


def field_of(loc: Sequence[Any]) -> str:
    """A validation error's field as the client sent it. ninja's location is (source,
    parameter, *path inside it); a field may itself be called `query` or `path`."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header", "cookie", "form"}:
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in {"body", "payload", "filters", "page"}:
        parts = parts[1:]
    return ".".join(parts) or "body"


def invalid_input(errors: Sequence[dict]) -> MemoryPortalError:
    """The memory_invalid refusal for the first of a validation's errors (every transport)."""
    first = errors[0] if errors else {}
    field = field_of(first.get("loc", ()))
    kind = first.get("type", "")
    if kind == "extra_forbidden":
        message = f"{field} is not an argument of this call."
        hint = "Project, application, run, author and trust come from the token; drop the field."
    elif kind == "missing":
        message = f"{field} is required."
        hint = "Add the field and retry."
    else:
        message = f"{field}: {first.get('msg', 'invalid value')}."
        hint = "Fix the named field and retry."
    return MemoryPortalError("memory_invalid", message, hint=hint, field=field)


def parse(operation: Operation, arguments: dict | None) -> BaseModel:
    try:
        return operation.args.model_validate(arguments or {})
    except PydanticValidationError as exc:
        # As a body under /api/: the location starts with the source, like ninja's.
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise invalid_input(errors) from None


def perform(
    operation: Operation, *, actor: Actor, arguments: BaseModel | dict | None, transport: str
) -> Any:
    """The call's time bound (memory/deadline.py) → a slot of the run's calls in flight →
    trace → parse (raw arguments only) → gate → service. Refusals are raised as
    MemoryPortalError for the transport to map; the trace row has been written by then. A call
    refused for want of a slot (memory_run_busy) ran nothing and takes nothing from the
    budget: only the metric counts it."""
    tool = operation.trace_name(transport)
    with deadline.bounded_call(), _out_of_time_is_a_timeout():
        return _in_a_slot(operation, actor, arguments, tool)


@contextmanager
def _out_of_time_is_a_timeout():
    """A database wait cut to the call's time ran out: the call's answer (and its trace row)
    is `memory_timeout`, not the busy or unavailable database the failure would otherwise
    mean. The failed statement's transaction was rolled back: nothing was half written."""
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        if deadline.expired():
            raise deadline.timed_out() from exc
        raise


def _in_a_slot(operation: Operation, actor: Actor, arguments, tool: str) -> Any:
    if not actor.is_agent:
        return _performed(operation, actor, arguments, tool)
    running = False
    try:
        with call_slot(actor.run.top_level_run_id):
            running = True
            return _performed(operation, actor, arguments, tool)
    except MemoryPortalError as exc:
        if not running:
            metrics.tool_call(tool, exc.code)
        raise


def _performed(operation: Operation, actor: Actor, arguments, tool: str) -> Any:
    with traced(actor, tool, settles=operation.settles) as call, _out_of_time_is_a_timeout():
        args = arguments if isinstance(arguments, operation.args) else parse(operation, arguments)
        if operation.gate is not None:
            operation.gate(actor, operation)
        if operation.settles:
            return operation.function(actor, args, call)
        return operation.function(actor, args)


_ADAPTERS: dict[int, TypeAdapter] = {}


def as_json(operation: Operation, result: Any) -> str:
    """The answer as the HTTP route renders it: validated against the same response type,
    encoded by the same JSON encoder (times to the millisecond, UTF-8 unescaped)."""
    adapter = _ADAPTERS.get(id(operation.returns))
    if adapter is None:
        adapter = _ADAPTERS[id(operation.returns)] = TypeAdapter(operation.returns)
    answer = adapter.dump_python(adapter.validate_python(result))
    return json.dumps(answer, cls=NinjaJSONEncoder, ensure_ascii=False)
