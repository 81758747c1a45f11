"""A project's controls: the memory switch and reset, an agent's daily review, and deleting an
application or the project (behind the typed id)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.portability import project_export as project_export_lines

from ..forms import ResetForm, TypedDeleteForm
from .base import (
    SETTINGS_PAGE,
    actor_of,
    done,
    next_url,
    not_found_edge,
    project_action,
    project_context,
    project_page,
    refusal,
    refusal_edge,
    toast,
)
from .pages import agent_of

# The switch: its service and what the person is told.
SWITCHES = {
    "enable": (
        services.memory_enable,
        "Memory enabled: agents are offered memory tools from their next call.",
    ),
    "disable": (
        services.memory_disable,
        "Memory disabled: agent calls now answer memory_disabled. Notes are kept.",
    ),
}


def _memory_switch(verb: str):
    service, message = SWITCHES[verb]

    @project_action
    @refusal_edge
    def switch(request, access):
        service(actor=actor_of(request), project=access.project)
        if not request.htmx:
            return done(request, next_url(request, access), message)
        context = {
            **project_context(access, fresh=True),
            "next": next_url(request, access),
            "agent_count": access.project.agents.count(),
        }
        response = render(request, f"{SETTINGS_PAGE}#setting_response", context)
        return toast(response, "success", message)

    switch.__name__ = switch.__qualname__ = f"memory_{verb}"
    return switch


memory_enable = _memory_switch("enable")
memory_disable = _memory_switch("disable")


# The review policy's choices, in the words the Settings page uses for them.
POLICY_MESSAGES = {
    "open": "Agents' notes now reach every run at once; a person reviews them afterwards.",
    "hold": "Agents' notes now wait for a person: other runs see a note once it is approved.",
}


@project_action
def memory_policy(request, access):
    """Set the project's review policy (Settings): `open` or `hold`."""
    page = reverse("dashboard:settings", args=[access.project.slug])
    policy = request.POST.get("policy", "")
    try:
        services.memory_policy_set(actor=actor_of(request), project=access.project, policy=policy)
    except MemoryPortalError as err:
        return refusal(request, err, to=page)
    return done(request, page, POLICY_MESSAGES[policy])


@project_action
def memory_reset(request, access):
    page = reverse("dashboard:settings", args=[access.project.slug]) + "#memory"
    form = ResetForm(request.POST, project=access.project)
    if not form.is_valid():
        return refusal(request, to=page, why=form.errors["confirm_slug"][0])
    try:
        counts = services.memory_reset(actor=actor_of(request), project=access.project)
    except MemoryPortalError as err:
        return refusal(request, to=page, why=err)
    response = done(
        request,
        page,
        f"Reset {access.project.slug}: deleted {counts['notes']} notes, "
        f"{counts['recoveries']} recovery records and {counts['scratchpad_items']} "
        "scratchpad items.",
    )
    if request.htmx:
        return HttpResponseClientRedirect(response.url)
    return response


ROUTINE_ACTIONS = {
    "pause": (services.routine_pause, "Paused the daily review of {agent}."),
    "resume": (services.routine_resume, "Resumed the daily review of {agent}."),
    "delete": (services.routine_delete, "Deleted the daily review of {agent}."),
}


def _routine_run_now(actor, agent) -> str:
    review = services.routine_run_now(actor=actor, agent=agent)
    if review is None:
        return f"Daily review of {agent.name} queued."
    counts = ", ".join(
        f"{k.replace('_', ' ')} {v}" for k, v in review.counts.items() if not isinstance(v, list)
    )
    message = f"Daily review of {agent.name} {review.status}: {counts or 'nothing to do'}."
    if review.error_code:
        message += f" ({review.error_code})"
    return message


@project_action
def agent_routine(request, access, agent_id, verb):
    """Pause, resume, delete or run the agent's daily review now."""
    actor = actor_of(request)
    agent = agent_of(request, access, agent_id)
    page = reverse("dashboard:agent", args=[access.project.slug, agent.pk])
    try:
        if verb == "run":
            message = _routine_run_now(actor, agent)
        elif verb in ROUTINE_ACTIONS:
            action, text = ROUTINE_ACTIONS[verb]
            action(actor=actor, agent=agent)
            message = text.format(agent=agent.name)
        else:
            raise Http404("No such routine action.")
    except MemoryPortalError as err:
        not_found_edge(err)
        return refusal(request, to=page, why=err)
    return done(request, page, message)


def _typed_delete(request, access, *, delete, done_to: str, message) -> HttpResponse:
    """A delete behind the typed id: the form checks only that something was typed; the
    service authorises, compares the id and deletes. Plain POST, then a redirect (over htmx,
    a client redirect); a refusal comes back as a message on the project's settings page."""
    form = TypedDeleteForm(request.POST)
    to = reverse("dashboard:settings", args=[access.project.slug])
    if not form.is_valid():
        messages.error(request, form.errors["confirm"][0])
    else:
        try:
            counts = delete(form.cleaned_data["confirm"])
        except MemoryPortalError as err:
            messages.error(request, f"{err.message} {err.hint}")
        else:
            messages.success(request, message(counts))
            to = done_to
    return HttpResponseClientRedirect(to) if request.htmx else redirect(to)


@project_action
def application_delete(request, access, app_slug):
    actor = actor_of(request)
    application = selectors.application_in_project(
        actor=actor, project=access.project, slug=app_slug
    )
    return _typed_delete(
        request,
        access,
        delete=lambda typed: services.application_delete(
            actor=actor, application=application, confirm=typed
        ),
        done_to=reverse("dashboard:project", args=[access.project.slug]),
        message=lambda counts: (
            f"Deleted application {app_slug}: {counts['notes']} notes scoped to it, "
            f"{counts['recoveries']} recovery records and {counts['repository_links']} "
            f"repository links. {counts['agents_detached']} agents and "
            f"{counts['runs_detached']} runs were detached; they and their private facts stay "
            "in the project."
        ),
    )


@project_action
def project_delete(request, access):
    actor = actor_of(request)
    slug = access.project.slug
    return _typed_delete(
        request,
        access,
        delete=lambda typed: services.project_delete(
            actor=actor, project=access.project, confirm=typed
        ),
        done_to=reverse("dashboard:projects"),
        message=lambda counts: (
            f"Deleted project {slug}: {counts['notes']} notes, {counts['recoveries']} recovery "
            f"records, {counts['scratchpad_items']} scratchpad items, "
            f"{counts['applications']} applications, {counts['agents']} agents and "
            f"{counts['runs']} runs. Its audit events stay."
        ),
    )


@project_page
@refusal_edge
def project_export(request, access):
    """The project's memory as the API's export (NDJSON, streamed): managers, from Settings and
    the Reset danger zone."""
    lines = project_export_lines(actor=actor_of(request), project=access.project)
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{access.project.slug}-{stamp}.jsonl"'
    return response
