"""The dashboard's read-only pages of a project (and the projects list): one selector each,
rendered with the project's header."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import render
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from memory_portal.memory import selectors
from memory_portal.memory.access import is_administrator
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.recall.service import recall
from memory_portal.memory.validation import REVIEW_REASON_MAX

from ..charts import overview_charts
from ..forms import BULK_ACTIONS, AgentForm, FactForm, stage_choices
from ..tables import PAGE_MAX, PER_PAGE_CHOICES, NoteTable, reads_offset
from .base import (
    MEMORY_PAGE,
    SETTINGS_PAGE,
    actor_of,
    note_table,
    person_view,
    project_context,
    project_page,
    refusal_edge,
    render_page,
    safe_path,
    sorted_notes,
)

PROJECTS_PER_PAGE = 48


@require_GET
@person_view
def projects(request):
    """The person's projects, PROJECTS_PER_PAGE cards a page. A page reads one more row than
    it shows to know whether another follows, so nothing counts (a superuser of a large
    deployment sees every project)."""
    try:
        number = min(max(1, int(request.GET.get("page", "1"))), PAGE_MAX)
    except ValueError:
        number = 1
    start = (number - 1) * PROJECTS_PER_PAGE
    overview = selectors.projects_overview(actor=actor_of(request))
    rows = list(overview[start : start + PROJECTS_PER_PAGE + 1])
    context = {
        "rows": rows[:PROJECTS_PER_PAGE],
        "number": number,
        "previous": number - 1 if number > 1 else None,
        "next": number + 1 if len(rows) > PROJECTS_PER_PAGE else None,
        "cap": settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"],
    }
    return render(request, "dashboard/projects.html", context)


@project_page
def project_memory(request, access):
    queryset = selectors.notes_table_ids(actor=actor_of(request), project=access.project)
    filterset, table = note_table(request, access, queryset)
    return render_page(
        request,
        access,
        MEMORY_PAGE,
        tab="notes",
        filter=filterset,
        table=table,
        per_page_choices=PER_PAGE_CHOICES,
        bulk_actions=BULK_ACTIONS,
        agent_count=filterset.agent_count,
        quick=_quick_filters(request),
    )


def _quick_filters(request) -> dict:
    """Above the notes table: the search box and the agent (taken out of the Filters card)
    and the date presets people use, as the table's own `created_from` / `created_to`."""
    today = timezone.localdate()
    ranges = [
        ("Today", today, today),
        ("Yesterday", today - timedelta(days=1), today - timedelta(days=1)),
        ("Last 7 days", today - timedelta(days=6), today),
    ]
    given = (request.GET.get("created_from", ""), request.GET.get("created_to", ""))
    presets = [
        {
            "label": label,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "active": given == (start.isoformat(), end.isoformat()),
        }
        for label, start, end in ranges
    ]
    return {"fields": ("q", "agent"), "presets": presets}


@dataclass(frozen=True)
class Steps:
    """Where a note page stands in the list it was opened from: the list (its URL and name),
    the note's place in it, and the previous and next notes' pages (which keep the list)."""

    origin: str
    label: str
    position: int
    total: int
    previous: str | None
    next: str | None


STEPS_MAX = 5_000  # the ids a list's steps read at most (a project stores 2,000)


def note_steps(request, access, note_id: str) -> Steps | None:
    """The steps of a note page opened from a list of this project's notes — its notes table,
    an agent's page or the review queue — given as `from` (that list's path and query, as
    portal.js adds it to a note's link): the list's own filters and order (`sorted_notes`, the
    review section's). None without a list, or when the note is no longer in it."""
    slug = access.project.slug
    origin = safe_path(request.GET.get("from", ""))
    if not origin.startswith(f"/p/{slug}/"):
        return None
    parts = urlsplit(origin)
    try:
        match = resolve(parts.path)
    except Resolver404:
        return None
    actor = actor_of(request)
    rows = selectors.notes_table_ids(actor=actor, project=access.project)
    query = QueryDict(parts.query)
    if match.url_name == "project":
        ordered, label = sorted_notes(query, access, rows)[1].data.data, "Notes"
    elif match.url_name == "agent":
        try:
            agent = agent_of(request, access, match.kwargs["agent_id"])
        except MemoryPortalError:  # a `from` naming no agent of the project: no steps
            return None
        fixed = {"agent": agent.pk}
        ordered = sorted_notes(query, access, rows, fixed=fixed)[1].data.data
        label = f"Notes of {agent.name}"
    elif match.url_name == "review":
        found = selectors.review_section_of(actor=actor, project=access.project, note_id=note_id)
        if found is None:
            return None
        section, ordered = found
        label = f"Review queue · {section.title}"
    else:
        return None
    ids = list(ordered.values_list("pk", flat=True)[:STEPS_MAX])
    if note_id not in ids:
        return None
    at = ids.index(note_id)
    keep = "?" + urlencode({"from": origin})

    def page(i: int) -> str | None:
        if not 0 <= i < len(ids):
            return None
        return reverse("dashboard:note", args=[slug, ids[i]]) + keep

    return Steps(origin, label, at + 1, len(ids), page(at - 1), page(at + 1))


@project_page
def note_detail(request, access, note_id):
    actor = actor_of(request)
    detail = selectors.note_detail(actor=actor, project=access.project, note_id=note_id)
    steps = note_steps(request, access, note_id)
    reads = selectors.reads_page(
        selectors.note_reads(actor=actor, project=access.project, note_id=note_id),
        offset=reads_offset(request),
    )
    return render_page(
        request,
        access,
        "dashboard/note.html",
        tab="notes",
        detail=detail,
        note=detail.note,
        reads=reads,
        reach=selectors.note_reach(note_id=note_id),
        recent_reach=selectors.reach_of([note_id]),
        steps=steps,
        review_reason_max=REVIEW_REASON_MAX,
        # After a decision on the page, on to the list's next note (as in the review queue).
        after=steps.next if steps and steps.next else request.get_full_path(),
        read_retention_days=settings.MEMORY_PORTAL["READ_RETENTION_DAYS"],
    )


@project_page
def review(request, access):
    queue = selectors.review_queue(actor=actor_of(request), project=access.project)
    sections = [
        {
            "key": section.key,
            "title": section.title,
            "rows": getattr(queue, section.key),
            "total": queue.totals[section.key],
            "table": NoteTable(getattr(queue, section.key), orderable=False),
            "filter_query": urlencode(section.filters),
        }
        for section in selectors.REVIEW_SECTIONS
    ]
    return render_page(
        request,
        access,
        "dashboard/review.html",
        tab="review",
        queue=queue,
        sections=sections,
        bulk_actions=BULK_ACTIONS,
        held=selectors.held_summary(actor=actor_of(request), project=access.project),
    )


@project_page
def recoveries(request, access):
    records = selectors.recoveries_for_actor(actor=actor_of(request), project=access.project)
    page = Paginator(records.order_by("-created_at", "-id"), 50).get_page(request.GET.get("page"))
    return render_page(request, access, "dashboard/recoveries.html", tab="recoveries", page=page)


@project_page
def agents(request, access):
    rows = selectors.agents_overview(actor=actor_of(request), project=access.project)
    form = AgentForm(applications=access.project.applications.order_by("name"))
    return render_page(
        request, access, "dashboard/agents.html", tab="agents", agents=rows, form=form
    )


AGENT_RUNS = 5  # an agent's page lists its latest runs; the Runs tab, filtered, has them all


def agent_page(request, access, agent, *, fact_form=None, status=200, preview=None):
    """An agent's page: its latest runs, its notes table, day log, daily review, recall preview
    and fact form."""
    actor = actor_of(request)
    queryset = selectors.notes_table_ids(actor=actor, project=access.project)
    filterset, table = note_table(request, access, queryset, fixed={"agent": agent.pk})
    runs = selectors.runs_for_project(actor=actor, project=access.project).filter(agent=agent)
    return render_page(
        request,
        access,
        "dashboard/agent.html",
        tab="agents",
        status=status,
        agent=agent,
        filter=filterset,
        fixed_filters=["agent"],
        table=table,
        per_page_choices=PER_PAGE_CHOICES,
        day_log=selectors.agent_day_log(actor=actor, agent=agent),
        routine=selectors.routine_for_agent(actor=actor, agent=agent),
        preview=preview,
        fact_form=fact_form or FactForm(),
        bulk_actions=BULK_ACTIONS,
        runs={
            "latest": selectors.runs_notes_written(list(runs[:AGENT_RUNS])),
            "total": runs.count(),
        },
        keys=list(selectors.agent_keys(actor=actor, agent=agent)) if access.is_manager else [],
        stages=stage_choices(pick=False),
    )


def agent_of(request, access, agent_id: str):
    return selectors.agent_in_project(
        actor=actor_of(request), project=access.project, agent_id=agent_id
    )


@project_page
def agent_detail(request, access, agent_id):
    return agent_page(request, access, agent_of(request, access, agent_id))


@project_page
@refusal_edge
def agent_recall_preview(request, access, agent_id):
    """What a recall for this agent would pick now, with scores; nothing is counted."""
    agent = agent_of(request, access, agent_id)
    query = request.GET.get("query", "")
    preview = recall(actor=actor_of(request), agent_id=agent.pk, query=query, mark=False)
    preview.query = query
    if request.htmx:
        context = {**project_context(access), "agent": agent, "preview": preview}
        return render(request, "dashboard/agent.html#recall_preview", context)
    return agent_page(request, access, agent, preview=preview)


@project_page
def overview(request, access):
    """The project at a glance: server-drawn charts whose every segment opens the notes it
    counts, each with the table of its numbers."""
    data = selectors.project_overview(actor=actor_of(request), project=access.project)
    notes_url = reverse("dashboard:project", args=[access.project.slug])
    return render_page(
        request,
        access,
        "dashboard/overview.html",
        tab="overview",
        overview=data,
        charts=overview_charts(data, notes_url),
        held=selectors.held_summary(actor=actor_of(request), project=access.project),
    )


@project_page
def project_settings(request, access):
    """The project's review policy, its webhook endpoints (managers), its applications
    (managers delete one here) and, for administrators, the project's own delete in its
    danger zone."""
    return settings_page(request, access)


def settings_page(request, access, *, status: int = 200, **context):
    """The Settings page, also as the answer of a webhook form (a new secret, a refusal)."""
    from memory_portal.memory.outbox import SUGGESTED, TYPES
    from memory_portal.memory.webhooks import masked

    actor = actor_of(request)
    hooks = []
    if access.is_manager:
        for webhook in selectors.webhooks_of(actor=actor, project=access.project):
            deliveries = selectors.webhook_deliveries(actor=actor, webhook=webhook)[:10]
            hooks.append(
                {"webhook": webhook, "masked": masked(webhook.url), "deliveries": deliveries}
            )
    return render_page(
        request,
        access,
        SETTINGS_PAGE,
        tab="settings",
        agent_count=access.project.agents.count(),
        status=status,
        applications=selectors.applications_overview(actor=actor, project=access.project),
        can_delete_project=is_administrator(actor),
        webhooks=hooks,
        event_types=TYPES,
        default_types=SUGGESTED,
        hook_verbs=(
            ("test", "Send a test event"), ("pause", "Pause"), ("resume", "Resume"),
            ("rotate", "Rotate secret"), ("delete", "Delete"),
        ),
        **context,
    )


