"""Response schemas of the JSON API. Each output shape is written once: a `Shape` reads a model
row through field aliases and `resolve_` methods, so an endpoint may answer with the row itself,
and `serializers` renders rows through the same class where a tool needs the dict."""

from __future__ import annotations

from datetime import date as Date
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from ninja.schema import DjangoGetter
from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from memory_portal.memory.models import Note, NoteRead, Recovery, Status, Trust
from memory_portal.memory.selectors.reach import REACH_SAMPLE
from memory_portal.memory.selectors.reads import changed_since


def _blank_is_none(value: Any) -> Any:
    return value or None


def _user_id(value: Any) -> Any:
    return str(value) if isinstance(value, int) and value else value or None


Blank = Annotated[str | None, BeforeValidator(_blank_is_none)]  # "" in the row, null in JSON
UserId = Annotated[str | None, BeforeValidator(_user_id)]  # a user's pk, as text


# The shapes below explain themselves in comments, not docstrings: a docstring would become the
# schema's description in the OpenAPI document.
class Shape(Schema):
    """An output shape read from a model row (aliases and `resolve_` methods say how). A dict
    is a shape already rendered: ninja validates a route's answer again, and a rendered dict is
    read by field name, without the resolvers."""

    model_config = ConfigDict(populate_by_name=True)

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(cls, values, handler, info):
        if isinstance(values, dict):
            return handler(values)
        return handler(DjangoGetter(values, cls, info.context))


# --- Agent tools ------------------------------------------------------------------------------


# Read from the note itself (its `evidence_*` columns).
class EvidenceOut(Shape):
    repositoryId: str | None
    path: str = Field(alias="evidence_path")
    commit: str = Field(alias="evidence_commit")
    quote: Blank = Field(alias="evidence_quote")

    @staticmethod
    def resolve_repositoryId(note: Note) -> str | None:
        return note.evidence_repository.slug if note.evidence_repository_id else None


def _evidence(note: Note) -> Note | None:
    return note if note.evidence_commit else None


# A note as the agent tools return it: content plus trust and provenance to judge it by.
class EntryOut(Shape):
    id: str
    kind: str
    target: str
    scope: str
    day: Date | None
    content: str
    contentTruncated: bool = False
    summary: Blank
    tags: list[str]
    trust: str
    status: str
    reviewReason: Blank = Field(alias="review_reason")  # why a person rejected or vetoed it
    createdByStage: Blank = Field(alias="created_by_stage")
    createdByAgentId: Blank = Field(alias="created_by_agent_id")
    originRunId: Blank = Field(alias="origin_run_ref")
    topLevelRunId: Blank = Field(alias="top_level_run_id")
    step: Blank
    taskKey: Blank = Field(alias="task_key")
    producerStatus: str = Field(alias="producer_status")
    evidence: EvidenceOut | None
    expiresAt: datetime | None = Field(alias="expires_at")
    createdAt: datetime = Field(alias="created_at")

    resolve_evidence = staticmethod(_evidence)


# Read from a recovery record and its note.
class RecoveryOut(Shape):
    recoveryId: str
    id: str
    kind: str = Field(alias="note.kind")
    target: str = Field(alias="note.target")
    scope: str = Field(alias="note.scope")
    content: str = Field(alias="note.content")
    previousStatus: str = Field(alias="previous_status")
    forgottenAt: datetime = Field(alias="created_at")

    @staticmethod
    def resolve_recoveryId(recovery: Recovery) -> str:
        return recovery.id

    @staticmethod
    def resolve_id(recovery: Recovery) -> str:
        return recovery.note_id


# A page of notes (EntryOut), or of recovery records (memory_read target recoveries).
class PageOut(Schema):
    entries: list[EntryOut] | list[RecoveryOut]
    nextOffset: int | None


class DatesOut(Schema):
    dates: list[dict[str, Any]]
    nextOffset: int | None


class WriteOut(Schema):
    id: str
    trust: str
    status: str
    created: bool
    held: bool = Field(
        False,
        description="the project holds agents' notes for review (review policy `hold`): "
        "until a person reviews this note, only your top-level run (and runs nested in it) "
        "sees it",
    )


class StatusOut(Schema):
    enabled: bool
    noteCount: int
    accessMode: Literal["learned", "reviewed"]
    revision: int
    fingerprint: str
    reviewPolicy: Literal["open", "hold"] = Field(
        "open",
        description="`open`: a learned note is served to every eligible run at once; `hold`: "
        "only to the top-level run that wrote it until a person reviews it",
    )
    heldCount: int = Field(
        0, description="live notes of your top-level run that other runs do not see yet (hold)"
    )


# Read from the recovery record a forget made.
class ForgetOut(Shape):
    recoveryId: str
    id: str

    resolve_recoveryId = staticmethod(RecoveryOut.resolve_recoveryId)
    resolve_id = staticmethod(RecoveryOut.resolve_id)


class RestoreOut(Schema):
    id: str
    status: str


class ScratchpadItemOut(Shape):
    itemId: str = Field(alias="id")
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


# The v1 memory object, read from a note.
class MemoryOut(Shape):
    id: str
    object: Literal["memory"] = "memory"
    agentId: str = Field(alias="owner_agent_id")
    kind: str
    day: Date | None
    text: str = Field(alias="content")
    expiresAt: datetime | None = Field(alias="expires_at")
    expired: bool
    status: str
    trust: Literal["learned", "reviewed", "rejected"] = Field(
        description="learned (unverified), reviewed by a manager, or rejected (never served "
        "to agents in lists or recall)"
    )
    archiveReason: Blank = Field(alias="archive_reason")
    reviewReason: Blank = Field(alias="review_reason")  # why a person rejected or vetoed it
    archivedAt: datetime | None = Field(alias="archived_at")
    supersedesId: str | None = Field(alias="supersedes_id")
    sourceRunId: Blank = Field(alias="origin_run_ref")
    sourceTaskKey: Blank = Field(alias="task_key")
    createdByAgentId: Blank = Field(alias="created_by_agent_id")
    createdByUserId: UserId = Field(alias="created_by_user_id")
    recallCount: int = Field(alias="recall_count")
    lastRecalledAt: datetime | None = Field(alias="last_recalled_at")
    createdAt: datetime = Field(alias="created_at")
    updatedAt: datetime = Field(alias="updated_at")


class MemoryListOut(Schema):
    object: Literal["list"] = "list"
    data: list[MemoryOut]


class RecalledMemoryOut(MemoryOut):
    score: float | None


class RecallOut(Schema):
    object: Literal["recall"] = "recall"
    agentId: str
    skipped: bool
    skipReason: Literal["recalled_recently", "slash_command"] | None = Field(
        None,
        description="Why a start recall was skipped: the run recalled at its start in the last "
        "24 hours, or the message is a slash command (it begins with /).",
    )
    fallback: str | None
    memories: list[RecalledMemoryOut] = Field(
        description="The first tier: facts scoring at least the threshold (0.5), by meaning."
    )
    related: list[RecalledMemoryOut] = Field(
        description="The second tier, lower confidence: up to MEMORY_RECALL_RELATED (3) "
        "further facts by meaning, each with its score below the threshold, only when the "
        "question is near the agent's memory at all; empty otherwise."
    )
    dayLog: list[str]
    block: str
    tokens: int


# --- Admin ------------------------------------------------------------------------------------


class IdOut(Schema):
    id: str


class RunOut(Schema):
    id: str
    token: str
    topLevelRunId: str
    scopes: list[str]


class RunRowOut(Shape):
    id: str
    agentId: str = Field(alias="agent_id")
    parentRunId: str | None = Field(alias="parent_id")
    topLevelRunId: str = Field(alias="top_level_run_id")
    status: str
    taskKey: Blank = Field(alias="task_key")
    step: Blank = Field(alias="current_step")
    toolCalls: int = Field(alias="tool_calls")
    startedAt: datetime = Field(alias="started_at")
    finishedAt: datetime | None = Field(alias="finished_at")


class RunListOut(Schema):
    runs: list[RunRowOut]
    limit: int
    offset: int
    nextOffset: int | None


class KeyOut(Schema):
    """A new agent key: `key` is its secret, shown this once and never again."""

    id: str
    key: str
    label: str
    agentId: str
    createdAt: datetime


class KeyRowOut(Shape):
    id: str
    label: str
    agentId: str = Field(alias="agent_id")
    createdAt: datetime = Field(alias="created_at")
    firstUsedAt: datetime | None = Field(alias="first_used_at")
    lastUsedAt: datetime | None = Field(alias="last_used_at")
    revokedAt: datetime | None = Field(alias="revoked_at")


class KeyListOut(Schema):
    keys: list[KeyRowOut]


class WebhookOut(Schema):
    """An endpoint as it is shown after it was made: its URL masked (a chat hook's token is in
    its query string), never its secret."""

    id: str
    url: str = Field(description="masked: scheme, host, the start of the path")
    eventTypes: list[str]
    description: str
    format: str
    active: bool
    failingSince: datetime | None
    disabledReason: str
    createdAt: datetime


class WebhookCreatedOut(WebhookOut):
    """A new endpoint (or a rotated secret): `secret` is shown this once and never again."""

    secret: str = Field(description="whsec_…: verify deliveries with it (Standard Webhooks)")


class WebhookListOut(Schema):
    webhooks: list[WebhookOut]


class SecretOut(Schema):
    secret: str = Field(description="the new whsec_… secret, shown this once")


class DeliveryOut(Schema):
    id: int
    eventNumber: int | None = Field(description="the event's number in the project; null: a test")
    type: str
    status: Literal["pending", "sending", "delivered", "failed"]
    attempts: int
    lastStatus: int = Field(description="the receiver's HTTP status; 0: no answer")
    lastMs: int
    lastError: str = Field(description="timeout, connection, refused_address, …; empty")
    nextAttemptAt: datetime | None
    createdAt: datetime


class DeliveryListOut(Schema):
    deliveries: list[DeliveryOut]


class LinkOut(Schema):
    applicationId: str
    repositoryId: str
    revision: str


class MemberOut(Schema):
    username: str
    role: str


class MemberListOut(Schema):
    members: list[MemberOut]


class PersonOut(Shape):
    username: str
    email: Blank
    active: bool = Field(alias="is_active")
    administrator: bool = Field(alias="is_superuser")
    projects: int = Field(alias="project_count")
    lastLogin: datetime | None = Field(alias="last_login")


class PeopleOut(Schema):
    people: list[PersonOut]


class SettingOut(Shape):
    enabled: bool
    reviewPolicy: Literal["open", "hold"] = Field(alias="review_policy")
    revision: int
    revocationEpoch: int = Field(alias="revocation_epoch")
    changedAt: datetime | None = Field(alias="changed_at")
    lastWriteAt: datetime | None = Field(alias="last_write_at")


# A note as a manager sees it: trust, deletion state and provenance.
class AdminNoteOut(Shape):
    id: str
    kind: str
    target: str
    scope: str
    applicationId: str | None
    ownerAgentId: str | None = Field(alias="owner_agent_id")
    day: Date | None
    content: str
    summary: Blank
    tags: list[str]
    trust: str
    state: str
    status: str
    archiveReason: Blank = Field(alias="archive_reason")
    reviewReason: Blank = Field(alias="review_reason")  # why a person rejected or vetoed it
    vetoedBy: str | None
    createdByStage: Blank = Field(alias="created_by_stage")
    createdByAgentId: Blank = Field(alias="created_by_agent_id")
    createdByUserId: UserId = Field(alias="created_by_user_id")
    originRunId: Blank = Field(alias="origin_run_ref")
    producerStatus: str = Field(alias="producer_status")
    taskKey: Blank = Field(alias="task_key")
    evidence: EvidenceOut | None
    recoveryId: str | None
    createdAt: datetime = Field(alias="created_at")
    updatedAt: datetime = Field(alias="updated_at")

    resolve_evidence = staticmethod(_evidence)

    @staticmethod
    def resolve_applicationId(note: Note) -> str | None:
        return note.application.slug if note.application_id else None

    @staticmethod
    def resolve_state(note: Note) -> str:
        return "approved" if note.trust == Trust.REVIEWED else note.trust

    @staticmethod
    def resolve_vetoedBy(note: Note) -> str | None:
        return note.vetoed_by.get_username() if note.vetoed_by_id else None

    @staticmethod
    def resolve_recoveryId(note: Note) -> str | None:
        recovery = getattr(note, "recovery", None) if note.status == Status.FORGOTTEN else None
        return recovery.id if recovery is not None else None


class AdminMemoryOut(Schema):
    projectId: str
    setting: SettingOut
    counts: dict[str, Any]
    notes: list[AdminNoteOut]
    limit: int
    offset: int
    nextOffset: int | None


class NoteStateOut(Shape):
    id: str
    status: str
    trust: str
    archiveReason: Blank = Field(alias="archive_reason")
    reviewReason: Blank = Field(alias="review_reason")  # why a person rejected or vetoed it


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


class RevertNoteOut(Shape):
    id: str
    kind: str
    scope: str
    trust: str
    status: str
    agentId: str | None
    runId: str = Field(alias="origin_run_ref")

    @staticmethod
    def resolve_agentId(note: Note) -> str | None:
        return note.owner_agent_id or note.created_by_agent_id or None


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


class ImportMemberOut(Schema):
    username: str
    role: str
    account: bool = Field(description="a person of that username is here (else: skipped)")


class ImportOut(Schema):
    project: str
    createdProject: bool = Field(description="the import creates (created) the project")
    remapped: bool
    dryRun: bool = Field(False, description="a dry run: nothing was written")
    lines: dict[str, int] = Field(
        default_factory=dict, description="a dry run: the file's lines, by record type"
    )
    inserted: dict[str, int] = Field(
        default_factory=dict, description="records inserted, by type"
    )
    unchanged: dict[str, int] = Field(
        default_factory=dict, description="records already there, by type"
    )
    members: list[ImportMemberOut] = Field(
        default_factory=list,
        description="the people given a role in the created project (a dry run: who would "
        "be); empty for an existing project, whose members an import never changes",
    )


class ErrorOut(Schema):
    error: ErrorBody


def responses(ok: dict) -> dict:
    """A route's documented answers: its success body plus the error envelope for every
    4xx and 5xx (what schemathesis checks responses against)."""
    return {**ok, ERROR_STATUSES: ErrorOut}


ERROR_STATUSES = frozenset({400, 401, 403, 404, 405, 409, 413, 429, 500, 503})


# --- Read records (SPEC §2.10) ------------------------------------------------------------


class ReadOut(Shape):
    """One note served to one run: ids and numbers, never the query."""

    noteId: str = Field(alias="note.id")
    runId: str = Field(alias="run.id")
    topLevelRunId: str = Field(alias="run.top_level_run_id")
    agentId: str = Field(alias="run.agent_id")
    runStatus: str = Field(description="running, succeeded or failed, now")
    tool: str = Field(description="read, search, list, recall or start_recall")
    rank: int = Field(description="its place in the answer, from 1")
    score: float | None = Field(description="recall's score; null where the answer has none")
    trustWhenRead: str = Field(alias="trust")
    readAt: datetime = Field(alias="read_at")

    @staticmethod
    def resolve_runStatus(read: NoteRead) -> str:
        return read.run.status


class NoteReadsOut(Schema):
    noteId: str
    runs: int = Field(description="distinct runs the note was served to (records kept)")
    agents: int
    runningRunIds: list[str] = Field(description="those runs still running, at most 50")
    atLeast: bool = Field(
        description=f"the note was served more than {REACH_SAMPLE:,} times: its newest "
        f"{REACH_SAMPLE:,} reads were counted, so runs and agents are at least these"
    )
    reads: list[ReadOut]
    limit: int
    offset: int
    nextOffset: int | None


class RunReadOut(ReadOut):
    """A read with its note as it is now, flagged when it has since been taken away."""

    kind: str = Field(alias="note.kind")
    trustNow: str = Field(alias="note.trust")
    statusNow: str = Field(alias="note.status")
    changedSince: list[str] = Field(description="vetoed, rejected, forgotten, superseded")

    @staticmethod
    def resolve_changedSince(read: NoteRead) -> list[str]:
        return changed_since(read)


class RunReadsOut(Schema):
    runId: str
    reads: list[RunReadOut]
    limit: int
    offset: int
    nextOffset: int | None
