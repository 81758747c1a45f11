"""The recall scorer beyond recall (docs/RECALL.md, "Search and near-duplicates"):
`memory_search` ranks full-text and meaning matches by the hybrid score; the daily review
reports near-duplicates by meaning for the review queue and never merges them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_portal.memory import selectors, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.models import MemorySetting, Note, ReviewRun, RunStatus, Status
from memory_portal.memory.services.review_plan import NEAR_DUPLICATE_COSINE

# Every note here has its vector stored when written (as the background thread does).
pytestmark = pytest.mark.usefixtures("stored_vectors")

TWILIO = (
    "Twilio SMS to Germany needs an alphanumeric sender ID registered in advance; messages from "
    "an unregistered ID are dropped silently."
)
VPN = "The staging deploy needs the VPN on"
VPN_AGAIN = "Staging deployments only work with the VPN connected"
TOM = "Tom dislikes comments that restate the code"


@pytest.fixture(autouse=True)
def _embeddings_on(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}


def lesson(world, content):
    return services.note_write(actor=world.as_agent, kind="lesson", content=content).note


def search(world, query, actor=None):
    return [n.pk for n in selectors.notes_search(actor=actor or world.as_agent, query=query)]


def test_search_finds_a_paraphrase_by_meaning(world):
    twilio = lesson(world, TWILIO)
    lesson(world, VPN)
    lesson(world, TOM)
    # No word in common with the note: full text alone finds nothing.
    query = "Texts to German phones vanish without any error"
    assert search(world, query) == [twilio.pk]


def test_search_ranks_full_text_matches_by_the_hybrid_score(world):
    vpn = lesson(world, VPN)
    again = lesson(world, VPN_AGAIN)
    tom = lesson(world, TOM)
    twilio = lesson(world, TWILIO)
    found = search(world, "VPN staging deploy")
    assert set(found) == {vpn.pk, again.pk}  # both words and meaning: ties, newest first
    assert found == [again.pk, vpn.pk]
    assert tom.pk not in found and twilio.pk not in found


def test_the_ranking_holds_in_a_page_and_inside_a_subquery(world):
    """The hybrid order is an expression on the note's own id column: a page (offset) and a
    subquery that takes the best note keep it."""
    vpn = lesson(world, VPN)
    again = lesson(world, VPN_AGAIN)
    lesson(world, TOM)
    ranked = selectors.notes_search(actor=world.as_agent, query="VPN staging deploy")
    assert [n.pk for n in ranked[1:]] == [vpn.pk]
    best = Note.objects.filter(pk__in=ranked.values("pk")[:1])
    assert [n.pk for n in best] == [again.pk]


def test_search_of_something_unknown_finds_nothing(world):
    lesson(world, TWILIO)
    lesson(world, VPN)
    assert search(world, "Bake banana bread for the office party") == []


def test_search_without_embeddings_is_full_text_only(world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": False}
    lesson(world, TWILIO)
    assert search(world, "Texts to German phones vanish without any error") == []


def test_search_ranks_a_note_without_a_stored_vector_by_words(world):
    vpn = lesson(world, VPN)
    Note.objects.filter(pk=vpn.pk).update(embedding=None, embedding_model="")
    assert search(world, "staging VPN") == [vpn.pk]


def test_a_search_is_ranked_once_per_revision_then_only_its_page_is_read(world):
    """The first search reads the candidates as ids, with whether each matches the words, and
    scores them from the revision-keyed row cache; its ranking is kept, so the same query at
    the same revision reads only the page's rows, by id, without their stored vectors. A
    change to the project (a new revision) is seen at once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    vpn = lesson(world, VPN)
    for i in range(20):
        lesson(world, f"Unrelated lesson number {i} about the billing export")
    query = "Is the VPN needed for staging?"
    with CaptureQueriesContext(connection) as first:
        assert selectors.search_ids(actor=world.as_agent, query=query)[0] == vpn.pk
    assert any("text_match" in q["sql"] for q in first), [q["sql"][:80] for q in first]
    # As a tool call: the setting row (revision, review policy) rides on the token's actor.
    setting = MemorySetting.objects.get(project=world.project)
    tool_actor = Actor.agent_run(world.run, setting=setting)
    with CaptureQueriesContext(connection) as queries:
        ranked = selectors.search_ids(actor=tool_actor, query=query)
        page = selectors.notes_in_order(ranked[:5])
    assert ranked[0] == vpn.pk and [n.pk for n in page] == list(ranked[:5])
    (read,) = [q["sql"] for q in queries]  # the page's rows, by id
    assert '"content"' in read and '"embedding"' not in read and "text_match" not in read
    assert page[0].content == VPN and page[0].producer_status == "running"
    again = lesson(world, VPN_AGAIN)  # the revision moves: the new note is a candidate at once
    assert set(search(world, query)[:2]) == {vpn.pk, again.pk}


def test_a_ranking_is_kept_only_once_every_candidate_has_its_vector(world):
    """A note's vector is stored after its write without a new revision (the background
    thread): a ranking made while one was missing scored that note by words alone, so it is
    not kept, and the search after the vector lands finds the note by meaning."""
    from memory_portal.memory.services import vectors

    twilio = lesson(world, TWILIO)
    lesson(world, VPN)
    Note.objects.filter(pk=twilio.pk).update(embedding=None, embedding_model="")
    query = "text messages to German phones vanish"  # no word in common with the note
    assert search(world, query) == []
    assert vectors.embed_notes.call([twilio.pk]) == 1  # as the thread stores it: same revision
    assert search(world, query) == [twilio.pk]


def test_the_review_reports_near_duplicates_and_merges_nothing(world, settings):
    older = services.fact_save(actor=world.as_agent, text=VPN).note
    newer = services.fact_save(actor=world.as_agent, text=VPN_AGAIN).note
    services.fact_save(actor=world.as_agent, text=TOM)
    services.fact_save(actor=world.as_agent, text="The production deploy needs a manager's OK")
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert review.counts["near_duplicates"] == 1
    (pair,) = review.counts["near_duplicate_pairs"]
    assert pair[:2] == [older.pk, newer.pk] and pair[2] >= NEAR_DUPLICATE_COSINE
    assert review.counts["merged"] == 0
    assert Note.objects.filter(pk__in=[older.pk, newer.pk], status=Status.ACTIVE).count() == 2
    queue = selectors.review_queue(actor=world.as_member, project=world.project)
    assert [(p.older.pk, p.newer.pk) for p in queue.similar] == [(older.pk, newer.pk)]
    # Once a person archives one of them, the pair leaves the queue.
    services.note_archive(actor=world.as_manager, note_id=newer.pk, reason="duplicate")
    assert selectors.review_queue(actor=world.as_member, project=world.project).similar == []


def test_near_duplicates_read_the_vectors_recall_scores(world):
    """The review's pairs come from recall's own vectors (recall/hybrid.fact_vectors): a fact
    whose vector is not stored yet is embedded as recall would, not left out."""
    from memory_portal.memory.embeddings import builtin_model
    from memory_portal.memory.recall.hybrid import fact_vectors

    older = services.fact_save(actor=world.as_agent, text=VPN).note
    newer = services.fact_save(actor=world.as_agent, text=VPN_AGAIN).note
    services.fact_save(actor=world.as_agent, text=TOM)
    Note.objects.filter(pk=newer.pk).update(embedding=None, embedding_model="")
    review = services.routine_run_now(actor=world.as_member, agent=world.agent)
    (pair,) = review.counts["near_duplicate_pairs"]
    assert pair[:2] == [older.pk, newer.pk]
    vectors = fact_vectors(builtin_model(), list(Note.objects.filter(pk__in=pair[:2])))
    assert pair[2] == round(float(vectors[0] @ vectors[1]), 3)


def test_the_queue_reads_only_each_agents_latest_review(world, django_assert_num_queries):
    """A routine's older reviews do not count (their pairs may be stale), and reading the
    latest costs the same statements whatever the length of the history."""
    services.fact_save(actor=world.as_agent, text=VPN)
    services.fact_save(actor=world.as_agent, text=VPN_AGAIN)
    first = services.routine_run_now(actor=world.as_member, agent=world.agent)
    assert len(first.counts["near_duplicate_pairs"]) == 1
    for days in range(1, 31):  # a month of older reviews that reported the same pair
        ReviewRun.objects.create(
            routine=first.routine,
            day=first.day - timedelta(days=days),
            trigger="schedule",
            status=RunStatus.SUCCEEDED,
            counts=first.counts,
            started_at=first.started_at - timedelta(days=days),
            finished_at=first.finished_at - timedelta(days=days),
        )
    with django_assert_num_queries(2):  # the routines' latest counts; the pairs' live notes
        assert len(selectors.similar_pairs(project=world.project)) == 1
    ReviewRun.objects.create(
        routine=first.routine,
        day=first.day,
        trigger="manual",
        status=RunStatus.SUCCEEDED,
        counts={"near_duplicate_pairs": []},
        started_at=first.finished_at + timedelta(seconds=1),
        finished_at=first.finished_at + timedelta(seconds=2),
    )
    assert selectors.similar_pairs(project=world.project) == []


def test_the_review_page_lists_near_duplicates(world, client):
    services.fact_save(actor=world.as_agent, text=VPN)
    services.fact_save(actor=world.as_agent, text=VPN_AGAIN)
    services.routine_run_now(actor=world.as_member, agent=world.agent)
    client.force_login(world.member)
    page = client.get(f"/p/{world.project.slug}/review/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Near-duplicates by meaning" in html and VPN_AGAIN in html
