"""Login throttling: after repeated failed logins the same username from the same address (or
any username from one address) is refused for a while, using Django's cache."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache

FAILURES_PER_USER_AND_ADDRESS = 5
FAILURES_PER_ADDRESS = 50
WINDOW_SECONDS = 15 * 60


def client_address(request) -> str:
    """The client's address. Directly exposed, REMOTE_ADDR: X-Forwarded-For is whatever the
    client sends, and trusting it would let anyone pick a fresh address per attempt. Behind
    the reverse proxy (MEMORY_PORTAL_BEHIND_PROXY), REMOTE_ADDR is the proxy for everyone, so
    the last X-Forwarded-For entry — the address the proxy itself saw — is used instead."""
    if settings.BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-1]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _keys(username: str, address: str) -> tuple[str, str]:
    who = hashlib.sha256(f"{username.strip().lower()}|{address}".encode()).hexdigest()[:32]
    return f"login-fail:pair:{who}", f"login-fail:addr:{address}"


def is_locked(username: str, address: str) -> bool:
    pair, addr = _keys(username, address)
    counts = cache.get_many([pair, addr])
    return (
        counts.get(pair, 0) >= FAILURES_PER_USER_AND_ADDRESS
        or counts.get(addr, 0) >= FAILURES_PER_ADDRESS
    )


def record_failure(username: str, address: str) -> None:
    for key in _keys(username, address):
        # add() starts the window on the first failure; incr() never extends it.
        cache.add(key, 0, WINDOW_SECONDS)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, WINDOW_SECONDS)


def reset(username: str, address: str) -> None:
    pair, _ = _keys(username, address)
    cache.delete(pair)
