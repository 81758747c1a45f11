"""Email from the portal (SPEC §2.12): the daily digest, alerts of the events a person chose,
and the notice that a webhook endpoint was switched off. Plain text, through Django's email
backend (EMAIL_URL); ids, names, counts and links — never a note's content.

Every message carries a one-click unsubscribe: a signed link in its text and in its
`List-Unsubscribe` header with `List-Unsubscribe-Post` (RFC 8058), so a mail client's own
button works. The link names the person, the projects and what to stop (the digest or the
alerts); it does not expire — an old email's link still works — and it can do nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMessage, mailers
from django.template.loader import render_to_string

from .outbox import link

SALT = "memory_portal.unsubscribe"
DIGEST = "digest"
ALERTS = "alerts"


@dataclass(frozen=True)
class Unsubscribe:
    """What an unsubscribe link stops: `what` (DIGEST or ALERTS) of `project_ids` for a person."""

    user_id: int
    project_ids: tuple[int, ...]
    what: str


def unsubscribe_token(user_id: int, project_ids, what: str) -> str:
    return signing.dumps(
        {"u": user_id, "p": sorted(set(project_ids)), "w": what}, salt=SALT, compress=True
    )


def unsubscribe_read(token: str) -> Unsubscribe | None:
    """The link's content, or None when it was not signed here (or is mangled)."""
    try:
        found = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    if not isinstance(found, dict) or found.get("w") not in (DIGEST, ALERTS):
        return None
    user_id, project_ids = found.get("u"), found.get("p")
    if not isinstance(user_id, int) or not isinstance(project_ids, list):
        return None
    if not all(isinstance(p, int) for p in project_ids):
        return None
    return Unsubscribe(user_id, tuple(project_ids), found["w"])


def unsubscribe_link(token: str) -> str:
    return link(f"/notifications/unsubscribe/{token}/")


def enabled() -> bool:
    """Email is configured (EMAIL_URL), or printed to the console under DEBUG."""
    return settings.EMAIL_ENABLED


def message(*, to: str, subject: str, template: str, context: dict, token: str) -> EmailMessage:
    """One email to one person, its unsubscribe link (`token`) in the text and the headers."""
    unsubscribe = unsubscribe_link(token)
    body = render_to_string(
        template,
        {
            **context,
            "unsubscribe_url": unsubscribe,
            "notifications_url": link("/notifications/"),
        },
    )
    return EmailMessage(
        subject=subject,
        body=body,
        to=[to],
        headers={
            "List-Unsubscribe": f"<{unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        },
    )


def send(messages: list[EmailMessage]) -> int:
    """Send `messages` over one connection; raises when the server refuses or cannot be
    reached (the caller keeps what was not sent for the next pass)."""
    if not messages:
        return 0
    with mailers.default as connection:
        return connection.send_messages(messages) or 0
