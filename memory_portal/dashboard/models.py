"""The dashboard's own table: the login throttle's counters (dashboard/throttling.py)."""

from __future__ import annotations

from django.db import models


class LoginThrottle(models.Model):
    """Log-in attempts counted in the current window, for one key: a username and client
    address pair, or a client address alone (both hashed). Kept in the database, so every
    worker process shares one count; each attempt is taken under the row's lock, so the count
    is exact however many attempts arrive at once."""

    key = models.CharField(max_length=64, unique=True)
    attempts = models.PositiveIntegerField(default=0)
    window_ends_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.attempts} until {self.window_ends_at:%H:%M}"
