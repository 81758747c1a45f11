"""Login throttling: after repeated failed logins the same username from the same address (or
any username from one address) is refused for a while. The counts live in the database
(`LoginThrottle`), one row per key, shared by every worker process. An attempt takes its place
before the password is checked, under the rows' locks, so at most FAILURES_PER_USER_AND_ADDRESS
passwords are checked per window however many attempts arrive at once; a successful login gives
its place back."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .models import LoginThrottle

FAILURES_PER_USER_AND_ADDRESS = 5
FAILURES_PER_ADDRESS = 50
WINDOW_SECONDS = 15 * 60


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def _keys(username: str, address: str) -> tuple[str, str]:
    return f"pair:{_digest(f'{username.strip().lower()}|{address}')}", f"addr:{_digest(address)}"


def _locked(key: str, now) -> LoginThrottle:
    """The key's row, locked for this transaction, its window restarted if it has ended."""
    LoginThrottle.objects.get_or_create(
        key=key, defaults={"window_ends_at": now + timedelta(seconds=WINDOW_SECONDS)}
    )
    row = LoginThrottle.objects.select_for_update().get(key=key)
    if row.window_ends_at <= now:
        row.attempts = 0
        row.window_ends_at = now + timedelta(seconds=WINDOW_SECONDS)
        row.save(update_fields=["attempts", "window_ends_at"])
    return row


def attempt_begin(username: str, address: str) -> bool:
    """Take one attempt from the pair's and the address's allowance, atomically. True: the
    password may be checked (a failure keeps the attempt counted). False: either allowance is
    used up for this window, and nothing was taken."""
    now = timezone.now()
    # Rows whose window ended a window ago are of no use to anyone.
    LoginThrottle.objects.filter(
        window_ends_at__lte=now - timedelta(seconds=WINDOW_SECONDS)
    ).delete()
    pair, addr = _keys(username, address)
    with transaction.atomic():
        # Always the pair's row first, then the address's: one lock order, no deadlock.
        if _locked(pair, now).attempts >= FAILURES_PER_USER_AND_ADDRESS:
            return False
        if _locked(addr, now).attempts >= FAILURES_PER_ADDRESS:
            return False
        LoginThrottle.objects.filter(key__in=[pair, addr]).update(attempts=F("attempts") + 1)
    return True


def attempt_succeeded(username: str, address: str) -> None:
    """A successful login clears the pair's failures and gives the address its attempt back."""
    pair, addr = _keys(username, address)
    with transaction.atomic():
        LoginThrottle.objects.filter(key=pair).delete()
        LoginThrottle.objects.filter(key=addr, attempts__gt=0).update(
            attempts=F("attempts") - 1
        )
