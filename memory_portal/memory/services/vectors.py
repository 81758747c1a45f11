"""Stored sentence embeddings of notes (docs/RECALL.md, "Stored vectors").

A write never runs the model in its request. Once the note is committed, `store_later` hands
its id to a process-wide background thread (`background`, the default) or, where workers run
tasks (MEMORY_PORTAL_TASKS=database), queues `embed_notes` for a `db_worker`. Both store the
vector with the same guard as `memory_embed` (only while the note's text is still the one
embedded), so the web request spends no model time and holds no lock while numpy works. A
vector is stored as float16 bytes (384 dimensions = 768 bytes for the built-in model) with the
name of the provider that made it; recall reads it back (`decode`), and `memory_embed` computes
what is missing or was made by another provider.

A failure to embed never fails the write: the note is stored without a vector (logged), recall
computes one for it on the fly, search ranks it by its words, and `memory_embed` stores it
later.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time

from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connections,
    transaction,
)
from django.db.models import Q
from django.tasks import task

from ..embeddings import (
    EmbeddingError,
    configured_name,
    decode_many,
    encode,
    get_embedder,
    note_text,
    query_cache,
    warm_up,
)
from ..ids import id_floor
from ..models import Kind, Note
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


def task_vector(text: str) -> tuple[bytes | None, str]:
    """A run's task as a stored vector and its provider, computed as the run starts, so its
    start recalls, in whichever process, do not embed it again (docs/RECALL.md, "Against the
    task"); (None, "") without a task, with embeddings off, or when the model failed (recall
    then embeds the task itself)."""
    if not text or configured_name() is None:
        return None, ""
    (blob,), name = embed_texts([text])
    if blob is not None:  # this process scores the very vector the other processes read
        query_cache.put(name, text, decode_many([blob])[0])
    return blob, name


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
    # One statement per note, each committed alone: a transaction holding several notes' row
    # locks would deadlock with a person's change that locks the same notes in another order
    # (a run revert, under the setting-row lock); a single-row UPDATE holds no lock while it
    # waits, so it can only make such a change wait a moment.
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


class BackgroundVectors:
    """One daemon thread per process that stores the vectors of the notes this process wrote,
    after their commit: ids are gathered for `LINGER` seconds and embedded `BATCH` at a time
    (one forward pass for a batch), then stored by `embed_notes`' own code. The thread runs at
    a lower CPU priority than the requests (Linux: a thread's nice value), so under load the
    writes are answered first and the vectors follow. A batch that meets an unreachable
    database is tried again for about 30 s (`RETRY_DELAYS`). A process that exits normally first
    waits up to `EXIT_WAIT` seconds for what is pending (`atexit`).

    A web process starts it with `start(sweep=True)` (memory_portal/wsgi.py): then it also
    looks for notes of the last `SWEEP_WINDOW` seconds still without a vector, once at start
    and every `SWEEP_EVERY` seconds, so what a killed process or a long database outage left
    behind is stored by whichever process runs next (`missing_vectors`: a range of the primary
    key, since ids are made in time order)."""

    BATCH = 32
    LINGER = 0.05
    NICE = 10
    EXIT_WAIT = 10.0
    RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0)  # about 30 s of an unreachable database
    SWEEP_EVERY = 300.0
    SWEEP_WINDOW = 3600.0
    SWEEP_SETTLE = 60.0  # a periodic sweep leaves the last minute's notes to their own writers

    def __init__(self, store=None) -> None:
        # What a batch is handed to: `embed_notes`' own code, unless a test says otherwise.
        self._store = store or (lambda note_ids: embed_notes.call(note_ids))
        self._cond = threading.Condition()
        self._pending: list[str] = []
        self._busy = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._next_sweep: float | None = None  # monotonic time of the next sweep; None: never

    def start(self, *, sweep: bool) -> None:
        with self._cond:
            self._adopt()
            self._next_sweep = time.monotonic() if sweep else None
            self._ensure_thread()
            self._cond.notify_all()

    def stop_sweeping(self) -> None:
        """No further sweeps (what is submitted is still stored): a test that started a
        sweeping thread leaves no timer behind to touch a later test's database."""
        with self._cond:
            self._next_sweep = None
            self._cond.notify_all()

    def submit(self, note_ids: list[str]) -> None:
        with self._cond:
            self._adopt()
            self._pending.extend(note_ids)
            self._ensure_thread()
            self._cond.notify_all()

    def _adopt(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's thread and queue are not ours
            self._thread, self._pending, self._busy = None, [], False
            self._pid = os.getpid()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="memory-portal-vectors", daemon=True
            )
            self._thread.start()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending) + (1 if self._busy else 0)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted note has been handled (stored, or given up on); False
        if `timeout` seconds passed first."""
        with self._cond:
            if self._pid != os.getpid():
                return True
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _run(self) -> None:
        _lower_priority(self.NICE)
        first = True
        while True:
            with self._cond:
                due = self._next_sweep
                wait = None if due is None else max(0.0, due - time.monotonic())
                if not self._cond.wait_for(lambda: bool(self._pending), wait):
                    self._next_sweep = time.monotonic() + self.SWEEP_EVERY
                    sweep_settle = 0.0 if first else self.SWEEP_SETTLE
                else:
                    sweep_settle = None
                self._busy = True
            batch: list[str] = []
            try:
                if sweep_settle is not None:
                    first = False
                    self._sweep(sweep_settle)
                else:
                    time.sleep(self.LINGER)  # let the writes of the next few milliseconds join
                with self._cond:
                    batch, self._pending = self._pending[: self.BATCH], self._pending[self.BATCH :]
                if batch:
                    self._store_retrying(batch)
            except Exception:
                # Whatever fails in a round (a sweep, a batch, their connections' own checks),
                # the thread goes on: the notes wait for the next sweep or `memory_embed`.
                log.exception("a round of the vector thread failed (%d notes unstored)", len(batch))
            finally:
                with self._cond:
                    idle = not self._pending
                if idle:
                    # Nothing waits: give the connection back rather than hold it idle (a
                    # database restart, a test database being dropped, max_connections).
                    try:
                        connections.close_all()
                    except Exception:
                        log.exception("the vector thread could not close its connection")
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _sweep(self, settle: float) -> None:
        now = time.time()
        try:
            close_old_connections()
            found = missing_vectors(since=now - self.SWEEP_WINDOW, until=now - settle)
        except Exception:
            log.exception("could not look for notes without a vector")
            return
        finally:
            close_old_connections()
        with self._cond:
            self._pending.extend(i for i in found if i not in self._pending)

    def _store_retrying(self, batch: list[str]) -> None:
        """Store a batch; while the database is unreachable (a restart, a failover), try again
        after each of `RETRY_DELAYS`, then leave the batch to the next sweep."""
        for delay in (*self.RETRY_DELAYS, None):
            try:
                close_old_connections()
                self._store(batch)
                return
            except (OperationalError, InterfaceError):
                if delay is None:
                    log.exception(
                        "the database stayed unreachable; %d notes wait for a sweep", len(batch)
                    )
                    return
                time.sleep(delay)
            except Exception:
                log.exception(
                    "could not store the vectors of %d notes; memory_embed will", len(batch)
                )
                return
            finally:
                close_old_connections()


def missing_vectors(*, since: float, until: float, limit: int = 1000) -> list[str]:
    """Ids of the notes made between the Unix times `since` and `until` that have no vector of
    the configured provider (day rows are never embedded), oldest first: a range scan of the
    primary key."""
    name = configured_name()
    if name is None:
        return []
    rows = (
        Note.objects.filter(pk__gte=id_floor("mem", since), pk__lt=id_floor("mem", until))
        .filter(Q(embedding__isnull=True) | ~Q(embedding_model=name))
        .exclude(kind=Kind.DAY)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    return list(rows)


def _lower_priority(nice: int) -> None:
    """Lower the calling thread's CPU priority. Only Linux gives each thread a nice value of
    its own; elsewhere this does nothing (setpriority would renice the whole process)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError):
        log.debug("could not lower the vector thread's priority", exc_info=True)


background = BackgroundVectors()
atexit.register(lambda: background.drain(BackgroundVectors.EXIT_WAIT))


def start_in_server() -> None:
    """A web process's start (memory_portal/wsgi.py): the model loaded and the background
    thread running, sweeping, before the first request."""
    if configured_name() is None:
        return
    warm_up()
    if tasks_run_in_process():
        background.start(sweep=True)


def store_later(note_id: str) -> None:
    """Store the vector of a note just written, once the current transaction (if any)
    commits: on the process's background thread, or as an `embed_notes` task where workers run
    tasks. Nothing to do when embeddings are off. The note is written by then: a queue that
    cannot take the task is logged, not raised (`memory_embed` stores what is missing)."""
    if configured_name() is None:
        return

    def hand_off() -> None:
        if tasks_run_in_process():
            background.submit([note_id])
            return
        try:
            embed_notes.enqueue([note_id])
        except Exception:
            log.exception("could not queue the vector of %s; memory_embed will store it", note_id)

    transaction.on_commit(hand_off)
