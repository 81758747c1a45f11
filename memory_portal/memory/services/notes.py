"""Note services: write (the reliability protocol of SPEC §2.4), v1 fact saves and day logs,
supersede and edit, review, archive / veto / undo, forget / restore, evidence re-verify."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from .. import counters, fastsql
from .. import evidence as evidence_checks
from ..access import (
    actor_role,
    check_agent_gate,
    request_setting,
    require_manager,
    require_member,
    require_person,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import (
    REASON_EXPIRED,
    REASON_SUPERSEDED,
    REASON_VETOED,
    Agent,
    Application,
    Kind,
    MemorySetting,
    Note,
    Project,
    Recovery,
    RepositoryLink,
    Role,
    Scope,
    Status,
    Target,
    Trust,
    is_expired,
)
from ..selectors import (
    agent_for_memories,
    note_by_id_q,
    note_get,
    note_not_found,
    recoveries_for_actor,
    setting_get,
)
from ..validation import (
    ARCHIVE_REASON_MAX,
    CONTENT_MAX,
    DAY_LINE_MAX,
    DAY_ROW_MAX,
    FACT_MAX,
    check_no_secret,
    check_payload_size,
    day_row_identity,
    future_expiry,
    normalize_tags,
    optional_summary,
    require_text,
    stamp_identity,
    tags_to_text,
)
from ._common import audit, audit_event, bump, lock_setting, save_note_change
from .schedule import routine_ensure
from .trace import call_taken, call_to_take, call_unsettle
from .vectors import stamp_vector

TOOL_KINDS = {Kind.FACT, Kind.LESSON, Kind.DECISION, Kind.NAVIGATION}
TOOL_SCOPES = {Scope.PROJECT, Scope.APPLICATION}
RESERVED_REASONS = {REASON_VETOED, REASON_SUPERSEDED, REASON_EXPIRED}


@dataclass(frozen=True)
class WriteResult:
    note: Note
    created: bool


def _today() -> date:
    return timezone.now().date()


# --- The write protocol ---------------------------------------------------------------------


def _provenance(actor: Actor, note: Note) -> None:
    if actor.is_agent:
        run = actor.run
        note.created_by_agent_id = run.agent_id
        note.created_by_stage = run.agent.stage
        note.origin_run = run
        note.origin_run_ref = run.pk
        note.top_level_run_id = run.top_level_run_id
        note.task_key = run.task_key
        note.step = run.current_step  # the step the orchestrator last reported
    else:
        note.created_by_user = actor.user


def _refuse_resurrection(same: list[fastsql.SameContent]) -> str | None:
    """Under the lock: the id of an identical active note in the same place (an idempotent
    write returns it); content that was forgotten, rejected or vetoed anywhere in the project,
    in any kind, place or route, is refused — a write never brings it back (SPEC §2.3)."""
    active = next((row for row in same if row.same_place and row.status == Status.ACTIVE), None)
    if active is not None and active.trust != Trust.REJECTED:
        return active.id
    hint = "A person decided against this content; write something else."
    for row in same:
        if row.status == Status.FORGOTTEN:
            raise MemoryPortalError(
                "memory_forgotten",
                f"The same content was forgotten ({row.id}).",
                hint="A manager can restore it from Recoveries; do not write it again.",
            )
    for row in same:
        if row.trust == Trust.REJECTED:
            raise MemoryPortalError(
                "memory_rejected",
                f"The same content was rejected by a manager ({row.id}).",
                hint=hint,
            )
    for row in same:
        if row.status == Status.ARCHIVED and row.archive_reason == REASON_VETOED:
            raise MemoryPortalError(
                "memory_vetoed", f"The same content was vetoed ({row.id}).", hint=hint
            )
    return None


def _check_caps(actor: Actor, project: Project, check: fastsql.WriteCheck) -> None:
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    if check.total >= cap:
        raise MemoryPortalError(
            "memory_project_full", f"Project {project.slug} stores {cap} notes, its limit."
        )
    quota = settings.MEMORY_PORTAL["RUN_NOTE_QUOTA"]
    if actor.is_agent and check.by_run >= quota:
        raise MemoryPortalError(
            "memory_run_quota",
            f"Run {actor.run.top_level_run_id} already wrote {quota} new notes.",
        )


def _write_check(
    actor: Actor, project: Project, note: Note, call: fastsql.CallToTake | None = None
) -> fastsql.WriteCheck:
    top = actor.run.top_level_run_id if actor.is_agent else ""
    return fastsql.write_check(project.pk, note.content_hash, note.content_key, top, call)


def _current_setting(actor: Actor, project: Project):
    """The switch and epoch as they are now, read outside the lock (step 1 of the protocol):
    as this request's token check read them, or read now."""
    return (
        request_setting(actor, project)
        or fastsql.read_setting_row(project.pk)
        or setting_get(project=project)
    )


def _check_epoch(setting: MemorySetting, epoch: int) -> None:
    if setting.revocation_epoch != epoch:
        raise MemoryPortalError(
            "memory_write_revoked",
            "Memory was disabled or reset while this write was being checked.",
            hint="Check memory_status, then send the write again.",
        )


def _insert(
    *,
    actor: Actor,
    project: Project,
    epoch: int,
    note: Note,
    supersede_id: str | None = None,
    action: AuditAction = AuditAction.NOTE_WRITE,
    start_review_of: Agent | None = None,
) -> WriteResult:
    """Step 2 of the protocol, retried once when a concurrent identical insert wins the
    unique constraint (step 3): the retry then finds that note and returns its id. A new
    note of `start_review_of` starts that agent's daily review in the same transaction."""
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                existing_id = _insert_locked(
                    actor=actor,
                    project=project,
                    epoch=epoch,
                    note=note,
                    supersede_id=supersede_id,
                    action=action,
                )
                if existing_id is not None:
                    transaction.set_rollback(True)  # undo the revision bump: nothing changed
                    call_unsettle()  # and the API call taken with it
                elif start_review_of is not None:
                    routine_ensure(actor=actor, agent=start_review_of)
        except BaseException as exc:
            call_unsettle()  # the API call's budget and trace row rolled back too
            if not isinstance(exc, IntegrityError) or attempt == 2:
                raise
            note = _fresh_copy(note)
            continue
        if existing_id is not None:
            return WriteResult(Note.objects.get(pk=existing_id), created=False)
        return WriteResult(note, created=True)
    raise AssertionError("unreachable")


def _insert_locked(
    *,
    actor: Actor,
    project: Project,
    epoch: int,
    note: Note,
    supersede_id: str | None,
    action: AuditAction,
) -> str | None:
    """Under the setting-row lock, on hand-built SQL (memory/fastsql.py): the epoch, the gate,
    idempotency and never-resurrect, both caps, then the insert and its audit event. Returns
    the id of an identical live note instead of inserting, when there is one."""
    now = timezone.now()
    counted = counters.moved(None, note)  # the new note, counted with the lock's bump
    setting = fastsql.lock_and_bump(project.pk, now=now, counted=counted)
    if setting is None:  # a project made before its setting row: make the row first
        lock_setting(project)
        setting = fastsql.lock_and_bump(project.pk, now=now, counted=counted)
    _check_epoch(setting, epoch)
    check_agent_gate(actor, setting, write=True)
    call = call_to_take()  # the API call that makes this write: its budget and trace row
    check = _write_check(actor, project, note, call)
    if call is not None:
        call_taken(check.calls_used)
    existing_id = _refuse_resurrection(check.same)
    old = _lock_superseded(actor, project, supersede_id, note) if supersede_id else None
    if existing_id is not None:
        if old is not None:
            raise MemoryPortalError(
                "memory_duplicate_active",
                f"The replacement text is already live as {existing_id}.",
            )
        return existing_id
    _check_caps(actor, project, check)
    note.created_at = note.updated_at = now
    details = {"kind": note.kind, "scope": note.scope, "target": note.target}
    if old is not None:
        note.supersedes = old
        details["supersedes"] = old.pk
    event = audit_event(actor=actor, action=action, project=project, note=note, details=details)
    fastsql.insert_pair(note, event)
    if old is not None:
        archived = counters.moved(counters.state_of(old), (Status.ARCHIVED, old.trust))
        old.status = Status.ARCHIVED
        old.archive_reason = REASON_SUPERSEDED
        old.archived_at = now
        old.superseded_by = note
        _save(old, "status", "archive_reason", "archived_at", "superseded_by")
        counters.apply(setting.id, archived)
    return None


def _fresh_copy(note: Note) -> Note:
    """The unsaved note again, with a new id, for the retry after a lost race."""
    from ..ids import new_note_id

    note.pk = new_note_id()
    note._state.adding = True
    return note


def _lock_superseded(actor: Actor, project: Project, note_id: str, new: Note) -> Note:
    """The one supersede rule (SPEC §2.3), for every caller and route, under the lock: the old
    note is one the caller can see, in the same place as its replacement (in v1: a fact of
    the same agent, never a shared note), live, not a day log; a reviewed or rejected note is
    replaced only by a manager. Superseding never does what the caller could not do
    directly."""
    old = Note.objects.select_for_update().filter(pk=note_id, project=project).first()
    if old is None or old.status == Status.FORGOTTEN:
        raise note_not_found(note_id)
    if old.kind == Kind.DAY:
        raise MemoryPortalError("memory_day_append_only", "A day log cannot be superseded.")
    same_place = (
        old.scope == new.scope
        and old.owner_agent_id == new.owner_agent_id
        and old.application_id == new.application_id
    )
    if not same_place:
        if new.scope == Scope.AGENT and old.scope != Scope.AGENT:
            message = f"{note_id} is a shared note; v1 supersedes an agent's own facts only."
            hint = "Correct a shared note with memory_forget and a new memory_write."
        else:
            message = f"{note_id} is not a fact of {new.owner_agent_id}; supersede its own."
            hint = "Name the agent whose fact this is, or save a new fact."
        raise MemoryPortalError("memory_agent_mismatch", message, hint=hint)
    note_get(actor=actor, note_id=note_id)  # and one the caller may see (not found otherwise)
    if old.status != Status.ACTIVE:
        raise MemoryPortalError(
            "memory_supersede_archived",
            f"{note_id} is {old.archive_reason or old.status}; only a live note is superseded.",
        )
    if old.trust != Trust.LEARNED and not _is_manager(actor, project):
        raise MemoryPortalError(
            "memory_trust_locked",
            f"{note_id} is {old.trust}; only a project manager can replace it.",
            hint="Ask a project manager, or save a new memory beside it.",
        )
    return old


def _is_manager(actor: Actor, project: Project) -> bool:
    return actor.is_person and actor_role(actor, project) == Role.MANAGER


def _resolve_evidence(
    *, application: Application | None, evidence: dict | None
) -> tuple[RepositoryLink | None, evidence_checks.VerifiedEvidence | None]:
    if evidence is None:
        return None, None
    if not isinstance(evidence, dict):
        raise invalid("evidence", "evidence must be an object {repositoryId, path, quote?}.")
    unknown = set(evidence) - {"repositoryId", "path", "quote"}
    if unknown:
        raise invalid(f"evidence.{sorted(unknown)[0]}", "Unknown evidence field.")
    repo_ref = evidence.get("repositoryId")
    path = evidence.get("path")
    quote = evidence.get("quote")
    if not isinstance(repo_ref, str) or not repo_ref:
        raise invalid("evidence.repositoryId", "evidence.repositoryId is required.")
    if not isinstance(path, str) or not path:
        raise invalid("evidence.path", "evidence.path is required.")
    if quote is not None and not isinstance(quote, str):
        raise invalid("evidence.quote", "evidence.quote must be a string.")
    if application is None:
        raise MemoryPortalError(
            "memory_evidence_invalid",
            "Evidence needs an application context with linked repositories.",
            field="evidence.repositoryId",
            reason="repository_not_linked",
        )
    link = (
        RepositoryLink.objects.filter(application=application, repository__slug=repo_ref)
        .select_related("repository")
        .first()
    )
    if link is None:
        raise MemoryPortalError(
            "memory_evidence_invalid",
            f"Repository {repo_ref} is not linked to application {application.slug}.",
            field="evidence.repositoryId",
            reason="repository_not_linked",
            hint="Cite a repository linked to your application.",
        )
    verified = evidence_checks.verify_evidence(
        repo_path=link.repository.path, revision=link.revision, path=path, quote=quote
    )
    return link, verified


def note_write(
    *,
    actor: Actor,
    kind: str,
    content: str,
    target: str = Target.LONG_TERM,
    scope: str = Scope.PROJECT,
    summary: str | None = None,
    tags: list[str] | None = None,
    day: date | None = None,
    evidence: dict | None = None,
    expires_at: datetime | None = None,
) -> WriteResult:
    """`memory_write`: save a learned note in the caller's project (agents, by their run)."""
    if not actor.is_agent:
        raise MemoryPortalError(
            "memory_tool_forbidden", "memory_write is an agent tool; people save through v1."
        )
    run = actor.run
    project = run.project
    # 1. Validate outside any lock; remember the epoch.
    setting = _current_setting(actor, project)
    check_agent_gate(actor, setting, write=True)
    epoch = setting.revocation_epoch
    if kind not in TOOL_KINDS:
        raise invalid("kind", "kind must be fact, lesson, decision or navigation.")
    if target not in Target.values:
        raise invalid("target", "target must be long_term or daily.")
    if scope not in TOOL_SCOPES:
        raise invalid("scope", "scope must be project or application.")
    if scope == Scope.APPLICATION and run.application_id is None:
        raise invalid("scope", "This run has no application; use scope project.")
    if target == Target.DAILY:
        day = day or _today()
        if day > _today():
            raise invalid("date", "A daily note's date cannot be in the future (UTC).")
    elif day is not None:
        raise invalid("date", "date applies to target daily only.")
    if expires_at is not None:
        expires_at = future_expiry(expires_at, now=timezone.now())
    text = require_text("content", content, max_len=CONTENT_MAX)
    summary_text = optional_summary(summary)
    tag_list = normalize_tags(tags)
    check_payload_size(content=text, summary=summary_text, tags=tag_list, evidence=evidence)
    check_no_secret(
        content=text,
        summary=summary_text,
        tags=" ".join(tag_list),
        **{"evidence.quote": (evidence or {}).get("quote") if isinstance(evidence, dict) else None},
    )
    application = run.application if run.application_id else None
    link, verified = _resolve_evidence(application=application, evidence=evidence)
    note = Note(
        project=project,
        application=application if scope == Scope.APPLICATION else None,
        scope=scope,
        kind=kind,
        target=target,
        day=day,
        content=text,
        summary=summary_text,
        tags_text=tags_to_text(tag_list),
        expires_at=expires_at,
    )
    stamp_identity(note)
    if verified is not None:
        note.evidence_repository = link.repository
        note.evidence_path = verified.path
        note.evidence_commit = verified.commit
        note.evidence_quote = verified.quote
    _provenance(actor, note)
    stamp_vector(note)  # before the transaction: never embed under the setting-row lock
    return _insert(actor=actor, project=project, epoch=epoch, note=note)


def fact_save(
    *,
    actor: Actor,
    text: str,
    agent_id: str | None = None,
    expires_at: datetime | None = None,
    supersedes: str | None = None,
) -> WriteResult:
    """`POST /api/v1/memories` and `memory save`: one private fact of an agent, by the agent or
    by a person naming it. Expires in 90 days unless `expires_at` says otherwise."""
    agent = agent_for_memories(actor=actor, agent_id=agent_id)
    project = agent.project
    setting = _current_setting(actor, project)
    check_agent_gate(actor, setting, write=True)
    epoch = setting.revocation_epoch
    fact = require_text("text", text, max_len=FACT_MAX, too_long_code="memory_text_too_long")
    check_no_secret(text=fact)
    now = timezone.now()
    if expires_at is None:
        expires_at = now + timedelta(days=settings.MEMORY_PORTAL["FACT_DEFAULT_EXPIRY_DAYS"])
    else:
        expires_at = future_expiry(expires_at, now=now)
    note = _agent_fact(agent, fact, expires_at)
    _provenance(actor, note)
    stamp_vector(note)  # before the transaction: never embed under the setting-row lock
    return _insert(
        actor=actor,
        project=project,
        epoch=epoch,
        note=note,
        supersede_id=supersedes,
        action=AuditAction.NOTE_SUPERSEDE if supersedes else AuditAction.NOTE_SAVE,
        start_review_of=agent,  # the first save starts the daily review
    )


def _agent_fact(agent: Agent, text: str, expires_at: datetime | None) -> Note:
    note = Note(
        project=agent.project,
        application=None,
        scope=Scope.AGENT,
        owner_agent=agent,
        kind=Kind.FACT,
        target=Target.LONG_TERM,
        content=text,
        expires_at=expires_at,
    )
    stamp_identity(note)
    return note


def note_edit(
    *, actor: Actor, note_id: str, content: str, project: Project | None = None
) -> WriteResult:
    """A person's edit: a new note replaces the old one, which is archived as superseded. The
    new note keeps the old one's place (kind, scope, owner, target) and names the editor.
    `project`, when given, is where the note must be (the dashboard's URL)."""
    require_person(actor, what="an edit")
    old = note_get(actor=actor, note_id=note_id, project=project)
    require_member(actor, old.project)
    if old.kind == Kind.DAY:
        raise MemoryPortalError("memory_day_append_only", "A day log cannot be edited.")
    limit = FACT_MAX if old.scope == Scope.AGENT else CONTENT_MAX
    code = "memory_text_too_long" if old.scope == Scope.AGENT else None
    text = require_text("content", content, max_len=limit, too_long_code=code)
    check_no_secret(content=text)
    setting = _current_setting(actor, old.project)
    note = Note(
        project=old.project,
        application=old.application,
        scope=old.scope,
        owner_agent=old.owner_agent,
        kind=old.kind,
        target=old.target,
        day=old.day,
        content=text,
        summary=old.summary,
        tags_text=old.tags_text,
        expires_at=old.expires_at,
    )
    stamp_identity(note)
    _provenance(actor, note)
    stamp_vector(note)  # before the transaction: never embed under the setting-row lock
    return _insert(
        actor=actor,
        project=old.project,
        epoch=setting.revocation_epoch,
        note=note,
        supersede_id=old.pk,
        action=AuditAction.NOTE_EDIT,
    )


def day_append(*, actor: Actor, line: str) -> Note:
    """`memory day`: append `HH:MM TASK-KEY line` to the agent's live day row for today (UTC),
    creating the row with the first line."""
    if not actor.is_agent:
        raise MemoryPortalError("memory_day_agent_only", "Only an agent keeps a day log.")
    run = actor.run
    agent = run.agent
    project = run.project
    setting = _current_setting(actor, project)
    check_agent_gate(actor, setting, write=True)
    epoch = setting.revocation_epoch
    text = require_text("line", line, max_len=DAY_LINE_MAX, too_long_code="memory_text_too_long")
    if "\n" in text:
        raise invalid("line", "A day line is one line.", hint="Send each line separately.")
    check_no_secret(line=text)
    now = timezone.now()
    today = now.date()
    stamped = " ".join(part for part in (now.strftime("%H:%M"), run.task_key, text) if part)
    with transaction.atomic():
        setting = lock_setting(project)
        _check_epoch(setting, epoch)
        check_agent_gate(actor, setting, write=True)
        row = (
            Note.objects.select_for_update()
            .filter(owner_agent=agent, kind=Kind.DAY, day=today, status=Status.ACTIVE)
            .first()
        )
        if row is not None:
            content = row.content + "\n" + stamped
            if len(content) > DAY_ROW_MAX:
                raise MemoryPortalError(
                    "memory_day_full", f"Today's day log would exceed {DAY_ROW_MAX} characters."
                )
            row.content = content
            row.updated_at = now
            stamp_identity(row)
            row.save(update_fields=["content", "content_key", "updated_at"])
            action = AuditAction.DAY_APPEND
        else:
            row = Note(
                project=project,
                scope=Scope.AGENT,
                owner_agent=agent,
                kind=Kind.DAY,
                target=Target.DAILY,
                day=today,
                content=stamped,
                content_hash=day_row_identity(owner_agent_id=agent.pk, day=today),
                created_at=now,
                updated_at=now,
            )
            stamp_identity(row)
            _check_caps(actor, project, _write_check(actor, project, row))
            _provenance(actor, row)
            row.save(force_insert=True)
            action = AuditAction.DAY_CREATE
        created = action == AuditAction.DAY_CREATE
        bump(setting, wrote_note=True, counted=counters.moved(None, row) if created else None)
        audit(actor=actor, action=action, project=project, note=row, details={"day": str(today)})
        if action == AuditAction.DAY_CREATE:
            routine_ensure(actor=actor, agent=agent)  # the day log feeds the daily review too
    return row


# --- Changes to an existing note ------------------------------------------------------------


def _live_twin() -> Subquery:
    """Another active note of the project with the same content hash (read with the note)."""
    twins = Note.objects.filter(
        project_id=OuterRef("project_id"),
        content_hash=OuterRef("content_hash"),
        status=Status.ACTIVE,
    ).exclude(pk=OuterRef("pk"))
    return Subquery(twins.values("pk")[:1])


def _locked_note(
    actor: Actor, note_id: str, project: Project | None = None
) -> tuple[Note, MemorySetting]:
    """Load and authorise once: find the note as the actor sees it, lock the project's setting
    row, and read the note under the lock, so every rule below judges the current state. With
    `project` (the caller knows it, as the dashboard's URL does) the note is read only under
    the lock, and must be of that project."""
    if project is None:
        project = note_get(actor=actor, note_id=note_id).project
        by_id = Q(pk=note_id)
    else:
        by_id = note_by_id_q(actor=actor, project=project, note_id=note_id)
    setting = lock_setting(project)
    note = Note.objects.select_for_update().filter(by_id).annotate(live_twin_id=_live_twin())
    note = note.first()
    if note is None:
        raise note_not_found(note_id)
    note.project = project
    return note, setting


def _require_own(actor: Actor, note: Note) -> None:
    if actor.is_agent:
        agent_id = actor.run.agent_id
        if note.owner_agent_id != agent_id and note.created_by_agent_id != agent_id:
            raise MemoryPortalError("memory_not_own", f"{note.pk} is another agent's memory.")


def _save(note: Note, *fields: str) -> None:
    note.updated_at = timezone.now()
    note.save(update_fields=[*fields, "updated_at"])


def _set_trust(
    actor: Actor, note_id: str, project: Project | None, trust: str, action: AuditAction
) -> Note:
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id, project)
        require_manager(actor, note.project)
        if note.trust == trust:
            return note
        previous = note.trust
        note.trust = trust
        _save(note, "trust")
        bump(setting, counted=counters.moved((note.status, previous), note))
        audit(
            actor=actor,
            action=action,
            project=note.project,
            note=note,
            details={"from": previous, "to": trust},
        )
    return note


def note_approve(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Mark reviewed (API word: approved). Managers only; persistence is unchanged."""
    return _set_trust(actor, note_id, project, Trust.REVIEWED, AuditAction.NOTE_APPROVE)


def note_reject(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Reject: never served to agents again in lists, search or recall."""
    return _set_trust(actor, note_id, project, Trust.REJECTED, AuditAction.NOTE_REJECT)


def note_archive(
    *, actor: Actor, note_id: str, reason: str, project: Project | None = None
) -> Note:
    """Archive with a reason: the owning agent (its own notes) or a person."""
    text = require_text("reason", reason, max_len=ARCHIVE_REASON_MAX)
    if text.lower() in RESERVED_REASONS:
        raise invalid("reason", f"The reason {text!r} is set by Memory Portal itself.")
    check_no_secret(reason=text)
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id, project)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status == Status.FORGOTTEN:
            raise invalid("id", f"{note.pk} is forgotten; restore it first.")
        if note.status == Status.ARCHIVED:
            return note
        before = counters.state_of(note)
        note.status = Status.ARCHIVED
        note.archive_reason = text
        note.archived_at = timezone.now()
        _save(note, "status", "archive_reason", "archived_at")
        bump(setting, counted=counters.moved(before, note))
        audit(actor=actor, action=AuditAction.NOTE_ARCHIVE, project=note.project, note=note)
    return note


def _unarchive(*, actor: Actor, note_id: str, action: AuditAction, project: Project | None) -> Note:
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id, project)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status == Status.ACTIVE:
            return note
        if note.status == Status.FORGOTTEN:
            raise invalid("id", f"{note.pk} is forgotten; restore it with its recoveryId.")
        if note.superseded_by_id or note.archive_reason == REASON_SUPERSEDED:
            raise MemoryPortalError(
                "memory_superseded",
                f"{note.pk} was replaced by {note.superseded_by_id or 'a newer memory'}.",
            )
        if note.is_vetoed and actor.is_agent:
            raise MemoryPortalError(
                "memory_veto_human_only", f"{note.pk} was vetoed; only a person can undo that."
            )
        _check_unique_live(note)
        was_vetoed = note.is_vetoed
        before = counters.state_of(note)
        note.status = Status.ACTIVE
        note.archive_reason = ""
        note.archived_at = None
        note.vetoed_by = None
        _save(note, "status", "archive_reason", "archived_at", "vetoed_by")
        bump(setting, counted=counters.moved(before, note))
        audit(
            actor=actor,
            action=action,
            project=note.project,
            note=note,
            details={"was_vetoed": was_vetoed},
        )
    return note


def _check_unique_live(note: Note) -> None:
    """`note` was read under the lock with `_live_twin()` as `live_twin_id`."""
    twin = note.live_twin_id
    if twin is None:
        return
    if note.kind == Kind.DAY:
        raise MemoryPortalError(
            "memory_day_exists", f"The day log of {note.day} is already live ({twin})."
        )
    raise MemoryPortalError(
        "memory_duplicate_active", f"The same content is already live as {twin}."
    )


def note_unarchive(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Bring an archived note back: never a superseded one; a vetoed one only by a person."""
    return _unarchive(
        actor=actor, note_id=note_id, action=AuditAction.NOTE_UNARCHIVE, project=project
    )


def note_veto(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """A person's one-click veto: archive with reason `vetoed`, recording who."""
    require_person(actor, code="memory_veto_human_only", what="a veto")
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id, project)
        if note.is_vetoed:
            return note
        if note.status != Status.ACTIVE:
            raise invalid(
                "id", f"{note.pk} is not live ({note.status}); only live notes are vetoed."
            )
        before = counters.state_of(note)
        note.status = Status.ARCHIVED
        note.archive_reason = REASON_VETOED
        note.archived_at = timezone.now()
        note.vetoed_by = actor.user
        _save(note, "status", "archive_reason", "archived_at", "vetoed_by")
        bump(setting, counted=counters.moved(before, note))
        audit(actor=actor, action=AuditAction.NOTE_VETO, project=note.project, note=note)
    return note


def note_undo(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Undo a veto (or any archive) — a person's unarchive."""
    require_person(actor, code="memory_veto_human_only", what="an undo")
    return _unarchive(actor=actor, note_id=note_id, action=AuditAction.NOTE_UNDO, project=project)


def note_forget(*, actor: Actor, note_id: str, project: Project | None = None) -> Recovery:
    """Hide a note and keep a recovery record. Agents forget learned notes in their reach;
    managers forget any note."""
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id, project)
        if actor.is_agent:
            check_agent_gate(actor, setting, write=True)
            if note.status != Status.ACTIVE:
                raise note_not_found(note_id)
            if note.trust != Trust.LEARNED:
                raise MemoryPortalError(
                    "memory_trust_locked", f"{note.pk} is {note.trust}; an agent cannot forget it."
                )
        else:
            require_manager(actor, note.project)
            if note.status == Status.FORGOTTEN:
                return note.recovery
        recovery = Recovery(
            project_id=note.project_id,
            note=note,
            previous_status=note.status,
        )
        if actor.is_agent:
            recovery.forgotten_by_agent_id = actor.run.agent_id
            recovery.forgotten_by_run_id = actor.run.pk
            recovery.forgotten_by_top_level_run_id = actor.run.top_level_run_id
        else:
            recovery.forgotten_by_user = actor.user
        recovery.save(force_insert=True)
        before = counters.state_of(note)
        note.status = Status.FORGOTTEN
        _save(note, "status")
        bump(setting, counted=counters.moved(before, note))
        audit(
            actor=actor,
            action=AuditAction.NOTE_FORGET,
            project=note.project,
            note=note,
            recovery_id=recovery.pk,
        )
    return recovery


def note_restore(*, actor: Actor, recovery_id: str) -> Note:
    """Bring a forgotten note back to the status it had, trust unchanged; the recovery record
    is consumed."""
    not_found = MemoryPortalError(
        "memory_recovery_not_found", f"No recovery {recovery_id} you can restore."
    )
    with transaction.atomic():
        recovery = Recovery.objects.select_related("note", "project").filter(pk=recovery_id).first()
        if recovery is None:
            raise not_found
        project = recovery.project
        if actor.is_agent:
            # The recoveries this agent may list (the visibility rule) are the ones it restores.
            if not recoveries_for_actor(actor=actor).filter(pk=recovery_id).exists():
                raise not_found
        else:
            if actor_role(actor, project) is None:
                raise not_found
            require_manager(actor, project)
        setting = lock_setting(project)
        if actor.is_agent:
            check_agent_gate(actor, setting, write=True)
        recovery = Recovery.objects.select_for_update().filter(pk=recovery_id).first()
        if recovery is None:
            raise not_found
        note = (
            Note.objects.select_for_update()
            .annotate(live_twin_id=_live_twin())
            .get(pk=recovery.note_id)
        )
        if recovery.previous_status == Status.ACTIVE:
            _check_unique_live(note)
        before = counters.state_of(note)
        note.status = recovery.previous_status
        _save(note, "status")
        recovery.delete()
        bump(setting, counted=counters.moved(before, note))
        audit(
            actor=actor,
            action=AuditAction.NOTE_RESTORE,
            project=project,
            note=note,
            recovery_id=recovery_id,
            details={"status": note.status},
        )
    return note


def note_reverify(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """Re-bind a stale evidence-bound note to the current pinned revision when its file (and
    quote) still match there."""
    require_person(actor, what="a re-verify")
    note = note_get(actor=actor, note_id=note_id, project=project)
    require_member(actor, note.project)
    if not note.evidence_commit or note.evidence_repository_id is None:
        raise MemoryPortalError(
            "memory_evidence_invalid",
            f"{note.pk} has no evidence to re-verify.",
            reason="no_evidence",
        )
    links = RepositoryLink.objects.filter(
        application__project_id=note.project_id, repository_id=note.evidence_repository_id
    ).select_related("repository")
    if note.application_id:
        links = links.filter(application_id=note.application_id)
    link = links.order_by("-updated_at").first()
    if link is None:
        raise MemoryPortalError(
            "memory_evidence_invalid",
            "The evidence repository is no longer linked in this project.",
            reason="repository_not_linked",
        )
    verified = evidence_checks.verify_evidence(
        repo_path=link.repository.path,
        revision=link.revision,
        path=note.evidence_path,
        quote=note.evidence_quote or None,
    )
    with transaction.atomic():
        setting = lock_setting(note.project)
        note = Note.objects.select_for_update().get(pk=note.pk)
        if note.evidence_commit == verified.commit:
            return note
        previous = note.evidence_commit
        note.evidence_commit = verified.commit
        _save(note, "evidence_commit")
        bump(setting)
        audit(
            actor=actor,
            action=AuditAction.NOTE_REVERIFY,
            project=note.project,
            note=note,
            details={"from": previous, "to": verified.commit},
        )
    return note


def notes_mark_recalled(
    *, project: Project, note_ids: list[str], now: datetime | None = None
) -> int:
    """Count a recall pick: bumps recall_count and last_recalled_at. Not a memory change, so
    the revision and fingerprint stay."""
    if not note_ids:
        return 0
    return Note.objects.filter(project=project, pk__in=note_ids).update(
        recall_count=F("recall_count") + 1, last_recalled_at=now or timezone.now()
    )


# --- The daily review's changes -----------------------------------------------------------


def note_merge(*, actor: Actor, note_id: str, into_id: str) -> Note:
    """Archive a duplicate fact as superseded by an existing live one of the same agent (the
    daily review's merge: the newest copy stays)."""
    with transaction.atomic():
        old, setting = _locked_note(actor, note_id)
        check_agent_gate(actor, setting, write=True)
        keeper = Note.objects.select_for_update().filter(pk=into_id, project=old.project).first()
        if keeper is None or keeper.status != Status.ACTIVE:
            raise note_not_found(into_id)
        if keeper.owner_agent_id != old.owner_agent_id or keeper.pk == old.pk:
            raise MemoryPortalError(
                "memory_agent_mismatch", "Only one agent's own facts can be merged."
            )
        if old.kind == Kind.DAY or keeper.kind == Kind.DAY:
            raise MemoryPortalError("memory_day_append_only", "Day logs are not merged.")
        if old.status != Status.ACTIVE:
            raise MemoryPortalError("memory_supersede_archived", f"{old.pk} is not live.")
        if old.trust != Trust.LEARNED and not _is_manager(actor, old.project):
            raise MemoryPortalError(
                "memory_trust_locked", f"{old.pk} is {old.trust}; only a manager retires it."
            )
        now = timezone.now()
        before = counters.state_of(old)
        old.status = Status.ARCHIVED
        old.archive_reason = REASON_SUPERSEDED
        old.archived_at = now
        old.superseded_by = keeper
        fields = ("status", "archive_reason", "archived_at", "superseded_by")
        save_note_change(
            actor,
            setting,
            old,
            fields,
            AuditAction.NOTE_MERGE,
            was=before,
            details={"into": keeper.pk},
        )
    return old


def note_renew(*, actor: Actor, note_id: str, expires_at: datetime) -> Note:
    """Push a fact's expiry forward (the daily review renews facts still being recalled)."""
    expires_at = future_expiry(expires_at, now=timezone.now())
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status != Status.ACTIVE:
            raise invalid("id", f"{note.pk} is not live.")
        previous = note.expires_at
        note.expires_at = expires_at
        _save(note, "expires_at")
        bump(setting)
        audit(
            actor=actor,
            action=AuditAction.NOTE_RENEW,
            project=note.project,
            note=note,
            details={
                "from": previous.isoformat() if previous else None,
                "to": expires_at.isoformat(),
            },
        )
    return note


def note_expire(*, actor: Actor, note_id: str, now: datetime | None = None) -> Note:
    """Archive an expired fact with reason `expired` (the daily review's clean-up). `now` is
    the review's clock."""
    now = now or timezone.now()
    with transaction.atomic():
        note, setting = _locked_note(actor, note_id)
        check_agent_gate(actor, setting, write=True)
        _require_own(actor, note)
        if note.status != Status.ACTIVE:
            return note
        if not is_expired(note.expires_at, now):
            raise invalid("id", f"{note.pk} has not expired.")
        before = counters.state_of(note)
        note.status = Status.ARCHIVED
        note.archive_reason = REASON_EXPIRED
        note.archived_at = timezone.now()
        _save(note, "status", "archive_reason", "archived_at")
        bump(setting, counted=counters.moved(before, note))
        audit(actor=actor, action=AuditAction.NOTE_EXPIRE, project=note.project, note=note)
    return note
