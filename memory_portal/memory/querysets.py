"""The query rules of notes: the one "expired" rule (a note expires once its expiry is
reached; no expiry, never), the one "same content" rule (a live copy in the same place, and
content a person refused), and the note queryset. Re-exported by models.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import models
from django.db.models import OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan
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


# A fact no agent's run was served for this long goes to the review queue; an expired one served
# within it is renewed by the daily review. What was served is in the read records (SPEC §2.10).
NOT_READ = timedelta(days=30)
NEVER = datetime(1970, 1, 1, tzinfo=UTC)  # the last read of a note no run was served


def last_read_at() -> Subquery:
    """When an agent's run was last served the note (the query's row), None if no record is
    kept: one step down the note's index of reads, newest first, however often it was read."""
    from .run_records import NoteRead  # the models module imports this one

    newest = NoteRead.objects.filter(note_id=OuterRef("read_key")).order_by("-read_at")
    return Subquery(newest.values("read_at")[:1], output_field=models.DateTimeField())


def not_read_q(now) -> Q:
    """Notes no agent's run was served in the last 30 days, once they are that old."""
    cutoff = now - NOT_READ
    last_read = Coalesce(last_read_at(), Value(NEVER), output_field=models.DateTimeField())
    return Q(Q(created_at__lt=cutoff), LessThan(last_read, cutoff))


def vetoed_q() -> Q:
    """Notes a person vetoed (archived with reason `vetoed`; `Note.is_vetoed` for one)."""
    return Q(status=Status.ARCHIVED, archive_reason=REASON_VETOED)


def refused_q() -> Q:
    """Notes whose content a person removed (forgotten, rejected or vetoed): that content never
    comes back live, whether written again, imported or brought back by a revert."""
    return Q(status=Status.FORGOTTEN) | Q(trust=Trust.REJECTED) | vetoed_q()


# "The same content" has two meanings, each stated once. In its place (`place_key`: the kind,
# scope, target, day, owner and the normalised text) two active notes never share it — the
# unique constraint of live notes; a write of it again is an idempotent repeat. Anywhere in the
# project (`content_key`: the normalised text alone) a person's removal of it holds — that
# content is never written, imported or brought back live again.


def live_in_place_q(place_key) -> Q:
    """The live note (at most one) in the place `place_key` names (a value, an expression such
    as OuterRef("place_key"), or a list of keys)."""
    if isinstance(place_key, list | tuple | set):
        return Q(status=Status.ACTIVE, place_key__in=list(place_key))
    return Q(status=Status.ACTIVE, place_key=place_key)


def refused_content_q(content_keys) -> Q:
    """Notes of this content (a list of `content_key`s) that a person removed."""
    return refused_q() & Q(content_key__in=list(content_keys))


def refusal(status: str, trust: str, archive_reason: str) -> str | None:
    """The rule of `refused_q` for one note: how a person removed it (`forgotten`, `rejected`,
    `vetoed`), or None."""
    if status == Status.FORGOTTEN:
        return "forgotten"
    if trust == Trust.REJECTED:
        return "rejected"
    if status == Status.ARCHIVED and archive_reason == REASON_VETOED:
        return "vetoed"
    return None


class NoteQuerySet(models.QuerySet):
    def tagged(self, tag: str):
        """The notes carrying `tag` (tags are stored lower-case, `|a|b|` in `tags_text`, so
        one LIKE serves both databases)."""
        tag = tag.strip().lower()
        return self.filter(tags_text__contains=f"|{tag}|") if tag else self

    def live(self, now=None):
        """Active, not expired, not rejected (the daily review's working set; what agents are
        served is decided by selectors.agent_visible_q)."""
        return self.filter(not_expired_q(now), status=Status.ACTIVE).exclude(trust=Trust.REJECTED)
