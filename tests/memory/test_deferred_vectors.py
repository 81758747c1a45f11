"""Vectors left to a worker (docs/RECALL.md, "Stored vectors"): with MEMORY_PORTAL_TASKS=database
a write embeds nothing in the request, nor in a thread of the web process; the note is stored
without a vector, `embed_notes` is queued once it is committed, and `db_worker` stores the
vector."""

from __future__ import annotations

from io import StringIO
from types import SimpleNamespace

import numpy as np
import pytest
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from memory_portal.memory import embeddings, services
from memory_portal.memory.embeddings import decode_many
from memory_portal.memory.models import Note
from memory_portal.memory.services import vectors
from memory_portal.memory.services.vectors import embed_notes, store_vectors

from .test_worker import DATABASE_TASKS, run_worker_until_empty

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The staging deploy needs the VPN on."


@pytest.fixture(autouse=True)
def _embeddings_on(settings):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": True}


@pytest.fixture
def no_model_in_this_process(monkeypatch):
    """Every embedding call of the test's own process (the request), counted."""
    calls: list[int] = []
    model = embeddings.builtin_model()
    real = type(model).embed

    def spy(self, texts):
        calls.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(type(model), "embed", spy)
    return calls


def test_the_queue_or_the_background_thread_never_both(world, monkeypatch, settings):
    handed: list[list[str]] = []
    monkeypatch.setattr(vectors.background, "submit", handed.append)
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    assert handed == [[note.pk]], "make run: the process's own thread stores it"
    with override_settings(TASKS=DATABASE_TASKS):
        services.fact_save(actor=world.as_agent, text="Deploys go out on Tuesdays")
    assert len(handed) == 1 and DBTaskResult.objects.count() == 1
    off = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": False}
    with override_settings(MEMORY_PORTAL=off):
        services.fact_save(actor=world.as_agent, text="Deploys go out on Fridays")
    assert len(handed) == 1, "no vectors at all: nothing handed over"


@override_settings(TASKS=DATABASE_TASKS)
def test_a_write_queues_its_vector_and_the_worker_stores_it(world, no_model_in_this_process):
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    written = services.note_write(actor=world.as_agent, kind="lesson", content="Retry twice.")
    assert no_model_in_this_process == [], "the request ran no model"
    stored = Note.objects.filter(pk__in=[note.pk, written.note.pk])
    assert set(stored.values_list("embedding", flat=True)) == {None}
    queued = DBTaskResult.objects.order_by("enqueued_at")
    assert [q.task_path for q in queued] == [
        "memory_portal.memory.services.vectors.embed_notes"
    ] * 2
    assert [q.args_kwargs["args"] for q in queued] == [[[note.pk]], [[written.note.pk]]]

    # An identical write is the same note: nothing more is queued.
    services.fact_save(actor=world.as_agent, text=FACT)
    assert DBTaskResult.objects.count() == 2

    run_worker_until_empty()

    assert set(DBTaskResult.objects.values_list("status", flat=True)) == {
        TaskResultStatus.SUCCESSFUL
    }
    row = Note.objects.get(pk=note.pk)
    assert row.embedding_model == embeddings.MiniLMEmbedder.name
    expected = embeddings.builtin_model().embed([FACT])[0]
    assert np.allclose(decode_many([row.embedding])[0], expected, atol=2e-3)
    assert Note.objects.get(pk=written.note.pk).embedding is not None


@override_settings(TASKS=DATABASE_TASKS)
def test_the_task_is_idempotent_and_never_stores_a_vector_of_an_older_text(world):
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    # The text read, then changed before the vector is stored: that vector is not stored.
    stale = [(note.pk, "", "The staging deploy needed the VPN once.")]
    assert store_vectors(stale, embeddings.builtin_model()) == (0, True)
    assert Note.objects.get(pk=note.pk).embedding is None
    assert embed_notes.call([note.pk]) == 1
    assert embed_notes.call([note.pk]) == 0, "a second run finds nothing to do"
    assert embed_notes.call(["mem_gone"]) == 0


@override_settings(TASKS=DATABASE_TASKS)
def test_a_queue_that_fails_after_the_write_loses_nothing(world, monkeypatch, caplog):
    """The note is committed before its task is queued: a queue that refuses is logged, the
    write still answers with its note, and memory_embed stores the vector later."""

    def refuse(*args, **kwargs):
        raise RuntimeError("queue down")

    stub = SimpleNamespace(enqueue=refuse, get_backend=embed_notes.get_backend)
    monkeypatch.setattr(vectors, "embed_notes", stub)
    result = services.fact_save(actor=world.as_agent, text=FACT)
    assert result.created and Note.objects.get(pk=result.note.pk).embedding is None
    assert "could not queue the vector" in caplog.text
    call_command("memory_embed", stdout=StringIO())
    assert Note.objects.get(pk=result.note.pk).embedding is not None
