"""The facts a recall scores: an agent's live facts, newest first, as plain rows, through the
process cache keyed on the project's memory revision (recall/cache.py). A recall reads the
revision (with the setting row it reads anyway), then only the ids of the live facts: the
visibility rule and expiry are evaluated by the database on every recall, so a fact that
expires or is archived is left out at once.
"""

from __future__ import annotations

from datetime import datetime

from ..models import Kind, Note, Project, Scope
from ..selectors import AgentView, agent_visible_q
from .cache import fact_cache
from .hybrid import Facts, TextRow


def own_notes(view: AgentView, kind: str, now: datetime):
    """The agent's own notes of one kind that the visibility rule serves it."""
    return Note.objects.filter(
        agent_visible_q(view, now=now), scope=Scope.AGENT, owner_agent_id=view.agent_id, kind=kind
    )


def live_fact_rows(
    view: AgentView, now: datetime, *, project: Project | None = None, revision: int = 0
) -> Facts:
    """The agent's live facts, newest first, as plain rows (over 2,000 facts the ORM's model
    instances cost more than scoring them). With the `project` and its memory `revision` read
    before this call, through the cache."""
    live = own_notes(view, Kind.FACT, now).order_by("-created_at", "-id")
    if project is None:
        return Facts(TextRow.of(live))
    return fact_cache.facts(project, revision, live)
