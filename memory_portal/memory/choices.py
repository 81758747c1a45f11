"""The memory domain's fixed vocabularies: the choices of the models' fields and the archive
reasons the product itself sets (SPEC §2). Re-exported by models.py."""

from __future__ import annotations

from django.db import models


class Stage(models.TextChoices):
    ASSESS = "assess"
    UNDERSTAND = "understand"
    DESIGN = "design"
    IMPLEMENT = "implement"
    REVIEW = "review"
    RUNTIME = "runtime"


class Scope(models.TextChoices):
    PROJECT = "project"
    APPLICATION = "application"
    AGENT = "agent"


class Kind(models.TextChoices):
    FACT = "fact"
    LESSON = "lesson"
    DECISION = "decision"
    NAVIGATION = "navigation"
    DAY = "day"


class Target(models.TextChoices):
    LONG_TERM = "long_term"
    DAILY = "daily"


class Trust(models.TextChoices):
    LEARNED = "learned"
    REVIEWED = "reviewed"
    REJECTED = "rejected"


class ReviewPolicy(models.TextChoices):
    """When other runs see an agent's learned note (SPEC §2.2): at once (`open`, the seed's
    rule), or once a person has reviewed it (`hold`)."""

    OPEN = "open"
    HOLD = "hold"


class Status(models.TextChoices):
    ACTIVE = "active"
    ARCHIVED = "archived"
    FORGOTTEN = "forgotten"


class RunStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Role(models.TextChoices):
    MEMBER = "member"
    MANAGER = "manager"


# Archive reasons the product itself sets; any other reason is free text from a person or agent.
REASON_VETOED = "vetoed"
REASON_SUPERSEDED = "superseded"
REASON_EXPIRED = "expired"
