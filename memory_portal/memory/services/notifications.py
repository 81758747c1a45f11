"""Telling people by email (SPEC §2.12): their choices, the daily digest, alerts of events and
the notice of a webhook endpoint switched off. What a person gets is read through
selectors.notifications (their choice, or their role's defaults).

- `notifications_set`: a person's choice for one project, audited; turning alerts on starts
  them at the project's next event. `notifications_unsubscribe`: an email's one-click link.
- `digests_send`: the routine runner's pass. From MEMORY_PORTAL_DIGEST_HOUR (UTC) on, once a
  day: each project with something to tell gets its `review.digest` event (a change under its
  lock, so once, whichever runner gets there first), and each person one email covering every
  project whose digest they take — claimed before it is sent, given back if sending fails, so a
  failed send is tried again by the next pass and a sent one is never sent twice.
- `alerts_send`: part of the delivery pass (services/deliveries.py), woken after each change
  that appends events to a project where someone asked for alerts: each person's new events of
  the chosen types in one email, their own actions left out. The cursor moves before the email
  is sent and moves back if it fails.
- `webhook_off_notify`: after an endpoint is switched off, an email to each person who takes
  that notice (by default, the project's managers).

Without email (no EMAIL_URL and DEBUG off) nothing is sent, the digest's event still is."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from .. import emails
from ..access import require_member, role_from_membership, role_in
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import invalid
from ..models import (
    Event,
    Membership,
    NotificationSetting,
    Project,
    Role,
    Webhook,
)
from ..outbox import link
from ..selectors.digest import Digest, project_digest
from ..selectors.notifications import (
    ALERT_LABELS,
    ALERT_TYPES,
    EVENT_ALERTS,
    WEBHOOK_OFF,
    preferences,
    role_defaults,
)
from ..webhooks import chat_text, masked
from .change import project_change

log = logging.getLogger(__name__)

ALERT_BATCH = 200  # events looked at a pass, a person and project
ALERT_LINES = 50  # events listed in one alert email


# --- A person's choice ----------------------------------------------------------------------


def _alerts(alerts) -> list[str]:
    unknown = sorted(set(alerts) - set(ALERT_TYPES))
    if unknown:
        raise invalid(
            "alerts",
            f"Unknown alert {unknown[0]}.",
            hint=f"Alerts: {', '.join(ALERT_TYPES)}.",
        )
    return [t for t in ALERT_TYPES if t in set(alerts)]


def _count_alerting(change) -> None:
    """The setting row's count of people with event alerts, kept under the project's lock."""
    rows = NotificationSetting.objects.filter(project=change.project).values_list("alerts")
    change.store(alerts_active=sum(1 for (alerts,) in rows if set(alerts) & set(EVENT_ALERTS)))


def notifications_set(
    *, actor: Actor, project: Project, digest: bool, alerts: list[str]
) -> NotificationSetting:
    """The acting person's email choice for `project`: the daily digest on or off, and the
    alerts they want. A member may choose for themselves only; nobody for someone else."""
    if not actor.is_person:
        raise invalid("actor", "Only a person chooses their notifications.")
    require_member(actor, project)
    chosen = _alerts(alerts)
    with project_change(project, actor=actor) as change:
        row = (
            NotificationSetting.objects.select_for_update()
            .filter(user_id=actor.user.pk, project=project)
            .first()
        )
        if row is None:
            row = NotificationSetting(user_id=actor.user.pk, project=project)
        before = set(row.alerts) & set(EVENT_ALERTS)
        if not before and set(chosen) & set(EVENT_ALERTS):
            row.alert_cursor = change.setting.event_seq  # alerts start with the next event
        row.digest = digest
        row.alerts = chosen
        row.changed_at = timezone.now()
        row.save()
        _count_alerting(change)
        change.audit(
            AuditAction.NOTIFICATIONS_SET,
            target=str(actor.user.pk),
            details={"person": actor.user.get_username(), "digest": digest, "alerts": chosen},
        )
    return row


def notifications_unsubscribe(*, unsubscribe: emails.Unsubscribe) -> list[Project]:
    """An email's unsubscribe link followed: stop its digest or alerts for its projects.
    Returns the projects changed (those the person still belongs to)."""
    user = get_user_model().objects.filter(pk=unsubscribe.user_id, is_active=True).first()
    if user is None:
        return []
    actor = Actor.person(user)
    changed = []
    memberships = dict(
        Membership.objects.filter(user=user, project_id__in=unsubscribe.project_ids).values_list(
            "project_id", "role"
        )
    )
    for project in Project.objects.filter(pk__in=unsubscribe.project_ids).order_by("slug"):
        role = memberships.get(project.pk)
        if role_from_membership(user, role) is None:
            continue
        row = NotificationSetting.objects.filter(user=user, project=project).first()
        now = preferences(row, role)
        digest, alerts = now.digest, list(now.alerts)
        if unsubscribe.what == emails.DIGEST:
            digest = False
        else:
            alerts = []
        notifications_set(actor=actor, project=project, digest=digest, alerts=alerts)
        changed.append(project)
    return changed


# --- The daily digest ------------------------------------------------------------------------


class _Digests:
    """The day's digests, each read once in a pass, when first needed."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._found: dict[int, Digest] = {}

    def of(self, project: Project) -> Digest:
        if project.pk not in self._found:
            self._found[project.pk] = project_digest(project=project, now=self.now)
        return self._found[project.pk]


def _project_events(digests: _Digests, day) -> int:
    """The first pass of the day appends each project's `review.digest` event (when there is
    news) and marks the day under the project's lock. Returns the events appended."""
    appended = 0
    due = Project.objects.filter(memory_setting__isnull=False).exclude(
        memory_setting__digest_day=day
    )
    for project in due.select_related("memory_setting"):
        digest = digests.of(project)
        with project_change(project, actor=None) as change:
            if change.setting.digest_day == day:
                continue  # another runner made it meanwhile
            change.store(digest_day=day)
            if digest.is_news:
                change.audit(
                    AuditAction.REVIEW_DIGEST,
                    actor=None,
                    details={"digest": digest.as_event(digests.now)},
                )
                appended += 1
    return appended


def _default_rows() -> None:
    """A row for each manager who never chose, with their role's defaults: the digest pass
    claims a person's day on it."""
    defaults = role_defaults(Role.MANAGER)
    chosen = NotificationSetting.objects.filter(
        user_id=OuterRef("user_id"), project_id=OuterRef("project_id")
    )
    missing = Membership.objects.filter(role=Role.MANAGER).exclude(Exists(chosen))
    NotificationSetting.objects.bulk_create(
        [
            NotificationSetting(
                user_id=m.user_id,
                project_id=m.project_id,
                digest=defaults.digest,
                alerts=list(defaults.alerts),
            )  # fmt: skip
            for m in missing.only("user_id", "project_id")
        ],
        ignore_conflicts=True,
    )


def _claim_digest(user_id: int, day) -> list[NotificationSetting]:
    """The person's rows whose digest is due today, marked sent (to be given back if the
    email fails); rows another runner holds are skipped."""
    with transaction.atomic():
        due = list(
            NotificationSetting.objects.select_for_update(skip_locked=True)
            .filter(user_id=user_id, digest=True)
            .exclude(digest_day=day)
        )
        if due:
            NotificationSetting.objects.filter(pk__in=[r.pk for r in due]).update(digest_day=day)
    return due


def digests_send(*, now: datetime | None = None) -> tuple[int, int]:
    """The day's digest pass; before MEMORY_PORTAL_DIGEST_HOUR it does nothing. Returns
    (digest events appended, emails sent)."""
    now = now or timezone.now()
    if now.astimezone(timezone.get_current_timezone()).hour < settings.MEMORY_PORTAL["DIGEST_HOUR"]:
        return 0, 0
    day = timezone.localdate(now)
    digests = _Digests(now)
    appended = _project_events(digests, day)
    if not emails.enabled():
        return appended, 0
    _default_rows()
    sent = 0
    people = (
        NotificationSetting.objects.filter(digest=True)
        .exclude(digest_day=day)
        .values_list("user_id", flat=True)
        .distinct()
    )
    users = get_user_model().objects.filter(pk__in=list(people), is_active=True)
    for user in users.order_by("pk"):
        claimed = _claim_digest(user.pk, day)
        if not claimed:
            continue
        try:
            sent += _send_digest(user, claimed, digests)
        except Exception:  # noqa: BLE001 - given back: the next pass tries again
            log.exception("could not send a digest; the next pass tries again")
            for row in claimed:
                NotificationSetting.objects.filter(pk=row.pk, digest_day=day).update(
                    digest_day=row.digest_day
                )
    return appended, sent


def _send_digest(user, rows: list[NotificationSetting], digests: _Digests) -> int:
    parts = []
    projects = Project.objects.filter(pk__in=[r.project_id for r in rows]).select_related(
        "memory_setting"
    )
    for project in projects:
        if role_in(user, project) is None:
            continue
        digest = digests.of(project)
        if digest.is_news:
            parts.append(digest)
    if not parts or not user.email:
        return 0
    parts.sort(key=lambda d: d.project.slug)
    awaiting = sum(d.awaiting for d in parts)
    subject = (
        f"Memory Portal: {awaiting} note{'s' if awaiting != 1 else ''} awaiting review"
        if awaiting
        else "Memory Portal: your daily digest"
    )
    if len(parts) > 1:
        subject += f" in {len(parts)} projects"
    else:
        subject += f" in {parts[0].project.name}"
    token = emails.unsubscribe_token(user.pk, [d.project.pk for d in parts], emails.DIGEST)
    body = {
        "user": user,
        "day": parts[0].day,
        "digests": [_digest_context(d, digests.now) for d in parts],
    }
    emails.send(
        [emails.message(to=user.email, subject=subject, template="email/digest.txt",
                        context=body, token=token)]
    )  # fmt: skip
    return 1


def _digest_context(digest: Digest, now) -> dict:
    slug = digest.project.slug
    return {
        "digest": digest,
        "oldest_hours": digest.oldest_hours(now),
        "review_url": link(f"/p/{slug}/review/"),
        "overview_url": link(f"/p/{slug}/overview/"),
        "settings_url": link(f"/p/{slug}/settings/"),
        "agents": [
            {"agent": a, "url": link(f"/p/{slug}/agents/{a.agent_id}/")} for a in digest.agents
        ],
    }


# --- Alerts of events ------------------------------------------------------------------------


def alerts_send() -> int:
    """Each person's new events of the types they chose, one email a person and project.
    Returns the emails sent."""
    if not emails.enabled():
        return 0
    sent = 0
    # Projects where someone asked for alerts (the setting row's count), rows behind the
    # project's last event; a row there may still want none (the digest only).
    due = NotificationSetting.objects.filter(
        project__memory_setting__alerts_active__gt=0,
        project__memory_setting__event_seq__gt=F("alert_cursor"),
    ).values_list("pk", "alerts")
    for pk, alerts in list(due):
        if set(alerts) & set(EVENT_ALERTS):
            sent += _alert(pk)
    return sent


def _alert(pk: int) -> int:
    with transaction.atomic():
        row = (
            NotificationSetting.objects.select_for_update(skip_locked=True)
            .select_related("user", "project")
            .filter(pk=pk)
            .first()
        )
        if row is None:
            return 0
        events = list(
            Event.objects.filter(project_id=row.project_id, number__gt=row.alert_cursor)
            .order_by("number")
            .only("id", "number", "type", "data", "created_at")[:ALERT_BATCH]
        )
        if not events:
            return 0
        before = row.alert_cursor
        row.alert_cursor = events[-1].number
        NotificationSetting.objects.filter(pk=pk).update(alert_cursor=row.alert_cursor)
    user, project = row.user, row.project
    wanted = set(row.alerts) & set(EVENT_ALERTS)
    username = user.get_username()
    chosen = [
        e
        for e in events
        if e.type in wanted
        and not (
            e.data.get("actor", {}).get("type") == "person"
            and e.data["actor"].get("username") == username
        )
    ]
    if not chosen or not user.email or not user.is_active or role_in(user, project) is None:
        return 0
    try:
        _send_alert(user, project, chosen)
    except Exception:  # noqa: BLE001 - the cursor goes back: the next pass tries again
        log.exception("could not send an alert; the next pass tries again")
        NotificationSetting.objects.filter(pk=pk, alert_cursor=row.alert_cursor).update(
            alert_cursor=before
        )
        return 0
    return 1


def _send_alert(user, project: Project, events: list[Event]) -> None:
    first = events[0]
    label = ALERT_LABELS.get(first.type, first.type).lower()
    subject = (
        f"Memory Portal [{project.slug}]: {label}"
        if len(events) == 1
        else f"Memory Portal [{project.slug}]: {len(events)} events"
    )
    token = emails.unsubscribe_token(user.pk, [project.pk], emails.ALERTS)
    context = {
        "user": user,
        "project": project,
        "lines": [chat_text(e) for e in events[:ALERT_LINES]],
        "more": max(0, len(events) - ALERT_LINES),
        "audit_url": link(f"/audit/?project={project.slug}"),
    }
    emails.send(
        [emails.message(to=user.email, subject=subject, template="email/alerts.txt",
                        context=context, token=token)]
    )  # fmt: skip


# --- A webhook endpoint switched off ---------------------------------------------------------


def webhook_off_notify(*, webhook_id: str) -> int:
    """Tell each person who takes the notice (a project's managers, by default) that the
    endpoint was switched off. Returns the emails sent; a failure is logged (the next digest
    lists the endpoint too)."""
    webhook = Webhook.objects.select_related("project").filter(pk=webhook_id).first()
    if webhook is None or webhook.active or not emails.enabled():
        return 0
    project = webhook.project
    rows = {r.user_id: r for r in NotificationSetting.objects.filter(project=project)}
    roles = dict(Membership.objects.filter(project=project).values_list("user_id", "role"))
    people = (
        get_user_model()
        .objects.filter(pk__in=set(rows) | set(roles), is_active=True)
        .exclude(email="")
    )
    messages = []
    for user in people.order_by("pk"):
        role = roles.get(user.pk)
        if role_from_membership(user, role) is None:
            continue
        if WEBHOOK_OFF not in preferences(rows.get(user.pk), role).alerts:
            continue
        token = emails.unsubscribe_token(user.pk, [project.pk], emails.ALERTS)
        context = {
            "user": user,
            "project": project,
            "webhook": webhook,
            "url": masked(webhook.url),
            "settings_url": link(f"/p/{project.slug}/settings/"),
        }
        messages.append(
            emails.message(
                to=user.email,
                subject=f"Memory Portal [{project.slug}]: a webhook endpoint was switched off",
                template="email/webhook_off.txt",
                context=context,
                token=token,
            )
        )
    try:
        return emails.send(messages)
    except Exception:  # noqa: BLE001 - the digest lists the endpoint as well
        log.exception("could not send the notice of a webhook endpoint switched off")
        return 0
