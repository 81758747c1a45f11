"""The one rule of what an agent may see (`agent_visible_q`) and the note reads that apply it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet

from ..access import actor_role, require_member
from ..actors import Actor
from ..errors import MemoryPortalError
from ..models import (
    Agent,
    MemorySetting,
    Note,
    Project,
    RepositoryLink,
    ReviewPolicy,
    Run,
    Scope,
    Status,
    Trust,
    not_expired_q,
)


def note_not_found(note_id: str) -> MemoryPortalError:
    return MemoryPortalError("memory_not_found", f"No memory {note_id} in this workspace.")


# Every read of notes by or for an agent goes through `agent_visible_q`: tool reads, lists,
# search, status counts, the fingerprint, v1 lists and recall (facts and day lines). A new
# read path uses it too, so it cannot forget a clause (tests/memory/test_visibility_paths.py
# runs one fixture through every path).


@dataclass(frozen=True)
class AgentView:
    """Whose eyes a read is through: an agent run's, or an agent's when a person previews
    what that agent would be served (no run, so no own top-level run to leave out). `hold`:
    the project's review policy is `hold` (SPEC §2.2)."""

    project_id: int
    agent_id: str
    application_id: int | None
    is_reviewer: bool
    top_level_run_id: str | None = None
    hold: bool = False

    @classmethod
    def of_run(cls, run: Run, *, setting: MemorySetting | None = None) -> AgentView:
        """`setting`: the project's setting row as this request read it (else read now)."""
        return cls(
            run.project_id,
            run.agent_id,
            run.application_id,
            run.agent.is_reviewer,
            run.top_level_run_id,
            _holds(run.project_id, setting),
        )

    @classmethod
    def of_actor(cls, actor: Actor) -> AgentView:
        """An agent actor's view, with the setting row its token check read."""
        return cls.of_run(actor.run, setting=actor.setting)

    @classmethod
    def of_agent(cls, agent: Agent, *, setting: MemorySetting | None = None) -> AgentView:
        return cls(
            agent.project_id,
            agent.pk,
            agent.application_id,
            agent.is_reviewer,
            hold=_holds(agent.project_id, setting),
        )


def view_state(view: AgentView, setting: MemorySetting, db: str) -> tuple:
    """Everything what `view` sees on the database `db` is a function of, but the clock: the
    view, and the project's switch, revocation epoch and memory revision as `setting` (the
    call's token check) read them. What is read through a view is kept under it (lru.Kept)."""
    return (db, view, setting.enabled, setting.revocation_epoch, setting.revision)


def _holds(project_id: int, setting: MemorySetting | None) -> bool:
    if setting is None or setting.project_id != project_id:
        policy = (
            MemorySetting.objects.filter(project_id=project_id)
            .values_list("review_policy", flat=True)
            .first()
        )
    else:
        policy = setting.review_policy
    return policy == ReviewPolicy.HOLD


def _trusted_writer_q() -> Q:
    return Q(Exists(Agent.objects.filter(pk=OuterRef("created_by_agent_id"), trusted=True)))


def held_q() -> Q:
    """Notes the `hold` policy keeps from other runs: learned, written by an agent run (a
    person's note has no top-level run) that is not trusted. A note stops being held when a
    person reviews it, its agent is trusted, or the policy goes back to `open`."""
    return Q(trust=Trust.LEARNED) & ~Q(top_level_run_id="") & ~_trusted_writer_q()


def held_note_ids(*, setting: MemorySetting, note_ids: list[str]) -> set[str]:
    """Which of `note_ids` the `hold` policy keeps from other runs now (`held_q`, the one
    rule): none, and no query, under `open`."""
    if setting.review_policy != ReviewPolicy.HOLD or not note_ids:
        return set()
    held = Note.objects.filter(held_q(), project_id=setting.project_id, pk__in=note_ids)
    return set(held.values_list("pk", flat=True))


def held_as_written(*, setting: MemorySetting, note: Note, writer: Agent) -> bool:
    """`held_q` for a note `writer` has just written, from what its write holds: no statement
    after the commit, where a database lost would turn a stored write into a refusal. A test
    keeps it equal to `held_note_ids` on every combination of the rule's conditions."""
    if note.created_by_agent_id != writer.pk:
        raise ValueError("held_as_written needs the agent that wrote the note.")
    return (
        setting.review_policy == ReviewPolicy.HOLD
        and note.trust == Trust.LEARNED
        and note.top_level_run_id != ""
        and not writer.trusted
    )


def _released_q(view: AgentView) -> Q:
    """Under `hold`, what the view may see: every note `held_q` does not hold, and the held
    ones of its own top-level run (its nested runs share it); a person's preview has no run.
    Written as the positive union, which costs the least to build and to plan."""
    released = ~Q(trust=Trust.LEARNED) | Q(top_level_run_id="") | _trusted_writer_q()
    if view.top_level_run_id:
        released |= Q(top_level_run_id=view.top_level_run_id)
    return released


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
    """THE rule of what an agent may see (SPEC §2.2, §2.3, §2.7, §2.8). Always: its reach, not
    forgotten, evidence current for its application; under the `hold` review policy, no note
    held from other runs (`held_q`) but its own run's; a reviewer only reviewed notes of other
    top-level runs. `served` (lists, search, recall, counts, fingerprint; everything but a read
    by id): never rejected, and live — active and not expired unless asked for.
    `forgotten=True` (with `served=False`) turns the forgotten clause round: the forgotten notes
    the rule would otherwise let the agent read (its recoveries; what its run forgot, for the
    fingerprint)."""
    status = Q(status=Status.FORGOTTEN) if forgotten else ~Q(status=Status.FORGOTTEN)
    q = _reach_q(view) & status & _evidence_current_q(view)
    if view.hold and not view.is_reviewer:  # a reviewer sees reviewed notes only anyway
        q &= _released_q(view)
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
            AgentView.of_actor(actor),
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
    return by_id & agent_visible_q(AgentView.of_actor(actor), served=False)


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
        agent_visible_q(AgentView.of_actor(actor), served=False), pk=note_id
    )
    if not visible.exists():
        raise note_not_found(note_id)
    return note
