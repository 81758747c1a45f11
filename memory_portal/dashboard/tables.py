"""django-tables2 tables of the dashboard. The notes table's rows are drawn by the `note_row`
partial of `dashboard/project_memory.html` (so an htmx action can redraw one row); the table
class owns the columns, their order, sorting and pagination."""

from __future__ import annotations

import django_tables2 as tables
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django_tables2.paginators import LazyPaginator

from memory_portal.memory.models import AuditEvent, Note, Run

PER_PAGE_CHOICES = (25, 50, 100)
# Past any page a table can have; bounding the number keeps the SQL OFFSET within the
# database's integers (an out-of-range page then shows the last page, or the first of the
# audit log, whose length is not counted).
PAGE_MAX = 1_000_000


class NoteTable(tables.Table):
    select = tables.Column(
        verbose_name="Select", accessor="pk", orderable=False, attrs={"th": {"class": "c-select"}}
    )
    id = tables.Column(verbose_name="Id", attrs={"th": {"class": "c-id"}})
    kind = tables.Column(verbose_name="Kind")
    content = tables.Column(
        verbose_name="Content", orderable=False, attrs={"th": {"class": "c-content"}}
    )
    # Trust and status share a cell (two badges) so the table fits a 1280 px screen.
    trust = tables.Column(verbose_name="Trust · status")
    scope = tables.Column(verbose_name="Scope")
    provenance = tables.Column(
        verbose_name="Provenance", accessor="created_by_stage", orderable=False
    )
    evidence = tables.Column(verbose_name="Evidence", accessor="evidence_path", orderable=False)
    tags = tables.Column(verbose_name="Tags", accessor="tags_text", orderable=False)
    # Likewise created and expires.
    created = tables.Column(verbose_name="Created · expires", accessor="created_at")
    recalls = tables.Column(verbose_name="Recalls", accessor="recall_count")
    actions = tables.Column(
        verbose_name="Actions",
        empty_values=(),
        orderable=False,
        attrs={"th": {"class": "c-actions"}},
    )

    class Meta:
        model = Note
        fields = ()
        order_by = ("-created",)
        per_page = 50
        empty_text = "No notes match these filters."


class RunTable(tables.Table):
    id = tables.Column(verbose_name="Run", linkify=False)
    agent = tables.Column(verbose_name="Agent", accessor="agent__name")
    status = tables.Column(verbose_name="Status")
    task_key = tables.Column(verbose_name="Task key")
    tool_calls = tables.Column(verbose_name="Tool calls")
    notes_written = tables.Column(verbose_name="Notes written")
    started = tables.Column(verbose_name="Started", accessor="started_at")
    finished = tables.Column(verbose_name="Finished", accessor="finished_at")

    class Meta:
        model = Run
        fields = ()
        order_by = ("-started",)
        per_page = 50
        empty_text = "No runs yet: an orchestrator creates a run for each agent task."


class AuditTable(tables.Table):
    """Paginated without a full count (LazyPaginator): the log only grows."""

    created = tables.Column(verbose_name="When", accessor="created_at", orderable=False)
    project = tables.Column(verbose_name="Project", accessor="project_ref", orderable=False)
    actor = tables.Column(verbose_name="Actor", accessor="actor_label", orderable=False)
    action = tables.Column(verbose_name="Action", orderable=False)
    subject = tables.Column(verbose_name="Subject", accessor="note_ref", orderable=False)
    details = tables.Column(verbose_name="Details", orderable=False)

    class Meta:
        model = AuditEvent
        fields = ()
        per_page = 50
        empty_text = "No audit events match these filters."


def paginate(table: tables.Table, request, *, lazy: bool = False) -> tables.Table:
    """Sort and paginate from the query string. `per_page` is one of PER_PAGE_CHOICES, and an
    out-of-range page (past the last, below the first, or past any integer the database
    holds) shows the nearest one instead of failing."""
    sort = request.GET.getlist(table.prefixed_order_by_field)
    if sort and table.orderable:
        table.order_by = sort
    try:
        per_page = int(request.GET.get("per_page", ""))
    except ValueError:
        per_page = table._meta.per_page
    if per_page not in PER_PAGE_CHOICES:
        per_page = table._meta.per_page
    try:
        page = int(request.GET.get(table.prefixed_page_field, "1"))
    except ValueError:
        page = 1
    paginator_class = LazyPaginator if lazy else Paginator
    try:
        table.paginate(
            paginator_class=paginator_class, per_page=per_page, page=min(max(page, 1), PAGE_MAX)
        )
    except (EmptyPage, PageNotAnInteger):
        last = 1 if lazy else table.paginator.num_pages
        table.page = table.paginator.page(last)
    return table
