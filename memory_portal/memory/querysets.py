"""The query rules of notes: the one "expired" rule (a note expires once its expiry is
reached; no expiry, never), content a person refused, and the note queryset. Re-exported by
models.py."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from .choices import REASON_VETOED, Status, Trust

# The two Qs and the check of one value below are the expiry rule, each the others' complement.


def expired_q(now=None) -> Q:
    """Notes whose expiry has been reached."""
    return Q(expires_at__lte=now or timezone.now())


def not_expired_q(now=None) -> Q:
    """Notes without an expiry or whose expiry is still ahead."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=now or timezone.now())


def is_expired(expires_at, now=None) -> bool:
    """The rule for one note's expiry."""
    return expires_at is not None and expires_at <= (now or timezone.now())


def refused_q() -> Q:
    """Notes whose content a person removed (forgotten, rejected or vetoed): that content never
    comes back live, whether written again, imported or brought back by a revert."""
    return (
        Q(status=Status.FORGOTTEN)
        | Q(trust=Trust.REJECTED)
        | Q(status=Status.ARCHIVED, archive_reason=REASON_VETOED)
    )


class NoteQuerySet(models.QuerySet):
    def live(self, now=None):
        """Active, not expired, not rejected (the daily review's working set; what agents are
        served is decided by selectors.agent_visible_q)."""
        return self.filter(not_expired_q(now), status=Status.ACTIVE).exclude(trust=Trust.REJECTED)
