"""Hybrid recall scoring (docs/RECALL.md, "The hybrid score"): the lexical score and a calibrated
semantic score from sentence embeddings, combined into one score in [0, 1] where 0.5 keeps
its meaning ("worth recalling").

The semantic score of a fact is the smallest of three calibrated ramps, each 0.5 at its cut:

- **absolute**: the cosine similarity of query and fact (0.5 at `cosine_cut`), so that a
  question about nothing the agent knows gets nothing;
- **distinctive**: how far the fact stands above the agent's other facts for this query, in
  standard deviations (0.5 at `z_cut`), so that a generic question close to everything picks
  nothing; the mean and spread are shrunk towards a prior so an agent with few facts works;
- **near the best**: within `margin` of the best cosine for this query.

The hybrid score is the larger of the lexical and the semantic score: a fact the words already
find keeps its lexical score, and meaning adds the paraphrases words miss. Meaning also vetoes a
word-only match: when the fact's cosine is below `lexical_gate`, its lexical score is capped just
under 0.5 (a shared word, different subject). A name the query shares with a fact is such a
word too: a fact that shares a name and would be recalled is checked again with the names
taken out (`_named_only`), so "Maya's vacation days" does not recall Maya's release rule.

The constants were chosen on the main labelled set and the even-numbered half of the paraphrase
set, for the built-in model (docs/RECALL.md, "The hybrid score"); an endpoint's model has its
own cosine scale and would need its own calibration.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..embeddings import (
    EmbeddingError,
    MiniLMEmbedder,
    OpenAIEmbedder,
    builtin_model,
    decode_many,
    get_embedder,
    note_text,
    query_cache,
    vector_cache,
)
from .lexical import RecallTimeout, Scorer, fact_scorer, lexical_scores
from .text import capitalised, lower_words, names, without_words, writes_lower, written_words

log = logging.getLogger(__name__)

FALLBACK_ENDPOINT = "embeddings_endpoint"  # the endpoint failed; the built-in model scored
FALLBACK_LEXICAL = "lexical_only"  # no embedding provider could run; words alone scored
# The facts' vectors were not all computed within the recall's time budget (a cold process, a
# large memory): words alone scored this time; what was computed stays cached for the next.
FALLBACK_WARMING = "embeddings_warming"


@dataclass(frozen=True)
class SemanticCalibration:
    cosine_cut: float = 0.40
    cosine_full: float = 0.6
    z_cut: float = 1.75
    margin: float = 0.02
    prior_mean: float = 0.12  # the cosine of a query to an unrelated fact, on the labelled set
    prior_std: float = 0.1
    prior_weight: int = 5
    lexical_gate: float = 0.25  # below it, words alone never recall a fact
    lexical_doubt: float = 0.35  # below it, only strong word evidence does
    lexical_strong: float = 0.65


CALIBRATION = SemanticCalibration()


@dataclass(frozen=True)
class RelatedCalibration:
    """The second tier's (docs/RECALL.md, "Two tiers"), chosen on the development set alone:
    a question is near the agent's memory when its best cosine to a fact reaches `gate` (the
    development set's off-topic questions reach at most 0.196; its questions 0.188-0.499, a
    tenth of them under 0.26); a further fact is possibly related when its cosine is within
    `within` of that best and at least `floor`."""

    gate: float = 0.25
    within: float = 0.15
    floor: float = 0.2


RELATED = RelatedCalibration()


def closeness(cosine: float, cal: SemanticCalibration = CALIBRATION) -> float:
    """A possibly related fact's score: its cosine on a ramp from 0 at an unrelated fact's
    usual cosine (`prior_mean`) to 0.5 at `cosine_cut`, kept under 0.5 as the second tier's
    scores are; in order with the tier, unlike the hybrid score, which a shared word or the
    other ramps move."""
    ramp = _ramp(np.float64(cosine), cal.cosine_cut, cal.cosine_full, cal.prior_mean)
    return min(0.49, float(ramp))


def related_order(
    cosines: list[float | None], taken: set[int], cal: RelatedCalibration = RELATED
) -> list[int]:
    """The positions of the facts possibly related to the query, best cosine first, leaving
    out `taken` (the first tier's); none when the question is not near the agent's memory."""
    cos = np.array([np.nan if c is None else c for c in cosines], dtype=np.float64)
    if not cos.size or np.all(np.isnan(cos)):
        return []
    best = np.nanmax(cos)
    if best < cal.gate:
        return []
    lowest = max(cal.floor, best - cal.within)
    near = np.flatnonzero(np.nan_to_num(cos, nan=-1.0) >= lowest)
    near = near[np.argsort(-cos[near], kind="stable")]
    return [int(i) for i in near if int(i) not in taken]


def _ramp(x: np.ndarray, cut: float, full: float, zero: float) -> np.ndarray:
    """0 at `zero`, 0.5 at `cut`, 1 at `full`, linear in between."""
    low = 0.5 * (x - zero) / (cut - zero)
    high = 0.5 + 0.5 * (x - cut) / (full - cut)
    return np.clip(np.where(x < cut, low, high), 0.0, 1.0)


def semantic_from_cosines(
    cosines: np.ndarray, cal: SemanticCalibration = CALIBRATION
) -> np.ndarray:
    """Calibrated semantic scores in [0, 1] from one query's cosines to each of the agent's
    facts."""
    if cosines.size == 0:
        return cosines
    n = cosines.size
    k = cal.prior_weight
    mean = (cosines.sum() + k * cal.prior_mean) / (n + k)
    var = (((cosines - mean) ** 2).sum() + k * cal.prior_std**2) / (n + k)
    z = (cosines - mean) / np.sqrt(var)
    best = cosines.max()
    absolute = _ramp(cosines, cal.cosine_cut, cal.cosine_full, cal.cosine_cut - 0.15)
    distinctive = _ramp(z, cal.z_cut, cal.z_cut + 2.0, cal.z_cut - 1.0)
    near_best = _ramp(cosines - best, -cal.margin, 0.0, -cal.margin - 0.05)
    return np.minimum(np.minimum(absolute, distinctive), near_best)


def lexical_vetoed(
    cosines: np.ndarray, lexical: np.ndarray, cal: SemanticCalibration = CALIBRATION
) -> np.ndarray:
    """Where meaning says the shared words are not the evidence: a fact far from the query
    in meaning, or not close and matched by few of its words (docs/RECALL.md, "The hybrid
    score"). Its lexical score is then kept under 0.5."""
    return (cosines < cal.lexical_gate) | (
        (cosines < cal.lexical_doubt) & (lexical < cal.lexical_strong)
    )


@dataclass(frozen=True)
class TextRow:
    """What scoring needs of a note, read with `values_list` instead of building a `Note`."""

    id: str
    summary: str
    content: str
    created_at: datetime
    embedding: bytes | None
    embedding_model: str

    FIELDS = ("id", "summary", "content", "created_at", "embedding", "embedding_model")

    @classmethod
    def of(cls, queryset) -> list[TextRow]:
        return [cls(*row) for row in queryset.values_list(*cls.FIELDS)]


def fact_text(fact) -> str:
    return note_text(fact.summary, fact.content)


class Facts(tuple):
    """Facts as scoring reads them (`TextRow`s, or any objects with `summary`, `content` and
    optionally `embedding` and `embedding_model`), keeping what scoring derives from them and
    not from the query: the lexical scorer over their terms, and their stored vectors decoded.
    The recall cache (facts.py) keeps one per agent and revision, so an unchanged memory is
    scored without analysing or decoding it again. Immutable, as what it keeps relies on."""

    def __init__(self, rows=()) -> None:
        self._scorer: Scorer | None = None
        self._vectors: dict[str, tuple[np.ndarray, list[int], np.ndarray]] = {}
        self._joined: str | None = None
        self._written_lower: dict[str, bool] = {}

    @classmethod
    def of(cls, facts) -> Facts:
        return facts if isinstance(facts, Facts) else cls(facts)

    def scorer(self) -> Scorer:
        if self._scorer is None:
            self._scorer = fact_scorer(self)
        return self._scorer

    def write_lower(self, word: str) -> bool:
        """Whether any of these facts writes `word` (lower-case) in lower case: a common noun,
        however a sentence's first word capitalises it. Searched once a word, in their texts
        joined once."""
        found = self._written_lower.get(word)
        if found is None:
            if self._joined is None:
                self._joined = "\n".join(fact_text(f) for f in self)
            found = self._written_lower[word] = writes_lower(self._joined, word)
        return found

    def vectors(self, provider: str) -> tuple[np.ndarray, list[int], np.ndarray]:
        """(positions of the facts with a vector stored by `provider`, positions of the
        others, the stored vectors decoded as one float32 matrix)."""
        kept = self._vectors.get(provider)
        if kept is None:
            stored: list[int] = []
            blobs: list = []
            missing: list[int] = []
            for i, f in enumerate(self):
                blob = getattr(f, "embedding", None)
                if blob is not None and getattr(f, "embedding_model", "") == provider:
                    stored.append(i)
                    blobs.append(blob)
                else:
                    missing.append(i)
            kept = self._vectors[provider] = (
                np.array(stored, dtype=np.intp),
                missing,
                decode_many(blobs),
            )
        return kept


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise RecallTimeout


def cosines(
    embedder, query: str, facts: list, *, deadline: float | None = None, stored_only: bool = False
) -> np.ndarray:
    """Cosine of the query to each fact. A fact's vector is the one stored with it when the
    same provider made it (docs/RECALL.md, "Stored vectors"); a fact without one (written
    before vectors were stored, or while the model could not run; `memory_embed` fills them)
    is embedded here, 32 at a time, checking the deadline between batches, and kept in the
    process cache so the next recall does not embed it again. With `stored_only`, such a fact's
    cosine is NaN instead (search: words alone rank it)."""
    if not facts:
        return np.zeros(0, dtype=np.float32)
    facts = Facts.of(facts)
    stored_idx, missing_idx, stored = facts.vectors(embedder.name)
    if stored_only:
        missing_idx = []
    fresh = _embedded(embedder, [fact_text(facts[i]) for i in missing_idx], deadline)
    _check(deadline)
    q = query_cache.embed(embedder, [query])[0]
    out = np.full(len(facts), np.nan, dtype=np.float32)
    if stored_idx.size:
        out[stored_idx] = stored @ q
    if missing_idx:
        out[missing_idx] = fresh @ q
    return out


def _embedded(embedder, texts: list[str], deadline: float | None):
    """The vectors of fact-side texts (a fact without a vector stored by this provider, a fact
    without its names), embedded 32 at a time, checking the deadline between batches, unless
    the process cache holds them, and kept there; None for no text."""
    for start in range(0, len(texts), 32):
        _check(deadline)
        vector_cache.embed(embedder, texts[start : start + 32])
    return vector_cache.embed(embedder, texts) if texts else None


def fact_vectors(embedder, facts: list) -> np.ndarray:
    """Each fact's vector as recall scores it, one row per fact in order: the one stored with
    it by this provider, else embedded now and kept in the process cache (the daily review's
    near-duplicates read the very vectors recall does)."""
    facts = Facts.of(facts)
    stored_idx, missing_idx, stored = facts.vectors(embedder.name)
    fresh = _embedded(embedder, [fact_text(facts[i]) for i in missing_idx], None)
    width = (stored if stored_idx.size else fresh).shape[1]
    out = np.empty((len(facts), width), dtype=np.float32)
    if stored_idx.size:
        out[stored_idx] = stored
    if missing_idx:
        out[missing_idx] = fresh
    return out


# The name check's cost bounds (docs/RECALL.md, "Speed"). Its cosine is the question's and the
# fact's, both without the shared names; the fact as stored (names in) gives it without
# embedding anything, but not exactly: on the labelled sets that one was up to 0.146 above
# (ShipFast's cursor fact: 0.571 against 0.425), so it decides alone only NAMED_SURE over
# the doubt. At most NAMED_TEXTS_EMBEDDED facts' texts are embedded without their names in one
# recall (then cached): a memory where many facts above the cut share a name with the
# question checks the best scored of them exactly.
NAMED_SURE = 0.15
NAMED_TEXTS_EMBEDDED = 4


def _named_only(
    embedder, query: str, facts: Facts, scores: np.ndarray, deadline: float | None
) -> np.ndarray:
    """Where a pick rests on a name alone (docs/RECALL.md, "The hybrid score"): a fact
    sharing a name with the query — a person, a vendor, a place — is confident only if, with
    the shared names taken out of both, it still passes the words' veto (`lexical_vetoed`):
    a name is a shared word like any other, and says who or what, not what about. Checked for
    the facts that would otherwise score above 0.49; True where the name carried the pick."""
    out = np.zeros(len(facts), dtype=bool)
    query_names, query_words, query_lower = names(query), written_words(query), lower_words(query)
    pairs = []
    for i in np.flatnonzero(scores > 0.49):
        text = fact_text(facts[i])
        if query_names:
            shared = (query_names | names(text)) & query_words & written_words(text)
            shared -= query_lower | lower_words(text)  # a common noun here
        else:
            # A question capitalising no word inside a sentence (typed in lower case, or only
            # its first letter capitalised, as phones do) tells no name by its case: a word the
            # fact capitalises, a sentence's first too, is one unless the memory writes it in
            # lower case somewhere.
            shared = {w for w in capitalised(text) & query_words if not facts.write_lower(w)}
        if shared:
            pairs.append((int(i), without_words(query, shared), without_words(text, shared)))
    if not pairs:
        return out
    _check(deadline)
    try:
        query_vectors = query_cache.embed(embedder, [q for _, q, _ in pairs])
        # First the question without its names against the fact as stored (names in): where
        # this clears the doubt by NAMED_SURE, the fact's text is not embedded without the
        # names (~15 ms a text with the built-in model).
        cos = (query_vectors * fact_vectors(embedder, [facts[i] for i, _, _ in pairs])).sum(axis=1)
        # The others, best scored first, up to NAMED_TEXTS_EMBEDDED; any beyond keep the first
        # cosine.
        doubtful = np.flatnonzero(cos < CALIBRATION.lexical_doubt + NAMED_SURE)
        doubtful = doubtful[np.argsort(-scores[[pairs[j][0] for j in doubtful]], kind="stable")]
        doubtful = doubtful[:NAMED_TEXTS_EMBEDDED]
        if doubtful.size:
            texts = [pairs[j][2] for j in doubtful]
            cos[doubtful] = (query_vectors[doubtful] * _embedded(embedder, texts, deadline)).sum(
                axis=1
            )
    except EmbeddingError:
        log.warning("names could not be checked; the picks stand", exc_info=True)
        return out
    scorer, by_query = facts.scorer(), {}
    for _, q, _ in pairs:  # usually one question without its names, at most a few
        if q not in by_query:
            by_query[q] = lexical_scores(q, facts, deadline=deadline, scorer=scorer)
    lexical = np.array([by_query[q][i] for i, q, _ in pairs])
    out[[i for i, _, _ in pairs]] = lexical_vetoed(cos, lexical)
    return out


@dataclass
class Scored:
    scores: list[float]
    lexical: list[float]
    semantic: list[float] | None
    fallback: str | None = None
    provider: str | None = None
    # Each fact's cosine to the query (None where it has none): what picks are ordered by.
    cosines: list[float | None] | None = None


def _cosines(
    query: str, facts: list, deadline: float | None, stored_only: bool = False
) -> tuple[np.ndarray | None, str | None, MiniLMEmbedder | OpenAIEmbedder | None]:
    """(cosines, fallback, the embedder that scored)."""
    fallback = None
    try:
        embedder = get_embedder()
    except EmbeddingError:
        log.exception("the built-in embedding model cannot be loaded; scoring words alone")
        return None, FALLBACK_LEXICAL, None
    if embedder is None:  # switched off on purpose: not a fallback
        return None, None, None
    try:
        cos = cosines(embedder, query, facts, deadline=deadline, stored_only=stored_only)
    except EmbeddingError:
        if isinstance(embedder, MiniLMEmbedder):
            log.exception("the built-in embedding model failed; scoring words alone")
            return None, FALLBACK_LEXICAL, None
        log.warning("the embeddings endpoint failed; the built-in model scores", exc_info=True)
        fallback = FALLBACK_ENDPOINT
        try:
            embedder = builtin_model()
            cos = cosines(embedder, query, facts, deadline=deadline, stored_only=stored_only)
        except EmbeddingError:
            log.exception("the built-in embedding model cannot be loaded; scoring words alone")
            return None, FALLBACK_LEXICAL, None
    return cos, fallback, embedder


def hybrid_scores(
    query: str, facts: list, *, deadline: float | None = None, stored_only: bool = False
) -> Scored:
    """Each fact's hybrid score against the query, in the facts' order, and whether (and why)
    a weaker scorer stood in for the configured one. Raises RecallTimeout when the deadline
    passes before the lexical scores are in. With `stored_only` (search), a note without a
    stored vector is scored by its words alone instead of being embedded now, and a shared
    name is not checked (`_named_only`)."""
    facts = Facts.of(facts)
    lexical = lexical_scores(query, facts, deadline=deadline, scorer=facts.scorer())
    try:
        cos, fallback, embedder = _cosines(query, facts, deadline, stored_only)
    except RecallTimeout:
        cos, fallback, embedder = None, FALLBACK_WARMING, None
    semantic = cosine_list = None
    if cos is None:
        scores = lexical
    else:
        # NaN (no vector) as None; Python floats compared, not numpy scalars (20× faster).
        cosine_list = [None if c != c else c for c in cos.tolist()]
        known = ~np.isnan(cos)
        meaning = np.zeros(len(cos), dtype=np.float64)
        meaning[known] = semantic_from_cosines(cos[known])
        vetoed = known & lexical_vetoed(np.nan_to_num(cos, nan=1.0), np.asarray(lexical))
        gated = np.where(vetoed, np.minimum(lexical, 0.49), lexical)
        semantic = meaning.tolist()
        hybrid = np.maximum(gated, meaning)
        if not stored_only:  # search embeds no note's text, and lists what mentions a name
            named = _named_only(embedder, query, facts, hybrid, deadline)
            hybrid = np.where(named, np.minimum(hybrid, 0.49), hybrid)
        scores = hybrid.tolist()
    return Scored(
        scores=scores,
        lexical=lexical,
        semantic=semantic,
        fallback=fallback,
        provider=embedder.name if embedder is not None else None,
        cosines=cosine_list,
    )
