"""`manage.py memory_run_due_routines [--now ISO-TIME]`: run the daily reviews that are due,
finish the MCP sessions idle past MEMORY_PORTAL_MCP_IDLE_MINUTES, delete the run slots a
vanished host left behind (memory/run_slots.py), deliver the webhook events and email alerts
that are due (retries included; services/deliveries.py), and send the daily digest from
MEMORY_PORTAL_DIGEST_HOUR on (services/notifications.py), and prune the read records past
MEMORY_PORTAL_READ_RETENTION_DAYS (services/reads.py). Safe to call from cron
every few minutes: a routine's day is claimed once, so overlapping copies never run it twice.
With MEMORY_PORTAL_TASKS=database it only queues the reviews for `manage.py db_worker`."""

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from memory_portal.memory.models import ReviewRun
from memory_portal.memory.run_slots import slots_sweep
from memory_portal.memory.services import (
    deliver_due,
    digests_send,
    reads_prune,
    routines_run_due,
    runs_finish_idle,
    tasks_run_in_process,
)


class Command(BaseCommand):
    help = "Run the daily memory reviews that are due."

    def add_arguments(self, parser):
        parser.add_argument(
            "--now", help="Pretend it is this UTC time (ISO 8601), e.g. 2026-12-01T04:05:00Z."
        )

    def handle(self, *args, now: str | None = None, **options):
        moment = timezone.now()
        if now:
            try:
                moment = datetime.fromisoformat(now.replace("Z", "+00:00"))
            except ValueError as exc:
                raise CommandError(f"--now must be an ISO 8601 time, not {now!r}.") from exc
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment, timezone.get_current_timezone())
        slots_sweep()
        made, sent = deliver_due()
        if made or sent:
            self.stdout.write(f"{sent} webhook deliveries attempted ({made} new)")
        projects, emailed = digests_send(now=moment)
        if emailed:
            self.stdout.write(f"{emailed} digest email(s) sent ({projects} project digests)")
        pruned = reads_prune(now=moment)
        if pruned:
            self.stdout.write(f"{pruned} read record(s) past their retention deleted")
        idle = runs_finish_idle(now=moment)
        if idle:
            self.stdout.write(f"{idle} idle MCP session(s) finished")
        enqueued = routines_run_due(now=moment)
        if not tasks_run_in_process():
            self.stdout.write(
                f"{len(enqueued)} routine(s) due at {moment.isoformat()}, queued for the worker "
                "(manage.py db_worker)"
            )
            return
        runs = ReviewRun.objects.filter(
            routine_id__in=enqueued, day=moment.date(), trigger="schedule"
        ).select_related("routine")
        self.stdout.write(f"{len(enqueued)} routine(s) due at {moment.isoformat()}")
        for review in runs:
            counts = ", ".join(
                f"{k} {v}" for k, v in review.counts.items() if not isinstance(v, list)
            )
            self.stdout.write(
                f"  {review.routine.agent_id} {review.day} {review.status}"
                f"{' ' + review.error_code if review.error_code else ''}: {counts}"
            )
