"""The development recall set (tests/memory/recall_dev_set.py): its shape and the paraphrase
rule. Purely lexical: no scorer runs here, so the set stays unseen by any figures."""

from __future__ import annotations

import runpy
from pathlib import Path

from memory_portal.memory.recall.text import terms

HERE = Path(__file__).parent
FACTS = runpy.run_path(str(HERE / "recall_set.py"))["FACTS"]
DEV = runpy.run_path(str(HERE / "recall_dev_set.py"))
PARAPHRASE = runpy.run_path(str(HERE / "recall_paraphrase_set.py"))


def test_the_dev_set_is_big_enough():
    questions = DEV["DEV_PARAPHRASES"]
    assert len(questions) >= 45
    assert sum(len(q["expected"]) == 2 for q in questions) >= 7
    assert len(DEV["DEV_UNRELATED"]) >= 20


def test_every_expected_key_is_a_fact_of_the_questions_agent():
    agent_of = {f["key"]: f["agent"] for f in FACTS}
    for q in DEV["DEV_PARAPHRASES"]:
        assert q["expected"], q["query"]
        for key in q["expected"]:
            assert key in agent_of, (q["query"], key)
            assert agent_of[key] == q["agent"], (q["query"], key)


def test_the_dev_questions_share_no_term_with_their_facts():
    """No word beyond stop-words, no stem and no synonym of the lexical scorer's map."""
    text = {f["key"]: f["text"] for f in FACTS}
    for q in DEV["DEV_PARAPHRASES"]:
        for key in q["expected"]:
            shared = set(terms(q["query"])) & set(terms(text[key]))
            assert not shared, (q["query"], key, shared)


def test_the_dev_set_does_not_repeat_the_blind_test():
    blind = {q["query"] for q in PARAPHRASE["PARAPHRASES"]}
    blind |= set(PARAPHRASE["PARAPHRASE_UNRELATED"])
    dev = [q["query"] for q in DEV["DEV_PARAPHRASES"]] + DEV["DEV_UNRELATED"]
    assert len(dev) == len(set(dev))
    assert not blind & set(dev)
