"""The stored per-project note counters (memory/counters.py): after every kind of change they
equal a fresh count of the project's notes, and the dashboard and API read them."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count
from django.utils import timezone

from memory_portal.memory import counters, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import MemorySetting, Note, Recovery, Status, Trust
from memory_portal.memory.portability import project_export, project_import
from memory_portal.memory.selectors import project_counts
from memory_portal.memory.selectors.review import awaiting_notes

from .helpers import refused


def counted_afresh(project) -> dict:
    """The header's counts as the dashboard counted them before the counters were stored;
    awaiting review: what the review queue's first section lists."""
    notes = Note.objects.filter(project=project)
    rows = notes.values("trust", "status").annotate(n=Count("id"))
    by_trust = dict.fromkeys(Trust.values, 0)
    by_status = dict.fromkeys(Status.values, 0)
    for row in rows:
        by_trust[row["trust"]] += row["n"]
        by_status[row["status"]] += row["n"]
    awaiting = awaiting_notes(notes).count()
    total = sum(by_status.values())
    return {"total": total, "by_trust": by_trust, "by_status": by_status, "awaiting": awaiting}


def assert_exact(project, after: str = "") -> None:
    stored = MemorySetting.objects.values(*counters.FIELDS).get(project=project)
    assert stored == counters.recounted(project.pk), after
    assert project_counts(project=project) == counted_afresh(project), after


def test_counters_equal_a_fresh_count_after_every_kind_of_change(world):
    w = world
    steps = []

    def step(name, action):
        result = action()
        steps.append(name)
        assert_exact(w.project, after=name)
        return result

    def write(actor, text, **kw):
        return services.note_write(actor=actor, kind="fact", content=text, **kw).note

    earlier = services.run_create(actor=None, agent=w.agent)
    as_earlier = Actor.agent_run(earlier)
    a = step("write", lambda: write(as_earlier, "The CDN caches for an hour."))
    b = step("write", lambda: write(as_earlier, "Logs live in /var/log/shop."))
    c = step("write", lambda: write(w.as_agent2, "Billing retries three times."))
    step("idempotent write", lambda: write(as_earlier, "The CDN caches for an hour."))
    old = step("save", lambda: services.fact_save(actor=as_earlier, text="Builds take 4 min.").note)
    step(
        "supersede",
        lambda: services.fact_save(actor=w.as_agent, text="Builds take 40 min.", supersedes=old.pk),
    )
    step(
        "edit",
        lambda: services.note_edit(actor=w.as_member, note_id=c.pk, content="Billing retries 3x."),
    )
    step("day create", lambda: services.day_append(actor=w.as_agent, line="fact: CI uses uv"))
    step("day append", lambda: services.day_append(actor=w.as_agent, line="more work"))
    step("approve", lambda: services.note_approve(actor=w.as_manager, note_id=a.pk))
    step("reject", lambda: services.note_reject(actor=w.as_manager, note_id=b.pk))
    step("approve a rejected", lambda: services.note_approve(actor=w.as_manager, note_id=b.pk))
    d = step("write", lambda: write(w.as_agent, "The queue drains nightly."))
    e = step("write", lambda: write(w.as_agent, "Deploys need the VPN."))
    step("archive", lambda: services.note_archive(actor=w.as_agent, note_id=d.pk, reason="old"))
    step("unarchive", lambda: services.note_unarchive(actor=w.as_agent, note_id=d.pk))
    step("veto", lambda: services.note_veto(actor=w.as_member, note_id=e.pk))
    step("undo", lambda: services.note_undo(actor=w.as_member, note_id=e.pk))
    recovery = step("forget", lambda: services.note_forget(actor=w.as_manager, note_id=a.pk))
    step("restore", lambda: services.note_restore(actor=w.as_manager, recovery_id=recovery.pk))
    step("archive", lambda: services.note_archive(actor=w.as_member, note_id=a.pk, reason="x"))
    recovery = step("forget", lambda: services.note_forget(actor=w.as_manager, note_id=a.pk))
    step("restore", lambda: services.note_restore(actor=w.as_manager, recovery_id=recovery.pk))
    step("agent forget", lambda: services.note_forget(actor=w.as_agent, note_id=d.pk))
    # A run's revert (forget, veto, and bringing back what it superseded, archived or forgot)
    # and its undo.
    _, revert = step(
        "revert", lambda: services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    )
    step("revert undo", lambda: services.run_revert_undo(actor=w.as_manager, revert_id=revert.pk))
    # The daily review: merges, expiries and renewals, lifts.
    for text in ("Deploy needs the VPN", "deploy needs  the vpn.", "Recalled recently", "Stale"):
        step("save", lambda text=text: services.fact_save(actor=w.as_agent, text=text))
    now = timezone.now()
    stale = Note.objects.filter(owner_agent=w.agent, content__in=["Recalled recently", "Stale"])
    stale.update(expires_at=now - timedelta(hours=1))
    recalled = Note.objects.get(content="Recalled recently")
    services.reads_record(  # an agent's run was served it: the review renews it
        actor=Actor.agent_run(w.run2), tool="recall", served=[(recalled.pk, "learned", 0.5)]
    )
    Note.objects.filter(kind="day").update(day=now.date() - timedelta(days=1))
    review = step(
        "daily review",
        lambda: services.routine_run_now(actor=w.as_member, agent=w.agent, now=now),
    )
    assert (review.counts["merged"], review.counts["expired"], review.counts["lifted"]) == (1, 1, 1)
    # Import: into a new project and again into the same one (nothing new).
    lines = list(project_export(actor=None, project=w.project))
    step(
        "import",
        lambda: project_import(
            actor=None, lines=lines, project_slug="acme-copy", grant_members=True
        ),
    )
    copy = MemorySetting.objects.get(project__slug="acme-copy").project
    assert_exact(copy)
    assert project_counts(project=copy) == project_counts(project=w.project)
    project_import(actor=None, lines=lines, project_slug="acme-copy", grant_members=True)
    assert_exact(copy)
    # Deleting an application takes its notes; a reset empties the memory.
    app_note = step(
        "application note", lambda: write(w.as_agent, "Storefront uses htmx.", scope="application")
    )
    assert app_note.application_id == w.app.pk
    step(
        "application delete",
        lambda: services.application_delete(actor=None, application=w.app, confirm=w.app.slug),
    )
    assert Recovery.objects.filter(project=w.project).exists()
    step("reset", lambda: services.memory_reset(actor=w.as_manager, project=w.project))
    assert counters.recounted(w.project.pk)["notes_active"] == 0
    step("write after reset", lambda: write(w.as_agent2, "Fresh start."))
    assert len(steps) > 30


def test_an_idempotent_or_refused_write_leaves_the_counters(world):
    services.note_write(actor=world.as_agent, kind="fact", content="One fact.")
    services.note_forget(actor=world.as_manager, note_id=Note.objects.get(content="One fact.").pk)
    before = MemorySetting.objects.values(*counters.FIELDS).get(project=world.project)
    assert (before["notes_forgotten"], before["notes_active"]) == (1, 0)
    with refused("memory_forgotten", world.project):
        services.note_write(actor=world.as_agent, kind="fact", content="One fact.")
    services.note_write(actor=world.as_agent, kind="fact", content="Two facts.")
    services.note_write(actor=world.as_agent, kind="fact", content="Two facts.")
    after = MemorySetting.objects.values(*counters.FIELDS).get(project=world.project)
    assert (after["notes_active"], after["notes_awaiting"]) == (1, 1)
    assert_exact(world.project)


def test_migration_0023_counts_awaiting_without_day_logs(world):
    """Before 0023 the stored `notes_awaiting` counted day logs, so the header said more than
    the review queue; the migration recounts it as the queue's first section (and back)."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module(
        "memory_portal.memory.migrations.0023_awaiting_is_the_queue"
    )
    services.note_write(actor=world.as_agent, kind="fact", content="Awaits a person.")
    services.day_append(actor=world.as_agent, line="a line of today's day log")
    setting = MemorySetting.objects.filter(project=world.project)
    assert setting.get().notes_awaiting == 1
    migration.recount_with_day_logs(apps, None)
    assert setting.get().notes_awaiting == 2  # as 0022 left it
    migration.recount(apps, None)
    assert setting.get().notes_awaiting == 1 == awaiting_notes(world.project.notes.all()).count()
