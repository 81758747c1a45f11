"""What happened in a project, for its members: its runs and the audit log."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, QuerySet

from ..access import require_member
from ..actors import Actor
from ..errors import MemoryPortalError
from ..models import ApiToken, AuditEvent, Note, Project, Run, ScratchpadItem, ToolCallCount
from .notes import notes_table_ids
from .reach import readers_of


def runs_for_project(
    *, actor: Actor, project: Project, read: list[str] | None = None
) -> QuerySet[Run]:
    """The project's runs, newest first. `notes_written` is not annotated here: a page counts
    its own runs' notes (`runs_notes_written`) after the LIMIT, not every run's before it.
    `read`: only the runs served any of these notes in the last 30 days — the blast radius a
    veto named (selectors/reach.py)."""
    require_member(actor, project)
    runs = Run.objects.filter(project=project)
    if read is not None:
        runs = runs.filter(pk__in=readers_of(read).run_ids())
    return (
        runs
        .select_related("agent")
        .defer("task_embedding")  # a page never shows the task's vector
        .order_by("-started_at", "-id")
    )


def runs_notes_written(runs: list[Run]) -> list[Run]:
    """Set `notes_written` on each run of one page, in one grouped query over their ids."""
    counts = dict(
        Note.objects.filter(origin_run_id__in=[r.pk for r in runs])
        .values("origin_run_id")
        .annotate(n=Count("id"))
        .values_list("origin_run_id", "n")
    )
    for run in runs:
        run.notes_written = counts.get(run.pk, 0)
    return runs


def run_in_project(*, actor: Actor, project: Project, run_id: str) -> Run:
    require_member(actor, project)
    run = Run.objects.filter(pk=run_id, project=project).select_related("agent", "parent").first()
    if run is None:
        raise MemoryPortalError("not_found", f"No run {run_id} here.", hint="Check the run_ id.")
    run.project = project
    return run


def own_run(*, actor: Actor, run_id: str) -> Run:
    """The calling agent's own run, named in a URL: a run token reaches no other."""
    if not actor.is_agent or actor.run.pk != run_id:
        raise MemoryPortalError(
            "not_found",
            f"No run {run_id} for this token.",
            hint="A run token names its own run; a manager reports on a run at "
            "PATCH /api/admin/projects/{projectId}/runs/{runId}.",
        )
    return actor.run


@dataclass(frozen=True)
class RunDetail:
    run: Run
    tool_calls: list[ToolCallCount]  # by tool, then outcome
    tool_totals: dict[str, int]
    scratchpad: list[ScratchpadItem]
    notes: QuerySet[Note]
    tokens: list[ApiToken]  # a finished run's are all revoked

    @property
    def live_tokens(self) -> int:
        return sum(1 for token in self.tokens if token.revoked_at is None)


def run_detail(*, actor: Actor, project: Project, run_id: str) -> RunDetail:
    run = run_in_project(actor=actor, project=project, run_id=run_id)
    calls = list(ToolCallCount.objects.filter(run=run).order_by("tool", "outcome"))
    totals: dict[str, int] = {}
    for call in calls:
        totals[call.tool] = totals.get(call.tool, 0) + call.count
    items = list(
        ScratchpadItem.objects.filter(
            project=project, top_level_run_id=run.top_level_run_id
        ).order_by("created_at", "id")
    )
    notes = (
        notes_table_ids(actor=actor, project=project)
        .filter(origin_run_ref=run.pk)
        .order_by("-created_at", "-id")
    )
    tokens = list(ApiToken.objects.filter(run=run).order_by("created_at", "id"))
    return RunDetail(
        run=run, tool_calls=calls, tool_totals=totals, scratchpad=items, notes=notes, tokens=tokens
    )


def audit_events_for_person(*, actor: Actor) -> QuerySet[AuditEvent]:
    """The audit log across the person's projects (administrators: everything), newest first."""
    qs = AuditEvent.objects.all()
    if not actor.user.is_superuser:
        qs = qs.filter(project__memberships__user=actor.user)
    return qs.order_by("-created_at", "-id")
