"""An import file read and checked whole before anything is written (SPEC §3.5): every line
against its model, then the rules of the file (one header first, references inside the file,
the limits and the secret scan of the write protocol)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from django.conf import settings
from pydantic import BaseModel, ValidationError

from ..errors import MemoryPortalError
from ..models import Kind, Scope, Target
from ..validation import CONTENT_MAX, DAY_ROW_MAX, FACT_MAX, check_no_secret
from .format import (
    LINE,
    AgentLine,
    ApplicationLine,
    EndLine,
    EventLine,
    HeaderLine,
    NoteLine,
    ProjectLine,
    RecoveryLine,
    SettingLine,
    line_type,
)


class ImportInvalid(Exception):
    """The file was refused before anything was written; `errors` is every bad line."""

    def __init__(self, errors: list[tuple[int, str]]):
        super().__init__(f"{len(errors)} bad line(s)")
        self.errors = errors


def parse(lines: Iterable[str]) -> tuple[list[tuple[int, BaseModel]], list[tuple[int, str]]]:
    records: list[tuple[int, BaseModel]] = []
    errors: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            errors.append((number, f"not JSON: {exc.msg}"))
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


def check(records: list[tuple[int, BaseModel]], errors: list[tuple[int, str]]) -> None:
    """Whole-file rules: the header first, one project, references inside the file, the
    limits and the secret scan of the write protocol."""
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
        check_no_secret(content=r.content, summary=r.summary, archiveReason=r.archiveReason)
    except MemoryPortalError as err:
        problems.append(err.message)
    return problems
