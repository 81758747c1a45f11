"""Stored vectors (docs/RECALL.md, "Stored vectors"): every write path stores the note's
embedding after its commit, off the request (the process's background thread); recall reads the
stored vectors; `memory_embed` backfills what is missing or stale, idempotently."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from django.core.management import call_command

from memory_portal.memory import embeddings, services
from memory_portal.memory.actors import Actor
from memory_portal.memory.embeddings import decode_many
from memory_portal.memory.models import Note, Run
from memory_portal.memory.portability import project_export, project_import
from memory_portal.memory.recall import hybrid
from memory_portal.memory.recall.cache import fact_cache
from memory_portal.memory.recall.service import recall
from memory_portal.memory.services import vectors

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
def embed_threads(monkeypatch):
    """The thread of each embedding call."""
    threads: list[str] = []
    model = embeddings.builtin_model()
    real = type(model).embed

    def spy(self, texts):
        threads.append(threading.current_thread().name)
        return real(self, texts)

    monkeypatch.setattr(type(model), "embed", spy)
    return threads


def _stored(note_id: str) -> np.ndarray:
    note = Note.objects.get(pk=note_id)
    assert note.embedding_model == BUILTIN
    assert len(bytes(note.embedding)) == 384 * 2  # float16
    return decode_many([note.embedding])[0]


@pytest.mark.django_db(transaction=True)
def test_a_write_runs_no_model_and_its_vector_follows_from_the_background(
    django_db_setup, make_user, embed_threads
):
    """The real thread, on committed rows: the request's thread embeds nothing; the note's
    vector is stored by the process's background thread once the write has committed."""
    from tests.conftest import build_world

    world = build_world(make_user)
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    written = services.note_write(actor=world.as_agent, kind="lesson", content="Retry twice.")
    assert threading.current_thread().name not in embed_threads, "the request ran the model"
    assert vectors.background.drain(timeout=30)
    assert set(embed_threads) == {"memory-portal-vectors"}
    vector = _stored(note.pk)
    _stored(written.note.pk)
    expected = embeddings.builtin_model().embed([FACT])[0]
    assert float(vector @ expected) > 0.999


@pytest.mark.django_db(transaction=True)
def test_a_servers_thread_sweeps_up_the_vectors_a_killed_process_left(
    django_db_setup, make_user, monkeypatch
):
    """Notes committed without a vector (their process died before storing it) are found by
    the next server process's sweep at start; day rows and notes outside the window are not."""
    from tests.conftest import build_world

    world = build_world(make_user)
    monkeypatch.setattr(vectors, "store_later", lambda note_id: None)  # the process "died"
    lost = [
        services.fact_save(actor=world.as_agent, text=FACT).note,
        services.note_write(actor=world.as_agent, kind="lesson", content="Retry twice.").note,
    ]
    day = services.day_append(actor=world.as_agent, line="checked the deploy")
    now = time.time()
    assert vectors.missing_vectors(since=now - 60, until=now + 1) == [n.pk for n in lost]
    assert vectors.missing_vectors(since=now + 1, until=now + 60) == []
    worker = vectors.BackgroundVectors()
    worker.start(sweep=True)
    deadline = time.monotonic() + 30
    while (
        time.monotonic() < deadline
        and Note.objects.filter(pk__in=[n.pk for n in lost], embedding__isnull=True).exists()
    ):
        time.sleep(0.05)
    for note in lost:
        _stored(note.pk)
    assert Note.objects.get(pk=day.pk).embedding is None
    assert worker.drain(timeout=10)
    worker.stop_sweeping()


def test_the_background_thread_survives_a_failing_batch(caplog):
    calls: list[list[str]] = []

    def broken(note_ids):
        calls.append(note_ids)
        raise RuntimeError("database gone")

    worker = vectors.BackgroundVectors(store=broken)
    worker.submit(["mem_a"])
    assert worker.drain(timeout=10)
    worker.submit(["mem_b", "mem_c"])
    assert worker.drain(timeout=10)
    assert calls == [["mem_a"], ["mem_b", "mem_c"]]
    assert "could not store the vectors of 1 notes" in caplog.text
    assert worker.pending() == 0


@pytest.mark.parametrize("during", ["batch", "sweep"])
def test_the_background_thread_survives_its_connections_own_checks_failing(
    monkeypatch, caplog, during
):
    """An error outside the store itself (the connection's checks around a batch, or around a
    sweep) is logged, and the same thread goes on to store the next batch."""
    stored: list[list[str]] = []
    worker = vectors.BackgroundVectors(store=stored.append)
    real = vectors.close_old_connections

    def failing():
        raise RuntimeError("connection check failed")

    monkeypatch.setattr(vectors, "close_old_connections", failing)
    if during == "sweep":
        worker.start(sweep=True)  # sweeps at once, before anything is submitted
    worker.submit(["mem_a"])
    assert worker.drain(timeout=10)
    worker.stop_sweeping()
    thread = worker._thread
    monkeypatch.setattr(vectors, "close_old_connections", real)
    worker.submit(["mem_b"])
    assert worker.drain(timeout=10)
    assert stored[-1] == ["mem_b"] and worker._thread is thread and thread.is_alive()
    assert "a round of the vector thread failed" in caplog.text


def test_the_background_thread_waits_out_an_unreachable_database(monkeypatch):
    from django.db import OperationalError

    tries: list[list[str]] = []

    def flaky(note_ids):
        tries.append(note_ids)
        if len(tries) < 3:
            raise OperationalError("the database system is shutting down")

    worker = vectors.BackgroundVectors(store=flaky)
    monkeypatch.setattr(worker, "RETRY_DELAYS", (0.01, 0.01, 0.01))
    worker.submit(["mem_a"])
    assert worker.drain(timeout=10)
    assert tries == [["mem_a"]] * 3, "stored on the third try, then nothing more"


def test_every_text_writing_path_stores_a_vector(world, stored_vectors, embed_threads):
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
    for note in (written, old, replaced, edited):
        _stored(note.pk)
    assert len(embed_threads) == 4, "one embedding for each new note, after its write"
    day = services.day_append(actor=world.as_agent, line="checked the deploy")
    assert Note.objects.get(pk=day.pk).embedding is None  # recall does not score day rows


def test_embeddings_off_store_no_vector(world, settings, stored_vectors):
    settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "EMBEDDINGS_ENABLED": False}
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    row = Note.objects.get(pk=note.pk)
    assert row.embedding is None and row.embedding_model == ""


def test_a_failing_model_stores_the_note_without_a_vector(world, monkeypatch, stored_vectors):
    def broken(self, texts):
        raise embeddings.EmbeddingError("model failed")

    monkeypatch.setattr(embeddings.MiniLMEmbedder, "embed", broken)
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    assert Note.objects.get(pk=note.pk).embedding is None


def test_recall_reads_the_stored_vector(world, stored_vectors):
    """A stored vector is used as stored: replaced by the vector of another text, the fact is
    scored by that text's meaning."""
    note = services.fact_save(actor=world.as_agent, text=FACT).note
    services.fact_save(actor=world.as_agent, text="The staging deploy needs the VPN on")
    query = QUERY
    assert [p.note.pk for p in recall(actor=world.as_agent, query=query, mark=False).memories] == [
        note.pk
    ]
    other = embeddings.builtin_model().embed(["Bananas ripen faster in a paper bag"])[0]
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


def test_memory_embed_backfills_missing_and_stale_vectors_once(world, capsys, stored_vectors):
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
    report = project_import(
        actor=None, lines=lines, project_slug="imported-copy", grant_members=True
    )
    assert report.counts["note"] >= 1
    copy = Note.objects.get(project__slug="imported-copy", content=FACT)
    _stored(copy.pk)


def test_stored_vectors_score_like_fresh_ones():
    """float16 storage moves a cosine by far less than the calibration's steps."""
    model = embeddings.builtin_model()
    vectors = model.embed([FACT, QUERY])
    stored = decode_many([embeddings.encode(vectors[0])])[0]
    assert abs(float(stored @ vectors[1]) - float(vectors[0] @ vectors[1])) < 2e-3
    assert hybrid.fact_text(type("F", (), {"summary": "", "content": FACT})()) == FACT


def test_a_repeated_query_is_embedded_once(world, stored_vectors, embed_threads):
    """A search or recall asked again (paging, a retry, the run's task at each start recall)
    embeds its query once per process."""
    services.fact_save(actor=world.as_agent, text=FACT)
    embed_threads.clear()
    first = recall(actor=world.as_agent, query=QUERY, mark=False)
    assert len(embed_threads) == 1  # the query (the fact's vector is stored)
    again = recall(actor=world.as_agent, query=QUERY, mark=False)
    assert len(embed_threads) == 1 and again.memories == first.memories
    recall(actor=world.as_agent, query="Where do the SMS logs go?", mark=False)
    assert len(embed_threads) == 2


@pytest.mark.django_db(transaction=True)
def test_a_runs_task_is_embedded_once_as_it_starts(world, stored_vectors, embed_threads):
    """The task's vector is stored with the run as it starts; a start recall in any process
    scores it without embedding the task again (docs/RECALL.md, "Against the task")."""
    services.fact_save(actor=world.as_agent, text=FACT)
    embed_threads.clear()
    run = services.run_create(
        actor=None, agent=world.agent, task_title="SMS", task_description=QUERY
    )
    assert len(embed_threads) == 1  # the task, as the run started
    stored = Run.objects.get(pk=run.pk)
    assert stored.task_embedding_model == BUILTIN and len(bytes(stored.task_embedding)) == 768
    embeddings.query_cache.clear()  # another process: it holds nothing of this run
    first = recall(actor=Actor.agent_run(run), start=True, mark=False)
    assert len(embed_threads) == 1 and first.memories  # scored from the stored vector
    plain = services.run_create(actor=None, agent=world.agent)
    assert plain.task_embedding is None and plain.task_embedding_model == ""
    assert len(embed_threads) == 1  # no task, nothing embedded
