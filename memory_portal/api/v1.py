"""`/api/v1/memories`: an agent's own facts and day log (SPEC §3.2). Agents act on their own
memories; people (user tokens) name the agent."""

from __future__ import annotations

from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from memory_portal.memory import recall as recall_module
from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Kind, Scope

from . import schemas as s
from . import serializers
from .schemas import responses
from .tracing import traced

router = Router(tags=["agent memory v1"])

LIST_DEFAULT = 100
LIST_MAX = 500


def _gate_agent(actor: Actor) -> None:
    if actor.is_agent:
        from memory_portal.memory.access import check_agent_gate

        check_agent_gate(actor, selectors.setting_get(project=actor.run.project), write=False)


def _own_memory(actor: Actor, memory_id: str):
    """A v1 memory by id: a fact or day row of an agent (for an agent: its own)."""
    note = selectors.note_get(actor=actor, note_id=memory_id)
    if note.scope != Scope.AGENT or note.kind not in {Kind.FACT, Kind.DAY}:
        raise selectors.note_not_found(memory_id)
    return note


@router.post("/memories", response=responses({201: s.MemoryOut}), url_name="v1-save")
def save(request, body: s.MemorySaveIn):
    """Save a fact. Expires 90 days after the save unless expiresAt says otherwise."""
    actor: Actor = request.auth  # a read-only token's changes are refused by the services
    with traced(actor, "v1-save"):
        _gate_agent(actor)
        result = services.fact_save(
            actor=actor,
            text=body.text,
            agent_id=body.agentId,
            expires_at=body.expiresAt,
            supersedes=body.supersedes,
        )
    return Status(201, serializers.memory(result.note))


@router.post("/memories/day", response=responses({201: s.MemoryOut}), url_name="v1-day")
def day(request, body: s.DayIn):
    """Append a line to the caller's day log for today (UTC). Agents only."""
    actor: Actor = request.auth  # a read-only token's changes are refused by the services
    with traced(actor, "v1-day"):
        _gate_agent(actor)
        row = services.day_append(actor=actor, line=body.line)
    return Status(201, serializers.memory(row))


class ListQuery(Schema):
    agentId: str | None = None
    kind: str | None = Field(None, pattern="^(fact|day)$")
    status: str = Field("active", pattern="^(active|archived|all)$")
    limit: int = Field(LIST_DEFAULT, ge=1, le=LIST_MAX)


@router.get("/memories", response=responses({200: s.MemoryListOut}), url_name="v1-list")
def list_memories(request, filters: Query[ListQuery]):
    """List memories, newest first: active ones by default, `status=archived` or `all`."""
    actor: Actor = request.auth  # a read-only token's changes are refused by the services
    with traced(actor, "v1-list"):
        _gate_agent(actor)
        qs = selectors.memories_for_actor(
            actor=actor,
            agent_id=filters.agentId,
            kind=filters.kind,
            status=None if filters.status == "all" else filters.status,
        )
        rows = list(qs[: filters.limit])
    return {"object": "list", "data": [serializers.memory(n) for n in rows]}


@router.post("/memories/recall", response=responses({200: s.RecallOut}), url_name="v1-recall")
def recall(request, body: s.RecallIn):
    """Recall on demand (or at the start of a run with `start: true`)."""
    actor: Actor = request.auth  # a read-only token's changes are refused by the services
    with traced(actor, "v1-recall"):
        result = recall_module.recall(
            actor=actor, query=body.query, agent_id=body.agentId, start=body.start
        )
    return {
        "object": "recall",
        "agentId": result.agent.id,
        "skipped": result.skipped,
        "fallback": result.fallback,
        "memories": [{**serializers.memory(p.note), "score": p.score} for p in result.memories],
        "dayLog": result.day_lines,
        "block": result.block,
        "tokens": result.tokens,
    }


@router.post(
    "/memories/{memory_id}/archive", response=responses({200: s.MemoryOut}), url_name="v1-archive"
)
def archive(request, memory_id: str, body: s.ArchiveIn):
    actor: Actor = request.auth  # a read-only token's changes are refused by the services
    with traced(actor, "v1-archive"):
        _gate_agent(actor)
        note = _own_memory(actor, memory_id)
        note = services.note_archive(actor=actor, note_id=note.id, reason=body.reason)
    return serializers.memory(note)


@router.post(
    "/memories/{memory_id}/unarchive",
    response=responses({200: s.MemoryOut}),
    url_name="v1-unarchive",
)
def unarchive(request, memory_id: str):
    actor: Actor = request.auth  # a read-only token's changes are refused by the services
    with traced(actor, "v1-unarchive"):
        _gate_agent(actor)
        note = _own_memory(actor, memory_id)
        note = services.note_unarchive(actor=actor, note_id=note.id)
    return serializers.memory(note)
