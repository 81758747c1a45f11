"""Run revert and its undo (SPEC §3.5): the preview changes nothing; applying forgets shared
notes, vetoes facts and day rows, brings back what the run replaced, archived or forgot where
the rules allow; reviewed notes only when ticked; undo puts back exactly what it changed."""

from __future__ import annotations

import pytest

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import REASON_VETOED, AuditEvent, Note, Recovery, RunRevert, Status
from memory_portal.memory.services.revert import run_revert_latest

from .helpers import last_event, refused, snapshot


def write(actor, content, **kw):
    kw.setdefault("kind", "fact")
    return services.note_write(actor=actor, content=content, **kw).note


def status(note_id):
    note = Note.objects.get(pk=note_id)
    return note.status, note.archive_reason


@pytest.fixture
def nested(world):
    """world.run wrote a shared note, a fact and a day line; its nested run (and the nested
    run's own child) wrote more; run2 wrote something unrelated."""
    child = services.run_create(actor=None, agent=world.agent, parent=world.run)
    grandchild = services.run_create(actor=None, agent=world.agent, parent=child)
    w = world
    w.child, w.grandchild = child, grandchild
    w.shared = write(w.as_agent, "The staging database is rebuilt nightly.")
    w.fact = services.fact_save(actor=w.as_agent, text="Deploys go out on Tuesdays.").note
    w.day = services.day_append(actor=w.as_agent, line="looked at the deploy scripts")
    w.child_note = write(Actor.agent_run(child), "Use make deploy-staging for staging.")
    w.grand_note = write(Actor.agent_run(grandchild), "Billing runs on a cron at 02:00.")
    w.unrelated = write(w.as_agent2, "The design system lives in packages/ui.")
    return w


def test_preview_groups_what_would_change_and_changes_nothing(nested):
    w = nested
    before = snapshot(w.project)
    plan, revert = services.run_revert(actor=w.as_manager, run=w.run, dry_run=True)
    assert revert is None
    assert snapshot(w.project) == before
    assert set(plan.run_ids) == {w.run.pk, w.child.pk, w.grandchild.pk}
    assert {n.pk for n in plan.forget} == {w.shared.pk, w.child_note.pk, w.grand_note.pk}
    assert [n.pk for n in plan.veto] == [w.fact.pk]
    assert [n.pk for n in plan.day_rows] == [w.day.pk]
    assert plan.changes == 5 and not plan.confirm_required


def test_revert_of_a_run_with_nested_runs_then_undo(nested):
    w = nested
    revision = selectors.setting_get(project=w.project).revision
    fingerprint = selectors.fingerprint(actor=w.as_agent2)
    plan, revert = services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    for note in (w.shared, w.child_note, w.grand_note):
        assert status(note.pk) == (Status.FORGOTTEN, "")
        assert Recovery.objects.filter(note_id=note.pk).exists()
    for note in (w.fact, w.day):
        fresh = Note.objects.get(pk=note.pk)
        assert fresh.is_vetoed and fresh.vetoed_by == w.manager
    assert status(w.unrelated.pk) == (Status.ACTIVE, "")
    assert selectors.setting_get(project=w.project).revision > revision
    assert selectors.fingerprint(actor=w.as_agent2) != fingerprint  # agents see it next call

    event = last_event(w.project, "run.revert")
    assert event.actor_user == w.manager and event.target_ref == w.run.pk
    assert event.details["revert"] == revert.pk
    assert event.details["counts"]["forgotten"] == 3 and event.details["counts"]["vetoed"] == 1
    assert event.details["counts"]["day_rows"] == 1
    assert set(event.details["forgotten"]) == {w.shared.pk, w.child_note.pk, w.grand_note.pk}
    # Each note's own event says it went with the run (its history shows "reverted with run").
    forget = last_event(w.project, "note.forget")
    assert forget.details["reverted_with_run"] == w.run.pk
    assert forget.details["revert"] == revert.pk
    assert run_revert_latest(run=w.run) == revert

    services.run_revert_undo(actor=w.as_manager, revert_id=revert.pk)
    for note in (w.shared, w.child_note, w.grand_note, w.fact, w.day):
        assert status(note.pk) == (Status.ACTIVE, ""), note.pk
    assert not Recovery.objects.filter(project=w.project).exists()
    undo = last_event(w.project, "run.revert_undo")
    assert undo.details["counts"] == {"restored": 5, "skipped": 0}
    assert run_revert_latest(run=w.run) is None
    with refused("memory_revert_undone", w.project):
        services.run_revert_undo(actor=w.as_manager, revert_id=revert.pk)


def test_reviewed_notes_are_kept_unless_ticked(nested):
    w = nested
    services.note_approve(actor=w.as_manager, note_id=w.shared.pk)
    plan, _ = services.run_revert(actor=w.as_manager, run=w.run, dry_run=True)
    assert [n.pk for n in plan.reviewed] == [w.shared.pk] and plan.selected_reviewed == []
    assert w.shared.pk not in {n.pk for n in plan.forget}

    services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    assert status(w.shared.pk) == (Status.ACTIVE, "")  # kept
    assert last_event(w.project, "run.revert").details["counts"]["reviewed_kept"] == 1

    _, revert = services.run_revert(
        actor=w.as_manager, run=w.run, dry_run=False, include_reviewed=[w.shared.pk]
    )
    assert status(w.shared.pk) == (Status.FORGOTTEN, "")
    assert revert.counts["reviewed_included"] == 1


def test_ticking_a_note_that_is_not_a_reviewed_note_of_the_run_is_refused(nested):
    w = nested
    with refused("memory_invalid", w.project, field="includeReviewed"):
        services.run_revert(
            actor=w.as_manager, run=w.run, dry_run=False, include_reviewed=[w.unrelated.pk]
        )


def test_what_the_run_superseded_archived_or_forgot_comes_back(world):
    w = world
    earlier = services.run_create(actor=None, agent=w.agent)
    old_fact = services.fact_save(actor=Actor.agent_run(earlier), text="Builds take 4 min.").note
    archived = write(Actor.agent_run(earlier), "The CDN caches for an hour.")
    forgotten = write(Actor.agent_run(earlier), "Logs live in /var/log/shop.")
    # The run under revert replaces, archives and forgets them.
    new_fact = services.fact_save(
        actor=w.as_agent, text="Builds take 40 min.", supersedes=old_fact.pk
    ).note
    services.note_archive(actor=w.as_agent, note_id=archived.pk, reason="looks outdated")
    services.note_forget(actor=w.as_agent, note_id=forgotten.pk)

    plan, revert = services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    assert {(n.pk, how) for n, how in plan.bring_back} == {
        (old_fact.pk, "superseded"),
        (archived.pk, "archived"),
        (forgotten.pk, "forgotten"),
    }
    assert Note.objects.get(pk=new_fact.pk).is_vetoed
    for note in (old_fact, archived, forgotten):
        assert status(note.pk) == (Status.ACTIVE, ""), note.pk
    assert Note.objects.get(pk=old_fact.pk).superseded_by_id is None

    services.run_revert_undo(actor=w.as_manager, revert_id=revert.pk)
    old = Note.objects.get(pk=old_fact.pk)
    assert (old.status, old.archive_reason, old.superseded_by_id) == (
        Status.ARCHIVED,
        "superseded",
        new_fact.pk,
    )
    assert status(archived.pk) == (Status.ARCHIVED, "looks outdated")
    assert status(forgotten.pk) == (Status.FORGOTTEN, "")
    recovery = Recovery.objects.get(note_id=forgotten.pk)
    assert recovery.forgotten_by_run_id == w.run.pk  # the record as it was
    assert status(new_fact.pk) == (Status.ACTIVE, "")


def test_content_a_person_vetoed_or_rejected_never_comes_back(world):
    w = world
    earlier = services.run_create(actor=None, agent=w.agent)
    forgotten = write(Actor.agent_run(earlier), "Logs live in /var/log/shop.")
    services.note_forget(actor=w.as_agent, note_id=forgotten.pk)
    # The same content, kept elsewhere, was later vetoed by a person.
    twin = services.fact_save(actor=w.as_manager, agent_id=w.agent2.pk, text="x").note
    Note.objects.filter(pk=twin.pk).update(
        content_key=Note.objects.get(pk=forgotten.pk).content_key,
        status=Status.ARCHIVED,
        archive_reason=REASON_VETOED,
    )
    plan, _ = services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    assert plan.bring_back == []
    assert [(k.note.pk, k.reason) for k in plan.kept] == [(forgotten.pk, "content_refused")]
    assert status(forgotten.pk) == (Status.FORGOTTEN, "")


def test_idempotent_duplicate_belongs_to_the_run_that_wrote_it(world):
    """A later run that wrote the same content got the first run's note id back; the note is
    the first run's (its provenance), so reverting the later run leaves it and reverting the
    first run removes it."""
    w = world
    later = services.run_create(actor=None, agent=w.agent)
    note = write(w.as_agent, "Checkout calls the tax service.")
    again = services.note_write(
        actor=Actor.agent_run(later), kind="fact", content="Checkout calls the tax service."
    )
    assert again.note.pk == note.pk and not again.created
    plan, _ = services.run_revert(actor=w.as_manager, run=later, dry_run=False)
    assert plan.changes == 0 and status(note.pk) == (Status.ACTIVE, "")
    services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    assert status(note.pk) == (Status.FORGOTTEN, "")


def test_undo_leaves_notes_changed_since_alone(nested):
    w = nested
    _, revert = services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    recovery = Recovery.objects.get(note_id=w.shared.pk)
    services.note_restore(actor=w.as_manager, recovery_id=recovery.pk)  # a person, since
    services.note_undo(actor=w.as_manager, note_id=w.fact.pk)
    services.note_archive(actor=w.as_manager, note_id=w.fact.pk, reason="kept aside")
    services.run_revert_undo(actor=w.as_manager, revert_id=revert.pk)
    assert status(w.fact.pk) == (Status.ARCHIVED, "kept aside")  # not touched by the undo
    skipped = last_event(w.project, "run.revert_undo").details["skipped"]
    assert skipped == {w.shared.pk: "recovery_gone", w.fact.pk: "changed_since"}


def test_a_shared_day_row_is_kept(world):
    w = world
    day = services.day_append(actor=w.as_agent, line="first line")
    other = services.run_create(actor=None, agent=w.agent)
    services.day_append(actor=Actor.agent_run(other), line="second line")
    plan, _ = services.run_revert(actor=w.as_manager, run=w.run, dry_run=True)
    assert [(k.note.pk, k.reason) for k in plan.kept] == [(day.pk, "day_row_shared")]


def test_more_than_twenty_changes_need_the_run_id_typed(world):
    w = world
    for i in range(21):
        write(w.as_agent, f"Service number {i} answers on port {8000 + i}.")
    with refused("memory_invalid", w.project, field="confirm"):
        services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    with refused("memory_invalid", w.project, field="confirm"):
        services.run_revert(actor=w.as_manager, run=w.run, dry_run=False, confirm="yes")
    plan, _ = services.run_revert(actor=w.as_manager, run=w.run, dry_run=False, confirm=w.run.pk)
    assert plan.changes == 21


@pytest.mark.parametrize("persona", ["as_member", "as_agent"])
def test_only_managers_revert(nested, persona):
    w = nested
    code = "memory_forbidden"
    with refused(code, w.project):
        services.run_revert(actor=getattr(w, persona), run=w.run, dry_run=False)
    _, revert = services.run_revert(actor=w.as_manager, run=w.run, dry_run=False)
    with refused(code, w.project):
        services.run_revert_undo(actor=getattr(w, persona), revert_id=revert.pk)
    assert RunRevert.objects.filter(pk=revert.pk, undone_at__isnull=True).exists()
    assert not AuditEvent.objects.filter(action="run.revert_undo").exists()
