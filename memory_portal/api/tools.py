"""`/api/tools`: the memory tools an agent run may call now, and the calls themselves
(SPEC §3.1). Run tokens only; every call is gated on the current state and traced."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from django.db.models import Count
from django.utils import timezone
from ninja import Router

from memory_portal.memory import selectors, services
from memory_portal.memory.access import check_agent_gate
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Note, ReadTool, Run, Target

from . import schemas as s
from . import serializers
from .auth import BearerAuth, agent_only
from .calls import HTTP, Operation, gate_setting, perform
from .schemas import responses

TOOLS_PATH = "/api/tools/"


def _taken_with_the_check(request) -> tuple[bool, bool]:
    """What a tool call's token check takes for it (auth.BearerAuth's `takes`): the run's
    slot, and the call from the run's budget unless the tool's write takes that itself
    (`Operation.settles`)."""
    if request.method != "POST" or not request.path.startswith(TOOLS_PATH):
        return False, False
    tool = TOOLS_BY_NAME.get(request.path[len(TOOLS_PATH) :].strip("/"))
    return True, tool is not None and not tool.settles


router = Router(tags=["agent tools"], auth=BearerAuth(takes=_taken_with_the_check))


@dataclass(frozen=True)
class Tool(Operation):
    writes: bool = False
    for_reviewers: bool = False


def _inline_refs(schema: dict) -> dict:
    """Models take flat JSON Schemas best: inline every $ref and drop the $defs."""
    defs = schema.get("$defs", {})

    def resolve(node):
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[node["$ref"].rsplit("/", 1)[-1]]
                merged = {
                    **resolve(copy.deepcopy(target)),
                    **{k: resolve(v) for k, v in node.items() if k != "$ref"},
                }
                return merged
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


def tool_definition(tool: Tool) -> dict:
    parameters = _inline_refs(tool.args.model_json_schema())
    parameters.pop("title", None)
    return {"name": tool.name, "description": tool.description, "parameters": parameters}


def offered_tools(actor: Actor) -> list[Tool]:
    agent_ = actor.run.agent
    if agent_.is_reviewer:
        return [t for t in TOOLS if t.for_reviewers]
    if not actor.can_write:
        return [t for t in TOOLS if not t.writes]
    return list(TOOLS)


@dataclass(frozen=True)
class Offer:
    enabled: bool
    eligible: bool
    tools: list[Tool]


def tools_offer(actor: Actor) -> Offer:
    """What GET /api/tools (and /mcp's tools/list) offers this run now."""
    enabled = gate_setting(actor).enabled
    eligible = actor.run.agent.is_eligible
    return Offer(enabled, eligible, offered_tools(actor) if (enabled and eligible) else [])


def _gate(actor: Actor, tool: Tool) -> None:
    agent_only(actor)
    check_agent_gate(actor, gate_setting(actor), write=False)
    if tool not in offered_tools(actor):
        raise MemoryPortalError(
            "memory_tool_forbidden",
            f"{tool.name} is not offered to this caller.",
            hint="Call GET /api/tools for the tools you may use.",
        )


def _call(request, name: str, body: s.Strict):
    return perform(TOOLS_BY_NAME[name], actor=request.auth, arguments=body, transport=HTTP)


@router.get("", response=responses({200: s.ToolsOut}), url_name="tools")
def list_tools(request):
    """The tool definitions this run may use now (JSON Schema of each tool's arguments)."""
    actor = agent_only(request.auth)
    offer = tools_offer(actor)
    return {
        "enabled": offer.enabled,
        "eligible": offer.eligible,
        "accessMode": "reviewed" if actor.run.agent.is_reviewer else "learned",
        "tools": [tool_definition(t) for t in offer.tools],
    }


def _page_of(
    qs,
    *,
    offset: int,
    limit: int,
    render=serializers.entry,
    key: str = "entries",
    rows_out: list | None = None,
) -> dict:
    """One page of a tool's list within the 12,000-byte reply ceiling; `nextOffset` goes on.
    `rows_out` receives the page's rows (a page the byte ceiling cut shows a prefix of them)."""
    rows = list(qs[offset : offset + limit + 1])
    if rows_out is not None:
        rows_out.extend(rows[:limit])
    return serializers.page(
        rows[:limit], offset=offset, limit=limit, more=len(rows) > limit, render=render, key=key
    )


def _with_relations(qs):
    skips = selectors.ANSWER_SKIPS
    return qs.select_related("origin_run", "evidence_repository").defer(
        *skips[Note], *(f"origin_run__{name}" for name in skips[Run])
    )


def _served(actor: Actor, tool: str, body: dict, *, offset: int = 0, trusts=None) -> dict:
    """Record the notes the answer `body` serves (its entries, in order) as read, before it
    is answered; `trusts` maps a note id to its trust where the entries do not carry it (a
    recovery)."""
    services.reads_record(
        actor=actor,
        tool=tool,
        served=[
            (e["id"], e["trust"] if trusts is None else trusts[e["id"]], None)
            for e in body.get("entries", ())
        ],
        first_rank=offset + 1,
    )
    return body


# --- The tools' functions (one per tool, whatever the transport) ---------------------------


def _write(actor: Actor, args: s.MemoryWriteArgs, call: services.OpenCall | None):
    result = services.note_write(
        actor=actor,
        call=call,
        kind=args.kind,
        content=args.content,
        target=args.target,
        scope=args.scope,
        summary=args.summary,
        tags=args.tags,
        day=args.date,
        evidence=args.evidence.model_dump() if args.evidence else None,
    )
    note = result.note
    setting = actor.setting or selectors.setting_get(project=actor.run.project)
    if result.created:  # answered from the write: nothing is read after its commit
        held = selectors.held_as_written(setting=setting, note=note, writer=actor.run.agent)
    else:  # an identical note stored earlier, perhaps by another agent
        held = note.pk in selectors.held_note_ids(setting=setting, note_ids=[note.pk])
    return {
        "id": note.id,
        "trust": note.trust,
        "status": note.status,
        "created": result.created,
        "held": held,
    }


def _read(actor: Actor, args: s.MemoryReadArgs):
    if args.id:
        note = selectors.note_get(actor=actor, note_id=args.id)
        return _served(
            actor, ReadTool.READ, {"entries": [serializers.entry(note)], "nextOffset": None}
        )
    target = args.target or "long_term"
    if target == "recoveries":
        qs = selectors.recoveries_for_actor(actor=actor).order_by("-created_at", "id")
        rows: list = []
        body = _page_of(
            qs,
            offset=args.offset,
            limit=args.limit,
            render=serializers.recovery_entry,
            rows_out=rows,
        )
        trusts = {r.note_id: r.note.trust for r in rows}
        return _served(actor, ReadTool.READ, body, offset=args.offset, trusts=trusts)
    notes = selectors.notes_for_actor(actor=actor)
    if args.kind:
        notes = notes.filter(kind=args.kind)
    if args.tag:
        notes = notes.tagged(args.tag)
    if target == "list":
        # One query: each date with its count (a GROUP BY, not a count per date).
        rows = list(
            notes.filter(target=Target.DAILY)
            .values("day")
            .annotate(count=Count("id"))
            .order_by("-day")[args.offset : args.offset + args.limit + 1]
        )
        more = len(rows) > args.limit
        return {
            "dates": [{"date": r["day"], "count": r["count"]} for r in rows[: args.limit]],
            "nextOffset": args.offset + args.limit if more else None,
        }
    if target == "daily":
        day = args.date or timezone.now().date()
        qs = notes.filter(target=Target.DAILY, day=day).order_by("created_at", "id")
    else:
        qs = notes.filter(target=Target.LONG_TERM).order_by("-created_at", "-id")
    body = _page_of(_with_relations(qs), offset=args.offset, limit=args.limit)
    return _served(actor, ReadTool.READ, body, offset=args.offset)


def _search(actor: Actor, args: s.MemorySearchArgs):
    ranked = selectors.search_ids(
        actor=actor,
        query=args.query,
        kind=args.kind,
        target=args.target,
        day=args.date,
        tag=args.tag,
    )
    end = args.offset + args.limit
    body = serializers.page(
        selectors.notes_in_order(ranked[args.offset : end]),
        offset=args.offset,
        limit=args.limit,
        more=len(ranked) > end,
        render=serializers.entry,
    )
    return _served(actor, ReadTool.SEARCH, body, offset=args.offset)


def _status(actor: Actor, args: s.MemoryStatusArgs):
    status = selectors.memory_status(actor=actor)
    return {
        "enabled": status.enabled,
        "noteCount": status.note_count,
        "accessMode": status.access_mode,
        "revision": status.revision,
        "fingerprint": status.fingerprint,
        "reviewPolicy": status.review_policy,
        "heldCount": status.held_count,
    }


def _forget(actor: Actor, args: s.MemoryForgetArgs):
    recovery = services.note_forget(actor=actor, note_id=args.id)
    return {"recoveryId": recovery.id, "id": recovery.note_id}


def _restore(actor: Actor, args: s.MemoryRestoreArgs):
    note = services.note_restore(actor=actor, recovery_id=args.recoveryId)
    return {"id": note.id, "status": note.status}


def _scratchpad(actor: Actor, args: s.ScratchpadArgs):
    """One action of the scratchpad; which arguments go with which action is the schema's
    rule (ScratchpadArgs)."""
    if args.action == "list":
        limit = args.limit or s.SCRATCHPAD_PAGE_DEFAULT
        return _page_of(
            selectors.scratchpad_items(actor=actor),
            offset=args.offset or 0,
            limit=limit,
            render=serializers.scratchpad_item,
            key="items",
        )
    if args.action == "add":
        item = services.scratchpad_add(actor=actor, text=args.text)
        return {"itemId": item.id, "done": item.done}
    if args.action == "done":
        item = services.scratchpad_done(actor=actor, item_id=args.itemId)
        return {"itemId": item.id, "done": item.done}
    if args.action == "undo":
        item = services.scratchpad_undo(actor=actor, item_id=args.itemId)
        return {"itemId": item.id, "done": item.done}
    return {"removed": services.scratchpad_clear(actor=actor)}


# --- The tools, and their HTTP routes --------------------------------------------------------

DESCRIPTIONS = {
    "memory_write": (
        "Save a note (fact, lesson, decision or navigation) to project memory. It is stored at "
        "once as `learned` (unverified) and its id is readable immediately. Repeating an "
        "identical write returns the same id. `held: true`: the project holds notes for review, "
        "so other runs see it once a person has reviewed it. Never store secrets."
    ),
    "memory_read": (
        "Read one note by id, or a page of long_term notes, a daily log (date), the list of "
        "daily dates, or your recoverable forgotten notes; optional kind and tag. Each entry "
        "carries trust, creator stage/agent, origin run/step and producer status: verify "
        "consequential claims."
    ),
    "memory_search": (
        "Full-text search of the memory you can see; optional kind, target, date, tag. Pages of "
        "1–5 entries; continue at nextOffset."
    ),
    "memory_status": (
        "Whether memory is enabled, how many notes you can see, your access mode "
        "(learned/reviewed), the revision and a fingerprint of what you can see; the review "
        "policy, and under `hold` how many of your run's notes other runs cannot see yet."
    ),
    "memory_forget": (
        "Forget a learned note by id; returns a recoveryId for memory_restore. Reviewed or "
        "rejected notes cannot be changed by an agent."
    ),
    "memory_restore": "Restore a forgotten learned note with its recoveryId.",
    "scratchpad": (
        "Your top-level run's shared to-do list: list (pages; continue at nextOffset), add "
        "(text → itemId), done / undo (itemId), clear (removes completed items). Not shared "
        "with later runs."
    ),
}


def _tool(name: str, trace: str, args, returns, function, **offer) -> Tool:
    """A tool row: its name, trace name, arguments, answer and function, its description and
    the tools' gate; `offer`: `writes` (it changes memory: not offered with a read-only token),
    `for_reviewers` (offered to reviewer agents too), `settles` (Operation)."""
    return Tool(name, trace, args, returns, function, DESCRIPTIONS[name], _gate, **offer)


TOOLS = [
    _tool(
        "memory_write", "write", s.MemoryWriteArgs, s.WriteOut, _write, writes=True, settles=True
    ),
    _tool(
        "memory_read", "read", s.MemoryReadArgs, s.PageOut | s.DatesOut, _read, for_reviewers=True
    ),
    _tool("memory_search", "search", s.MemorySearchArgs, s.PageOut, _search, for_reviewers=True),
    _tool("memory_status", "status", s.MemoryStatusArgs, s.StatusOut, _status, for_reviewers=True),
    _tool("memory_forget", "forget", s.MemoryForgetArgs, s.ForgetOut, _forget, writes=True),
    _tool("memory_restore", "restore", s.MemoryRestoreArgs, s.RestoreOut, _restore, writes=True),
    _tool("scratchpad", "scratchpad", s.ScratchpadArgs, s.ScratchpadOut, _scratchpad, writes=True),
]
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


@router.post("/memory_write", response=responses({200: s.WriteOut}), url_name="tool-write")
def memory_write(request, body: s.MemoryWriteArgs):
    return _call(request, "memory_write", body)


@router.post(
    "/memory_read", response=responses({200: s.PageOut | s.DatesOut}), url_name="tool-read"
)
def memory_read(request, body: s.MemoryReadArgs):
    return _call(request, "memory_read", body)


@router.post("/memory_search", response=responses({200: s.PageOut}), url_name="tool-search")
def memory_search(request, body: s.MemorySearchArgs):
    return _call(request, "memory_search", body)


@router.post("/memory_status", response=responses({200: s.StatusOut}), url_name="tool-status")
def memory_status(request, body: s.MemoryStatusArgs):
    return _call(request, "memory_status", body)


@router.post("/memory_forget", response=responses({200: s.ForgetOut}), url_name="tool-forget")
def memory_forget(request, body: s.MemoryForgetArgs):
    return _call(request, "memory_forget", body)


@router.post("/memory_restore", response=responses({200: s.RestoreOut}), url_name="tool-restore")
def memory_restore(request, body: s.MemoryRestoreArgs):
    return _call(request, "memory_restore", body)


@router.post("/scratchpad", response=responses({200: s.ScratchpadOut}), url_name="tool-scratchpad")
def scratchpad(request, body: s.ScratchpadArgs):
    return _call(request, "scratchpad", body)
