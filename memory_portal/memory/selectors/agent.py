"""What an agent reads through its run: memories, recoveries, scratchpad, status, fingerprint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db import connections
from django.db.models import QuerySet

from ..access import actor_role, require_member
from ..actors import Actor
from ..errors import MemoryPortalError
from ..models import (
    Agent,
    Kind,
    MemorySetting,
    Note,
    Project,
    Recovery,
    ReviewPolicy,
    Scope,
    ScratchpadItem,
    Status,
    Trust,
)
from .projects import setting_get
from .visibility import AgentView, agent_visible_q, held_q, notes_for_actor


def agent_not_found(agent_id: str) -> MemoryPortalError:
    return MemoryPortalError("not_found", f"No agent {agent_id} here.", hint="Check the agt_ id.")


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
        visible = agent_visible_q(
            AgentView.of_actor(actor),
            include_archived=status != Status.ACTIVE,
            include_expired=True,  # v1 lists show expired facts, marked `expired`
        )
        qs = qs.filter(visible, owner_agent_id=actor.run.agent_id)
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
        raise agent_not_found(agent_id)
    if actor.is_agent:
        if agent.pk != actor.run.agent_id:
            raise MemoryPortalError("memory_not_own", "An agent acts on its own memories only.")
        return agent
    if actor_role(actor, agent.project) is None:
        raise agent_not_found(agent_id)
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
    if run.agent.is_reviewer:
        return Recovery.objects.none()
    forgotten = agent_visible_q(AgentView.of_actor(actor), served=False, forgotten=True)
    notes = Note.objects.filter(forgotten, trust=Trust.LEARNED)
    return Recovery.objects.filter(project_id=run.project_id, note__in=notes).select_related("note")


def scratchpad_items(*, actor: Actor) -> QuerySet[ScratchpadItem]:
    """A top-level run's scratchpad: shared by its parallel steps, invisible to other runs."""
    run = actor.run
    return ScratchpadItem.objects.filter(
        project_id=run.project_id, top_level_run_id=run.top_level_run_id
    ).order_by("created_at", "id")


@dataclass(frozen=True)
class MemoryStatus:
    enabled: bool
    note_count: int
    access_mode: str
    revision: int
    fingerprint: str
    review_policy: str
    held_count: int


def memory_status(*, actor: Actor) -> MemoryStatus:
    """What `memory_status` answers: no note content, only counts and change markers — and,
    under the `hold` review policy, how many live notes of the caller's own top-level run are
    held from other runs until a person reviews them."""
    run = actor.run
    setting = setting_get(project=run.project)
    visible = notes_for_actor(actor=actor) if setting.enabled else Note.objects.none()
    held = 0
    if setting.enabled and setting.review_policy == ReviewPolicy.HOLD:
        held = (
            Note.objects.filter(held_q(), project_id=run.project_id, status=Status.ACTIVE)
            .filter(top_level_run_id=run.top_level_run_id)
            .count()
        )
    return MemoryStatus(
        enabled=setting.enabled,
        note_count=visible.count(),
        access_mode="reviewed" if run.agent.is_reviewer else "learned",
        revision=setting.revision,
        fingerprint=fingerprint(actor=actor, setting=setting),
        review_policy=setting.review_policy,
        held_count=held,
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
    # content_key: a day row changes content in place (appends) under the same place_key.
    fields = ("id", "trust", "place_key", "content_key", "evidence_commit", "expires_at")
    visible = notes_for_actor(actor=actor).exclude(top_level_run_id=own).values_list(*fields)
    # Notes this run forgot still count as seen, in the state they had before (if it could see
    # them: a reviewer nested in a run never saw the learned notes that run forgot).
    forgotten_by_me = (
        Note.objects.filter(
            agent_visible_q(AgentView.of_run(run, setting=setting), served=False, forgotten=True),
            recovery__forgotten_by_top_level_run_id=own,
        )
        .exclude(top_level_run_id=own)
        .values_list(*fields)
    )
    digest.update(_rows_digest([visible, forgotten_by_me], len(fields)).encode())
    return digest.hexdigest()[:32]


def _rows_digest(parts: list[QuerySet], width: int) -> str:
    """A digest of the rows of `parts` (values_lists of `width` columns; a row in several
    counts once), whatever their order. PostgreSQL computes it where the rows are — one row
    comes back however many notes the caller sees (at 2,000 notes, sending them to Python to
    hash took most of a status); elsewhere it is computed here. The two ways give different
    values, each stable on its own database."""
    parts = [part.order_by() for part in parts]
    db = connections[parts[0].db]
    if db.vendor != "postgresql":
        digest = hashlib.sha256()
        for row in sorted(set().union(*parts)):
            digest.update("|".join("" if v is None else str(v) for v in row).encode())
            digest.update(b"\n")
        return digest.hexdigest()
    sql, params = parts[0].union(*parts[1:]).order_by().query.sql_with_params()
    columns = [f"c{i}" for i in range(width)]
    line = " || '|' || ".join(f"coalesce({c}::text, '')" for c in columns)
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT md5(coalesce(string_agg({line}, E'\\n' ORDER BY {line}), '')) "
            f"FROM ({sql}) AS seen({', '.join(columns)})",
            params,
        )
        return cursor.fetchone()[0]


def recovery_in_project(*, actor: Actor, project: Project, recovery_id: str) -> Recovery:
    recovery = recoveries_for_actor(actor=actor, project=project).filter(pk=recovery_id).first()
    if recovery is None:
        raise MemoryPortalError(
            "memory_recovery_not_found", f"No recovery {recovery_id} you can restore."
        )
    return recovery
