"""Request and response schemas of the JSON API. The tool argument schemas are also the JSON
Schemas handed to models by `GET /api/tools`, so what is offered is what is validated."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date as Date
from datetime import datetime
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from ninja import Schema
from pydantic import ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from memory_portal.memory.validation import (
    ARCHIVE_REASON_MAX,
    CONTENT_MAX,
    DAY_LINE_MAX,
    FACT_MAX,
    NAME_MAX,
    PATH_MAX,
    RECALL_QUERY_MAX,
    SCRATCHPAD_TEXT_MAX,
    SLUG_MAX,
    SUMMARY_MAX,
    TAG_MAX,
    TAGS_MAX,
    TASK_TEXT_MAX,
    unstorable,
)

# Offsets past every note a project can hold (2,000) only find empty pages; the bound keeps
# absurd values from overflowing the database's integers.
OFFSET_MAX = 100_000
SCRATCHPAD_PAGE_DEFAULT = 20
SCRATCHPAD_PAGE_MAX = 50  # a page also stops at the 12,000-byte reply ceiling


def _storable(value: Any) -> Any:
    """Strings must be text the database can store (validation.unstorable: no NUL, no lone
    surrogate), in lists too. A nested object is a Strict schema that checks its own fields,
    so the error names the nested field (`evidence.path`)."""
    if isinstance(value, str):
        reason = unstorable(value)
        if reason is not None:
            raise PydanticCustomError("text_invalid", reason)
    elif isinstance(value, list):
        for item in value:
            _storable(item)
    return value


# What a JSON value must be for a field of these types. Pydantic's lax mode would otherwise
# take `false` as the number 0, `0` as false, and `0` or `"1700000000"` as a date.
_ISO_DATE = re.compile(r"\d{4}-\d\d-\d\d")


def _iso(value: Any) -> bool:
    return isinstance(value, str) and _ISO_DATE.match(value) is not None


_JSON_KINDS: dict[Any, tuple[str, Callable[[Any], bool]]] = {
    bool: ("true or false", lambda v: isinstance(v, bool)),
    int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    Date: ("a date (YYYY-MM-DD)", _iso),
    datetime: ("an ISO 8601 date and time", _iso),
}


def _exact_json(value: Any, annotation: Any) -> None:
    if value is None:
        return
    options = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    kinds = {a for a in options or (annotation,) if a is not type(None)}
    if len(kinds) == 1 and (kind := kinds.pop()) in _JSON_KINDS:
        what, accepts = _JSON_KINDS[kind]
        if not accepts(value):
            raise PydanticCustomError("json_type", f"must be {what}")


class Strict(Schema):
    """Unknown fields are refused (400 memory_invalid naming the field): the model never
    supplies project, application, run, author or trust. Every string must be valid Unicode
    text without NUL characters, and every value of the JSON type the schema gives (no number
    taken for a boolean, no boolean for a number, no number for a date): 400 memory_invalid
    naming the field."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _exact_and_storable(cls, value: Any, info: ValidationInfo) -> Any:
        _exact_json(value, cls.model_fields[info.field_name].annotation)
        return _storable(value)


# --- Agent tools ------------------------------------------------------------------------------


class EvidenceIn(Strict):
    repositoryId: str = Field(description="Slug of a repository linked to your application.")
    path: str = Field(description="Path of a regular file in that repository.")
    quote: str | None = Field(
        None, description="Optional exact text from the file, 12–400 characters."
    )


class MemoryWriteArgs(Strict):
    kind: Literal["fact", "lesson", "decision", "navigation"] = Field(
        description="What the note is: a fact, a lesson learned, a decision or navigation help."
    )
    content: str = Field(
        min_length=1, max_length=CONTENT_MAX, description="The note, in Markdown (1–2,000)."
    )
    summary: str | None = Field(
        None, min_length=1, max_length=SUMMARY_MAX, description="A one-line summary."
    )
    tags: list[str] | None = Field(
        None, max_length=TAGS_MAX, description=f"Up to {TAGS_MAX} tags of ≤ {TAG_MAX} chars."
    )
    target: Literal["long_term", "daily"] = Field(
        "long_term", description="long_term knowledge, or the daily log of a UTC date."
    )
    scope: Literal["project", "application"] = Field(
        "project", description="Share with the whole project, or with your application only."
    )
    date: Date | None = Field(None, description="For target daily: the UTC date (default today).")
    evidence: EvidenceIn | None = Field(None, description="Optional source citation.")


class MemoryReadArgs(Strict):
    id: str | None = Field(None, description="A mem_ id to read one note.")
    target: Literal["long_term", "daily", "list", "recoveries"] | None = Field(
        None,
        description="long_term notes, a daily log (see date), list (daily dates) or "
        "recoveries (forgotten learned notes you may restore).",
    )
    date: Date | None = Field(None, description="The UTC date of a daily log (default today).")
    kind: Literal["fact", "lesson", "decision", "navigation", "day"] | None = None
    limit: int = Field(5, ge=1, le=5, description="1–5 entries per page.")
    offset: int = Field(
        0, ge=0, le=OFFSET_MAX, description="Continue at a previous answer's nextOffset."
    )


class MemorySearchArgs(Strict):
    query: str = Field(min_length=1, max_length=RECALL_QUERY_MAX, description="Full-text query.")
    kind: Literal["fact", "lesson", "decision", "navigation", "day"] | None = None
    target: Literal["long_term", "daily"] | None = None
    date: Date | None = None
    limit: int = Field(5, ge=1, le=5)
    offset: int = Field(0, ge=0, le=OFFSET_MAX)


class MemoryStatusArgs(Strict):
    pass


class MemoryForgetArgs(Strict):
    id: str = Field(description="The mem_ id of a learned note to forget.")


class MemoryRestoreArgs(Strict):
    recoveryId: str = Field(description="The rec_ id memory_forget returned.")


class ScratchpadArgs(Strict):
    action: Literal["list", "add", "done", "undo", "clear"] = Field(
        description="list items, add one (text), mark done / undo (itemId), clear completed."
    )
    text: str | None = Field(None, min_length=1, max_length=SCRATCHPAD_TEXT_MAX)
    itemId: str | None = None
    limit: int | None = Field(
        None, ge=1, le=SCRATCHPAD_PAGE_MAX, description="list: items per page (default 20)."
    )
    offset: int | None = Field(
        None, ge=0, le=OFFSET_MAX, description="list: continue at a previous nextOffset."
    )


class EvidenceOut(Schema):
    repositoryId: str | None
    path: str
    commit: str
    quote: str | None


class EntryOut(Schema):
    id: str
    kind: str
    target: str
    scope: str
    day: Date | None
    content: str
    contentTruncated: bool = False
    summary: str | None
    tags: list[str]
    trust: str
    status: str
    createdByStage: str | None
    createdByAgentId: str | None
    originRunId: str | None
    topLevelRunId: str | None
    step: str | None
    taskKey: str | None
    producerStatus: str
    evidence: EvidenceOut | None
    expiresAt: datetime | None
    createdAt: datetime


class RecoveryOut(Schema):
    recoveryId: str
    id: str
    kind: str
    target: str
    scope: str
    content: str
    previousStatus: str
    forgottenAt: datetime


class PageOut(Schema):
    entries: list[dict[str, Any]]
    nextOffset: int | None


class DatesOut(Schema):
    dates: list[dict[str, Any]]
    nextOffset: int | None


class WriteOut(Schema):
    id: str
    trust: str
    status: str
    created: bool


class StatusOut(Schema):
    enabled: bool
    noteCount: int
    accessMode: Literal["learned", "reviewed"]
    revision: int
    fingerprint: str


class ForgetOut(Schema):
    recoveryId: str
    id: str


class RestoreOut(Schema):
    id: str
    status: str


class ScratchpadItemOut(Schema):
    itemId: str
    text: str
    done: bool


class ScratchpadOut(Schema):
    items: list[ScratchpadItemOut] | None = None
    nextOffset: int | None = Field(
        None, description="list: where the next page starts; null on the last page."
    )
    itemId: str | None = None
    done: bool | None = None
    removed: int | None = None


class ToolDefinition(Schema):
    name: str
    description: str
    parameters: dict[str, Any]


class ToolsOut(Schema):
    enabled: bool
    eligible: bool
    accessMode: str
    tools: list[ToolDefinition]


# --- Agent memory v1 --------------------------------------------------------------------------


class MemorySaveIn(Strict):
    text: str = Field(min_length=1, description=f"The fact, at most {FACT_MAX} characters.")
    expiresAt: datetime | None = Field(
        None,
        description="When the fact expires (ISO 8601, in the future). A time without a UTC "
        "offset is taken as UTC. Default: 90 days after the save.",
    )
    supersedes: str | None = None
    agentId: str | None = None


class DayIn(Strict):
    line: str = Field(min_length=1, description=f"One line, at most {DAY_LINE_MAX} characters.")


class RecallIn(Strict):
    query: str | None = Field(None, max_length=RECALL_QUERY_MAX)
    start: bool = False
    agentId: str | None = None


class ArchiveIn(Strict):
    reason: str = Field(min_length=1, max_length=ARCHIVE_REASON_MAX)


class MemoryIdArgs(Strict):
    id: str = Field(description="The mem_ id of one of your memories.")


class MemoryArchiveArgs(MemoryIdArgs):
    reason: str = Field(min_length=1, max_length=ARCHIVE_REASON_MAX)


class MemoryOut(Schema):
    id: str
    object: Literal["memory"] = "memory"
    agentId: str
    kind: str
    day: Date | None
    text: str
    expiresAt: datetime | None
    expired: bool
    status: str
    trust: Literal["learned", "reviewed", "rejected"] = Field(
        description="learned (unverified), reviewed by a manager, or rejected (never served "
        "to agents in lists or recall)"
    )
    archiveReason: str | None
    archivedAt: datetime | None
    supersedesId: str | None
    sourceRunId: str | None
    sourceTaskKey: str | None
    createdByAgentId: str | None
    createdByUserId: str | None
    recallCount: int
    lastRecalledAt: datetime | None
    createdAt: datetime
    updatedAt: datetime


class MemoryListOut(Schema):
    object: Literal["list"] = "list"
    data: list[MemoryOut]


class RecalledMemoryOut(MemoryOut):
    score: float | None


class RecallOut(Schema):
    object: Literal["recall"] = "recall"
    agentId: str
    skipped: bool
    fallback: str | None
    memories: list[RecalledMemoryOut]
    dayLog: list[str]
    block: str
    tokens: int


# --- Admin ------------------------------------------------------------------------------------


class EnabledIn(Strict):
    enabled: bool


class StateIn(Strict):
    state: Literal["approved", "rejected"]


class ProjectIn(Strict):
    id: str = Field(max_length=SLUG_MAX, description="A slug: letters, digits, - and _.")
    name: str = Field("", max_length=NAME_MAX, description="Display name (default: the id).")


class MemberIn(Strict):
    username: str
    role: Literal["member", "manager"] = "member"


class ApplicationIn(Strict):
    id: str = Field(max_length=SLUG_MAX, description="A slug: letters, digits, - and _.")
    name: str = Field("", max_length=NAME_MAX, description="Display name (default: the id).")


class RepositoryIn(Strict):
    id: str = Field(max_length=SLUG_MAX, description="A slug: letters, digits, - and _.")
    path: str = Field(
        min_length=1, max_length=PATH_MAX, description="The git repository's path on the server."
    )


class LinkIn(Strict):
    revision: str = Field(min_length=1, max_length=256)


class AgentIn(Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    stage: Literal["assess", "understand", "design", "implement", "review", "runtime"]
    applicationId: str | None = None


class TaskIn(Strict):
    """What the run is for, shown on the run page; a start recall without a query scores the
    agent's facts against it. Title and description hold at most 2,000 characters together."""

    title: str = Field(
        min_length=1, max_length=TASK_TEXT_MAX, description="One line, e.g. the ticket's title."
    )
    description: str | None = Field(
        None, max_length=TASK_TEXT_MAX, description="Optional: what the run must do, in prose."
    )


class RunIn(Strict):
    agentId: str
    parentRunId: str | None = None
    taskKey: str | None = Field(None, max_length=64)
    task: TaskIn | None = None
    scopes: list[Literal["read", "write"]] | None = None


class RunStatusIn(Strict):
    """At least one of: the run's status (leaving `running` finishes it and revokes its token
    at once) and the step it is in now (recorded on every note it writes from then on)."""

    status: Literal["running", "succeeded", "failed"] | None = None
    step: str | None = Field(None, max_length=100)


class IdOut(Schema):
    id: str


class RunOut(Schema):
    id: str
    token: str
    topLevelRunId: str
    scopes: list[str]


class LinkOut(Schema):
    applicationId: str
    repositoryId: str
    revision: str


class MemberOut(Schema):
    username: str
    role: str


class SettingOut(Schema):
    enabled: bool
    revision: int
    revocationEpoch: int
    changedAt: datetime | None
    lastWriteAt: datetime | None


class AdminNoteOut(Schema):
    id: str
    kind: str
    target: str
    scope: str
    applicationId: str | None
    ownerAgentId: str | None
    day: Date | None
    content: str
    summary: str | None
    tags: list[str]
    trust: str
    state: str
    status: str
    archiveReason: str | None
    vetoedBy: str | None
    createdByStage: str | None
    createdByAgentId: str | None
    createdByUserId: str | None
    originRunId: str | None
    producerStatus: str
    taskKey: str | None
    evidence: EvidenceOut | None
    recoveryId: str | None
    createdAt: datetime
    updatedAt: datetime


class AdminMemoryOut(Schema):
    projectId: str
    setting: SettingOut
    counts: dict[str, Any]
    notes: list[AdminNoteOut]
    limit: int
    offset: int
    nextOffset: int | None


class NoteStateOut(Schema):
    id: str
    status: str
    trust: str
    archiveReason: str | None


class NotesByStatusOut(Schema):
    active: int
    archived: int
    forgotten: int


class ApplicationDeleteOut(Schema):
    """What deleting an application removed (the notes scoped to it, their recovery records,
    its repository links) and what it detached (its agents and runs stay in the project, with
    no application, and so do their private facts)."""

    projectId: str
    applicationId: str
    notes: int
    notesByStatus: NotesByStatusOut
    recoveries: int
    repositoryLinks: int
    agentsDetached: int
    runsDetached: int


class ProjectDeleteOut(Schema):
    """Everything deleting a project removed, counted row by row. Its audit events stay."""

    projectId: str
    notes: int
    notesByStatus: NotesByStatusOut
    recoveries: int
    scratchpadItems: int
    applications: int
    repositoryLinks: int
    agents: int
    runs: int
    tokens: int
    memberships: int
    reviewRoutines: int
    reviewRuns: int
    toolCallCounts: int
    startRecalls: int


class RevertIn(Strict):
    """`dryRun: true` answers the preview and changes nothing. `includeReviewed` ticks notes a
    person already reviewed (kept otherwise); `confirm` is the run id, needed above 20
    changes."""

    dryRun: bool = False
    includeReviewed: list[str] = Field(default_factory=list, max_length=2000)
    confirm: str | None = Field(None, max_length=64)


class RevertNoteOut(Schema):
    id: str
    kind: str
    scope: str
    trust: str
    status: str
    agentId: str | None
    runId: str


class RevertReviewedOut(RevertNoteOut):
    selected: bool


class RevertBackOut(RevertNoteOut):
    why: Literal["superseded", "archived", "forgotten"]


class RevertKeptOut(RevertNoteOut):
    reason: str


class RevertOut(Schema):
    """A revert's impact (the preview, or what was applied): the shared notes forgotten, the
    facts and day rows vetoed, the reviewed notes (changed only when selected), what comes
    back, and what was left as it is with the reason."""

    runId: str
    runIds: list[str]
    dryRun: bool
    revertId: str | None
    forget: list[RevertNoteOut]
    veto: list[RevertNoteOut]
    dayRows: list[RevertNoteOut]
    reviewed: list[RevertReviewedOut]
    bringBack: list[RevertBackOut]
    kept: list[RevertKeptOut]
    changes: int
    confirmRequired: bool
    counts: dict[str, int]


class RevertUndoOut(Schema):
    revertId: str
    runId: str
    restored: list[str]
    skipped: dict[str, str]


class ImportProblem(Schema):
    line: int | None = Field(description="1-based line of the file; null for the whole file")
    message: str


class ErrorBody(Schema):
    code: str
    message: str
    hint: str
    field: str | None = None
    reason: str | None = None
    lines: list[ImportProblem] | None = Field(
        None, description="an import refused: every bad line of the file (nothing was written)"
    )


class ImportOut(Schema):
    project: str
    createdProject: bool
    remapped: bool
    inserted: dict[str, int] = Field(description="records inserted, by type")
    unchanged: dict[str, int] = Field(description="records already there, by type")


class ErrorOut(Schema):
    error: ErrorBody


def responses(ok: dict) -> dict:
    """A route's documented answers: its success body plus the error envelope for every
    4xx and 5xx (what schemathesis checks responses against)."""
    return {**ok, ERROR_STATUSES: ErrorOut}


ERROR_STATUSES = frozenset({400, 401, 403, 404, 405, 409, 413, 429, 500, 503})
