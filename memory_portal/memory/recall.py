"""Recall: score an agent's live facts against a query, pick the best within the token budget,
add the recent day log, and render the `--- MEMORY ---` block (SPEC §3.2; docs/RECALL.md)."""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .access import check_agent_gate
from .actors import Actor
from .errors import invalid
from .models import Agent, Kind, Note, Scope, StartRecall, Status
from .selectors import agent_for_memories, setting_get
from .services import notes_mark_recalled
from .validation import RECALL_QUERY_MAX

MAX_MEMORIES = 300
MAX_MEMORY_TOKENS = 12_000
MAX_DAY_TOKENS = 2_000
START_WINDOW = timedelta(hours=24)


def recall_settings() -> dict:
    conf = settings.MEMORY_PORTAL
    return {
        "threshold": conf.get("RECALL_THRESHOLD", 0.5),
        "time_budget": conf.get("RECALL_TIME_BUDGET_SECONDS", 2.0),
    }


def estimate_tokens(text: str) -> int:
    """Tokens estimated as one per four characters, rounded up (the usual rule of thumb for
    English with BPE tokenizers; no tokenizer model is downloaded)."""
    return max(1, math.ceil(len(text) / 4))


# --- Text analysis --------------------------------------------------------------------------

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "also",
        "get",
        "gets",
        "got",
        "use",
        "uses",
        "used",
        "using",
        "need",
        "needs",
        "needed",
        "make",
        "makes",
        "via",
        "per",
    ]
)
WORD_RE = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    """A small suffix stripper (Porter-like, step 1 and common endings): enough to join
    deploy / deploys / deploying / deployed without a language model."""
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, keep in (
        ("ational", "ate"),
        ("ization", "ize"),
        ("fulness", "ful"),
        ("ousness", "ous"),
        ("iveness", "ive"),
        ("ments", ""),
        ("ment", ""),
        ("ings", ""),
        ("ing", ""),
        ("edly", ""),
        ("ies", "y"),
        ("ied", "y"),
        ("ers", ""),
        ("er", ""),
        ("ed", ""),
        ("ly", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: len(word) - len(suffix)] + keep
            if (
                suffix in {"ing", "ed", "er", "ers", "ings"}
                and len(base) > 3
                and (base[-1] == base[-2] and base[-1] not in "lsz")
            ):
                base = base[:-1]  # running -> run, mapped -> map
            if suffix == "es" and not word.endswith(("ses", "xes", "zes", "ches", "shes")):
                base = word[:-1]  # releases -> release, not releas
            return base
    return word


def terms(text: str) -> list[str]:
    return [stem(w) for w in WORD_RE.findall(text.lower()) if w not in STOPWORDS]


# --- Scoring ----------------------------------------------------------------------------------


@dataclass
class Scorer:
    """IDF-weighted overlap between a query and each fact, in [0, 1].

    score = (1 - w) * cosine + w * coverage, where cosine is the cosine of the IDF-weighted
    binary term vectors and coverage is the share of the query's IDF mass (or of the fact's,
    whichever side is shorter) that the other side contains; plus a small bonus for query
    bigrams found in order. docs/RECALL.md has the measurements behind the weights."""

    documents: list[list[str]]
    coverage_weight: float = 0.5
    phrase_bonus: float = 0.1
    idf: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.documents)
        df: Counter[str] = Counter()
        for doc in self.documents:
            df.update(set(doc))
        self.idf = {t: math.log(1 + (n + 1) / (c + 0.5)) for t, c in df.items()}
        self._unseen = math.log(1 + (n + 1) / 0.5)

    def weight(self, term: str) -> float:
        return self.idf.get(term, self._unseen)

    def score(self, query: list[str], doc: list[str]) -> float:
        q, d = set(query), set(doc)
        if not q or not d:
            return 0.0
        shared = q & d
        if not shared:
            return 0.0
        wq = {t: self.weight(t) for t in q}
        wd = {t: self.weight(t) for t in d}
        dot = sum(wq[t] * wd[t] for t in shared)
        cosine = dot / (
            math.sqrt(sum(v * v for v in wq.values())) * math.sqrt(sum(v * v for v in wd.values()))
        )
        shorter = wq if sum(wq.values()) <= sum(wd.values()) else wd
        coverage = sum(shorter[t] for t in shared) / sum(shorter.values())
        score = (1 - self.coverage_weight) * cosine + self.coverage_weight * coverage
        bigrams = list(zip(query, query[1:], strict=False))
        if bigrams:
            doc_bigrams = set(zip(doc, doc[1:], strict=False))
            found = sum(1 for b in bigrams if b in doc_bigrams)
            score += self.phrase_bonus * found / len(bigrams)
        return min(1.0, score)


class RecallTimeout(Exception):
    pass


def score_facts(query: str, facts: list[Note], *, deadline: float | None = None) -> list[float]:
    docs = [terms(f"{f.summary} {f.content}") for f in facts]
    scorer = Scorer(docs)
    q = terms(query)
    scores = []
    for i, doc in enumerate(docs):
        if deadline is not None and i % 32 == 0 and time.monotonic() > deadline:
            raise RecallTimeout
        scores.append(scorer.score(q, doc))
    return scores


# --- Recall -----------------------------------------------------------------------------------


@dataclass
class Picked:
    note: Note
    score: float | None


@dataclass
class RecallResult:
    agent: Agent
    memories: list[Picked]
    day_lines: list[str]
    block: str
    skipped: bool = False
    fallback: str | None = None
    tokens: int = 0
    considered: int = 0


def live_facts(agent: Agent, now: datetime) -> list[Note]:
    return list(
        Note.objects.live(now)
        .filter(owner_agent=agent, scope=Scope.AGENT, kind=Kind.FACT)
        .order_by("-created_at", "-id")
    )


def recent_day_lines(agent: Agent, now: datetime) -> list[str]:
    """Today's and yesterday's day log, newest line first, within the day-log token budget."""
    today = now.date()
    rows = Note.objects.filter(
        owner_agent=agent,
        kind=Kind.DAY,
        status=Status.ACTIVE,
        day__in=[today, today - timedelta(days=1)],
    ).order_by("-day")
    lines: list[str] = []
    used = 0
    for row in rows:
        for line in reversed(row.lines):
            text = f"{row.day.isoformat()} {line}"
            cost = estimate_tokens(text)
            if used + cost > MAX_DAY_TOKENS:
                return lines
            lines.append(text)
            used += cost
    return lines


def render_block(memories: list[Picked], day_lines: list[str]) -> str:
    out = ["--- MEMORY ---"]
    for picked in memories:
        note = picked.note
        score = f"[{picked.score:.2f}] " if picked.score is not None else ""
        out.append(
            f"- {score}{note.id} (added {note.created_at.date().isoformat()}) {note.content}"
        )
    if day_lines:
        out.append("Day log (newest first):")
        out.extend(f"- {line}" for line in day_lines)
    if len(out) == 1:
        out.append("(nothing recalled)")
    out.append("--- END MEMORY ---")
    return "\n".join(out)


def _pick(facts: list[Note], scores: list[float] | None, threshold: float) -> list[Picked]:
    if scores is None:
        ranked = [Picked(f, None) for f in facts]  # newest first
    else:
        ranked = sorted(
            (Picked(f, round(s, 4)) for f, s in zip(facts, scores, strict=True) if s >= threshold),
            key=lambda p: (-p.score, -p.note.created_at.timestamp(), p.note.id),
        )
    picked: list[Picked] = []
    used = 0
    for item in ranked:
        cost = estimate_tokens(item.note.content) + 12  # the id, date and score around it
        if len(picked) >= MAX_MEMORIES or used + cost > MAX_MEMORY_TOKENS:
            break
        picked.append(item)
        used += cost
    return picked


def recall(
    *,
    actor: Actor,
    query: str | None = None,
    agent_id: str | None = None,
    start: bool = False,
    mark: bool = True,
    now: datetime | None = None,
) -> RecallResult:
    """Recall for an agent (its own run) or, for a person, for the agent they name. A start
    recall is skipped when the same top-level run had one in the last 24 hours; an on-demand
    recall counts the picks but leaves that window alone. `mark=False` is the dashboard's
    preview: nothing is counted or remembered."""
    now = now or timezone.now()
    agent = agent_for_memories(actor=actor, agent_id=agent_id)
    if actor.is_agent:
        check_agent_gate(actor, setting_get(project=agent.project), write=False)
    if query is not None:
        if not isinstance(query, str):
            raise invalid("query", "query must be a string.")
        if len(query) > RECALL_QUERY_MAX:
            raise invalid("query", f"query holds at most {RECALL_QUERY_MAX} characters.")
    if start and actor.is_agent and mark and not _claim_start(actor, now):
        return RecallResult(agent=agent, memories=[], day_lines=[], block="", skipped=True)
    conf = recall_settings()
    facts = live_facts(agent, now)
    fallback: str | None = None
    scores: list[float] | None = None
    if not query or not query.strip():
        fallback = "no_query"
    else:
        try:
            scores = score_facts(query, facts, deadline=time.monotonic() + conf["time_budget"])
        except RecallTimeout:
            fallback = "timeout"
        except Exception:  # noqa: BLE001 - any scoring failure falls back, and says so
            import logging

            logging.getLogger(__name__).exception("recall scoring failed; listing newest")
            fallback = "error"
    picked = _pick(facts, scores if fallback is None else None, conf["threshold"])
    day_lines = recent_day_lines(agent, now)
    block = render_block(picked, day_lines)
    if mark and picked:
        notes_mark_recalled(project=agent.project, note_ids=[p.note.id for p in picked])
    return RecallResult(
        agent=agent,
        memories=picked,
        day_lines=day_lines,
        block=block,
        fallback=fallback,
        tokens=estimate_tokens(block),
        considered=len(facts),
    )


def _claim_start(actor: Actor, now: datetime) -> bool:
    """Record this top-level run's start recall; False when it already had one in 24 h."""
    top = actor.run.top_level_run_id
    with transaction.atomic():
        marker = StartRecall.objects.select_for_update().filter(top_level_run_id=top).first()
        if marker is not None and now - marker.recalled_at < START_WINDOW:
            return False
        if marker is None:
            StartRecall.objects.create(
                top_level_run_id=top, agent_id=actor.run.agent_id, recalled_at=now
            )
        else:
            marker.recalled_at = now
            marker.save(update_fields=["recalled_at"])
    return True
