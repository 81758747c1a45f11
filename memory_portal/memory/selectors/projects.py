"""A project as a member reads it: the project, its switch, their role and its counters."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, OuterRef, QuerySet, Subquery

from .. import counters
from ..access import (
    project_not_found,
    remember_role,
    request_setting,
    require_member,
    role_from_membership,
)
from ..actors import Actor
from ..models import Membership, MemorySetting, Project, Role


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
    """The current switch state, read fresh on every call (never cached). A project without its
    row yet (the first change to it makes the row) reads as the row's defaults, memory off,
    its counters counted."""
    setting = MemorySetting.objects.filter(project=project).first()
    if setting is None:
        setting = MemorySetting(project=project, **counters.recounted(project.pk))
    return setting


def setting_now(*, actor: Actor | None, project: Project) -> MemorySetting:
    """The setting row as this request's token check read it (a statement ago: still the
    current state for the call), or read now (`setting_get`)."""
    found = request_setting(actor, project) if actor is not None else None
    return found or setting_get(project=project)


def project_counts(*, project: Project) -> dict:
    """The project's stored, awaiting, by-trust and by-status counts: its stored counters
    (counters.py), read fresh, never a count of its notes."""
    return counters.project_counts(setting_get(project=project))


@dataclass(frozen=True)
class ProjectAccess:
    """A person's way into one project: the project (with its setting row) and their role.
    The dashboard shows controls by these flags; the services enforce the same rules."""

    project: Project
    role: str

    @property
    def is_manager(self) -> bool:
        return self.role == Role.MANAGER

    # Managers approve / reject, forget / restore, switch and reset memory, delete runs and
    # applications; every member reads, edits, archives, vetoes and undoes (SPEC §2.3).
    can_review = can_forget = can_control = can_delete_runs = can_delete_applications = is_manager


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
