"""Export a project's memory as NDJSON and import it back (SPEC §3.5): one line per record, a
versioned header first, never a secret or a token. The line models below are the format: they
validate an import and generate its JSON Schema (docs/export-format-v1.schema.json)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Annotated, Literal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from . import counters
from .access import is_administrator
from .actors import Actor
from .audit_actions import AuditAction
from .errors import MemoryPortalError
from .models import (
    REASON_VETOED,
    Agent,
    Application,
    AuditEvent,
    Kind,
    MemorySetting,
    Note,
    Project,
    Recovery,
    Repository,
    Scope,
    Stage,
    Status,
    Target,
    Trust,
)
from .validation import (
    ARCHIVE_REASON_MAX,
    CONTENT_MAX,
    DAY_ROW_MAX,
    FACT_MAX,
    SUMMARY_MAX,
    check_no_secret,
    day_row_identity,
    stamp_identity,
)

FORMAT = "memory-portal/export"
VERSION = 1
ID = Annotated[str, Field(min_length=5, max_length=40, pattern=r"^[a-z]{3}_[0-9a-z]{1,36}$")]
SLUG = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[-a-zA-Z0-9_]+$")]


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HeaderLine(Line):
    type: Literal["header"]
    format: Literal["memory-portal/export"]
    version: Literal[1]
    project: SLUG
    exportedAt: datetime


class ProjectLine(Line):
    type: Literal["project"]
    slug: SLUG
    name: str = Field(min_length=1, max_length=200)
    createdAt: datetime


class SettingLine(Line):
    """The switch; revision and epoch are the exporting instance's counters (informative)."""

    type: Literal["setting"]
    enabled: bool
    revision: int = Field(ge=0)
    revocationEpoch: int = Field(ge=0)


class ApplicationLine(Line):
    type: Literal["application"]
    slug: SLUG
    name: str = Field(min_length=1, max_length=200)
    createdAt: datetime


class AgentLine(Line):
    type: Literal["agent"]
    id: ID
    name: str = Field(min_length=1, max_length=200)
    stage: Literal[tuple(Stage.values)]  # type: ignore[valid-type]
    application: SLUG | None
    createdAt: datetime


class Evidence(Line):
    repository: SLUG | None
    path: str = Field(max_length=1000)
    commit: str = Field(max_length=64)
    quote: str = Field(max_length=400)


class Provenance(Line):
    createdByAgentId: str = Field(max_length=40)
    createdByStage: str = Field(max_length=20)
    createdByUser: str | None = Field(max_length=150)
    originRunId: str = Field(max_length=40)
    topLevelRunId: str = Field(max_length=40)
    step: str = Field(max_length=100)
    taskKey: str = Field(max_length=64)


class NoteLine(Line):
    """One note of any status; `kind: day` lines are the agents' day logs."""

    type: Literal["note"]
    id: ID
    scope: Literal[tuple(Scope.values)]  # type: ignore[valid-type]
    application: SLUG | None
    ownerAgentId: ID | None
    kind: Literal[tuple(Kind.values)]  # type: ignore[valid-type]
    target: Literal[tuple(Target.values)]  # type: ignore[valid-type]
    day: date | None
    content: str = Field(min_length=1, max_length=DAY_ROW_MAX)
    summary: str = Field(max_length=SUMMARY_MAX)
    tags: list[str] = Field(max_length=8)
    trust: Literal[tuple(Trust.values)]  # type: ignore[valid-type]
    status: Literal[tuple(Status.values)]  # type: ignore[valid-type]
    archiveReason: str = Field(max_length=ARCHIVE_REASON_MAX)
    archivedAt: datetime | None
    vetoedBy: str | None = Field(max_length=150)
    supersedesId: ID | None
    supersededById: ID | None
    expiresAt: datetime | None
    provenance: Provenance
    evidence: Evidence | None
    recallCount: int = Field(ge=0)
    lastRecalledAt: datetime | None
    createdAt: datetime
    updatedAt: datetime


class RecoveryLine(Line):
    type: Literal["recovery"]
    id: ID
    noteId: ID
    previousStatus: Literal["active", "archived"]
    forgottenByUser: str | None = Field(max_length=150)
    forgottenByAgentId: str = Field(max_length=40)
    forgottenByRunId: str = Field(max_length=40)
    forgottenByTopLevelRunId: str = Field(max_length=40)
    createdAt: datetime


class EventLine(Line):
    """A note's history: its audit events (never content). Ids are the exporter's."""

    type: Literal["event"]
    id: int
    noteId: ID
    action: str = Field(max_length=64)
    actor: str = Field(max_length=200)
    actorAgentId: str = Field(max_length=40)
    actorRunId: str = Field(max_length=40)
    recoveryId: str = Field(max_length=40)
    details: dict
    at: datetime


class EndLine(Line):
    """The last line: the counts, so a cut-off file is caught."""

    type: Literal["end"]
    counts: dict[str, int]


AnyLine = Annotated[
    HeaderLine
    | ProjectLine
    | SettingLine
    | ApplicationLine
    | AgentLine
    | NoteLine
    | RecoveryLine
    | EventLine
    | EndLine,
    Field(discriminator="type"),
]
LINE = TypeAdapter(AnyLine)


def json_schema() -> dict:
    """The JSON Schema of one line of the format (docs/export-format-v1.schema.json)."""
    schema = LINE.json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://memory-portal.invalid/export-format-v1.schema.json",
        "title": f"Memory Portal export, format {FORMAT} version {VERSION} (one NDJSON line)",
        **schema,
    }


# --- Export -----------------------------------------------------------------------------------


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _dump(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def project_export(*, actor: Actor | None, project: Project) -> Iterator[str]:
    """The project's memory as NDJSON lines, streamed: every query iterates in chunks, so
    memory stays flat whatever the size. `actor=None` is the operator (the command)."""
    if actor is not None:
        from .access import require_manager

        require_manager(actor, project)
    return _export_lines(project)


def _export_lines(project: Project) -> Iterator[str]:
    counts = {"application": 0, "agent": 0, "note": 0, "recovery": 0, "event": 0}
    yield _dump(
        {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "project": project.slug,
            "exportedAt": timezone.now().isoformat(),
        }
    )
    yield _dump(
        {
            "type": "project",
            "slug": project.slug,
            "name": project.name,
            "createdAt": _iso(project.created_at),
        }
    )
    setting = MemorySetting.objects.filter(project=project).first()
    yield _dump(
        {
            "type": "setting",
            "enabled": bool(setting and setting.enabled),
            "revision": setting.revision if setting else 0,
            "revocationEpoch": setting.revocation_epoch if setting else 0,
        }
    )
    for app in Application.objects.filter(project=project).order_by("slug").iterator(500):
        counts["application"] += 1
        yield _dump(
            {
                "type": "application",
                "slug": app.slug,
                "name": app.name,
                "createdAt": _iso(app.created_at),
            }
        )
    agents = Agent.objects.filter(project=project).select_related("application").order_by("id")
    for agent in agents.iterator(500):
        counts["agent"] += 1
        yield _dump(
            {
                "type": "agent",
                "id": agent.pk,
                "name": agent.name,
                "stage": agent.stage,
                "application": agent.application.slug if agent.application else None,
                "createdAt": _iso(agent.created_at),
            }
        )
    User = get_user_model()
    usernames = dict(User.objects.values_list("pk", User.USERNAME_FIELD))
    notes = (
        Note.objects.filter(project=project)
        .select_related("application", "evidence_repository")
        .order_by("created_at", "id")
    )
    for note in notes.iterator(200):
        counts["note"] += 1
        evidence = None
        if note.evidence_path or note.evidence_commit:
            evidence = {
                "repository": note.evidence_repository.slug if note.evidence_repository else None,
                "path": note.evidence_path,
                "commit": note.evidence_commit,
                "quote": note.evidence_quote,
            }
        yield _dump(
            {
                "type": "note",
                "id": note.pk,
                "scope": note.scope,
                "application": note.application.slug if note.application else None,
                "ownerAgentId": note.owner_agent_id,
                "kind": note.kind,
                "target": note.target,
                "day": _iso(note.day),
                "content": note.content,
                "summary": note.summary,
                "tags": note.tags,
                "trust": note.trust,
                "status": note.status,
                "archiveReason": note.archive_reason,
                "archivedAt": _iso(note.archived_at),
                "vetoedBy": usernames.get(note.vetoed_by_id),
                "supersedesId": note.supersedes_id,
                "supersededById": note.superseded_by_id,
                "expiresAt": _iso(note.expires_at),
                "provenance": {
                    "createdByAgentId": note.created_by_agent_id,
                    "createdByStage": note.created_by_stage,
                    "createdByUser": usernames.get(note.created_by_user_id),
                    "originRunId": note.origin_run_ref,
                    "topLevelRunId": note.top_level_run_id,
                    "step": note.step,
                    "taskKey": note.task_key,
                },
                "evidence": evidence,
                "recallCount": note.recall_count,
                "lastRecalledAt": _iso(note.last_recalled_at),
                "createdAt": _iso(note.created_at),
                "updatedAt": _iso(note.updated_at),
            }
        )
    for rec in Recovery.objects.filter(project=project).order_by("created_at", "id").iterator(500):
        counts["recovery"] += 1
        yield _dump(
            {
                "type": "recovery",
                "id": rec.pk,
                "noteId": rec.note_id,
                "previousStatus": rec.previous_status,
                "forgottenByUser": usernames.get(rec.forgotten_by_user_id),
                "forgottenByAgentId": rec.forgotten_by_agent_id,
                "forgottenByRunId": rec.forgotten_by_run_id,
                "forgottenByTopLevelRunId": rec.forgotten_by_top_level_run_id,
                "createdAt": _iso(rec.created_at),
            }
        )
    events = (
        AuditEvent.objects.filter(project=project)
        .exclude(note_ref="")
        .filter(note_ref__in=Note.objects.filter(project=project).values("pk"))
        .order_by("id")
    )
    for event in events.iterator(1000):
        counts["event"] += 1
        yield _dump(
            {
                "type": "event",
                "id": event.pk,
                "noteId": event.note_ref,
                "action": event.action,
                "actor": event.actor_label,
                "actorAgentId": event.actor_agent_id,
                "actorRunId": event.actor_run_id,
                "recoveryId": event.recovery_ref,
                "details": event.details,
                "at": _iso(event.created_at),
            }
        )
    yield _dump({"type": "end", "counts": counts})


# --- Import -----------------------------------------------------------------------------------


@dataclass
class ImportReport:
    project: str
    created_project: bool = False
    remapped: bool = False
    counts: dict[str, int] = field(default_factory=dict)  # inserted, by record type
    unchanged: dict[str, int] = field(default_factory=dict)  # already there, by record type


class ImportInvalid(Exception):
    """The file was refused before anything was written; `errors` is every bad line."""

    def __init__(self, errors: list[tuple[int, str]]):
        super().__init__(f"{len(errors)} bad line(s)")
        self.errors = errors


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def _remapped_id(old: str, project_slug: str) -> str:
    """A stable new id for `old` in project `project_slug`: the same file imported twice into
    the same project maps to the same ids, which is what keeps the import idempotent."""
    prefix = old.split("_", 1)[0]
    number = int.from_bytes(hashlib.sha256(f"{project_slug}\n{old}".encode()).digest()[:17])
    tail = "".join(_CROCKFORD[(number >> (5 * i)) & 31] for i in range(26))
    return f"{prefix}_{tail}"


def _parse(lines: Iterable[str]) -> tuple[list[tuple[int, BaseModel]], list[tuple[int, str]]]:
    records: list[tuple[int, BaseModel]] = []
    errors: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            errors.append((number, f"not JSON: {exc.msg}"))
            continue
        try:
            records.append((number, LINE.validate_python(data)))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'][1:]) or 'type'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            errors.append((number, problems))
    return records, errors


def _check(records: list[tuple[int, BaseModel]], errors: list[tuple[int, str]]) -> None:
    """Whole-file rules: the header first, one project, references inside the file, the
    limits and the secret scan of the write protocol."""
    if not records or not isinstance(records[0][1], HeaderLine):
        errors.append((records[0][0] if records else 1, "the first line must be the header"))
    apps = {r.slug for _, r in records if isinstance(r, ApplicationLine)}
    agents = {r.id for _, r in records if isinstance(r, AgentLine)}
    notes = {r.id for _, r in records if isinstance(r, NoteLine)}
    ends = [r for _, r in records if isinstance(r, EndLine)]
    singles = (HeaderLine, ProjectLine, SettingLine, EndLine)
    for kind in singles:
        found = [n for n, r in records if isinstance(r, kind)]
        if len(found) != 1:
            name = kind.model_fields["type"].annotation.__args__[0]
            errors.append((found[1] if len(found) > 1 else 0, f"exactly one {name} line needed"))
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    if len(notes) > cap:
        errors.append((0, f"{len(notes)} notes: more than the {cap} a project stores"))
    for number, r in records:
        if isinstance(r, AgentLine) and r.application and r.application not in apps:
            errors.append((number, f"application {r.application} is not in the file"))
        elif isinstance(r, NoteLine):
            errors.extend((number, m) for m in _note_problems(r, apps, agents, notes))
        elif isinstance(r, RecoveryLine | EventLine) and r.noteId not in notes:
            errors.append((number, f"note {r.noteId} is not in the file"))
    if ends:
        counted = {
            kind: sum(1 for _, r in records if getattr(r, "type", None) == kind)
            for kind in ends[0].counts
        }
        if counted != ends[0].counts:
            errors.append((0, f"the end line counts {ends[0].counts}, the file has {counted}"))


def _note_problems(r: NoteLine, apps: set, agents: set, notes: set) -> list[str]:
    problems = []
    if (r.scope == Scope.APPLICATION) != (r.application is not None):
        problems.append("application is set exactly for scope application")
    elif r.application and r.application not in apps:
        problems.append(f"application {r.application} is not in the file")
    if (r.scope == Scope.AGENT) != (r.ownerAgentId is not None):
        problems.append("ownerAgentId is set exactly for scope agent")
    elif r.ownerAgentId and r.ownerAgentId not in agents:
        problems.append(f"agent {r.ownerAgentId} is not in the file")
    if (r.target == Target.DAILY) != (r.day is not None) or (
        r.kind == Kind.DAY and r.target != Target.DAILY
    ):
        problems.append("day is set exactly for target daily; kind day is daily")
    limit = DAY_ROW_MAX if r.kind == Kind.DAY else FACT_MAX if r.scope == "agent" else CONTENT_MAX
    if len(r.content) > limit:
        problems.append(f"content is longer than {limit} characters")
    for ref in (r.supersedesId, r.supersededById):
        if ref and ref not in notes:
            problems.append(f"note {ref} is not in the file")
    try:
        check_no_secret(content=r.content, summary=r.summary, archiveReason=r.archiveReason)
    except MemoryPortalError as err:
        problems.append(err.message)
    return problems


def project_import(
    *, actor: Actor | None, lines: Iterable[str], project_slug: str | None = None
) -> ImportReport:
    """Import an export: the whole file is validated first (ImportInvalid lists every bad
    line; nothing is written), then one transaction under the project's lock inserts what is
    not there yet — importing the same file twice changes nothing. Into the project the file
    names, ids are kept; into another (`project_slug`), every id is remapped, stably. Users
    are matched by username (none: left empty); repositories by slug; runs are not part of
    the format, so the notes keep their run ids as text (producer status `unknown`).
    Superusers only (`actor=None` is the operator running the command)."""
    if actor is not None and not is_administrator(actor):
        raise MemoryPortalError("memory_forbidden", "Only an administrator imports a project.")
    records, errors = _parse(lines)
    _check(records, errors)
    if errors:
        raise ImportInvalid(sorted(errors))
    header = next(r for _, r in records if isinstance(r, HeaderLine))
    slug = project_slug or header.project
    remap = slug != header.project

    def new_id(old: str | None) -> str | None:
        return _remapped_id(old, slug) if remap and old else old

    report = ImportReport(project=slug, remapped=remap)
    by_type: dict[type, list] = {}
    for _, r in records:
        by_type.setdefault(type(r), []).append(r)
    from .services._common import audit, bump, lock_setting
    from .services.vectors import embed_texts, note_text

    # The notes' vectors, computed before the transaction (never under the project's lock).
    texts = list(
        dict.fromkeys(
            note_text(n.summary, n.content) for n in by_type.get(NoteLine, []) if n.kind != Kind.DAY
        )
    )
    blobs, provider = embed_texts(texts)
    vectors = {t: b for t, b in zip(texts, blobs, strict=True) if b is not None}

    with transaction.atomic():
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            source = by_type[ProjectLine][0]
            project = Project.objects.create(
                slug=slug, name=source.name, created_at=source.createdAt
            )
            MemorySetting.objects.create(project=project, enabled=by_type[SettingLine][0].enabled)
            report.created_project = True
        setting = lock_setting(project)
        _import_rows(project, by_type, new_id, report, vectors=(vectors, provider))
        if sum(report.counts.values()):
            bump(
                setting,
                wrote_note=bool(report.counts.get("note")),
                **counters.recounted(project.pk),
            )
        audit(
            actor=actor,
            action=AuditAction.MEMORY_IMPORT,
            project=project,
            target=slug,
            details={
                "from_project": header.project,
                "format_version": header.version,
                "remapped": remap,
                "created_project": report.created_project,
                "inserted": report.counts,
                "unchanged": report.unchanged,
            },
        )
    return report


def _count(report: ImportReport, kind: str, inserted: bool) -> None:
    bucket = report.counts if inserted else report.unchanged
    bucket[kind] = bucket.get(kind, 0) + 1


def _import_rows(
    project: Project,
    by_type: dict,
    new_id,
    report: ImportReport,
    *,
    vectors: tuple[dict[str, bytes], str] = ({}, ""),
) -> None:
    from .services.vectors import note_text

    User = get_user_model()
    users = dict(User.objects.values_list(User.USERNAME_FIELD, "pk"))
    repositories = dict(Repository.objects.values_list("slug", "pk"))
    apps = {}
    for line in by_type.get(ApplicationLine, []):
        app, created = Application.objects.get_or_create(
            project=project,
            slug=line.slug,
            defaults={"name": line.name, "created_at": line.createdAt},
        )
        apps[line.slug] = app.pk
        _count(report, "application", created)
    for line in by_type.get(AgentLine, []):
        agent_id = new_id(line.id)
        existing = Agent.objects.filter(pk=agent_id).first()
        if existing is not None and existing.project_id != project.pk:
            raise MemoryPortalError(
                "memory_invalid",
                f"Agent {agent_id} belongs to another project.",
                field="agent",
                hint="Import into a new project with --project to remap the ids.",
            )
        if existing is None:
            Agent.objects.create(
                id=agent_id,
                project=project,
                application_id=apps.get(line.application),
                name=line.name,
                stage=line.stage,
                created_at=line.createdAt,
            )
        _count(report, "agent", existing is None)
    notes = by_type.get(NoteLine, [])
    note_ids = [new_id(n.id) for n in notes]
    present = dict(Note.objects.filter(pk__in=note_ids).values_list("pk", "project_id"))
    if any(p != project.pk for p in present.values()):
        raise MemoryPortalError(
            "memory_invalid",
            "Some notes of the file belong to another project.",
            field="note",
            hint="Import into a new project with --project to remap the ids.",
        )
    fresh = [n for n, i in zip(notes, note_ids, strict=True) if i not in present]
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    stored = Note.objects.filter(project=project).count()
    if stored + len(fresh) > cap:
        raise MemoryPortalError(
            "memory_project_full",
            f"{project.slug} stores {stored} notes; {len(fresh)} more exceed its {cap}.",
        )
    rows = []
    for line in fresh:
        note = Note(
            id=new_id(line.id),
            project=project,
            application_id=apps.get(line.application),
            scope=line.scope,
            owner_agent_id=new_id(line.ownerAgentId),
            kind=line.kind,
            target=line.target,
            day=line.day,
            content=line.content,
            summary=line.summary,
            tags_text=f"|{'|'.join(line.tags)}|" if line.tags else "",
            trust=line.trust,
            status=line.status,
            archive_reason=line.archiveReason,
            archived_at=line.archivedAt,
            vetoed_by_id=users.get(line.vetoedBy),
            expires_at=line.expiresAt,
            created_by_agent_id=line.provenance.createdByAgentId,
            created_by_stage=line.provenance.createdByStage,
            created_by_user_id=users.get(line.provenance.createdByUser),
            origin_run_ref=line.provenance.originRunId,
            top_level_run_id=line.provenance.topLevelRunId,
            step=line.provenance.step,
            task_key=line.provenance.taskKey,
            recall_count=line.recallCount,
            last_recalled_at=line.lastRecalledAt,
            created_at=line.createdAt,
            updated_at=line.updatedAt,
        )
        if line.evidence is not None:
            note.evidence_repository_id = repositories.get(line.evidence.repository)
            note.evidence_path = line.evidence.path
            note.evidence_commit = line.evidence.commit
            note.evidence_quote = line.evidence.quote
        stamp_identity(note)
        if note.kind == Kind.DAY:
            note.content_hash = day_row_identity(owner_agent_id=note.owner_agent_id, day=note.day)
        note.embedding = vectors[0].get(note_text(note.summary, note.content))
        note.embedding_model = vectors[1] if note.embedding is not None else ""
        rows.append(note)
    _refuse_clashes(project, rows)
    Note.objects.bulk_create(rows, batch_size=500)
    for line in fresh:
        if line.supersedesId or line.supersededById:
            Note.objects.filter(pk=new_id(line.id)).update(
                supersedes_id=new_id(line.supersedesId),
                superseded_by_id=new_id(line.supersededById),
            )
    report.counts["note"] = len(rows)
    report.unchanged["note"] = len(notes) - len(rows)
    fresh_ids = {n.pk for n in rows}
    for line in by_type.get(RecoveryLine, []):
        rec_id = new_id(line.id)
        inserted = not Recovery.objects.filter(
            Q(pk=rec_id) | Q(note_id=new_id(line.noteId))
        ).exists()
        if inserted:
            Recovery.objects.create(
                id=rec_id,
                project=project,
                note_id=new_id(line.noteId),
                previous_status=line.previousStatus,
                forgotten_by_user_id=users.get(line.forgottenByUser),
                forgotten_by_agent_id=line.forgottenByAgentId,
                forgotten_by_run_id=line.forgottenByRunId,
                forgotten_by_top_level_run_id=line.forgottenByTopLevelRunId,
                created_at=line.createdAt,
            )
        _count(report, "recovery", inserted)
    # A note's history comes with it the first time only (events have no public id).
    events = [
        AuditEvent(
            project=project,
            project_ref=project.slug,
            actor_label=line.actor,
            actor_agent_id=line.actorAgentId,
            actor_run_id=line.actorRunId,
            action=line.action,
            note_ref=new_id(line.noteId),
            recovery_ref=new_id(line.recoveryId) or "",
            details={**line.details, "imported_event": line.id},
            created_at=line.at,
        )
        for line in by_type.get(EventLine, [])
        if new_id(line.noteId) in fresh_ids
    ]
    AuditEvent.objects.bulk_create(events, batch_size=1000)
    report.counts["event"] = len(events)


def _refuse_clashes(project: Project, rows: list[Note]) -> None:
    """Imported notes meet the project's own rules: no second live copy of a note, and no
    content a person vetoed, rejected or forgot here comes back live."""
    if not rows:
        return
    active = [n for n in rows if n.status == Status.ACTIVE]
    clash = (
        Note.objects.filter(project=project, status=Status.ACTIVE)
        .filter(content_hash__in=[n.content_hash for n in active])
        .values_list("pk", flat=True)
        .first()
    )
    if clash is not None:
        raise MemoryPortalError(
            "memory_duplicate_active", f"A note of the file is already live here as {clash}."
        )
    refused = (
        Note.objects.filter(project=project, content_key__in=[n.content_key for n in active])
        .filter(
            Q(status=Status.FORGOTTEN)
            | Q(trust=Trust.REJECTED)
            | Q(status=Status.ARCHIVED, archive_reason=REASON_VETOED)
        )
        .values_list("pk", flat=True)
        .first()
    )
    if refused is not None:
        raise MemoryPortalError(
            "memory_vetoed",
            f"A live note of the file has content a person removed here ({refused}).",
        )
