"""The daily review ("Memory dreaming", SPEC §5): an agent's routine, its steps — merge
duplicates, renew or archive expired facts, lift day-log lines into facts, flag facts no
agent's run was served in 30 days (read records), report near-duplicates by meaning (never
merged) — the people's controls, and the background task that runs one review (Django's tasks
API). Every change goes through the note services as the agent's own review run, so it is
audited like any other. When a routine is due and how it starts is in schedule.py, which the
note services use; the steps' planning is in review_plan.py, and applying what they planned
(and recording the run's end) in review_apply.py."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.db import IntegrityError, transaction
from django.tasks import TaskResultStatus, task
from django.utils import timezone

from .. import fastsql
from ..access import check_agent_gate, require_member, require_person
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import Agent, ReviewRoutine, ReviewRun, Run, RunStatus
from ._common import audit, audit_event, tasks_run_in_process
from .change import project_change
from .review_apply import apply_changes, finish, lift
from .review_plan import (
    Review,
    day_lines,
    flag_unrecalled,
    handle_expired,
    liftable,
    merge_duplicates,
    near_duplicates,
)
from .schedule import next_due

REVIEW_TASK_KEY = "memory-dreaming"
FLAGGED_IDS_KEPT = 50
NEAR_DUPLICATE_PAIRS_KEPT = 50
# A review runs for seconds; one still "running" after this long was abandoned by a process
# that died, and no longer keeps the next one from starting.
REVIEW_LEASE = timedelta(minutes=30)


@task
def run_review_routine(
    routine_id: int, day: str, now: str, trigger: str = "schedule", review_id: int | None = None
) -> int | None:
    """The background task of one daily review, through Django's tasks API: the immediate
    backend runs it where it is enqueued; the database backend (MEMORY_PORTAL_TASKS=database)
    queues it for `manage.py db_worker`. `review_id` is the run a person's "Run now" claimed.
    Returns the ReviewRun id, or None when the day was already run or a review is still
    running."""
    review = routine_execute(
        routine_id=routine_id,
        day=date.fromisoformat(day),
        trigger=trigger,
        now=datetime.fromisoformat(now),
        review_id=review_id,
    )
    return review.pk if review is not None else None


def _routine_for(actor: Actor, agent: Agent) -> ReviewRoutine:
    require_person(actor, what="managing the daily review")
    require_member(actor, agent.project)
    routine = ReviewRoutine.objects.filter(agent=agent, deleted_at__isnull=True).first()
    if routine is None:
        raise MemoryPortalError(
            "not_found",
            f"Agent {agent.pk} has no daily review.",
            hint="The routine starts with the agent's first saved fact.",
        )
    return routine


def _set_paused(actor: Actor, agent: Agent, paused: bool) -> ReviewRoutine:
    with transaction.atomic():
        routine = _routine_for(actor, agent)
        if routine.paused == paused:
            return routine
        routine.paused = paused
        routine.save(update_fields=["paused"])
        action = AuditAction.ROUTINE_PAUSE if paused else AuditAction.ROUTINE_RESUME
        audit(actor=actor, action=action, project=agent.project, target=agent.pk)
    return routine


def routine_pause(*, actor: Actor, agent: Agent) -> ReviewRoutine:
    return _set_paused(actor, agent, True)


def routine_resume(*, actor: Actor, agent: Agent) -> ReviewRoutine:
    return _set_paused(actor, agent, False)


def routine_delete(*, actor: Actor, agent: Agent) -> ReviewRoutine:
    """Stop the routine for good (its past runs stay visible)."""
    with transaction.atomic():
        routine = _routine_for(actor, agent)
        routine.deleted_at = timezone.now()
        routine.save(update_fields=["deleted_at"])
        audit(
            actor=actor, action=AuditAction.ROUTINE_DELETE, project=agent.project, target=agent.pk
        )
    return routine


def routine_run_now(*, actor: Actor, agent: Agent, now: datetime | None = None) -> ReviewRun | None:
    """A person runs the review at once (a manual run; the daily schedule is unchanged). The
    run is claimed here, in the person's request, so while one is running (or queued) another
    "Run now" is refused (`review_running`) and nothing is recorded for it. The claimed run
    goes through the task backend like a scheduled one; with the immediate backend it is done
    on return, with a worker backend it is queued (None)."""
    routine = _routine_for(actor, agent)
    now = now or timezone.now()
    with transaction.atomic():
        review = _claim(routine, now.date(), "manual", now)
        if review is None:
            raise _already_running(routine, agent, now)
        audit(
            actor=actor, action=AuditAction.ROUTINE_RUN_NOW, project=agent.project, target=agent.pk
        )
    result = run_review_routine.enqueue(
        routine_id=routine.pk,
        day=now.date().isoformat(),
        now=now.isoformat(),
        trigger="manual",
        review_id=review.pk,
    )
    if result.status == TaskResultStatus.FAILED:
        raise MemoryPortalError(
            "internal_error",
            f"The daily review of {agent.pk} failed unexpectedly.",
            hint="The server log has the details; the schedule is unchanged.",
        )
    if result.is_finished and result.return_value is not None:
        return ReviewRun.objects.get(pk=result.return_value)
    return None


# --- One execution ----------------------------------------------------------------------------


def _running(routine: ReviewRoutine, now: datetime):
    return ReviewRun.objects.filter(
        routine=routine, status=RunStatus.RUNNING, started_at__gt=now - REVIEW_LEASE
    )


def _scheduled(routine: ReviewRoutine, day: date):
    return ReviewRun.objects.filter(routine=routine, day=day, trigger="schedule")


def _already_running(routine: ReviewRoutine, agent: Agent, now: datetime) -> MemoryPortalError:
    running = _running(routine, now).order_by("started_at").first()
    since = f" (started {running.started_at:%H:%M} UTC)" if running else ""
    return MemoryPortalError(
        "review_running",
        f"The daily review of {agent.name} is already running{since}; this one was not started.",
    )


def _claim(
    routine: ReviewRoutine, day: date, trigger: str, now: datetime, *, start_run: bool = False
) -> ReviewRun | None:
    """Record the run before doing anything, one run at a time per routine: under the
    routine's row lock (SQLite: the IMMEDIATE transaction), a review still running means this
    one does not start. A scheduled run is also unique per routine and day, so a second copy
    of the cron command (or a retry) finds the claim taken and stops; one that found a manual
    run in progress stays due and runs at the next cron call (a queued one, whose routine
    moved on when it was queued, makes it due again unless the day was claimed already).
    `start_run` starts the review's run (`review.run`) in the same transaction."""
    try:
        with transaction.atomic():
            # Two statements: under READ COMMITTED, a check in the locking statement itself
            # would not see the run that the transaction it waited for committed.
            ReviewRoutine.objects.select_for_update().filter(pk=routine.pk).exists()
            if _running(routine, now).exists():
                if trigger == "schedule" and not _scheduled(routine, day).exists():
                    ReviewRoutine.objects.filter(pk=routine.pk, next_run_at__gt=now).update(
                        next_run_at=now
                    )
                return None
            review = ReviewRun.objects.create(
                routine=routine, day=day, trigger=trigger, started_at=now
            )
            if trigger == "schedule":
                ReviewRoutine.objects.filter(pk=routine.pk).update(next_run_at=next_due(now))
            if start_run:
                review.run = _start_run(routine.agent)
    except IntegrityError:
        return None
    return review


def _start_run(agent: Agent) -> Run:
    """The review's own run of the agent, audited `run.create` like any run (one round trip on
    PostgreSQL)."""
    run = Run(
        agent=agent,
        project=agent.project,
        application_id=agent.application_id,
        task_key=REVIEW_TASK_KEY,
    )
    run.top_level_run_id = run.pk
    event = audit_event(
        actor=None, action=AuditAction.RUN_CREATE, project=agent.project, target=run.pk
    )
    fastsql.insert_pair(run, event)
    return run


def routine_execute(
    *,
    routine_id: int,
    day: date,
    trigger: str,
    now: datetime | None = None,
    review_id: int | None = None,
) -> ReviewRun | None:
    """Run the steps for one routine and day: the run `review_id` claimed already (a manual
    run), or a new claim. Returns None when there is nothing to do (deleted, paused for a
    scheduled run, the day already claimed, or a review of the routine still running).

    Its cost does not grow with the agent's facts (docs/PERFORMANCE.md, "The daily review of
    10,000 agents"): one read of the working set, the merges, renewals and expiries applied
    together under one lock of the project, each lifted line a write of its own, and the end
    recorded with the run's status under that same lock when nothing was lifted."""
    now = now or timezone.now()
    related = "agent__project__memory_setting"
    if review_id is not None:
        review = ReviewRun.objects.select_related(f"routine__{related}").get(pk=review_id)
        if review.status != RunStatus.RUNNING:
            return review  # a retried task: the claimed run has finished already
        routine = review.routine
        with transaction.atomic():
            review.run = _start_run(routine.agent)
    else:
        routine = ReviewRoutine.objects.select_related(related).get(pk=routine_id)
        if routine.deleted_at is not None or (trigger == "schedule" and routine.paused):
            return None
        review = _claim(routine, day, trigger, now, start_run=True)
        if review is None:
            return None
    agent = routine.agent
    actor = Actor.agent_run(review.run)
    counts = {
        "merged": 0,
        "renewed": 0,
        "expired": 0,
        "lifted": 0,
        "lift_skipped": 0,
        "lift_full": 0,
        "flagged": 0,
        "near_duplicates": 0,
    }
    status = RunStatus.SUCCEEDED
    work = None
    try:
        check_agent_gate(actor, agent.project.memory_setting, write=True)
        work = Review.read(agent, day, now)
        merge_duplicates(work)
        handle_expired(work)
        lines = [text for text in map(liftable, day_lines(work)) if text is not None]
        if lines:
            if work.changes:
                with project_change(agent.project, actor=actor) as change:
                    apply_changes(change, work)
            counts["lifted"], counts["lift_skipped"], counts["lift_full"] = lift(actor, work, lines)
        counts["merged"], counts["renewed"] = len(work.merges), len(work.renew)
        counts["expired"] = len(work.expire)
        flagged = flag_unrecalled(work)
        counts["flagged"] = len(flagged)
        counts["flagged_ids"] = flagged[:FLAGGED_IDS_KEPT]
        pairs = near_duplicates(work.live())
        counts["near_duplicates"] = len(pairs)
        counts["near_duplicate_pairs"] = pairs[:NEAR_DUPLICATE_PAIRS_KEPT]
        if lines:
            work = None  # applied before the lifts
    except MemoryPortalError as exc:
        status = RunStatus.FAILED
        review.error_code = exc.code
        work = None
    except Exception:
        # Record the failure before the task reports it, so no run is left "running".
        review.error_code = "internal_error"
        finish(review=review, actor=actor, counts=counts, status=RunStatus.FAILED, now=now)
        raise
    try:
        return finish(review=review, actor=actor, counts=counts, status=status, now=now, work=work)
    except MemoryPortalError as exc:  # the changes were refused under the lock: none is made
        review.error_code = exc.code
        counts.update(merged=0, renewed=0, expired=0)
        return finish(review=review, actor=actor, counts=counts, status=RunStatus.FAILED, now=now)


def routines_run_due(*, now: datetime | None = None) -> list[int]:
    """Enqueue every routine due at `now` (cron calls this every few minutes). A day already
    claimed is skipped by the task, so overlapping copies of the command — or two copies of a
    queued task, picked up by two workers — never run a day twice. Returns the routine ids
    that were enqueued.

    In process (the immediate backend) each task runs once the surrounding transaction
    commits, and its claim moves the routine to the next day. Queued for a worker
    (MEMORY_PORTAL_TASKS=database), the routine moves to the next day as it is queued, in the
    same transaction as the queue row, so cron calls every few minutes queue it once even while
    the workers are busy or down."""
    now = now or timezone.now()
    due = list(
        ReviewRoutine.objects.filter(paused=False, deleted_at__isnull=True, next_run_at__lte=now)
        .order_by("next_run_at", "pk")
        .values_list("pk", flat=True)
    )
    args = {"day": now.date().isoformat(), "now": now.isoformat()}
    if tasks_run_in_process():
        for routine_id in due:
            transaction.on_commit(
                lambda routine_id=routine_id: run_review_routine.enqueue(
                    routine_id=routine_id, **args
                )
            )
        return due
    queued = []
    for routine_id in due:
        with transaction.atomic():
            moved = ReviewRoutine.objects.filter(pk=routine_id, next_run_at__lte=now).update(
                next_run_at=next_due(now)
            )
            if moved:  # not queued a moment ago by an overlapping call
                run_review_routine.enqueue(routine_id=routine_id, **args)
                queued.append(routine_id)
    return queued
