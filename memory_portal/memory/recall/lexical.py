"""Recall's lexical score: the IDF coverage scorer over the agent's facts' terms
(docs/RECALL.md, "Lexical score"). No database and no model: the hybrid score (hybrid.py) and
the recall service (service.py) build on it; the terms come from text.py."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .text import terms


class RecallTimeout(Exception):
    pass


@dataclass
class Scorer:
    """Scores a query against each of an agent's facts, in [0, 1] (docs/RECALL.md, "Method").

    A word's weight is its IDF over the agent's facts, ln((N + 1) / (df + 0.5)); a query word no
    fact contains weighs as much as a word found in one fact. A fact's coverage is the weight
    of the words it shares with the query over the weight of the shorter side (the query, or
    the fact when the query is a longer task text), halved when that is one word of several.
    The score is the smaller of

    - absolute: coverage ** gamma, calibrated so that a coverage of `floor` scores 0.5, and
    - relative: (coverage / best coverage) ** delta, calibrated so that `relative_cut` of the
      query's best coverage scores 0.5;

    so at the default threshold a fact is kept when it covers at least `floor` of the shorter
    side and at least `relative_cut` of what the best fact covers."""

    documents: Sequence[Sequence[str]]
    floor: float = 0.18
    relative_cut: float = 0.7
    single_word_factor: float = 0.5
    idf: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.documents)
        self._sets = [frozenset(doc) for doc in self.documents]
        df: Counter[str] = Counter()
        for words in self._sets:
            df.update(words)
        self.idf = {t: math.log((n + 1) / (c + 0.5)) for t, c in df.items()}
        self._unseen = math.log((n + 1) / 1.5)
        self._mass = [sum(self.idf[t] for t in words) for words in self._sets]
        # Which facts hold each term: only those that share a query term can score above 0.
        self._postings: dict[str, list[int]] = {}
        for i, words in enumerate(self._sets):
            for t in words:
                self._postings.setdefault(t, []).append(i)
        self._gamma = math.log(0.5) / math.log(self.floor)
        self._delta = math.log(0.5) / math.log(self.relative_cut)

    def weight(self, term: str) -> float:
        return self.idf.get(term, self._unseen)

    def coverage(self, query: frozenset[str], query_mass: float, i: int) -> float:
        words = self._sets[i]
        shared = query & words
        if not shared:
            return 0.0
        matched = sum(self.idf[t] for t in shared)
        if query_mass <= self._mass[i]:
            cover, side = matched / query_mass, len(query)
        else:
            cover, side = matched / self._mass[i], len(words)
        if len(shared) == 1 and side > 1:
            cover *= self.single_word_factor
        return min(1.0, cover)

    def scores(self, query: list[str], *, deadline: float | None = None) -> list[float]:
        q = frozenset(query)
        if not q:
            return [0.0] * len(self._sets)
        query_mass = sum(self.weight(t) for t in q)
        raw = [0.0] * len(self._sets)
        sharing = sorted({i for t in q for i in self._postings.get(t, ())})
        for k, i in enumerate(sharing):
            if deadline is not None and k % 32 == 0 and time.monotonic() >= deadline:
                raise RecallTimeout
            raw[i] = self.coverage(q, query_mass, i)
        if deadline is not None and not sharing and time.monotonic() >= deadline:
            raise RecallTimeout
        best = max(raw, default=0.0)
        return [min(c**self._gamma, (c / best) ** self._delta) if c > 0 else 0.0 for c in raw]


@lru_cache(maxsize=16_384)
def _fact_terms(text: str) -> tuple[str, ...]:
    """A fact's terms, cached by text: facts are read far more often than they change."""
    return tuple(terms(text))


@lru_cache(maxsize=64)
def _scorer(docs: tuple[tuple[str, ...], ...]) -> Scorer:
    """The scorer of one set of facts, kept while the facts stay the same: its IDF table does
    not depend on the query, and building it is most of the lexical cost over 2,000 facts."""
    return Scorer(docs)


def clear_caches() -> None:
    """Forget the cached fact terms and scorers (a benchmark timing a cold recall)."""
    _fact_terms.cache_clear()
    _scorer.cache_clear()


def fact_scorer(facts) -> Scorer:
    """The scorer over these facts' terms (their summary, then their content)."""
    return _scorer(tuple(_fact_terms(f"{f.summary} {f.content}") for f in facts))


def lexical_scores(
    query: str, facts, *, deadline: float | None = None, scorer: Scorer | None = None
) -> list[float]:
    """Each fact's lexical score against the query, in the facts' order (docs/RECALL.md);
    `scorer`, when given, is `fact_scorer(facts)` kept from an earlier call."""
    scorer = scorer or fact_scorer(facts)
    if deadline is not None and time.monotonic() >= deadline:
        raise RecallTimeout
    return scorer.scores(terms(query), deadline=deadline)
