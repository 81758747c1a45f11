"""A project's people: its members and their roles (every member reads the list; managers add
a person, change a role, take someone out — never the last manager), and an administrator's
new project. One service per change (services.membership_set, membership_remove,
project_create); a refusal is a message on the page."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Role

from .base import actor_of, done, person_view, project_action, project_page, refusal, render_page


def _members_url(access) -> str:
    return reverse("dashboard:members", args=[access.project.slug])


@project_page
def members(request, access):
    return render_page(
        request,
        access,
        "dashboard/members.html",
        tab="members",
        members=selectors.project_members(actor=actor_of(request), project=access.project),
        roles=Role.choices,
    )


@project_action
def member_add(request, access):
    """Add an active person (by username or email) with a role, or change theirs."""
    page = _members_url(access)
    try:
        user = selectors.person_find(identifier=request.POST.get("person", ""), field="person")
        role = request.POST.get("role", Role.MEMBER)
        services.membership_set(
            actor=actor_of(request), project=access.project, user=user, role=role
        )
    except MemoryPortalError as err:
        return refusal(request, err, to=page)
    return done(request, page, f"{user.get_username()} is a {role} of {access.project.name}.")


@project_action
def member_invite(request, access):
    """Invite someone without an account by email (services.person_invite: the account, its
    role here, and the email with the link to set a password)."""
    page = _members_url(access)
    address = request.POST.get("email", "")
    try:
        services.person_invite(
            actor=actor_of(request),
            project=access.project,
            email=address,
            role=request.POST.get("role", Role.MEMBER),
            link_base=settings.MEMORY_PORTAL_BASE_URL or request.build_absolute_uri("/"),
        )
    except MemoryPortalError as err:
        return refusal(request, err, to=page)
    except OSError:  # the mail server refused or could not be reached: nothing was kept
        why = "The invitation email could not be sent, so nobody was invited. Try again later."
        return refusal(request, why, to=page)
    return done(request, page, f"Invited {address.strip()}: the email with their link is sent.")


@project_action
def member_change(request, access, username, verb):
    """`role` (the POST's role) or `remove` one member."""
    if verb not in ("role", "remove"):
        raise Http404("No such change.")
    page = _members_url(access)
    actor = actor_of(request)
    try:
        user = selectors.user_active_get(username=username, field="person")
        if verb == "remove":
            services.membership_remove(actor=actor, project=access.project, user=user)
            return done(request, page, f"{username} is no longer a member.")
        role = request.POST.get("role", "")
        services.membership_set(actor=actor, project=access.project, user=user, role=role)
    except MemoryPortalError as err:
        return refusal(request, err, to=page)
    return done(request, page, f"{username} is now a {role}.")


@require_POST
@person_view
def project_create(request):
    """An administrator's new project (memory off): then its Settings and Members."""
    back = reverse("dashboard:projects")
    try:
        project = services.project_create(
            actor=actor_of(request),
            slug=request.POST.get("slug", "").strip(),
            name=request.POST.get("name", "").strip(),
            manager=request.user,
        )
    except MemoryPortalError as err:
        return refusal(request, err, to=back)
    page = reverse("dashboard:members", args=[project.slug])
    return done(request, page, f"Project {project.slug} created; you manage it. Add its people.")
