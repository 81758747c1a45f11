"""The production server's configuration (gunicorn -c gunicorn.conf.py; the README's production
command). Threads, not more processes, absorb requests that wait: a write that waits for a busy
project's lock holds one thread for at most MEMORY_PORTAL_LOCK_WAIT_MS (2 s by default) while
the other threads of every worker keep serving other projects. Every value can be set from the
environment."""

import gc
import multiprocessing
import os
import shutil
import tempfile
from pathlib import Path


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


bind = os.environ.get("MEMORY_PORTAL_BIND", "127.0.0.1:8000")
# Processes for the cores (the work is mostly database round trips), threads for the waits.
# SQLite serves one process: the per-run limit of calls in flight is counted in the process
# (memory/run_slots.py), and its one writer at a time gains nothing from more processes.
# There, one worker, whatever WEB_CONCURRENCY says (`check --deploy` warns of it:
# memory_portal.W002); its threads still absorb the waits.
SQLITE = not os.environ.get("DATABASE_URL", "").strip()
workers = 1 if SQLITE else _int("WEB_CONCURRENCY", max(2, multiprocessing.cpu_count()))
worker_class = "gthread"
# A client's keep-alive connection stays with one worker, so each worker needs threads to
# spare beyond those waiting on a busy project: 16 per worker keeps other projects fast while
# several requests wait out a held lock (docs/PERFORMANCE.md, "One busy project").
threads = _int("MEMORY_PORTAL_THREADS", 16)
# A request never legitimately runs longer than the statement timeout (30 s); a worker that
# does is stuck and is replaced.
timeout = _int("MEMORY_PORTAL_WORKER_TIMEOUT", 60)
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then so a slow leak cannot grow without bound.
max_requests = _int("MEMORY_PORTAL_MAX_REQUESTS", 5000)
max_requests_jitter = 500
# Log to stderr; application log lines pass the secret redactor (memory_portal/settings.py).
accesslog = "-" if os.environ.get("MEMORY_PORTAL_ACCESS_LOG", "") == "true" else None
errorlog = "-"
# Behind the TLS-terminating proxy on the same host.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


# Metrics (memory_portal/metrics.py): with a scrape token set, every worker writes its samples
# to one folder (prometheus-client's multiprocess mode), so a scrape adds up all the workers
# whichever answers it. Set here, in the master, before any worker imports the client.
_METRICS_FOLDER_OURS = bool(
    os.environ.get("MEMORY_PORTAL_METRICS_TOKEN") and not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
)
if _METRICS_FOLDER_OURS:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="memory-portal-metrics-")


def on_starting(server):
    """A server starts from zero: the samples of an earlier run are removed."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        for stale in Path(folder).glob("*.db"):
            stale.unlink()


def child_exit(server, worker):
    """A worker that exits (recycled, killed) keeps its counts; its live gauges go."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _METRICS_FOLDER_OURS:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def post_worker_init(worker):
    """Before a worker takes its first request: the secret scanner's maintained rules compiled
    (or read from their cache) and its tables built, the embedding model loaded and run once,
    and the thread that stores written notes' vectors started, sweeping up any a killed
    worker left without one (memory_portal/memory/services/vectors.py). A worker that
    replaces a crashed one would otherwise pay for these inside the first writes and recalls
    it serves. (The URLconf is imported by memory_portal/wsgi.py, for any WSGI server.)

    Then what the worker has loaded by now, which lives as long as it does (Django, the
    URLconf, the API, the rules, the model's tokenizer: some 200,000 objects), is frozen out of
    the cyclic garbage collector's reach: a full collection inside a request would otherwise
    walk all of it (docs/PERFORMANCE.md, "Decisions, and why")."""
    from memory_portal.memory import secrets
    from memory_portal.memory.services.vectors import start_in_server

    secrets.load()
    start_in_server()
    gc.collect()  # garbage of the start-up is freed, not frozen
    gc.freeze()
