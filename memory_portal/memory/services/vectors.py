"""Stored sentence embeddings of notes (docs/RECALL.md, "Stored vectors").

Every write path that creates a note or changes its text calls `stamp_vector(note)` BEFORE its
transaction: embedding costs milliseconds of numpy (or an HTTP call to an endpoint), and inside
the setting-row lock every millisecond is one other writers of the project wait. Where tasks
run on workers (MEMORY_PORTAL_TASKS=database), the request does not embed at all: the note is
stored without a vector and `embed_notes` is queued once it is committed (`deferred()`,
`embed_later()`), so the web process spends no model time on a write. A vector is
stored as float16 bytes (384 dimensions = 768 bytes for the built-in model) with the name of the
provider that made it; recall reads it back (`decode`), and `memory_embed` computes what is
missing or was made by another provider.

A failure to embed never fails the write: the note is stored without a vector (logged), recall
computes one for it on the fly, and `memory_embed` stores it later.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q
from django.tasks import task

from ..embeddings import EmbeddingError, configured_name, encode, get_embedder, note_text
from ..models import Note
from ._common import tasks_run_in_process

log = logging.getLogger(__name__)


def current_provider():
    """The configured embedder, or None when embeddings are off or cannot be loaded (then no
    vector is stored, and nothing fails)."""
    try:
        return get_embedder()
    except EmbeddingError:
        log.exception("no embedding model can be loaded; notes are stored without vectors")
        return None


def embed_texts(texts: list[str], embedder=None) -> tuple[list[bytes | None], str]:
    """The texts' vectors as stored bytes, and the provider's name ("" and Nones when none
    could run)."""
    embedder = embedder if embedder is not None else current_provider()
    if embedder is None or not texts:
        return [None] * len(texts), ""
    try:
        vectors = embedder.embed(texts)
    except EmbeddingError:
        log.warning("embedding failed; stored without a vector (memory_embed)", exc_info=True)
        return [None] * len(texts), ""
    return [encode(v) for v in vectors], embedder.name


def stamp_vector(note) -> None:
    """Set `note.embedding` and `note.embedding_model` from its text. Call it outside any
    transaction or lock."""
    (blob,), name = embed_texts([note_text(note.summary, note.content)])
    note.embedding = blob
    note.embedding_model = name


def stamp_vectors(notes: list) -> None:
    """`stamp_vector` for many notes at once (import, backfill): batched."""
    embedder = current_provider()
    blobs, name = embed_texts([note_text(n.summary, n.content) for n in notes], embedder)
    for note, blob in zip(notes, blobs, strict=True):
        note.embedding = blob
        note.embedding_model = name if blob is not None else ""


def store_vectors(rows: list[tuple[str, str, str]], embedder) -> tuple[int, bool]:
    """Embed `(note id, summary, content)` rows outside any transaction, then store each
    vector only where the note's text is still the one embedded (a note edited meanwhile keeps
    what its own write computed). (How many were stored, whether the provider ran.)"""
    blobs, name = embed_texts(
        [note_text(summary, content) for _, summary, content in rows], embedder
    )
    if not name:
        return 0, False
    stored = 0
    with transaction.atomic():
        for (pk, summary, content), blob in zip(rows, blobs, strict=True):
            stored += Note.objects.filter(pk=pk, summary=summary, content=content).update(
                embedding=blob, embedding_model=name
            )
    return stored, True


@task
def embed_notes(note_ids: list[str]) -> int:
    """The background task that stores the vectors of notes written without one (`deferred`):
    those of `note_ids` still lacking a vector of the configured provider. Idempotent."""
    embedder = current_provider()
    if embedder is None:
        return 0
    rows = list(
        Note.objects.filter(pk__in=note_ids)
        .filter(Q(embedding__isnull=True) | ~Q(embedding_model=embedder.name))
        .values_list("pk", "summary", "content")
    )
    stored, ran = store_vectors(rows, embedder) if rows else (0, True)
    if not ran:
        log.warning("embedding failed; %d notes wait for memory_embed", len(rows))
    return stored


def deferred() -> bool:
    """True when a write should leave its vector to a worker: embeddings are on and tasks are
    queued for `db_worker` processes rather than run where they are enqueued."""
    return configured_name() is not None and not tasks_run_in_process()


def embed_later(note_id: str) -> None:
    """Queue `embed_notes` for one note once the current transaction (if any) commits. The
    note is written by then: a queue that cannot take the task is logged, not raised (the
    write succeeded; `memory_embed` stores what is missing)."""

    def enqueue() -> None:
        try:
            embed_notes.enqueue([note_id])
        except Exception:
            log.exception("could not queue the vector of %s; memory_embed will store it", note_id)

    transaction.on_commit(enqueue)
