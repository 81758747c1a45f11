"""An import file read and checked whole before anything is written (SPEC §3.5): every line
against its model, then every value of every line through the live API's gate (text the
database can store and no secret, times within the calendar in UTC, integers within their
columns, tags as the API takes them), then the rules of the file against itself (one header
first, unique ids, references inside the file, no note superseding itself, one recovery per
note, one live copy of a note in its place, no live copy of content a person decided against)
and the limits of the write protocol. Every problem names its line and field."""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from django.conf import settings
from pydantic import BaseModel, ValidationError

from .. import secrets
from ..errors import MemoryPortalError
from ..models import REASON_VETOED, Kind, Scope, Status, Target, Trust
from ..validation import (
    CONTENT_MAX,
    DAY_ROW_MAX,
    FACT_MAX,
    content_identity,
    content_key_text,
    normalize_tags,
    unstorable,
)
from .format import (
    LINE,
    AgentLine,
    ApplicationLine,
    EndLine,
    EventLine,
    HeaderLine,
    MemberLine,
    NoteLine,
    ProjectLine,
    RecoveryLine,
    SettingLine,
    line_type,
)

# Bounds on the check itself, so that no file — however built — holds a worker for long or
# grows it without bound: the lines of a file (a full project's export is far below it), the
# nesting of one line (an export nests 3 deep), the problems collected before the check stops
# (the answer lists SHOWN), and the seconds the check may take.
MAX_DEPTH = 400
MAX_PROBLEMS = 1000
MAX_LINE_CHARS = 64 * 1024  # a note line of 8,000 characters written as \u escapes: 48 KB
LIMIT_HINTS = {
    "lines": "Split the file, or raise MEMORY_PORTAL_IMPORT_MAX_LINES for a larger project.",
    "depth": "An export nests a few levels deep; send a file made by memory_export.",
    "time": "Send a file made by memory_export, or raise MEMORY_PORTAL_IMPORT_CHECK_SECONDS.",
}


class ImportInvalid(Exception):
    """The file was refused before anything was written; `errors` is every bad line, as
    `(line number or None for the file as a whole, message)`. `limit` names the check's own
    bound the file hit (`lines`, `depth`, `time`: LIMIT_HINTS), when that is why."""

    SHOWN = 200  # problems listed in an answer (the API's, the dashboard's)

    def __init__(self, errors: list[tuple[int | None, str]], *, limit: str | None = None):
        super().__init__(f"{len(errors)} bad line(s)")
        self.errors = errors
        self.limit = limit

    def shown(self) -> list[tuple[int | None, str]]:
        return [(number or None, message) for number, message in self.errors[: self.SHOWN]]

    def refusal(self) -> MemoryPortalError:
        if self.limit is not None:
            return MemoryPortalError(
                "import_limit",
                f"{self.errors[-1][1].capitalize()}; nothing was imported.",
                hint=LIMIT_HINTS[self.limit],
                field="body",
                reason=self.limit,
            )
        count, shown = len(self.errors), min(len(self.errors), self.SHOWN)
        counted = f"{MAX_PROBLEMS:,}+" if count >= MAX_PROBLEMS else str(count)
        return MemoryPortalError(
            "memory_invalid",
            f"{counted} problem(s) in the file; nothing was imported"
            + (f" (the first {shown} are listed)." if count > shown else "."),
            hint="Fix the listed lines and send the whole file again.",
            field="body",
        )


class CheckBudget:
    """The check's clock and its tally of problems: `tick()` between lines refuses the file
    (ImportInvalid, limit `time`) once MEMORY_PORTAL_IMPORT_CHECK_SECONDS have passed; `full`
    says MAX_PROBLEMS were found, so the check stops collecting."""

    def __init__(self, seconds: float | None = None):
        seconds = settings.MEMORY_PORTAL["IMPORT_CHECK_SECONDS"] if seconds is None else seconds
        self.seconds = seconds
        self.ends = time.monotonic() + seconds

    def tick(self, errors: list) -> None:
        if time.monotonic() > self.ends:
            errors.append((None, f"the check took longer than {self.seconds:g} seconds"))
            raise ImportInvalid(errors, limit="time")

    @staticmethod
    def full(errors: list) -> bool:
        return len(errors) >= MAX_PROBLEMS


def max_lines() -> int:
    return settings.MEMORY_PORTAL["IMPORT_MAX_LINES"]


def too_many_lines(number: int) -> ImportInvalid:
    return ImportInvalid(
        [(number, f"the file has more than {max_lines():,} lines")], limit="lines"
    )


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def nested_deeper(raw: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text `raw` opens more than `limit` arrays and objects inside each other
    (outside its strings): such a line is refused before it is decoded, which would recurse
    that deep. Only a line with that many brackets in it is scanned."""
    if raw.count("[") + raw.count("{") <= limit:
        return False
    depth = 0
    for bracket in _BRACKET.finditer(_JSON_STRING.sub("", raw)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def parse(
    lines: Iterable[str], budget: CheckBudget | None = None
) -> tuple[list[tuple[int, BaseModel]], list[tuple[int, str]]]:
    """Each line read against its model: (the records, the problems). Within the check's
    bounds: at most IMPORT_MAX_LINES lines and MAX_DEPTH levels in a line (else ImportInvalid
    with that limit), and collecting stops at MAX_PROBLEMS problems."""
    budget = budget or CheckBudget()
    records: list[tuple[int, BaseModel]] = []
    errors: list[tuple[int, str]] = []
    most = max_lines()
    for number, raw in enumerate(lines, start=1):
        if number > most:
            raise too_many_lines(number)
        if number % 100 == 0:
            budget.tick(errors)
        if not raw.strip() or budget.full(errors):
            continue
        if nested_deeper(raw):
            errors.append((number, f"nested more than {MAX_DEPTH} levels deep"))
            raise ImportInvalid(errors, limit="depth")
        if len(raw) > MAX_LINE_CHARS:
            errors.append((number, f"longer than {MAX_LINE_CHARS:,} characters"))
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append((number, f"not JSON: {exc.msg}"))
            continue
        except ValueError:  # valid JSON Python will not read: an integer of 4,300+ digits
            errors.append((number, "a number too long to read"))
            continue
        try:
            records.append((number, LINE.validate_python(data)))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'][1:]) or 'type'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            errors.append((number, problems))
    return records, errors


INT_MAX = 2**31 - 1  # an integer column
BIG_INT_MAX = 2**63 - 1  # a revision and the exporter's event ids (bigint)
BIG_INTS = {"revision", "id"}


def value_problems(field: str, value: object) -> Iterator[str]:
    """What the live API would refuse in one value of a line, at any depth: text the database
    cannot store or that looks like a secret, a time that leaves the calendar once converted to
    UTC, an integer outside its column."""
    if isinstance(value, BaseModel):
        for name, inner in value:
            yield from value_problems(f"{field}.{name}" if field else name, inner)
    elif isinstance(value, str):
        reason = unstorable(value)
        if reason is not None:
            yield f"{field} {reason}"
        else:
            rule = secrets.find_secret(value)
            if rule is not None:
                yield f"{field} looks like a secret (rule: {rule})"
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from value_problems(f"{field}.{key}", key)
            yield from value_problems(f"{field}.{key}", inner)
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            yield from value_problems(f"{field}[{index}]", inner)
    elif isinstance(value, datetime):
        try:
            value.astimezone(UTC) if value.utcoffset() is not None else value.replace(tzinfo=UTC)
        except OverflowError:
            yield f"{field} lies outside the calendar once converted to UTC"
    elif isinstance(value, int) and not isinstance(value, bool):
        top = BIG_INT_MAX if field.rsplit(".", 1)[-1] in BIG_INTS else INT_MAX
        if not -top - 1 <= value <= top:
            yield f"{field} is out of range"


def _refused(r: NoteLine) -> bool:
    """Content a person decided against: forgotten, rejected or vetoed (SPEC §2.3)."""
    return (
        r.status == Status.FORGOTTEN
        or r.trust == Trust.REJECTED
        or (r.status == Status.ARCHIVED and r.archiveReason == REASON_VETOED)
    )


def _in_file_problems(records: list[tuple[int, BaseModel]]) -> Iterator[tuple[int, str]]:
    """The file against itself: ids unique per kind of line, no note superseding itself, one
    recovery per note, one live note per place and content, and no live copy of content
    that the file itself says was forgotten, rejected or vetoed."""
    keys = {
        AgentLine: "id", ApplicationLine: "slug", MemberLine: "username", NoteLine: "id",
        RecoveryLine: "id",
    }  # fmt: skip
    for kind, attribute in keys.items():
        seen = Counter(getattr(r, attribute) for _, r in records if isinstance(r, kind))
        for number, r in records:
            value = getattr(r, attribute, None)
            if isinstance(r, kind) and seen[value] > 1:
                yield number, f"{attribute}: {value} appears {seen[value]} times in the file"
    recovered = Counter(r.noteId for _, r in records if isinstance(r, RecoveryLine))
    for number, r in records:
        if isinstance(r, RecoveryLine) and recovered[r.noteId] > 1:
            yield number, f"noteId: note {r.noteId} has {recovered[r.noteId]} recoveries"
    places: dict[str, list[int]] = defaultdict(list)
    contents: dict[str, list[tuple[int, NoteLine]]] = defaultdict(list)
    for number, r in records:
        if not isinstance(r, NoteLine):
            continue
        if r.id in (r.supersedesId, r.supersededById):
            yield number, f"supersedesId: note {r.id} cannot supersede itself"
        text = content_key_text(r.content)
        contents[text].append((number, r))
        if r.status == Status.ACTIVE and r.kind != Kind.DAY:
            place = content_identity(
                kind=r.kind, scope=r.scope, target=r.target, day=r.day,
                application_id=r.application, owner_agent_id=r.ownerAgentId, content=r.content,
            )  # fmt: skip
            places[place].append(number)
    for numbers in places.values():
        for number in numbers[1:]:
            yield number, f"content: the same live note as line {numbers[0]}"
    for same in contents.values():
        refused = [number for number, r in same if _refused(r)]
        if not refused:
            continue
        for number, r in same:
            if r.status == Status.ACTIVE and not _refused(r):
                yield (
                    number,
                    (
                        f"content: live again, though line {refused[0]} says a person forgot, "
                        "rejected or vetoed the same content"
                    ),
                )


def check(
    records: list[tuple[int, BaseModel]],
    errors: list[tuple[int, str]],
    budget: CheckBudget | None = None,
) -> None:
    """Whole-file rules: every value through the gate, the header first, one project, the file
    against itself, references inside the file, the limits of the write protocol. Within the
    check's time (CheckBudget); once MAX_PROBLEMS are found the rest is not looked at."""
    budget = budget or CheckBudget()
    for number, r in records:
        budget.tick(errors)
        if budget.full(errors):
            return
        errors.extend((number, problem) for problem in value_problems("", r))
    errors.extend(_in_file_problems(records))
    if not records or not isinstance(records[0][1], HeaderLine):
        errors.append((records[0][0] if records else 1, "the first line must be the header"))
    apps = {r.slug for _, r in records if isinstance(r, ApplicationLine)}
    agents = {r.id for _, r in records if isinstance(r, AgentLine)}
    notes = {r.id for _, r in records if isinstance(r, NoteLine)}
    ends = [r for _, r in records if isinstance(r, EndLine)]
    singles = (HeaderLine, ProjectLine, SettingLine, EndLine)
    for kind in singles:
        found = [n for n, r in records if isinstance(r, kind)]
        if len(found) != 1:
            errors.append(
                (found[1] if len(found) > 1 else 0, f"exactly one {line_type(kind)} line needed")
            )
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    if len(notes) > cap:
        errors.append((0, f"{len(notes)} notes: more than the {cap} a project stores"))
    for number, r in records:
        if isinstance(r, AgentLine) and r.application and r.application not in apps:
            errors.append((number, f"application {r.application} is not in the file"))
        elif isinstance(r, NoteLine):
            errors.extend((number, m) for m in _note_problems(r, apps, agents, notes))
        elif isinstance(r, RecoveryLine | EventLine) and r.noteId not in notes:
            errors.append((number, f"note {r.noteId} is not in the file"))
    if ends:
        counted = {
            kind: sum(1 for _, r in records if getattr(r, "type", None) == kind)
            for kind in ends[0].counts
        }
        if counted != ends[0].counts:
            errors.append((0, f"the end line counts {ends[0].counts}, the file has {counted}"))


def _note_problems(r: NoteLine, apps: set, agents: set, notes: set) -> list[str]:
    problems = []
    if (r.scope == Scope.APPLICATION) != (r.application is not None):
        problems.append("application is set exactly for scope application")
    elif r.application and r.application not in apps:
        problems.append(f"application {r.application} is not in the file")
    if (r.scope == Scope.AGENT) != (r.ownerAgentId is not None):
        problems.append("ownerAgentId is set exactly for scope agent")
    elif r.ownerAgentId and r.ownerAgentId not in agents:
        problems.append(f"agent {r.ownerAgentId} is not in the file")
    if (r.target == Target.DAILY) != (r.day is not None) or (
        r.kind == Kind.DAY and r.target != Target.DAILY
    ):
        problems.append("day is set exactly for target daily; kind day is daily")
    limit = DAY_ROW_MAX if r.kind == Kind.DAY else FACT_MAX if r.scope == "agent" else CONTENT_MAX
    if len(r.content) > limit:
        problems.append(f"content is longer than {limit} characters")
    for ref in (r.supersedesId, r.supersededById):
        if ref and ref not in notes:
            problems.append(f"note {ref} is not in the file")
    try:
        normalize_tags(r.tags)
    except MemoryPortalError as err:
        problems.append(f"tags: {err.message}")
    return problems
