"""Import an export from the dashboard (administrators): a dry run first, which checks the
whole file and lists every problem by its line without writing anything, then the import,
whose phases stream to the page's progress bar (the script asks for them with
`X-Import-Progress: ndjson`). Without JavaScript both are plain form posts answered by the
page. The file is checked and written by the same ImportJob as the command and the admin API."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from memory_portal.failures import INTERNAL_ERROR
from memory_portal.memory.access import require_administrator
from memory_portal.memory.errors import MemoryPortalError, retryable
from memory_portal.memory.portability import ImportInvalid, ImportJob, decoded_lines
from memory_portal.memory.validation import is_slug

from ..forms import ImportForm
from .base import actor_of, person_view

logger = logging.getLogger(__name__)

PAGE = "dashboard/import.html"
REPORT = f"{PAGE}#report"
STREAM_HEADER = "X-Import-Progress"
# The record types a person counts, in this order (the header, project, setting and end lines
# are the file's frame), by their names in one and many.
RECORD_NAMES = {
    "note": ("note", "notes"),
    "recovery": ("recovery", "recoveries"),
    "agent": ("agent", "agents"),
    "application": ("application", "applications"),
    "member": ("member", "members"),
    "event": ("audit event", "audit events"),
}


def count_phrase(counts: dict[str, int]) -> str:
    """`{"note": 3, "recovery": 1}` as "3 notes, 1 recovery" ("" when all are zero)."""
    return ", ".join(
        f"{counts[name]:,} {one if counts[name] == 1 else many}"
        for name, (one, many) in RECORD_NAMES.items()
        if counts.get(name)
    )


def _streaming(request) -> bool:
    return request.headers.get(STREAM_HEADER) == "ndjson"


def _answer(request, *, form, status: int = 200, **context):
    """The report: alone for the page's script (htmx or the import's stream), else the page.
    htmx swaps only a 2xx answer: a refused file's report is its content, not a failure."""
    template = REPORT if request.htmx or _streaming(request) else PAGE
    status = 200 if request.htmx else status
    return render(request, template, {"form": form, **context}, status=status)


def _administrator(request):
    actor = actor_of(request)
    require_administrator(actor, "import a project")
    return actor


def _job(request, actor) -> tuple[ImportForm, ImportJob | None, dict]:
    """The posted form and, when it and the file are fine, the checked job; otherwise what the
    report shows instead (`problems`)."""
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return form, None, {}
    try:
        lines = decoded_lines(form.cleaned_data["file"])
        job = ImportJob(
            actor=actor,
            lines=lines,
            project_slug=form.cleaned_data["project"] or None,
            grant_members=form.cleaned_data["grant_members"],
        )
    except ImportInvalid as exc:
        return form, None, {"problems": exc.shown(), "refusal": exc.refusal()}
    return form, job, {}


def _summary(job: ImportJob) -> dict:
    exists = job.project_exists()
    return {
        "lines": job.line_count,
        "counts": count_phrase(job.lines_by_type()),
        "from_project": job.header.project,
        "into": job.slug,
        "exists": exists,
        "remapped": job.remap,
        "vectors": job.to_embed,
        "members": job.members(),
    }


def _imported(report) -> dict:
    return {
        "imported": report,
        "added": count_phrase(report.counts),
        "unchanged": count_phrase(report.unchanged),
    }


@require_GET
@person_view
def import_page(request):
    _administrator(request)
    wanted = request.GET.get("project", "")  # Settings' "Import a file into this project"
    initial = {"project": wanted if is_slug(wanted) else ""}
    return render(request, PAGE, {"form": ImportForm(initial=initial)})


@require_POST
@person_view
def import_check(request):
    """The dry run: the whole file checked, nothing written."""
    form, job, failed = _job(request, _administrator(request))
    if job is None:
        return _answer(request, form=form, status=400, **failed)
    return _answer(request, form=form, checked=_summary(job))


@require_POST
@person_view
def import_run(request):
    form, job, failed = _job(request, _administrator(request))
    if job is None:
        return _answer(request, form=form, status=400, **failed)
    if _streaming(request):
        response = StreamingHttpResponse(_events(request, job), content_type="application/x-ndjson")
        response["Cache-Control"] = "no-store"
        response["X-Accel-Buffering"] = "no"  # a proxy passes each phase on as it comes
        return response
    try:
        report = job.run()
    except MemoryPortalError as err:
        return _answer(request, form=form, status=err.status, refusal=err)
    return _answer(request, form=ImportForm(), **_imported(report))


def _events(request, job: ImportJob) -> Iterator[str]:
    """The import's phases, one JSON object a line, for the progress bar; the last one
    (`done` or `failed`) carries the report to show."""

    def event(**values) -> str:
        return json.dumps(values) + "\n"

    def report(**context) -> str:
        return render_to_string(REPORT, context, request=request)

    yield event(phase="checked", lines=job.line_count, vectors=job.to_embed)
    try:
        for done, total in job.embed():
            yield event(phase="vectors", done=done, total=total)
        yield event(phase="writing")
        imported = job.write()
    except MemoryPortalError as err:
        yield event(phase="failed", html=report(refusal=err))
        return
    except Exception as exc:  # the answer has begun: the failure can only be told in it
        refusal = retryable(exc)
        if refusal is None:
            logger.exception("import failed")
            refusal = INTERNAL_ERROR
        yield event(phase="failed", html=report(refusal=refusal))
        return
    yield event(phase="done", html=report(**_imported(imported)))
