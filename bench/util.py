"""What the benchmark commands share: an agent's fact built for a bulk fill (a bench fills a
project straight through bulk_create, the write service's protocol left aside), a fill of one
agent's facts with their stored vectors, and the project's counters counted afresh after it."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.utils import timezone

from memory_portal.memory import counters
from memory_portal.memory.models import Agent, MemorySetting, Note
from memory_portal.memory.services.notes import agent_fact
from memory_portal.memory.services.vectors import stamp_vectors


def unsaved_fact(agent: Agent, content: str, *, at: datetime, expires_at=None) -> Note:
    """An agent's own long-term fact as the save service builds it (both identity keys set),
    not saved yet: created and updated `at`, its provenance the agent."""
    note = agent_fact(agent, content, expires_at)
    note.created_at = note.updated_at = at
    note.created_by_agent_id = agent.pk
    note.created_by_stage = agent.stage
    return note


def refresh_counters(project_id: int) -> None:
    """Store a fresh count of the project's notes on its setting row, after a bulk fill."""
    MemorySetting.objects.filter(project_id=project_id).update(**counters.recounted(project_id))


def fill_facts(project, agent: Agent, texts: list[str], n: int) -> float:
    """N live facts of `agent`: `texts` in turn, repeated with a ticket key past the first
    round, a minute apart, newest first, with the vectors every write stores (docs/RECALL.md,
    "Stored vectors") computed for the distinct texts — a repeat shares its original's, which
    costs a reader exactly the same. Returns the ms spent embedding (the writes' cost)."""
    now = timezone.now()
    notes = []
    for i in range(n):
        base = texts[i % len(texts)]
        content = (base if i < len(texts) else f"{base} (again in PIN-{1000 + i})")[:500]
        at = now - timedelta(minutes=i)
        notes.append(unsaved_fact(agent, content, at=at, expires_at=now + timedelta(days=90)))
    started = time.perf_counter()
    originals = notes[: len(texts)]
    stamp_vectors(originals)
    for i, note in enumerate(notes[len(texts) :], start=len(texts)):
        note.embedding = originals[i % len(texts)].embedding
        note.embedding_model = originals[i % len(texts)].embedding_model
    embed_ms = (time.perf_counter() - started) * 1000
    Note.objects.bulk_create(notes, batch_size=500)
    refresh_counters(project.pk)
    return embed_ms
