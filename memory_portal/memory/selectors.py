"""Every read of Memory Portal, always for an actor: who may see which note is decided here
and nowhere else (scopes, reviewers, rejected and expired notes, stale evidence)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import BooleanField, Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.utils import timezone

from . import counters
from .access import (
    actor_role,
    application_not_found,
    project_not_found,
    remember_role,
    require_member,
    role_from_membership,
)
from .actors import Actor
from .errors import MemoryPortalError
from .models import (
    Agent,
    ApiToken,
    Application,
    AuditEvent,
    Kind,
    Membership,
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
    expired_q,
    not_expired_q,
)


def note_not_found(note_id: str) -> MemoryPortalError:
    return MemoryPortalError("memory_not_found", f"No memory {note_id} in this workspace.")


def agent_not_found(agent_id: str) -> MemoryPortalError:
    return MemoryPortalError("not_found", f"No agent {agent_id} here.", hint="Check the agt_ id.")


# --- Projects -----------------------------------------------------------------------------


def projects_for_user(*, user) -> QuerySet[Project]:
    qs = Project.objects.all()
    if not user.is_superuser:
        qs = qs.filter(memberships__user=user)
    return qs.select_related("memory_setting").order_by("slug")


def project_get(*, actor: Actor, slug: str) -> Project:
    """The project by slug, with its setting row, for a member (anyone else: `not_found`, never
    a hint it exists). A person's role comes in the same query and the actor remembers it."""
    projects = Project.objects.filter(slug=slug).select_related("memory_setting")
    if actor.is_person:
        membership = Membership.objects.filter(project=OuterRef("pk"), user_id=actor.user.pk)
        projects = projects.annotate(membership_role=Subquery(membership.values("role")[:1]))
    project = projects.first()
    if project is None:
        raise project_not_found(slug)
    if actor.is_person:
        role = role_from_membership(actor.user, project.membership_role)
        remember_role(actor, project, role)
        if role is None:
            raise project_not_found(slug)
    else:
        require_member(actor, project)
    return project


def setting_get(*, project: Project) -> MemorySetting:
    """The current switch state, read fresh on every call (never cached)."""
    setting = MemorySetting.objects.filter(project=project).first()
    if setting is None:
        setting, _ = MemorySetting.objects.get_or_create(project=project)
    return setting


# --- The visibility rule -------------------------------------------------------------------
# Every read of notes by or for an agent goes through `agent_visible_q`: tool reads, lists,
# search, status counts, the fingerprint, v1 lists and recall (facts and day lines). A new
# read path uses it too, so it cannot forget a clause (tests/memory/test_visibility_paths.py
# runs one fixture through every path).


@dataclass(frozen=True)
class AgentView:
    """Whose eyes a read is through: an agent run's, or an agent's when a person previews
    what that agent would be served (no run, so no own top-level run to leave out)."""

    project_id: int
    agent_id: str
    application_id: int | None
    is_reviewer: bool
    top_level_run_id: str | None = None

    @classmethod
    def of_run(cls, run: Run) -> AgentView:
        return cls(
            run.project_id,
            run.agent_id,
            run.application_id,
            run.agent.is_reviewer,
            run.top_level_run_id,
        )

    @classmethod
    def of_agent(cls, agent: Agent) -> AgentView:
        return cls(agent.project_id, agent.pk, agent.application_id, agent.is_reviewer)


def _reach_q(view: AgentView) -> Q:
    """Notes in an agent's reach: its project's shared notes, its application's notes and its
    own private notes."""
    reach = Q(scope=Scope.PROJECT) | Q(scope=Scope.AGENT, owner_agent_id=view.agent_id)
    if view.application_id:
        reach |= Q(scope=Scope.APPLICATION, application_id=view.application_id)
    return Q(project_id=view.project_id) & reach


def _evidence_current_q(view: AgentView) -> Q:
    """An evidence-bound note is served only while its commit is the pinned revision of a
    repository still linked to the agent's application."""
    no_evidence = Q(evidence_commit="")
    if not view.application_id:
        return no_evidence
    current = RepositoryLink.objects.filter(
        application_id=view.application_id,
        repository_id=OuterRef("evidence_repository_id"),
        revision=OuterRef("evidence_commit"),
    )
    return no_evidence | Q(Exists(current))


def agent_visible_q(
    view: AgentView,
    *,
    served: bool = True,
    include_archived: bool = False,
    include_expired: bool = False,
    forgotten: bool = False,
    now: datetime | None = None,
) -> Q:
    """THE rule of what an agent may see (SPEC §2.3, §2.7, §2.8). Always: its reach, not
    forgotten, evidence current for its application; a reviewer only reviewed notes of other
    top-level runs. `served` (lists, search, recall, counts, fingerprint; everything but a read
    by id): never rejected, and live — active and not expired unless asked for.
    `forgotten=True` (with `served=False`) turns the forgotten clause round: the forgotten notes
    the rule would otherwise let the agent read (its recoveries; what its run forgot, for the
    fingerprint)."""
    status = Q(status=Status.FORGOTTEN) if forgotten else ~Q(status=Status.FORGOTTEN)
    q = _reach_q(view) & status & _evidence_current_q(view)
    if served:
        q &= ~Q(trust=Trust.REJECTED)
        if not include_archived:
            q &= Q(status=Status.ACTIVE)
        if not include_expired:
            q &= not_expired_q(now)
    if view.is_reviewer:
        q &= Q(trust=Trust.REVIEWED)
        if view.top_level_run_id:
            q &= ~Q(top_level_run_id=view.top_level_run_id)
    return q


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
    """The notes an actor may list. People (members) see every note of the project; agents
    see what `agent_visible_q` serves them."""
    if actor.is_person:
        if project is None:
            raise ValueError("A person lists notes of one project.")
        require_member(actor, project)
        return Note.objects.filter(project=project)
    return Note.objects.filter(
        agent_visible_q(
            AgentView.of_run(actor.run),
            include_archived=include_archived,
            include_expired=include_expired,
        )
    )


def note_by_id_q(*, actor: Actor, project: Project, note_id: str) -> Q:
    """The note `note_id` of `project`, if the actor may read it by id (see `note_get`); a
    person who does not belong to the project is refused before anything is read."""
    by_id = Q(pk=note_id, project=project)
    if actor.is_person:
        if actor_role(actor, project) is None:
            raise note_not_found(note_id)
        return by_id
    return by_id & agent_visible_q(AgentView.of_run(actor.run), served=False)


def note_get(*, actor: Actor, note_id: str, project: Project | None = None) -> Note:
    """One note by id (of `project`, when the caller knows it: then one query). A person sees
    any note of a project they belong to; an agent sees a note in its reach that is not
    forgotten (a rejected one shows `trust: rejected`)."""
    if project is not None:
        by_id = note_by_id_q(actor=actor, project=project, note_id=note_id)
        note = Note.objects.filter(by_id).select_related("origin_run").first()
        if note is None:
            raise note_not_found(note_id)
        note.project = project
        return note
    note = Note.objects.filter(pk=note_id).select_related("project", "origin_run").first()
    if note is None:
        raise note_not_found(note_id)
    if actor.is_person:
        if actor_role(actor, note.project) is None:
            raise note_not_found(note_id)
        return note
    visible = Note.objects.filter(
        agent_visible_q(AgentView.of_run(actor.run), served=False), pk=note_id
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
    """Search over what the actor may list: full text, and, when embeddings are on, meaning
    (docs/RECALL.md, "Search"). Full text: PostgreSQL websearch_to_tsquery over the generated
    `search_vector` column (GIN index), best rank first; SQLite: every word must occur in
    content or summary, newest first. With meaning, the full-text matches and the notes whose
    stored vector is close to the query (hybrid score ≥ the recall threshold) are ranked by the
    hybrid score recall uses, best first."""
    from .validation import reject_unstorable

    reject_unstorable("query", query)
    qs = notes_for_actor(actor=actor, project=project)
    if kind:
        qs = qs.filter(kind=kind)
    if target:
        qs = qs.filter(target=target)
    if day:
        qs = qs.filter(day=day)
    text_qs = _full_text(qs, query)
    from .embeddings import embedding_settings

    if not embedding_settings()["enabled"] or _uses_operators(query):
        return text_qs
    return _hybrid_ranked(qs, text_qs, query)


def _uses_operators(query: str) -> bool:
    """A quoted phrase, an excluded word (`-word`) or `OR`: the caller asked for exact text,
    which meaning cannot honour, so the search stays full text."""
    words = query.split()
    return '"' in query or "OR" in words or any(w.startswith("-") for w in words)


SEARCH_SCAN = 5_000  # the newest notes a search compares by meaning (a project holds 2,000)
SEARCH_RESULTS = 200  # a hybrid search ranks at most this many notes


def _hybrid_ranked(qs: QuerySet[Note], text_qs: QuerySet[Note], query: str) -> QuerySet[Note]:
    """The full-text matches and the meaning matches of `qs`, ranked by the hybrid score
    (lexical and semantic, the recall scorer; notes without a stored vector by words alone),
    then newest first. One query embedding, one matrix product over stored vectors."""
    from django.conf import settings
    from django.db.models import Case, IntegerField, Value, When

    from .hybrid import TextRow, hybrid_scores

    text_ids = set(text_qs.values_list("id", flat=True)[:SEARCH_SCAN])
    rows = TextRow.of(qs.order_by("-created_at", "-id")[:SEARCH_SCAN])
    seen = {r.id for r in rows}
    missing = [i for i in text_ids if i not in seen]
    if missing:
        rows += TextRow.of(qs.filter(pk__in=missing))
    if not rows:
        return text_qs
    scores = hybrid_scores(query, rows, stored_only=True).scores
    threshold = settings.MEMORY_PORTAL.get("RECALL_THRESHOLD", 0.5)
    kept = [
        (score, row)
        for row, score in zip(rows, scores, strict=True)
        if row.id in text_ids or score >= threshold
    ]
    kept.sort(key=lambda p: (-p[0], p[1].id not in text_ids, -p[1].created_at.timestamp()))
    ranked = [row.id for _, row in kept[:SEARCH_RESULTS]]
    if not ranked:
        return qs.none()
    order = Case(
        *(When(pk=pk, then=Value(i)) for i, pk in enumerate(ranked)), output_field=IntegerField()
    )
    return qs.filter(pk__in=ranked).order_by(order)


def _full_text(qs: QuerySet[Note], query: str) -> QuerySet[Note]:
    if connection.vendor == "postgresql":
        tsquery = "websearch_to_tsquery('english', %s)"
        # The project first, then the words: the match is on an expression the GIN index does
        # not cover, so PostgreSQL reads the project's rows (at most the cap) by its btree
        # index and tests each stored vector, instead of collecting the word's rows across
        # every project from the GIN index and discarding all but this project's.
        qs = qs.filter(
            RawSQL(
                f"coalesce(project_memory_entry.search_vector, ''::tsvector) @@ {tsquery}",
                (query,),
                BooleanField(),
            )
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
        visible = agent_visible_q(
            AgentView.of_run(actor.run),
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
    forgotten = agent_visible_q(AgentView.of_run(run), served=False, forgotten=True)
    notes = Note.objects.filter(forgotten, trust=Trust.LEARNED)
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
    # content_key: a day row changes content in place (appends) under the same content_hash.
    fields = ("id", "trust", "content_hash", "content_key", "evidence_commit", "expires_at")
    visible = notes_for_actor(actor=actor).exclude(top_level_run_id=own).values_list(*fields)
    # Notes this run forgot still count as seen, in the state they had before (if it could see
    # them: a reviewer nested in a run never saw the learned notes that run forgot).
    forgotten_by_me = (
        Note.objects.filter(
            agent_visible_q(AgentView.of_run(run), served=False, forgotten=True),
            recovery__forgotten_by_top_level_run_id=own,
        )
        .exclude(top_level_run_id=own)
        .values_list(*fields)
    )
    rows = sorted(set(visible) | set(forgotten_by_me))
    for row in rows:
        digest.update("|".join("" if v is None else str(v) for v in row).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:32]


# --- The review rules ---------------------------------------------------------------------

# A fact nobody recalled for this long goes to the review queue; an expired one recalled within
# it is renewed by the daily review.
NOT_RECALLED = timedelta(days=30)


def not_recalled_q(now: datetime) -> Q:
    """Notes not recalled in the last 30 days (never recalled counts once they are that old)."""
    cutoff = now - NOT_RECALLED
    return Q(last_recalled_at__lt=cutoff) | Q(last_recalled_at__isnull=True, created_at__lt=cutoff)


# --- Counts for the dashboard -------------------------------------------------------------


def project_counts(*, project: Project) -> dict:
    """The project's stored, awaiting, by-trust and by-status counts: its stored counters
    (counters.py), read fresh, never a count of its notes."""
    return counters.project_counts(setting_get(project=project))


# --- Dashboard reads ---
# What the server-rendered dashboard shows, for a person: one function per page region, each
# with a fixed number of queries however many rows it returns.


from django.db.models import ExpressionWrapper, F  # noqa: E402

from .errors import invalid  # noqa: E402
from .models import Repository, Role, ToolCallCount  # noqa: E402
from .validation import agent_fact_identity, normalize_text  # noqa: E402

DAY_STAMP_LENGTH = len("HH:MM ")


@dataclass(frozen=True)
class ProjectAccess:
    """A person's way into one project: the project (with its setting row) and their role.
    The dashboard shows controls by these flags; the services enforce the same rules."""

    project: Project
    role: str

    @property
    def is_manager(self) -> bool:
        return self.role == Role.MANAGER

    # Managers approve / reject, forget / restore, switch and reset memory and delete runs;
    # every member reads, edits, archives, vetoes and undoes (SPEC §2.3).
    @property
    def can_review(self) -> bool:
        return self.is_manager

    @property
    def can_forget(self) -> bool:
        return self.is_manager

    @property
    def can_control(self) -> bool:
        return self.is_manager

    @property
    def can_delete_runs(self) -> bool:
        return self.is_manager

    @property
    def can_delete_applications(self) -> bool:
        return self.is_manager


def project_access(*, actor: Actor, slug: str) -> ProjectAccess:
    """`project_get` with the person's role, for the dashboard's controls."""
    project = project_get(actor=actor, slug=slug)
    return ProjectAccess(project=project, role=require_member(actor, project))


def projects_overview(*, actor: Actor) -> QuerySet[Project]:
    """The person's projects with their switch, stored notes and notes awaiting review, in one
    query: the stored counters of each project's setting row, never a count of its notes."""
    return projects_for_user(user=actor.user).annotate(
        note_total=F("memory_setting__notes_active")
        + F("memory_setting__notes_archived")
        + F("memory_setting__notes_forgotten"),
        awaiting=F(f"memory_setting__{counters.AWAITING_FIELD}"),
    )


def notes_table(*, actor: Actor, project: Project) -> QuerySet[Note]:
    """Every note of the project a member sees, with what a table row shows joined in one query:
    application, owner agent, origin run and its agent, evidence repository, who vetoed, who
    created, the open recovery record and the evidence-stale flag."""
    return (
        notes_for_actor(actor=actor, project=project)
        .select_related(
            "application",
            "owner_agent",
            "origin_run__agent",
            "evidence_repository",
            "vetoed_by",
            "created_by_user",
        )
        .annotate(
            evidence_stale=ExpressionWrapper(
                evidence_stale_annotation(), output_field=BooleanField()
            ),
            recovery_ref=F("recovery__id"),
        )
    )


def notes_admin(*, actor: Actor, project: Project) -> QuerySet[Note]:
    """Every note of the project, newest first, with what an admin API row shows joined in:
    origin run, evidence repository, application, who vetoed, the open recovery record."""
    return (
        notes_for_actor(actor=actor, project=project)
        .select_related("origin_run", "evidence_repository", "application", "vetoed_by", "recovery")
        .order_by("-created_at", "-id")
    )


def notes_table_ids(*, actor: Actor, project: Project) -> QuerySet[Note]:
    """The same rows as `notes_table`, without its joins: a page filters, sorts and counts
    these (one table, planned in microseconds), then loads only its own rows with
    `notes_table(...).filter(pk__in=…)`. `evidence_stale` is an alias to filter on."""
    return (
        notes_for_actor(actor=actor, project=project)
        .alias(
            evidence_stale=ExpressionWrapper(
                evidence_stale_annotation(), output_field=BooleanField()
            )
        )
        .only("id")
    )


def notes_rows(*, actor: Actor, project: Project, ids: list[str]) -> list[Note]:
    """`notes_table`'s rows for `ids`, in that order (ids not found are left out)."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return []
    found = {n.pk: n for n in notes_table(actor=actor, project=project).filter(pk__in=ids)}
    return [found[i] for i in ids if i in found]


def note_in_project(*, actor: Actor, project: Project, note_id: str) -> Note:
    """One table row of the project (`memory_not_found` for a note of another project)."""
    note = notes_table(actor=actor, project=project).filter(pk=note_id).first()
    if note is None:
        raise note_not_found(note_id)
    return note


@dataclass(frozen=True)
class NoteDetail:
    note: Note
    older: list[Note]  # the notes this one replaced, nearest first
    newer: list[Note]  # the notes that replaced it, nearest first
    events: QuerySet[AuditEvent]


def note_detail(*, actor: Actor, project: Project, note_id: str) -> NoteDetail:
    """A note with its supersede chain both ways and its audit history."""
    note = note_in_project(actor=actor, project=project, note_id=note_id)

    def walk(start: Note, link: str) -> list[Note]:
        chain: list[Note] = []
        seen = {start.pk}
        next_id = getattr(start, f"{link}_id")
        while next_id and next_id not in seen and len(chain) < 50:
            found = Note.objects.filter(pk=next_id, project=project).first()
            if found is None:
                break
            chain.append(found)
            seen.add(found.pk)
            next_id = getattr(found, f"{link}_id")
        return chain

    events = AuditEvent.objects.filter(project=project, note_ref=note.pk).order_by(
        "-created_at", "-id"
    )
    return NoteDetail(
        note=note, older=walk(note, "supersedes"), newer=walk(note, "superseded_by"), events=events
    )


@dataclass(frozen=True)
class DayLine:
    """One line of a day log, offered to lift into a fact of the same agent."""

    note: Note  # the day row
    index: int
    line: str  # as written: "HH:MM TASK-KEY text"
    text: str  # the fact a lift saves: the line without its HH:MM stamp
    lifted_as: str | None  # the live fact that already holds this text


def _day_line_text(line: str) -> str:
    stamp = line[:DAY_STAMP_LENGTH]
    if len(stamp) == DAY_STAMP_LENGTH and stamp[2] == ":" and stamp[:2].isdigit():
        return line[DAY_STAMP_LENGTH:].strip()
    return line.strip()


def _day_lines(project: Project, rows: list[Note]) -> list[DayLine]:
    drafts = []
    for row in rows:
        for index, line in enumerate(row.lines):
            text = _day_line_text(line)
            if not text:
                continue
            identity = agent_fact_identity(
                owner_agent_id=row.owner_agent_id, content=normalize_text(text)
            )
            drafts.append((row, index, line, text, identity))
    live = dict(
        Note.objects.filter(
            project=project,
            status=Status.ACTIVE,
            content_hash__in=[d[4] for d in drafts],
        ).values_list("content_hash", "id")
    )
    return [DayLine(row, index, line, text, live.get(h)) for row, index, line, text, h in drafts]


@dataclass(frozen=True)
class ReviewQueue:
    learned: list[Note]  # learned live notes, oldest first
    expired: list[Note]  # active notes past their expiry
    not_recalled: list[Note]  # live notes no recall picked in 30 days
    stale: list[Note]  # notes whose evidence commit is no longer pinned
    day: date  # yesterday (UTC)
    day_lines: list[DayLine]  # yesterday's day-log lines, to lift into facts by hand
    totals: dict[str, int]
    # Near-duplicates by meaning the agents' latest daily reviews reported, both still live:
    # for a person to merge (or keep apart); the review never merges them itself.
    similar: list[SimilarPair] = ()


@dataclass(frozen=True)
class SimilarPair:
    older: Note
    newer: Note
    cosine: float


def similar_pairs(*, project: Project, limit: int = 25) -> list[SimilarPair]:
    """The near-duplicate pairs of each agent's latest finished daily review in the project
    (`counts["near_duplicate_pairs"]`), closest first, where both facts are still live."""
    from .models import ReviewRun

    latest: dict[int, list] = {}
    runs = (
        ReviewRun.objects.filter(routine__agent__project=project, finished_at__isnull=False)
        .order_by("routine_id", "-finished_at")
        .values_list("routine_id", "counts")
    )
    for routine_id, counts in runs:
        latest.setdefault(routine_id, (counts or {}).get("near_duplicate_pairs") or [])
    pairs = sorted((p for ps in latest.values() for p in ps), key=lambda p: -p[2])
    ids = {i for p in pairs for i in p[:2]}
    live = Note.objects.filter(project=project, pk__in=ids, status=Status.ACTIVE).in_bulk()
    kept = [SimilarPair(live[a], live[b], c) for a, b, c in pairs if a in live and b in live]
    return kept[:limit]


def review_queue(*, actor: Actor, project: Project, limit: int = 25) -> ReviewQueue:
    """What a reviewer works through. A note shows once, in the first section it belongs to."""
    now = timezone.now()
    # Each section filters, counts and picks ids on the note table alone; the picked rows'
    # relations are loaded once, for at most 4 × limit notes (planning a 9-table join per
    # section cost more than running it).
    rows = notes_table_ids(actor=actor, project=project).filter(status=Status.ACTIVE)
    not_expired = not_expired_q(now)
    sections = {
        "learned": rows.filter(not_expired, trust=Trust.LEARNED)
        .exclude(kind=Kind.DAY)
        .order_by("created_at", "id"),
        "expired": rows.filter(expired_q(now)).order_by("expires_at", "id"),
        "not_recalled": rows.filter(not_expired, not_recalled_q(now))
        .exclude(kind=Kind.DAY)
        .exclude(trust=Trust.REJECTED)
        .order_by(F("last_recalled_at").asc(nulls_first=True), "created_at"),
        "stale": rows.filter(evidence_stale=True).order_by("created_at", "id"),
    }
    seen: set[str] = set()
    picked_ids: dict[str, list[str]] = {}
    totals: dict[str, int] = {}
    for name, qs in sections.items():
        totals[name] = qs.count()
        picked_ids[name] = [pk for pk in qs.values_list("pk", flat=True)[:limit] if pk not in seen]
        seen.update(picked_ids[name])
    loaded = {n.pk: n for n in notes_rows(actor=actor, project=project, ids=list(seen))}
    picked = {name: [loaded[i] for i in ids if i in loaded] for name, ids in picked_ids.items()}
    yesterday = now.date() - timedelta(days=1)
    day_rows = list(
        Note.objects.filter(project=project, kind=Kind.DAY, day=yesterday, status=Status.ACTIVE)
        .select_related("owner_agent")
        .order_by("owner_agent__name", "id")
    )
    return ReviewQueue(
        learned=picked["learned"],
        expired=picked["expired"],
        not_recalled=picked["not_recalled"],
        stale=picked["stale"],
        day=yesterday,
        day_lines=_day_lines(project, day_rows),
        totals=totals,
        similar=similar_pairs(project=project, limit=limit),
    )


def day_line_get(*, actor: Actor, project: Project, note_id: str, index: int) -> DayLine:
    """One line of a day row of the project, as the review queue offers it."""
    row = note_in_project(actor=actor, project=project, note_id=note_id)
    if row.kind != Kind.DAY or row.owner_agent_id is None:
        raise invalid("id", f"{note_id} is not a day log.")
    lines = _day_lines(project, [row])
    match = next((d for d in lines if d.index == index), None)
    if match is None:
        raise invalid("line", f"{note_id} has no line {index}.")
    return match


def agents_overview(*, actor: Actor, project: Project) -> QuerySet[Agent]:
    """The project's agents with their live fact count and run count."""
    require_member(actor, project)
    return (
        Agent.objects.filter(project=project)
        .select_related("application")
        .annotate(
            fact_count=Count(
                "own_notes",
                filter=Q(own_notes__kind=Kind.FACT, own_notes__status=Status.ACTIVE),
                distinct=True,
            ),
            run_count=Count("runs", distinct=True),
        )
        .order_by("name", "id")
    )


def applications_overview(*, actor: Actor, project: Project) -> QuerySet[Application]:
    """The project's applications with what deleting one touches: the notes scoped to it and
    its repository links (removed), its agents and runs (detached). One query."""
    from django.db.models import Subquery
    from django.db.models.functions import Coalesce

    require_member(actor, project)

    def per_application(model):
        rows = (
            model.objects.filter(application=OuterRef("pk"))
            .order_by()
            .values("application")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(rows), 0)

    return (
        Application.objects.filter(project=project)
        .annotate(
            note_count=per_application(Note),
            agent_count=per_application(Agent),
            run_count=per_application(Run),
            link_count=per_application(RepositoryLink),
        )
        .order_by("slug")
    )


def application_in_project(
    *, actor: Actor, project: Project, slug: str, field: str | None = None
) -> Application:
    """One application of a project the person is a member of (else `not_found`; when the
    request body named it, `field`, that field's 400)."""
    require_member(actor, project)
    application = Application.objects.filter(project=project, slug=slug).first()
    if application is None:
        not_found = application_not_found(project, slug)
        raise invalid(field, not_found.message) if field else not_found
    application.project = project
    return application


def agent_in_project(
    *, actor: Actor, project: Project, agent_id: str, field: str | None = None
) -> Agent:
    agent = agent_get(actor=actor, agent_id=agent_id)
    if agent.project_id != project.pk:
        if field:
            raise invalid(field, f"Agent {agent_id} belongs to another project.")
        raise agent_not_found(agent_id)
    return agent


def repository_get(*, slug: str, field: str) -> Repository:
    """A registered repository (any person may name one: links are checked by the service)."""
    repository = Repository.objects.filter(slug=slug).first()
    if repository is None:
        raise invalid(field, f"No repository {slug}.")
    return repository


def user_active_get(*, username: str, field: str) -> AbstractBaseUser:
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise invalid(field, f"No active user {username}.")
    return user


def agent_day_log(*, actor: Actor, agent: Agent, limit: int = 14) -> list[Note]:
    """An agent's day rows, newest date first (forgotten ones left out)."""
    require_member(actor, agent.project)
    return list(
        Note.objects.filter(owner_agent=agent, kind=Kind.DAY)
        .exclude(status=Status.FORGOTTEN)
        .order_by("-day", "-created_at")[:limit]
    )


def runs_for_project(*, actor: Actor, project: Project) -> QuerySet[Run]:
    """The project's runs, newest first. `notes_written` is not annotated here: a page counts
    its own runs' notes (`runs_notes_written`) after the LIMIT, not every run's before it."""
    require_member(actor, project)
    return (
        Run.objects.filter(project=project).select_related("agent").order_by("-started_at", "-id")
    )


def runs_notes_written(runs: list[Run]) -> list[Run]:
    """Set `notes_written` on each run of one page, in one grouped query over their ids."""
    counts = dict(
        Note.objects.filter(origin_run_id__in=[r.pk for r in runs])
        .values("origin_run_id")
        .annotate(n=Count("id"))
        .values_list("origin_run_id", "n")
    )
    for run in runs:
        run.notes_written = counts.get(run.pk, 0)
    return runs


def run_in_project(*, actor: Actor, project: Project, run_id: str) -> Run:
    require_member(actor, project)
    run = Run.objects.filter(pk=run_id, project=project).select_related("agent", "parent").first()
    if run is None:
        raise MemoryPortalError("not_found", f"No run {run_id} here.", hint="Check the run_ id.")
    run.project = project
    return run


@dataclass(frozen=True)
class RunDetail:
    run: Run
    tool_calls: list[ToolCallCount]  # by tool, then outcome
    tool_totals: dict[str, int]
    scratchpad: list[ScratchpadItem]
    notes: QuerySet[Note]
    tokens: list[ApiToken]  # a finished run's are all revoked

    @property
    def live_tokens(self) -> int:
        return sum(1 for token in self.tokens if token.revoked_at is None)


def run_detail(*, actor: Actor, project: Project, run_id: str) -> RunDetail:
    run = run_in_project(actor=actor, project=project, run_id=run_id)
    calls = list(ToolCallCount.objects.filter(run=run).order_by("tool", "outcome"))
    totals: dict[str, int] = {}
    for call in calls:
        totals[call.tool] = totals.get(call.tool, 0) + call.count
    items = list(
        ScratchpadItem.objects.filter(
            project=project, top_level_run_id=run.top_level_run_id
        ).order_by("created_at", "id")
    )
    notes = (
        notes_table_ids(actor=actor, project=project)
        .filter(origin_run_ref=run.pk)
        .order_by("-created_at", "-id")
    )
    tokens = list(ApiToken.objects.filter(run=run).order_by("created_at", "id"))
    return RunDetail(
        run=run,
        tool_calls=calls,
        tool_totals=totals,
        scratchpad=items,
        notes=notes,
        tokens=tokens,
    )


def recovery_in_project(*, actor: Actor, project: Project, recovery_id: str) -> Recovery:
    recovery = recoveries_for_actor(actor=actor, project=project).filter(pk=recovery_id).first()
    if recovery is None:
        raise MemoryPortalError(
            "memory_recovery_not_found", f"No recovery {recovery_id} you can restore."
        )
    return recovery


def audit_events_for_person(*, actor: Actor) -> QuerySet[AuditEvent]:
    """The audit log across the person's projects (administrators: everything), newest first."""
    qs = AuditEvent.objects.all()
    if not actor.user.is_superuser:
        qs = qs.filter(project__memberships__user=actor.user)
    return qs.order_by("-created_at", "-id")


# --- Daily review reads ---------------------------------------------------------------------


def routine_for_agent(*, actor: Actor, agent: Agent, runs: int = 5):
    """The agent's daily review and its last runs (None when it has none yet)."""
    from .models import ReviewRoutine

    require_member(actor, agent.project)
    routine = ReviewRoutine.objects.filter(agent=agent).first()
    if routine is None:
        return None
    routine.recent_runs = list(routine.runs.order_by("-started_at", "-id")[:runs])
    return routine
