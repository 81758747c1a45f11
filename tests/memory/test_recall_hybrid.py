"""Hybrid recall scoring (docs/RECALL.md, "The hybrid score", "Two tiers"): the paraphrase set's
rules, the floors of the scorers on the labelled sets (asserted on the development set, guarded
on the others), the split of unrelated questions, and the calibration of the semantic score."""

from __future__ import annotations

import numpy as np
import pytest

from bench.recall_eval import _facts_by_agent, evaluate, load_dataset
from memory_portal.memory.recall import hybrid
from memory_portal.memory.recall.text import terms

DATASET = load_dataset()


@pytest.fixture(scope="module", autouse=True)
def _embeddings_on():
    """Meaning is opt-in (MEMORY_EMBEDDINGS); these tests measure it."""
    from django.conf import settings
    from django.test import override_settings

    with override_settings(MEMORY_PORTAL={**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}):
        yield


@pytest.fixture(scope="module")
def evaluations():
    shared: dict = {}
    return {
        name: evaluate(DATASET, scorer=name, shared=shared)
        for name in ("lexical", "semantic", "hybrid", "cosine")
    }


def test_the_paraphrase_set_is_big_enough_and_consistent():
    paraphrases = DATASET["PARAPHRASES"]
    agent_of = {f["key"]: f["agent"] for f in DATASET["FACTS"]}
    assert len(paraphrases) >= 40
    assert sum(len(q["expected"]) >= 2 for q in paraphrases) >= 5
    assert len(DATASET["PARAPHRASE_UNRELATED"]) >= 15
    for q in paraphrases:
        assert q["expected"] and all(agent_of[k] == q["agent"] for k in q["expected"])


def test_the_paraphrases_share_no_term_with_their_facts():
    """No word beyond stop-words, no stem and no synonym of the lexical scorer's map."""
    text = {f["key"]: f["text"] for f in DATASET["FACTS"]}
    for q in DATASET["PARAPHRASES"]:
        for key in q["expected"]:
            shared = set(terms(q["query"])) & set(terms(text[key]))
            assert not shared, (q["query"], key, shared)


def test_hybrid_is_no_worse_than_lexical_on_the_main_set(evaluations):
    """The main set shares words with its facts: the first tier is more precise than words
    alone, and both tiers find more (measured 0.951 / 0.795, both tiers 0.890; words alone
    0.896 / 0.822). The first tier gave up one fact of 73 to keep words that are not the
    evidence out of it (docs/RECALL.md, "The hybrid score")."""
    lexical, hybrid_ = evaluations["lexical"], evaluations["hybrid"]
    assert hybrid_.main.precision >= lexical.main.precision
    assert hybrid_.main.both_recall >= lexical.main.recall
    assert hybrid_.main.precision >= 0.94 and hybrid_.main.recall >= 0.79
    assert hybrid_.main.both_recall >= 0.88


def test_hybrid_on_the_paraphrase_set(evaluations):
    """The blind set, reported (docs/RECALL.md): measured first tier 0.941 / 0.216, both tiers
    0.730; these are guards against a regression, not what the calibration was chosen on."""
    ev = evaluations["hybrid"]
    assert ev.paraphrases.precision >= 0.9, ev.paraphrases.precision
    assert ev.paraphrases.both_recall >= 0.7, ev.paraphrases.both_recall
    assert evaluations["lexical"].paraphrases.recall == 0.0  # the set is out of words' reach


def test_hybrid_floors_on_the_development_set(evaluations):
    """The set the calibration was chosen on (tests/memory/recall_dev_set.py): the first tier
    at precision 0.9 or more (measured 1.000 / 0.101), both tiers finding 0.7 of the expected
    facts (measured 0.747); its off-topic questions get nothing in either tier, its
    close-to-work ones at most one confident pick (measured none)."""
    ev = evaluations["hybrid"]
    assert len(ev.dev.outcomes) >= 45
    assert ev.dev.precision >= 0.9, ev.dev.precision
    assert ev.dev.both_recall >= 0.7, ev.dev.both_recall
    assert evaluations["lexical"].dev.recall == 0.0  # out of words' reach, as the paraphrases
    accepts = ev.false_accepts(ev.dev_unrelated)
    assert accepts["off_pairs"] == 40 and accepts["off_picks"] == 0, accepts
    assert accepts["close_tier1"] <= 1, accepts


def test_picks_are_ordered_by_meaning_no_worse_than_the_bare_model(evaluations):
    """Recall's ranking (the first tier, then the rest, each by meaning) against the bare
    model's cosine ranking, R@1 and R@5 on every set: ordered by the hybrid score, a word the
    question shares with a wrong fact lifted it above the right one (paraphrases 0.55 against
    0.79). Measured R@1 main 0.92 / 0.89, held-out 1.00 / 1.00, tasks 0.60 / 0.60, dev 0.65 /
    0.65; paraphrases 0.78 / 0.79: one question of 67 ("Our build pipeline can no longer upload
    containers…") puts a first-tier fact matched by its words above the model's first, which
    missed the first tier. R@5 ties everywhere."""
    ours, bare = evaluations["hybrid"], evaluations["cosine"]
    for name in ("main", "held_out", "tasks", "dev"):
        mine, peer = getattr(ours, name), getattr(bare, name)
        assert mine.r_at(1) >= peer.r_at(1), (name, mine.r_at(1), peer.r_at(1))
    for name in ("main", "held_out", "paraphrases", "tasks", "dev"):
        mine, peer = getattr(ours, name), getattr(bare, name)
        assert mine.r_at(5) >= peer.r_at(5), (name, mine.r_at(5), peer.r_at(5))
    one = 1 / len(ours.paraphrases.outcomes)
    assert ours.paraphrases.r_at(1) >= bare.paraphrases.r_at(1) - one
    assert ours.paraphrases.r_at(1) >= 0.75 and ours.paraphrases.r_at(5) >= 0.9


def test_off_topic_questions_get_nothing_in_either_tier(evaluations):
    for ev in (evaluations[name] for name in ("lexical", "semantic", "hybrid")):
        outcomes = [*ev.unrelated, *ev.paraphrase_unrelated, *ev.dev_unrelated]
        off = [o for o in outcomes if o.query in ev.off_topic and (o.picked or o.related)]
        assert off == [], (ev.scorer, [(o.agent, o.query, o.picked, o.related) for o in off])
    assert len(evaluations["hybrid"].off_topic) == 1 + 10 + 18


def test_close_to_work_questions_are_not_confident(evaluations):
    """Close-to-work questions (a colleague, a vendor, a place the facts know) may get a
    "possibly related" fact, not a confident one: none on the main and development sets, and
    at most one over the paraphrase set's 72 (question, agent) pairs (measured one, a review
    SLA for "what customers say about our checkout on Trustpilot"; six more when a shared
    name could carry a pick: docs/RECALL.md, "The hybrid score")."""
    ev = evaluations["hybrid"]
    assert ev.false_accepts(ev.unrelated)["close_tier1"] == 0
    assert ev.false_accepts(ev.dev_unrelated)["close_tier1"] == 0
    paraphrase = ev.false_accepts(ev.paraphrase_unrelated)
    assert paraphrase["close_pairs"] == 72 and paraphrase["close_tier1"] <= 1, paraphrase


def test_a_question_in_lower_case_is_held_to_the_same_rules(evaluations):
    """People type in lower case: then the facts' case tells names (docs/RECALL.md, "The
    hybrid score"). Close-to-work questions in lower case get at most one confident pick over
    the paraphrase set's 72 pairs too (measured one; seven before, every shared name then
    carrying its pick), off-topic ones nothing, and the sets score as written (main 0.951 /
    0.795, both tiers 0.890; paraphrase 0.941 / 0.216, 0.730)."""
    ev = evaluations["hybrid"]
    lower = ev.false_accepts(ev.paraphrase_unrelated_lower)
    assert lower["close_pairs"] == 72 and lower["close_tier1"] <= 1, lower
    assert lower["off_picks"] == 0, lower
    assert ev.false_accepts(ev.unrelated_lower)["close_tier1"] == 0
    assert ev.paraphrases_lower.precision >= 0.9 and ev.paraphrases_lower.both_recall >= 0.7
    assert ev.main_lower.precision >= 0.94 and ev.main_lower.recall >= 0.79
    assert ev.main_lower.both_recall >= ev.main.both_recall


def test_the_second_tier_is_lower_confidence_and_bounded(evaluations):
    ev = evaluations["hybrid"]
    for figures in (ev.main, ev.paraphrases, ev.dev, ev.tasks):
        for o in figures.outcomes:
            assert len(o.related) <= 3 and all(score < 0.5 for _, score in o.related), o.query
            assert not (o.picked_keys & o.related_keys), o.query
    assert all(not o.related for o in evaluations["lexical"].main.outcomes)  # words alone
    quiet = evaluate(DATASET, scorer="hybrid", related=0)
    assert all(not o.related for o in quiet.dev.outcomes)  # 0 serves the first tier alone
    assert quiet.dev.precision == ev.dev.precision and quiet.dev.recall == ev.dev.recall


def test_semantic_scores_are_calibrated():
    cos = np.array([0.55, 0.20, 0.10, 0.05, 0.12, 0.08])
    scores = hybrid.semantic_from_cosines(cos)
    assert scores.min() >= 0.0 and scores.max() <= 1.0
    assert scores[0] >= 0.5 and (scores[1:] < 0.5).all()
    # A question about nothing the agent knows: the best fact stands out, but is not close.
    assert (hybrid.semantic_from_cosines(np.array([0.30, 0.05, 0.02, 0.0])) < 0.5).all()
    # A question close to everything: nothing stands out.
    assert (hybrid.semantic_from_cosines(np.array([0.50, 0.49, 0.48, 0.47, 0.46])) < 0.5).all()
    # One fact alone can still be recalled: the spread is shrunk towards a prior.
    assert hybrid.semantic_from_cosines(np.array([0.6]))[0] >= 0.5
    assert hybrid.semantic_from_cosines(np.zeros(0)).size == 0


def test_meaning_vetoes_a_word_only_match():
    """'red' and 'job' are shared with the nightly mutmut fact, whose subject is another."""
    facts = _facts_by_agent(DATASET["FACTS"])["ci"]
    query = "Why does the voucher spec go red only for jobs spanning the day boundary?"
    scored = hybrid.hybrid_scores(query, facts)
    by_key = {f.key: i for i, f in enumerate(facts)}
    mutmut = by_key["mutmut_nightly"]
    assert scored.lexical[mutmut] >= 0.5
    assert scored.scores[mutmut] < 0.5
    assert scored.provider == "builtin:all-MiniLM-L6-v2" and scored.fallback is None
