"""Notes as the API shows them: tool entries, v1 memory objects and admin rows (camelCase)."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from memory_portal.memory.models import Note, Recovery, ScratchpadItem

PAGE_BYTES = 12_000


def _none(value: str) -> str | None:
    return value or None


def evidence(note: Note) -> dict | None:
    if not note.evidence_commit:
        return None
    return {
        "repositoryId": note.evidence_repository.slug if note.evidence_repository_id else None,
        "path": note.evidence_path,
        "commit": note.evidence_commit,
        "quote": _none(note.evidence_quote),
    }


def entry(note: Note) -> dict[str, Any]:
    """A note as the agent tools return it: content plus trust and provenance to judge it by."""
    return {
        "id": note.id,
        "kind": note.kind,
        "target": note.target,
        "scope": note.scope,
        "day": note.day,
        "content": note.content,
        "contentTruncated": False,
        "summary": _none(note.summary),
        "tags": note.tags,
        "trust": note.trust,
        "status": note.status,
        "createdByStage": _none(note.created_by_stage),
        "createdByAgentId": _none(note.created_by_agent_id),
        "originRunId": _none(note.origin_run_ref),
        "topLevelRunId": _none(note.top_level_run_id),
        "step": _none(note.step),
        "taskKey": _none(note.task_key),
        "producerStatus": note.producer_status,
        "evidence": evidence(note),
        "expiresAt": note.expires_at,
        "createdAt": note.created_at,
    }


def recovery_entry(recovery: Recovery) -> dict[str, Any]:
    note = recovery.note
    return {
        "recoveryId": recovery.id,
        "id": note.id,
        "kind": note.kind,
        "target": note.target,
        "scope": note.scope,
        "content": note.content,
        "previousStatus": recovery.previous_status,
        "forgottenAt": recovery.created_at,
    }


def memory(note: Note) -> dict[str, Any]:
    """The v1 memory object."""
    return {
        "id": note.id,
        "object": "memory",
        "agentId": note.owner_agent_id,
        "kind": note.kind,
        "day": note.day,
        "text": note.content,
        "expiresAt": note.expires_at,
        "expired": note.expired,
        "status": note.status,
        "trust": note.trust,
        "archiveReason": _none(note.archive_reason),
        "archivedAt": note.archived_at,
        "supersedesId": note.supersedes_id,
        "sourceRunId": _none(note.origin_run_ref),
        "sourceTaskKey": _none(note.task_key),
        "createdByAgentId": _none(note.created_by_agent_id),
        "createdByUserId": str(note.created_by_user_id) if note.created_by_user_id else None,
        "recallCount": note.recall_count,
        "lastRecalledAt": note.last_recalled_at,
        "createdAt": note.created_at,
        "updatedAt": note.updated_at,
    }


def admin_note(note: Note) -> dict[str, Any]:
    recovery = getattr(note, "recovery", None) if note.status == "forgotten" else None
    return {
        "id": note.id,
        "kind": note.kind,
        "target": note.target,
        "scope": note.scope,
        "applicationId": note.application.slug if note.application_id else None,
        "ownerAgentId": note.owner_agent_id,
        "day": note.day,
        "content": note.content,
        "summary": _none(note.summary),
        "tags": note.tags,
        "trust": note.trust,
        "state": "approved" if note.trust == "reviewed" else note.trust,
        "status": note.status,
        "archiveReason": _none(note.archive_reason),
        "vetoedBy": note.vetoed_by.get_username() if note.vetoed_by_id else None,
        "createdByStage": _none(note.created_by_stage),
        "createdByAgentId": _none(note.created_by_agent_id),
        "createdByUserId": str(note.created_by_user_id) if note.created_by_user_id else None,
        "originRunId": _none(note.origin_run_ref),
        "producerStatus": note.producer_status,
        "taskKey": _none(note.task_key),
        "evidence": evidence(note),
        "recoveryId": recovery.id if recovery is not None else None,
        "createdAt": note.created_at,
        "updatedAt": note.updated_at,
    }


def scratchpad_item(item: ScratchpadItem) -> dict[str, Any]:
    return {"itemId": item.id, "text": item.text, "done": item.done}


def size_of(value: Any) -> int:
    return len(json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False).encode())


def page(rows: list, *, offset: int, limit: int, more: bool, render, key: str = "entries") -> dict:
    """A page of at most `limit` rendered rows that fits in 12,000 bytes of JSON. `rows` holds
    up to limit + 1 items from `offset`; `more` says whether anything follows them. When even
    one entry is too big, its content is cut to fit and marked `contentTruncated`."""
    body: dict[str, Any] = {key: [], "nextOffset": None}
    for row in rows[:limit]:
        item = render(row)
        body[key].append(item)
        if size_of(body) > PAGE_BYTES:
            body[key].pop()
            if not body[key] and "content" in item:
                over = size_of({key: [item], "nextOffset": offset + 1}) - PAGE_BYTES
                text = item["content"].encode()[: max(0, len(item["content"].encode()) - over - 64)]
                item["content"] = text.decode(errors="ignore")
                item["contentTruncated"] = True
                body[key].append(item)
            break
    shown = len(body[key])
    if shown < len(rows) or more:
        body["nextOffset"] = offset + shown
    return body
