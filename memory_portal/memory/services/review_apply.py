"""The daily review's changes (services/routines.py runs them): the merges, renewals and
expiries a review planned (review_plan.py), applied together under the project's lock; the
lifted day-log lines, each a write of its own; and the run's end, recorded under that same
lock."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Case, Value, When
from django.utils import timezone

from .. import counters
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import (
    REASON_EXPIRED,
    REASON_SUPERSEDED,
    ApiToken,
    AuditEvent,
    Note,
    ReviewRoutine,
    ReviewRun,
    Run,
    Status,
    Trust,
    is_expired,
)
from .change import ProjectChange, project_change
from .notes import fact_save
from .review_plan import Review

RENEW_FOR = timedelta(days=90)


def apply_changes(change: ProjectChange, work: Review) -> None:
    """Make the merges, renewals and expiries `work` planned, in `change` (the review's
    agent's project), with their audit events and the counters' change."""
    events, counted = _changed(change, work)
    if work.changes:
        change.changed(counted=counted)
    AuditEvent.objects.bulk_create(events)


def _changed(change: ProjectChange, work: Review) -> tuple[list[AuditEvent], dict[str, int]]:
    """Update the notes `work` planned to change, in `change`: each note is read again under
    its lock, and one that changed since the read is left alone (and not counted). Returns
    their audit events, unsaved, and the change to the project's counters, not made: the
    caller makes both with its own."""
    change.check_gate()
    planned = {n.pk for d, k in work.merges for n in (d, k)}
    planned |= {n.pk for n in work.renew + work.expire}
    if not planned:
        return [], {}
    current = {
        pk: (expires_at, trust)
        for pk, expires_at, trust in Note.objects.select_for_update()
        .filter(pk__in=planned, status=Status.ACTIVE)
        .values_list("pk", "expires_at", "trust")
    }
    now = work.now
    for note in [n for pair in work.merges for n in pair] + work.renew + work.expire:
        if note.pk in current:  # counted as it is now (a manager may have approved it since)
            note.trust = current[note.pk][1]
    work.merges = [
        (d, k)
        for d, k in work.merges
        if d.pk in current and k.pk in current and d.trust == Trust.LEARNED
    ]
    work.renew = [n for n in work.renew if n.pk in current]
    work.expire = [n for n in work.expire if n.pk in current and is_expired(current[n.pk][0], now)]
    stamp = timezone.now()
    renewed_until = now + RENEW_FOR
    events = []
    for duplicate, keeper in work.merges:
        details = {"into": keeper.pk}
        events.append(change.event(AuditAction.NOTE_MERGE, note=duplicate, details=details))
    for note in work.renew:
        previous = note.expires_at.isoformat() if note.expires_at else None
        details = {"from": previous, "to": renewed_until.isoformat()}
        events.append(change.event(AuditAction.NOTE_RENEW, note=note, details=details))
        note.expires_at = renewed_until
    for note in work.expire:
        events.append(change.event(AuditAction.NOTE_EXPIRE, note=note))
    if work.merges:
        Note.objects.filter(pk__in=[d.pk for d, _ in work.merges]).update(
            status=Status.ARCHIVED,
            archive_reason=REASON_SUPERSEDED,
            archived_at=stamp,
            superseded_by_id=Case(*(When(pk=d.pk, then=Value(k.pk)) for d, k in work.merges)),
            updated_at=stamp,
        )
    if work.renew:
        Note.objects.filter(pk__in=[n.pk for n in work.renew]).update(
            expires_at=renewed_until, updated_at=stamp
        )
    if work.expire:
        Note.objects.filter(pk__in=[n.pk for n in work.expire]).update(
            status=Status.ARCHIVED,
            archive_reason=REASON_EXPIRED,
            archived_at=stamp,
            updated_at=stamp,
        )
    retired = [d for d, _ in work.merges] + work.expire
    counted = counters.combined(
        *(counters.moved(counters.state_of(n), counters.archived_state(n)) for n in retired)
    )
    return events, counted


def finish(
    *,
    review: ReviewRun,
    actor: Actor,
    counts: dict,
    status: str,
    now: datetime,
    work: Review | None = None,
) -> ReviewRun:
    """Record how a review run ended, in one transaction under the project's lock: the
    changes `work` still holds (when nothing was lifted), its run's status (its tokens
    revoked, as every finished run's are), its counts, and the audit events — the changes'
    and the end's in one INSERT, the revision and the counters in one UPDATE."""
    routine = review.routine
    agent = routine.agent
    run = review.run
    with project_change(agent.project, actor=actor) as change:
        events, counted = [], {}
        if work is not None:
            events, counted = _changed(change, work)
            counts["merged"], counts["renewed"] = len(work.merges), len(work.renew)
            counts["expired"] = len(work.expire)
        finished = timezone.now()
        revoked = ApiToken.objects.filter(run_id=run.pk, revoked_at__isnull=True).update(
            revoked_at=finished
        )
        Run.objects.filter(pk=run.pk).update(status=status, finished_at=finished)
        run.status, run.finished_at = status, finished
        # The producer status is visible on every note the run wrote; one revision covers
        # that and the changes.
        change.changed(counted=counted)
        review.status = status
        review.counts = counts
        review.run_ref = run.pk
        review.finished_at = finished
        review.save(update_fields=["status", "counts", "run_ref", "finished_at", "error_code"])
        ReviewRoutine.objects.filter(pk=routine.pk).update(last_run_at=now)
        summary = {k: v for k, v in counts.items() if not isinstance(v, list)}
        details = {"trigger": review.trigger, "day": review.day.isoformat(), "status": status}
        run_status = {"status": status, "tokens_revoked": revoked}
        AuditEvent.objects.bulk_create(
            [
                *events,
                change.event(AuditAction.RUN_STATUS, actor=None, details=run_status),
                change.event(
                    AuditAction.ROUTINE_RUN, target=agent.pk, details={**details, **summary}
                ),
            ]
        )
    return review


def lift(actor: Actor, work: Review, texts: list[str]) -> tuple[int, int, int]:
    """Step 3: lines of yesterday's day log that start with `fact:` / `learned:` become
    facts. Identical facts stay one; forgotten, vetoed or secret-looking ones are skipped.
    A full project (or the run's note quota) does not fail the review: what fits is lifted,
    the rest is counted (`lift_full`) and stays in the day log, where the review queue offers
    it to lift by hand once there is room. Returns (lifted, skipped, left for lack of room)."""
    lifted = skipped = full = 0
    for text in texts:
        if full:  # no room since an earlier line: count the rest without trying them
            full += 1
            continue
        try:
            result = fact_save(actor=actor, text=text)
        except MemoryPortalError as exc:
            if exc.code in {"memory_project_full", "memory_run_quota"}:
                full = 1
                continue
            if exc.code in {"memory_disabled", "memory_not_eligible"}:
                raise
            skipped += 1
            continue
        if result.created:
            lifted += 1
            work.lifted.append(result.note)
    return lifted, skipped, full
