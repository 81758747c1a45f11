"""A name is not a subject (docs/RECALL.md, "The hybrid score"): a fact that shares only a
name with the question (a colleague, a vendor) is not a confident pick; one the rest of the
question still matches is. Questions written for these tests, not taken from a labelled set."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest

from bench.recall_eval import _facts_by_agent, load_dataset
from memory_portal.memory.recall import hybrid
from memory_portal.memory.recall.text import (
    capitalised,
    lower_words,
    names,
    without_words,
)

FACTS = _facts_by_agent(load_dataset()["FACTS"])


@pytest.fixture(autouse=True)
def _embeddings_on():
    from django.conf import settings
    from django.test import override_settings

    with override_settings(MEMORY_PORTAL={**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}):
        yield


def test_names_are_words_capitalised_inside_a_sentence():
    assert names("Book a room for Maya's planning session") == {"maya"}
    assert names("Send Ana flowers to the São Paulo office") == {"ana", "são", "paulo"}
    assert names("Upgrade the Stripe library and its API version") == {"stripe"}
    # A sentence's or a title's first word, and acronyms, are not names.
    assert names("Stripe refunds run twice. Retries happen") == set()
    assert names("PIN-1043: Since the deploy, CI and the SKU export fail") == set()
    assert names("Speed up the pipeline\nPull requests wait") == set()


def test_a_fact_s_capitalised_words_stand_for_its_names_for_a_question_that_shows_none():
    """A sentence's first word too; not an acronym or its plural, a day, a function word or
    an engineering word of the synonym map."""
    text = "Maya blocks PRs. The Friday deploy needs Ana's OK. Production waits"
    assert capitalised(text) == {"maya", "ana"}


def test_days_and_months_are_times_not_names():
    assert names("A Friday deploy needs Maya's OK, and no release in December") == {"maya"}


def test_a_small_memory_keeps_a_question_about_the_fact_and_drops_one_about_the_person():
    """Four facts (IDF and the spread are then the small memory's): "deploy on Friday" is
    the release rule's subject; Maya's vacation is not."""
    facts = [
        SimpleNamespace(id=str(i), summary="", content=text)
        for i, text in enumerate(
            [
                "Production releases only go out Tuesday to Thursday, 09:00-15:00 UTC. A Friday "
                "deploy needs Maya's written OK in #release first.",
                "The staging deploy needs the VPN on; without it the helm upgrade times out.",
                "Celery workers ship in their own chart and must be restarted after any change.",
                "Ana prefers squash merges on the billing repo.",
            ]
        )
    ]
    scores = hybrid.hybrid_scores("Can I deploy on Friday without asking Maya?", facts).scores
    assert scores[0] >= 0.5
    scores = hybrid.hybrid_scores("How many vacation days does Maya have left?", facts).scores
    assert scores[0] < 0.5


def test_a_word_written_in_lower_case_is_a_common_noun():
    assert "canary" in lower_words("Promote the canary of release 2.14")
    assert "canary" not in lower_words("Watch the 'Storefront / Canary' board")


def test_names_come_out_with_their_possessives():
    text = "Book a room for Maya's planning session, the team's favourite"
    assert without_words(text, frozenset({"maya"})) == (
        "Book a room for planning session, the team's favourite"
    )


def _scores(agent: str, query: str, *, rule: bool = True) -> dict[str, float]:
    facts = FACTS[agent]
    if rule:
        scores = hybrid.hybrid_scores(query, facts).scores
    else:
        off = np.zeros(len(facts), dtype=bool)
        with mock.patch.object(hybrid, "_named_only", lambda *args, **kwargs: off):
            scores = hybrid.hybrid_scores(query, facts).scores
    return {f.key: s for f, s in zip(facts, scores, strict=True)}


@pytest.mark.parametrize(
    ("agent", "query", "fact"),
    [
        ("reviewer", "Is Maya coming to the offsite?", "maya_tests"),
        ("reviewer", "Buy a farewell present for Tom", "tom_comments"),
        ("integrations", "Invite the Twilio account manager to lunch", "twilio_sender_de"),
        # Written without capitals: the facts' case tells the names (`cased`, `capitalised`).
        ("reviewer", "is maya coming to the offsite?", "maya_tests"),
        ("reviewer", "buy a farewell present for tom", "tom_comments"),
        ("integrations", "invite the twilio account manager to lunch", "twilio_sender_de"),
        ("release", "how many vacation days does maya have left?", "prod_window"),
        # Only the first letter capitalised, as a phone writes it.
        ("reviewer", "Is maya coming to the offsite?", "maya_tests"),
        ("release", "How many vacation days does maya have left?", "prod_window"),
    ],
)
def test_a_fact_sharing_only_a_name_is_not_confident(agent, query, fact):
    assert _scores(agent, query, rule=False)[fact] >= 0.5  # what the name alone gave
    assert _scores(agent, query)[fact] < 0.5


@pytest.mark.parametrize(
    ("agent", "query", "fact"),
    [
        ("release", "Can I deploy to production on Friday without asking Maya?", "prod_window"),
        ("reviewer", "Tom asked me to split my PR; how small should each part be?", "tom_pr_size"),
        ("reviewer", "Maya rejected my payments PR because it had no tests", "maya_tests"),
        ("integrations", "Our Twilio messages to Germany vanish", "twilio_sender_de"),
        ("release", "can i deploy to production on friday without asking maya?", "prod_window"),
        ("reviewer", "maya rejected my payments pr because it had no tests", "maya_tests"),
        ("integrations", "our twilio messages to germany vanish", "twilio_sender_de"),
    ],
)
def test_a_fact_the_rest_of_the_question_matches_stays_confident(agent, query, fact):
    assert _scores(agent, query)[fact] >= 0.5


def test_a_name_shared_by_no_confident_pick_costs_no_embedding():
    """Only the facts that would be picked are checked, so a question whose names no pick
    shares embeds nothing more than the question."""
    facts = FACTS["release"]
    with mock.patch.object(hybrid.query_cache, "embed", wraps=hybrid.query_cache.embed) as spy:
        hybrid.hybrid_scores("Did Maya enjoy her holiday in Portugal?", facts)
    assert spy.call_count == 1


def test_many_facts_sharing_a_name_embed_at_most_a_few_texts():
    """The name check embeds facts' texts without their names only where the fact as stored
    leaves doubt, and at most NAMED_TEXTS_EMBEDDED of them a recall, the best scored first (a
    memory of 2,000 facts took 0.4-0.6 s on a question sharing a name with 29 picks)."""
    facts = hybrid.Facts(
        SimpleNamespace(id=str(i), summary="", content=f"Zorblax rotates the pager on week {i}.")
        for i in range(12)
    )
    scores = np.linspace(0.9, 0.6, len(facts))  # all would be picked, the first best
    embedder = hybrid.builtin_model()
    with mock.patch.object(hybrid, "_embedded", wraps=hybrid._embedded) as spy:
        hybrid._named_only(embedder, "what are zorblax's lunch plans", facts, scores, None)
    # (The facts here have no stored vector: their whole texts are embedded too.)
    without = [t for call in spy.call_args_list for t in call.args[1] if "Zorblax" not in t]
    assert without == [f"rotates the pager on week {i}." for i in range(4)]
    assert hybrid.NAMED_TEXTS_EMBEDDED == 4
