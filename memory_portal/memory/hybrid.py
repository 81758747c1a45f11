"""Hybrid recall scoring (docs/RECALL.md, "Hybrid"): the lexical score and a calibrated
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
under 0.5 (a shared word, different subject).

The constants were chosen on the main labelled set and the even-numbered half of the paraphrase
set, for the built-in model (docs/RECALL.md, "Hybrid"); an endpoint's model has its own cosine
scale and would need its own calibration.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from .embeddings import EmbeddingError, MiniLMEmbedder, _builtin, get_embedder, vector_cache
from .lexical import RecallTimeout, lexical_scores

log = logging.getLogger(__name__)

FALLBACK_ENDPOINT = "embeddings_endpoint"  # the endpoint failed; the built-in model scored
FALLBACK_LEXICAL = "lexical_only"  # no embedding provider could run; words alone scored
# The facts' vectors were not all computed within the recall's time budget (a cold process, a
# large memory): words alone scored this time; what was computed stays cached for the next.
FALLBACK_WARMING = "embeddings_warming"


@dataclass(frozen=True)
class SemanticCalibration:
    cosine_cut: float = 0.36
    cosine_full: float = 0.6
    z_cut: float = 1.75
    margin: float = 0.02
    prior_mean: float = 0.12  # the cosine of a query to an unrelated fact, on the labelled set
    prior_std: float = 0.1
    prior_weight: int = 5
    lexical_gate: float = 0.25


CALIBRATION = SemanticCalibration()


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


def fact_text(fact) -> str:
    return f"{fact.summary} {fact.content}".strip()


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise RecallTimeout


def cosines(embedder, query: str, facts: list, *, deadline: float | None = None) -> np.ndarray:
    """Cosine of the query to each fact. Fact vectors come from the process cache, or are
    computed 32 at a time, checking the deadline between batches (what was computed stays
    cached, so a recall cut short leaves the next one less to do)."""
    if not facts:
        return np.zeros(0, dtype=np.float32)
    texts = [fact_text(f) for f in facts]
    for start in range(0, len(texts), 32):
        _check(deadline)
        vector_cache.embed(embedder, texts[start : start + 32])
    _check(deadline)
    q = embedder.embed([query])[0]  # not cached: a query rarely comes twice, facts do
    return vector_cache.embed(embedder, texts) @ q


@dataclass
class Scored:
    scores: list[float]
    lexical: list[float]
    semantic: list[float] | None
    fallback: str | None = None
    provider: str | None = None


def _cosines(
    query: str, facts: list, deadline: float | None
) -> tuple[np.ndarray | None, str | None, str | None]:
    """(cosines, fallback, provider name)."""
    fallback = None
    try:
        embedder = get_embedder()
    except EmbeddingError:
        log.exception("the built-in embedding model cannot be loaded; scoring words alone")
        return None, FALLBACK_LEXICAL, None
    if embedder is None:  # switched off on purpose: not a fallback
        return None, None, None
    try:
        cos = cosines(embedder, query, facts, deadline=deadline)
    except EmbeddingError:
        if isinstance(embedder, MiniLMEmbedder):
            log.exception("the built-in embedding model failed; scoring words alone")
            return None, FALLBACK_LEXICAL, None
        log.warning("the embeddings endpoint failed; the built-in model scores", exc_info=True)
        fallback = FALLBACK_ENDPOINT
        try:
            embedder = _builtin()
            cos = cosines(embedder, query, facts, deadline=deadline)
        except EmbeddingError:
            log.exception("the built-in embedding model cannot be loaded; scoring words alone")
            return None, FALLBACK_LEXICAL, None
    return cos, fallback, embedder.name


def hybrid_scores(query: str, facts: list, *, deadline: float | None = None) -> Scored:
    """Each fact's hybrid score against the query, in the facts' order, and whether (and why)
    a weaker scorer stood in for the configured one. Raises RecallTimeout when the deadline
    passes before the lexical scores are in."""
    lexical = lexical_scores(query, facts, deadline=deadline)
    try:
        cos, fallback, provider = _cosines(query, facts, deadline)
    except RecallTimeout:
        cos, fallback, provider = None, FALLBACK_WARMING, None
    semantic = None
    if cos is None:
        scores = lexical
    else:
        semantic = semantic_from_cosines(cos).tolist()
        gated = np.where(cos >= CALIBRATION.lexical_gate, lexical, np.minimum(lexical, 0.49))
        scores = np.maximum(gated, semantic).tolist()
    return Scored(
        scores=scores, lexical=lexical, semantic=semantic, fallback=fallback, provider=provider
    )
