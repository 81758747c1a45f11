"""What an agent reads through its run: memories, recoveries, scratchpad, status, fingerprint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from django.db import connections
from django.db.models import Case, OuterRef, QuerySet, Subquery, Value, When

from ..access import actor_role, require_member
from ..actors import Actor
from ..errors import MemoryPortalError
from ..lru import Kept, first_expiry
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
from .projects import setting_get, setting_now
from .visibility import AgentView, agent_visible_q, held_q, notes_for_actor, view_state


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
        # Who forgot it, by name where an agent did (a deleted agent has none left).
        forgetter = Agent.objects.filter(pk=OuterRef("forgotten_by_agent_id")).values("name")
        return (
            Recovery.objects.filter(project=project)
            .select_related("note", "forgotten_by_user")
            .annotate(forgotten_by_agent_name=Subquery(forgetter[:1]))
        )
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
    setting = setting_now(actor=actor, project=run.project)
    seen = _seen(actor=actor, setting=setting)
    held = 0
    if setting.enabled and setting.review_policy == ReviewPolicy.HOLD:
        held = (
            Note.objects.filter(held_q(), project_id=run.project_id, status=Status.ACTIVE)
            .filter(top_level_run_id=run.top_level_run_id)
            .count()
        )
    return MemoryStatus(
        enabled=setting.enabled,
        note_count=seen.count,
        access_mode="reviewed" if run.agent.is_reviewer else "learned",
        revision=setting.revision,
        fingerprint=seen.fingerprint,
        review_policy=setting.review_policy,
        held_count=held,
    )


def fingerprint(*, actor: Actor, setting: MemorySetting | None = None) -> str:
    """A digest of everything the caller can see, leaving out what its own top-level run wrote
    or forgot, so an orchestrator may reuse a step while this value holds (SPEC §2.11). Read
    now, not kept (`memory_status` keeps it per revision)."""
    run = actor.run
    setting = setting or setting_get(project=run.project)
    return _seen_now(actor=actor, setting=setting)[0].fingerprint


@dataclass(frozen=True)
class Seen:
    count: int  # the notes the caller sees (its own run's too): memory_status's noteCount
    fingerprint: str


# The fingerprint's columns (content_key: a day row changes content in place, appending, under
# the same place_key), and what each row is to it: seen by the caller and counted in both;
# seen, but written by its own top-level run (counted, not in the fingerprint); forgotten by its
# run (in the fingerprint, in the state it had before; not counted).
SEEN_FIELDS = ("id", "trust", "place_key", "content_key", "evidence_commit", "expires_at")
SEEN, OWN, FORGOTTEN_BY_ME = 0, 1, 2


kept_seen: Kept[tuple, Seen] = Kept(4096)  # a status found once per revision (lru.Kept)


def _seen(*, actor: Actor, setting: MemorySetting | None = None) -> Seen:
    """The caller's note count and fingerprint, found once per revision (`kept_seen`): a
    status at 2,000 notes then costs what one at 10 does until something changes
    (docs/PERFORMANCE.md)."""
    run = actor.run
    setting = setting or setting_get(project=run.project)
    key = view_state(AgentView.of_run(run, setting=setting), setting, Note.objects.db)
    seen = kept_seen.get(key)
    if seen is None:
        seen, until = _seen_now(actor=actor, setting=setting)
        kept_seen.put(key, seen, until)
    return seen


def _seen_now(*, actor: Actor, setting: MemorySetting) -> tuple[Seen, datetime | None]:
    """The caller's note count and fingerprint, read together, and the first expiry among the
    notes counted (None: none expires): on PostgreSQL one statement
    whose answer is one row however many notes the caller sees — their number and the sum of a
    64-bit hash of each row it digests (`hashtextextended`), nothing sorted or sent to Python
    (at 2,000 notes, hashing in Python took most of a status). Elsewhere the rows are hashed
    here. The two ways give different values, each stable on its own database (PostgreSQL's
    may change once with a major version: one spurious change)."""
    run = actor.run
    own = run.top_level_run_id
    digest = hashlib.sha256()
    digest.update(f"{int(setting.enabled)}|{setting.revocation_epoch}".encode())
    if not setting.enabled:
        return Seen(0, digest.hexdigest()[:32]), None
    mine = Case(When(top_level_run_id=own, then=Value(OWN)), default=Value(SEEN))
    visible = notes_for_actor(actor=actor).annotate(seen_as=mine)
    # Notes this run forgot still count as seen, in the state they had before (if it could see
    # them: a reviewer nested in a run never saw the learned notes that run forgot). Forgotten,
    # they are never among the visible ones.
    forgotten_by_me = (
        Note.objects.filter(
            agent_visible_q(AgentView.of_run(run, setting=setting), served=False, forgotten=True),
            recovery__forgotten_by_top_level_run_id=own,
        )
        .exclude(top_level_run_id=own)
        .annotate(seen_as=Value(FORGOTTEN_BY_ME))
    )
    parts = [
        part.order_by().values_list(*SEEN_FIELDS, "seen_as") for part in (visible, forgotten_by_me)
    ]
    db = connections[visible.db]
    if db.vendor == "postgresql":
        sql, params = parts[0].union(parts[1], all=True).order_by().query.sql_with_params()
        columns = [f"c{i}" for i in range(len(SEEN_FIELDS))]
        line = " || '|' || ".join(f"coalesce({c}::text, '')" for c in columns)
        digested = f"seen_as <> {OWN}"
        counted = f"seen_as <> {FORGOTTEN_BY_ME}"
        expires = columns[SEEN_FIELDS.index("expires_at")]
        with db.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FILTER (WHERE {counted}), "
                f"count(*) FILTER (WHERE {digested}), "
                f"coalesce(sum(hashtextextended({line}, 0)) FILTER (WHERE {digested}), 0), "
                f"min({expires}) FILTER (WHERE {counted}) "
                f"FROM ({sql}) AS seen({', '.join(columns)}, seen_as)",
                params,
            )
            count, digested_count, total, until = cursor.fetchone()
        digest.update(f"{digested_count}|{total}".encode())
        return Seen(count, digest.hexdigest()[:32]), until
    rows = [*parts[0], *parts[1]]
    for row in sorted({row[:-1] for row in rows if row[-1] != OWN}):
        digest.update("|".join("" if v is None else str(v) for v in row).encode())
        digest.update(b"\n")
    counted_rows = [row for row in rows if row[-1] != FORGOTTEN_BY_ME]
    until = first_expiry(row[SEEN_FIELDS.index("expires_at")] for row in counted_rows)
    return Seen(len(counted_rows), digest.hexdigest()[:32]), until


def recovery_in_project(*, actor: Actor, project: Project, recovery_id: str) -> Recovery:
    recovery = recoveries_for_actor(actor=actor, project=project).filter(pk=recovery_id).first()
    if recovery is None:
        raise MemoryPortalError(
            "memory_recovery_not_found", f"No recovery {recovery_id} you can restore."
        )
    return recovery
