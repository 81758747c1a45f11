"""Connecting agents without a shell (SPEC §3.4a): the Connect page (pick or create an agent,
create a key, paste the configuration), an agent's keys on its page, and the agents a
manager creates, renames and retires."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError

from ..connect import snippets
from ..forms import AgentForm, ConnectForm
from .base import (
    actor_of,
    done,
    form_refused,
    not_found_edge,
    person_view,
    project_action,
    project_page,
    refusal,
    refusal_edge,
    render_page,
)
from .pages import agent_of

CONNECT_PAGE = "dashboard/connect.html"


def _agents(request, access):
    return [a for a in access.project.agents.order_by("name") if a.retired_at is None]


def _applications(access):
    return list(access.project.applications.order_by("name"))


def _application(request, access, slug: str):
    if not slug:
        return None
    return selectors.application_in_project(
        actor=actor_of(request), project=access.project, slug=slug, field="application"
    )


def _base_url(request) -> str:
    return request.build_absolute_uri("/").rstrip("/")


def _connect_page(request, access, *, form, status=200, created=None):
    """The page, with the key just created (`created`: (key, secret)) and its configuration
    when there is one. The secret is in this one answer only: never cached."""
    context = {"form": form}
    if created is not None:
        key, secret = created
        context.update(key=key, secret=secret, snippets=snippets(_base_url(request), secret))
    response = render_page(request, access, CONNECT_PAGE, tab="connect", status=status, **context)
    if created is not None:
        response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@person_view
def connect(request, slug):
    """GET: the form. POST: the agent (made when new) and its new key, then the page again
    with the key shown once and ready-to-paste configuration."""
    access = selectors.project_access(actor=actor_of(request), slug=slug)
    agents = _agents(request, access)
    if request.method == "GET":
        picked = request.GET.get("agent", "")
        form = ConnectForm(
            agents=agents,
            applications=_applications(access),
            initial={"agent": picked} if picked else None,
        )
        return _connect_page(request, access, form=form)
    form = ConnectForm(request.POST, agents=agents, applications=_applications(access))
    if not form.is_valid():
        return _connect_page(request, access, form=form, status=400)
    actor = actor_of(request)
    data = form.cleaned_data
    try:
        with transaction.atomic():
            if data["agent"] == ConnectForm.NEW:
                agent = services.agent_create(
                    actor=actor,
                    project=access.project,
                    name=data["name"],
                    stage=data["stage"],
                    application=_application(request, access, data["application"]),
                )
            else:
                agent = agent_of(request, access, data["agent"])
            created = services.key_create(actor=actor, agent=agent, label=data["label"])
    except MemoryPortalError as err:
        not_found_edge(err)
        form.add_error(None, f"{err.message} {err.hint}")
        return _connect_page(request, access, form=form, status=err.status)
    form = ConnectForm(agents=_agents(request, access), applications=_applications(access))
    return _connect_page(request, access, form=form, status=201, created=created)


@project_page
def key_seen(request, access, agent_id, key_id):
    """The "last seen" line of a key (the Connect page polls it until the first call)."""
    agent = agent_of(request, access, agent_id)
    key = selectors.agent_key_get(actor=actor_of(request), agent=agent, key_id=key_id)
    run = key.runs.order_by("started_at").first() if key.first_used_at else None
    return render(
        request, f"{CONNECT_PAGE}#seen", {"project": access.project, "key": key, "first_run": run}
    )


@project_action
@refusal_edge
def agent_create(request, access):
    form = AgentForm(request.POST, applications=_applications(access))
    if not form.is_valid():
        return form_refused(request, access, form)
    agent = services.agent_create(
        actor=actor_of(request),
        project=access.project,
        name=form.cleaned_data["name"],
        stage=form.cleaned_data["stage"],
        application=_application(request, access, form.cleaned_data["application"]),
    )
    to = reverse("dashboard:agent", args=[access.project.slug, agent.pk])
    return done(request, to, f"Created agent {agent.name}. Create a key for it below.")


@project_action
def agent_change(request, access, agent_id, verb):
    """Rename an agent, change its stage, trust or untrust it, retire it, or revoke one of its
    keys (`verb` is the key's id); a key is created on the Connect page, which shows it once
    with its configuration."""
    actor = actor_of(request)
    agent = agent_of(request, access, agent_id)
    page = reverse("dashboard:agent", args=[access.project.slug, agent.pk])
    try:
        if verb == "rename":
            services.agent_change(actor=actor, agent=agent, name=request.POST.get("name", ""))
            return done(request, page, f"Renamed the agent to {agent.name}.")
        if verb == "stage":
            services.agent_change(actor=actor, agent=agent, stage=request.POST.get("stage", ""))
            return done(request, page, f"{agent.name} is now of stage {agent.stage}.")
        if verb in ("trust", "untrust"):
            services.agent_change(actor=actor, agent=agent, trusted=verb == "trust")
            if agent.trusted:
                return done(request, page, f"{agent.name} is trusted: its notes reach other "
                            "runs at once, and stay in the review queue.")  # fmt: skip
            return done(request, page, f"{agent.name} is no longer trusted.")
        if verb == "retire":
            services.agent_retire(actor=actor, agent=agent)
            return done(request, page, f"Retired {agent.name}: its keys no longer work.")
        key = selectors.agent_key_get(actor=actor, agent=agent, key_id=verb)
        services.key_revoke(actor=actor, key=key)
        return done(request, page, f"Revoked the key “{key.label}” ({key.pk}).")
    except MemoryPortalError as err:
        not_found_edge(err)
        return refusal(request, err, to=page)
