"""Stored vectors (docs/RECALL.md, "Stored vectors"): every write path stores the note's
embedding, computed outside the write's transaction; recall reads the stored vectors;
`memory_embed` backfills what is missing or stale, idempotently."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection

from memory_portal.memory import embeddings, services
from memory_portal.memory.embeddings import decode_many
from memory_portal.memory.models import Note
from memory_portal.memory.portability import project_export, project_import
from memory_portal.memory.recall import hybrid
from memory_portal.memory.recall.facts import fact_cache
from memory_portal.memory.recall.service import recall

FACT = (
    "Twilio SMS to Germany needs an alphanumeric sender ID registered in advance; messages from "
    "an unregistered ID are dropped silently."
)
QUERY = "Texts to German phones vanish without any error. What is wrong?"
BUILTIN = embeddings.MiniLMEmbedder.name


@pytest.fixture(autouse=True)
def _embeddings_on(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}


@pytest.fixture
def embed_depth(monkeypatch):
    """The transaction depth at each embedding call (the test itself runs inside one)."""
    depths: list[int] = []
    model = embeddings._builtin()
    real = type(model).embed

    def spy(self, texts):
        depths.append(len(connection.atomic_blocks))
        return real(self, texts)

    monkeypatch.setattr(type(model), "embed", spy)
    return depths


def _stored(note_id: str) -> np.ndarray:
    note = Note.objects.get(pk=note_id)
    assert note.embedding_model == BUILTIN
    assert len(bytes(note.embedding)) == 384 * 2  # float16
    return decode_many([note.embedding])[0]


def test_a_saved_fact_stores_its_vector_computed_outside_the_transaction(world, embed_depth):
    outside = len(connection.atomic_blocks)
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    assert embed_depth == [outside]  # one embedding, before the write's transaction
    vector = _stored(note.pk)
    expected = embeddings._builtin().embed([FACT])[0]
    assert float(vector @ expected) > 0.999


def test_every_text_writing_path_stores_a_vector(world, embed_depth):
    outside = len(connection.atomic_blocks)
    written = services.note_write(
        actor=world.as_agent, kind="lesson", content="Run the linters before pushing"
    ).note
    old = services.fact_save(actor=world.as_agent, text="Deploys go out on Tuesdays").note
    replaced = services.fact_save(
        actor=world.as_agent, text="Deploys go out on Thursdays", supersedes=old.pk
    ).note
    edited = services.note_edit(
        actor=world.as_manager, note_id=replaced.pk, content="Deploys go out on Fridays"
    ).note
    assert set(embed_depth) == {outside}
    for note in (written, old, replaced, edited):
        _stored(note.pk)
    day = services.day_append(actor=world.as_agent, line="checked the deploy")
    assert Note.objects.get(pk=day.pk).embedding is None  # recall does not score day rows


def test_embeddings_off_store_no_vector(world, settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": False}
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    row = Note.objects.get(pk=note.pk)
    assert row.embedding is None and row.embedding_model == ""


def test_a_failing_model_stores_the_note_without_a_vector(world, monkeypatch):
    def broken(self, texts):
        raise embeddings.EmbeddingError("model failed")

    monkeypatch.setattr(embeddings.MiniLMEmbedder, "embed", broken)
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    assert Note.objects.get(pk=note.pk).embedding is None


def test_recall_reads_the_stored_vector(world):
    """A stored vector is used as stored: replaced by the vector of another text, the fact is
    scored by that text's meaning."""
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN on")
    query = QUERY
    assert [p.note.pk for p in recall(actor=world.as_agent, query=query, mark=False).memories] == [
        note.pk
    ]
    other = embeddings._builtin().embed(["Bananas ripen faster in a paper bag"])[0]
    Note.objects.filter(pk=note.pk).update(embedding=embeddings.encode(other))
    embeddings.vector_cache.clear()
    fact_cache.clear()  # the UPDATE bypassed the services: the revision did not move
    assert recall(actor=world.as_agent, query=query, mark=False).memories == []


def test_recall_embeds_a_fact_without_a_stored_vector(world):
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    Note.objects.filter(pk=note.pk).update(embedding=None, embedding_model="")
    embeddings.vector_cache.clear()
    result = recall(actor=world.as_agent, query=QUERY, mark=False)
    assert result.fallback is None
    assert [p.note.pk for p in result.memories] == [note.pk]


def test_memory_embed_backfills_missing_and_stale_vectors_once(world, capsys):
    a = services.fact_save(actor=world.as_agent, text=FACT).note
    b = services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN on").note
    c = services.note_write(actor=world.as_agent, kind="fact", content="Tom writes Go").note
    Note.objects.filter(pk=a.pk).update(embedding=None, embedding_model="")
    Note.objects.filter(pk=b.pk).update(embedding_model="openai:another-model")
    call_command("memory_embed", batch=1)
    assert "2 notes embedded" in capsys.readouterr().out
    for note in (a, b, c):
        _stored(note.pk)
    call_command("memory_embed")
    assert "0 notes embedded" in capsys.readouterr().out


def test_an_import_stores_vectors(world):
    services.fact_save(actor=world.as_agent, text=FACT)
    lines = list(project_export(actor=None, project=world.project))
    report = project_import(actor=None, lines=lines, project_slug="imported-copy")
    assert report.counts["note"] >= 1
    copy = Note.objects.get(project__slug="imported-copy", content=FACT)
    _stored(copy.pk)


def test_stored_vectors_score_like_fresh_ones():
    """float16 storage moves a cosine by far less than the calibration's steps."""
    model = embeddings._builtin()
    vectors = model.embed([FACT, QUERY])
    stored = decode_many([embeddings.encode(vectors[0])])[0]
    assert abs(float(stored @ vectors[1]) - float(vectors[0] @ vectors[1])) < 2e-3
    assert hybrid.fact_text(type("F", (), {"summary": "", "content": FACT})()) == FACT
