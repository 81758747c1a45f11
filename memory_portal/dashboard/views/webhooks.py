"""A project's webhook endpoints on its Settings page (managers): add one (its secret shown
on the answer, once), pause or resume, send a test event, rotate the secret, delete, and retry
a delivery. Plain POST forms; the page is the answer for what shows a secret (no redirect
carries it), a message after a redirect for the rest."""

from __future__ import annotations

from django.urls import reverse

from memory_portal.memory import selectors, services
from memory_portal.memory.errors import MemoryPortalError

from .base import actor_of, done, not_found_edge, project_action, refusal
from .pages import settings_page

VERBS = ("pause", "resume", "test", "rotate", "delete")


def _page(access) -> str:
    return reverse("dashboard:settings", args=[access.project.slug]) + "#webhooks"


@project_action
def webhook_create(request, access):
    actor = actor_of(request)
    form = {
        "url": request.POST.get("url", ""),
        "event_types": request.POST.getlist("event_types"),
        "description": request.POST.get("description", ""),
        "format": request.POST.get("format", "standard"),
    }
    try:
        webhook, secret = services.webhook_create(actor=actor, project=access.project, **form)
    except MemoryPortalError as err:
        if err.code != "memory_invalid":
            return refusal(request, err, to=_page(access))
        return settings_page(request, access, status=400, webhook_form=form, webhook_error=err)
    return settings_page(request, access, new_secret={"webhook": webhook, "secret": secret})


@project_action
def webhook_action(request, access, webhook_id: str, verb: str):
    actor = actor_of(request)
    page = _page(access)
    try:
        webhook = selectors.webhook_in_project(
            actor=actor, project=access.project, webhook_id=webhook_id
        )
        if verb in ("pause", "resume"):
            services.webhook_change(actor=actor, webhook=webhook, active=verb == "resume")
            return done(request, page, f"Webhook {webhook.pk} {verb}d.")
        if verb == "test":
            sent = services.webhook_test(actor=actor, webhook=webhook)
            said = "delivered" if sent.status == "delivered" else (
                f"not delivered ({sent.last_error or sent.last_status})"
            )
            return done(request, page, f"Test event to {webhook.pk}: {said}.")
        if verb == "rotate":
            secret = services.webhook_rotate(actor=actor, webhook=webhook)
            return settings_page(request, access, new_secret={"webhook": webhook, "secret": secret})
        if verb == "delete":
            services.webhook_delete(actor=actor, webhook=webhook)
            return done(request, page, f"Deleted webhook {webhook.pk}.")
    except MemoryPortalError as err:
        not_found_edge(err)
        return refusal(request, err, to=page)
    return refusal(request, "Unknown action.", to=page)


@project_action
def delivery_retry(request, access, webhook_id: str, delivery_id: str):
    actor = actor_of(request)
    page = _page(access)
    if not delivery_id.isdigit() or len(delivery_id) > 18:
        return refusal(request, "No such delivery.", to=page)
    try:
        webhook = selectors.webhook_in_project(
            actor=actor, project=access.project, webhook_id=webhook_id
        )
        delivery = selectors.delivery_of(
            actor=actor, webhook=webhook, delivery_id=int(delivery_id)
        )
        services.delivery_retry(actor=actor, delivery=delivery)
    except MemoryPortalError as err:
        not_found_edge(err)
        return refusal(request, err, to=page)
    return done(request, page, f"Delivery {delivery_id} is sent again within moments.")

