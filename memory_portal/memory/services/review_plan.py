"""The daily review's planning (services/routines.py runs it): one read of the agent's working
set, and the steps that plan on it — merge duplicates, renew or archive expired facts, flag
facts no run was served in 30 days, report near-duplicates by meaning. Nothing here writes;
review_apply.py makes what is planned."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import numpy as np
from django.db.models import Q

from ..models import Agent, Kind, Note, Scope, Status, Trust, is_expired, last_read_at
from ..selectors import NOT_READ
from ..validation import content_key_text

log = logging.getLogger(__name__)

LIFT_RE = re.compile(r"^\d\d:\d\d (?:\S+ )?(?:fact|learned):\s*(?P<text>.+)$", re.I)
# Step 5: two live facts of an agent whose stored vectors have at least this cosine are
# reported as near-duplicates by meaning, for a person to merge or keep (docs/RECALL.md,
# "Search and near-duplicates"); the review never merges them itself. For all-MiniLM-L6-v2, a
# statement reworded scores 0.88-0.95; among the labelled set's 561 pairs of different facts of one
# agent, the highest is 0.60.
NEAR_DUPLICATE_COSINE = 0.85


@dataclass
class Review:
    """One review's working set, read in one query: the agent's active facts that are not
    rejected (live or expired), each with when a run was last served it (the read records), and
    the day log rows of the day before, oldest first. The steps plan their changes on it; they
    are applied together under one lock."""

    facts: list[Note]
    day_rows: list[Note]
    now: datetime
    read_lately: set[str] = field(default_factory=set)  # facts served in the last 30 days
    merges: list[tuple[Note, Note]] = field(default_factory=list)  # (duplicate, keeper)
    renew: list[Note] = field(default_factory=list)
    expire: list[Note] = field(default_factory=list)
    lifted: list[Note] = field(default_factory=list)

    @classmethod
    def read(cls, agent: Agent, day: date, now: datetime) -> Review:
        rows = list(
            Note.objects.filter(owner_agent=agent, status=Status.ACTIVE)
            .filter(
                Q(scope=Scope.AGENT, kind=Kind.FACT) & ~Q(trust=Trust.REJECTED)
                | Q(kind=Kind.DAY, day=day - timedelta(days=1))
            )
            .annotate(last_read=last_read_at())
            .order_by("created_at", "id")
        )
        facts = [n for n in rows if n.kind == Kind.FACT]
        cutoff = now - NOT_READ
        read_lately = {n.pk for n in facts if n.last_read is not None and n.last_read >= cutoff}
        return cls(facts, [n for n in rows if n.kind == Kind.DAY], now, read_lately=read_lately)

    def live(self) -> list[Note]:
        """The live facts as the changes planned (and lifts made) so far leave them."""
        gone = {d.pk for d, _ in self.merges} | {n.pk for n in self.expire}
        renewed = {n.pk for n in self.renew}
        facts = [n for n in self.facts if n.pk not in gone] + self.lifted
        facts = [n for n in facts if n.pk in renewed or not is_expired(n.expires_at, self.now)]
        return sorted(facts, key=lambda n: (n.created_at, n.pk))

    @property
    def changes(self) -> int:
        return len(self.merges) + len(self.renew) + len(self.expire)


def normalized(text: str) -> str:
    """Same fact, different spelling: the content identity's normalisation (case, Unicode
    forms, invisible characters, spacing), with trailing punctuation ignored too."""
    return content_key_text(text).rstrip(".!;:, ")


def merge_duplicates(work: Review) -> None:
    """Step 1: of live facts with the same normalized text, the newest stays and the others
    are superseded by it."""
    groups: dict[str, list[Note]] = {}
    for note in work.live():
        groups.setdefault(normalized(note.content), []).append(note)
    for notes in groups.values():
        if len(notes) < 2:
            continue
        # The newest stays (ordered oldest first) — the newest a manager reviewed, if any:
        # the routine acts for the agent and never retires a person's decision.
        decided = [n for n in notes if n.trust != Trust.LEARNED]
        keeper = (decided or notes)[-1]
        work.merges += [
            (duplicate, keeper)
            for duplicate in notes
            if duplicate is not keeper and duplicate.trust == Trust.LEARNED
        ]


def handle_expired(work: Review) -> None:
    """Step 2: expired facts some run was served in the last 30 days get 90 more days; the
    rest are archived with reason `expired`."""
    for note in work.facts:
        if not is_expired(note.expires_at, work.now):
            continue
        if note.pk in work.read_lately:
            work.renew.append(note)
        else:
            work.expire.append(note)


def day_lines(work: Review) -> list[str]:
    """The lines of the agent's live day log of the day before, oldest first."""
    return [line for row in work.day_rows for line in row.lines]


def liftable(line: str) -> str | None:
    """The fact in a day-log line that starts with `fact:` or `learned:`, if any."""
    match = LIFT_RE.match(line.strip())
    return match.group("text").strip() if match else None


def flag_unrecalled(work: Review) -> list[str]:
    """Step 4: facts no run was served in 30 days go to the review queue (the queue reads the
    same rule, selectors.not_read_q; the run records which ones it saw)."""
    cutoff = work.now - NOT_READ
    return [n.pk for n in work.live() if n.created_at < cutoff and n.pk not in work.read_lately]


def near_duplicates(facts: list[Note]) -> list[list]:
    """Step 5: pairs of the live facts whose vectors, as recall scores them (stored, or
    embedded now when missing: recall/hybrid.fact_vectors), are at least
    NEAR_DUPLICATE_COSINE apart, closest first, as [older id, newer id, cosine]. Reported in
    the run's counts and the review queue; nothing is changed."""
    from ..embeddings import EmbeddingError
    from ..recall.hybrid import fact_vectors
    from .vectors import current_provider

    embedder = current_provider()
    if embedder is None or len(facts) < 2:
        return []
    try:
        vectors = fact_vectors(embedder, facts)
    except EmbeddingError:
        log.warning("near-duplicates skipped: the model could not embed", exc_info=True)
        return []
    ids = [n.pk for n in facts]
    sims = np.triu(vectors @ vectors.T, k=1)
    first, second = np.nonzero(sims >= NEAR_DUPLICATE_COSINE)
    pairs = [
        [ids[i], ids[j], round(float(sims[i, j]), 3)]
        for i, j in zip(first, second, strict=True)
    ]
    return sorted(pairs, key=lambda p: -p[2])
