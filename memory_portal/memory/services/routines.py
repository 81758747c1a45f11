"""The daily review ("Memory dreaming", SPEC §5): an agent's routine, its steps — merge
duplicates, renew or archive expired facts, lift day-log lines into facts, flag facts not
recalled in 30 days, report near-duplicates by meaning (never merged) — the people's
controls, and the background task that runs one review (Django's tasks API). Every change
goes through the note services as the agent's own review run, so it is audited like any
other. When a routine is due and how it starts is in schedule.py, which the note services
use."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Case, Q, Value, When
from django.tasks import TaskResultStatus, task
from django.tasks.backends.immediate import ImmediateBackend
from django.utils import timezone

from .. import counters, fastsql
from ..access import check_agent_gate, require_member, require_person
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import (
    REASON_EXPIRED,
    REASON_SUPERSEDED,
    Agent,
    ApiToken,
    AuditEvent,
    Kind,
    Note,
    ReviewRoutine,
    ReviewRun,
    Run,
    RunStatus,
    Scope,
    Status,
    Trust,
    is_expired,
)
from ..selectors import NOT_RECALLED
from ..validation import content_key_text
from ._common import audit, audit_event, bump, lock_setting
from .notes import fact_save
from .schedule import next_due

RENEW_FOR = timedelta(days=90)
REVIEW_TASK_KEY = "memory-dreaming"
LIFT_RE = re.compile(r"^\d\d:\d\d (?:\S+ )?(?:fact|learned):\s*(?P<text>.+)$", re.I)
FLAGGED_IDS_KEPT = 50
# Step 5: two live facts of an agent whose stored vectors have at least this cosine are
# reported as near-duplicates by meaning, for a person to merge or keep (docs/RECALL.md,
# "Near-duplicates"); the review never merges them itself. For all-MiniLM-L6-v2, a statement
# reworded scores 0.88-0.95; among the labelled set's 561 pairs of different facts of one
# agent, the highest is 0.60.
NEAR_DUPLICATE_COSINE = 0.85
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


def reviews_run_in_process() -> bool:
    """True when an enqueued review runs at once where it was enqueued (the immediate
    backend); False when it waits in a queue for a worker (MEMORY_PORTAL_TASKS=database)."""
    return isinstance(run_review_routine.get_backend(), ImmediateBackend)


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


@dataclass
class _Review:
    """One review's working set, read in one query: the agent's active facts that are not
    rejected (live or expired) and the day log rows of the day before, oldest first. The steps
    plan their changes on it; they are applied together under one lock."""

    facts: list[Note]
    day_rows: list[Note]
    now: datetime
    merges: list[tuple[Note, Note]] = field(default_factory=list)  # (duplicate, keeper)
    renew: list[Note] = field(default_factory=list)
    expire: list[Note] = field(default_factory=list)
    lifted: list[Note] = field(default_factory=list)

    @classmethod
    def read(cls, agent: Agent, day: date, now: datetime) -> _Review:
        rows = list(
            Note.objects.filter(owner_agent=agent, status=Status.ACTIVE)
            .filter(
                Q(scope=Scope.AGENT, kind=Kind.FACT) & ~Q(trust=Trust.REJECTED)
                | Q(kind=Kind.DAY, day=day - timedelta(days=1))
            )
            .order_by("created_at", "id")
        )
        facts = [n for n in rows if n.kind == Kind.FACT]
        return cls(facts, [n for n in rows if n.kind == Kind.DAY], now)

    def live(self) -> list[Note]:
        """The live facts as the changes planned (and lifts made) so far leave them."""
        gone = {d.pk for d, _ in self.merges} | {n.pk for n in self.expire}
        renewed = {n.pk for n in self.renew}
        facts = [n for n in self.facts if n.pk not in gone] + self.lifted
        facts = [n for n in facts if n.pk in renewed or not is_expired(n.expires_at, self.now)]
        return sorted(facts, key=lambda n: (n.created_at, n.pk))

    @property
    def changes(self) -> int:
        return len(self.merges) + len(self.renew) + len(self.expire)


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

    Its cost does not grow with the agent's facts (docs/PERFORMANCE.md, "The daily review"):
    one read of the working set, the merges, renewals and expiries applied together under one
    lock of the project, each lifted line a write of its own, and the end recorded with the
    run's status under that same lock when nothing was lifted."""
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
        work = _Review.read(agent, day, now)
        _merge_duplicates(work)
        _handle_expired(work)
        lines = [text for text in map(liftable, _day_lines(work)) if text is not None]
        if lines:
            if work.changes:
                with transaction.atomic():
                    _apply(actor, work, lock_setting(agent.project))
            counts["lifted"], counts["lift_skipped"], counts["lift_full"] = _lift(
                actor, work, lines
            )
        counts["merged"], counts["renewed"] = len(work.merges), len(work.renew)
        counts["expired"] = len(work.expire)
        flagged = _flag_unrecalled(work)
        counts["flagged"] = len(flagged)
        counts["flagged_ids"] = flagged[:FLAGGED_IDS_KEPT]
        pairs = _near_duplicates(work.live())
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
        _finish(review=review, actor=actor, counts=counts, status=RunStatus.FAILED, now=now)
        raise
    try:
        return _finish(review=review, actor=actor, counts=counts, status=status, now=now, work=work)
    except MemoryPortalError as exc:  # the changes were refused under the lock: none is made
        review.error_code = exc.code
        counts.update(merged=0, renewed=0, expired=0)
        return _finish(review=review, actor=actor, counts=counts, status=RunStatus.FAILED, now=now)


def _apply(actor: Actor, work: _Review, setting) -> list[AuditEvent]:
    """Make the merges, renewals and expiries `work` planned, under the project's lock that
    the caller holds: each note is read again under it, and one that changed since the read is
    left alone (and not counted). Returns their audit events, unsaved."""
    check_agent_gate(actor, setting, write=True)
    planned = {n.pk for d, k in work.merges for n in (d, k)}
    planned |= {n.pk for n in work.renew + work.expire}
    if not planned:
        return []
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
    project = actor.run.project
    for duplicate, keeper in work.merges:
        details = {"into": keeper.pk}
        events.append(_event(actor, AuditAction.NOTE_MERGE, project, duplicate, details))
    for note in work.renew:
        previous = note.expires_at.isoformat() if note.expires_at else None
        details = {"from": previous, "to": renewed_until.isoformat()}
        events.append(_event(actor, AuditAction.NOTE_RENEW, project, note, details))
        note.expires_at = renewed_until
    for note in work.expire:
        events.append(_event(actor, AuditAction.NOTE_EXPIRE, project, note, None))
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
        *(counters.moved(counters.state_of(n), (Status.ARCHIVED, n.trust)) for n in retired)
    )
    if work.changes:
        bump(setting, counted=counted)
    AuditEvent.objects.bulk_create(events)
    return events


def _event(actor, action, project, note, details) -> AuditEvent:
    return audit_event(actor=actor, action=action, project=project, note=note, details=details)


def _finish(
    *,
    review: ReviewRun,
    actor: Actor,
    counts: dict,
    status: str,
    now: datetime,
    work: _Review | None = None,
) -> ReviewRun:
    """Record how a review run ended, in one transaction under the project's lock: the
    changes `work` still holds (when nothing was lifted), its run's status (its tokens
    revoked, as every finished run's are), its counts, and the audit events."""
    routine = review.routine
    agent = routine.agent
    run = review.run
    with transaction.atomic():
        setting = lock_setting(agent.project)
        if work is not None:
            _apply(actor, work, setting)
            counts["merged"], counts["renewed"] = len(work.merges), len(work.renew)
            counts["expired"] = len(work.expire)
        finished = timezone.now()
        revoked = ApiToken.objects.filter(run_id=run.pk, revoked_at__isnull=True).update(
            revoked_at=finished
        )
        Run.objects.filter(pk=run.pk).update(status=status, finished_at=finished)
        run.status, run.finished_at = status, finished
        bump(setting)  # producer status is visible on every note the run wrote
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
                _event(None, AuditAction.RUN_STATUS, agent.project, None, run_status),
                audit_event(
                    actor=actor,
                    action=AuditAction.ROUTINE_RUN,
                    project=agent.project,
                    target=agent.pk,
                    details={**details, **summary},
                ),
            ]
        )
    return review


def normalized(text: str) -> str:
    """Same fact, different spelling: the content identity's normalisation (case, Unicode
    forms, invisible characters, spacing), with trailing punctuation ignored too."""
    return content_key_text(text).rstrip(".!;:, ")


def _merge_duplicates(work: _Review) -> None:
    """Step 1: of live facts with the same normalized text, the newest stays and the others
    are superseded by it."""
    groups: dict[str, list[Note]] = {}
    for note in work.live():
        groups.setdefault(normalized(note.content), []).append(note)
    for notes in groups.values():
        if len(notes) < 2:
            continue
        # The newest stays (ordered oldest first) — the newest a manager reviewed, if any:
        # the routine acts for the agent and never retires a person's decision.
        decided = [n for n in notes if n.trust != Trust.LEARNED]
        keeper = (decided or notes)[-1]
        work.merges += [
            (duplicate, keeper)
            for duplicate in notes
            if duplicate is not keeper and duplicate.trust == Trust.LEARNED
        ]


def _handle_expired(work: _Review) -> None:
    """Step 2: expired facts recalled in the last 30 days get 90 more days; the rest are
    archived with reason `expired`."""
    for note in work.facts:
        if not is_expired(note.expires_at, work.now):
            continue
        if note.last_recalled_at and note.last_recalled_at >= work.now - NOT_RECALLED:
            work.renew.append(note)
        else:
            work.expire.append(note)


def _day_lines(work: _Review) -> list[str]:
    """The lines of the agent's live day log of the day before, oldest first."""
    return [line for row in work.day_rows for line in row.lines]


def liftable(line: str) -> str | None:
    """The fact in a day-log line that starts with `fact:` or `learned:`, if any."""
    match = LIFT_RE.match(line.strip())
    return match.group("text").strip() if match else None


def _lift(actor: Actor, work: _Review, texts: list[str]) -> tuple[int, int, int]:
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


def _flag_unrecalled(work: _Review) -> list[str]:
    """Step 4: facts not recalled in 30 days go to the review queue (the queue reads the same
    rule, selectors.not_recalled_q; the run records which ones it saw)."""
    cutoff = work.now - NOT_RECALLED
    return [n.pk for n in work.live() if (n.last_recalled_at or n.created_at) < cutoff]


def _near_duplicates(facts: list[Note]) -> list[list]:
    """Step 5: pairs of the live facts whose stored vectors (of the configured provider) are
    at least NEAR_DUPLICATE_COSINE apart, closest first, as [older id, newer id, cosine].
    Reported in the run's counts and the review queue; nothing is changed."""
    from ..embeddings import decode_many
    from .vectors import current_provider

    embedder = current_provider()
    if embedder is None:
        return []
    rows = [
        (n.pk, n.embedding)
        for n in facts
        if n.embedding is not None and n.embedding_model == embedder.name
    ]
    if len(rows) < 2:
        return []
    vectors = decode_many([blob for _, blob in rows])
    sims = np.triu(vectors @ vectors.T, k=1)
    first, second = np.nonzero(sims >= NEAR_DUPLICATE_COSINE)
    pairs = [
        [rows[i][0], rows[j][0], round(float(sims[i, j]), 3)]
        for i, j in zip(first, second, strict=True)
    ]
    return sorted(pairs, key=lambda p: -p[2])


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
    if reviews_run_in_process():
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
