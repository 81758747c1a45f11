"""The daily review on a real worker (MEMORY_PORTAL_TASKS=database): cron and a person's
"Run now" only queue the review in the database; `manage.py db_worker` (django-tasks-db) runs
it, with its effects and audit events; two worker processes on PostgreSQL never run one
routine twice for a day."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.tasks import TaskResultStatus
from django.test import Client, override_settings
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import AuditEvent, Note, ReviewRoutine, ReviewRun, Run, Stage
from memory_portal.memory.services import tasks_run_in_process
from memory_portal.memory.services.routines import (
    REVIEW_TASK_KEY,
    run_review_routine,
)

ROOT = Path(__file__).resolve().parents[2]
DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
NOW = datetime(2026, 12, 2, 4, 5, tzinfo=UTC)

pytestmark = pytest.mark.django_db(transaction=True)


def review_tasks():
    """The queued reviews (a fact written under the database backend also queues its vector's
    task: tests/memory/test_deferred_vectors.py)."""
    return DBTaskResult.objects.filter(task_path=run_review_routine.module_path)


def run_worker_until_empty() -> str:
    """`manage.py db_worker --batch` in this process: it runs what is queued, then exits. The
    command installs signal handlers and log levels for a worker process; put them back."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)}
    loggers = [logging.getLogger(name) for name in ("django.tasks", "django_tasks_db")]
    saved = [(lg, lg.level, list(lg.handlers)) for lg in loggers]
    out = StringIO()
    try:
        call_command(
            "db_worker", "--batch", "--no-reload", "--no-startup-delay", "--interval=0", stdout=out
        )
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for lg, level, kept in saved:
            lg.setLevel(level)
            lg.handlers[:] = kept
    return out.getvalue()


def seed_review_work(world) -> dict:
    """Facts for every step of a review: two spellings of one fact (merged), and yesterday's
    day log with a `fact:` line (lifted)."""
    old = services.fact_save(actor=world.as_agent, text="Deploys need the VPN").note
    new = services.fact_save(actor=world.as_agent, text="deploys need the VPN.").note
    row = services.day_append(actor=world.as_agent, line="fact: Staging restarts at 02:00 UTC")
    Note.objects.filter(pk=row.pk).update(day=NOW.date() - timedelta(days=1))
    return {"old": old, "new": new}


def test_the_switch_selects_the_backend(settings):
    assert tasks_run_in_process(), "the default (make run) runs reviews where they are queued"
    with override_settings(TASKS=DATABASE_TASKS):
        assert not tasks_run_in_process()


@override_settings(TASKS=DATABASE_TASKS)
def test_cron_only_queues_and_the_worker_runs_the_review(world):
    seeded = seed_review_work(world)
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    out = StringIO()
    call_command("memory_run_due_routines", "--now", NOW.isoformat(), stdout=out)
    assert "1 routine(s) due" in out.getvalue() and "queued for the worker" in out.getvalue()
    # Nothing of the review ran in the cron process: no claim, no review run, no change.
    assert not ReviewRun.objects.exists()
    assert not Run.objects.filter(task_key=REVIEW_TASK_KEY).exists()
    queued = review_tasks().get()
    assert queued.status == TaskResultStatus.READY
    assert queued.task_path == "memory_portal.memory.services.routines.run_review_routine"
    assert Note.objects.get(pk=seeded["old"].pk).status == "active"

    run_worker_until_empty()

    assert not DBTaskResult.objects.ready().exists()
    done = review_tasks().get()
    assert done.status == TaskResultStatus.SUCCESSFUL, done.traceback
    review = ReviewRun.objects.get()
    assert done.return_value == review.pk
    assert (review.trigger, review.day, review.status) == ("schedule", NOW.date(), "succeeded")
    assert review.counts["merged"] == 1 and review.counts["lifted"] == 1
    old = Note.objects.get(pk=seeded["old"].pk)
    assert old.status == "archived" and old.superseded_by_id == seeded["new"].pk
    lifted = Note.objects.get(content="Staging restarts at 02:00 UTC")
    assert lifted.task_key == REVIEW_TASK_KEY and lifted.status == "active"
    review_run = Run.objects.get(task_key=REVIEW_TASK_KEY)
    assert review_run.status == "succeeded" and review.run_ref == review_run.pk
    events = AuditEvent.objects.filter(actor_run_id=review_run.pk)
    assert set(events.values_list("action", flat=True)) >= {"note.merge", "note.save"}
    finished = AuditEvent.objects.get(action="routine.run")
    assert finished.details["trigger"] == "schedule" and finished.details["status"] == "succeeded"
    assert finished.details["merged"] == 1 and finished.details["lifted"] == 1
    assert ReviewRoutine.objects.get().next_run_at == datetime(2026, 12, 3, 4, tzinfo=UTC)


@override_settings(TASKS=DATABASE_TASKS)
def test_run_now_in_the_dashboard_only_queues_and_the_worker_runs_it(world):
    seed_review_work(world)
    client = Client()
    client.force_login(world.member)
    url = reverse("dashboard:agent-routine", args=["acme-web", world.agent.id, "run"])
    response = client.post(url, follow=True)
    assert response.status_code == 200
    assert "queued" in response.content.decode()
    claimed = ReviewRun.objects.get()
    assert (claimed.trigger, claimed.status) == ("manual", "running"), "claimed in the request"
    assert not Run.objects.filter(task_key=REVIEW_TASK_KEY).exists(), "nothing ran in it"
    # While it waits, another "Run now" is refused: one review at a time.
    again = client.post(url, follow=True)
    assert "already running" in again.content.decode()
    assert review_tasks().count() == 1

    run_worker_until_empty()

    claimed.refresh_from_db()
    assert claimed.status == "succeeded" and claimed.counts["merged"] == 1
    assert AuditEvent.objects.filter(action="routine.run_now").count() == 1
    assert AuditEvent.objects.get(action="routine.run").details["trigger"] == "manual"
    assert review_tasks().get().status == TaskResultStatus.SUCCESSFUL


@override_settings(TASKS=DATABASE_TASKS)
def test_cron_every_few_minutes_queues_a_routine_once(world):
    """While no worker has taken it (busy or down), later cron calls do not queue the same
    routine again: it moved to the next day as it was queued."""
    seed_review_work(world)
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    outputs = []
    for minutes in (0, 5, 10):
        out = StringIO()
        moment = (NOW + timedelta(minutes=minutes)).isoformat()
        call_command("memory_run_due_routines", "--now", moment, stdout=out)
        outputs.append(out.getvalue())
    assert outputs[0].startswith("1 routine(s) due") and outputs[1].startswith("0 routine(s)")
    assert review_tasks().count() == 1
    assert ReviewRoutine.objects.get().next_run_at == datetime(2026, 12, 3, 4, tzinfo=UTC)
    run_worker_until_empty()
    assert ReviewRun.objects.get().status == "succeeded"


@override_settings(TASKS=DATABASE_TASKS)
def test_a_queued_review_that_meets_a_manual_one_stays_due(world):
    """The scheduled review is queued (the routine moves on), then a person's "Run now" is
    claimed; the worker takes the scheduled one first, finds the manual one running and makes
    the routine due again, so the next cron call queues the day's review once more."""
    seed_review_work(world)
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    assert services.routines_run_due(now=NOW) == [ReviewRoutine.objects.get().pk]
    assert (
        services.routine_run_now(
            actor=world.as_member, agent=world.agent, now=NOW + timedelta(minutes=1)
        )
        is None
    )
    run_worker_until_empty()
    assert list(ReviewRun.objects.values_list("trigger", "status")) == [("manual", "succeeded")]
    assert ReviewRoutine.objects.get().next_run_at == NOW, "due again"
    assert services.routines_run_due(now=NOW + timedelta(minutes=5)) != []
    run_worker_until_empty()
    scheduled = ReviewRun.objects.get(trigger="schedule")
    assert scheduled.status == "succeeded" and scheduled.day == NOW.date()
    assert ReviewRoutine.objects.get().next_run_at == datetime(2026, 12, 3, 4, tzinfo=UTC)
    assert services.routines_run_due(now=NOW + timedelta(minutes=10)) == []


def _database_url() -> str:
    params = connection.settings_dict
    auth = params["USER"] + (f":{params['PASSWORD']}" if params["PASSWORD"] else "")
    host, port = params["HOST"] or "127.0.0.1", params["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{params['NAME']}"


def _worker_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="memory_portal.settings",
        DATABASE_URL=_database_url(),
        MEMORY_PORTAL_TASKS="database",
        DEBUG="0",
        PYTHONPATH=str(ROOT),
    )
    return env


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.postgres
@override_settings(TASKS=DATABASE_TASKS)
def test_two_worker_processes_never_run_a_routine_twice_for_a_day(world, tmp_path):
    """Two `db_worker` processes poll one queue on PostgreSQL. Every routine is queued twice for
    the same day (two overlapping cron calls), side by side, so the workers take the two
    copies at the same moment: the (routine, day) claim lets one run and the other find the
    day taken."""
    agents = [world.agent]
    for i in range(7):
        agents.append(
            services.agent_create(
                actor=None, project=world.project, name=f"Runtime {i}", stage=Stage.RUNTIME
            )
        )
    # Without vectors, so that the queue holds the reviews alone (a fact written under the
    # database backend queues its vector's task too: test_deferred_vectors.py).
    with override_settings(MEMORY_PORTAL={**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": False}):
        for agent in agents:
            run = services.run_create(actor=None, agent=agent)
            text = f"{agent.name} deploys need the VPN"
            services.fact_save(actor=Actor.agent_run(run), text=text)
    routines = list(ReviewRoutine.objects.order_by("pk"))
    assert len(routines) == len(agents)

    logs = [tmp_path / f"worker-{i}.log" for i in (1, 2)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "db_worker",
                "--no-reload",
                "--no-startup-delay",
                "--interval=0.05",
                f"--worker-id=worker-{i}",
            ],
            cwd=ROOT,
            env=_worker_env(),
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        for i, log in zip((1, 2), logs, strict=True)
    ]
    try:
        _wait(lambda: all("Starting worker" in log.read_text() for log in logs), 60, "both workers")
        with transaction.atomic():  # every copy appears in the queue at once
            for routine in routines:
                for _ in range(2):  # what two overlapping cron calls enqueue, side by side
                    run_review_routine.enqueue(
                        routine_id=routine.pk, day=NOW.date().isoformat(), now=NOW.isoformat()
                    )
        queued = DBTaskResult.objects.count()
        assert queued == 2 * len(agents)
        _wait(
            lambda: DBTaskResult.objects.finished().count() == queued,
            120,
            "the queue to drain",
        )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)

    results = list(DBTaskResult.objects.all())
    assert all(r.status == TaskResultStatus.SUCCESSFUL for r in results), [
        r.traceback for r in results
    ]
    ran_by = {r.worker_ids[0] for r in results}
    assert ran_by == {"worker-1", "worker-2"}, "both workers took tasks"
    # One review per routine and day, whichever worker got there first; the other copy
    # returned None (the day was claimed).
    assert sorted(r.return_value is None for r in results) == [False] * len(agents) + [True] * len(
        agents
    )
    reviews = ReviewRun.objects.filter(trigger="schedule", day=NOW.date())
    assert reviews.count() == len(agents)
    assert sorted(reviews.values_list("routine__agent_id", flat=True)) == sorted(
        a.pk for a in agents
    )
    assert all(r.status == "succeeded" for r in reviews)
    assert Run.objects.filter(task_key=REVIEW_TASK_KEY).count() == len(agents)
    assert AuditEvent.objects.filter(action="routine.run").count() == len(agents)
    for log in logs:
        # No task failed while the workers ran. After SIGTERM, django-tasks-db's handler calls
        # sys.exit() wherever the worker is, which is sometimes inside its own polling
        # transaction's COMMIT; the traceback that prints then is the library's shutdown, with
        # every task already finished (checked above), not a task's failure.
        text = log.read_text()
        running, _, _shutdown = text.partition("Received Terminated")
        assert "Traceback" not in running, text
