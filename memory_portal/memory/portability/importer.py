"""Import an export (SPEC §3.5): the checked file is written in one transaction under the
project's lock, inserting only what is not there yet, ids kept or remapped stably."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from .. import counters
from ..access import require_administrator
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError
from ..models import (
    Agent,
    Application,
    AuditEvent,
    Kind,
    Membership,
    MemorySetting,
    Note,
    Project,
    Recovery,
    Repository,
    Status,
    live_in_place_q,
    refused_content_q,
)
from ..validation import day_row_identity, stamp_identity
from . import format as fmt
from .checks import CheckBudget, ImportInvalid, check, max_lines, parse, too_many_lines


@dataclass
class ImportReport:
    project: str
    created_project: bool = False
    remapped: bool = False
    counts: dict[str, int] = field(default_factory=dict)  # inserted, by record type
    unchanged: dict[str, int] = field(default_factory=dict)  # already there, by record type
    members: list[tuple[str, str]] = field(default_factory=list)  # (username, role) added


@dataclass(frozen=True)
class MemberGrant:
    """A member line of the file: the role it would give `username` in a new project, and
    whether an account of that name is here (none: nobody to give it to)."""

    username: str
    role: str
    account: bool


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def _remapped_id(old: str, project_slug: str) -> str:
    """A stable new id for `old` in project `project_slug`: the same file imported twice into
    the same project maps to the same ids, which is what keeps the import idempotent."""
    prefix = old.split("_", 1)[0]
    number = int.from_bytes(hashlib.sha256(f"{project_slug}\n{old}".encode()).digest()[:17])
    tail = "".join(_CROCKFORD[(number >> (5 * i)) & 31] for i in range(26))
    return f"{prefix}_{tail}"


VECTOR_BATCH = 64  # notes embedded per step of ImportJob.embed


class ImportJob:
    """An import in its three phases, so that a caller can show progress between them:
    the constructor reads and checks the whole file (ImportInvalid lists every bad line;
    nothing is written), `embed()` computes the notes' vectors before any lock is taken,
    yielding `(done, total)` after each batch, and `write()` inserts what is not there yet in
    one transaction under the project's lock. Superusers only (`actor=None` is the operator
    running a command)."""

    def __init__(
        self,
        *,
        actor: Actor | None,
        lines: Iterable[str],
        project_slug: str | None,
        grant_members: bool = False,
    ):
        if actor is not None:
            require_administrator(actor, "import a project")
        self.actor = actor
        self.grant_members = grant_members
        budget = CheckBudget()
        records, errors = parse(lines, budget)
        check(records, errors, budget)
        header = next((r for _, r in records if isinstance(r, fmt.HeaderLine)), None)
        if header is not None and not errors:
            # Only a file whose every value passed the gate is looked up in the database (a
            # NUL in a username would fail the query itself).
            slug = project_slug or header.project
            new = not Project.objects.filter(slug=slug).exists()
            errors.extend(_credit_problems(records, slug, members_listed=new))
        if errors:
            raise ImportInvalid(sorted(errors))
        self.header = header
        self.slug = project_slug or header.project
        self.remap = self.slug != header.project
        self.line_count = len(records)
        self.by_type: dict[type, list] = {}
        for _, r in records:
            self.by_type.setdefault(type(r), []).append(r)
        self.vectors: tuple[dict[str, bytes], str] = ({}, "")
        from ..services.vectors import current_provider, note_text

        self._texts = list(
            dict.fromkeys(
                note_text(n.summary, n.content)
                for n in self.by_type.get(fmt.NoteLine, [])
                if n.kind != Kind.DAY
            )
        )
        self._embedder = current_provider() if self._texts else None
        self.to_embed = len(self._texts) if self._embedder is not None else 0  # vectors to compute

    def lines_by_type(self) -> dict[str, int]:
        """How many lines of each record type the file holds (`note`, `recovery`, …)."""
        return {fmt.line_type(t): len(rows) for t, rows in self.by_type.items()}

    def project_exists(self) -> bool:
        return Project.objects.filter(slug=self.slug).exists()

    def members(self) -> list[MemberGrant]:
        """The file's member lines, for the person importing to see before anything is
        written: into a new project each role is given (once they confirm: `grant_members`);
        into an existing one none is (its members are its managers' to change)."""
        lines = self.by_type.get(fmt.MemberLine, [])
        User = get_user_model()
        here = set(
            User.objects.filter(
                **{f"{User.USERNAME_FIELD}__in": [m.username for m in lines]}
            ).values_list(User.USERNAME_FIELD, flat=True)
        )
        return [MemberGrant(m.username, m.role, m.username in here) for m in lines]

    def embed(self) -> Iterator[tuple[int, int]]:
        """The notes' vectors, batch by batch, outside any transaction (never under the
        project's lock): `(done, to_embed)` after each batch; nothing when no embedder runs."""
        from ..services.vectors import embed_texts

        found: dict[str, bytes] = {}
        provider = ""
        for start in range(0, self.to_embed, VECTOR_BATCH):
            batch = self._texts[start : start + VECTOR_BATCH]
            blobs, name = embed_texts(batch, self._embedder)
            provider = provider or name
            found.update((t, b) for t, b in zip(batch, blobs, strict=True) if b is not None)
            yield start + len(batch), self.to_embed
        self.vectors = (found, provider)

    def run(self) -> ImportReport:
        """Every phase without pausing between them: the vectors, then the write."""
        for _ in self.embed():
            pass
        return self.write()

    def write(self) -> ImportReport:
        """One transaction under the project's lock: what is not there yet is inserted —
        importing the same file twice changes nothing."""
        from ..services.change import project_change

        slug, remap, by_type, header = self.slug, self.remap, self.by_type, self.header

        def new_id(old: str | None) -> str | None:
            return _remapped_id(old, slug) if remap and old else old

        report = ImportReport(project=slug, remapped=remap)
        with transaction.atomic():
            project = Project.objects.filter(slug=slug).first()
            grants = [] if project is not None else [m for m in self.members() if m.account]
            if grants and not self.grant_members:
                raise members_unconfirmed(slug, grants)
            if project is None:
                source = by_type[fmt.ProjectLine][0]
                project = Project.objects.create(
                    slug=slug, name=source.name, created_at=source.createdAt
                )
                MemorySetting.objects.create(
                    project=project, enabled=by_type[fmt.SettingLine][0].enabled
                )
                report.created_project = True
            with project_change(project, actor=self.actor) as change:
                _import_rows(
                    project, by_type, new_id, report, vectors=self.vectors, grants=grants
                )
                if sum(report.counts.values()):
                    change.changed(
                        wrote_note=bool(report.counts.get("note")),
                        **counters.recounted(project.pk),
                    )
                change.audit(
                    AuditAction.MEMORY_IMPORT,
                    target=slug,
                    details={
                        "from_project": header.project,
                        "format_version": header.version,
                        "remapped": remap,
                        "created_project": report.created_project,
                        "inserted": report.counts,
                        "unchanged": report.unchanged,
                        "members_added": [
                            {"username": name, "role": role} for name, role in report.members
                        ],
                    },
                )
        return report


def members_unconfirmed(slug: str, grants: list[MemberGrant]) -> MemoryPortalError:
    named = ", ".join(f"{m.username} ({m.role})" for m in grants[:20])
    more = f" and {len(grants) - 20} more" if len(grants) > 20 else ""
    return MemoryPortalError(
        "import_members_unconfirmed",
        f"The file makes {len(grants)} people members of the new project {slug}: "
        f"{named}{more}. Nothing was imported.",
        field="grantMembers",
    )


def project_import(
    *,
    actor: Actor | None,
    lines: Iterable[str],
    project_slug: str | None = None,
    grant_members: bool = False,
) -> ImportReport:
    """Import an export (an ImportJob run through): the whole file is validated first
    (ImportInvalid lists every bad line; nothing is written), then one transaction under the
    project's lock inserts what is not there yet — importing the same file twice changes
    nothing. Into the project the file names, ids are kept; into another (`project_slug`),
    every id is remapped, stably. Users are matched by username (none: left empty);
    repositories by slug; runs are not part of the format, so the notes keep their run ids as
    text (producer status `unknown`). Member lines give their roles only to a project the
    import creates, and only with `grant_members` (the person importing has seen them:
    ImportJob.members); into an existing project they are never applied. Superusers only
    (`actor=None`: the operator)."""
    return ImportJob(
        actor=actor, lines=lines, project_slug=project_slug, grant_members=grant_members
    ).run()


def decoded_lines(raw_lines: Iterable[bytes]) -> list[str]:
    """An uploaded file's lines as text; a line that is not UTF-8 refuses the file by its
    number (ImportInvalid), as any other bad line, and so does a file of more lines than
    IMPORT_MAX_LINES (empty ones count: reading them is the cost) once it has read one more."""
    lines: list[str] = []
    most = max_lines()
    for number, raw in enumerate(raw_lines, start=1):
        if number > most:
            raise too_many_lines(number)
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ImportInvalid([(number, "not UTF-8 text")]) from None
    return lines


def _credit_problems(records: list, slug: str, *, members_listed: bool) -> list[tuple[int, str]]:
    """People the file credits (a veto, an authorship, a forget) must be members of the project
    the file goes into — already, or, into a new project (`members_listed`), through one of its
    member lines — or administrators. A username nobody has here is left uncredited."""
    credited = []
    for number, r in records:
        if isinstance(r, fmt.NoteLine):
            credited += [
                (number, "vetoedBy", r.vetoedBy),
                (number, "provenance.createdByUser", r.provenance.createdByUser),
            ]
        elif isinstance(r, fmt.RecoveryLine):
            credited.append((number, "forgottenByUser", r.forgottenByUser))  # fmt: skip
    credited = [(n, where, name) for n, where, name in credited if name]
    if not credited:
        return []
    User = get_user_model()
    field_name = User.USERNAME_FIELD
    found = {
        name: (pk, admin)
        for name, pk, admin in User.objects.filter(
            **{f"{field_name}__in": {name for _, _, name in credited}}
        ).values_list(field_name, "pk", "is_superuser")
    }
    members = set(
        Membership.objects.filter(
            project__slug=slug, user_id__in=[pk for pk, _ in found.values()]
        ).values_list("user_id", flat=True)
    )
    listed = (
        {r.username for _, r in records if isinstance(r, fmt.MemberLine)}
        if members_listed
        else set()
    )
    problems = []
    for number, where, name in credited:
        if name not in found:
            continue
        pk, admin = found[name]
        if not (admin or pk in members or name in listed):
            problems.append((number, f"{where}: {name} is not a member of project {slug}; add "
                             "them to it first"
                             + (", or list them in a member line of the file"
                                if members_listed else "")))  # fmt: skip
    return problems


def _count(report: ImportReport, kind: str, inserted: bool) -> None:
    bucket = report.counts if inserted else report.unchanged
    bucket[kind] = bucket.get(kind, 0) + 1


def _import_rows(
    project: Project,
    by_type: dict,
    new_id,
    report: ImportReport,
    *,
    vectors: tuple[dict[str, bytes], str] = ({}, ""),
    grants: list[MemberGrant] = (),
) -> None:
    from ..services.vectors import note_text

    User = get_user_model()
    users = dict(User.objects.values_list(User.USERNAME_FIELD, "pk"))
    repositories = dict(Repository.objects.values_list("slug", "pk"))
    apps = {}
    for line in by_type.get(fmt.ApplicationLine, []):
        app, created = Application.objects.get_or_create(
            project=project,
            slug=line.slug,
            defaults={"name": line.name, "created_at": line.createdAt},
        )
        apps[line.slug] = app.pk
        _count(report, "application", created)
    # Roles only for a project the import creates, as confirmed (`grants`); other member lines
    # (an existing project, no account of that name here) change nothing.
    for grant in grants:
        Membership.objects.create(user_id=users[grant.username], project=project, role=grant.role)
        report.members.append((grant.username, grant.role))
        _count(report, "member", True)
    for _ in range(len(by_type.get(fmt.MemberLine, [])) - len(grants)):
        _count(report, "member", False)
    for line in by_type.get(fmt.AgentLine, []):
        agent_id = new_id(line.id)
        existing = Agent.objects.filter(pk=agent_id).first()
        if existing is not None and existing.project_id != project.pk:
            raise MemoryPortalError(
                "memory_invalid",
                f"Agent {agent_id} belongs to another project.",
                field="agent",
                hint="Import into a new project with --project to remap the ids.",
            )
        if existing is None:
            Agent.objects.create(
                id=agent_id,
                project=project,
                application_id=apps.get(line.application),
                **fmt.model_values(line, fmt.AGENT_FIELDS),
            )
        _count(report, "agent", existing is None)
    notes = by_type.get(fmt.NoteLine, [])
    note_ids = [new_id(n.id) for n in notes]
    present = dict(Note.objects.filter(pk__in=note_ids).values_list("pk", "project_id"))
    if any(p != project.pk for p in present.values()):
        raise MemoryPortalError(
            "memory_invalid",
            "Some notes of the file belong to another project.",
            field="note",
            hint="Import into a new project with --project to remap the ids.",
        )
    fresh = [n for n, i in zip(notes, note_ids, strict=True) if i not in present]
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    stored = Note.objects.filter(project=project).count()
    if stored + len(fresh) > cap:
        raise MemoryPortalError(
            "memory_project_full",
            f"{project.slug} stores {stored} notes; {len(fresh)} more exceed its {cap}.",
        )
    rows = []
    for line in fresh:
        note = Note(
            id=new_id(line.id),
            project=project,
            application_id=apps.get(line.application),
            owner_agent_id=new_id(line.ownerAgentId),
            tags_text=f"|{'|'.join(line.tags)}|" if line.tags else "",
            vetoed_by_id=users.get(line.vetoedBy),
            created_by_user_id=users.get(line.provenance.createdByUser),
            **fmt.model_values(line, fmt.NOTE_FIELDS),
            **fmt.model_values(line.provenance, fmt.PROVENANCE_FIELDS),
        )
        if line.evidence is not None:
            note.evidence_repository_id = repositories.get(line.evidence.repository)
            for attribute, value in fmt.model_values(line.evidence, fmt.EVIDENCE_FIELDS).items():
                setattr(note, attribute, value)
        stamp_identity(note)
        if note.kind == Kind.DAY:
            note.place_key = day_row_identity(owner_agent_id=note.owner_agent_id, day=note.day)
        note.embedding = vectors[0].get(note_text(note.summary, note.content))
        note.embedding_model = vectors[1] if note.embedding is not None else ""
        rows.append(note)
    _refuse_clashes(project, rows)
    Note.objects.bulk_create(rows, batch_size=500)
    for line in fresh:
        if line.supersedesId or line.supersededById:
            Note.objects.filter(pk=new_id(line.id)).update(
                supersedes_id=new_id(line.supersedesId),
                superseded_by_id=new_id(line.supersededById),
            )
    report.counts["note"] = len(rows)
    report.unchanged["note"] = len(notes) - len(rows)
    fresh_ids = {n.pk for n in rows}
    for line in by_type.get(fmt.RecoveryLine, []):
        rec_id = new_id(line.id)
        inserted = not Recovery.objects.filter(
            Q(pk=rec_id) | Q(note_id=new_id(line.noteId))
        ).exists()
        if inserted:
            Recovery.objects.create(
                id=rec_id,
                project=project,
                note_id=new_id(line.noteId),
                forgotten_by_user_id=users.get(line.forgottenByUser),
                **fmt.model_values(line, fmt.RECOVERY_FIELDS),
            )
        _count(report, "recovery", inserted)
    # A note's history comes with it the first time only (events have no public id).
    events = [
        AuditEvent(
            project=project,
            project_ref=project.slug,
            note_ref=new_id(line.noteId),
            recovery_ref=new_id(line.recoveryId) or "",
            details={**line.details, "imported_event": line.id},
            **fmt.model_values(line, fmt.EVENT_FIELDS),
        )
        for line in by_type.get(fmt.EventLine, [])
        if new_id(line.noteId) in fresh_ids
    ]
    AuditEvent.objects.bulk_create(events, batch_size=1000)
    report.counts["event"] = len(events)


def _refuse_clashes(project: Project, rows: list[Note]) -> None:
    """Imported notes meet the project's own rules: no second live copy of a note, and no
    content a person vetoed, rejected or forgot here comes back live."""
    if not rows:
        return
    active = [n for n in rows if n.status == Status.ACTIVE]
    clash = (
        Note.objects.filter(project=project)
        .filter(live_in_place_q([n.place_key for n in active]))
        .values_list("pk", flat=True)
        .first()
    )
    if clash is not None:
        raise MemoryPortalError(
            "memory_duplicate_active", f"A note of the file is already live here as {clash}."
        )
    refused = (
        Note.objects.filter(project=project)
        .filter(refused_content_q([n.content_key for n in active]))
        .values_list("pk", flat=True)
        .first()
    )
    if refused is not None:
        raise MemoryPortalError(
            "memory_vetoed",
            f"A live note of the file has content a person removed here ({refused}).",
        )
