"""A project's webhook endpoints (SPEC §2.12), kept by its managers: add one (its secret shown
once), change it, rotate its secret, delete it, send it a test event, retry a delivery. Each a
change under the project's lock, audited with the endpoint's id and host — never its secret or
its query string. At most WEBHOOKS_MAX per project."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from .. import outbox, webhooks
from ..access import require_manager
from ..actors import Actor
from ..audit_actions import AuditAction
from ..errors import MemoryPortalError, invalid
from ..models import Delivery, DeliveryStatus, Event, Project, Webhook
from ..validation import gate
from .change import project_change
from .notifications import webhook_off_notify

WEBHOOKS_MAX = 20
DESCRIPTION_MAX = 200


def _types(event_types: list[str] | None) -> list[str]:
    if not event_types:
        raise invalid("eventTypes", "Name at least one event type.")
    unknown = sorted(set(event_types) - set(outbox.TYPES))
    if unknown:
        raise invalid(
            "eventTypes",
            f"Unknown event type {unknown[0]}.",
            hint=f"Event types: {', '.join(outbox.TYPES)}.",
        )
    return [t for t in outbox.TYPES if t in set(event_types)]


def _format(value: str) -> str:
    if value not in Webhook.Format.values:
        raise invalid("format", "format must be standard or chat.")
    return value


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _count_active(change) -> None:
    """The setting row's count of active endpoints, kept with the change (under its lock)."""
    change.store(
        webhooks_active=Webhook.objects.filter(project=change.project, active=True).count()
    )


def webhook_create(
    *,
    actor: Actor,
    project: Project,
    url: str,
    event_types: list[str],
    description: str = "",
    format: str = Webhook.Format.STANDARD,
    active: bool = True,
) -> tuple[Webhook, str]:
    """A new endpoint and its signing secret (`whsec_…`), returned once. It receives the
    project's events from now on."""
    require_manager(actor, project)
    description = gate("description", description or "", max_len=DESCRIPTION_MAX, line=True,
                       required=False)  # fmt: skip
    types = _types(event_types)
    url = webhooks.check_url(url)
    secret = webhooks.new_secret()
    with project_change(project, actor=actor) as change:
        if Webhook.objects.filter(project=project).count() >= WEBHOOKS_MAX:
            raise MemoryPortalError(
                "memory_invalid",
                f"Project {project.slug} has {WEBHOOKS_MAX} webhook endpoints, the most it may.",
                field="url",
                hint="Delete an endpoint you no longer use, or send several event types to one.",
            )
        webhook = Webhook.objects.create(
            project=project,
            url=url,
            format=_format(format),
            event_types=types,
            description=description,
            active=active,
            secret_sealed=webhooks.seal(secret),
            cursor=change.setting.event_seq,
            created_by=actor.user,
        )
        _count_active(change)
        change.audit(
            AuditAction.WEBHOOK_CREATE,
            target=webhook.pk,
            details={"host": _host(url), "types": types, "format": webhook.format},
        )
    return webhook, secret


def webhook_change(
    *,
    actor: Actor,
    webhook: Webhook,
    url: str | None = None,
    event_types: list[str] | None = None,
    description: str | None = None,
    active: bool | None = None,
    format: str | None = None,
) -> Webhook:
    """Change what was sent; switching an endpoint on clears why it was switched off, and it
    receives events from now on (what came while it was off is not sent)."""
    project = webhook.project
    require_manager(actor, project)
    changes: dict = {}
    if description is not None:
        changes["description"] = gate(
            "description", description, max_len=DESCRIPTION_MAX, line=True, required=False
        )
    if url is not None:
        changes["url"] = webhooks.check_url(url)
    if event_types is not None:
        changes["event_types"] = _types(event_types)
    if format is not None:
        changes["format"] = _format(format)
    if active is not None:
        changes["active"] = bool(active)
    if not changes:
        raise invalid("url", "Send url, eventTypes, description, format, active or more.")
    with project_change(project, actor=actor) as change:
        webhook = Webhook.objects.select_for_update().get(pk=webhook.pk)
        if changes.get("active") and not webhook.active:
            changes.update(disabled_reason="", failing_since=None, cursor=change.setting.event_seq)
        for name, value in changes.items():
            setattr(webhook, name, value)
        webhook.save(update_fields=list(changes))
        _count_active(change)
        shown = {k: v for k, v in changes.items() if k in ("event_types", "active", "format")}
        if "url" in changes:
            shown["host"] = _host(changes["url"])
        change.audit(AuditAction.WEBHOOK_CHANGE, target=webhook.pk, details=shown)
    return webhook


def webhook_rotate(*, actor: Actor, webhook: Webhook) -> str:
    """A new signing secret, returned once; the old one stops signing at once."""
    require_manager(actor, webhook.project)
    secret = webhooks.new_secret()
    with project_change(webhook.project, actor=actor) as change:
        Webhook.objects.filter(pk=webhook.pk).update(secret_sealed=webhooks.seal(secret))
        change.audit(AuditAction.WEBHOOK_ROTATE, target=webhook.pk)
    return secret


def webhook_delete(*, actor: Actor, webhook: Webhook) -> None:
    """The endpoint and its delivery log go; its events stay in the outbox."""
    project = webhook.project
    require_manager(actor, project)
    with project_change(project, actor=actor) as change:
        host = _host(webhook.url)
        Webhook.objects.filter(pk=webhook.pk).delete()
        _count_active(change)
        change.audit(AuditAction.WEBHOOK_DELETE, target=webhook.pk, details={"host": host})


def webhook_switch_off(*, webhook: Webhook, reason: str) -> None:
    """Switch off an endpoint whose deliveries keep failing (the delivery pass does)."""
    project = webhook.project
    with project_change(project, actor=None) as change:
        switched = Webhook.objects.filter(pk=webhook.pk, active=True).update(
            active=False, disabled_reason=reason
        )
        if switched:
            _count_active(change)
            change.audit(AuditAction.WEBHOOK_OFF, target=webhook.pk, details={"reason": reason})
            # Its managers are told by email once the switch is committed.
            transaction.on_commit(lambda: webhook_off_notify(webhook_id=webhook.pk))


def webhook_test(*, actor: Actor, webhook: Webhook) -> Delivery:
    """Send the endpoint a test event now (type `webhook.test`, not in the outbox), and keep
    how it went in its delivery log."""
    require_manager(actor, webhook.project)
    project = webhook.project
    probe = Event(
        project=project,
        number=0,
        type="webhook.test",
        data={
            "project": project.slug,
            "actor": {"type": "person", "username": actor.user.get_username()},
            "link": outbox.link(f"/p/{project.slug}/settings/"),
        },
        created_at=timezone.now(),
    )
    probe.pk = f"test_{timezone.now().strftime('%Y%m%d%H%M%S')}"
    with webhooks.http_client() as client:
        sent = webhooks.send(webhook, probe, client)
    now = timezone.now()
    return Delivery.objects.create(
        webhook=webhook,
        event=None,
        status=DeliveryStatus.DELIVERED if sent.ok else DeliveryStatus.FAILED,
        attempts=1,
        last_attempt_at=now,
        last_status=sent.status,
        last_ms=sent.ms,
        last_error=sent.error,
        delivered_at=now if sent.ok else None,
    )
