"""A project's day in numbers, for the daily digest (SPEC §2.12): what awaits review and since
when (held notes apart), what each agent wrote in the last 24 hours, the vetoes and rejections,
what looks unusual (an agent writing 3× its daily average of the 7 days before; a spike in
rejections), the cap forecast and the webhook endpoints switched off. Ids, names and counts —
never a note's content. A handful of grouped queries, whatever the project's size.

Read by the digest pass for every project (services/notifications.py), not for a person: who
may see it is decided there, by the person's role in the project."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone

from ..audit_actions import AuditAction
from ..models import Agent, AuditEvent, Note, Project, ReviewPolicy, Target, Webhook
from ..webhooks import masked
from .overview import DAYS as FORECAST_DAYS
from .overview import cap_reached_on
from .projects import project_counts, setting_get
from .review import awaiting_notes, held_of

# What counts as unusual: at least SPIKE_FACTOR times the daily average of the BASELINE_DAYS
# before, and at least SPIKE_MIN in the day (a quiet agent's 2 against 0.3 is no news).
SPIKE_FACTOR = 3
SPIKE_MIN = 5
BASELINE_DAYS = 7


@dataclass(frozen=True)
class AgentDay:
    agent_id: str
    name: str
    written: int  # long-term notes in the last 24 hours
    daily_average: float  # a day of the BASELINE_DAYS before

    @property
    def spiking(self) -> bool:
        return (
            self.written >= SPIKE_MIN
            and self.daily_average > 0
            and self.written >= SPIKE_FACTOR * self.daily_average
        )


@dataclass(frozen=True)
class SwitchedOff:
    webhook_id: str
    url: str  # masked: no query string, no credentials
    description: str
    reason: str


@dataclass
class Digest:
    project: Project
    day: date
    awaiting: int
    oldest_awaiting: datetime | None
    held: int | None  # None: the project's policy is `open`
    agents: list[AgentDay]  # those that wrote in the last 24 hours, most first
    by_people: int
    vetoed: int
    rejected: int
    judged_daily_average: float  # vetoes and rejections a day, the BASELINE_DAYS before
    stored: int
    cap: int
    cap_reached_on: date | None
    switched_off: list[SwitchedOff] = field(default_factory=list)

    @property
    def spiking_agents(self) -> list[AgentDay]:
        return [a for a in self.agents if a.spiking]

    @property
    def rejections_spiking(self) -> bool:
        judged = self.vetoed + self.rejected
        return (
            judged >= SPIKE_MIN
            and self.judged_daily_average > 0
            and judged >= SPIKE_FACTOR * self.judged_daily_average
        )

    @property
    def written(self) -> int:
        return self.by_people + sum(a.written for a in self.agents)

    @property
    def is_news(self) -> bool:
        """Anything to tell: a backlog, a day's activity, a switched-off endpoint. A quiet
        project sends no digest."""
        return bool(
            self.awaiting or self.written or self.vetoed or self.rejected or self.switched_off
        )

    def oldest_hours(self, now: datetime) -> int | None:
        if self.oldest_awaiting is None:
            return None
        return int((now - self.oldest_awaiting).total_seconds() // 3600)

    def as_event(self, now: datetime) -> dict:
        """The digest as a `review.digest` event's data: numbers and ids."""
        return {
            "day": self.day.isoformat(),
            "awaiting": self.awaiting,
            "held": self.held,
            "oldestAwaitingHours": self.oldest_hours(now),
            "written": self.written,
            "writtenByPeople": self.by_people,
            "writtenByAgent": {a.agent_id: a.written for a in self.agents},
            "vetoed": self.vetoed,
            "rejected": self.rejected,
            "spikingAgents": [a.agent_id for a in self.spiking_agents],
            "rejectionsSpiking": self.rejections_spiking,
            "stored": self.stored,
            "cap": self.cap,
            "capReachedOn": self.cap_reached_on.isoformat() if self.cap_reached_on else None,
            "webhooksSwitchedOff": [w.webhook_id for w in self.switched_off],
        }


def project_digest(*, project: Project, now: datetime | None = None) -> Digest:
    """The digest of `project` for the 24 hours before `now`."""
    now = now or timezone.now()
    since = now - timedelta(days=1)
    baseline = since - timedelta(days=BASELINE_DAYS)
    notes = Note.objects.filter(project=project)

    pending = awaiting_notes(notes)
    found = pending.aggregate(count=Count("id"), oldest=Min("created_at"))
    setting = setting_get(project=project)
    held = held_of(project).count if setting.review_policy == ReviewPolicy.HOLD else None

    forecast_from = now - timedelta(days=FORECAST_DAYS)
    writes = notes.filter(created_at__gte=min(baseline, forecast_from)).aggregate(
        recent_people=Count(
            "id", filter=Q(created_at__gte=since, created_by_agent_id="", target=Target.LONG_TERM)
        ),
        in_forecast=Count("id", filter=Q(created_at__gte=forecast_from)),
    )
    names = dict(Agent.objects.filter(project=project).values_list("id", "name"))
    by_agent = (
        notes.filter(created_at__gte=baseline, target=Target.LONG_TERM)
        .exclude(created_by_agent_id="")
        .values("created_by_agent_id")
        .annotate(
            recent=Count("id", filter=Q(created_at__gte=since)),
            before=Count("id", filter=Q(created_at__lt=since)),
        )
    )
    agents = sorted(
        (
            AgentDay(
                agent_id=row["created_by_agent_id"],
                name=names.get(row["created_by_agent_id"], row["created_by_agent_id"]),
                written=row["recent"],
                daily_average=row["before"] / BASELINE_DAYS,
            )
            for row in by_agent
            if row["recent"]
        ),
        key=lambda a: (-a.written, a.name),
    )

    judged = AuditEvent.objects.filter(
        project=project,
        created_at__gte=baseline,
        action__in=(AuditAction.NOTE_VETO, AuditAction.NOTE_REJECT),
    ).aggregate(
        vetoed=Count("id", filter=Q(created_at__gte=since, action=AuditAction.NOTE_VETO)),
        rejected=Count("id", filter=Q(created_at__gte=since, action=AuditAction.NOTE_REJECT)),
        before=Count("id", filter=Q(created_at__lt=since)),
    )

    stored = project_counts(project=project)["total"]
    cap = settings.MEMORY_PORTAL["PROJECT_NOTE_CAP"]
    off = [
        SwitchedOff(w.pk, masked(w.url), w.description, w.disabled_reason)
        for w in Webhook.objects.filter(project=project, active=False)
        .exclude(disabled_reason="")
        .order_by("created_at")
    ]
    return Digest(
        project=project,
        day=timezone.localdate(now),
        awaiting=found["count"],
        oldest_awaiting=found["oldest"],
        held=held,
        agents=agents,
        by_people=writes["recent_people"],
        vetoed=judged["vetoed"],
        rejected=judged["rejected"],
        judged_daily_average=judged["before"] / BASELINE_DAYS,
        stored=stored,
        cap=cap,
        cap_reached_on=cap_reached_on(
            stored=stored, cap=cap, written=writes["in_forecast"], today=timezone.localdate(now)
        ),
        switched_off=off,
    )
