"""The outbox's events (SPEC §2.12): which audited actions are events, and what an event says.

An event is appended by the change that makes it, in its transaction (services/change.py:
`ProjectChange.event` collects it, the change's end numbers and inserts it; the write's one
round trip inserts its own, fastsql.write_clean). Its data holds ids, kinds, trust, agent,
run, task key, who acted, counts and a link into the dashboard — never a note's content,
summary, tags, an archive reason or a search: a payload may go to a chat channel."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal

from .audit_actions import AuditAction
from .models import AuditEvent, Event, Note, Project

# The audited actions that are events, by the event's type.
EVENT_TYPES: dict[str, str] = {
    AuditAction.NOTE_WRITE: "note.written",
    AuditAction.NOTE_SAVE: "note.written",
    AuditAction.NOTE_SUPERSEDE: "note.superseded",
    AuditAction.NOTE_EDIT: "note.superseded",
    AuditAction.NOTE_APPROVE: "note.reviewed",
    AuditAction.NOTE_REJECT: "note.rejected",
    AuditAction.NOTE_UNREVIEW: "note.unreviewed",
    AuditAction.NOTE_VETO: "note.vetoed",
    AuditAction.NOTE_UNDO: "note.unvetoed",
    AuditAction.NOTE_FORGET: "note.forgotten",
    AuditAction.NOTE_RESTORE: "note.restored",
    AuditAction.RUN_REVERT: "run.reverted",
    AuditAction.RUN_REVERT_UNDO: "run.revert_undone",
    AuditAction.MEMORY_ENABLE: "memory.enabled",
    AuditAction.MEMORY_DISABLE: "memory.disabled",
    AuditAction.MEMORY_RESET: "memory.reset",
    AuditAction.REVIEW_DIGEST: "review.digest",
}
# Every type a consumer may subscribe to: the changes above and the daily digest.
TYPES: tuple[str, ...] = tuple(dict.fromkeys(EVENT_TYPES.values()))
# How a person is told of each type (the Notifications page, an alert's subject).
LABELS: dict[str, str] = {
    "note.written": "A learned note is written",
    "note.reviewed": "A note is approved",
    "note.rejected": "A note is rejected",
    "note.unreviewed": "An approval or rejection is taken back",
    "note.vetoed": "A note is vetoed",
    "note.unvetoed": "A veto is undone",
    "note.forgotten": "A note is forgotten",
    "note.restored": "A note is restored",
    "note.superseded": "A note is superseded",
    "run.reverted": "A run is reverted",
    "run.revert_undone": "A run's revert is undone",
    "memory.enabled": "Memory is switched on",
    "memory.disabled": "Memory is switched off",
    "memory.reset": "Memory is reset",
    "review.digest": "The daily review digest",
}
# The events that say who had read the note (its runs, its agents, the runs still running):
# what an orchestrator re-runs after a bad fact is taken away.
READ_REACH = frozenset(
    EVENT_TYPES[action]
    for action in (AuditAction.NOTE_VETO, AuditAction.NOTE_REJECT, AuditAction.NOTE_FORGET)
)
# What a new endpoint is offered ticked in the dashboard: what a person wants to hear of first.
SUGGESTED = (
    EVENT_TYPES[AuditAction.NOTE_VETO],
    EVENT_TYPES[AuditAction.NOTE_REJECT],
    EVENT_TYPES[AuditAction.MEMORY_RESET],
)

# Sent once a transaction that appended events to a project with a listener (an active webhook
# endpoint, a person's email alerts) has committed (`project_id`): the delivery pass listens
# (services/deliveries.py).
events_committed = Signal()


def announce_after_commit(project_id: int, *, listeners: int) -> None:
    """Called by a change that appended events, with its setting row's count of listeners
    (active endpoints and people with alerts): nothing at all (no query, no signal) when there
    is none."""
    if listeners > 0:
        transaction.on_commit(lambda: events_committed.send(sender=Event, project_id=project_id))


def link(path: str) -> str:
    """A dashboard path as a link: absolute with MEMORY_PORTAL_BASE_URL, else the path."""
    return f"{settings.MEMORY_PORTAL_BASE_URL}{path}"


def _actor(audit: AuditEvent) -> dict:
    if audit.actor_agent_id:
        return {"type": "agent", "agentId": audit.actor_agent_id, "runId": audit.actor_run_id}
    if audit.actor_user_id is not None:
        return {"type": "person", "username": audit.actor_label}
    return {"type": "system"}


def _note(note: Note) -> dict:
    return {
        "id": note.pk,
        "kind": note.kind,
        "scope": note.scope,
        "target": note.target,
        "trust": note.trust,
        "status": note.status,
        "agentId": note.created_by_agent_id or None,
        "runId": note.origin_run_ref or None,
        "topLevelRunId": note.top_level_run_id or None,
        "taskKey": note.task_key or None,
    }


def _counts(details: dict) -> dict[str, int]:
    """The numbers an audit row's details hold (a reset's, a revert's), nothing else: the
    details of other actions may carry free text (a reason) an event must not."""
    found = details.get("counts") if isinstance(details.get("counts"), dict) else details
    return {
        k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)
    }


def event_of(audit: AuditEvent, *, project: Project, note: Note | None = None) -> Event | None:
    """The outbox row of an audited action, unnumbered (the change numbers it under its
    project's lock), or None when the action is no event."""
    kind = EVENT_TYPES.get(audit.action)
    if kind is None:
        return None
    slug = project.slug
    data: dict = {"project": slug, "actor": _actor(audit)}
    if note is not None:
        data["note"] = _note(note)
        data["link"] = link(f"/p/{slug}/notes/{note.pk}/")
        supersedes = audit.details.get("supersedes")
        if isinstance(supersedes, str):
            data["supersedes"] = supersedes
        if kind in READ_REACH:
            from .selectors.reach import note_reach  # selectors import this module

            data["reads"] = note_reach(note_id=note.pk).as_data()
    elif kind == "review.digest":
        data["digest"] = audit.details.get("digest", {})
        data["link"] = link(f"/p/{slug}/review/")
    elif kind.startswith("run."):
        run_id = audit.target_ref or audit.details.get("run") or ""
        data["runId"] = run_id
        data["counts"] = _counts(audit.details)
        data["link"] = link(f"/p/{slug}/runs/{run_id}/") if run_id else link(f"/p/{slug}/")
    else:
        data["counts"] = _counts(audit.details)
        data["link"] = link(f"/p/{slug}/")
    return Event(project=project, type=kind, data=data, created_at=audit.created_at)
