"""What a reviewer works through: the queue, day-log lines to lift, near-duplicates, routine."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, JSONField, Min, OuterRef, QuerySet, Subquery
from django.utils import timezone

from ..access import require_member
from ..actors import Actor
from ..errors import invalid
from ..models import (
    Agent,
    Kind,
    Note,
    Project,
    ReviewPolicy,
    ReviewRoutine,
    ReviewRun,
    Status,
    live_in_place_q,
)
from ..validation import agent_fact_identity, normalize_text
from .filters import NoteFilter
from .notes import note_in_project, notes_rows, notes_table_ids
from .visibility import held_q

DAY_STAMP_LENGTH = len("HH:MM ")


@dataclass(frozen=True)
class DayLine:
    """One line of a day log, offered to lift into a fact of the same agent."""

    note: Note  # the day row
    index: int
    line: str  # as written: "HH:MM TASK-KEY text"
    text: str  # the fact a lift saves: the line without its HH:MM stamp
    lifted_as: str | None  # the live fact that already holds this text


def _day_line_text(line: str) -> str:
    stamp = line[:DAY_STAMP_LENGTH]
    if len(stamp) == DAY_STAMP_LENGTH and stamp[2] == ":" and stamp[:2].isdigit():
        return line[DAY_STAMP_LENGTH:].strip()
    return line.strip()


def _day_lines(project: Project, rows: list[Note]) -> list[DayLine]:
    drafts = []
    for row in rows:
        for index, line in enumerate(row.lines):
            text = _day_line_text(line)
            if not text:
                continue
            identity = agent_fact_identity(
                owner_agent_id=row.owner_agent_id, content=normalize_text(text)
            )
            drafts.append((row, index, line, text, identity))
    live = dict(
        Note.objects.filter(
            live_in_place_q([d[4] for d in drafts]), project=project
        ).values_list("place_key", "id")
    )
    return [DayLine(row, index, line, text, live.get(h)) for row, index, line, text, h in drafts]


@dataclass(frozen=True)
class ReviewQueue:
    learned: list[Note]  # learned live notes, oldest first
    expired: list[Note]  # active notes past their expiry
    not_recalled: list[Note]  # live notes no agent's run was served in 30 days (read records)
    stale: list[Note]  # notes whose evidence commit is no longer pinned
    day: date  # yesterday (UTC)
    day_lines: list[DayLine]  # yesterday's day-log lines, to lift into facts by hand
    totals: dict[str, int]
    # Near-duplicates by meaning the agents' latest daily reviews reported, both still live:
    # for a person to merge (or keep apart); the review never merges them itself.
    similar: list[SimilarPair] = ()


@dataclass(frozen=True)
class HeldSummary:
    """Under the `hold` review policy: the live notes other runs do not see yet, and when the
    oldest was written (None: none held)."""

    count: int
    oldest: datetime | None


def held_summary(*, actor: Actor, project: Project) -> HeldSummary | None:
    """None when the project's policy is `open`; else its held notes (SPEC §2.2). One query."""
    require_member(actor, project)
    if project.memory_setting.review_policy != ReviewPolicy.HOLD:
        return None
    return held_of(project)


def held_of(project: Project) -> HeldSummary:
    """The project's live notes `held_q` holds now, counted (whatever its policy)."""
    held = Note.objects.filter(held_q(), project=project, status=Status.ACTIVE)
    found = held.aggregate(count=Count("id"), oldest=Min("created_at"))
    return HeldSummary(found["count"], found["oldest"])


@dataclass(frozen=True)
class SimilarPair:
    older: Note
    newer: Note
    cosine: float


def similar_pairs(*, project: Project, limit: int = 25) -> list[SimilarPair]:
    """The near-duplicate pairs of each agent's latest finished daily review in the project
    (`counts["near_duplicate_pairs"]`), closest first, where both facts are still live. One
    query reads each routine's latest counts, not the project's whole review history."""
    latest = (
        ReviewRun.objects.filter(routine=OuterRef("pk"), finished_at__isnull=False)
        .order_by("-finished_at", "-id")
        .values("counts")[:1]
    )
    counts_of_routines = (
        ReviewRoutine.objects.filter(agent__project=project)
        .order_by("pk")
        .annotate(latest=Subquery(latest, output_field=JSONField()))
        .values_list("latest", flat=True)
    )
    pairs = sorted(
        (
            p
            for counts in counts_of_routines
            for p in (counts or {}).get("near_duplicate_pairs") or []
        ),
        key=lambda p: -p[2],
    )
    ids = {i for p in pairs for i in p[:2]}
    live = Note.objects.filter(project=project, pk__in=ids, status=Status.ACTIVE).in_bulk()
    kept = [SimilarPair(live[a], live[b], c) for a, b, c in pairs if a in live and b in live]
    return kept[:limit]


@dataclass(frozen=True)
class ReviewSection:
    """One section of the review queue: the notes table's filter that lists all of it (its
    "See all" link is these parameters), and the order the queue shows them in."""

    key: str
    title: str
    filters: dict[str, str]
    order: tuple


# Active notes only; learned ones as they await review, expired or not (the stored counter
# `notes_awaiting` counts exactly these; day logs go to "Yesterday's day logs"), expired ones,
# those no run was served in 30 days (rejected ones are out of recall already), and those whose
# evidence moved on.
REVIEW_SECTIONS = (
    ReviewSection(
        "learned",
        "Learned notes, oldest first",
        {"status": "active", "trust": "learned", "day_log": "false"},
        ("created_at", "id"),
    ),
    ReviewSection(
        "expired", "Expired notes", {"status": "active", "expired": "true"}, ("expires_at", "id")
    ),
    ReviewSection(
        "not_recalled",
        "Not read by any run in 30 days",
        {
            "status": "active",
            "not_recalled": "true",
            "expired": "false",
            "day_log": "false",
            "rejected": "false",
        },
        ("created_at", "id"),
    ),
    ReviewSection(
        "stale",
        "Evidence stale",
        {"status": "active", "evidence_stale": "true"},
        ("created_at", "id"),
    ),
)


def awaiting_notes(notes: QuerySet[Note]) -> QuerySet[Note]:
    """Of `notes`, those awaiting review: the review queue's first section. The stored
    counter `notes_awaiting` (counters.py) counts the same set, for the project header, its
    tab and the projects list; the queue, the digest and the Overview count this."""
    return NoteFilter(REVIEW_SECTIONS[0].filters, queryset=notes, project=None, agents=()).qs


def review_queue(*, actor: Actor, project: Project, limit: int = 25) -> ReviewQueue:
    """What a reviewer works through. A note shows once, in the first section it belongs to.
    Each section is the notes table's own filter (REVIEW_SECTIONS), so its count is the count
    its "See all" link shows."""
    now = timezone.now()
    # Each section filters, counts and picks ids on the note table alone; the picked rows'
    # relations are loaded once, for at most 4 × limit notes (planning a 9-table join per
    # section cost more than running it).
    rows = notes_table_ids(actor=actor, project=project)
    seen: set[str] = set()
    picked_ids: dict[str, list[str]] = {}
    totals: dict[str, int] = {}
    for section in REVIEW_SECTIONS:
        qs = NoteFilter(section.filters, queryset=rows, project=project, agents=()).qs
        qs = qs.order_by(*section.order)
        totals[section.key] = qs.count()
        ids = [pk for pk in qs.values_list("pk", flat=True)[:limit] if pk not in seen]
        picked_ids[section.key] = ids
        seen.update(ids)
    loaded = {n.pk: n for n in notes_rows(actor=actor, project=project, ids=list(seen))}
    picked = {name: [loaded[i] for i in ids if i in loaded] for name, ids in picked_ids.items()}
    yesterday = now.date() - timedelta(days=1)
    day_rows = list(
        Note.objects.filter(project=project, kind=Kind.DAY, day=yesterday, status=Status.ACTIVE)
        .select_related("owner_agent")
        .order_by("owner_agent__name", "id")
    )
    return ReviewQueue(
        learned=picked["learned"],
        expired=picked["expired"],
        not_recalled=picked["not_recalled"],
        stale=picked["stale"],
        day=yesterday,
        day_lines=_day_lines(project, day_rows),
        totals=totals,
        similar=similar_pairs(project=project, limit=limit),
    )


def review_section_of(
    *, actor: Actor, project: Project, note_id: str
) -> tuple[ReviewSection, QuerySet[Note]] | None:
    """The first review section that lists the note (as the queue shows it: once, in the
    first it belongs to), with that section's notes in the queue's order; None when it is in
    none. One query a section looked at."""
    rows = notes_table_ids(actor=actor, project=project)
    for section in REVIEW_SECTIONS:
        qs = NoteFilter(section.filters, queryset=rows, project=project, agents=()).qs
        if qs.filter(pk=note_id).exists():
            return section, qs.order_by(*section.order)
    return None


@dataclass(frozen=True)
class SectionsAfter:
    """The review queue after a change to some of its notes: which of them are still in a
    section, and every section's count."""

    still_in: set[str]
    totals: dict[str, int]


def review_sections_after(
    *, actor: Actor, project: Project, keys: list[str], note_ids: list[str]
) -> SectionsAfter:
    """Which of `note_ids` still belong to one of the sections `keys`, and the count of
    every section — what the queue redraws after a row action (one query a section, and one
    more for the notes' own sections)."""
    rows = notes_table_ids(actor=actor, project=project)
    totals, still = {}, set()
    for section in REVIEW_SECTIONS:
        qs = NoteFilter(section.filters, queryset=rows, project=project, agents=()).qs
        totals[section.key] = qs.count()
        if section.key in keys:
            still |= set(qs.filter(pk__in=note_ids).values_list("pk", flat=True))
    return SectionsAfter(still, totals)


def day_line_get(*, actor: Actor, project: Project, note_id: str, index: int) -> DayLine:
    """One line of a day row of the project, as the review queue offers it."""
    row = note_in_project(actor=actor, project=project, note_id=note_id)
    if row.kind != Kind.DAY or row.owner_agent_id is None:
        raise invalid("id", f"{note_id} is not a day log.")
    lines = _day_lines(project, [row])
    match = next((d for d in lines if d.index == index), None)
    if match is None:
        raise invalid("line", f"{note_id} has no line {index}.")
    return match


def routine_for_agent(*, actor: Actor, agent: Agent, runs: int = 5):
    """The agent's daily review and its last runs (None when it has none yet)."""
    require_member(actor, agent.project)
    routine = ReviewRoutine.objects.filter(agent=agent).first()
    if routine is None:
        return None
    routine.recent_runs = list(routine.runs.order_by("-started_at", "-id")[:runs])
    return routine
