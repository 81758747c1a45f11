"""`/api/v1/memories`: an agent's own facts and day log (SPEC §3.2). Agents act on their own
memories; people (user tokens) name the agent."""

from __future__ import annotations

from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Kind, ReadTool, Scope
from memory_portal.memory.recall import service as recall_module

from . import schemas as s
from . import serializers
from .calls import HTTP, Operation, gate_setting, perform
from .schemas import responses

router = Router(tags=["agent memory v1"])

LIST_DEFAULT = 100
LIST_MAX = 500


def _gate_agent(actor: Actor, operation: Operation) -> None:
    if actor.is_agent:
        from memory_portal.memory.access import check_agent_gate

        check_agent_gate(actor, gate_setting(actor), write=False)


def _own_memory(actor: Actor, memory_id: str):
    """A v1 memory by id: a fact or day row of an agent (for an agent: its own)."""
    note = selectors.note_get(actor=actor, note_id=memory_id)
    if note.scope != Scope.AGENT or note.kind not in {Kind.FACT, Kind.DAY}:
        raise selectors.note_not_found(memory_id)
    return note


class ListQuery(Schema):
    agentId: str | None = None
    kind: str | None = Field(None, pattern="^(fact|day)$")
    status: str = Field("active", pattern="^(active|archived|all)$")
    limit: int = Field(LIST_DEFAULT, ge=1, le=LIST_MAX)


# --- The operations (HTTP routes below; MCP tools in mcp_server.py) -------------------------


def _save(actor: Actor, args: s.MemorySaveIn, call: services.OpenCall | None) -> dict:
    return serializers.memory(
        services.fact_save(
            actor=actor,
            call=call,
            text=args.text,
            agent_id=args.agentId,
            expires_at=args.expiresAt,
            supersedes=args.supersedes,
        ).note
    )


def _day(actor: Actor, args: s.DayIn) -> dict:
    return serializers.memory(services.day_append(actor=actor, line=args.line))


def _list(actor: Actor, args: ListQuery) -> dict:
    qs = selectors.memories_for_actor(
        actor=actor,
        agent_id=args.agentId,
        kind=args.kind,
        status=None if args.status == "all" else args.status,
    )
    notes = list(qs[: args.limit])
    services.reads_record(
        actor=actor, tool=ReadTool.LIST, served=[(n.id, n.trust, None) for n in notes]
    )
    return {"object": "list", "data": [serializers.memory(n) for n in notes]}


def _recall(actor: Actor, args: s.RecallIn) -> dict:
    result = recall_module.recall(
        actor=actor, query=args.query, agent_id=args.agentId, start=args.start
    )
    services.reads_record(
        actor=actor,
        tool=ReadTool.START_RECALL if args.start else ReadTool.RECALL,
        served=[
            *((p.note.id, p.note.trust, p.score) for p in (*result.memories, *result.related)),
            *((day.id, day.trust, None) for day in result.day_notes),
        ],
    )
    return {
        "object": "recall",
        "agentId": result.agent.id,
        "skipped": result.skipped,
        "skipReason": result.skip_reason,
        "fallback": result.fallback,
        "memories": [{**serializers.memory(p.note), "score": p.score} for p in result.memories],
        "related": [{**serializers.memory(p.note), "score": p.score} for p in result.related],
        "dayLog": result.day_lines,
        "block": result.block,
        "tokens": result.tokens,
    }


def _archive(actor: Actor, args: s.MemoryArchiveArgs) -> dict:
    note = _own_memory(actor, args.id)
    return serializers.memory(
        services.note_archive(actor=actor, note_id=note.id, reason=args.reason)
    )


def _unarchive(actor: Actor, args: s.MemoryIdArgs) -> dict:
    note = _own_memory(actor, args.id)
    return serializers.memory(services.note_unarchive(actor=actor, note_id=note.id))


_SAVE_HELP = (
    "Save a fact to your own agent memory (recalled in later runs). It expires 90 days after "
    "the save unless expiresAt says otherwise; supersedes replaces an older fact."
)
_LIST_HELP = (
    "List your own memories (facts and day logs), newest first: active ones by default, status "
    "archived or all; kind fact or day."
)
_RECALL_HELP = (
    "Recall the facts that matter for a query (or, with start true and no query, for this run's "
    "task) and today's day log, as a ready `--- MEMORY ---` block."
)
_ARCHIVE_HELP = "Archive one of your memories by id, with a reason; it is no longer recalled."
# As MCP tools: name, trace name, arguments, answer, function, description, gate. Recall has
# no gate of its own: it answers `skipped` where memory is off.
SAVE = Operation(
    "memory_save_fact", "v1-save", s.MemorySaveIn, s.MemoryOut, _save, _SAVE_HELP, _gate_agent,
    settles=True,
)  # fmt: skip
LIST = Operation(
    "memory_list_facts", "v1-list", ListQuery, s.MemoryListOut, _list, _LIST_HELP, _gate_agent
)
ARCHIVE = Operation(
    "memory_archive", "v1-archive", s.MemoryArchiveArgs, s.MemoryOut, _archive, _ARCHIVE_HELP,
    _gate_agent,
)  # fmt: skip
UNARCHIVE = Operation(
    "memory_unarchive", "v1-unarchive", s.MemoryIdArgs, s.MemoryOut, _unarchive,
    "Bring an archived memory of yours back by id.", _gate_agent,
)  # fmt: skip
DAY = Operation(
    "memory_append_day", "v1-day", s.DayIn, s.MemoryOut, _day,
    "Append one line to your day log for today (UTC).", _gate_agent,
)  # fmt: skip
RECALL = Operation("memory_recall", "v1-recall", s.RecallIn, s.RecallOut, _recall, _RECALL_HELP)
OPERATIONS = [SAVE, LIST, ARCHIVE, UNARCHIVE, DAY, RECALL]
READ_ONLY_OPERATIONS = [LIST, RECALL]  # what a read-only token may do


def _perform(request, operation: Operation, args):
    return perform(operation, actor=request.auth, arguments=args, transport=HTTP)


@router.post("/memories", response=responses({201: s.MemoryOut}), url_name="v1-save")
def save(request, body: s.MemorySaveIn):
    """Save a fact. Expires 90 days after the save unless expiresAt says otherwise."""
    return Status(201, _perform(request, SAVE, body))


@router.post("/memories/day", response=responses({201: s.MemoryOut}), url_name="v1-day")
def day(request, body: s.DayIn):
    """Append a line to the caller's day log for today (UTC). Agents only."""
    return Status(201, _perform(request, DAY, body))


@router.get("/memories", response=responses({200: s.MemoryListOut}), url_name="v1-list")
def list_memories(request, filters: Query[ListQuery]):
    """List memories, newest first: active ones by default, `status=archived` or `all`."""
    return _perform(request, LIST, filters)


@router.post("/memories/recall", response=responses({200: s.RecallOut}), url_name="v1-recall")
def recall(request, body: s.RecallIn):
    """Recall on demand (or at the start of a run with `start: true`)."""
    return _perform(request, RECALL, body)


@router.post(
    "/memories/{memory_id}/archive", response=responses({200: s.MemoryOut}), url_name="v1-archive"
)
def archive(request, memory_id: str, body: s.ArchiveIn):
    args = s.MemoryArchiveArgs.model_construct(id=memory_id, reason=body.reason)
    return _perform(request, ARCHIVE, args)


@router.post(
    "/memories/{memory_id}/unarchive",
    response=responses({200: s.MemoryOut}),
    url_name="v1-unarchive",
)
def unarchive(request, memory_id: str):
    return _perform(request, UNARCHIVE, s.MemoryIdArgs.model_construct(id=memory_id))
