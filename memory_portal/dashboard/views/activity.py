"""What happened in a project: its runs (a run's page, delete, revert and its undo) and the
audit log."""

from __future__ import annotations

from django.db.models import Count
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import RunStatus
from memory_portal.memory.services.revert import CONFIRM_THRESHOLD, run_revert_latest

from ..forms import BULK_ACTIONS, DeleteRunForm, RunStatusForm
from ..tables import (
    PER_PAGE_CHOICES,
    AuditTable,
    NoteTable,
    RunTable,
    keyset_page,
    paginate,
    reads_offset,
)
from .base import (
    actor_of,
    done,
    note_ids_of,
    note_page,
    person_view,
    project_action,
    project_page,
    project_view,
    refusal,
    render_page,
)


@project_page
def runs(request, access):
    """The project's runs, newest first, filtered by agent, status, task key and start date
    (RunFilter, the admin API's list's filters); `?read=<note id>` (repeated): only the runs
    served those notes in the last 30 days, the blast radius a veto's toast links to."""
    read = note_ids_of(request, "read") if "read" in request.GET else None
    rows = selectors.runs_for_project(actor=actor_of(request), project=access.project, read=read)
    agents = list(access.project.agents.order_by("name"))
    filterset = selectors.RunFilter(
        request.GET, queryset=rows, project=access.project, agents=agents
    )
    rows = filterset.qs
    by_count = "notes_written" in request.GET.get("sort", "")
    if by_count:  # sorting by it needs every run's count; otherwise the page counts its own
        rows = rows.annotate(notes_written=Count("notes"))
    table = paginate(RunTable(rows), request)
    if not by_count:
        selectors.runs_notes_written([row.record for row in table.page.object_list])
    return render_page(
        request, access, "dashboard/runs.html", tab="runs", table=table, read=read, filter=filterset
    )


@project_page
def run_detail(request, access, run_id):
    actor = actor_of(request)
    detail = selectors.run_detail(actor=actor, project=access.project, run_id=run_id)
    reads = selectors.reads_page(
        selectors.run_reads(actor=actor, project=access.project, run_id=run_id),
        offset=reads_offset(request),
        changes=True,
    )
    return render_page(
        request,
        access,
        "dashboard/run.html",
        tab="runs",
        detail=detail,
        run=detail.run,
        revert=run_revert_latest(run=detail.run),
        reads=reads,
        table=note_page(request, access, NoteTable(detail.notes)),
        delete_form=DeleteRunForm(),
        bulk_actions=BULK_ACTIONS,
    )


def _run_of(request, access, run_id: str):
    """The run of the URL and its page (where a change on it comes back to)."""
    run = selectors.run_in_project(actor=actor_of(request), project=access.project, run_id=run_id)
    return run, reverse("dashboard:run", args=[access.project.slug, run.pk])


@project_action
def run_status(request, access, run_id):
    """Finish a running run as succeeded or failed (its token stops working at once), or
    correct a finished run's status: what an orchestrator reports, for a run none will (a
    script that died, a key's run nobody finished)."""
    run, run_page = _run_of(request, access, run_id)
    form = RunStatusForm(request.POST)
    if not form.is_valid():
        return refusal(request, to=run_page, why="Pick succeeded or failed.")
    status, was = form.cleaned_data["status"], run.status
    try:
        services.run_update(actor=actor_of(request), run=run, status=status)
    except MemoryPortalError as err:
        return refusal(request, to=run_page, why=err)
    if was == RunStatus.RUNNING:
        said = f"Finished run {run.pk} as {status}: its token no longer works."
    else:
        said = f"Run {run.pk} is now marked {status}."
    return done(request, run_page, said)


@project_action
def run_delete(request, access, run_id):
    run, run_page = _run_of(request, access, run_id)
    if not DeleteRunForm(request.POST).is_valid():
        return refusal(request, to=run_page, why="Tick the confirmation box to delete the run.")
    try:
        counts = services.run_delete(actor=actor_of(request), run=run)
    except MemoryPortalError as err:
        return refusal(request, to=run_page, why=err)
    return done(
        request,
        reverse("dashboard:runs", args=[access.project.slug]),
        f"Deleted run {run_id} and {counts['scratchpad_items']} scratchpad items; "
        "its notes keep their provenance.",
    )


@project_view(require_http_methods(["GET", "POST"]))
def run_revert(request, access, run_id):
    """The revert of a run: GET shows the impact preview (managers), POST applies it — with
    the reviewed notes ticked and, above the threshold, the run id typed — then redirects to
    the run page."""
    actor = actor_of(request)
    run, run_page = _run_of(request, access, run_id)
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
            again = reverse("dashboard:run-revert", args=[access.project.slug, run.pk])
            return refusal(request, to=again, why=err)
        return done(
            request,
            run_page,
            f"Reverted run {run.pk} ({revert.pk}): {len(plan.forget)} forgotten, "
            f"{len(plan.veto) + len(plan.day_rows)} vetoed, {len(plan.bring_back)} brought back.",
        )
    plan, _ = services.run_revert(actor=actor, run=run, dry_run=True)
    return render_page(
        request,
        access,
        "dashboard/run_revert.html",
        tab="runs",
        run=run,
        plan=plan,
        threshold=CONFIRM_THRESHOLD,
        confirm_possible=plan.changes + len(plan.reviewed) > CONFIRM_THRESHOLD,
    )


@project_action
def run_revert_undo(request, access, run_id):
    run, run_page = _run_of(request, access, run_id)
    revert = run_revert_latest(run=run)
    if revert is None:
        return refusal(request, to=run_page, why=f"Run {run.pk} has no revert to undo.")
    try:
        result = services.run_revert_undo(actor=actor_of(request), revert_id=revert.pk)
    except MemoryPortalError as err:
        return refusal(request, to=run_page, why=err)
    skipped = f"; {len(result.skipped)} changed since and left alone" if result.skipped else ""
    return done(
        request,
        run_page,
        f"Undid revert {revert.pk}: {len(result.restored)} notes put back{skipped}.",
    )


@require_GET
@person_view
def audit(request):
    actor = actor_of(request)
    slug = request.GET.get("project", "").strip()
    # 404 for a project not theirs (or none by that slug)
    project = selectors.project_access(actor=actor, slug=slug).project if slug else None
    filterset = selectors.AuditFilter(
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
        "known_actions": selectors.KNOWN_ACTIONS,
    }
    return render(request, "dashboard/audit.html", context)
