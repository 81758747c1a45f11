"""Revert a run (and its nested runs), with an impact preview, and undo that revert (SPEC §3.5).

A revert is built from the note services: the shared notes the runs wrote that are still
active are forgotten (recovery records), their facts and day rows vetoed — the manager who
reverts is the person recorded on the veto — and what the runs superseded, archived or forgot
comes back where the rules allow. Notes a person already reviewed stay unless ticked. The
RunRevert row keeps exactly what was changed, so its undo (revert_undo.py) puts back that
and nothing else.

Which notes belong to a run is their provenance (`origin_run_ref`): an idempotent write that
was answered with another run's note id did not write that note, so reverting the later run
leaves it alone, and reverting the run that created it removes it for both."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q

from .. import counters
from ..access import require_manager, require_person
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import invalid
from ..ids import new_revert_id
from ..models import (
    REASON_EXPIRED,
    REASON_SUPERSEDED,
    REASON_VETOED,
    AuditEvent,
    Kind,
    Note,
    Recovery,
    Run,
    RunRevert,
    Scope,
    Status,
    Trust,
    live_in_place_q,
    refused_content_q,
)
from . import lifecycle
from .change import ProjectChange, project_change

# More changes than this need the run id typed as a confirmation.
CONFIRM_THRESHOLD = 20
# A restored note's recovery record: its fields a `restore` item keeps as they are (with the
# user's id as `forgotten_by_user` and the time in ISO 8601), so the undo can make it again.
RECOVERY_KEPT = (
    "previous_status",
    "forgotten_by_agent_id",
    "forgotten_by_run_id",
    "forgotten_by_top_level_run_id",
)


@dataclass(frozen=True)
class Kept:
    note: Note
    reason: str


@dataclass
class RevertPlan:
    """The impact preview: what applying the revert would change, grouped."""

    run: Run
    run_ids: list[str]
    forget: list[Note] = field(default_factory=list)  # shared notes (project / application)
    veto: list[Note] = field(default_factory=list)  # the agents' own facts
    day_rows: list[Note] = field(default_factory=list)  # day-log rows, vetoed whole
    reviewed: list[Note] = field(default_factory=list)  # reviewed by a person: kept unless ticked
    selected_reviewed: list[str] = field(default_factory=list)
    bring_back: list[tuple[Note, str]] = field(default_factory=list)  # (note, "superseded"…)
    kept: list[Kept] = field(default_factory=list)  # touched by the runs, left as they are

    @property
    def removals(self) -> list[Note]:
        return self.forget + self.veto + self.day_rows

    @property
    def changes(self) -> int:
        return len(self.removals) + len(self.bring_back)

    @property
    def confirm_required(self) -> bool:
        return self.changes > CONFIRM_THRESHOLD

    def counts(self) -> dict:
        return {
            "forgotten": len(self.forget),
            "vetoed": len(self.veto),
            "day_rows": len(self.day_rows),
            "reviewed_included": len(self.selected_reviewed),
            "reviewed_kept": len(self.reviewed) - len(self.selected_reviewed),
            "brought_back": len(self.bring_back),
            "kept": len(self.kept),
        }


def _run_ids(run: Run) -> list[str]:
    """The run and every run nested under it (Run.parent, any depth)."""
    ids = [run.pk]
    frontier = [run.pk]
    while frontier:
        frontier = list(
            Run.objects.filter(parent_id__in=frontier, project_id=run.project_id).values_list(
                "pk", flat=True
            )
        )
        frontier = [pk for pk in frontier if pk not in ids]
        ids.extend(frontier)
    return ids


def _written_q(run: Run, run_ids: list[str]) -> Q:
    q = Q(origin_run_ref__in=run_ids)
    if run.top_level_run_id == run.pk:  # nested runs whose rows were deleted count too
        q |= Q(top_level_run_id=run.pk)
    return q


def _day_row_shared(note: Note, run_ids: list[str]) -> bool:
    """Did a run outside the reverted ones append lines to this day row?"""
    return (
        AuditEvent.objects.filter(
            note_ref=note.pk, action__in=[AuditAction.DAY_CREATE, AuditAction.DAY_APPEND]
        )
        .exclude(actor_run_id__in=run_ids)
        .exists()
    )


def _blocked_reason(note: Note, removal_ids: set[str]) -> str | None:
    """Why a note the runs replaced, archived or forgot may not come back: never content a
    person vetoed, rejected or forgot (any copy of it in the project), never a rejected note,
    never a second live copy."""
    if note.trust == Trust.REJECTED:
        return "rejected"
    others = Note.objects.filter(project_id=note.project_id).exclude(pk__in=removal_ids | {note.pk})
    if note.content_key and others.filter(refused_content_q([note.content_key])).exists():
        return "content_refused"
    if others.filter(live_in_place_q(note.place_key)).exists():
        return "duplicate_live"
    return None


def _chain_head(note: Note, cache: dict[str, Note]) -> Note:
    """Follow superseded_by to the newest note of the chain."""
    seen = {note.pk}
    while note.superseded_by_id and note.superseded_by_id not in seen:
        nxt = (
            cache.get(note.superseded_by_id)
            or Note.objects.filter(pk=note.superseded_by_id).first()
        )
        if nxt is None:
            break
        cache[nxt.pk] = nxt
        seen.add(nxt.pk)
        note = nxt
    return note


def _plan(run: Run, include_reviewed: list[str] | None) -> RevertPlan:
    run_ids = _run_ids(run)
    plan = RevertPlan(run=run, run_ids=run_ids)
    ticked = set(include_reviewed or [])
    written = list(
        Note.objects.filter(_written_q(run, run_ids), project_id=run.project_id).order_by(
            "created_at", "id"
        )
    )
    written_ids = {n.pk for n in written}
    for note in written:
        if note.status != Status.ACTIVE or note.trust == Trust.REJECTED:
            continue
        if note.trust == Trust.REVIEWED:
            plan.reviewed.append(note)
            if note.pk not in ticked:
                continue
            plan.selected_reviewed.append(note.pk)
        if note.kind == Kind.DAY:
            if _day_row_shared(note, run_ids):
                plan.kept.append(Kept(note, "day_row_shared"))
            else:
                plan.day_rows.append(note)
        elif note.scope == Scope.AGENT:
            plan.veto.append(note)
        else:
            plan.forget.append(note)
    unknown = ticked - {n.pk for n in plan.reviewed}
    if unknown:
        raise invalid(
            "includeReviewed",
            f"{sorted(unknown)[0]} is not a reviewed note this run wrote.",
            hint="Tick only notes listed under reviewed in the preview.",
        )

    removal_ids = {n.pk for n in plan.removals}
    cache = {n.pk: n for n in written}
    # What the runs superseded: a replaced note comes back when the newest note of its chain
    # is one this revert removes (a later replacement by someone else stands).
    replaced = Note.objects.filter(
        project_id=run.project_id,
        status=Status.ARCHIVED,
        archive_reason=REASON_SUPERSEDED,
        superseded_by_id__in=written_ids,
    ).exclude(pk__in=written_ids)
    candidates: list[tuple[Note, str]] = []
    for note in replaced.order_by("created_at", "id"):
        if _chain_head(note, cache).pk in removal_ids:
            candidates.append((note, "superseded"))
    # What the runs archived (free reasons only; the product's own reasons are not an agent's
    # doing) and nobody touched since.
    archived = AuditEvent.objects.filter(
        project_id=run.project_id, action=AuditAction.NOTE_ARCHIVE, actor_run_id__in=run_ids
    ).order_by("id")
    for event in archived:
        note = Note.objects.filter(pk=event.note_ref).first()
        if (
            note is None
            or note.pk in written_ids
            or note.status != Status.ARCHIVED
            or note.archive_reason in (REASON_VETOED, REASON_SUPERSEDED, REASON_EXPIRED)
        ):
            continue
        latest = AuditEvent.objects.filter(note_ref=note.pk).order_by("-id").first()
        if latest is not None and latest.pk == event.pk:
            candidates.append((note, "archived"))
    # What the runs forgot, while its recovery record exists.
    forgotten = (
        Recovery.objects.filter(project_id=run.project_id, forgotten_by_run_id__in=run_ids)
        .exclude(note_id__in=written_ids)
        .select_related("note")
        .order_by("created_at", "id")
    )
    for recovery in forgotten:
        candidates.append((recovery.note, "forgotten"))
    seen: set[str] = set()
    for note, how in candidates:
        if note.pk in seen:
            continue
        seen.add(note.pk)
        reason = _blocked_reason(note, removal_ids)
        if reason is not None:
            plan.kept.append(Kept(note, reason))
        else:
            plan.bring_back.append((note, how))
    return plan


def _bring_back_superseded(change: ProjectChange, note: Note) -> dict:
    item = {
        "note": note.pk,
        "action": "unsupersede",
        "superseded_by": note.superseded_by_id,
        "archived_at": note.archived_at.isoformat() if note.archived_at else None,
    }
    before = counters.state_of(note)
    note.status = Status.ACTIVE
    note.archive_reason = ""
    note.archived_at = None
    note.superseded_by = None
    fields = ("status", "archive_reason", "archived_at", "superseded_by")
    details = {"was": "superseded", "superseded_by": item["superseded_by"]}
    unarchive = AuditAction.NOTE_UNARCHIVE
    change.save_note(note, fields, unarchive, was=before, details=details)
    return item


def run_revert(
    *,
    actor: Actor,
    run: Run,
    dry_run: bool,
    include_reviewed: list[str] | None = None,
    confirm: str | None = None,
) -> tuple[RevertPlan, RunRevert | None]:
    """Preview (dry_run) or apply the revert of `run` and its nested runs, in one transaction
    under the project's setting-row lock. Above CONFIRM_THRESHOLD changes, `confirm` must be
    the run id. Returns the plan and, when applied, the revert record."""
    require_person(actor, what="a revert")
    require_manager(actor, run.project)
    if dry_run:
        return _plan(run, include_reviewed), None
    revert_id = new_revert_id()
    with project_change(run.project, actor=actor) as change:
        plan = _plan(run, include_reviewed)  # judged again under the lock
        if plan.confirm_required and confirm != run.pk:
            raise invalid(
                "confirm",
                f"This revert changes {plan.changes} notes; confirm with the run id {run.pk}.",
                hint=f"Nothing was changed; retry with confirm set to {run.pk}.",
            )
        items: list[dict] = []
        # Every note's event names the revert and its run.
        change.audit_details = {"revert": revert_id, "reverted_with_run": run.pk}
        for note in plan.forget:
            recovery = lifecycle.note_forget(actor=actor, note_id=note.pk, within=change)
            items.append({"note": note.pk, "action": "forget", "recovery": recovery.pk})
        for note in plan.veto + plan.day_rows:
            lifecycle.note_veto(actor=actor, note_id=note.pk, within=change)
            items.append({"note": note.pk, "action": "veto"})
        for note, how in plan.bring_back:
            note = Note.objects.select_for_update().get(pk=note.pk)
            if how == "superseded":
                items.append(_bring_back_superseded(change, note))
            elif how == "archived":
                item = {
                    "note": note.pk,
                    "action": "unarchive",
                    "reason": note.archive_reason,
                    "archived_at": note.archived_at.isoformat() if note.archived_at else None,
                }
                lifecycle.note_unarchive(actor=actor, note_id=note.pk, within=change)
                items.append(item)
            else:
                recovery = note.recovery
                item = {
                    "note": note.pk,
                    "action": "restore",
                    "recovery": recovery.pk,
                    **{name: getattr(recovery, name) for name in RECOVERY_KEPT},
                    "forgotten_by_user": recovery.forgotten_by_user_id,
                    "created_at": recovery.created_at.isoformat(),
                }
                lifecycle.note_restore(actor=actor, recovery_id=recovery.pk, within=change)
                items.append(item)
        change.audit_details = {}
        counts = plan.counts()
        revert = RunRevert.objects.create(
            id=revert_id,
            project=run.project,
            run=run,
            run_ref=run.pk,
            run_ids=plan.run_ids,
            items=items,
            counts=counts,
            created_by=actor.user,
        )
        record_revert(
            change,
            revert,
            AuditAction.RUN_REVERT,
            {
                "runs": plan.run_ids,
                "counts": counts,
                "forgotten": [n.pk for n in plan.forget],
                "vetoed": [n.pk for n in plan.veto + plan.day_rows],
                "brought_back": [n.pk for n, _ in plan.bring_back],
                "kept": [k.note.pk for k in plan.kept],
            },
        )
    return plan, revert


def record_revert(
    change: ProjectChange, revert: RunRevert, action: AuditAction, details: dict
) -> None:
    """A revert or its undo, recorded: the project's revision advanced, the action audited
    against the reverted run."""
    change.changed()
    change.audit(action, target=revert.run_ref, details={"revert": revert.pk, **details})


def run_revert_latest(*, run: Run) -> RunRevert | None:
    """The run's revert that can still be undone, if any."""
    return RunRevert.objects.filter(run_ref=run.pk, undone_at__isnull=True).first()
