"""What the benchmark commands share: an agent's fact built for a bulk fill (a bench fills a
project straight through bulk_create, the write service's protocol left aside), and the
project's counters counted afresh after it."""

from __future__ import annotations

from datetime import datetime

from memory_portal.memory import counters
from memory_portal.memory.models import Agent, MemorySetting, Note
from memory_portal.memory.services.notes import agent_fact


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
