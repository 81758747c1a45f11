"""Input checks shared by every write path (SPEC §7 limits), run before any lock is taken."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import UTC, date, datetime

from . import secrets
from .errors import MemoryPortalError, invalid

CONTENT_MAX = 2000
FACT_MAX = 500
SUMMARY_MAX = 240
TAGS_MAX = 8
TAG_MAX = 32
PAYLOAD_MAX_BYTES = 8000
DAY_LINE_MAX = 300
DAY_ROW_MAX = 8000
ARCHIVE_REASON_MAX = 500
REVIEW_REASON_MAX = 300  # why a person rejected or vetoed a note: one line
SCRATCHPAD_TEXT_MAX = 1000
RECALL_QUERY_MAX = 4000
TASK_TEXT_MAX = 2000  # a run's task: its title and description together
TASK_KEY_MAX = 64

TAG_RE = re.compile(r"^[a-z0-9][a-z0-9._:/-]*$")


def normalize_text(text: str) -> str:
    """Line endings unified and outer whitespace trimmed; inner text kept exactly."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def content_key_text(text: str) -> str:
    """The content as the never-resurrect rule compares it (SPEC §2.3): Unicode NFKC,
    case-folded, format characters (zero-width spaces, direction marks, soft hyphens) removed,
    every run of whitespace one space, trimmed. Two texts a reader cannot tell apart map to
    the same key."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    # No ASCII character is a format character: most notes skip the scan character by character.
    visible = (
        folded
        if folded.isascii()
        else "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    )
    return " ".join(visible.split())


def content_key(text: str) -> str:
    """The stored, indexed digest of `content_key_text` (one per note, any kind or place)."""
    return hashlib.sha256(content_key_text(text).encode()).hexdigest()


NAME_MAX = 200  # the name of a project, an application or an agent
SLUG_MAX = 64
# The id of a project, an application or a repository (Django's slug), as URLs, tokens and
# export files name them: these characters, 1 to SLUG_MAX of them. The services check it
# (`services/projects.py`); the API's schemas and the export format document it as a pattern.
SLUG_CHARS = re.compile(r"[-a-zA-Z0-9_]+")
SLUG_PATTERN = f"^{SLUG_CHARS.pattern}$"


def is_slug(value: object) -> bool:
    return isinstance(value, str) and len(value) <= SLUG_MAX and bool(SLUG_CHARS.fullmatch(value))


PATH_MAX = 1000  # a repository's path on the server


def unstorable(value: str) -> str | None:
    """Why `value` is not text the database can store, or None. NUL characters are refused by
    PostgreSQL; a lone surrogate (`"\\ud800"`, a valid JSON escape) is not a Unicode character
    at all, so it cannot be encoded as UTF-8 for either database."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode text (a lone surrogate, U+{ord(value[exc.start]):04X})"
    return None


def reject_unstorable(field: str, value: str) -> str:
    """Refuse text that cannot be stored (NUL, lone surrogates) with a clear error naming the
    field, instead of a server failure."""
    reason = unstorable(value)
    if reason is not None:
        raise invalid(field, f"{field} {reason}.", hint="Send valid Unicode text and retry.")
    return value


def _unprintable_in_line(value: str) -> str | None:
    """The first control or format character of a one-line field (a name, a tag, a task key),
    as U+XXXX, or None: such a field is shown in lists and menus, where a newline, a tab or a
    direction override would change what a reader sees."""
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Cf"):
            return f"U+{ord(ch):04X}"
    return None


def gate(
    field: str,
    value: object,
    *,
    max_len: int,
    line: bool = False,
    required: bool = True,
    too_long_code: str | None = None,
) -> str:
    """The one check of every free-text field a person, an agent or a file sets (SPEC §2.9):
    a string the database can store (no NUL, no lone surrogate); with `line`, one line without
    control or format characters; trimmed (line endings unified); not empty unless not
    `required` (then "" is allowed); at most `max_len` characters (`too_long_code` replaces
    `memory_invalid` where the API names its own code); and no secret (`secret_in_memory`),
    scanned as sent, before any case folding."""
    if not isinstance(value, str):
        raise invalid(field, f"{field} must be a string.")
    text = normalize_text(reject_unstorable(field, value))
    if line:
        bad = _unprintable_in_line(text)
        if bad is not None:
            raise invalid(
                field,
                f"{field} is one line of visible text; it holds {bad}.",
                hint=f"Send {field} without control or formatting characters.",
            )
    if not content_key_text(text):
        if not required and not text:
            return ""
        raise invalid(
            field,
            f"{field} must not be empty"
            + (" (it holds only invisible characters)." if text else "."),
            hint=f"Send {field} with visible text.",
        )
    if len(text) > max_len:
        if too_long_code:
            raise MemoryPortalError(
                too_long_code, f"{field} has {len(text)} characters; the limit is {max_len}."
            )
        raise invalid(
            field,
            f"{field} has {len(text)} characters; the limit is {max_len}.",
            hint=f"Shorten {field} to {max_len} characters.",
        )
    check_no_secret(**{field: text})
    return text


def require_name(field: str, value: object, *, max_len: int = NAME_MAX) -> str:
    """A display name (projects, applications, agents): one line of visible text."""
    return gate(field, value, max_len=max_len, line=True)


def require_text(
    field: str, value: object, *, max_len: int, too_long_code: str | None = None
) -> str:
    """A free text of one or more lines (content, a fact, a day line, a reason, an item)."""
    return gate(field, value, max_len=max_len, too_long_code=too_long_code)


def review_reason(value: object) -> str:
    """The optional reason of a reject or a veto: one line, gated like every text field."""
    return gate(
        "reason", "" if value is None else value, max_len=REVIEW_REASON_MAX, line=True,
        required=False,
    )


def task_text(title: str, description: str) -> str:
    """A run's task as recall scores it: the title, then the description."""
    return "\n".join(part for part in (title, description) if part)


def run_task(title: object, description: object) -> tuple[str, str]:
    """A run's task as stored, (title, description): both optional together; a description
    needs a title; the title is one line; at most TASK_TEXT_MAX characters together; text the
    database can store and no secret (the task is shown on the run page and fed to recall)."""
    title_text = gate("task.title", "" if title is None else title, max_len=TASK_TEXT_MAX,
                      line=True, required=False)  # fmt: skip
    description_text = gate("task.description", "" if description is None else description,
                            max_len=TASK_TEXT_MAX, required=False)  # fmt: skip
    if not title_text and not description_text:
        return "", ""
    if not content_key_text(title_text):
        raise invalid(
            "task.title",
            "task.title must not be empty when a task is given.",
            hint="Send the task's title (one line), and its description if there is one.",
        )
    size = len(title_text) + len(description_text)
    if size > TASK_TEXT_MAX:
        raise invalid(
            "task",
            f"task has {size} characters (title and description together); the limit is "
            f"{TASK_TEXT_MAX}.",
            hint="Shorten the description to what this run must do; link the ticket for the rest.",
        )
    return title_text, description_text


def future_expiry(value: object, *, now: datetime, field: str = "expiresAt") -> datetime:
    """An expiry as stored: in UTC, in the future. A time without a UTC offset is taken as UTC
    (docs/API.md); one that cannot be expressed in UTC (year 1 or 9999 pushed past the calendar
    by its offset) is refused."""
    if not isinstance(value, datetime):
        raise invalid(field, f"{field} must be a date and time.")
    if value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    try:
        value = value.astimezone(UTC)
    except OverflowError as exc:
        raise invalid(field, f"{field} lies outside the calendar once converted to UTC.") from exc
    if value <= now:
        raise invalid(field, f"{field} must be in the future.")
    return value


def optional_summary(value: object) -> str:
    if value is None:
        return ""
    return require_text("summary", value, max_len=SUMMARY_MAX)


def normalize_tags(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise invalid("tags", "tags must be a list of strings.")
    if len(value) > TAGS_MAX:
        raise invalid("tags", f"At most {TAGS_MAX} tags; got {len(value)}.")
    tags: list[str] = []
    for raw in value:
        if not isinstance(raw, str):
            raise invalid("tags", "Every tag must be a string.")
        if not raw.strip() or len(raw.strip()) > TAG_MAX:
            raise invalid("tags", f"Tags are 1–{TAG_MAX} characters.")
        tag = gate("tags", raw, max_len=TAG_MAX, line=True).lower()
        if not TAG_RE.match(tag):
            raise invalid(
                "tags",
                "Tags use letters, digits and . _ : / - only.",
                hint="Use short labels such as data-quality or deploy.",
            )
        if tag not in tags:
            tags.append(tag)
    return tags


def tags_to_text(tags: list[str]) -> str:
    return "|" + "|".join(tags) + "|" if tags else ""


def check_payload_size(**parts: object) -> None:
    size = len(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str).encode())
    if size > PAYLOAD_MAX_BYTES:
        raise MemoryPortalError(
            "memory_payload_too_large",
            f"The write is {size} bytes once normalised; the limit is {PAYLOAD_MAX_BYTES}.",
        )


def check_no_secret(**fields: str | None) -> None:
    hit = secrets.scan_fields(dict(fields))
    if hit is not None:
        field, rule = hit
        raise MemoryPortalError(
            "secret_in_memory",
            f"{field} looks like a secret (rule: {rule}); nothing was saved.",
            field=field,
            reason=rule,
        )


def content_identity(
    *,
    kind: str,
    scope: str,
    target: str,
    day: date | None,
    application_id: int | None,
    owner_agent_id: str | None,
    content: str,
) -> str:
    """The idempotency key: the same content (compared as `content_key_text`) in the same
    place is the same note."""
    key = json.dumps(
        [
            kind,
            scope,
            target,
            day.isoformat() if day else "",
            application_id or 0,
            owner_agent_id or "",
            content_key_text(content),
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(key.encode()).hexdigest()


# A note's fields content_identity reads (its place, then its content).
IDENTITY_FIELDS = ("kind", "scope", "target", "day", "application_id", "owner_agent_id", "content")
# The place of an agent's own fact, its owner aside.
AGENT_FACT_PLACE = dict(
    kind="fact", scope="agent", target="long_term", day=None, application_id=None
)


def note_identity(note) -> str:
    """The idempotency key of an unsaved note, from its place and content."""
    return content_identity(**{name: getattr(note, name) for name in IDENTITY_FIELDS})


def agent_fact_identity(*, owner_agent_id: str, content: str) -> str:
    """The idempotency key of an agent's own fact (a v1 save, a lift from the day log)."""
    return content_identity(**AGENT_FACT_PLACE, owner_agent_id=owner_agent_id, content=content)


def stamp_identity(note) -> None:
    """Set both keys of an unsaved (or just appended-to) note: `place_key`, its identity in
    its place (a day row keeps its (agent, date) key), and `content_key`, its content alone."""
    if note.kind != "day":
        note.place_key = note_identity(note)
    note.content_key = content_key(note.content)


def day_row_identity(*, owner_agent_id: str, day: date) -> str:
    """A day row is identified by (agent, date), so appends keep its key and a second live row
    for the same date is refused by the same unique constraint."""
    return hashlib.sha256(f"day|{owner_agent_id}|{day.isoformat()}".encode()).hexdigest()
