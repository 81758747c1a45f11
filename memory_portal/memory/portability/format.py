"""The export format (SPEC §3.5): the line models, which validate an import and generate the
JSON Schema (docs/export-format-v1.schema.json), and how a line's fields map to a model's."""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from ..models import Kind, Role, Scope, Stage, Status, Target, Trust
from ..validation import (
    ARCHIVE_REASON_MAX,
    DAY_ROW_MAX,
    REVIEW_REASON_MAX,
    SLUG_MAX,
    SLUG_PATTERN,
    SUMMARY_MAX,
)

FORMAT = "memory-portal/export"
EVENT_DETAILS_MAX = 4096
VERSION = 1
ID = Annotated[str, Field(min_length=5, max_length=40, pattern=r"^[a-z]{3}_[0-9a-z]{1,36}$")]
# An id or nothing (an event without a recovery record): remapped like an id when present.
ID_OR_EMPTY = Annotated[str, Field(max_length=40, pattern=r"^([a-z]{3}_[0-9a-z]{1,36})?$")]
SLUG = Annotated[str, Field(min_length=1, max_length=SLUG_MAX, pattern=SLUG_PATTERN)]


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HeaderLine(Line):
    type: Literal["header"]
    format: Literal["memory-portal/export"]
    version: Literal[1]
    project: SLUG
    exportedAt: datetime


class ProjectLine(Line):
    type: Literal["project"]
    slug: SLUG
    name: str = Field(min_length=1, max_length=200)
    createdAt: datetime


class SettingLine(Line):
    """The switch; revision and epoch are the exporting instance's counters (informative)."""

    type: Literal["setting"]
    enabled: bool
    revision: int = Field(ge=0)
    revocationEpoch: int = Field(ge=0)


class ApplicationLine(Line):
    type: Literal["application"]
    slug: SLUG
    name: str = Field(min_length=1, max_length=200)
    createdAt: datetime


class AgentLine(Line):
    type: Literal["agent"]
    id: ID
    name: str = Field(min_length=1, max_length=200)
    stage: Literal[tuple(Stage.values)]  # type: ignore[valid-type]
    application: SLUG | None
    createdAt: datetime


class MemberLine(Line):
    """A person's role in the project, by username: an import gives the role to that user when
    they exist here, so the people credited with vetoes, edits and forgets stay members."""

    type: Literal["member"]
    username: str = Field(min_length=1, max_length=150)
    role: Literal[tuple(Role.values)]  # type: ignore[valid-type]


class Evidence(Line):
    repository: SLUG | None
    path: str = Field(max_length=1000)
    commit: str = Field(max_length=64)
    quote: str = Field(max_length=400)


class Provenance(Line):
    createdByAgentId: str = Field(max_length=40)
    createdByStage: str = Field(max_length=20)
    createdByUser: str | None = Field(max_length=150)
    originRunId: str = Field(max_length=40)
    topLevelRunId: str = Field(max_length=40)
    step: str = Field(max_length=100)
    taskKey: str = Field(max_length=64)


class NoteLine(Line):
    """One note of any status; `kind: day` lines are the agents' day logs."""

    type: Literal["note"]
    id: ID
    scope: Literal[tuple(Scope.values)]  # type: ignore[valid-type]
    application: SLUG | None
    ownerAgentId: ID | None
    kind: Literal[tuple(Kind.values)]  # type: ignore[valid-type]
    target: Literal[tuple(Target.values)]  # type: ignore[valid-type]
    day: date | None
    content: str = Field(min_length=1, max_length=DAY_ROW_MAX)
    summary: str = Field(max_length=SUMMARY_MAX)
    tags: list[str] = Field(max_length=8)
    trust: Literal[tuple(Trust.values)]  # type: ignore[valid-type]
    status: Literal[tuple(Status.values)]  # type: ignore[valid-type]
    archiveReason: str = Field(max_length=ARCHIVE_REASON_MAX)
    # Why a person rejected or vetoed it; absent from exports made before it existed.
    reviewReason: str = Field("", max_length=REVIEW_REASON_MAX)
    archivedAt: datetime | None
    vetoedBy: str | None = Field(max_length=150)
    supersedesId: ID | None
    supersededById: ID | None
    expiresAt: datetime | None
    provenance: Provenance
    evidence: Evidence | None
    recallCount: int = Field(ge=0)
    lastRecalledAt: datetime | None
    createdAt: datetime
    updatedAt: datetime


class RecoveryLine(Line):
    type: Literal["recovery"]
    id: ID
    noteId: ID
    previousStatus: Literal["active", "archived"]
    forgottenByUser: str | None = Field(max_length=150)
    forgottenByAgentId: str = Field(max_length=40)
    forgottenByRunId: str = Field(max_length=40)
    forgottenByTopLevelRunId: str = Field(max_length=40)
    createdAt: datetime


class EventLine(Line):
    """A note's history: its audit events (never content). Ids are the exporter's."""

    type: Literal["event"]
    id: int
    noteId: ID
    action: str = Field(max_length=64)
    actor: str = Field(max_length=200)
    actorAgentId: str = Field(max_length=40)
    actorRunId: str = Field(max_length=40)
    recoveryId: ID_OR_EMPTY
    details: dict
    at: datetime

    @field_validator("details")
    @classmethod
    def _small(cls, details: dict) -> dict:
        # An audit row's details are a few ids and counts: a large one is no export's.
        if len(json.dumps(details, separators=(",", ":"))) > EVENT_DETAILS_MAX:
            raise ValueError(f"longer than {EVENT_DETAILS_MAX:,} characters as JSON")
        return details


class EndLine(Line):
    """The last line: the counts, so a cut-off file is caught."""

    type: Literal["end"]
    counts: dict[str, int]


AnyLine = Annotated[
    HeaderLine
    | ProjectLine
    | SettingLine
    | ApplicationLine
    | AgentLine
    | MemberLine
    | NoteLine
    | RecoveryLine
    | EventLine
    | EndLine,
    Field(discriminator="type"),
]
LINE = TypeAdapter(AnyLine)


def json_schema() -> dict:
    """The JSON Schema of one line of the format (docs/export-format-v1.schema.json)."""
    schema = LINE.json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://memory-portal.invalid/export-format-v1.schema.json",
        "title": f"Memory Portal export, format {FORMAT} version {VERSION} (one NDJSON line)",
        **schema,
    }


def line_type(line: type[Line]) -> str:
    """The `type` a line model stands for ("note" for NoteLine)."""
    return line.model_fields["type"].annotation.__args__[0]


def copied(names: str, **renamed: str) -> dict[str, str]:
    """Line field -> model field for the fields a line carries as they are: each of `names`
    is the model field's camelCase spelling (`archivedAt`: `archived_at`), `renamed` the others."""
    fields = {name: re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower() for name in names.split()}
    return {**fields, **renamed}


# What export writes as it is (dates and times in ISO 8601) and import reads back. The other
# fields are mapped where they are used: ids (remapped on import), users (by username),
# applications and repositories (by slug), tags, details.
AGENT_FIELDS = copied("name stage createdAt")
NOTE_FIELDS = copied(
    "scope kind target day content summary trust status archiveReason reviewReason archivedAt"
    " expiresAt"
    " recallCount lastRecalledAt createdAt updatedAt"
)
PROVENANCE_FIELDS = copied(
    "createdByAgentId createdByStage topLevelRunId step taskKey", originRunId="origin_run_ref"
)
EVIDENCE_FIELDS = copied("", path="evidence_path", commit="evidence_commit", quote="evidence_quote")
RECOVERY_FIELDS = copied(
    "previousStatus forgottenByAgentId forgottenByRunId forgottenByTopLevelRunId createdAt"
)
EVENT_FIELDS = copied("action actorAgentId actorRunId", actor="actor_label", at="created_at")


def line_values(row, fields: dict[str, str]) -> dict:
    """Export: a row's values under the line's names, dates and times in ISO 8601."""
    values = {}
    for name, attribute in fields.items():
        value = getattr(row, attribute)
        values[name] = value.isoformat() if isinstance(value, date) else value
    return values


def model_values(line: BaseModel, fields: dict[str, str]) -> dict:
    """Import: a line's values under the model's field names."""
    return {attribute: getattr(line, name) for name, attribute in fields.items()}
