"""The overview of a project (the dashboard's charts): what was written in the last 30 days,
by whom and with what trust now; the review backlog by age; the recalls per day, the notes
served to the most runs and the learned notes no run was served (read records); vetoes and
rejects per agent; the cap and when it will be reached. A handful of
grouped queries on the project's notes (at most the cap, 2,000 by default), whatever the size
of the database. Every count comes with the NoteFilter parameters that list exactly what it
counts (the chart's links), where such a list exists."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from ..access import require_member
from ..actors import Actor
from ..models import (
    Agent,
    Note,
    NoteRead,
    Project,
    RecallDay,
    Run,
    Status,
    Trust,
    vetoed_q,
)
from .filters import PEOPLE, NoteFilter
from .projects import project_counts
from .review import REVIEW_SECTIONS, awaiting_notes

DAYS = 30
TOP_READ = 5  # the notes served to the most runs, listed
# The project's latest runs whose reads the "most read" list counts: each run's
# reads are bounded by its call budget, so the list's cost is too, however much is read (all
# of a million reads took 2.1 s).
MOST_READ_RUNS = 200
UNREAD_LISTED = 5  # the learned notes nobody read, listed (oldest first; the link lists all)
# The notes table's filters for the learned notes no run was served in 30 days.
UNREAD_LEARNED = {
    "status": Status.ACTIVE.value,
    "trust": Trust.LEARNED.value,
    "not_recalled": "true",
    "day_log": "false",
}


@dataclass(frozen=True)
class Part:
    """One segment of a bar (or a bar): what it counts and the notes table's filters that
    list it (None where no list of notes is what it counts)."""

    key: str
    label: str
    count: int
    filters: dict[str, str] | None = None


@dataclass
class Bar:
    label: str  # the day (YYYY-MM-DD) or the agent's name
    parts: list[Part] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(p.count for p in self.parts)


@dataclass(frozen=True)
class Series:
    key: str
    label: str


@dataclass
class Overview:
    days: list[date]
    written: list[Bar]  # per day, stacked by the agent (or people) that wrote
    writers: list[Series]
    trust: list[Bar]  # per day, stacked by the notes' trust now
    backlog: list[Bar]  # the notes awaiting review, by age
    recalls: list[Bar]  # per day: recalls that served notes
    most_read: list[Note]  # served to the most runs in 30 days: `read_runs`, `read_count`
    unread_learned: list[Note]  # learned, live, no run served them in 30 days: oldest first
    unread_learned_count: int
    unread_query: str  # the notes table's query that lists all of them
    judged: list[Bar]  # per agent: its notes vetoed and rejected
    stored: int
    cap: int
    written_in_window: int
    cap_reached_on: date | None  # at the window's rate; None when nothing was written


def cap_reached_on(*, stored: int, cap: int, written: int, today: date) -> date | None:
    """The day the project reaches its cap at the rate of `written` notes in the last DAYS
    days; None when nothing was written (or it is full already)."""
    if not written or stored >= cap:
        return None
    return today + timedelta(days=int((cap - stored) / (written / DAYS)) + 1)


def _day_filters(day: date, **more) -> dict[str, str]:
    return {"created_from": day.isoformat(), "created_to": day.isoformat(), **more}


def project_overview(*, actor: Actor, project: Project, now: datetime | None = None) -> Overview:
    require_member(actor, project)
    now = now or timezone.now()
    today = timezone.localdate(now)
    days = [today - timedelta(days=DAYS - 1 - i) for i in range(DAYS)]
    start = timezone.make_aware(datetime.combine(days[0], datetime.min.time()))
    notes = Note.objects.filter(project=project)
    agents = {a.pk: a.name for a in Agent.objects.filter(project=project).only("id", "name")}

    # 1 and 2: one grouped query gives both the writers' and the trust's stacks.
    rows = (
        notes.filter(created_at__gte=start)
        .annotate(written_on=TruncDate("created_at"))
        .values("written_on", "created_by_agent_id", "trust")
        .annotate(n=Count("id"))
    )
    by_writer: dict[tuple[date, str], int] = {}
    by_trust: dict[tuple[date, str], int] = {}
    for row in rows:
        day, trust_of = row["written_on"], row["trust"]
        writer = row["created_by_agent_id"] or PEOPLE
        by_writer[day, writer] = by_writer.get((day, writer), 0) + row["n"]
        by_trust[day, trust_of] = by_trust.get((day, trust_of), 0) + row["n"]
    totals: dict[str, int] = {}
    for (_day, writer), n in by_writer.items():
        totals[writer] = totals.get(writer, 0) + n
    writers = [
        Series(w, "People" if w == PEOPLE else agents.get(w, w))
        for w in sorted(totals, key=lambda w: (-totals[w], w))
    ]
    written = [
        Bar(
            d.isoformat(),
            [
                Part(s.key, s.label, by_writer[d, s.key], _day_filters(d, created_by=s.key))
                for s in writers
                if by_writer.get((d, s.key))
            ],
        )
        for d in days
    ]
    trust = [
        Bar(
            d.isoformat(),
            [
                Part(t.value, t.label, by_trust[d, t.value], _day_filters(d, trust=t.value))
                for t in Trust
                if by_trust.get((d, t.value))
            ],
        )
        for d in days
    ]

    # 3: the review queue's first section (awaiting review), by the day it was written: each
    # bar counts exactly what its link lists (the section's filters and the age's dates).
    awaiting = REVIEW_SECTIONS[0].filters
    week, month = today - timedelta(days=7), today - timedelta(days=30)
    ages = [
        ("Today", {"created_from": today}),
        ("1–7 days", {"created_from": week, "created_to": today - timedelta(days=1)}),
        ("8–30 days", {"created_from": month, "created_to": week - timedelta(days=1)}),
        ("Older", {"created_to": month - timedelta(days=1)}),
    ]

    def dated(bounds: dict) -> Q:
        """The bounds as NoteFilter's own date filters look them up."""
        q = Q()
        for name, value in bounds.items():
            date_filter = NoteFilter.base_filters[name]
            q &= Q(**{f"{date_filter.field_name}__{date_filter.lookup_expr}": value})
        return q

    pending = awaiting_notes(notes)
    counted = pending.aggregate(
        **{f"age{i}": Count("id", filter=dated(bounds)) for i, (_l, bounds) in enumerate(ages)}
    )
    backlog = [
        Bar(label, [Part("awaiting", "Awaiting review", counted[f"age{i}"],
                         {**awaiting, **{k: v.isoformat() for k, v in bounds.items()}})])
        for i, (label, bounds) in enumerate(ages)
    ]  # fmt: skip

    # 4: recalls per day (counted as they happen) and the notes recalled most.
    recalled = {
        r.day: r
        for r in RecallDay.objects.filter(project=project, day__gte=days[0]).only(
            "day", "recalls", "picks"
        )
    }
    recalls = [
        Bar(d.isoformat(), [Part("recalls", "Recalls", recalled[d].recalls)])
        if d in recalled
        else Bar(d.isoformat())
        for d in days
    ]
    # The notes served to the most of the project's latest MOST_READ_RUNS runs in the last 30
    # days (read records; forgotten ones are not named), and the learned notes no run was served
    # in 30 days (the daily review's and the review queue's rule): what is used, and what waits
    # for nobody.
    # The runs' keys as a list, not a subquery: given a subquery the planner reckons a hash join
    # over the whole read table cheaper than 200 walks down the run index (98 ms against 4 at a
    # million records).
    latest_runs = list(
        Run.objects.filter(project=project)
        .order_by("-started_at")
        .values_list("read_key", flat=True)[:MOST_READ_RUNS]
    )
    runs_of: dict[int, set[int]] = {}  # by the notes' and runs' read keys
    reads_of: dict[int, int] = {}
    served = NoteRead.objects.filter(
        run_id__in=latest_runs, read_at__gte=now - timedelta(days=DAYS)
    ).values_list("note_id", "run_id")
    for note_key, run_key in served:
        runs_of.setdefault(note_key, set()).add(run_key)
        reads_of[note_key] = reads_of.get(note_key, 0) + 1
    ranked = sorted(runs_of, key=lambda n: (-len(runs_of[n]), -reads_of[n], n))
    named = {}
    if ranked:  # forgotten notes are not named: the first TOP_READ of the others
        shown = notes.filter(read_key__in=ranked[: TOP_READ * 4]).exclude(status=Status.FORGOTTEN)
        named = shown.only("id", "content", "summary", "read_key").in_bulk(field_name="read_key")
    most_read = []
    for note_key in [n for n in ranked if n in named][:TOP_READ]:
        note = named[note_key]
        note.read_runs, note.read_count = len(runs_of[note_key]), reads_of[note_key]
        most_read.append(note)
    unread = NoteFilter(UNREAD_LEARNED, queryset=notes, project=project, agents=()).qs
    unread_count = unread.count()
    unread_learned = []
    if unread_count:
        oldest = unread.only("id", "content", "summary", "created_at").order_by("created_at", "id")
        unread_learned = list(oldest[:UNREAD_LISTED])

    # 5: what people judged of each agent's notes.
    judged_rows = (
        notes.exclude(created_by_agent_id="")
        .values("created_by_agent_id")
        .annotate(
            vetoed=Count("id", filter=vetoed_q()),
            rejected=Count("id", filter=Q(trust=Trust.REJECTED)),
        )
        .filter(Q(vetoed__gt=0) | Q(rejected__gt=0))
        .order_by("-vetoed", "-rejected", "created_by_agent_id")
    )
    judged = [
        Bar(
            agents.get(row["created_by_agent_id"], row["created_by_agent_id"]),
            [
                Part("vetoed", "Vetoed", row["vetoed"],
                     {"created_by": row["created_by_agent_id"], "vetoed": "true"}),
                Part("rejected", "Rejected", row["rejected"],
                     {"created_by": row["created_by_agent_id"], "trust": Trust.REJECTED.value}),
            ],
        )  # fmt: skip
        for row in judged_rows
    ]

    # 6: the cap, and the day it is reached at the last 30 days' rate.
    stored = project_counts(project=project)["total"]
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    in_window = sum(by_writer.values())
    reached = cap_reached_on(stored=stored, cap=cap, written=in_window, today=today)
    return Overview(
        days=days,
        written=written,
        writers=writers,
        trust=trust,
        backlog=backlog,
        recalls=recalls,
        most_read=most_read,
        unread_learned=unread_learned,
        unread_learned_count=unread_count,
        unread_query=urlencode(UNREAD_LEARNED),
        judged=judged,
        stored=stored,
        cap=cap,
        written_in_window=in_window,
        cap_reached_on=reached,
    )
