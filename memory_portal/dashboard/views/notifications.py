"""“Notifications”: what a person is sent by email about each project they can see — the daily
digest and alerts of chosen events — and the unsubscribe page an email's link opens. A person
sees and changes their own choices only; the rules (defaults of a role, what an alert is) live
in selectors.notifications and services.notifications."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from memory_portal.memory import emails, selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.selectors.notifications import ALERT_LABELS, ALERT_TYPES

from .base import actor_of, done, person_view, refusal

PAGE = "dashboard/notifications.html"


@require_http_methods(["GET"])
@person_view
def notifications(request):
    context = {
        "rows": selectors.person_notifications(actor=actor_of(request)),
        "alert_choices": [(t, ALERT_LABELS[t]) for t in ALERT_TYPES],
        "email": request.user.email,
        "email_enabled": emails.enabled(),
        "digest_hour": settings.MEMORY_PORTAL["DIGEST_HOUR"],
    }
    return render(request, PAGE, context)


@require_POST
@person_view
def notifications_set(request, slug: str):
    page = reverse("dashboard:notifications")
    actor = actor_of(request)
    project = selectors.project_get(actor=actor, slug=slug)
    try:
        services.notifications_set(
            actor=actor,
            project=project,
            digest=request.POST.get("digest") == "on",
            alerts=request.POST.getlist("alerts"),
        )
    except MemoryPortalError as err:
        return refusal(request, err, to=page)
    return done(request, f"{page}#project-{project.slug}", f"Saved your choice for {project.name}.")


@csrf_exempt  # the signed link is the credential; a mail client posts it (RFC 8058)
@require_http_methods(["GET", "POST"])
def unsubscribe(request, token: str):
    """GET: what the link stops, and one button (a link opened by a mail scanner changes
    nothing). POST: stop it — the button, or the mail client's one-click unsubscribe."""
    found = emails.unsubscribe_read(token)
    if found is None:
        return render(request, "dashboard/unsubscribe.html", {"invalid": True}, status=404)
    projects = selectors.link_projects(project_ids=found.project_ids)
    context = {"what": found.what, "projects": projects, "token": token}
    if request.method == "POST":
        context["changed"] = services.notifications_unsubscribe(unsubscribe=found)
        context["done"] = True
    return render(request, "dashboard/unsubscribe.html", context)
