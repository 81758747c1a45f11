"""Background tasks (Django's tasks API). The immediate backend runs them in-process; a
deployment with a worker backend runs the same functions there."""

from __future__ import annotations

from datetime import date, datetime

from django.tasks import task


@task
def run_review_routine(
    routine_id: int, day: str, now: str, trigger: str = "schedule", review_id: int | None = None
) -> int | None:
    """One daily review (`review_id`: the run a person's "Run now" claimed); returns the
    ReviewRun id, or None when the day was already run or a review is still running."""
    from .services.routines import routine_execute

    review = routine_execute(
        routine_id=routine_id,
        day=date.fromisoformat(day),
        trigger=trigger,
        now=datetime.fromisoformat(now),
        review_id=review_id,
    )
    return review.pk if review is not None else None
