"""Webhooks (SPEC §2.12): an endpoint's address checked, its signing secret kept, and one
delivery sent — signed the Standard Webhooks way (`webhook-id`, `webhook-timestamp`,
`webhook-signature`; the `standardwebhooks` package signs), or as a chat message (`{"text"}`
for Slack or Mattermost incoming webhooks). Which events go to which endpoint, and when, is
services/deliveries.py.

The secret (`whsec_` and 24 random bytes, base64) is shown once when it is made. It must be
read to sign, so it is stored encrypted (Fernet, with a key derived from SECRET_KEY) and never
shown or answered again; a new SECRET_KEY makes every endpoint's secret unreadable (rotate
them). Addresses on loopback, private, link-local or otherwise reserved networks are refused,
when the endpoint is made and again before each delivery (a name can change what it resolves
to), unless MEMORY_PORTAL_WEBHOOK_ALLOW_PRIVATE; a delivery never follows a redirect."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from standardwebhooks import Webhook as Signer

from .errors import MemoryPortalError, invalid
from .models import Event

SECRET_PREFIX = "whsec_"
URL_MAX = 2000
TIMEOUT_SECONDS = 10.0
USER_AGENT = "MemoryPortal-Webhooks/1"


# --- The address --------------------------------------------------------------------------


def _private(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def _allow_private() -> bool:
    return settings.MEMORY_PORTAL["WEBHOOK_ALLOW_PRIVATE"]


def check_url(url: str) -> str:
    """The endpoint's URL, checked: http or https, a host, no credentials in it, at most 2,000
    characters, and (unless private addresses are allowed) a host that resolves to public
    addresses only. A bad one is `memory_invalid` on the field `url`."""
    url = (url or "").strip()
    if not url or len(url) > URL_MAX:
        raise invalid("url", f"url must be 1 to {URL_MAX} characters.")
    try:
        parts = urlsplit(url)
        host, port = _host_port(url)  # a port out of range or not a number: ValueError
    except ValueError:
        raise invalid("url", "url is not a URL.") from None
    if parts.scheme not in ("http", "https"):
        raise invalid("url", "url must start with http:// or https://.")
    if not parts.hostname:
        raise invalid("url", "url must name a host.")
    if parts.username or parts.password:
        raise invalid("url", "url must not carry a user or password; send the token in its path.")
    refuse_private(host, port)
    return url


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def refuse_private(host: str, port: int) -> None:
    """Refuse a host on a loopback, private, link-local or reserved network (server-side
    request forgery), unless MEMORY_PORTAL_WEBHOOK_ALLOW_PRIVATE."""
    if _allow_private():
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise MemoryPortalError(
            "memory_invalid",
            f"The host {host} does not resolve.",
            field="url",
            hint="Check the address; the server must be able to resolve it.",
        ) from None
    if any(_private(info[4][0]) for info in infos):
        raise MemoryPortalError(
            "memory_invalid",
            f"The host {host} is on a private, loopback or link-local network.",
            field="url",
            hint="Use a public address, or set MEMORY_PORTAL_WEBHOOK_ALLOW_PRIVATE=true for "
            "receivers inside your network.",
        )


def masked(url: str) -> str:
    """The URL as it may be shown after it was made: its query string (where chat hooks carry
    their token) and all but the start of its path hidden."""
    parts = urlsplit(url)
    path = parts.path if len(parts.path) <= 12 else parts.path[:12] + "…"
    return f"{parts.scheme}://{parts.netloc}{path}{'?…' if parts.query else ''}"


# --- The secret ---------------------------------------------------------------------------


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def _fernet() -> Fernet:
    key = hashlib.sha256(f"memory-portal webhooks\n{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def unseal(sealed: str) -> str | None:
    """The secret, or None when it cannot be read (SECRET_KEY changed): rotate it."""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        return None


# --- One delivery -------------------------------------------------------------------------


def message_id(event: Event) -> str:
    """The `webhook-id` of an event: the same for every attempt and every endpoint, so a
    consumer can drop a repeat."""
    return f"evt_{event.pk}"


def payload(event: Event) -> dict:
    """The Standard Webhooks body: type, timestamp, data (the event's, with its number)."""
    data = {**event.data, "number": event.number}
    return {
        "type": event.type,
        "timestamp": event.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": data,
    }


def chat_text(event: Event) -> str:
    """One line for a chat channel: who did what, how many, and the link; never content."""
    data = event.data
    actor = data.get("actor", {})
    who = actor.get("username") or actor.get("agentId") or "the portal"
    what = event.type.replace(".", " ").replace("_", " ")
    subject = ""
    if "note" in data:
        note = data["note"]
        subject = f" {note['kind']} {note['id']}"
        if note.get("agentId"):
            subject += f" (by {note['agentId']})"
    elif data.get("runId"):
        subject = f" {data['runId']}"
    counted = data.get("counts", {})
    if "digest" in data:  # the day's headline numbers
        digest = data["digest"]
        headline = ("awaiting", "written", "vetoed", "rejected")
        counted = {k: digest[k] for k in headline if k in digest}
    counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counted.items())
    tail = f" ({counts})" if counts else ""
    return (
        f"[{data.get('project', '')}] #{event.number} {what}:{subject}{tail} — {who}. "
        f"{data.get('link', '')}"
    ).strip()


@dataclass(frozen=True)
class Sent:
    """What one attempt came to: the receiver's status (0: no answer), the milliseconds it
    took, an error code (`timeout`, `connection`, `refused_address`), Retry-After seconds."""

    status: int
    ms: int
    error: str = ""
    retry_after: int | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def retryable(self) -> bool:
        return not self.ok and (self.status in (0, 429) or self.status >= 500)


def send(webhook, event: Event, client: httpx.Client) -> Sent:
    """POST one event to one endpoint (10 s), signed with its secret unless it is a chat
    hook."""
    url = webhook.url
    chat = webhook.format == "chat"
    secret = unseal(webhook.secret_sealed) if webhook.secret_sealed else None
    started = time.monotonic()
    try:
        refuse_private(*_host_port(url))
    except MemoryPortalError:
        return Sent(0, 0, "refused_address")
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if chat:
        body = json.dumps({"text": chat_text(event)})
    else:
        body = json.dumps(payload(event), separators=(",", ":"))
        if secret is None:
            return Sent(0, 0, "secret_unreadable")
        now = datetime.now(UTC)
        msg_id = message_id(event)
        headers.update(
            {
                "webhook-id": msg_id,
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": Signer(secret).sign(msg_id, now, body),
            }
        )
    try:
        answer = client.post(url, content=body.encode(), headers=headers)
    except httpx.TimeoutException:
        return Sent(0, _ms(started), "timeout")
    except httpx.HTTPError:
        return Sent(0, _ms(started), "connection")
    retry_after = answer.headers.get("retry-after", "")
    return Sent(
        answer.status_code,
        _ms(started),
        retry_after=int(retry_after) if retry_after.isdigit() else None,
    )


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def http_client() -> httpx.Client:
    return httpx.Client(timeout=TIMEOUT_SECONDS, follow_redirects=False)
