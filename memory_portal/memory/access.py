"""Access rules: who may read or change what. Services and selectors call these; nothing
else decides permissions."""

from __future__ import annotations

from .actors import Actor
from .errors import MemoryPortalError
from .models import (
    REASON_SUPERSEDED,
    Kind,
    Membership,
    MemorySetting,
    Project,
    Role,
    Run,
    Status,
    Trust,
)


def role_in(user, project: Project) -> str | None:
    """The person's role in the project: `manager`, `member` or None. Superusers manage all."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.MANAGER
    return (
        Membership.objects.filter(user=user, project=project).values_list("role", flat=True).first()
    )


def role_from_membership(user, membership_role: str | None) -> str | None:
    """`role_in` for a caller that read the membership's role already (None: no membership)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return Role.MANAGER if user.is_superuser else membership_role


def remember_role(actor: Actor, project: Project, role: str | None) -> None:
    if actor.roles is not None:
        actor.roles[project.pk] = role


def actor_role(actor: Actor, project: Project) -> str | None:
    """The acting person's role in the project, looked up once per request when the actor
    remembers roles (`Actor.person(..., for_request=True)`)."""
    roles = actor.roles
    if roles is not None and project.pk in roles:
        return roles[project.pk]
    role = role_in(actor.user, project)
    remember_role(actor, project, role)
    return role


def project_not_found(project_ref: str) -> MemoryPortalError:
    return MemoryPortalError(
        "not_found",
        f"No project {project_ref} here.",
        hint="Check the project id; you see only projects you are a member of.",
    )


def application_not_found(project: Project, slug: str) -> MemoryPortalError:
    return MemoryPortalError(
        "not_found",
        f"No application {slug} in {project.slug}.",
        hint="Check the application id.",
    )


def is_administrator(actor: Actor) -> bool:
    """Superusers administer the portal itself: they create and delete projects and register
    repositories."""
    return actor.is_person and actor.user.is_superuser


def require_administrator(actor: Actor, what: str) -> None:
    """Administrators only (`what`: "create projects"); a read-only token may not act."""
    if not is_administrator(actor):
        raise MemoryPortalError(
            "memory_forbidden",
            f"Only an administrator can {what}.",
            hint="Ask an administrator (a superuser) to do it.",
        )
    require_writer(actor)


def require_member(actor: Actor, project: Project) -> str:
    """A person must be a member (non-members learn nothing: not found); an agent must belong
    to the project. Returns the person's role, or "agent"."""
    if actor.is_agent:
        if actor.run.project_id != project.id:
            raise project_not_found(project.slug)
        return "agent"
    role = actor_role(actor, project)
    if role is None:
        raise project_not_found(project.slug)
    return role


def require_manager(actor: Actor, project: Project) -> None:
    """Every manager action changes something, so a read-only token is refused too."""
    if actor.is_agent:
        raise MemoryPortalError(
            "memory_forbidden",
            "Only a project manager can do this.",
            hint="Ask a project manager.",
        )
    if require_member(actor, project) != Role.MANAGER:
        raise MemoryPortalError(
            "memory_forbidden",
            f"Managing memory of {project.slug} needs the manager role.",
            hint="Ask a project manager.",
        )
    require_writer(actor)


def require_run_reporter(actor: Actor, run: Run) -> None:
    """Who reports a run's step and its end: a project manager (the orchestrator), or the
    run's own token when an agent key started it (`POST /api/runs`: the key's holder is its
    orchestrator). An agent never reports on another run, nor on one a manager started."""
    if actor.is_person:
        require_manager(actor, run.project)
        return
    if actor.run.pk != run.pk:
        raise MemoryPortalError(
            "memory_forbidden",
            "A run's token reports on its own run only.",
            hint="Report on a run with its own token.",
        )
    if run.agent_key_id is None:
        raise MemoryPortalError(
            "memory_forbidden",
            f"Run {run.pk} was started by an orchestrator: it reports the run's step and end.",
            hint="A run's own token reports on it only when an agent key started it "
            "(POST /api/runs).",
        )
    require_writer(actor)


def require_person(actor: Actor, *, code: str = "memory_forbidden", what: str = "this") -> None:
    """A person's change (veto, undo, edit, re-verify); a read-only token may not make it."""
    if not actor.is_person:
        raise MemoryPortalError(code, f"Only a person can do {what}.")
    require_writer(actor)


def require_writer(actor: Actor) -> None:
    if not actor.can_write:
        raise MemoryPortalError(
            "memory_tool_forbidden",
            "This token may only read.",
            hint="Use a token with the write scope.",
        )


def request_setting(actor: Actor, project: Project) -> MemorySetting | None:
    """The project's setting row as this request's token check read it (`Actor.setting`), or
    None: the caller reads it now. Read once per request, it is still the current state for
    the gate of the call, and a write compares its epoch again under the lock."""
    setting = actor.setting
    return setting if setting is not None and setting.project_id == project.pk else None


def check_agent_gate(actor: Actor, setting: MemorySetting, *, write: bool) -> None:
    """The checks every agent call makes against the current state (never cached): stage
    eligibility, the project's switch, reviewer limits and the token's scope."""
    if not actor.is_agent:
        if write:
            require_writer(actor)
        return
    agent = actor.run.agent
    if not agent.is_eligible:
        raise MemoryPortalError(
            "memory_not_eligible",
            f"Agents of stage {agent.stage} are not offered memory.",
        )
    if not setting.enabled:
        raise MemoryPortalError(
            "memory_disabled", f"Memory is disabled for project {actor.run.project.slug}."
        )
    if write and agent.is_reviewer:
        raise MemoryPortalError(
            "memory_tool_forbidden",
            "Reviewer agents may only search, read and check status.",
            hint="Use memory_search, memory_read or memory_status.",
        )
    if write:
        require_writer(actor)


# --- What a person may do to a note -------------------------------------------------------


# The verbs only a project's manager applies to a note (the services call `require_manager`
# for each; members veto, undo, archive, unarchive and edit learned notes).
MANAGER_VERBS = frozenset({"approve", "reject", "unreview", "forget", "restore"})


def is_replaced(note) -> bool:
    """A newer note replaced this one (a supersede or an edit): it is never brought back by
    undo or unarchive (services.note_unarchive / note_undo refuse `memory_superseded`)."""
    return bool(note.superseded_by_id) or note.archive_reason == REASON_SUPERSEDED


def replacing_needs_manager(note) -> bool:
    """A reviewed or rejected note is replaced (superseded, edited) by a manager only (the
    write's supersede check refuses others `memory_trust_locked`)."""
    return note.trust != Trust.LEARNED


def note_actions(note, *, manager: bool) -> frozenset[str]:
    """The note verbs (services.NOTE_VERBS, and `restore` of a forgotten note) a person of the
    project may apply to `note` as it is now — a manager when `manager`. The dashboard's row
    offers exactly these, built from the rules the services enforce (MANAGER_VERBS,
    `is_replaced`, `replacing_needs_manager`); tests/memory/test_note_actions.py holds the two
    together for every state and role. A verb that would change nothing (a second veto) is not
    offered, though its service answers it as a no-op; `reverify` is offered on the note's
    page, where its evidence is shown.

    Trust is a judgement of the content, apart from its status: a manager approves or rejects
    any note that is not forgotten (a forgotten one is restored first)."""
    verbs = set()
    if note.status == Status.FORGOTTEN:
        verbs.add("restore")
    else:
        verbs.add("forget")
        if note.trust != Trust.REVIEWED:
            verbs.add("approve")
        if note.trust != Trust.REJECTED:
            verbs.add("reject")
        if note.trust != Trust.LEARNED:
            verbs.add("unreview")  # an approve's or a reject's Undo
        if note.status == Status.ARCHIVED:
            # Undo (of a veto) and unarchive bring an archived note back alike.
            if not is_replaced(note):
                verbs |= {"undo", "unarchive"}
        else:
            verbs |= {"veto", "archive"}
            if note.kind != Kind.DAY and (manager or not replacing_needs_manager(note)):
                verbs.add("edit")
    return frozenset(verbs if manager else verbs - MANAGER_VERBS)


def allowed_actions(actor: Actor, note) -> frozenset[str]:
    """`note_actions` for this person in the note's project (no verbs for an agent: its tools
    are offered by the tool gate)."""
    if not actor.is_person:
        return frozenset()
    return note_actions(note, manager=actor_role(actor, note.project) == Role.MANAGER)
