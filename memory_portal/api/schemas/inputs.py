"""Request schemas of the JSON API. The tool argument schemas are also the JSON
Schemas handed to models by `GET /api/tools`, so what is offered is what is validated."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date as Date
from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from ninja import Schema
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from memory_portal.memory import outbox
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
    SLUG_PATTERN,
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


def _written_date(value: Any) -> Any:
    """A query parameter's date as people write one: lax parsing would take `0` or
    `1700000000` for a date (a Unix time)."""
    if isinstance(value, str) and not _iso(value):
        raise PydanticCustomError("date_invalid", "must be a date (YYYY-MM-DD)")
    return value


# A date in a query string (every parameter is a string there; a JSON body's dates are
# checked by `Strict`).
QueryDate = Annotated[Date, BeforeValidator(_written_date)]

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

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(cls, values: Any, handler: ModelWrapValidatorHandler) -> Any:
        """Validate once. ninja's Schema validates a model that refuses extra fields twice: the
        value as given, then again wrapped to read Django objects and `resolve_*` methods. An
        input is parsed JSON, never a Django object, and no input schema resolves, so the
        first pass is the answer: the same value and the same errors, in a third of the time
        (this overrides ninja's validator of the same name)."""
        return handler(values)

    @field_validator("*", mode="before")
    @classmethod
    def _exact_and_storable(cls, value: Any, info: ValidationInfo) -> Any:
        _exact_json(value, cls.model_fields[info.field_name].annotation)
        return _storable(value)


# The id of a project, an application or a repository. Its pattern is documented here and
# checked by the service (services/projects.py), whose refusal says what a slug may hold.
SlugId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=SLUG_MAX,
        description="A slug: letters, digits, - and _.",
        json_schema_extra={"pattern": SLUG_PATTERN},
    ),
]


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
    tag: str | None = Field(
        None, min_length=1, max_length=TAG_MAX, description="Only notes carrying this tag."
    )
    limit: int = Field(5, ge=1, le=5, description="1–5 entries per page.")
    offset: int = Field(
        0, ge=0, le=OFFSET_MAX, description="Continue at a previous answer's nextOffset."
    )

    # Which arguments go together, refused naming the field (memory_invalid) like any other
    # argument error; fields are validated in order, so `target` can read `id`, `date` both.

    @field_validator("target")
    @classmethod
    def _id_or_target(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("id"):
            raise PydanticCustomError("argument_conflict", "give either id or target, not both")
        return value

    @field_validator("date")
    @classmethod
    def _date_for_daily(cls, value: Date | None, info: ValidationInfo) -> Date | None:
        target = info.data.get("target") or "long_term"
        if value is not None and not info.data.get("id") and target == "long_term":
            raise PydanticCustomError("argument_conflict", "date applies to target daily")
        return value


class MemorySearchArgs(Strict):
    query: str = Field(min_length=1, max_length=RECALL_QUERY_MAX, description="Full-text query.")
    kind: Literal["fact", "lesson", "decision", "navigation", "day"] | None = None
    target: Literal["long_term", "daily"] | None = None
    date: Date | None = None
    tag: str | None = Field(
        None, min_length=1, max_length=TAG_MAX, description="Only notes carrying this tag."
    )
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
    text: str | None = Field(
        None, min_length=1, max_length=SCRATCHPAD_TEXT_MAX, validate_default=True
    )
    itemId: str | None = Field(None, validate_default=True)
    limit: int | None = Field(
        None, ge=1, le=SCRATCHPAD_PAGE_MAX, description="list: items per page (default 20)."
    )
    offset: int | None = Field(
        None, ge=0, le=OFFSET_MAX, description="list: continue at a previous nextOffset."
    )

    # Which fields go with which action, refused naming the field (memory_invalid), like any
    # other argument error: `action` is validated first, so each check below can read it.

    @field_validator("text")
    @classmethod
    def _text_for_add(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("action") == "add" and value is None:
            raise PydanticCustomError("action_argument", "add needs text")
        return value

    @field_validator("itemId")
    @classmethod
    def _item_for_done_undo(cls, value: str | None, info: ValidationInfo) -> str | None:
        action = info.data.get("action")
        if action == "add" and value:
            raise PydanticCustomError("action_argument", "add takes text, not itemId")
        if action in {"done", "undo"} and not value:
            raise PydanticCustomError("action_argument", f"{action} needs itemId")
        return value

    @field_validator("limit", "offset")
    @classmethod
    def _paging_for_list(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("action") not in {None, "list"}:
            raise PydanticCustomError("action_argument", "limit and offset apply to list only")
        return value


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


# --- Admin ------------------------------------------------------------------------------------


class EnabledIn(Strict):
    """At least one of: the switch, the review policy."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    enabled: bool | None = None
    reviewPolicy: Literal["open", "hold"] | None = Field(
        None,
        description="`open` (the default): an agent's learned note is served to every eligible "
        "run at once; `hold`: only to the top-level run that wrote it (and runs nested in it) "
        "until a person reviews it, unless its agent is trusted",
    )


class StateIn(Strict):
    # `learned` takes an approval or a rejection back: the note awaits review again.
    state: Literal["approved", "rejected", "learned"]
    # Why (a rejection's, optional, one line): on the note, and to its agent.
    reason: str | None = None


class PersonIn(Strict):
    active: bool | None = None
    administrator: bool | None = None


class ReasonIn(Strict):
    # Why (optional, one line): on the note, and to its agent.
    reason: str | None = None


class ProjectIn(Strict):
    id: SlugId
    name: str = Field("", max_length=NAME_MAX, description="Display name (default: the id).")


class MemberIn(Strict):
    username: str
    role: Literal["member", "manager"] = "member"


class ApplicationIn(Strict):
    id: SlugId
    name: str = Field("", max_length=NAME_MAX, description="Display name (default: the id).")


class RepositoryIn(Strict):
    id: SlugId
    path: str = Field(
        min_length=1, max_length=PATH_MAX, description="The git repository's path on the server."
    )


class LinkIn(Strict):
    revision: str = Field(min_length=1, max_length=256)


StageName = Literal["assess", "understand", "design", "implement", "review", "runtime"]


class AgentIn(Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    stage: StageName
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


class RunStartIn(Strict):
    """`POST /api/runs` with an agent key: a run of the key's agent."""

    taskKey: str | None = Field(None, max_length=64)
    task: TaskIn | None = None
    parentRunId: str | None = Field(
        None,
        description="A running run to nest under (shares its scratchpad and quota): one this "
        "key started, or one a manager started for the key's agent; any other id is a 404.",
    )


class AgentPatchIn(Strict):
    """At least one of: a new name, a new stage (what the agent is offered from its next call
    on; the notes it wrote keep the stage they were written with), whether it is trusted."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    name: str | None = Field(None, min_length=1, max_length=NAME_MAX)
    stage: StageName | None = None
    trusted: bool | None = Field(
        None,
        description="under the `hold` review policy, serve this agent's notes to other runs "
        "at once (still learned, still in the review queue)",
    )


class KeyIn(Strict):
    label: str = Field(
        min_length=1, max_length=100, description="Where the key is used, e.g. “Ana's Cursor”."
    )


class RunStatusIn(Strict):
    """At least one of: the run's status (leaving `running` finishes it and revokes its token
    at once) and the step it is in now (recorded on every note it writes from then on)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    status: Literal["running", "succeeded", "failed"] | None = None
    step: str | None = Field(None, max_length=100)


class RevertIn(Strict):
    """`dryRun: true` answers the preview and changes nothing. `includeReviewed` ticks notes a
    person already reviewed (kept otherwise); `confirm` is the run id, needed above 20
    changes."""

    dryRun: bool = False
    includeReviewed: list[str] = Field(default_factory=list, max_length=2000)
    confirm: str | None = Field(None, max_length=64)


EventTypeName = Literal[tuple(outbox.TYPES)]  # type: ignore[valid-type]


class WebhookIn(Strict):
    """A webhook endpoint: where the project's events go."""

    url: str = Field(
        min_length=1,
        max_length=2000,
        description="http:// or https://; an address on a private, loopback or link-local "
        "network is refused unless MEMORY_PORTAL_WEBHOOK_ALLOW_PRIVATE",
    )
    eventTypes: list[EventTypeName] = Field(min_length=1, max_length=20)
    description: str = Field("", max_length=200)
    format: Literal["standard", "chat"] = Field(
        "standard",
        description="`standard`: Standard Webhooks, signed; `chat`: `{\"text\"}` for Slack or "
        "Mattermost incoming webhooks",
    )
    active: bool = True


class WebhookPatchIn(Strict):
    """At least one field to change."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    url: str | None = Field(None, min_length=1, max_length=2000)
    eventTypes: list[EventTypeName] | None = Field(None, min_length=1, max_length=20)
    description: str | None = Field(None, max_length=200)
    format: Literal["standard", "chat"] | None = None
    active: bool | None = None
