"""django-tables2 tables of the dashboard. The notes table's rows are drawn by the
`{% note_rows %}` tag (templatetags/note_rows.py) so an htmx action can redraw one row; the
table class owns the columns, their order, sorting and pagination."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import django_tables2 as tables
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db.models import Q

from memory_portal.memory.models import AuditEvent, Note, Run

PER_PAGE_CHOICES = (25, 50, 100)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Past any page a table can have; bounding the number keeps the SQL OFFSET within the
# database's integers (an out-of-range page then shows the last page).
PAGE_MAX = 1_000_000


def reads_offset(request) -> int:
    """Where a page's list of reads starts (`?reads=40`): a note's readers, a run's reads."""
    try:
        return min(max(0, int(request.GET.get("reads", "0"))), PAGE_MAX)
    except ValueError:
        return 0


class TableMeta:
    """What every table of the dashboard shares: columns declared, never from the model, and
    50 rows a page."""

    fields = ()
    per_page = 50


def note_column(header: str, css: str, **kwargs) -> tables.Column:
    """A column of the notes table: its header, and the class its header and cells share
    (the stylesheet sizes columns by it; on a phone the header is the cell's label)."""
    attrs = {"th": {"class": css}, "td": {"class": css}}
    return tables.Column(verbose_name=header, attrs=attrs, **kwargs)


@dataclass(frozen=True)
class RowColumn:
    """What the Jinja2 row (templates/jinja2/dashboard/note_rows.html) needs of a column: its
    name (which cell macro draws it), its class and its label."""

    name: str
    css: str
    label: str


class NoteTable(tables.Table):
    """The notes table's columns, declared once: the header row is drawn from them, and so is
    every row (`row_columns`), on the notes, agent, run and review pages."""

    select = note_column("Select", "c-select", accessor="pk", orderable=False)
    id = note_column("Id", "c-id")
    kind = note_column("Kind", "c-kind")
    content = note_column("Content", "c-content", orderable=False)
    # Trust and status share a cell (two badges) so the table fits a 1280 px screen.
    trust = note_column("Trust · status", "c-state")
    scope = note_column("Scope", "c-scope")
    provenance = note_column("Provenance", "c-prov", accessor="created_by_stage", orderable=False)
    evidence = note_column("Evidence", "c-evidence", accessor="evidence_path", orderable=False)
    tags = note_column("Tags", "c-tags", accessor="tags_text", orderable=False)
    # Likewise created and expires.
    created = note_column("Created · expires", "c-date", accessor="created_at")
    recalls = note_column("Recalls", "c-num", accessor="recall_count")
    actions = note_column("Actions", "c-actions", empty_values=(), orderable=False)

    class Meta(TableMeta):
        model = Note
        order_by = ("-created",)
        empty_text = "No notes match these filters."

    @classmethod
    def row_columns(cls) -> tuple[RowColumn, ...]:
        return tuple(
            RowColumn(name, column.attrs["td"]["class"], str(column.verbose_name))
            for name, column in cls.base_columns.items()
        )


class RunTable(tables.Table):
    id = tables.Column(verbose_name="Run", linkify=False)
    agent = tables.Column(verbose_name="Agent", accessor="agent__name")
    status = tables.Column(verbose_name="Status")
    task_key = tables.Column(verbose_name="Task key")
    tool_calls = tables.Column(verbose_name="Tool calls")
    notes_written = tables.Column(verbose_name="Notes written")
    started = tables.Column(verbose_name="Started", accessor="started_at")
    finished = tables.Column(verbose_name="Finished", accessor="finished_at")

    class Meta(TableMeta):
        model = Run
        order_by = ("-started",)
        empty_text = "No runs yet: an orchestrator creates a run for each agent task."


class AuditTable(tables.Table):
    """The log's columns; its rows are paged by `keyset_page`, never counted."""

    created = tables.Column(verbose_name="When", accessor="created_at", orderable=False)
    project = tables.Column(verbose_name="Project", accessor="project_ref", orderable=False)
    actor = tables.Column(verbose_name="Actor", accessor="actor_label", orderable=False)
    action = tables.Column(verbose_name="Action", orderable=False)
    subject = tables.Column(verbose_name="Subject", accessor="note_ref", orderable=False)
    details = tables.Column(verbose_name="Details", orderable=False)

    class Meta(TableMeta):
        model = AuditEvent
        empty_text = "No audit events match these filters."


def paginate(table: tables.Table, request) -> tables.Table:
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
    try:
        table.paginate(
            paginator_class=Paginator, per_page=per_page, page=min(max(page, 1), PAGE_MAX)
        )
    except (EmptyPage, PageNotAnInteger):
        table.page = table.paginator.page(table.paginator.num_pages)
    return table


@dataclass
class KeysetPage:
    """One page of a newest-first log, found by its neighbour's (created_at, id) rather than
    an OFFSET: page 200 costs what page 1 does."""

    rows: list
    newer: str | None  # cursor of the page before (newer events), None on the first
    older: str | None  # cursor of the page after (older events), None on the last


def keyset_cursor(row) -> str:
    delta = row.created_at - EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{micros}.{row.pk}"


def _parse_cursor(value: str | None):
    micros, _, pk = (value or "").partition(".")
    try:
        return EPOCH + timedelta(microseconds=int(micros)), int(pk)
    except (ValueError, OverflowError):
        return None


def keyset_page(queryset, request, *, per_page: int = 50) -> KeysetPage:
    """`?before=<cursor>` pages to older events, `?after=<cursor>` to newer ones; `queryset`
    is ordered newest first by (created_at, id). A cursor that does not parse is page 1."""
    after = _parse_cursor(request.GET.get("after"))
    before = _parse_cursor(request.GET.get("before"))
    if after:
        at, pk = after
        rows = list(
            queryset.filter(created_at__gte=at)
            .filter(Q(created_at__gt=at) | Q(id__gt=pk))
            .order_by("created_at", "id")[: per_page + 1]
        )
        more = len(rows) > per_page
        rows = rows[:per_page][::-1]
        return KeysetPage(
            rows,
            newer=keyset_cursor(rows[0]) if more and rows else None,
            older=keyset_cursor(rows[-1]) if rows else None,
        )
    if before:
        at, pk = before
        queryset = queryset.filter(created_at__lte=at).filter(Q(created_at__lt=at) | Q(id__lt=pk))
    rows = list(queryset[: per_page + 1])
    more = len(rows) > per_page
    rows = rows[:per_page]
    return KeysetPage(
        rows,
        newer=keyset_cursor(rows[0]) if before and rows else None,
        older=keyset_cursor(rows[-1]) if more else None,
    )
