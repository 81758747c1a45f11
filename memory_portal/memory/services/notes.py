"""A new note from outside, validated, then inserted by the write protocol (services/write.py):
the agent tool's `memory_write`, an agent's v1 fact save and a person's edit."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from .. import evidence as evidence_checks
from ..access import (
    check_agent_gate,
    require_member,
    require_person,
)
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import (
    Agent,
    Application,
    Kind,
    Note,
    Project,
    RepositoryLink,
    Scope,
    Target,
)
from ..selectors import (
    agent_for_memories,
    note_get,
)
from ..validation import (
    CONTENT_MAX,
    FACT_MAX,
    PATH_MAX,
    check_no_secret,
    check_payload_size,
    future_expiry,
    gate,
    normalize_tags,
    optional_summary,
    require_text,
    stamp_identity,
    tags_to_text,
)
from . import vectors
from .change import current_setting
from .trace import OpenCall
from .write import WriteResult, insert_note, stamp_provenance

TOOL_KINDS = {Kind.FACT, Kind.LESSON, Kind.DECISION, Kind.NAVIGATION}
TOOL_SCOPES = {Scope.PROJECT, Scope.APPLICATION}


# What an edit's new note keeps of the note it replaces: its place, summary, tags and expiry.
KEPT_ON_EDIT = (
    "project",
    "application",
    "scope",
    "owner_agent",
    "kind",
    "target",
    "day",
    "summary",
    "tags_text",
    "expires_at",
)


def _send(actor: Actor, project: Project, epoch: int, note: Note, **protocol) -> WriteResult:
    """A checked note's last step outside the lock, then the write protocol (`insert_note`). A
    new note's vector is stored after the commit, off the request's path (services/vectors.py)."""
    stamp_provenance(actor, note)
    result = insert_note(actor, project, epoch, note, **protocol)
    if result.created:
        vectors.store_later(result.note.pk)
    return result


def _today() -> date:
    return timezone.now().date()


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
    gate("evidence.path", path, max_len=PATH_MAX, line=True)
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
    call: OpenCall | None = None,
) -> WriteResult:
    """`memory_write`: save a learned note in the caller's project (agents, by their run).
    `call`: the API call that makes it, taken from the run's budget with the write."""
    if not actor.is_agent:
        raise MemoryPortalError(
            "memory_tool_forbidden", "memory_write is an agent tool; people save through v1."
        )
    run = actor.run
    project = run.project
    # 1. Validate outside any lock; remember the epoch.
    setting = current_setting(actor, project)
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
    # content, summary and tags were scanned by their gates; the quote is checked here.
    check_no_secret(
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
    return _send(actor, project, epoch, note, call=call)


def fact_save(
    *,
    actor: Actor,
    text: str,
    agent_id: str | None = None,
    expires_at: datetime | None = None,
    supersedes: str | None = None,
    call: OpenCall | None = None,
) -> WriteResult:
    """`POST /api/v1/memories` and `memory save`: one private fact of an agent, by the agent or
    by a person naming it. Expires in 90 days unless `expires_at` says otherwise. `call`: the
    API call that makes it (see `note_write`)."""
    agent = agent_for_memories(actor=actor, agent_id=agent_id)
    project = agent.project
    setting = current_setting(actor, project)
    check_agent_gate(actor, setting, write=True)
    epoch = setting.revocation_epoch
    fact = require_text("text", text, max_len=FACT_MAX, too_long_code="memory_text_too_long")
    now = timezone.now()
    if expires_at is None:
        expires_at = now + timedelta(days=settings.MEMORY_PORTAL["FACT_DEFAULT_EXPIRY_DAYS"])
    else:
        expires_at = future_expiry(expires_at, now=now)
    note = agent_fact(agent, fact, expires_at)
    action = AuditAction.NOTE_SUPERSEDE if supersedes else AuditAction.NOTE_SAVE
    # The first save starts the daily review.
    return _send(
        actor,
        project,
        epoch,
        note,
        supersede_id=supersedes,
        action=action,
        start_review_of=agent,
        call=call,
    )


def agent_fact(agent: Agent, text: str, expires_at: datetime | None) -> Note:
    fields = {"project": agent.project, "target": Target.LONG_TERM, "expires_at": expires_at}
    return agent_note(agent, Kind.FACT, text, **fields)


def agent_note(agent: Agent, kind: str, content: str, **fields) -> Note:
    """An unsaved note in `agent`'s own place (`fields`: its project and the rest), its
    identity stamped."""
    note = Note(scope=Scope.AGENT, owner_agent=agent, kind=kind, content=content, **fields)
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
    # The caller's project object, when it named one, is the one the change leaves its state on.
    project = project or old.project
    epoch = current_setting(actor, project).revocation_epoch
    note = Note(content=text, **{name: getattr(old, name) for name in KEPT_ON_EDIT})
    note.project = project
    stamp_identity(note)
    return _send(actor, project, epoch, note, supersede_id=old.pk, action=AuditAction.NOTE_EDIT)
