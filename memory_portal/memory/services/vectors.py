"""Stored sentence embeddings of notes (docs/RECALL.md, "Stored vectors").

Every write path that creates a note or changes its text calls `stamp_vector(note)` BEFORE its
transaction: embedding costs milliseconds of numpy (or an HTTP call to an endpoint), and inside
the setting-row lock every millisecond is one other writers of the project wait. A vector is
stored as float16 bytes (384 dimensions = 768 bytes for the built-in model) with the name of the
provider that made it; recall reads it back (`decode`), and `memory_embed` computes what is
missing or was made by another provider.

A failure to embed never fails the write: the note is stored without a vector (logged), recall
computes one for it on the fly, and `memory_embed` stores it later.
"""

from __future__ import annotations

import logging

from ..embeddings import EmbeddingError, encode, get_embedder, note_text

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
