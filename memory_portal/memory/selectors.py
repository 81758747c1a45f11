"""Every read of Memory Portal, always for an actor: who may see which note is decided here
and nowhere else (scopes, reviewers, rejected and expired notes, stale evidence)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date

from django.db import connection
from django.db.models import BooleanField, Count, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from .access import require_member, role_in
from .actors import Actor
from .errors import MemoryPortalError
from .models import (
    Agent,
    AuditEvent,
    Kind,
    MemorySetting,
    Note,
    Project,
    Recovery,
    RepositoryLink,
    Run,
    Scope,
    ScratchpadItem,
    Status,
    Trust,
)


def note_not_found(note_id: str) -> MemoryPortalError:
    return MemoryPortalError("memory_not_found", f"No memory {note_id} in this workspace.")


# --- Projects -----------------------------------------------------------------------------


def projects_for_user(*, user) -> QuerySet[Project]:
    qs = Project.objects.all()
    if not user.is_superuser:
        qs = qs.filter(memberships__user=user)
    return qs.select_related("memory_setting").order_by("slug")


def project_get(*, actor: Actor, slug: str) -> Project:
    project = Project.objects.filter(slug=slug).select_related("memory_setting").first()
    if project is None:
        from .access import project_not_found

        raise project_not_found(slug)
    require_member(actor, project)
    return project


def setting_get(*, project: Project) -> MemorySetting:
    """The current switch state, read fresh on every call (never cached)."""
    setting = MemorySetting.objects.filter(project=project).first()
    if setting is None:
        setting, _ = MemorySetting.objects.get_or_create(project=project)
    return setting


# --- Visibility rules -----------------------------------------------------------------------


def agent_scope_q(run: Run) -> Q:
    """Notes in an agent's reach: its project's shared notes, its application's notes and its
    own private notes."""
    reach = Q(scope=Scope.PROJECT) | Q(scope=Scope.AGENT, owner_agent_id=run.agent_id)
    if run.application_id:
        reach |= Q(scope=Scope.APPLICATION, application_id=run.application_id)
    return Q(project_id=run.project_id) & reach


def evidence_current_q(run: Run) -> Q:
    """An evidence-bound note is served only while its commit is the pinned revision of a
    repository still linked to the caller's application."""
    no_evidence = Q(evidence_commit="")
    if not run.application_id:
        return no_evidence
    current = RepositoryLink.objects.filter(
        application_id=run.application_id,
        repository_id=OuterRef("evidence_repository_id"),
        revision=OuterRef("evidence_commit"),
    )
    return no_evidence | Q(Exists(current))


def evidence_stale_annotation():
    """For people: a note is evidence-stale when no link of its project pins its commit."""
    current = RepositoryLink.objects.filter(
        application__project_id=OuterRef("project_id"),
        repository_id=OuterRef("evidence_repository_id"),
        revision=OuterRef("evidence_commit"),
    )
    return ~Q(evidence_commit="") & ~Q(Exists(current))


def notes_for_actor(
    *,
    actor: Actor,
    project: Project | None = None,
    include_archived: bool = False,
    include_expired: bool = False,
) -> QuerySet[Note]:
    """The notes an actor may list. People (members) see every note of the project; agents see
    their reach minus forgotten, rejected, stale-evidence and (unless asked) archived or expired
    notes; reviewers see reviewed notes of other top-level runs only."""
    if actor.is_person:
        if project is None:
            raise ValueError("A person lists notes of one project.")
        require_member(actor, project)
        return Note.objects.filter(project=project)
    run = actor.run
    qs = Note.objects.filter(agent_scope_q(run)).exclude(status=Status.FORGOTTEN)
    qs = qs.exclude(trust=Trust.REJECTED).filter(evidence_current_q(run))
    if not include_archived:
        qs = qs.filter(status=Status.ACTIVE)
    if not include_expired:
        qs = qs.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    if run.agent.is_reviewer:
        qs = qs.filter(trust=Trust.REVIEWED).exclude(top_level_run_id=run.top_level_run_id)
    return qs


def note_get(*, actor: Actor, note_id: str) -> Note:
    """One note by id. A person sees any note of a project they belong to; an agent sees a note
    in its reach that is not forgotten (a rejected one shows `trust: rejected`)."""
    note = Note.objects.filter(pk=note_id).select_related("project", "origin_run").first()
    if note is None:
        raise note_not_found(note_id)
    if actor.is_person:
        if role_in(actor.user, note.project) is None:
            raise note_not_found(note_id)
        return note
    run = actor.run
    visible = (
        Note.objects.filter(pk=note_id)
        .filter(agent_scope_q(run))
        .exclude(status=Status.FORGOTTEN)
        .filter(evidence_current_q(run))
    )
    if run.agent.is_reviewer:
        visible = visible.filter(trust=Trust.REVIEWED).exclude(
            top_level_run_id=run.top_level_run_id
        )
    if not visible.exists():
        raise note_not_found(note_id)
    return note


def notes_search(
    *,
    actor: Actor,
    project: Project | None = None,
    query: str,
    kind: str | None = None,
    target: str | None = None,
    day: date | None = None,
) -> QuerySet[Note]:
    """Full-text search over what the actor may list. PostgreSQL: websearch_to_tsquery over the
    generated `search_vector` column (GIN index), best rank first. SQLite: every word must occur
    in content or summary, newest first."""
    qs = notes_for_actor(actor=actor, project=project)
    if kind:
        qs = qs.filter(kind=kind)
    if target:
        qs = qs.filter(target=target)
    if day:
        qs = qs.filter(day=day)
    if connection.vendor == "postgresql":
        tsquery = "websearch_to_tsquery('english', %s)"
        qs = qs.filter(
            RawSQL(f"project_memory_entry.search_vector @@ {tsquery}", (query,), BooleanField())
        ).annotate(rank=RawSQL(f"ts_rank(project_memory_entry.search_vector, {tsquery})", (query,)))
        return qs.order_by("-rank", "-created_at", "-id")
    for word in query.split():
        word = word.strip("\"'")
        if word and word.lower() not in {"or", "and"} and not word.startswith("-"):
            qs = qs.filter(Q(content__icontains=word) | Q(summary__icontains=word))
    return qs.order_by("-created_at", "-id")


def memories_for_actor(
    *,
    actor: Actor,
    agent_id: str | None = None,
    kind: str | None = None,
    status: str | None = None,
) -> QuerySet[Note]:
    """The `/api/v1/memories` list: an agent's own facts and day rows; a person sees the agents
    of projects they belong to (one agent with `agent_id`). Newest first."""
    qs = Note.objects.filter(scope=Scope.AGENT, kind__in=[Kind.FACT, Kind.DAY])
    if actor.is_agent:
        if agent_id and agent_id != actor.run.agent_id:
            raise MemoryPortalError("memory_not_own", "An agent lists its own memories only.")
        qs = qs.filter(owner_agent_id=actor.run.agent_id)
    else:
        if agent_id:
            agent = agent_get(actor=actor, agent_id=agent_id)
            qs = qs.filter(owner_agent=agent)
        elif not actor.user.is_superuser:
            qs = qs.filter(project__memberships__user=actor.user)
    if status:
        qs = qs.filter(status=status)
    else:
        qs = qs.exclude(status=Status.FORGOTTEN)
    if kind:
        qs = qs.filter(kind=kind)
    return qs.order_by("-created_at", "-id")


def agent_get(*, actor: Actor, agent_id: str) -> Agent:
    agent = Agent.objects.filter(pk=agent_id).select_related("project", "application").first()
    if agent is None:
        raise MemoryPortalError(
            "not_found", f"No agent {agent_id} here.", hint="Check the agt_ id."
        )
    if actor.is_agent:
        if agent.pk != actor.run.agent_id:
            raise MemoryPortalError("memory_not_own", "An agent acts on its own memories only.")
        return agent
    if role_in(actor.user, agent.project) is None:
        raise MemoryPortalError(
            "not_found", f"No agent {agent_id} here.", hint="Check the agt_ id."
        )
    return agent


def agent_for_memories(*, actor: Actor, agent_id: str | None) -> Agent:
    """Whose memories a v1 call is about: an agent its own (naming another is memory_not_own);
    a person must name an agent of a project they belong to (memory_agent_required)."""
    if actor.is_agent:
        if agent_id and agent_id != actor.run.agent_id:
            raise MemoryPortalError("memory_not_own", "An agent acts on its own memories only.")
        return actor.run.agent
    if not agent_id:
        raise MemoryPortalError("memory_agent_required", "Name the agent this memory is for.")
    return agent_get(actor=actor, agent_id=agent_id)


def recoveries_for_actor(*, actor: Actor, project: Project | None = None) -> QuerySet[Recovery]:
    """Recovery records an actor may restore: managers and members see the project's; an agent
    sees those of learned notes in its reach (also from earlier runs)."""
    if actor.is_person:
        require_member(actor, project)
        return Recovery.objects.filter(project=project).select_related("note", "forgotten_by_user")
    run = actor.run
    notes = Note.objects.filter(agent_scope_q(run), trust=Trust.LEARNED)
    if run.agent.is_reviewer:
        return Recovery.objects.none()
    return Recovery.objects.filter(project_id=run.project_id, note__in=notes).select_related("note")


def scratchpad_items(*, actor: Actor) -> QuerySet[ScratchpadItem]:
    """A top-level run's scratchpad: shared by its parallel steps, invisible to other runs."""
    run = actor.run
    return ScratchpadItem.objects.filter(
        project_id=run.project_id, top_level_run_id=run.top_level_run_id
    ).order_by("created_at", "id")


# --- Status and fingerprint ---------------------------------------------------------------


@dataclass(frozen=True)
class MemoryStatus:
    enabled: bool
    note_count: int
    access_mode: str
    revision: int
    fingerprint: str


def memory_status(*, actor: Actor) -> MemoryStatus:
    """What `memory_status` answers: no note content, only counts and change markers."""
    run = actor.run
    setting = setting_get(project=run.project)
    visible = notes_for_actor(actor=actor) if setting.enabled else Note.objects.none()
    return MemoryStatus(
        enabled=setting.enabled,
        note_count=visible.count(),
        access_mode="reviewed" if run.agent.is_reviewer else "learned",
        revision=setting.revision,
        fingerprint=fingerprint(actor=actor, setting=setting),
    )


def fingerprint(*, actor: Actor, setting: MemorySetting | None = None) -> str:
    """A digest of everything the caller can see, leaving out what its own top-level run wrote
    or forgot, so an orchestrator may reuse a step while this value holds (SPEC §2.11)."""
    run = actor.run
    setting = setting or setting_get(project=run.project)
    own = run.top_level_run_id
    digest = hashlib.sha256()
    digest.update(f"{int(setting.enabled)}|{setting.revocation_epoch}".encode())
    if not setting.enabled:
        return digest.hexdigest()[:32]
    visible = (
        notes_for_actor(actor=actor)
        .exclude(top_level_run_id=own)
        .values_list("id", "trust", "content_hash", "evidence_commit", "expires_at")
    )
    # Notes this run forgot still count as seen, in the state they had before.
    forgotten_by_me = (
        Note.objects.filter(agent_scope_q(run), recovery__forgotten_by_top_level_run_id=own)
        .exclude(top_level_run_id=own)
        .values_list("id", "trust", "content_hash", "evidence_commit", "expires_at")
    )
    rows = sorted(set(visible) | set(forgotten_by_me))
    for row in rows:
        digest.update("|".join("" if v is None else str(v) for v in row).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:32]


# --- Counts for the dashboard -------------------------------------------------------------


def project_counts(*, project: Project) -> dict:
    rows = Note.objects.filter(project=project).values("trust", "status").annotate(n=Count("id"))
    by_trust: dict[str, int] = {t: 0 for t in Trust.values}
    by_status: dict[str, int] = {s: 0 for s in Status.values}
    total = 0
    for row in rows:
        by_trust[row["trust"]] += row["n"]
        by_status[row["status"]] += row["n"]
        total += row["n"]
    awaiting = Note.objects.filter(
        project=project, trust=Trust.LEARNED, status=Status.ACTIVE
    ).count()
    return {"total": total, "by_trust": by_trust, "by_status": by_status, "awaiting": awaiting}


def audit_events_for(*, actor: Actor, project: Project) -> QuerySet[AuditEvent]:
    require_member(actor, project)
    return AuditEvent.objects.filter(project=project).order_by("-created_at", "-id")
