"""Export a project's memory as NDJSON (SPEC §3.5): one line per record, the versioned header
first, the counts last; never a secret or a token."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from functools import partial

from django.contrib.auth import get_user_model
from django.utils import timezone

from ..actors import Actor
from ..models import (
    Agent,
    Application,
    AuditEvent,
    Membership,
    MemorySetting,
    Note,
    Project,
    Recovery,
)
from .format import (
    AGENT_FIELDS,
    EVENT_FIELDS,
    EVIDENCE_FIELDS,
    FORMAT,
    NOTE_FIELDS,
    PROVENANCE_FIELDS,
    RECOVERY_FIELDS,
    VERSION,
    AgentLine,
    ApplicationLine,
    EndLine,
    EventLine,
    Evidence,
    HeaderLine,
    Line,
    MemberLine,
    NoteLine,
    ProjectLine,
    Provenance,
    RecoveryLine,
    SettingLine,
    line_type,
    line_values,
)

log = logging.getLogger(__name__)


def project_export(*, actor: Actor | None, project: Project) -> Iterator[str]:
    """The project's memory as NDJSON lines, streamed: every query iterates in chunks, so
    memory stays flat whatever the size. `actor=None` is the operator (the command).

    The first lines, through the first query (the setting), are produced before this returns:
    a database failure there raises here, before a byte is sent, so the caller can answer 503.
    A failure later ends the stream with an `error` line (no `end` line) and then raises, so a
    client reading to the end sees an error, never a file that merely stops."""
    if actor is not None:
        from ..access import require_manager

        require_manager(actor, project)
    lines = _export_lines(project)
    first = [next(lines) for _ in range(PRIMED_LINES)]
    return _guarded(first, lines)


PRIMED_LINES = 3  # the header, the project and the setting: the first database read


class ExportFailed(Exception):
    """The export stopped after its first bytes were sent; the output is incomplete."""


def _guarded(first: list[str], rest: Iterator[str]) -> Iterator[str]:
    yield from first
    try:
        yield from rest
    except Exception as exc:
        log.exception("export failed mid-stream; the output is incomplete")
        line = {"type": "error", "message": "The export failed before its end; this file is "
                "incomplete.", "hint": "Export again; an import refuses this file."}  # fmt: skip
        yield json.dumps(line, separators=(",", ":")) + "\n"
        raise ExportFailed("the export failed before its end line") from exc


def _ordered(line: type[Line], values: dict) -> dict:
    """The values in the order the line model declares its fields (each one present)."""
    return {name: values[name] for name in line.model_fields}


def _dump(line: type[Line], values: dict) -> str:
    record = _ordered(line, {"type": line_type(line), **values})
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _slug(row) -> str | None:
    return row.slug if row is not None else None


def _export_lines(project: Project) -> Iterator[str]:
    yield _dump(
        HeaderLine,
        {
            "format": FORMAT,
            "version": VERSION,
            "project": project.slug,
            "exportedAt": timezone.now().isoformat(),
        },
    )
    yield _dump(
        ProjectLine,
        {"slug": project.slug, "name": project.name, "createdAt": project.created_at.isoformat()},
    )
    setting = MemorySetting.objects.filter(project=project).first()
    yield _dump(
        SettingLine,
        {
            "enabled": bool(setting and setting.enabled),
            "revision": setting.revision if setting else 0,
            "revocationEpoch": setting.revocation_epoch if setting else 0,
        },
    )
    User = get_user_model()
    usernames = dict(User.objects.values_list("pk", User.USERNAME_FIELD))
    # Each record type: its line, its rows (iterated in chunks), a row's values.
    sections: list[tuple[type[Line], Iterable, Callable[..., dict]]] = [
        (
            ApplicationLine,
            Application.objects.filter(project=project).order_by("slug").iterator(500),
            _application,
        ),
        (
            AgentLine,
            Agent.objects.filter(project=project)
            .select_related("application")
            .order_by("id")
            .iterator(500),
            _agent,
        ),
        (
            MemberLine,
            Membership.objects.filter(project=project)
            .select_related("user")
            .order_by("user__" + User.USERNAME_FIELD)
            .iterator(500),
            _member,
        ),
        (
            NoteLine,
            Note.objects.filter(project=project)
            .select_related("application", "evidence_repository")
            .order_by("created_at", "id")
            .iterator(200),
            partial(_note, usernames=usernames),
        ),
        (
            RecoveryLine,
            Recovery.objects.filter(project=project).order_by("created_at", "id").iterator(500),
            partial(_recovery, usernames=usernames),
        ),
        (
            EventLine,
            AuditEvent.objects.filter(project=project)
            .exclude(note_ref="")
            .filter(note_ref__in=Note.objects.filter(project=project).values("pk"))
            .order_by("id")
            .iterator(1000),
            _event,
        ),
    ]
    counts = {}
    try:
        for line, rows, values in sections:
            kind = line_type(line)
            counts[kind] = 0
            for row in rows:
                counts[kind] += 1
                yield _dump(line, values(row))
    finally:
        for _, rows, _ in sections:  # a failure mid-section leaves a cursor open: close it now
            rows.close()
    yield _dump(EndLine, {"counts": counts})


def _application(app: Application) -> dict:
    return {"slug": app.slug, "name": app.name, "createdAt": app.created_at.isoformat()}


def _agent(agent: Agent) -> dict:
    return {
        **line_values(agent, AGENT_FIELDS),
        "id": agent.pk,
        "application": _slug(agent.application),
    }


def _member(membership: Membership) -> dict:
    return {"username": membership.user.get_username(), "role": membership.role}


def _note(note: Note, *, usernames: dict) -> dict:
    evidence = None
    if note.evidence_path or note.evidence_commit:
        evidence = _ordered(
            Evidence,
            {
                **line_values(note, EVIDENCE_FIELDS),
                "repository": _slug(note.evidence_repository),
            },
        )
    provenance = {
        **line_values(note, PROVENANCE_FIELDS),
        "createdByUser": usernames.get(note.created_by_user_id),
    }
    return {
        **line_values(note, NOTE_FIELDS),
        "id": note.pk,
        "application": _slug(note.application),
        "ownerAgentId": note.owner_agent_id,
        "tags": note.tags,
        "vetoedBy": usernames.get(note.vetoed_by_id),
        "supersedesId": note.supersedes_id,
        "supersededById": note.superseded_by_id,
        "provenance": _ordered(Provenance, provenance),
        "evidence": evidence,
    }


def _recovery(rec: Recovery, *, usernames: dict) -> dict:
    return {
        **line_values(rec, RECOVERY_FIELDS),
        "id": rec.pk,
        "noteId": rec.note_id,
        "forgottenByUser": usernames.get(rec.forgotten_by_user_id),
    }


def _event(event: AuditEvent) -> dict:
    return {
        **line_values(event, EVENT_FIELDS),
        "id": event.pk,
        "noteId": event.note_ref,
        "recoveryId": event.recovery_ref,
        "details": event.details,
    }
