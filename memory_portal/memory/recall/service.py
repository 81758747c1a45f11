"""Recall: score an agent's live facts against a query, pick the best within the token budget,
add the recent day log, and render the `--- MEMORY ---` block (SPEC §3.2; docs/RECALL.md)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory_portal import metrics

from .. import deadline as call_deadline
from ..access import check_agent_gate
from ..actors import Actor
from ..embeddings import configured_name, decode_many, query_cache
from ..errors import invalid
from ..models import Agent, Kind, Note, Run, StartRecall
from ..selectors import AgentView, agent_for_memories, setting_get
from ..services import notes_mark_recalled
from ..validation import RECALL_QUERY_MAX, reject_unstorable
from .facts import live_fact_rows, own_notes
from .hybrid import closeness, hybrid_scores, related_order
from .lexical import RecallTimeout

MAX_MEMORIES = 300
MAX_MEMORY_TOKENS = 12_000
MAX_DAY_TOKENS = 2_000
START_WINDOW = timedelta(hours=24)


def recall_settings() -> dict:
    conf = settings.MEMORY_PORTAL
    return {
        "threshold": conf.get("RECALL_THRESHOLD", 0.5),
        "time_budget": conf.get("RECALL_TIME_BUDGET_SECONDS", 2.0),
        "related": conf.get("RECALL_RELATED", 3),
    }


def estimate_tokens(text: str) -> int:
    """Tokens estimated as one per four characters, rounded up (the usual rule of thumb for
    English with BPE tokenizers; no tokenizer model is downloaded)."""
    return max(1, math.ceil(len(text) / 4))


# --- Scoring ---------------------------------------------------------------------------------


def score_facts(
    query: str, facts: Sequence, *, deadline: float | None = None, detailed: bool = False
):
    """Each fact's hybrid score against the query, in the facts' order (docs/RECALL.md); with
    `detailed`, the `hybrid.Scored` that also says which scorer stood in (`fallback`)."""
    scored = hybrid_scores(query, facts, deadline=deadline)
    return scored if detailed else scored.scores


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
    # The second tier: possibly related facts, lower confidence (docs/RECALL.md, "Two tiers").
    related: list[Picked] = field(default_factory=list)
    day_notes: list[Note] = field(default_factory=list)  # the day logs `day_lines` come from
    skipped: bool = False
    skip_reason: str | None = None  # SKIP_RECENT or SKIP_SLASH_COMMAND when skipped
    fallback: str | None = None
    tokens: int = 0
    considered: int = 0


def recent_day_lines(view: AgentView, now: datetime) -> tuple[list[str], list[Note]]:
    """Today's and yesterday's day log, newest line first, within the day-log token budget;
    and the day-log notes those lines come from (they are served, so they are read)."""
    today = now.date()
    rows = own_notes(view, Kind.DAY, now).filter(day__in=[today, today - timedelta(days=1)])
    rows = rows.order_by("-day")
    lines: list[str] = []
    served: list[Note] = []
    used = 0
    for row in rows:
        for line in reversed(row.lines):
            text = f"{row.day.isoformat()} {line}"
            cost = estimate_tokens(text)
            if used + cost > MAX_DAY_TOKENS:
                return lines, served
            lines.append(text)
            used += cost
            if not served or served[-1] is not row:
                served.append(row)
    return lines, served


RELATED_HEADING = "Possibly related (lower confidence):"


def _memory_line(picked: Picked) -> str:
    note = picked.note
    score = f"[{picked.score:.2f}] " if picked.score is not None else ""
    return f"- {score}{note.id} (added {note.created_at.date().isoformat()}) {note.content}"


def render_block(
    memories: list[Picked], day_lines: list[str], related: Sequence[Picked] = ()
) -> str:
    out = ["--- MEMORY ---"]
    out.extend(_memory_line(p) for p in memories)
    if related:
        out.append(RELATED_HEADING)
        out.extend(_memory_line(p) for p in related)
    if day_lines:
        out.append("Day log (newest first):")
        out.extend(f"- {line}" for line in day_lines)
    if len(out) == 1:
        out.append("(nothing recalled)")
    out.append("--- END MEMORY ---")
    return "\n".join(out)


def _as_notes(*tiers: list[Picked]) -> list[list[Picked]]:
    """Each tier's picked rows as `Note`s, in one query, same order (a fact gone meanwhile is
    left out)."""
    notes = Note.objects.in_bulk([p.note.id for tier in tiers for p in tier])
    return [
        [Picked(notes[p.note.id], p.score) for p in tier if p.note.id in notes] for tier in tiers
    ]


def pick(
    facts: Sequence,
    scores: list[float] | None,
    threshold: float,
    order: list[float | None] | None = None,
) -> list[Picked]:
    """The facts scoring at least `threshold`, within the caps. Ordered by meaning when there
    is one (`order`: each fact's cosine to the query; docs/RECALL.md, "What a recall does"):
    the score decides whether a fact is recalled, its meaning where it stands, so a word the
    question shares with a wrong fact does not lift it above the right one. Without cosines
    (words alone scored), by the score. Ties: newest first."""
    if scores is None:
        ranked = [Picked(f, None) for f in facts]  # newest first
    else:
        meaning = order or [None] * len(facts)
        kept = [
            (Picked(f, round(s, 4)), c)
            for f, s, c in zip(facts, scores, meaning, strict=True)
            if s >= threshold
        ]

        def rank(kept_fact: tuple[Picked, float | None]) -> tuple:
            picked, cosine = kept_fact
            # Without cosines every fact ties on meaning; a fact without one comes last.
            by_meaning = -(cosine if cosine is not None else -1.0) if order else 0.0
            return (by_meaning, -picked.score, -picked.note.created_at.timestamp(), picked.note.id)

        kept.sort(key=rank)
        ranked = [p for p, _ in kept]
    return _within_caps(ranked)


def _cost(picked: Picked) -> int:
    return estimate_tokens(picked.note.content) + 12  # the id, date and score around it


def _within_caps(ranked: list[Picked], before: Sequence[Picked] = ()) -> list[Picked]:
    """The first of `ranked` that fit the caps beside `before` (what is already served),
    stopping at the first that does not: a long fact is not skipped to slip shorter ones in."""
    picked: list[Picked] = []
    used = sum(_cost(p) for p in before)
    for item in ranked:
        cost = _cost(item)
        if len(before) + len(picked) >= MAX_MEMORIES or used + cost > MAX_MEMORY_TOKENS:
            break
        picked.append(item)
        used += cost
    return picked


def pick_related(
    facts: Sequence, order: list[float | None] | None, picked: list[Picked], limit: int
) -> list[Picked]:
    """The second tier (docs/RECALL.md, "Two tiers"): up to `limit` facts beyond `picked`,
    by meaning (`order`: each fact's cosine to the query), each with its closeness score
    under 0.5, when the question is near the agent's memory at all. Only when meaning was
    scored: words alone, or a fallback, serve the first tier only."""
    if limit <= 0 or order is None:
        return []
    position = {id(f): i for i, f in enumerate(facts)} if picked else {}
    taken = {position[id(p.note)] for p in picked}
    ranked = [Picked(facts[i], round(closeness(order[i]), 4)) for i in related_order(order, taken)]
    return _within_caps(ranked[:limit], before=picked)


SKIP_RECENT = "recalled_recently"  # the top-level run had its start recall in the last 24 h
SKIP_SLASH_COMMAND = "slash_command"  # the start message is a slash command


def _skipped(agent: Agent, reason: str) -> RecallResult:
    return RecallResult(
        agent=agent, memories=[], day_lines=[], block="", skipped=True, skip_reason=reason
    )


@metrics.RECALL_SECONDS.time()
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
    recall without a query scores against the run's task (title and description) when the
    run has one, and lists the newest facts when it has none. A start recall is skipped when
    the same top-level run had one in the last 24 hours, or when its query (the conversation's
    message) is a slash command, beginning with `/`; an on-demand recall counts the picks
    but leaves that window alone. `mark=False` is the dashboard's
    preview: nothing is counted or remembered."""
    now = now or timezone.now()
    agent = agent_for_memories(actor=actor, agent_id=agent_id)
    setting = setting_get(project=agent.project)  # its revision keys the facts' cache
    if actor.is_agent:
        check_agent_gate(actor, setting, write=False)
    if query is not None:
        if not isinstance(query, str):
            raise invalid("query", "query must be a string.")
        reject_unstorable("query", query)
        if len(query) > RECALL_QUERY_MAX:
            raise invalid("query", f"query holds at most {RECALL_QUERY_MAX} characters.")
    if start and query and query.lstrip().startswith("/"):
        # A slash command in a conversation (seed 001) is no task to recall for; it leaves the
        # run's start window alone, so the next message still gets its start recall.
        return _skipped(agent, SKIP_SLASH_COMMAND)
    if start and actor.is_agent and mark and not _claim_start(actor, now):
        return _skipped(agent, SKIP_RECENT)
    conf = recall_settings()
    # What the agent itself would be served: its run's view, or (a person's recall for an
    # agent, the dashboard preview) the agent's.
    if actor.is_agent:
        view = AgentView.of_run(actor.run, setting=setting)
    else:
        view = AgentView.of_agent(agent, setting=setting)
    facts = live_fact_rows(view, now, project=agent.project, revision=setting.revision)
    fallback: str | None = None
    scores: list[float] | None = None
    order: list[float | None] | None = None
    if (not query or not query.strip()) and start and actor.is_agent:
        query = actor.run.task_text  # a start recall scores against the run's task, if any
        _task_vector_known(actor.run, query)
    if not query or not query.strip():
        fallback = "no_query"
    else:
        try:
            ends = time.monotonic() + call_deadline.seconds(conf["time_budget"])
            scored = score_facts(query, facts, deadline=ends, detailed=True)
            scores, fallback, order = scored.scores, scored.fallback, scored.cosines
        except RecallTimeout:
            fallback = "timeout"
        except Exception:  # noqa: BLE001 - any scoring failure falls back, and says so
            import logging

            logging.getLogger(__name__).exception("recall scoring failed; listing newest")
            fallback = "error"
    first = pick(facts, scores, conf["threshold"], order)
    second = pick_related(facts, order if scores is not None else None, first, conf["related"])
    picked, related = _as_notes(first, second)
    day_lines, day_notes = recent_day_lines(view, now)
    block = render_block(picked, day_lines, related)
    if mark and picked:
        notes_mark_recalled(project=agent.project, note_ids=[p.note.id for p in picked], now=now)
    tokens = estimate_tokens(block)
    return RecallResult(
        agent,
        picked,
        day_lines,
        block,
        related=related,
        day_notes=day_notes,
        fallback=fallback,
        tokens=tokens,
        considered=len(facts),
    )


def _task_vector_known(run, task: str) -> None:
    """Hand scoring the task's vector stored as the run started, unless this process holds it
    already: the task is then not embedded again (docs/RECALL.md, "Against the task")."""
    provider = configured_name()
    if not task or provider is None or query_cache.holds(provider, task):
        return
    stored = (
        Run.objects.filter(pk=run.pk, task_embedding_model=provider)
        .values_list("task_embedding", flat=True)
        .first()
    )
    if stored is not None:
        query_cache.put(provider, task, decode_many([stored])[0])


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
