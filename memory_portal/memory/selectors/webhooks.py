"""A project's webhook endpoints and their deliveries, as its managers read them."""

from __future__ import annotations

from django.db.models import QuerySet

from ..access import require_manager
from ..actors import Actor
from ..errors import MemoryPortalError
from ..models import Delivery, Project, Webhook

DELIVERIES_SHOWN = 50


def _not_found(what: str, value) -> MemoryPortalError:
    return MemoryPortalError("not_found", f"No {what} {value} in this project.")


def webhooks_of(*, actor: Actor, project: Project) -> QuerySet[Webhook]:
    require_manager(actor, project)
    return Webhook.objects.filter(project=project).order_by("created_at", "id")


def webhook_in_project(*, actor: Actor, project: Project, webhook_id: str) -> Webhook:
    webhook = webhooks_of(actor=actor, project=project).filter(pk=webhook_id).first()
    if webhook is None:
        raise _not_found("webhook", webhook_id)
    webhook.project = project
    return webhook


def webhook_deliveries(*, actor: Actor, webhook: Webhook) -> list[Delivery]:
    """The endpoint's last deliveries, newest first, with their events."""
    require_manager(actor, webhook.project)
    return list(
        Delivery.objects.filter(webhook=webhook)
        .select_related("event")
        .order_by("-created_at", "-id")[:DELIVERIES_SHOWN]
    )


def delivery_of(*, actor: Actor, webhook: Webhook, delivery_id: int) -> Delivery:
    require_manager(actor, webhook.project)
    delivery = (
        Delivery.objects.filter(webhook=webhook, pk=delivery_id)
        .select_related("event", "webhook__project")
        .first()
    )
    if delivery is None:
        raise _not_found("delivery", delivery_id)
    return delivery
