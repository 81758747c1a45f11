"""Hybrid recall scoring (docs/RECALL.md, "The hybrid score"): the paraphrase set's rules, the
floors of the three scorers on both labelled sets, and the calibration of the semantic score."""

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
    lexical, hybrid_ = evaluations["lexical"], evaluations["hybrid"]
    assert hybrid_.main.precision >= lexical.main.precision
    assert hybrid_.main.recall >= lexical.main.recall
    assert hybrid_.main.precision >= 0.89 and hybrid_.main.recall >= 0.82


def test_hybrid_floor_on_the_paraphrase_set(evaluations):
    """Measured 0.889 / 0.324 (docs/RECALL.md). The issue asked for 0.9 / 0.7: not reached with
    all-MiniLM-L6-v2 at a calibration that keeps unrelated questions out; see "Limits"."""
    ev = evaluations["hybrid"]
    assert ev.paraphrases.precision >= 0.85, ev.paraphrases.precision
    assert ev.paraphrases.recall >= 0.3, ev.paraphrases.recall
    assert evaluations["lexical"].paraphrases.recall == 0.0  # the set is out of words' reach


def test_hybrid_floor_on_the_development_set(evaluations):
    """The development set (tests/memory/recall_dev_set.py), written to tune on: measured 0.724 /
    0.266 for the hybrid, where no calibration that keeps the main set's figures reaches
    precision 0.9 (docs/RECALL.md, "Why these constants"). Its unrelated half is harder than the
    other sets' (a question about a colleague the agent knows, a tax question beside a tax
    fact): two of its 88 (question, agent) pairs pick a fact, and no more may."""
    ev = evaluations["hybrid"]
    assert len(ev.dev.outcomes) >= 45
    assert ev.dev.precision >= 0.7, ev.dev.precision
    assert ev.dev.recall >= 0.25, ev.dev.recall
    assert evaluations["lexical"].dev.recall == 0.0  # out of words' reach, as the paraphrases
    assert sum(len(o.picked) for o in ev.dev_unrelated) <= 2


def test_picks_are_ordered_by_meaning_no_worse_than_the_bare_model(evaluations):
    """Recall's first place (R@1), on every set, is at least the bare model's cosine ranking's:
    ordered by the hybrid score, a word the question shares with a wrong fact lifted it above
    the right one (paraphrases 0.55 against 0.79). Measured: main 0.92 / 0.89, held-out 1.00 /
    1.00, paraphrases 0.79 / 0.79, tasks 0.60 / 0.60, dev 0.65 / 0.65."""
    ours, bare = evaluations["hybrid"], evaluations["cosine"]
    for name in ("main", "held_out", "paraphrases", "tasks", "dev"):
        mine, peer = getattr(ours, name), getattr(bare, name)
        assert mine.r_at(1) >= peer.r_at(1), (name, mine.r_at(1), peer.r_at(1))
        assert mine.r_at(5) >= peer.r_at(5), (name, mine.r_at(5), peer.r_at(5))
    assert ours.paraphrases.r_at(1) >= 0.75 and ours.paraphrases.r_at(5) >= 0.9


def test_unrelated_questions_recall_nothing(evaluations):
    for ev in (evaluations[name] for name in ("lexical", "semantic", "hybrid")):
        picked = [o for o in [*ev.unrelated, *ev.paraphrase_unrelated] if o.picked]
        assert picked == [], (ev.scorer, [(o.agent, o.query, o.picked) for o in picked])


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
