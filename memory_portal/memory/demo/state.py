"""What the demo loader remembers while it plays a project: the notes it wrote and the
project's applications, agents and runs (shared by the loader and its curation steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from memory_portal.memory.demo.scenario import ProjectSpec
from memory_portal.memory.models import Agent, Application, Project, Run


@dataclass
class NoteMeta:
    """What the loader remembers of a note it wrote: when, by which run, and what it is."""

    pk: str
    when: datetime
    run: Run
    kind: str
    evidence: bool = False
    v1: bool = False  # a private agent fact saved through /api/v1
    expiring: bool = False  # saved with an explicit expiry date


@dataclass
class ProjectState:
    spec: ProjectSpec
    project: Project
    apps: dict[str, Application] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    pool_notes: list[NoteMeta] = field(default_factory=list)
    facts: list[NoteMeta] = field(default_factory=list)
    evidence_notes: list[NoteMeta] = field(default_factory=list)
