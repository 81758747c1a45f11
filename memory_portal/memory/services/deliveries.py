"""Delivering the outbox to webhooks (SPEC §2.12): at least once, after commit, never inside a
change's transaction, off the request.

`deliver_due()` is one pass: each active endpoint's new events become its deliveries (the
endpoint's `cursor` is the last event number handed out; its row lock, taken with SKIP LOCKED,
makes each event one delivery even with several workers), then every delivery that is due is
leased (a minute: a process that dies mid-send gives it back) and sent, 10 s an attempt. A
timeout, a connection error, a 5xx or a 429 is tried again later (`BACKOFF`, about a day in
all; a receiver's Retry-After is honoured when it asks for longer); any other answer ends it.
An endpoint whose deliveries have failed for a day with none getting through is switched off,
audited, and its project's managers see why on its page.

Who runs the passes: with MEMORY_PORTAL_TASKS=immediate, one background thread per process,
woken after each commit that appended events to a project with an active endpoint, and every
`POLL_SECONDS` for retries; with `database`, a `webhooks_deliver` task queued the same way and
by the routine runner (`memory_run_due_routines`) for retries."""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import timedelta

from django.db import close_old_connections, connections, transaction
from django.db.models import Q
from django.dispatch import receiver
from django.tasks import task
from django.utils import timezone

from .. import outbox, webhooks
from ..access import require_manager
from ..actors import Actor
from ..errors import invalid
from ..models import Delivery, DeliveryStatus, Event, MemorySetting, Webhook
from ._common import tasks_run_in_process
from .notifications import alerts_send
from .webhooks import webhook_switch_off

log = logging.getLogger(__name__)

# Seconds before attempt 2, 3, …: about a day in all, then it has failed.
BACKOFF = (10, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 28800)
LEASE_SECONDS = 60
FAN_OUT_BATCH = 500
SEND_BATCH = 50
SWITCH_OFF_AFTER = timedelta(days=1)
POLL_SECONDS = 30.0


def fan_out(*, now=None) -> int:
    """Each active endpoint's events since its cursor, of the types it wants, as pending
    deliveries; the cursor moves past every event looked at, FAN_OUT_BATCH at a time until it
    has caught up. Returns the deliveries made."""
    now = now or timezone.now()
    made = 0
    for webhook_id in Webhook.objects.filter(active=True).values_list("pk", flat=True):
        while (batch := _fan_out_batch(webhook_id, now)) is not None:
            made += batch
    return made


def _fan_out_batch(webhook_id: str, now) -> int | None:
    """One batch of an endpoint's new events as deliveries; None when it has caught up (or
    another pass holds it)."""
    with transaction.atomic():
        webhook = (
            Webhook.objects.select_for_update(skip_locked=True)
            .filter(pk=webhook_id, active=True)
            .first()
        )
        if webhook is None:
            return None
        events = list(
            Event.objects.filter(project_id=webhook.project_id, number__gt=webhook.cursor)
            .order_by("number")
            .values_list("pk", "number", "type")[:FAN_OUT_BATCH]
        )
        if not events:
            return None
        wanted = set(webhook.event_types)
        rows = [
            Delivery(webhook=webhook, event_id=pk, next_attempt_at=now)
            for pk, _number, kind in events
            if kind in wanted
        ]
        Delivery.objects.bulk_create(rows, ignore_conflicts=True)
        webhook.cursor = events[-1][1]
        webhook.save(update_fields=["cursor"])
        return len(rows)


def _lease(now) -> list[Delivery]:
    """Up to SEND_BATCH due deliveries of active endpoints, leased to this pass."""
    with transaction.atomic():
        due = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                Q(status=DeliveryStatus.PENDING) | Q(status=DeliveryStatus.SENDING),
                next_attempt_at__lte=now,
                webhook__active=True,
            )
            .select_related("webhook", "event")
            .order_by("next_attempt_at", "id")[:SEND_BATCH]
        )
        if due:
            Delivery.objects.filter(pk__in=[d.pk for d in due]).update(
                status=DeliveryStatus.SENDING,
                next_attempt_at=now + timedelta(seconds=LEASE_SECONDS),
            )
    return due


def send_due(*, now=None) -> int:
    """Send every due delivery (in batches) once; returns how many were attempted."""
    attempted = 0
    with webhooks.http_client() as client:
        while True:
            due = _lease(now or timezone.now())
            if not due:
                return attempted
            for delivery in due:
                attempt(delivery, client=client)
                attempted += 1
            if now is not None:  # a pass at a fixed time (tests, --now) sends each once
                return attempted


def attempt(delivery: Delivery, *, client) -> webhooks.Sent:
    """One attempt of `delivery`, recorded: delivered, tried again later, or failed."""
    webhook = delivery.webhook
    sent = webhooks.send(webhook, delivery.event, client)
    now = timezone.now()
    delivery.attempts += 1
    delivery.last_status = sent.status
    delivery.last_ms = sent.ms
    delivery.last_error = sent.error
    delivery.last_attempt_at = now
    if sent.ok:
        delivery.status = DeliveryStatus.DELIVERED
        delivery.delivered_at = now
        delivery.next_attempt_at = None
    elif sent.retryable and delivery.attempts <= len(BACKOFF):
        wait = BACKOFF[delivery.attempts - 1]
        if sent.retry_after is not None:
            wait = max(wait, min(sent.retry_after, BACKOFF[-1]))
        delivery.status = DeliveryStatus.PENDING
        delivery.next_attempt_at = now + timedelta(seconds=wait)
    else:
        delivery.status = DeliveryStatus.FAILED
        delivery.next_attempt_at = None
    # An update, not a save: the endpoint (and with it this delivery) may have been deleted
    # while it was being sent.
    Delivery.objects.filter(pk=delivery.pk).update(
        attempts=delivery.attempts, last_status=sent.status, last_ms=sent.ms,
        last_error=sent.error, last_attempt_at=now, status=delivery.status,
        delivered_at=delivery.delivered_at, next_attempt_at=delivery.next_attempt_at,
    )  # fmt: skip
    _health(webhook, ok=sent.ok, now=now)
    return sent


def _health(webhook: Webhook, *, ok: bool, now) -> None:
    """An endpoint that got a delivery through is healthy; one that has failed for a day
    with none through is switched off (audited; its page says why)."""
    if ok:
        if webhook.failing_since is not None:
            Webhook.objects.filter(pk=webhook.pk).update(failing_since=None)
        return
    if webhook.failing_since is None:
        Webhook.objects.filter(pk=webhook.pk, failing_since=None).update(failing_since=now)
        return
    if now - webhook.failing_since < SWITCH_OFF_AFTER or not webhook.active:
        return
    webhook_switch_off(webhook=webhook, reason="failing for a day")


def deliver_due(*, now=None) -> tuple[int, int]:
    """One pass: (deliveries made, deliveries attempted); people's email alerts of the same
    events go with it (services/notifications.py)."""
    made, attempted = fan_out(now=now), send_due(now=now)
    alerts_send()
    return made, attempted


# --- Who runs the passes ------------------------------------------------------------------


@task
def webhooks_deliver() -> None:
    """The queued pass (MEMORY_PORTAL_TASKS=database)."""
    deliver_due()


class BackgroundDeliveries:
    """One daemon thread per process (MEMORY_PORTAL_TASKS=immediate): a pass when woken,
    and every POLL_SECONDS for the retries that came due. Paused (`pause`), it is not started,
    and a running one ends instead of making another pass."""

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()
        # The test suite runs its passes by hand: a thread of its own would reach into the
        # next test's database.
        self.paused = False

    def pause(self) -> None:
        self.paused = True
        self._wake.set()  # a thread waiting out its poll ends now

    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def kick(self) -> None:
        if self.paused:
            return
        with self._lock:
            if self._pid != os.getpid() or self._thread is None or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="memory-portal-webhooks", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(POLL_SECONDS)
            self._wake.clear()
            if self.paused:
                return
            try:
                close_old_connections()
                deliver_due()
            except Exception:  # noqa: BLE001 - the thread lives on; the next pass retries
                log.exception("a webhook delivery pass failed; the next one retries")
            finally:
                connections.close_all()  # this thread's: an idle thread holds no connection
            time.sleep(0.05)


background = BackgroundDeliveries()


def kick(project_id: int | None = None) -> None:
    """Deliver what is due soon: wake this process's delivery thread, or queue a pass for the
    workers. `project_id`: only when that project has a listener (its setting row counts the
    active endpoints and the people with alerts)."""
    if (
        project_id is not None
        and not MemorySetting.objects.filter(
            MemorySetting.LISTENED, project_id=project_id
        ).exists()
    ):
        return
    if tasks_run_in_process():
        background.kick()
        return
    try:
        webhooks_deliver.enqueue()
    except Exception:  # noqa: BLE001 - the routine runner's pass delivers them
        log.exception("could not queue a webhook delivery pass")


@receiver(outbox.events_committed, dispatch_uid="memory_portal.deliveries")
def _deliver_soon(sender, project_id: int, **kwargs) -> None:
    kick()


def delivery_retry(*, actor: Actor, delivery: Delivery) -> Delivery:
    """Send a pending or failed delivery again at the next pass (soon)."""
    require_manager(actor, delivery.webhook.project)
    if delivery.event_id is None:
        raise invalid("deliveryId", "A test delivery is sent again with Send a test event.")
    Delivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.PENDING, next_attempt_at=timezone.now()
    )
    delivery.refresh_from_db()
    kick()
    return delivery
