"""Selectors: who sees which note (scopes, reviewers, rejected, expired, evidence), search, the
fingerprint, and evidence-bound writes on a real git repository."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import Note

from .helpers import last_event, refused
from .test_evidence import commit_all, make_repo, write_files


def write(actor, content, **kw):
    kw.setdefault("kind", "fact")
    return services.note_write(actor=actor, content=content, **kw).note


def ids(qs):
    return {n.id for n in qs}


def test_scopes(world):
    shared = write(world.as_agent2, "Shared across the project")
    billing = write(world.as_agent2, "Billing only", scope="application")
    storefront = write(world.as_agent, "Storefront only", scope="application")
    private2 = services.fact_save(actor=world.as_agent2, text="Agent two's own fact").note
    seen_by_agent = ids(selectors.notes_for_actor(actor=world.as_agent))
    assert seen_by_agent == {shared.id, storefront.id}
    seen_by_agent2 = ids(selectors.notes_for_actor(actor=world.as_agent2))
    assert seen_by_agent2 == {shared.id, billing.id, private2.id}
    # People who are members see every note of the project.
    everything = ids(selectors.notes_for_actor(actor=world.as_member, project=world.project))
    assert everything == {shared.id, billing.id, storefront.id, private2.id}
    with refused("not_found", world.project):
        selectors.notes_for_actor(actor=world.as_outsider, project=world.project)
    with refused("memory_not_found", world.project):
        selectors.note_get(actor=world.as_agent, note_id=billing.id)
    with refused("memory_not_found", world.project):
        selectors.note_get(actor=world.as_outsider, note_id=billing.id)


def test_reviewers_see_reviewed_notes_of_other_runs_only(world):
    learned = write(world.as_agent, "Learned, not reviewed")
    reviewed = write(world.as_agent, "Reviewed by a manager")
    services.note_approve(actor=world.as_manager, note_id=reviewed.id)
    # A nested reviewer step inside the agent's own workflow must not consume its own output.
    nested = services.run_create(actor=None, agent=world.reviewer, parent=world.run)
    own_reviewer = Actor.agent_run(nested)
    assert ids(selectors.notes_for_actor(actor=world.as_reviewer)) == {reviewed.id}
    assert ids(selectors.notes_for_actor(actor=own_reviewer)) == set()
    with refused("memory_not_found", world.project):
        selectors.note_get(actor=world.as_reviewer, note_id=learned.id)
    with refused("memory_not_found", world.project):
        selectors.note_get(actor=own_reviewer, note_id=reviewed.id)
    assert not selectors.recoveries_for_actor(actor=world.as_reviewer).exists()
    assert selectors.memory_status(actor=world.as_reviewer).access_mode == "reviewed"
    assert selectors.memory_status(actor=world.as_agent).access_mode == "learned"


def test_expired_and_archived_notes_leave_agent_lists(world):
    live = write(world.as_agent, "Still live")
    soon = write(world.as_agent, "Expires", expires_at=timezone.now() + timedelta(hours=1))
    archived = services.fact_save(actor=world.as_agent, text="Archived fact").note
    services.note_archive(actor=world.as_agent, note_id=archived.id, reason="old")
    Note.objects.filter(pk=soon.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert ids(selectors.notes_for_actor(actor=world.as_agent)) == {live.id}
    with_expired = selectors.notes_for_actor(actor=world.as_agent, include_expired=True)
    assert ids(with_expired) == {live.id, soon.id}
    assert archived.id in ids(
        selectors.notes_for_actor(actor=world.as_agent, include_archived=True)
    )
    assert set(Note.objects.live().values_list("id", flat=True)) == {live.id}


def test_v1_list_is_own_memories_for_agents(world):
    mine = services.fact_save(actor=world.as_agent, text="Mine").note
    day = services.day_append(actor=world.as_agent, line="a line")
    services.fact_save(actor=world.as_agent2, text="Theirs")
    write(world.as_agent, "A project note is not a v1 memory")
    assert ids(selectors.memories_for_actor(actor=world.as_agent)) == {mine.id, day.id}
    assert ids(selectors.memories_for_actor(actor=world.as_agent, kind="day")) == {day.id}
    with refused("memory_not_own", world.project):
        selectors.memories_for_actor(actor=world.as_agent, agent_id=world.agent2.id)
    assert len(selectors.memories_for_actor(actor=world.as_member)) == 3
    person_view = selectors.memories_for_actor(actor=world.as_member, agent_id=world.agent.id)
    assert ids(person_view) == {mine.id, day.id}
    assert not selectors.memories_for_actor(actor=world.as_outsider).exists()


def test_search_finds_words_in_content_and_summary(world):
    deploy = write(world.as_agent, "The staging deploy needs the VPN switched on first.")
    write(world.as_agent, "Flaky test: checkout spec times out on CI under load.")
    summary = write(world.as_agent, "Column order differs", summary="Legacy export quirk")
    assert ids(selectors.notes_search(actor=world.as_agent, query="staging deploy")) == {deploy.id}
    assert ids(selectors.notes_search(actor=world.as_agent, query="export")) == {summary.id}
    assert not selectors.notes_search(actor=world.as_agent, query="kubernetes").exists()
    other = selectors.notes_search(actor=world.as_agent, query="deploy", kind="lesson")
    assert not other.exists()


@pytest.mark.postgres
def test_postgres_search_stems_and_ranks(world):
    write(world.as_agent, "Deploys to staging require the VPN.")
    best = write(world.as_agent, "Deploying: deploy scripts deploy twice", summary="deploy")
    found = list(selectors.notes_search(actor=world.as_agent, query="deploying"))
    assert len(found) == 2 and found[0].id == best.id
    assert not selectors.notes_search(actor=world.as_agent, query='"VPN staging"').exists()


def test_fingerprint_ignores_own_run_but_sees_others(world):
    write(world.as_agent, "Seen by everyone")
    fp = selectors.fingerprint(actor=world.as_agent)
    mine = write(world.as_agent, "Written by my own run")
    services.scratchpad_add(actor=world.as_agent, text="my todo")
    assert selectors.fingerprint(actor=world.as_agent) == fp
    services.note_forget(actor=world.as_agent, note_id=mine.id)
    assert selectors.fingerprint(actor=world.as_agent) == fp
    other = write(world.as_agent2, "Written by another run")
    fp2 = selectors.fingerprint(actor=world.as_agent)
    assert fp2 != fp
    # Forgetting another run's note in my own run still leaves my view unchanged.
    services.note_forget(actor=world.as_agent, note_id=other.id)
    assert selectors.fingerprint(actor=world.as_agent) == fp2
    live = write(world.as_agent2, "Another run's live note")
    fp2 = selectors.fingerprint(actor=world.as_agent)
    services.note_approve(actor=world.as_manager, note_id=live.id)  # a person's review shows
    fp3 = selectors.fingerprint(actor=world.as_agent)
    assert fp3 != fp2
    services.memory_disable(actor=world.as_manager, project=world.project)
    services.memory_enable(actor=world.as_manager, project=world.project)
    assert selectors.fingerprint(actor=world.as_agent) != fp3


def test_fingerprint_changes_when_another_run_forgets(world):
    note = write(world.as_agent2, "Shared note")
    fp = selectors.fingerprint(actor=world.as_agent)
    services.note_forget(actor=world.as_agent2, note_id=note.id)
    assert selectors.fingerprint(actor=world.as_agent) != fp


def test_status_counts_without_content(world):
    write(world.as_agent, "One")
    write(world.as_agent2, "Two")
    status = selectors.memory_status(actor=world.as_agent)
    assert status.enabled and status.note_count == 2 and status.revision > 0
    services.memory_disable(actor=world.as_manager, project=world.project)
    status = selectors.memory_status(actor=world.as_agent)
    assert not status.enabled and status.note_count == 0


# --- evidence on a real repository ---------------------------------------------------------

RECORDS = "# Shared record layouts\n\nACCOUNT-RECORD: id, name, balance, currency\n"


@pytest.fixture
def linked_repo(world, tmp_path):
    path, first = make_repo(tmp_path, {"src/shared/records.txt": RECORDS, "README.md": "hi\n"})
    repository = services.repository_create(actor=None, slug="legacy-main", path=path)
    services.repository_link_set(
        actor=None, application=world.app, repository=repository, revision=first
    )
    return path, first, repository


def test_evidence_bound_note_records_the_commit(world, linked_repo):
    path, first, _ = linked_repo
    note = write(
        world.as_agent,
        "Shared record layouts are defined in this file.",
        kind="navigation",
        evidence={
            "repositoryId": "legacy-main",
            "path": "src/shared/records.txt",
            "quote": "ACCOUNT-RECORD: id, name",
        },
    )
    assert note.evidence_commit == first and note.evidence_path == "src/shared/records.txt"
    assert note.id in ids(selectors.notes_for_actor(actor=world.as_agent))
    # Agents of an application without that link never see it.
    assert note.id not in ids(selectors.notes_for_actor(actor=world.as_agent2))


def test_repin_makes_evidence_stale_until_reverified(world, linked_repo, tmp_path):
    from pathlib import Path

    path, first, repository = linked_repo
    note = write(
        world.as_agent,
        "Account records carry a currency column.",
        evidence={
            "repositoryId": "legacy-main",
            "path": "src/shared/records.txt",
            "quote": "balance, currency",
        },
    )
    write_files(Path(path), {"README.md": "changed readme\n"})
    second = commit_all(Path(path), "second")
    services.repository_link_set(
        actor=world.as_manager, application=world.app, repository=repository, revision=second
    )
    assert last_event(world.project, "repository.link").details == {"from": first, "to": second}
    assert note.id not in ids(selectors.notes_for_actor(actor=world.as_agent))
    stale = Note.objects.filter(selectors.evidence_stale_annotation())
    assert note.id in ids(stale)
    services.note_reverify(actor=world.as_member, note_id=note.id)
    note.refresh_from_db()
    assert note.evidence_commit == second
    assert note.id in ids(selectors.notes_for_actor(actor=world.as_agent))
    assert last_event(world.project, "note.reverify").details == {"from": first, "to": second}


def test_reverify_fails_when_the_quote_is_gone(world, linked_repo):
    from pathlib import Path

    path, first, repository = linked_repo
    note = write(
        world.as_agent,
        "Balances are stored per currency.",
        evidence={
            "repositoryId": "legacy-main",
            "path": "src/shared/records.txt",
            "quote": "balance, currency",
        },
    )
    write_files(Path(path), {"src/shared/records.txt": "# Shared\n\nACCOUNT: id only\n"})
    second = commit_all(Path(path), "drop columns")
    services.repository_link_set(
        actor=None, application=world.app, repository=repository, revision=second
    )
    with refused("memory_evidence_invalid", world.project):
        services.note_reverify(actor=world.as_member, note_id=note.id)


def test_an_agent_restores_only_recoveries_it_may_see(world, linked_repo):
    from pathlib import Path

    path, _first, repository = linked_repo
    note = write(
        world.as_agent,
        "Account records carry a currency column.",
        evidence={"repositoryId": "legacy-main", "path": "src/shared/records.txt"},
    )
    recovery = services.note_forget(actor=world.as_agent, note_id=note.id)
    write_files(Path(path), {"README.md": "changed readme\n"})
    second = commit_all(Path(path), "second")
    services.repository_link_set(
        actor=None, application=world.app, repository=repository, revision=second
    )
    # Its evidence is stale for the agent now: not listed, and not restorable by id either.
    assert recovery.id not in ids(selectors.recoveries_for_actor(actor=world.as_agent))
    with refused("memory_recovery_not_found", world.project):
        services.note_restore(actor=world.as_agent, recovery_id=recovery.id)
    assert services.note_restore(actor=world.as_manager, recovery_id=recovery.id).pk == note.id


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        ({"repositoryId": "unknown-repo", "path": "README.md"}, "repository_not_linked"),
        ({"repositoryId": "legacy-main", "path": "missing.txt"}, "path_not_found"),
        ({"repositoryId": "legacy-main", "path": "src/shared"}, "not_a_regular_file"),
        (
            {"repositoryId": "legacy-main", "path": "README.md", "quote": "not in the file!"},
            "quote_not_found",
        ),
    ],
)
def test_bad_evidence_is_refused_with_a_reason(world, linked_repo, evidence, reason):
    with refused("memory_evidence_invalid", world.project) as info:
        write(world.as_agent, "A cited note", evidence=evidence)
    assert info.value.reason == reason


def test_evidence_needs_an_application(world, linked_repo):
    lone = services.agent_create(actor=None, project=world.project, name="Lone", stage="runtime")
    actor = Actor.agent_run(services.run_create(actor=None, agent=lone))
    with refused("memory_evidence_invalid", world.project):
        write(actor, "A cited note", evidence={"repositoryId": "legacy-main", "path": "README.md"})
