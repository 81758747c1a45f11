"""What the server answers, as typed, frozen dataclasses.

Each model names the schema of the server's OpenAPI document it mirrors (`__schema__`); its
fields are that schema's properties in snake_case (`createdByStage` → `created_by_stage`), a
field without a default is one the schema requires. The client's test suite compares every
model with the document a live server serves, so the two cannot drift apart."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, ClassVar, TypeVar, Union

T = TypeVar("T")


def wire_name(name: str) -> str:
    """A field's name on the wire: snake_case to camelCase."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def python_name(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _parse_datetime(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _convert(kind: Any, value: Any) -> Any:
    """`value` (parsed JSON) as the annotated type `kind`."""
    if value is None or kind is Any:
        return value
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        if len(options) == 1:
            return _convert(options[0], value)
        for option in options:  # the first option whose required fields are all there
            if _fits(option, value):
                return _convert(option, value)
        return value
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_convert(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(kind)
        return {k: _convert(item, v) for k, v in value.items()}
    if dataclasses.is_dataclass(kind):
        return kind.from_json(value)
    if kind is datetime:
        return _parse_datetime(value)
    if kind is date:
        return date.fromisoformat(value)
    if kind is float:
        return float(value)
    return value


def _fits(kind: Any, value: Any) -> bool:
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, list) and all(_fits(item, v) for v in value)
    if dataclasses.is_dataclass(kind):
        return isinstance(value, dict) and all(
            wire_name(f.name) in value for f in dataclasses.fields(kind) if _required(f)
        )
    return True


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


class Model:
    """A server answer: `from_json` reads the JSON object, ignoring fields a newer server
    added; `raw` keeps the object as it came."""

    __schema__: ClassVar[str]

    @classmethod
    def from_json(cls: type[T], data: dict[str, Any]) -> T:
        hints = typing.get_type_hints(cls)
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name == "raw":
                continue
            key = wire_name(f.name)
            if key in data:
                values[f.name] = _convert(hints[f.name], data[key])
        return cls(**values, raw=data)  # type: ignore[call-arg]


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


# --- Agent tools -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolDefinition(Model):
    __schema__ = "ToolDefinition"
    name: str
    description: str
    parameters: dict[str, Any]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Tools(Model):
    """What `GET /api/tools` offers this run now (JSON Schemas ready for a model)."""

    __schema__ = "ToolsOut"
    enabled: bool
    eligible: bool
    access_mode: str
    tools: list[ToolDefinition]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Evidence(Model):
    __schema__ = "EvidenceOut"
    repository_id: str | None
    path: str
    commit: str
    quote: str | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Entry(Model):
    """A note as the agent tools return it, with its trust and provenance."""

    __schema__ = "EntryOut"
    id: str
    kind: str
    target: str
    scope: str
    day: date | None
    content: str
    summary: str | None
    tags: list[str]
    trust: str
    status: str
    review_reason: str | None
    created_by_stage: str | None
    created_by_agent_id: str | None
    origin_run_id: str | None
    top_level_run_id: str | None
    step: str | None
    task_key: str | None
    producer_status: str
    evidence: Evidence | None
    expires_at: datetime | None
    created_at: datetime
    content_truncated: bool = False
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Recovery(Model):
    """A forgotten note the run may restore (`memory_read(target="recoveries")`)."""

    __schema__ = "RecoveryOut"
    recovery_id: str
    id: str
    kind: str
    target: str
    scope: str
    content: str
    previous_status: str
    forgotten_at: datetime
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Page(Model):
    """A page of 1–5 entries; pass `next_offset` as `offset` while it is not None."""

    __schema__ = "PageOut"
    entries: list[Entry] | list[Recovery]
    next_offset: int | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class DailyDates(Model):
    """`memory_read(target="list")`: the dates that have a daily log, with their counts."""

    __schema__ = "DatesOut"
    dates: list[dict[str, Any]]
    next_offset: int | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class WriteResult(Model):
    """`created` is False when an identical live note already held the content; `held` is
    True when the project holds notes for review (other runs see it once a person has)."""

    __schema__ = "WriteOut"
    id: str
    trust: str
    status: str
    created: bool
    held: bool = False
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Status(Model):
    __schema__ = "StatusOut"
    enabled: bool
    note_count: int
    access_mode: str
    revision: int
    fingerprint: str
    review_policy: str = "open"
    held_count: int = 0
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Forgotten(Model):
    """A forget's recovery record: `memory_restore(recovery_id)` brings the note back."""

    __schema__ = "ForgetOut"
    recovery_id: str
    id: str
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Restored(Model):
    __schema__ = "RestoreOut"
    id: str
    status: str
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class ScratchpadItem(Model):
    __schema__ = "ScratchpadItemOut"
    item_id: str
    text: str
    done: bool
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Scratchpad(Model):
    """A scratchpad action's answer: `items` and `next_offset` for list, `item_id` and `done`
    for add / done / undo, `removed` for clear."""

    __schema__ = "ScratchpadOut"
    items: list[ScratchpadItem] | None = None
    next_offset: int | None = None
    item_id: str | None = None
    done: bool | None = None
    removed: int | None = None
    raw: dict[str, Any] = _raw()


# --- Agent memory v1 -------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory(Model):
    """A v1 memory: an agent's own fact or day log."""

    __schema__ = "MemoryOut"
    id: str
    agent_id: str
    kind: str
    day: date | None
    text: str
    expires_at: datetime | None
    expired: bool
    status: str
    trust: str
    archive_reason: str | None
    review_reason: str | None
    archived_at: datetime | None
    supersedes_id: str | None
    source_run_id: str | None
    source_task_key: str | None
    created_by_agent_id: str | None
    created_by_user_id: str | None
    recall_count: int
    last_recalled_at: datetime | None
    created_at: datetime
    updated_at: datetime
    object: str = "memory"
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class MemoryList(Model):
    __schema__ = "MemoryListOut"
    data: list[Memory]
    object: str = "list"
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class RecalledMemory(Memory):
    __schema__ = "RecalledMemoryOut"
    score: float | None = None


@dataclass(frozen=True)
class Recall(Model):
    """A recall: the memories scored ≥ 0.5 (best first), the possibly related ones below
    them (lower confidence, `related`), the day log, and `block`, the `--- MEMORY ---` text
    to put in a prompt."""

    __schema__ = "RecallOut"
    agent_id: str
    skipped: bool
    fallback: str | None
    memories: list[RecalledMemory]
    day_log: list[str]
    block: str
    tokens: int
    skip_reason: str | None = None  # "recalled_recently" or "slash_command" when skipped
    related: list[RecalledMemory] = field(default_factory=list)
    object: str = "recall"
    raw: dict[str, Any] = _raw()


# --- Runs, keys, projects --------------------------------------------------------------------


@dataclass(frozen=True)
class Run(Model):
    """A started run; `token` (shown once) is what the run's agent calls with."""

    __schema__ = "RunOut"
    id: str
    token: str = field(repr=False)
    top_level_run_id: str
    scopes: list[str]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class AgentKey(Model):
    """A new agent key; `key` is its secret, shown this once."""

    __schema__ = "KeyOut"
    id: str
    key: str = field(repr=False)
    label: str
    agent_id: str
    created_at: datetime
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class AgentKeyRow(Model):
    __schema__ = "KeyRowOut"
    id: str
    label: str
    agent_id: str
    created_at: datetime
    first_used_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class AgentKeyList(Model):
    __schema__ = "KeyListOut"
    keys: list[AgentKeyRow]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Member(Model):
    __schema__ = "MemberOut"
    username: str
    role: str
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class MemberList(Model):
    __schema__ = "MemberListOut"
    members: list[Member]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Person(Model):
    """A person of the server, as administrators see them."""

    __schema__ = "PersonOut"
    username: str
    email: str | None
    active: bool
    administrator: bool
    projects: int
    last_login: datetime | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class People(Model):
    __schema__ = "PeopleOut"
    people: list[Person]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class RunRow(Model):
    """A run as the project's list of runs shows it."""

    __schema__ = "RunRowOut"
    id: str
    agent_id: str
    parent_run_id: str | None
    top_level_run_id: str
    status: str
    task_key: str | None
    step: str | None
    tool_calls: int
    started_at: datetime
    finished_at: datetime | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class RunList(Model):
    __schema__ = "RunListOut"
    runs: list[RunRow]
    limit: int
    offset: int
    next_offset: int | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Created(Model):
    """The id of what a create route made (a project, application, agent, repository)."""

    __schema__ = "IdOut"
    id: str
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class RepositoryLink(Model):
    __schema__ = "LinkOut"
    application_id: str
    repository_id: str
    revision: str
    raw: dict[str, Any] = _raw()


# --- A project's memory, for people ----------------------------------------------------------


@dataclass(frozen=True)
class Setting(Model):
    __schema__ = "SettingOut"
    enabled: bool
    review_policy: str
    revision: int
    revocation_epoch: int
    changed_at: datetime | None
    last_write_at: datetime | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class ProjectNote(Model):
    """A note as a manager sees it: trust, review state, deletion state, provenance."""

    __schema__ = "AdminNoteOut"
    id: str
    kind: str
    target: str
    scope: str
    application_id: str | None
    owner_agent_id: str | None
    day: date | None
    content: str
    summary: str | None
    tags: list[str]
    trust: str
    state: str
    status: str
    archive_reason: str | None
    review_reason: str | None
    vetoed_by: str | None
    created_by_stage: str | None
    created_by_agent_id: str | None
    created_by_user_id: str | None
    origin_run_id: str | None
    producer_status: str
    task_key: str | None
    evidence: Evidence | None
    recovery_id: str | None
    created_at: datetime
    updated_at: datetime
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class ProjectMemory(Model):
    """A page of a project's notes, newest first, with the setting and the counts."""

    __schema__ = "AdminMemoryOut"
    project_id: str
    setting: Setting
    counts: dict[str, Any]
    notes: list[ProjectNote]
    limit: int
    offset: int
    next_offset: int | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class NoteState(Model):
    __schema__ = "NoteStateOut"
    id: str
    status: str
    trust: str
    archive_reason: str | None
    review_reason: str | None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class RevertNote(Model):
    __schema__ = "RevertNoteOut"
    id: str
    kind: str
    scope: str
    trust: str
    status: str
    agent_id: str | None
    run_id: str
    # Set on the groups that carry them: `selected` (reviewed), `why` (bringBack), `reason`
    # (kept).
    selected: bool | None = None
    why: str | None = None
    reason: str | None = None
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class Revert(Model):
    """A revert's impact: the preview (`dry_run`) or what was applied (`revert_id`)."""

    __schema__ = "RevertOut"
    run_id: str
    run_ids: list[str]
    dry_run: bool
    revert_id: str | None
    forget: list[RevertNote]
    veto: list[RevertNote]
    day_rows: list[RevertNote]
    reviewed: list[RevertNote]
    bring_back: list[RevertNote]
    kept: list[RevertNote]
    changes: int
    confirm_required: bool
    counts: dict[str, int]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class RevertUndo(Model):
    __schema__ = "RevertUndoOut"
    revert_id: str
    run_id: str
    restored: list[str]
    skipped: dict[str, str]
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class ImportMember(Model):
    """A person the import gives a role in the project it creates (or would: a dry run)."""

    __schema__ = "ImportMemberOut"
    username: str
    role: str
    account: bool
    raw: dict[str, Any] = _raw()


@dataclass(frozen=True)
class ImportResult(Model):
    __schema__ = "ImportOut"
    project: str
    created_project: bool
    remapped: bool
    dry_run: bool = False
    lines: dict[str, int] = field(default_factory=dict)
    inserted: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    members: list[ImportMember] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


# Models whose schema the server's document shares with a subclass's extra fields: the
# revert groups are one class here (RevertReviewedOut, RevertBackOut, RevertKeptOut add one
# field each to RevertNoteOut).
OPTIONAL_EXTRAS = {"RevertNoteOut": {"selected", "why", "reason"}}

MODELS: list[type[Model]] = [
    ToolDefinition, Tools, Evidence, Entry, Recovery, Page, DailyDates, WriteResult, Status,
    Forgotten, Restored, ScratchpadItem, Scratchpad, Memory, MemoryList, RecalledMemory, Recall,
    Run, AgentKey, AgentKeyRow, AgentKeyList, Member, MemberList, Person, People, RunRow,
    RunList, Created, RepositoryLink, Setting,
    ProjectNote, ProjectMemory, NoteState, RevertNote, Revert, RevertUndo, ImportMember,
    ImportResult,
]  # fmt: skip
