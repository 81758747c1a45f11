"""The daily review ("Memory dreaming"): creation, the four steps, pause, the idempotency of a
day, overlapping runs and the cron command."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from memory_portal.memory import services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import AuditEvent, Note, ReviewRoutine, ReviewRun, Run, Status
from memory_portal.memory.services.review_plan import liftable, normalized
from memory_portal.memory.services.routines import next_due

from .helpers import last_event, refused

NOW = datetime(2026, 12, 2, 4, 5, tzinfo=UTC)



def served(world, note, when):
    """An agent's run was served `note` at `when` (its read record: the 30-day rule's data)."""
    services.reads_record(
        actor=Actor.agent_run(world.run2),
        tool="recall",
        served=[(note.pk, note.trust, 0.5)],
        now=when,
    )

def fact(world, text, **kw):
    return services.fact_save(actor=world.as_agent, text=text, **kw).note


def routine_of(world) -> ReviewRoutine:
    return ReviewRoutine.objects.get(agent=world.agent)


@pytest.fixture
def run_due(django_capture_on_commit_callbacks):
    """routines_run_due enqueues on commit; run those callbacks as a commit would."""

    def run(now=NOW):
        with django_capture_on_commit_callbacks(execute=True):
            return services.routines_run_due(now=now)

    return run


def test_next_due_is_the_next_four_am_utc():
    assert next_due(datetime(2026, 12, 1, 3, 59, tzinfo=UTC)) == datetime(
        2026, 12, 1, 4, 0, tzinfo=UTC
    )
    assert next_due(datetime(2026, 12, 1, 4, 0, tzinfo=UTC)) == datetime(
        2026, 12, 2, 4, 0, tzinfo=UTC
    )


def test_first_save_creates_the_routine_once(world):
    assert not ReviewRoutine.objects.exists()
    services.note_write(actor=world.as_agent, kind="fact", content="A project note")
    assert not ReviewRoutine.objects.exists(), "tool notes are not the agent's own facts"
    fact(world, "First fact")
    routine = routine_of(world)
    assert routine.next_run_at.hour == 4 and routine.next_run_at > timezone.now()
    assert routine.state == "active"
    fact(world, "Second fact")
    assert ReviewRoutine.objects.count() == 1
    services.routine_delete(actor=world.as_member, agent=world.agent)
    fact(world, "Third fact")
    assert routine_of(world).state == "deleted", "a later save does not revive it"


def test_merge_keeps_the_newest_duplicate(world):
    a = fact(world, "Deploy needs the VPN")
    b = fact(world, "deploy needs  the vpn.")
    c = fact(world, "DEPLOY NEEDS THE VPN!")
    assert fact(world, "deploy needs the VPN").id == a.id, "the same normalised text is one fact"
    other = fact(world, "Something else entirely")
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert review.counts["merged"] == 2 and review.status == "succeeded"
    for old in (a, b):
        old.refresh_from_db()
        assert old.status == Status.ARCHIVED and old.archive_reason == "superseded"
        assert old.superseded_by_id == c.id
    assert Note.objects.get(pk=other.id).status == Status.ACTIVE
    event = last_event(world.project, "note.merge")
    assert event.details == {"into": c.id} and event.actor_agent_id == world.agent.id
    assert normalized("Deploy needs the VPN!") == "deploy needs the vpn"


def test_merge_never_retires_a_reviewed_fact(world):
    reviewed = fact(world, "Deploy needs the VPN")
    services.note_approve(actor=world.as_manager, note_id=reviewed.id)
    newer = fact(world, "Deploy needs the VPN.")
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert review.counts["merged"] == 1
    reviewed.refresh_from_db()
    newer.refresh_from_db()
    assert reviewed.status == Status.ACTIVE, "the manager's decision stays"
    assert newer.status == Status.ARCHIVED and newer.superseded_by_id == reviewed.id


def test_expired_facts_are_renewed_or_archived(world):
    now = timezone.now()
    recalled = fact(world, "Recalled recently")
    forgotten_about = fact(world, "Never recalled")
    Note.objects.filter(pk__in=[recalled.id, forgotten_about.id]).update(
        expires_at=now - timedelta(hours=1)
    )
    served(world, recalled, now - timedelta(days=10))  # a run was served it 10 days ago
    review = services.routine_run_now(actor=world.as_member, agent=world.agent, now=now)
    assert (review.counts["renewed"], review.counts["expired"]) == (1, 1)
    recalled.refresh_from_db()
    forgotten_about.refresh_from_db()
    assert recalled.status == Status.ACTIVE
    assert recalled.expires_at > now + timedelta(days=89)
    assert forgotten_about.status == Status.ARCHIVED
    assert forgotten_about.archive_reason == "expired"
    last_event(world.project, "note.renew")
    last_event(world.project, "note.expire")


def test_yesterdays_fact_lines_are_lifted(world):
    row = services.day_append(
        actor=world.as_agent, line="fact: The CI cache key uses the lockfile hash"
    )
    services.day_append(actor=world.as_agent, line="tried a few things with the cache")
    services.day_append(actor=world.as_agent, line="learned: Staging restarts at 02:00 UTC")
    today = timezone.now().date()
    Note.objects.filter(pk=row.id).update(day=today - timedelta(days=1))
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert review.counts["lifted"] == 2
    texts = set(
        Note.objects.filter(owner_agent=world.agent, kind="fact").values_list("content", flat=True)
    )
    assert texts >= {"The CI cache key uses the lockfile hash", "Staging restarts at 02:00 UTC"}
    lifted = Note.objects.get(content="The CI cache key uses the lockfile hash")
    assert lifted.task_key == "memory-dreaming" and lifted.created_by_agent_id == world.agent.id
    # Running again lifts nothing new: identical facts stay one.
    again = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert again.counts["lifted"] == 0
    assert liftable("09:12 PIN-7 Fact: x") == "x" and liftable("09:12 facts are fun") is None


def test_a_full_project_lifts_what_fits_and_still_flags(world, settings):
    """A project at its cap never fails the review: what fits is lifted, the rest is counted
    and stays in the day log (the review queue offers it), and the flag step still runs."""
    old = fact(world, "An old fact nobody recalls")
    Note.objects.filter(pk=old.id).update(created_at=timezone.now() - timedelta(days=40))
    row = services.day_append(actor=world.as_agent, line="fact: First lifted fact")
    for i in range(3):
        services.day_append(actor=world.as_agent, line=f"fact: Waiting fact number {i}")
    Note.objects.filter(pk=row.id).update(day=timezone.now().date() - timedelta(days=1))
    settings.MEMORY_PORTAL = {
        **settings.MEMORY_PORTAL,
        "PROJECT_NOTE_CAP": Note.objects.filter(project=world.project).count() + 1,
    }
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert review.status == "succeeded" and review.error_code == ""
    assert review.counts["lifted"] == 1 and review.counts["lift_full"] == 3
    assert review.counts["flagged_ids"] == [old.id]
    queue = services_queue(world)
    waiting = [d for d in queue.day_lines if "Waiting fact" in d.text]
    assert len(waiting) == 3 and all(d.lifted_as is None for d in waiting)


def services_queue(world):
    from memory_portal.memory import selectors

    return selectors.review_queue(actor=world.as_manager, project=world.project)


def test_facts_no_run_was_served_in_30_days_are_flagged(world):
    """Step 4 reads the read records: an old fact a run was served lately (by any tool) is not
    flagged; one served 31 days ago is, as in the review queue's section."""
    now = timezone.now()
    old = fact(world, "An old fact nobody recalls")
    used = fact(world, "An old fact a run searched for last week")
    long_ago = fact(world, "An old fact last served 31 days ago")
    fresh = fact(world, "A fresh fact")
    Note.objects.filter(pk__in=[old.id, used.id, long_ago.id]).update(
        created_at=now - timedelta(days=40)
    )
    served(world, used, now - timedelta(days=7))
    served(world, long_ago, now - timedelta(days=31))
    review = services.routine_run_now(actor=world.as_member, agent=world.agent, now=now)
    assert review.counts["flagged"] == 2
    assert sorted(review.counts["flagged_ids"]) == sorted([old.id, long_ago.id])
    assert fresh.id not in review.counts["flagged_ids"]
    assert services_queue(world).totals["not_recalled"] == 2  # the queue's section: the same


def test_scheduled_run_happens_once_a_day(world, run_due):
    fact(world, "A fact")
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    assert run_due() == [routine_of(world).pk]
    assert ReviewRun.objects.filter(trigger="schedule").count() == 1
    review = ReviewRun.objects.get()
    assert review.day == NOW.date() and review.status == "succeeded"
    assert routine_of(world).next_run_at == datetime(2026, 12, 3, 4, 0, tzinfo=UTC)
    # A second cron call the same day finds nothing due; a forced one finds the day claimed.
    assert run_due(NOW + timedelta(minutes=5)) == []
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    run_due(NOW + timedelta(minutes=10))
    assert ReviewRun.objects.filter(trigger="schedule").count() == 1
    assert Run.objects.filter(task_key="memory-dreaming").count() == 1


def test_paused_routine_waits_until_resumed(world, run_due):
    fact(world, "A fact")
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    services.routine_pause(actor=world.as_member, agent=world.agent)
    assert routine_of(world).state == "paused"
    assert run_due() == [] and not ReviewRun.objects.exists()
    last_event(world.project, "routine.pause")
    services.routine_resume(actor=world.as_member, agent=world.agent)
    last_event(world.project, "routine.resume")
    assert len(run_due()) == 1 and ReviewRun.objects.count() == 1


def test_routine_controls_are_for_members(world):
    fact(world, "A fact")
    with refused("not_found", world.project):
        services.routine_pause(actor=world.as_outsider, agent=world.agent)
    with refused("memory_forbidden", world.project):
        services.routine_pause(actor=world.as_agent, agent=world.agent)
    with refused("not_found", world.project):
        services.routine_run_now(actor=world.as_member, agent=world.agent2)


def test_disabled_memory_fails_the_run_without_changes(world):
    fact(world, "Deploy needs the VPN")
    fact(world, "deploy needs the vpn")
    services.memory_disable(actor=world.as_manager, project=world.project)
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert review.status == "failed" and review.error_code == "memory_disabled"
    assert Note.objects.filter(status=Status.ARCHIVED).count() == 0
    assert last_event(world.project, "routine.run").details["status"] == "failed"


@pytest.mark.django_db(transaction=True)
def test_cron_command(world):
    """Real commits: outside a transaction the command's tasks run as they are enqueued."""
    fact(world, "A fact")
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    out = StringIO()
    call_command("memory_run_due_routines", "--now", "2026-12-02T04:05:00Z", stdout=out)
    assert "1 routine(s) due" in out.getvalue() and "succeeded" in out.getvalue()
    out = StringIO()
    call_command("memory_run_due_routines", "--now", "2026-12-02T04:10:00Z", stdout=out)
    assert "0 routine(s) due" in out.getvalue()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_overlapping_cron_commands_run_a_day_once(world):
    fact(world, "A fact")
    ReviewRoutine.objects.update(next_run_at=NOW - timedelta(minutes=5))
    barrier = threading.Barrier(4)
    errors: list[Exception] = []

    def cron() -> None:
        try:
            barrier.wait(timeout=10)
            services.routines_run_due(now=NOW)
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=cron) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert ReviewRun.objects.filter(trigger="schedule").count() == 1
    assert Run.objects.filter(task_key="memory-dreaming").count() == 1


def test_run_now_reports_an_unexpected_failure(world, monkeypatch):
    from memory_portal.memory.services import routines

    fact(world, "A fact")

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(routines, "merge_duplicates", explode)
    with pytest.raises(Exception) as info:
        services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert getattr(info.value, "code", None) == "internal_error"
    review = ReviewRun.objects.get()
    assert review.status == "failed" and review.error_code == "internal_error"
    assert Run.objects.get(task_key="memory-dreaming").status == "failed"


def test_the_first_save_starts_the_routine_in_its_own_transaction_audited(world):
    fact(world, "First fact")
    events = list(
        AuditEvent.objects.filter(project=world.project, action__in=["note.save", "routine.create"])
        .order_by("id")
        .values_list("action", "actor_run_id", "target_ref")
    )
    assert events == [
        ("note.save", world.run.pk, ""),
        ("routine.create", world.run.pk, world.agent.pk),
    ]
    fact(world, "Second fact")
    assert AuditEvent.objects.filter(action="routine.create").count() == 1


def test_a_routine_that_cannot_start_leaves_no_fact(world, monkeypatch):
    """One transaction: when starting the routine fails, the save is rolled back with it."""
    from memory_portal.memory.services import schedule

    def broken(after):
        raise RuntimeError("routine start failed")

    monkeypatch.setattr(schedule, "next_due", broken)
    with pytest.raises(RuntimeError):
        fact(world, "First fact")
    with pytest.raises(RuntimeError):
        services.day_append(actor=world.as_agent, line="first line of the day")
    assert not Note.objects.filter(owner_agent=world.agent).exists()
    assert (
        not AuditEvent.objects.filter(project=world.project)
        .filter(action__in=["note.save", "day.create", "routine.create"])
        .exists()
    )


def test_the_first_day_line_starts_the_routine_audited(world):
    services.day_append(actor=world.as_agent, line="started PIN-42")
    assert routine_of(world).state == "active"
    event = last_event(world.project, "routine.create")
    assert event.actor_run_id == world.run.pk and event.target_ref == world.agent.pk


def test_review_statements_do_not_grow_with_the_agents_facts(world):
    """A review that changes nothing costs the same statements at 5 facts or 60: 26 on SQLite
    for a manual run, the person's claim (membership, routine, lock, running check, claim row,
    audit) and the test's savepoints included; PostgreSQL adds its two lock-wait settings and
    sends the run and its audit row in one statement (27). A scheduled review is 15 statements
    on SQLite, 16 on PostgreSQL (issue "Fast at a million notes" aimed at 20;
    docs/PERFORMANCE.md)."""
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    def review_after(count: int, start: int) -> int:
        for i in range(start, start + count):
            fact(world, f"Distinct fact number {i} about service {i}")
        with CaptureQueriesContext(conn) as captured:
            review = services.routine_run_now(actor=world.as_member, agent=world.agent)
        assert review.status == "succeeded"
        return len(captured.captured_queries)

    few = review_after(5, 0)
    many = review_after(55, 100)
    assert many == few and few <= 27


def test_a_scheduled_review_with_changes_adds_only_their_read_and_updates(world, run_due):
    """A review that merges, renews and expires costs the statements of one that changes
    nothing plus four: the notes read again under the lock and one UPDATE per kind of change.
    Their audit events go in the end's INSERT and the counters with the end's revision, one
    UPDATE (16 + 4 = 20 on PostgreSQL, the issue's bound; docs/PERFORMANCE.md)."""
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    from memory_portal.memory import counters
    from memory_portal.memory.models import MemorySetting

    def scheduled_review(now) -> tuple[int, ReviewRun]:
        ReviewRoutine.objects.update(next_run_at=now - timedelta(minutes=5))
        routine = routine_of(world)
        with CaptureQueriesContext(conn) as captured:
            assert run_due(now) == [routine.pk]
        # Not the test's savepoints: outside a test, the review's transactions are its own.
        sent = [q for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]
        return len(sent), ReviewRun.objects.get(day=now.date())

    fact(world, "Nothing to change here")
    unchanged, review = scheduled_review(NOW)
    assert review.counts["merged"] == review.counts["expired"] == 0

    old = fact(world, "Deploy needs the VPN")
    new = fact(world, "deploy needs the VPN.")
    renewed, expired = fact(world, "Recalled recently"), fact(world, "Never recalled")
    later = NOW + timedelta(days=1)
    Note.objects.filter(pk__in=[renewed.id, expired.id]).update(
        expires_at=later - timedelta(hours=1)
    )
    served(world, renewed, later - timedelta(days=2))
    revision = MemorySetting.objects.get(project=world.project).revision
    last_event_id = AuditEvent.objects.order_by("-id").values_list("id", flat=True)[0]
    changed, review = scheduled_review(later)

    counts = review.counts
    assert (counts["merged"], counts["renewed"], counts["expired"]) == (1, 1, 1)
    assert review.status == "succeeded"
    assert changed == unchanged + 4
    if connection.vendor == "postgresql":  # the cron call's one query for all due routines
        assert (unchanged, changed) == (1 + 16, 1 + 20)
    setting = MemorySetting.objects.get(project=world.project)
    assert setting.revision == revision + 1, "one revision for the changes and the run's end"
    assert {f: getattr(setting, f) for f in counters.FIELDS} == counters.recounted(world.project.pk)
    assert Note.objects.get(pk=old.id).superseded_by_id == new.id
    actions = list(
        AuditEvent.objects.filter(id__gt=last_event_id)
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions[-5:] == [
        "note.merge",
        "note.renew",
        "note.expire",
        "run.status",
        "routine.run",
    ]
