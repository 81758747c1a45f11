"""Webhooks (SPEC §2.12) against a real HTTP receiver on a local port: signed deliveries a
consumer verifies with the `standardwebhooks` package, for every event type; retried after a 5xx
and while the receiver is down, none lost; the chat format; a failing endpoint switched off;
bad addresses refused. Delivery passes are run by the test (`deliver_due`), as the background
thread or the worker would."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone
from standardwebhooks import Webhook as Verifier

from memory_portal.memory import outbox, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import AuditEvent, Delivery, Event, MemorySetting, Webhook

pytestmark = pytest.mark.usefixtures("private_receivers")


@pytest.fixture
def private_receivers(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "WEBHOOK_ALLOW_PRIVATE": True}


class Receiver:
    """A local HTTP server that keeps every request and answers with `statuses` in turn (then
    200)."""

    def __init__(self):
        self.requests: list[tuple[dict, bytes]] = []
        self.statuses: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the server's name for it
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((dict(self.headers), body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/memory?token=abc"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self) -> list[dict]:
        return [json.loads(body) for _, body in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _hook(world, url, types=None, **kw):
    return services.webhook_create(
        actor=world.as_manager, project=world.project, url=url,
        event_types=types or list(outbox.TYPES), **kw,
    )  # fmt: skip


def test_every_event_type_arrives_signed_and_verifiable(world, receiver):
    webhook, secret = _hook(world, receiver.url)
    assert secret.startswith("whsec_") and secret not in webhook.secret_sealed
    m = world.as_manager
    note = services.note_write(actor=world.as_agent, kind="fact", content="Signed and sent").note
    edited = services.note_edit(actor=m, note_id=note.pk, content="Signed, edited").note
    services.note_approve(actor=m, note_id=edited.pk)
    services.note_veto(actor=world.as_member, note_id=edited.pk)
    services.note_undo(actor=world.as_member, note_id=edited.pk)
    other = services.note_write(actor=world.as_agent, kind="fact", content="Rejected one").note
    services.note_reject(actor=m, note_id=other.pk)
    services.note_unreview(actor=m, note_id=other.pk)
    recovery = services.note_forget(actor=m, note_id=other.pk)
    services.note_restore(actor=m, recovery_id=recovery.pk)
    services.note_write(actor=world.as_agent, kind="fact", content="Reverted later")
    _plan, revert = services.run_revert(actor=m, run=world.run, dry_run=False)
    services.run_revert_undo(actor=m, revert_id=revert.pk)
    services.memory_disable(actor=m, project=world.project)
    services.memory_enable(actor=m, project=world.project)
    services.memory_reset(actor=m, project=world.project)

    made, sent = services.deliver_due()
    assert made == sent == len(receiver.requests) > 0
    verifier = Verifier(secret)
    received = []
    for headers, body in receiver.requests:
        payload = verifier.verify(body, headers)  # raises on a bad signature
        assert headers["webhook-id"].startswith("evt_")
        received.append(payload)
    types = {p["type"] for p in received}
    assert types == set(outbox.TYPES) - {"review.digest"}
    numbers = sorted(p["data"]["number"] for p in received)
    assert numbers == list(range(1, len(numbers) + 1))
    text = json.dumps(received)
    for word in ("Signed and sent", "Rejected one", "Reverted later", "edited"):
        assert word not in text
    assert Delivery.objects.filter(status="delivered").count() == len(received)
    # Nothing is sent twice.
    assert services.deliver_due() == (0, 0)


def test_a_5xx_and_a_receiver_that_is_down_are_retried_and_nothing_is_lost(world, receiver):
    webhook, secret = _hook(world, receiver.url, ["note.written"])
    receiver.statuses = [503, 500]
    for i in range(3):
        services.note_write(actor=world.as_agent, kind="fact", content=f"Retried {i}")
    services.deliver_due()
    failing = Delivery.objects.filter(status="pending")
    assert failing.count() == 2 and all(d.last_status >= 500 for d in failing)
    assert Webhook.objects.get(pk=webhook.pk).failing_since is not None
    # The receiver is down: connection refused, retried later.
    port = receiver.server.server_port
    receiver.close()
    later = timezone.now() + timedelta(minutes=2)
    Delivery.objects.update(next_attempt_at=timezone.now())
    services.deliver_due(now=later)
    assert set(Delivery.objects.values_list("last_error", flat=True)) >= {"connection"}
    # It comes back on the same port: every event arrives, once each.
    back = Receiver.__new__(Receiver)
    Receiver.__init__(back)
    try:
        webhook.url = f"http://127.0.0.1:{back.server.server_port}/"
        webhook.save(update_fields=["url"])
        Delivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())
        services.deliver_due()
        got = {p["data"]["note"]["id"] for p in back.bodies()}
        got |= {p["data"]["note"]["id"] for p in receiver.bodies()}
        assert len(got) == 3
        assert Delivery.objects.filter(status="delivered").count() == 3
        assert Webhook.objects.get(pk=webhook.pk).failing_since is None
    finally:
        back.close()
    assert port


def test_a_4xx_is_not_retried_and_an_endpoint_failing_for_a_day_is_switched_off(
    world, receiver
):
    webhook, _ = _hook(world, receiver.url, ["note.written"])
    receiver.statuses = [410, 500]
    services.note_write(actor=world.as_agent, kind="fact", content="Gone for good")
    services.note_write(actor=world.as_agent, kind="fact", content="Still failing")
    services.deliver_due()
    assert sorted(Delivery.objects.values_list("status", flat=True)) == ["failed", "pending"]
    Webhook.objects.filter(pk=webhook.pk).update(failing_since=timezone.now() - timedelta(days=2))
    receiver.statuses = [500]
    Delivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())
    services.deliver_due()
    webhook.refresh_from_db()
    assert not webhook.active and webhook.disabled_reason == "failing for a day"
    assert AuditEvent.objects.filter(action="webhook.off", target_ref=webhook.pk).exists()
    assert MemorySetting.objects.get(project=world.project).webhooks_active == 0


def test_the_chat_format_posts_text_without_content(world, receiver, caplog):
    import logging

    caplog.set_level(logging.INFO)
    _hook(world, receiver.url, ["note.vetoed"], format="chat")
    note = services.note_write(actor=world.as_agent, kind="fact", content="Chat-safe?").note
    services.note_veto(actor=world.as_member, note_id=note.pk)
    services.deliver_due()
    # A chat hook's token rides in its URL's query string: no log line holds the URL.
    assert "token=abc" not in caplog.text and "/hooks/memory" not in caplog.text
    (body,) = receiver.bodies()
    assert set(body) == {"text"}
    assert "note vetoed" in body["text"] and note.pk in body["text"]
    assert world.member.username in body["text"] and "Chat-safe" not in body["text"]
    headers, _ = receiver.requests[0]
    assert "webhook-signature" not in {k.lower() for k in headers}


def test_a_test_event_and_a_retry_now(world, receiver):
    webhook, secret = _hook(world, receiver.url, ["note.written"])
    test = services.webhook_test(actor=world.as_manager, webhook=webhook)
    assert test.status == "delivered" and test.last_status == 200
    payload = Verifier(secret).verify(receiver.requests[0][1], receiver.requests[0][0])
    assert payload["type"] == "webhook.test"
    receiver.statuses = [500]
    services.note_write(actor=world.as_agent, kind="fact", content="Retry me now")
    services.deliver_due()
    pending = Delivery.objects.get(event__isnull=False)
    assert pending.status == "pending" and pending.next_attempt_at > timezone.now()
    services.delivery_retry(actor=world.as_manager, delivery=pending)
    services.deliver_due()
    pending.refresh_from_db()
    assert pending.status == "delivered" and pending.attempts == 2


def test_bad_endpoints_are_refused_with_nothing_created(world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "WEBHOOK_ALLOW_PRIVATE": False}
    bad = {
        "ftp://example.com/x": "http",
        "http://127.0.0.1:9/x": "private",
        "http://10.1.2.3/x": "private",
        "http://169.254.169.254/latest": "private",
        "http://[::1]/x": "private",
        "https://user:pw@example.com/x": "user or password",
        "not a url": "http",
        "http://hooks.example:99999/x": "not a url",
    }
    for url, said in bad.items():
        with pytest.raises(MemoryPortalError) as refused:
            _hook(world, url)
        assert refused.value.field == "url" and said in refused.value.message.lower() + (
            refused.value.message
        ), (url, refused.value.message)
    with pytest.raises(MemoryPortalError) as refused:
        services.webhook_create(
            actor=world.as_manager, project=world.project, url="https://example.com/x",
            event_types=["note.smudged"],
        )  # fmt: skip
    assert refused.value.field == "eventTypes"
    with pytest.raises(MemoryPortalError) as refused:
        services.webhook_create(
            actor=world.as_member, project=world.project, url="https://example.com/x",
            event_types=["note.written"],
        )  # fmt: skip
    assert refused.value.code == "memory_forbidden"
    assert not Webhook.objects.exists()


def test_at_most_twenty_endpoints_a_project(world, receiver):
    for _ in range(services.WEBHOOKS_MAX):
        _hook(world, receiver.url, ["note.written"])
    with pytest.raises(MemoryPortalError) as refused:
        _hook(world, receiver.url, ["note.written"])
    assert "20 webhook endpoints" in refused.value.message
    assert Webhook.objects.count() == 20
    assert MemorySetting.objects.get(project=world.project).webhooks_active == 20


@pytest.mark.django_db(transaction=True)
def test_a_paused_delivery_thread_ends_instead_of_polling_again():
    """The suite pauses the delivery thread after a test wakes it: it ends rather than poll
    every 30 s into whatever database the next test has."""
    import time

    from memory_portal.memory.services import deliveries

    deliveries.background.paused = False
    deliveries.background.kick()
    assert deliveries.background.running()
    deliveries.background.pause()
    deadline = time.monotonic() + 5
    while deliveries.background.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not deliveries.background.running()


@pytest.mark.django_db(transaction=True)
def test_a_commit_wakes_the_background_thread_which_delivers_1000_events_in_time(
    world, receiver, settings
):
    """MEMORY_PORTAL_TASKS=immediate: nobody runs a pass by hand; a commit that appends events
    to a project with an endpoint wakes the process's delivery thread. 1,000 events, written
    while it slept, reach the receiver within 60 s of the commit that wakes it."""
    import time

    from memory_portal.memory.services import deliveries

    _hook(world, receiver.url, ["note.written"])
    # 999 events as the outbox holds them, appended as set-up (the write path that appends
    # them is tested above and in test_outbox.py); the 1,000th by a real write, whose commit
    # wakes the thread.
    first = services.note_write(actor=world.as_agent, kind="fact", content="The first").note
    template = Event.objects.get(project=world.project)
    Event.objects.bulk_create(
        Event(project=world.project, number=n, type="note.written", data=template.data)
        for n in range(2, 1000)
    )
    MemorySetting.objects.filter(project=world.project).update(event_seq=999)
    assert first and not receiver.requests
    deliveries.background.paused = False
    started = time.monotonic()
    services.note_write(actor=world.as_agent, kind="fact", content="The one that wakes it")
    while len(receiver.requests) < 1000 and time.monotonic() - started < 60:
        time.sleep(0.1)
    took = time.monotonic() - started
    deliveries.background.pause()
    assert len(receiver.requests) == 1000, (len(receiver.requests), took)
    numbers = sorted(p["data"]["number"] for p in receiver.bodies())
    assert numbers == list(range(1, 1001))
    assert took < 60
