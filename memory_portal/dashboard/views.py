"""Dashboard views: parse the request, call one selector or service per change, render. The
rules live in memory_portal.memory; a refusal (MemoryPortalError) becomes a message or a toast,
and anything of a project a person does not belong to is a 404."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event
from django_tables2.rows import BoundRows

from memory_portal.memory import recall, selectors, services
from memory_portal.memory.access import is_administrator
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import Note
from memory_portal.memory.services.revert import CONFIRM_THRESHOLD, run_revert_latest

from .filters import KNOWN_ACTIONS, AuditFilter, NoteFilter
from .forms import (
    BULK_ACTIONS,
    ArchiveForm,
    BulkForm,
    DeleteRunForm,
    EditForm,
    FactForm,
    LiftForm,
    ResetForm,
    ThrottledAuthenticationForm,
    TypedDeleteForm,
)
from .tables import PER_PAGE_CHOICES, AuditTable, NoteTable, RunTable, keyset_page, paginate

NOT_FOUND_CODES = {"not_found", "memory_not_found", "memory_recovery_not_found"}
MEMORY_PAGE = "dashboard/project_memory.html"


# --- Plumbing -------------------------------------------------------------------------------


class LoginView(auth_views.LoginView):
    """Django's login with failed attempts throttled per (username, client address)."""

    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response


def person_view(view: Callable) -> Callable:
    """Logged-in people only (htmx calls get a client redirect to the login page); a
    not-found refusal from a selector or service is a 404, so outsiders learn nothing."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            if request.htmx:
                return HttpResponseClientRedirect(
                    f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': request.path})}"
                )
            return redirect_to_login(request.get_full_path())
        try:
            return view(request, *args, **kwargs)
        except MemoryPortalError as err:
            if err.code in NOT_FOUND_CODES:
                raise Http404(err.message) from err
            # A refusal no view expected: say it plainly rather than fail.
            if request.htmx:
                return _error_toast(err.message, err.hint)
            context = {"error": err}
            return render(request, "dashboard/refused.html", context, status=err.status)

    return wrapper


def refusal_edge(view: Callable) -> Callable:
    """The refusal edge of a change on a project page: a refusal (MemoryPortalError) that
    says not-found is a 404; any other is a toast over htmx (nothing swapped), or a message on
    the page the person comes back to."""

    @functools.wraps(view)
    def wrapper(request, slug, *args, **kwargs):
        try:
            return view(request, slug, *args, **kwargs)
        except MemoryPortalError as err:
            if err.code in NOT_FOUND_CODES:
                raise Http404(err.message) from err
            return _refusal(request, slug, err.message, err.hint)

    return wrapper


def _actor(request) -> Actor:
    """The person acting, one per request: it remembers their role in each project it met."""
    actor = getattr(request, "memory_actor", None)
    if actor is None:
        actor = request.memory_actor = Actor.person(request.user, for_request=True)
    return actor


def _access(request, slug: str) -> selectors.ProjectAccess:
    return selectors.project_access(actor=_actor(request), slug=slug)


def _project_context(access: selectors.ProjectAccess, *, fresh: bool = False) -> dict:
    """What every project page's header shows: the switch and the counters."""
    project = access.project
    setting = selectors.setting_get(project=project) if fresh else project.memory_setting
    return {
        "access": access,
        "project": project,
        "setting": setting,
        "counts": selectors.project_counts(project=project),
        "cap": settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"],
    }


def _next_url(request, access: selectors.ProjectAccess) -> str:
    return _back_to(request, access.project.slug)


def _back_to(request, slug: str) -> str:
    """Where a no-JavaScript POST returns: the page it came from — a path on this site. Not
    a bare word either: `redirect()` would look it up as a URL name (and fail, or go there)."""
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate.startswith("/") and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return reverse("dashboard:project", args=[slug])


def _toast(response: HttpResponse, level: str, message: str, hint: str = "") -> HttpResponse:
    return trigger_client_event(
        response, "toast", {"level": level, "message": message, "hint": hint}
    )


def _error_toast(message: str, hint: str = "") -> HttpResponse:
    """A refusal over htmx: nothing is swapped, an error toast says why."""
    response = HttpResponse("")
    response["HX-Reswap"] = "none"
    return _toast(response, "error", message, hint)


def _refusal(request, slug: str, message: str, hint: str | None = None) -> HttpResponse:
    """Show a refusal where the person is: a toast (htmx, nothing swapped) or a message on the
    page they come back to."""
    if request.htmx:
        return _error_toast(message, hint or "")
    messages.error(request, message if hint is None else f"{message} {hint}")
    return redirect(_back_to(request, slug))


def _form_refused(request, access, form) -> HttpResponse:
    first = next(iter(form.errors.values()))[0]
    return _refusal(request, access.project.slug, first)


def _rows(access, request, note_ids: Iterable[str]) -> list[Note]:
    return selectors.notes_rows(actor=_actor(request), project=access.project, ids=list(note_ids))


def _rows_response(
    request, access, *, note_ids, message: str, oob: bool = False, fresh: bool = True
):
    """After a note action: htmx gets the changed rows and the counters; a plain POST is
    redirected back to the page (and filters) it came from. `fresh=False`: the service locked
    the setting row through `access.project`, which holds it as the change left it."""
    if not request.htmx:
        messages.success(request, message)
        return redirect(_next_url(request, access))
    context = {
        **_project_context(access, fresh=fresh),
        "rows": _rows(access, request, note_ids),
        "next": _next_url(request, access),
        "oob": oob,
    }
    response = render(request, f"{MEMORY_PAGE}#row_response", context)
    return _toast(response, "success", message)


def _note_table(request, access, queryset, *, fixed: dict | None = None, prefix: str = ""):
    """The filtered, sorted, paginated notes table (project, agent and run pages)."""
    data = request.GET.copy()
    for name, value in (fixed or {}).items():
        data[name] = value
    agents = list(access.project.agents.order_by("name"))
    filterset = NoteFilter(data, queryset=queryset, project=access.project, agents=agents)
    table = _note_page(request, access, NoteTable(filterset.qs))
    return filterset, table


def _note_page(request, access, table: NoteTable) -> NoteTable:
    """Paginate a table over `selectors.notes_table_ids`, then load the page's own rows with
    their relations (the ids query stays one table; the joins touch 50 rows)."""
    table = paginate(table, request)
    ids = [row.record.pk for row in table.page.object_list]
    table.page.object_list = BoundRows(_rows(access, request, ids), table)
    return table


# --- Pages ----------------------------------------------------------------------------------


@require_GET
@person_view
def projects(request):
    rows = selectors.projects_overview(actor=_actor(request))
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    return render(request, "dashboard/projects.html", {"rows": rows, "cap": cap})


@require_GET
@person_view
def project_memory(request, slug):
    access = _access(request, slug)
    queryset = selectors.notes_table_ids(actor=_actor(request), project=access.project)
    filterset, table = _note_table(request, access, queryset)
    context = {
        **_project_context(access),
        "filter": filterset,
        "table": table,
        "per_page_choices": PER_PAGE_CHOICES,
        "reset_form": ResetForm(project=access.project),
        "bulk_actions": BULK_ACTIONS,
        "next": request.get_full_path(),
        "tab": "notes",
    }
    return render(request, MEMORY_PAGE, context)


@require_GET
@person_view
def note_detail(request, slug, note_id):
    access = _access(request, slug)
    detail = selectors.note_detail(actor=_actor(request), project=access.project, note_id=note_id)
    context = {
        **_project_context(access),
        "detail": detail,
        "note": detail.note,
        "next": request.get_full_path(),
        "tab": "notes",
    }
    return render(request, "dashboard/note.html", context)


@require_GET
@person_view
def review(request, slug):
    access = _access(request, slug)
    queue = selectors.review_queue(actor=_actor(request), project=access.project)
    sections = [
        ("learned", "Learned notes, oldest first", queue.learned, "trust=learned&status=active"),
        ("expired", "Expired notes", queue.expired, "expired=true&status=active"),
        ("not_recalled", "Not recalled in 30 days", queue.not_recalled, ""),
        ("stale", "Evidence stale", queue.stale, "evidence_stale=true&status=active"),
    ]
    context = {
        **_project_context(access),
        "queue": queue,
        "sections": [
            {
                "key": key,
                "title": title,
                "rows": rows,
                "total": queue.totals[key],
                "table": NoteTable(rows, orderable=False),
                "filter_query": query,
            }
            for key, title, rows, query in sections
        ],
        "bulk_actions": BULK_ACTIONS,
        "next": request.get_full_path(),
        "tab": "review",
    }
    return render(request, "dashboard/review.html", context)


@require_GET
@person_view
def recoveries(request, slug):
    access = _access(request, slug)
    records = selectors.recoveries_for_actor(actor=_actor(request), project=access.project)
    page = Paginator(records.order_by("-created_at", "-id"), 50).get_page(request.GET.get("page"))
    context = {
        **_project_context(access),
        "page": page,
        "next": request.get_full_path(),
        "tab": "recoveries",
    }
    return render(request, "dashboard/recoveries.html", context)


@require_GET
@person_view
def agents(request, slug):
    access = _access(request, slug)
    rows = selectors.agents_overview(actor=_actor(request), project=access.project)
    context = {**_project_context(access), "agents": rows, "tab": "agents"}
    return render(request, "dashboard/agents.html", context)


def _agent_page(request, access, agent, *, fact_form=None, status=200, preview=None):
    actor = _actor(request)
    queryset = selectors.notes_table_ids(actor=actor, project=access.project)
    filterset, table = _note_table(request, access, queryset, fixed={"agent": agent.pk})
    context = {
        **_project_context(access),
        "agent": agent,
        "filter": filterset,
        "fixed_filters": ["agent"],
        "table": table,
        "per_page_choices": PER_PAGE_CHOICES,
        "day_log": selectors.agent_day_log(actor=actor, agent=agent),
        "routine": selectors.routine_for_agent(actor=actor, agent=agent),
        "preview": preview,
        "fact_form": fact_form or FactForm(),
        "bulk_actions": BULK_ACTIONS,
        "next": request.get_full_path(),
        "tab": "agents",
    }
    return render(request, "dashboard/agent.html", context, status=status)


@require_GET
@person_view
def agent_detail(request, slug, agent_id):
    access = _access(request, slug)
    agent = selectors.agent_in_project(
        actor=_actor(request), project=access.project, agent_id=agent_id
    )
    return _agent_page(request, access, agent)


@require_GET
@person_view
@refusal_edge
def agent_recall_preview(request, slug, agent_id):
    """What a recall for this agent would pick now, with scores; nothing is counted."""
    access = _access(request, slug)
    actor = _actor(request)
    agent = selectors.agent_in_project(actor=actor, project=access.project, agent_id=agent_id)
    query = request.GET.get("query", "")
    preview = recall.recall(actor=actor, agent_id=agent.pk, query=query, mark=False)
    preview.query = query
    if request.htmx:
        context = {**_project_context(access), "agent": agent, "preview": preview}
        return render(request, "dashboard/agent.html#recall_preview", context)
    return _agent_page(request, access, agent, preview=preview)


ROUTINE_ACTIONS = {
    "pause": (services.routine_pause, "Paused the daily review of {agent}."),
    "resume": (services.routine_resume, "Resumed the daily review of {agent}."),
    "delete": (services.routine_delete, "Deleted the daily review of {agent}."),
}


@require_POST
@person_view
def agent_routine(request, slug, agent_id, verb):
    """Pause, resume, delete or run the agent's daily review now."""
    access = _access(request, slug)
    actor = _actor(request)
    agent = selectors.agent_in_project(actor=actor, project=access.project, agent_id=agent_id)
    page = reverse("dashboard:agent", args=[slug, agent.pk])
    try:
        if verb == "run":
            review = services.routine_run_now(actor=actor, agent=agent)
            if review is None:
                messages.success(request, f"Daily review of {agent.name} queued.")
                return redirect(page)
            counts = ", ".join(
                f"{k.replace('_', ' ')} {v}"
                for k, v in review.counts.items()
                if not isinstance(v, list)
            )
            message = f"Daily review of {agent.name} {review.status}: {counts or 'nothing to do'}."
            if review.error_code:
                message += f" ({review.error_code})"
        elif verb in ROUTINE_ACTIONS:
            action, text = ROUTINE_ACTIONS[verb]
            action(actor=actor, agent=agent)
            message = text.format(agent=agent.name)
        else:
            raise Http404("No such routine action.")
    except MemoryPortalError as err:
        if err.code in NOT_FOUND_CODES:
            raise Http404(err.message) from err
        messages.error(request, f"{err.message} {err.hint}")
        return redirect(page)
    messages.success(request, message)
    return redirect(page)


@require_GET
@person_view
def runs(request, slug):
    access = _access(request, slug)
    rows = selectors.runs_for_project(actor=_actor(request), project=access.project)
    by_count = "notes_written" in request.GET.get("sort", "")
    if by_count:  # sorting by it needs every run's count; otherwise the page counts its own
        rows = rows.annotate(notes_written=Count("notes"))
    table = paginate(RunTable(rows), request)
    if not by_count:
        selectors.runs_notes_written([row.record for row in table.page.object_list])
    context = {**_project_context(access), "table": table, "tab": "runs"}
    return render(request, "dashboard/runs.html", context)


@require_GET
@person_view
def run_detail(request, slug, run_id):
    access = _access(request, slug)
    detail = selectors.run_detail(actor=_actor(request), project=access.project, run_id=run_id)
    table = _note_page(request, access, NoteTable(detail.notes))
    context = {
        **_project_context(access),
        "detail": detail,
        "run": detail.run,
        "revert": run_revert_latest(run=detail.run),
        "table": table,
        "delete_form": DeleteRunForm(),
        "bulk_actions": BULK_ACTIONS,
        "next": request.get_full_path(),
        "tab": "runs",
    }
    return render(request, "dashboard/run.html", context)


@require_GET
@person_view
def project_settings(request, slug):
    """The project's applications (managers delete one here) and, for administrators, the
    project's own delete in its danger zone."""
    access = _access(request, slug)
    actor = _actor(request)
    context = {
        **_project_context(access),
        "applications": selectors.applications_overview(actor=actor, project=access.project),
        "can_delete_project": is_administrator(actor),
        "tab": "settings",
    }
    return render(request, "dashboard/project_settings.html", context)


@require_GET
@person_view
def audit(request):
    actor = _actor(request)
    slug = request.GET.get("project", "").strip()
    # 404 for a project not theirs (or none by that slug)
    project = selectors.project_access(actor=actor, slug=slug).project if slug else None
    filterset = AuditFilter(
        request.GET or None,
        queryset=selectors.audit_events_for_person(actor=actor),
        project=project,
    )
    try:
        per_page = int(request.GET.get("per_page", ""))
    except ValueError:
        per_page = 50
    page = keyset_page(
        filterset.qs, request, per_page=per_page if per_page in PER_PAGE_CHOICES else 50
    )
    context = {
        "filter": filterset,
        "table": AuditTable([]),
        "page": page,
        "known_actions": KNOWN_ACTIONS,
    }
    return render(request, "dashboard/audit.html", context)


# --- Note actions (one service call each) ---------------------------------------------------


@dataclass(frozen=True)
class NoteVerb:
    """A row action on a note: its service, the form its POST must pass (the form's fields are
    the service's further arguments) and what the person is told (from the note id and the
    service's result)."""

    service: Callable
    message: Callable[[str, Any], str]
    form: type[forms.Form] | None = None


NOTE_VERBS = {
    "approve": NoteVerb(
        services.note_approve,
        lambda note_id, _: f"Approved {note_id}: agents and reviewers see it as reviewed.",
    ),
    "reject": NoteVerb(
        services.note_reject,
        lambda note_id, _: f"Rejected {note_id}: agents will not be served it.",
    ),
    "veto": NoteVerb(
        services.note_veto, lambda note_id, _: f"Vetoed {note_id}. Undo brings it back."
    ),
    "undo": NoteVerb(services.note_undo, lambda note_id, _: f"{note_id} is active again."),
    "unarchive": NoteVerb(
        services.note_unarchive, lambda note_id, _: f"{note_id} is active again."
    ),
    "archive": NoteVerb(
        services.note_archive, lambda note_id, _: f"Archived {note_id}.", ArchiveForm
    ),
    "edit": NoteVerb(
        services.note_edit,
        lambda note_id, result: (
            f"Saved the edit as {result.note.pk}; {note_id} is archived as superseded."
            if result.created
            else f"That text is already live as {result.note.pk}."
        ),
        EditForm,
    ),
    "forget": NoteVerb(
        services.note_forget,
        lambda note_id, recovery: (
            f"Forgot {note_id} (recovery {recovery.pk}). Restore brings it back."
        ),
    ),
    "reverify": NoteVerb(
        services.note_reverify,
        lambda note_id, note: f"Evidence of {note_id} re-verified at {note.evidence_commit[:10]}.",
    ),
}


@require_POST
@person_view
@refusal_edge
def note_action(request, slug, note_id, verb):
    """One row action of NOTE_VERBS (each URL names its verb). The service loads the note of
    this project and authorises the person, once, under the project's lock; the answer is the
    changed row (an edit: both rows) and the counters."""
    action = NOTE_VERBS[verb]
    access = _access(request, slug)
    arguments: dict = {}
    if action.form is not None:
        form = action.form(request.POST)
        if not form.is_valid():
            return _form_refused(request, access, form)
        arguments = form.cleaned_data
    result = action.service(
        actor=_actor(request), note_id=note_id, project=access.project, **arguments
    )
    changed, fresh = [note_id], False
    if isinstance(result, services.notes.WriteResult):
        # An edit goes through the write protocol, whose lock is hand-built SQL that leaves
        # access.project's setting as it was: read the setting again.
        changed, fresh = [result.note.pk, note_id], True
    message = action.message(note_id, result)
    return _rows_response(request, access, note_ids=changed, message=message, fresh=fresh)


@require_POST
@person_view
@refusal_edge
def recovery_restore(request, slug, recovery_id):
    access = _access(request, slug)
    actor = _actor(request)
    recovery = selectors.recovery_in_project(
        actor=actor, project=access.project, recovery_id=recovery_id
    )
    note = services.note_restore(actor=actor, recovery_id=recovery.pk)
    message = f"Restored {note.pk} ({note.status})."
    if request.htmx and request.POST.get("from") == "recoveries":
        context = {**_project_context(access, fresh=True), "recovery": recovery, "restored": note}
        response = render(request, "dashboard/recoveries.html#recovery_response", context)
        return _toast(response, "success", message)
    return _rows_response(request, access, note_ids=[note.pk], message=message)


@require_POST
@person_view
def notes_bulk(request, slug):
    """The same service call for each selected note; what was refused is reported, the rest
    is done."""
    access = _access(request, slug)
    form = BulkForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, access, form)
    actor = _actor(request)
    verb = form.cleaned_data["action"]
    calls = {
        "approve": services.note_approve,
        "reject": services.note_reject,
        "veto": services.note_veto,
        "forget": services.note_forget,
    }
    wanted = form.cleaned_data["ids"]
    in_project = set(
        selectors.notes_table_ids(actor=actor, project=access.project)
        .filter(pk__in=wanted)
        .values_list("pk", flat=True)
    )
    done: list[str] = []
    refusals: list[str] = []
    for note_id in wanted:
        if note_id not in in_project:
            refusals.append(f"{note_id}: not found")
            continue
        try:
            calls[verb](actor=actor, note_id=note_id)
        except MemoryPortalError as err:
            refusals.append(f"{note_id}: {err.message}")
        else:
            done.append(note_id)
    label = BULK_ACTIONS[verb].lower()
    message = f"{BULK_ACTIONS[verb]}: {len(done)} of {len(wanted)} notes."
    if refusals:
        message += f" Could not {label} {len(refusals)}: " + "; ".join(refusals[:5])
    if not done:
        return _refusal(request, slug, message)
    if not request.htmx:
        (messages.warning if refusals else messages.success)(request, message)
        return redirect(_next_url(request, access))
    response = _rows_response(request, access, note_ids=done, message=message, oob=True)
    if refusals:
        response = _toast(response, "warning", message)
    return response


# --- Project memory controls ----------------------------------------------------------------


def _setting_response(request, access, message: str):
    if not request.htmx:
        messages.success(request, message)
        return redirect(_next_url(request, access))
    context = {
        **_project_context(access, fresh=True),
        "reset_form": ResetForm(project=access.project),
    }
    context["next"] = _next_url(request, access)
    response = render(request, f"{MEMORY_PAGE}#setting_response", context)
    return _toast(response, "success", message)


@require_POST
@person_view
@refusal_edge
def memory_enable(request, slug):
    access = _access(request, slug)
    services.memory_enable(actor=_actor(request), project=access.project)
    return _setting_response(
        request, access, "Memory enabled: agents are offered memory tools from their next call."
    )


@require_POST
@person_view
@refusal_edge
def memory_disable(request, slug):
    access = _access(request, slug)
    services.memory_disable(actor=_actor(request), project=access.project)
    return _setting_response(
        request,
        access,
        "Memory disabled: agent calls now answer memory_disabled. Notes are kept.",
    )


@require_POST
@person_view
def memory_reset(request, slug):
    access = _access(request, slug)
    form = ResetForm(request.POST, project=access.project)
    if not form.is_valid():
        messages.error(request, form.errors["confirm_slug"][0])
        return redirect(reverse("dashboard:project", args=[slug]))
    try:
        counts = services.memory_reset(actor=_actor(request), project=access.project)
    except MemoryPortalError as err:
        messages.error(request, f"{err.message} {err.hint}")
        return redirect(reverse("dashboard:project", args=[slug]))
    messages.success(
        request,
        f"Reset {access.project.slug}: deleted {counts['notes']} notes, "
        f"{counts['recoveries']} recovery records and {counts['scratchpad_items']} "
        "scratchpad items.",
    )
    response = redirect(reverse("dashboard:project", args=[slug]))
    if request.htmx:
        return HttpResponseClientRedirect(response.url)
    return response


# --- Deleting applications and projects (typed confirmation, as the reset) ---------------------


def _typed_delete(request, *, delete, refused_to: str, done_to: str, message) -> HttpResponse:
    """A delete behind the typed id: the form checks only that something was typed; the
    service authorises, compares the id and deletes. Plain POST, then a redirect (over htmx,
    a client redirect); a refusal comes back as a message."""
    form = TypedDeleteForm(request.POST)
    to = refused_to
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


@require_POST
@person_view
def application_delete(request, slug, app_slug):
    access = _access(request, slug)
    actor = _actor(request)
    application = selectors.application_in_project(
        actor=actor, project=access.project, slug=app_slug
    )
    return _typed_delete(
        request,
        delete=lambda typed: services.application_delete(
            actor=actor, application=application, confirm=typed
        ),
        refused_to=reverse("dashboard:settings", args=[slug]),
        done_to=reverse("dashboard:project", args=[slug]),
        message=lambda counts: (
            f"Deleted application {app_slug}: {counts['notes']} notes scoped to it, "
            f"{counts['recoveries']} recovery records and {counts['repository_links']} "
            f"repository links. {counts['agents_detached']} agents and "
            f"{counts['runs_detached']} runs were detached; they and their private facts stay "
            "in the project."
        ),
    )


@require_POST
@person_view
def project_delete(request, slug):
    access = _access(request, slug)
    actor = _actor(request)
    return _typed_delete(
        request,
        delete=lambda typed: services.project_delete(
            actor=actor, project=access.project, confirm=typed
        ),
        refused_to=reverse("dashboard:settings", args=[slug]),
        done_to=reverse("dashboard:projects"),
        message=lambda counts: (
            f"Deleted project {slug}: {counts['notes']} notes, {counts['recoveries']} recovery "
            f"records, {counts['scratchpad_items']} scratchpad items, "
            f"{counts['applications']} applications, {counts['agents']} agents and "
            f"{counts['runs']} runs. Its audit events stay."
        ),
    )


# --- Agents, day logs, runs -----------------------------------------------------------------


@require_POST
@person_view
def agent_fact_save(request, slug, agent_id):
    access = _access(request, slug)
    actor = _actor(request)
    agent = selectors.agent_in_project(actor=actor, project=access.project, agent_id=agent_id)
    form = FactForm(request.POST)
    if not form.is_valid():
        return _agent_page(request, access, agent, fact_form=form, status=400)
    try:
        result = services.fact_save(actor=actor, agent_id=agent.pk, text=form.cleaned_data["text"])
    except MemoryPortalError as err:
        if err.code in NOT_FOUND_CODES:
            raise Http404(err.message) from err
        form.add_error("text", f"{err.message} {err.hint}")
        return _agent_page(request, access, agent, fact_form=form, status=400)
    if result.created:
        messages.success(request, f"Saved {result.note.pk} for {agent.name}.")
    else:
        messages.info(request, f"{agent.name} already keeps this fact as {result.note.pk}.")
    return redirect(reverse("dashboard:agent", args=[slug, agent.pk]))


@require_POST
@person_view
@refusal_edge
def day_line_lift(request, slug):
    """Lift one of yesterday's day-log lines into a fact of the same agent."""
    access = _access(request, slug)
    actor = _actor(request)
    form = LiftForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, access, form)
    line = selectors.day_line_get(
        actor=actor,
        project=access.project,
        note_id=form.cleaned_data["note"],
        index=form.cleaned_data["line"],
    )
    result = services.fact_save(actor=actor, agent_id=line.note.owner_agent_id, text=line.text)
    agent_name = line.note.owner_agent.name
    message = (
        f"Saved {result.note.pk} as a fact of {agent_name}."
        if result.created
        else f"{agent_name} already keeps this as {result.note.pk}."
    )
    if not request.htmx:
        messages.success(request, message)
        return redirect(_next_url(request, access))
    lifted = selectors.DayLine(line.note, line.index, line.line, line.text, result.note.pk)
    context = {**_project_context(access, fresh=True), "item": lifted, "oob_counts": True}
    response = render(request, "dashboard/review.html#day_line_response", context)
    return _toast(response, "success", message)


@require_POST
@person_view
def run_delete(request, slug, run_id):
    access = _access(request, slug)
    actor = _actor(request)
    run = selectors.run_in_project(actor=actor, project=access.project, run_id=run_id)
    run_page = reverse("dashboard:run", args=[slug, run.pk])
    form = DeleteRunForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Tick the confirmation box to delete the run.")
        return redirect(run_page)
    try:
        counts = services.run_delete(actor=actor, run=run)
    except MemoryPortalError as err:
        messages.error(request, f"{err.message} {err.hint}")
        return redirect(run_page)
    messages.success(
        request,
        f"Deleted run {run_id} and {counts['scratchpad_items']} scratchpad items; "
        "its notes keep their provenance.",
    )
    return redirect(reverse("dashboard:runs", args=[slug]))


@require_http_methods(["GET", "POST"])
@person_view
def run_revert(request, slug, run_id):
    """The revert of a run: GET shows the impact preview (managers), POST applies it — with
    the reviewed notes ticked and, above the threshold, the run id typed — then redirects to
    the run page."""
    access = _access(request, slug)
    actor = _actor(request)
    run = selectors.run_in_project(actor=actor, project=access.project, run_id=run_id)
    run_page = reverse("dashboard:run", args=[slug, run.pk])
    if request.method == "POST":
        try:
            plan, revert = services.run_revert(
                actor=actor,
                run=run,
                dry_run=False,
                include_reviewed=request.POST.getlist("include_reviewed"),
                confirm=request.POST.get("confirm", "").strip() or None,
            )
        except MemoryPortalError as err:
            messages.error(request, f"{err.message} {err.hint}")
            return redirect(reverse("dashboard:run-revert", args=[slug, run.pk]))
        messages.success(
            request,
            f"Reverted run {run.pk} ({revert.pk}): {len(plan.forget)} forgotten, "
            f"{len(plan.veto) + len(plan.day_rows)} vetoed, {len(plan.bring_back)} brought back.",
        )
        return redirect(run_page)
    plan, _ = services.run_revert(actor=actor, run=run, dry_run=True)
    context = {
        **_project_context(access),
        "run": run,
        "plan": plan,
        "threshold": CONFIRM_THRESHOLD,
        "confirm_possible": plan.changes + len(plan.reviewed) > CONFIRM_THRESHOLD,
        "tab": "runs",
    }
    return render(request, "dashboard/run_revert.html", context)


@require_POST
@person_view
def run_revert_undo(request, slug, run_id):
    access = _access(request, slug)
    actor = _actor(request)
    run = selectors.run_in_project(actor=actor, project=access.project, run_id=run_id)
    run_page = reverse("dashboard:run", args=[slug, run.pk])
    revert = run_revert_latest(run=run)
    if revert is None:
        messages.error(request, f"Run {run.pk} has no revert to undo.")
        return redirect(run_page)
    try:
        result = services.run_revert_undo(actor=actor, revert_id=revert.pk)
    except MemoryPortalError as err:
        messages.error(request, f"{err.message} {err.hint}")
        return redirect(run_page)
    skipped = f"; {len(result.skipped)} changed since and left alone" if result.skipped else ""
    messages.success(
        request, f"Undid revert {revert.pk}: {len(result.restored)} notes put back{skipped}."
    )
    return redirect(run_page)
