"""What a person is sent by email about each project (SPEC §2.12), and the defaults of a role:
a project's manager gets the daily digest and the notice of a webhook endpoint switched off
until they choose otherwise; a member gets nothing until they ask. One rule, here: the
Notifications page, the digest pass and the alerts pass all read a person's choice through
`preferences`."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import OuterRef, Subquery

from ..actors import Actor
from ..audit_actions import AuditAction
from ..models import Membership, NotificationSetting, Project, Role
from ..outbox import EVENT_TYPES, LABELS, TYPES
from .projects import projects_for_user

# An alert that is no outbox event: one of the project's webhook endpoints was switched off
# because its deliveries kept failing (services/deliveries.py).
WEBHOOK_OFF = "webhook.switched_off"
DIGEST_EVENT = EVENT_TYPES[AuditAction.REVIEW_DIGEST]
# The events a person may be alerted of, one email a pass: every outbox event but the digest.
EVENT_ALERTS: tuple[str, ...] = tuple(t for t in TYPES if t != DIGEST_EVENT)
ALERT_TYPES: tuple[str, ...] = (*EVENT_ALERTS, WEBHOOK_OFF)
ALERT_LABELS: dict[str, str] = {
    **{t: LABELS[t] for t in EVENT_ALERTS},
    WEBHOOK_OFF: "A webhook endpoint is switched off (failing)",
}


@dataclass(frozen=True)
class Preferences:
    digest: bool
    alerts: tuple[str, ...]
    chosen: bool  # False: the defaults of the person's role, never changed

    @property
    def event_alerts(self) -> tuple[str, ...]:
        """The alerts that are outbox events (the alerts pass sends them)."""
        return tuple(t for t in self.alerts if t in EVENT_ALERTS)


def role_defaults(role: str | None) -> Preferences:
    if role == Role.MANAGER:
        return Preferences(digest=True, alerts=(WEBHOOK_OFF,), chosen=False)
    return Preferences(digest=False, alerts=(), chosen=False)


def preferences(row: NotificationSetting | None, membership_role: str | None) -> Preferences:
    """A person's choice for a project (`row`), or the defaults of their membership's role."""
    if row is None:
        return role_defaults(membership_role)
    alerts = tuple(t for t in ALERT_TYPES if t in set(row.alerts))
    return Preferences(digest=row.digest, alerts=alerts, chosen=True)


@dataclass(frozen=True)
class ProjectNotifications:
    project: Project
    preferences: Preferences


def person_notifications(*, actor: Actor) -> list[ProjectNotifications]:
    """The person's choices for every project they can see, in the projects list's order.
    Two queries, whatever the number of projects."""
    user = actor.user
    role = Membership.objects.filter(project=OuterRef("pk"), user_id=user.pk).values("role")[:1]
    projects = list(projects_for_user(user=user).annotate(membership_role=Subquery(role)))
    rows = {
        row.project_id: row
        for row in NotificationSetting.objects.filter(
            user_id=user.pk, project_id__in=[p.pk for p in projects]
        )
    }
    return [
        ProjectNotifications(p, preferences(rows.get(p.pk), p.membership_role)) for p in projects
    ]


def link_projects(*, project_ids) -> list[Project]:
    """The projects an email's unsubscribe link names, for its page to say what it stops. The
    signed link is the credential: no person is signed in to check against."""
    return list(Project.objects.filter(pk__in=project_ids).order_by("slug"))
