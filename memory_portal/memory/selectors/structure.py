"""A project's parts for its members: agents, applications, repositories, users, day logs."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from ..access import application_not_found, is_administrator, require_member
from ..actors import Actor
from ..errors import MemoryPortalError, invalid
from ..models import (
    Agent,
    AgentKey,
    ApiToken,
    Application,
    Kind,
    Membership,
    Note,
    Project,
    Repository,
    RepositoryLink,
    Run,
    Status,
)
from .agent import agent_get, agent_not_found


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


def person_find(*, identifier: str, field: str) -> AbstractBaseUser:
    """An active person by username, or by email (any case) when exactly one has it."""
    identifier = identifier.strip()
    people = get_user_model().objects.filter(is_active=True)
    user = people.filter(username=identifier).first()
    if user is None and "@" in identifier:
        found = list(people.filter(email__iexact=identifier)[:2])
        user = found[0] if len(found) == 1 else None
    if user is None:
        raise invalid(field, f"No active person goes by {identifier!r} here.")
    return user


def people_overview(*, actor: Actor) -> QuerySet:
    """Every person of the server with how many projects they belong to, by username
    (administrators)."""
    if not is_administrator(actor):
        raise MemoryPortalError(
            "memory_forbidden",
            "Only an administrator lists the server's people.",
            hint="Ask an administrator (a superuser).",
        )
    return (
        get_user_model()
        .objects.annotate(project_count=Count("memberships"))
        .order_by("username")
    )


def person_get(*, actor: Actor, username: str) -> AbstractBaseUser:
    """One person of the server, as `people_overview` lists them (administrators)."""
    person = people_overview(actor=actor).filter(username=username).first()
    if person is None:
        raise MemoryPortalError("not_found", f"No person {username}.")
    return person


def project_members(*, actor: Actor, project: Project) -> list[Membership]:
    """The project's members, managers first, then by username (any member reads them)."""
    require_member(actor, project)
    return list(
        Membership.objects.filter(project=project)
        .select_related("user")
        .order_by("role", "user__username")  # "manager" before "member"
    )


def agent_day_log(*, actor: Actor, agent: Agent, limit: int = 14) -> list[Note]:
    """An agent's day rows, newest date first (forgotten ones left out)."""
    require_member(actor, agent.project)
    return list(
        Note.objects.filter(owner_agent=agent, kind=Kind.DAY)
        .exclude(status=Status.FORGOTTEN)
        .order_by("-day", "-created_at")[:limit]
    )


def agent_keys(*, actor: Actor, agent: Agent) -> QuerySet[AgentKey]:
    """The agent's keys, newest first, live ones and revoked (never their secrets)."""
    require_member(actor, agent.project)
    return AgentKey.objects.filter(agent=agent).select_related("created_by")


def agent_key_get(*, actor: Actor, agent: Agent, key_id: str) -> AgentKey:
    key = agent_keys(actor=actor, agent=agent).filter(pk=key_id).first()
    if key is None:
        raise MemoryPortalError(
            "not_found", f"No key {key_id} of agent {agent.pk}.", hint="List the agent's keys."
        )
    key.agent = agent
    return key


def person_tokens(*, actor: Actor) -> QuerySet[ApiToken]:
    """The person's own API tokens, newest first (never their secrets)."""
    return ApiToken.objects.filter(user=actor.user, run__isnull=True).order_by("-created_at")
