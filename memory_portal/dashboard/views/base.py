"""The edge every dashboard view shares: login, a refusal as a 404, toast or message, and a
project page's context and rendering."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event
from django_tables2.rows import BoundRows

from memory_portal.memory import selectors
from memory_portal.memory.actors import Actor
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.ids import is_public_id
from memory_portal.memory.models import Note

from ..forms import ThrottledAuthenticationForm
from ..tables import NoteTable, paginate

NOT_FOUND_CODES = {"not_found", "memory_not_found", "memory_recovery_not_found"}
# What a toast (an HX-Trigger header) or a message repeats of a refusal, at most: a form's
# error can quote the value sent ("Select a valid choice. … is not one of the available
# choices."), and a header of 64 KB is one that clients and proxies refuse.
SHOWN_MAX = 600  # a bulk action's toast names up to five refusals
SECTION_KEYS = [section.key for section in selectors.REVIEW_SECTIONS]
MEMORY_PAGE = "dashboard/project_memory.html"
SETTINGS_PAGE = "dashboard/project_settings.html"


def with_passwords(view: Callable) -> Callable:
    """A page of password login or reset: not found when everyone signs in through the
    identity provider (MEMORY_PORTAL_OIDC_ONLY)."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if settings.OIDC_ONLY:
            raise Http404("Password sign-in is switched off on this server.")
        return view(request, *args, **kwargs)

    return wrapper


class LoginView(auth_views.LoginView):
    """Django's login with failed attempts throttled per (username, client address), and
    "Sign in with …" when single sign-on is set up (the form alone under OIDC_ONLY)."""

    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        if settings.OIDC_ONLY:  # nothing read, nothing counted: the page, refusing
            response = self.get(request, *args, **kwargs)
            response.status_code = 403
            return response
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            sso=settings.SSO_ENABLED,
            sso_name=settings.OIDC_PROVIDER_NAME,
            passwords=not settings.OIDC_ONLY,
            **kwargs,
        )

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response


def not_found_edge(err: MemoryPortalError) -> None:
    """A refusal that says not-found is a 404, so outsiders learn nothing."""
    if err.code in NOT_FOUND_CODES:
        raise Http404(err.message) from err


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
            not_found_edge(err)
            # A refusal no view expected: say it plainly rather than fail — a toast over
            # htmx, a message on the page a form came from, else a page of its own.
            back = safe_next(request)
            if request.htmx or (request.method == "POST" and back):
                return refusal(request, err, to=back)
            context = {"message": err.message, "hint": err.hint, "code": err.code}
            return render(request, "errors/refused.html", context, status=err.status)

    return wrapper


def refusal_edge(view: Callable) -> Callable:
    """The refusal edge of a change on a project page (inside `project_page` or
    `project_action`): a refusal (MemoryPortalError) that
    says not-found is a 404; any other is a toast over htmx (nothing swapped), or a message on
    the page the person comes back to."""

    @functools.wraps(view)
    def wrapper(request, access, *args, **kwargs):
        try:
            return view(request, access, *args, **kwargs)
        except MemoryPortalError as err:
            not_found_edge(err)
            return refusal(request, err, to=next_url(request, access))

    return wrapper


def project_view(method: Callable) -> Callable[[Callable], Callable]:
    """A view of one project: `view(request, access, …)` for the URL's `slug`, for a person
    only (a project not theirs is a 404), answering the HTTP methods `method` allows."""

    def decorate(view: Callable) -> Callable:
        @method
        @person_view
        @functools.wraps(view)
        def wrapper(request, slug, *args, **kwargs):
            return view(request, access_of(request, slug), *args, **kwargs)

        return wrapper

    return decorate


project_page = project_view(require_GET)
project_action = project_view(require_POST)


def actor_of(request) -> Actor:
    """The person acting, one per request: it remembers their role in each project it met."""
    actor = getattr(request, "memory_actor", None)
    if actor is None:
        actor = request.memory_actor = Actor.person(request.user, for_request=True)
    return actor


def access_of(request, slug: str) -> selectors.ProjectAccess:
    return selectors.project_access(actor=actor_of(request), slug=slug)


def project_context(access: selectors.ProjectAccess, *, fresh: bool = False) -> dict:
    """What every project page's header shows: the switch and the counters."""
    project = access.project
    setting = selectors.setting_get(project=project) if fresh else project.memory_setting
    return {
        "access": access,
        "project": project,
        "setting": setting,
        "counts": selectors.project_counts(project=project),
        "cap": settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"],
        "call_budget": settings.MEMORY_PORTAL["RUN_CALL_BUDGET"],
    }


def render_page(request, access, template: str, *, tab: str, status: int = 200, **context):
    """A project page: its header, its tab, `next` (where its forms come back to) and
    `context`."""
    context = {
        **project_context(access),
        **context,
        "next": request.get_full_path(),
        "tab": tab,
    }
    return render(request, template, context, status=status)


def next_url(request, access: selectors.ProjectAccess) -> str:
    return back_to(request, access.project.slug)


def back_to(request, slug: str) -> str:
    """Where a no-JavaScript POST returns: the page it came from — a path on this site. Not
    a bare word either: `redirect()` would look it up as a URL name (and fail, or go there)."""
    return safe_next(request) or reverse("dashboard:project", args=[slug])


def safe_next(request) -> str:
    """The request's `next` when it is a path on this site, else ''."""
    return safe_path(request.POST.get("next") or request.GET.get("next") or "")


def safe_path(candidate: str) -> str:
    """`candidate` when it is a path on this site (no scheme, no host, not `//…`), else ''
    (Django's check refuses one over 2,048 characters too)."""
    if candidate.startswith("/") and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts=set(), require_https=False
    ):
        return candidate
    return ""


def shown(text: str) -> str:
    """`text` as a toast or a message shows it: at most SHOWN_MAX characters."""
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 1] + "…"


def toast(response: HttpResponse, level: str, message: str, hint: str = "") -> HttpResponse:
    return trigger_client_event(
        response, "toast", {"level": level, "message": shown(message), "hint": shown(hint)}
    )


def error_toast(message: str, hint: str = "") -> HttpResponse:
    """A refusal over htmx: nothing is swapped, an error toast says why."""
    response = HttpResponse("")
    response["HX-Reswap"] = "none"
    return toast(response, "error", message, hint)


def refusal(request, why: MemoryPortalError | str, *, to: str) -> HttpResponse:
    """The dashboard's one answer to a refused change: over htmx an error toast (nothing is
    swapped); otherwise why (and the hint) as a message on the page `to` the person is sent
    back to."""
    message, hint = (why.message, why.hint) if isinstance(why, MemoryPortalError) else (why, "")
    if request.htmx:
        return error_toast(message, hint or "")
    messages.error(request, shown(f"{message} {hint}".strip() if hint else message))
    return redirect(to)


def form_refused(request, access, form) -> HttpResponse:
    """A change's form that did not validate: its first error, as any refusal."""
    first = next(iter(form.errors.values()))[0]
    return refusal(request, first, to=next_url(request, access))


def done(request, to: str, message: str, *, level=messages.success) -> HttpResponse:
    """After a change a person is sent back from: a message and a redirect."""
    level(request, message)
    return redirect(to)


NOTE_IDS_MAX = 200  # the note ids a query names at most (a page's rows, selected)


def note_ids_of(request, name: str) -> list[str]:
    """The note ids the query names as `name` (repeated): well-formed ones, once each, in
    order, at most NOTE_IDS_MAX (the bulk bar's reach, the Runs page's `read`)."""
    wanted = request.GET.getlist(name)[:NOTE_IDS_MAX]
    return [i for i in dict.fromkeys(wanted) if is_public_id(i, "mem")]


def note_rows(request, access, note_ids: Iterable[str]) -> list[Note]:
    return selectors.notes_rows(actor=actor_of(request), project=access.project, ids=list(note_ids))


def rows_response(
    request,
    access,
    *,
    note_ids,
    message: str,
    oob: bool = False,
    fresh: bool = True,
    undo: dict | None = None,
    link: dict | None = None,
):
    """After a note action: htmx gets the changed rows and the counters; a plain POST is
    redirected back to the page (and filters) it came from. `fresh=False`: the service locked
    the setting row through `access.project`, which holds it as the change left it. `oob`
    (or `oob` in the POST): every row comes out of band, in place of its row on the page.
    From the review queue (`section` in the POST: a section's key, or `all`), a row that left
    its section is taken out and every section's count is redrawn. `undo`: the toast's Undo
    (`{"url", "label"}`); `link`: a page it points to (`{"url", "label"}`)."""
    if not request.htmx:
        return done(request, next_url(request, access), message)
    oob = oob or request.POST.get("oob") == "1"
    note_ids = list(note_ids)
    context = {
        **project_context(access, fresh=fresh),
        "next": next_url(request, access),
        "oob": oob,
    }
    section = request.POST.get("section", "")
    keys = SECTION_KEYS if section == "all" else [section] if section in SECTION_KEYS else []
    # A row redrawn in its section keeps sending the section with its next action.
    context["section_key"] = section if section in SECTION_KEYS else ""
    if keys:
        after = selectors.review_sections_after(
            actor=actor_of(request), project=access.project, keys=keys, note_ids=note_ids
        )
        context["gone"] = [i for i in note_ids if i not in after.still_in] if oob else []
        context["section_totals"] = after.totals
        note_ids = [i for i in note_ids if i in after.still_in]
    context["rows"] = note_rows(request, access, note_ids)
    response = render(request, f"{MEMORY_PAGE}#row_response", context)
    return trigger_client_event(
        response,
        "toast",
        {"level": "success", "message": shown(message), "hint": "", "undo": undo, "link": link},
    )


def note_table(request, access, queryset, *, fixed: dict | None = None):
    """The filtered, sorted, paginated notes table (project, agent and run pages)."""
    filterset, table = sorted_notes(request.GET, access, queryset, fixed=fixed)
    return filterset, note_page(request, access, table)


def sorted_notes(query: QueryDict, access, queryset, *, fixed: dict | None = None):
    """The notes table's filters and table as the list's query string `query` gives them,
    filtered and sorted, not paged: the table's page, and the steps of a note page opened
    from it (`note_steps`), follow one order."""
    data = query.copy()
    for name, value in (fixed or {}).items():
        data[name] = value
    agents = list(access.project.agents.order_by("name"))
    filterset = selectors.NoteFilter(data, queryset=queryset, project=access.project, agents=agents)
    filterset.agent_count = len(agents)
    # A text search answers by relevance (NoteFilter.filter_text) unless a column is sorted.
    searched = data.get("q", "").strip() and not data.get("sort")
    table = NoteTable(filterset.qs, order_by=() if searched else None)
    sort = data.getlist(table.prefixed_order_by_field)
    if sort and table.orderable:
        table.order_by = sort
    return filterset, table


def note_page(request, access, table: NoteTable) -> NoteTable:
    """Paginate a table over `selectors.notes_table_ids`, then load the page's own rows with
    their relations (the ids query stays one table; the joins touch 50 rows)."""
    table = paginate(table, request)
    ids = [row.record.pk for row in table.page.object_list]
    table.page.object_list = BoundRows(note_rows(request, access, ids), table)
    return table
