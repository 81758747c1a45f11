"""Email (SPEC §2.12) through a real SMTP server on a local port (aiosmtpd): the daily digest
and alerts arrive with working links and a one-click unsubscribe, never a note's content; a
failed send is tried again by the next pass and a sent one never twice; a webhook endpoint
switched off is told to its managers; the digest's numbers (held notes apart, anomalies, the
cap) and its `review.digest` event."""

from __future__ import annotations

import logging
import socket
from datetime import datetime, timedelta
from email import message_from_bytes, policy
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from memory_portal.memory import emails, selectors, services
from memory_portal.memory.errors import MemoryPortalError
from memory_portal.memory.models import (
    AuditEvent,
    Event,
    MemorySetting,
    Note,
    NotificationSetting,
    Webhook,
)
from memory_portal.memory.selectors.notifications import WEBHOOK_OFF
from memory_portal.memory.services.webhooks import webhook_switch_off

BASE = "http://testserver"
SECRET_TEXT = "preview environments are deleted after 72 hours without a push"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mailbox:
    """What the SMTP server received, as parsed messages."""

    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK"

    def to(self, address: str) -> list:
        return [m for m in self.messages if m["To"] == address]


@pytest.fixture
def smtp(settings):
    """A real SMTP server on a local port, and the settings that send to it."""
    box = Mailbox()
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd's chatter
    port = _free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    _mail_to(settings, port)
    settings.EMAIL_ENABLED = True
    settings.MEMORY_PORTAL_BASE_URL = BASE
    settings.MEMORY_PORTAL = {
        **settings.MEMORY_PORTAL, "DIGEST_HOUR": 7, "WEBHOOK_ALLOW_PRIVATE": True
    }  # fmt: skip
    yield box
    controller.stop()


def _mail_to(settings, port: int) -> None:
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": port, "timeout": 5},
        }
    }


def _at(hour: int, days: int = 0) -> datetime:
    today = timezone.now().replace(hour=hour, minute=5, second=0, microsecond=0)
    return today + timedelta(days=days)


def _write(world, content: str, actor=None, kind="fact"):
    return services.note_write(actor=actor or world.as_agent, kind=kind, content=content).note


def _path(url: str) -> str:
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == BASE, url
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _links(text: str) -> list[str]:
    return [w for w in text.split() if w.startswith(BASE)]


def test_the_digest_arrives_once_with_working_links_and_no_content(world, smtp, client):
    note = _write(world, SECRET_TEXT)
    vetoed = _write(world, "the staging database is called pg-stage-2")
    services.note_veto(actor=world.as_manager, note_id=vetoed.pk)

    assert services.digests_send(now=_at(6)) == (0, 0)  # before the hour: nothing
    assert smtp.messages == []
    appended, sent = services.digests_send(now=_at(8))
    assert (appended, sent) == (1, 1)

    # The manager gets it by default, the member (no choice made) does not.
    [mail] = smtp.to(world.manager.email)
    assert smtp.to(world.member.email) == []
    body = mail.get_content()
    assert "Awaiting review: 1 note" in body
    assert "Runtime helper: 2" in body and "Vetoed: 1. Rejected: 0." in body
    assert SECRET_TEXT not in body and "pg-stage-2" not in body and note.pk not in body
    assert mail["Subject"] == "Memory Portal: 1 note awaiting review in Acme Web"
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    unsubscribe = mail["List-Unsubscribe"].strip("<>")
    assert unsubscribe in body

    # Its links open the review queue, the overview and the agent's page for the manager.
    client.force_login(world.manager)
    for url in _links(body):
        if "/unsubscribe/" in url:
            continue
        assert client.get(_path(url)).status_code == 200, url
    assert f"{BASE}/p/acme-web/review/" in body

    # The day's event: numbers and ids, no content.
    event = Event.objects.get(project=world.project, type="review.digest")
    assert event.data["digest"]["awaiting"] == 1
    assert event.data["digest"]["writtenByAgent"] == {world.agent.pk: 2}
    assert event.data["link"] == f"{BASE}/p/acme-web/review/"
    assert SECRET_TEXT not in str(event.data)

    # Later passes the same day send nothing more, and append no second event.
    assert services.digests_send(now=_at(9)) == (0, 0)
    assert len(smtp.messages) == 1
    assert Event.objects.filter(type="review.digest").count() == 1


def test_one_click_unsubscribe_from_the_mail_client(world, smtp, client):
    _write(world, "A fact to review")
    services.digests_send(now=_at(8))
    [mail] = smtp.to(world.manager.email)
    path = _path(mail["List-Unsubscribe"].strip("<>"))

    # Opening the link (a person, or a mail scanner) changes nothing: it asks.
    page = client.get(path)
    assert page.status_code == 200 and b"Unsubscribe" in page.content
    assert NotificationSetting.objects.get(user=world.manager, project=world.project).digest

    # The mail client's one-click POST (RFC 8058), no session, no CSRF token.
    answer = client.post(
        path, "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert answer.status_code == 200 and b"Unsubscribed" in answer.content
    row = NotificationSetting.objects.get(user=world.manager, project=world.project)
    assert row.digest is False and WEBHOOK_OFF in row.alerts  # only the digest stopped
    assert AuditEvent.objects.filter(action="notifications.set", actor_user=world.manager).exists()

    _write(world, "Another fact to review")
    assert services.digests_send(now=_at(8, days=1))[1] == 0

    # A link not signed here does nothing.
    assert client.post(path[:-6] + "xxxxx/").status_code == 404


def test_a_failed_send_is_tried_again_and_never_sent_twice(world, smtp, settings):
    _write(world, "A fact to review")
    listening = settings.MAILERS["default"]["OPTIONS"]["port"]
    _mail_to(settings, _free_port())  # nobody listens there
    assert services.digests_send(now=_at(8)) == (1, 0)
    row = NotificationSetting.objects.get(user=world.manager, project=world.project)
    assert row.digest_day is None  # given back

    _mail_to(settings, listening)
    assert services.digests_send(now=_at(8) + timedelta(minutes=10)) == (0, 1)
    assert services.digests_send(now=_at(8) + timedelta(minutes=20)) == (0, 0)
    assert len(smtp.to(world.manager.email)) == 1


def test_alerts_of_chosen_events_arrive_without_content(world, smtp, client):
    services.notifications_set(
        actor=world.as_member, project=world.project, digest=False, alerts=["note.vetoed"]
    )
    assert MemorySetting.objects.get(project=world.project).alerts_active == 1
    note = _write(world, SECRET_TEXT)
    services.note_veto(actor=world.as_manager, note_id=note.pk)
    services.note_forget(actor=world.as_manager, note_id=_write(world, "Forget me").pk)
    services.deliver_due()

    [mail] = smtp.to(world.member.email)
    assert mail["Subject"] == "Memory Portal [acme-web]: a note is vetoed"
    body = mail.get_content()
    assert "note vetoed: fact " + note.pk in body and world.manager.username in body
    assert SECRET_TEXT not in body and "Forget me" not in body
    client.force_login(world.member)
    assert client.get(_path(f"{BASE}/p/acme-web/notes/{note.pk}/")).status_code == 200
    assert mail["List-Unsubscribe"]
    assert smtp.to(world.manager.email) == []

    # Nothing new: no second email. A person is not alerted of their own action.
    services.deliver_due()
    services.notifications_set(
        actor=world.as_manager, project=world.project, digest=True, alerts=["note.vetoed"]
    )
    services.note_veto(actor=world.as_manager, note_id=_write(world, "Veto me").pk)
    services.deliver_due()
    assert len(smtp.to(world.member.email)) == 2
    assert smtp.to(world.manager.email) == []


def test_alerts_start_at_the_next_event_and_stop_when_unsubscribed(world, smtp, client):
    early = _write(world, "Written before the alerts were asked for")
    services.note_veto(actor=world.as_manager, note_id=early.pk)
    services.notifications_set(
        actor=world.as_member, project=world.project, digest=False,
        alerts=["note.written", "note.vetoed"],
    )  # fmt: skip
    _write(world, "Written after")
    services.deliver_due()
    [mail] = smtp.to(world.member.email)
    assert early.pk not in mail.get_content()

    path = _path(mail["List-Unsubscribe"].strip("<>"))
    client.post(path)
    row = NotificationSetting.objects.get(user=world.member, project=world.project)
    assert row.alerts == []
    assert MemorySetting.objects.get(project=world.project).alerts_active == 0
    _write(world, "Written after unsubscribing")
    services.deliver_due()
    assert len(smtp.to(world.member.email)) == 1


def test_a_webhook_switched_off_is_told_to_its_managers(
    world, smtp, django_capture_on_commit_callbacks
):
    webhook, _secret = services.webhook_create(
        actor=world.as_manager, project=world.project,
        url="http://127.0.0.1:9/hook?token=chat-secret", event_types=["note.vetoed"],
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        webhook_switch_off(webhook=webhook, reason="failing for a day")
    [mail] = smtp.to(world.manager.email)
    body = mail.get_content()
    assert "switched off: failing for a day" in body
    assert "chat-secret" not in body and f"{BASE}/p/acme-web/settings/" in body
    assert smtp.to(world.member.email) == []

    # The next digest lists it too.
    services.digests_send(now=_at(8))
    digest = smtp.to(world.manager.email)[-1].get_content()
    assert "Webhook endpoints switched off" in digest and "chat-secret" not in digest
    assert Webhook.objects.get(pk=webhook.pk).active is False


def test_nothing_to_tell_sends_nothing(world, smtp):
    assert services.digests_send(now=_at(8)) == (0, 0)
    assert smtp.messages == []
    assert MemorySetting.objects.get(project=world.project).digest_day == _at(8).date()


def test_without_email_configured_only_the_event_is_made(world, settings):
    settings.EMAIL_ENABLED = False
    _write(world, "A fact to review")
    assert services.digests_send(now=_at(8)) == (1, 0)
    assert not NotificationSetting.objects.exists()


# --- The digest's numbers ---------------------------------------------------------------------


def test_the_digest_counts_held_notes_apart_and_flags_what_is_unusual(world):
    services.memory_policy_set(actor=world.as_manager, project=world.project, policy="hold")
    now = timezone.now()
    baseline = [_write(world, f"Old fact {i}") for i in range(7)]  # one a day, the week before
    for i, note in enumerate(baseline):
        Note.objects.filter(pk=note.pk).update(created_at=now - timedelta(days=1.5 + i))
    for i in range(6):
        _write(world, f"New fact {i}")
    judged = [_write(world, f"Wrong fact {i}", actor=world.as_agent2) for i in range(5)]
    for note in judged:
        services.note_reject(actor=world.as_manager, note_id=note.pk)

    digest = selectors.project_digest(project=world.project, now=timezone.now())
    by_agent = {a.agent_id: a for a in digest.agents}
    assert by_agent[world.agent.pk].written == 6
    assert by_agent[world.agent.pk].daily_average == 1.0
    assert [a.agent_id for a in digest.spiking_agents] == [world.agent.pk]
    assert digest.rejected == 5 and digest.rejections_spiking is False  # no baseline: no spike
    assert digest.awaiting == 13
    assert digest.held == 13
    assert digest.cap_reached_on is not None
    event = digest.as_event(timezone.now())
    assert event["spikingAgents"] == [world.agent.pk] and event["held"] == 13


# --- The Notifications page ----------------------------------------------------------------------


def test_a_person_sees_and_changes_only_their_own_choices(world, client):
    client.force_login(world.member)
    page = client.get("/notifications/")
    assert page.status_code == 200
    assert b"Acme Web" in page.content and b"defaults of your role" in page.content

    answer = client.post(
        "/notifications/p/acme-web/", {"digest": "on", "alerts": ["note.vetoed", WEBHOOK_OFF]}
    )
    assert answer.status_code == 302
    row = NotificationSetting.objects.get(user=world.member, project=world.project)
    assert row.digest and row.alerts == ["note.vetoed", WEBHOOK_OFF]
    assert not NotificationSetting.objects.filter(user=world.manager).exists()

    refused = client.post("/notifications/p/acme-web/", {"alerts": ["note.eaten"]}, follow=True)
    assert b"Unknown alert note.eaten" in refused.content

    client.force_login(world.outsider)
    assert client.post("/notifications/p/acme-web/", {"digest": "on"}).status_code == 404
    assert b"Acme Web" not in client.get("/notifications/").content


def test_only_a_member_chooses_and_only_known_alerts(world):
    with pytest.raises(MemoryPortalError):
        services.notifications_set(
            actor=world.as_outsider, project=world.project, digest=True, alerts=[]
        )
    with pytest.raises(MemoryPortalError) as refused:
        services.notifications_set(
            actor=world.as_member, project=world.project, digest=True, alerts=["note.eaten"]
        )
    assert refused.value.field == "alerts"
    with pytest.raises(MemoryPortalError):
        services.notifications_set(
            actor=world.as_agent, project=world.project, digest=True, alerts=[]
        )


def test_an_unsubscribe_link_is_signed_and_names_what_it_stops():
    token = emails.unsubscribe_token(7, [3, 1, 3], emails.DIGEST)
    assert emails.unsubscribe_read(token) == emails.Unsubscribe(7, (1, 3), "digest")
    assert emails.unsubscribe_read(token[:-2] + "zz") is None
    assert emails.unsubscribe_read("not-a-token") is None
