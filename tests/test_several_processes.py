"""What several processes and hosts share: gunicorn runs one worker on SQLite (the per-run
limit of calls in flight is counted in the process there), and `check --deploy` says so of a
WEB_CONCURRENCY asking for more; on PostgreSQL every new connection starts its session with the
product's bounds and keepalives, set by a statement (a pooler drops startup options)."""

from __future__ import annotations

import gc
import runpy

import pytest
from django.conf import settings
from django.core import checks

from memory_portal.checks import one_process_on_sqlite

CONF = str(settings.BASE_DIR / "gunicorn.conf.py")


def test_gunicorn_runs_one_worker_on_sqlite_whatever_web_concurrency_says(monkeypatch):
    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert runpy.run_path(CONF)["workers"] == 1
    monkeypatch.setenv("DATABASE_URL", "postgres://db.internal/memory_portal")
    assert runpy.run_path(CONF)["workers"] == 4


def test_a_worker_freezes_what_it_loaded_before_its_first_request(monkeypatch):
    """The rules and the model are loaded (here: their loaders called), then everything alive
    is moved out of the collector's generations, so no request pays a full collection of it."""
    from memory_portal.memory import secrets
    from memory_portal.memory.services import vectors

    loaded = []
    monkeypatch.setattr(secrets, "load", lambda: loaded.append("rules"))
    monkeypatch.setattr(vectors, "start_in_server", lambda: loaded.append("model"))
    gc.unfreeze()
    try:
        runpy.run_path(CONF)["post_worker_init"](worker=None)
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()
    assert loaded == ["rules", "model"]
    assert frozen > 10_000  # Django and the product's modules, at the least


def test_check_deploy_warns_of_several_processes_on_sqlite(monkeypatch):
    from django.db import connections

    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    found = one_process_on_sqlite()
    if connections["default"].vendor == "sqlite":
        assert [m.id for m in found] == ["memory_portal.W002"]
        assert found[0].level == checks.WARNING and "WEB_CONCURRENCY=3" in found[0].msg
    else:
        assert found == []
    monkeypatch.setenv("WEB_CONCURRENCY", "1")
    assert one_process_on_sqlite() == []


@pytest.mark.postgres
def test_a_new_connection_starts_with_the_products_session(db):
    from django.db import connections

    from memory_portal import database

    connection = connections.create_connection("default")
    try:
        with connection.cursor() as cursor:
            shown = {}
            # pg_settings: each value in its own unit (milliseconds, seconds, a count)
            cursor.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                [list(database.session_settings())],
            )
            shown = dict(cursor.fetchall())
    finally:
        connection.close()
    assert shown == database.session_settings()
    assert shown["lock_timeout"] == str(settings.DB_LOCK_TIMEOUT_MS)
    assert settings.DATABASES["default"]["OPTIONS"]["keepalives_idle"] == 15


# A process serving a run's calls through the pooler, as gunicorn's threads would: `count`
# calls at once, twice over; then it prints how many of the run's slots are still held.
THROUGH_POOLER = """
import sys, threading, django
django.setup()
from django.db import connection
from memory_portal.memory.run_slots import call_slot
run_id, count = sys.argv[1], int(sys.argv[2])
refused = []
def call(barrier):
    try:
        with call_slot(run_id):
            barrier.wait(10)
    except Exception as exc:
        refused.append(type(exc).__name__)
        barrier.abort()
    finally:
        connection.close()
for _ in range(2):
    barrier = threading.Barrier(count)
    threads = [threading.Thread(target=call, args=(barrier,)) for _ in range(count)]
    for t in threads: t.start()
    for t in threads: t.join(30)
with connection.cursor() as cursor:
    cursor.execute("SELECT count(*) FROM memory_run_slot WHERE run_id = %s", [run_id])
    print(cursor.fetchone()[0], len(refused), flush=True)
"""


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_run_slots_hold_behind_a_transaction_mode_pooler(settings):
    """PgBouncer in transaction mode hands each statement's transaction to whichever server
    connection is free: a session advisory lock taken by one statement stayed on a server
    connection the unlock never reached (6 of a run's 8 slots held with no call in flight),
    and PgBouncer refuses the startup options the timeouts used to ride on. Through a real
    PgBouncer in that mode, a run's 8 calls at once, twice over, leave no slot held: straight
    to the database afterwards, 8 calls of the run at once all get a slot."""
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from django.db import connection

    pgbouncer = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(pgbouncer):
        pytest.skip("needs PgBouncer (Debian's pgbouncer; .ci/run installs it)")
    db = connection.settings_dict
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A folder the pooler's own account can read (pytest's is its owner's alone).
    tmp_path = Path(tempfile.mkdtemp(prefix="memory-portal-pgbouncer-"))
    tmp_path.chmod(0o777)
    (tmp_path / "users.txt").write_text(f'"{db["USER"]}" ""\n')
    (tmp_path / "pgbouncer.ini").write_text(
        f"[databases]\n* = host={db['HOST']} port={db['PORT']}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {tmp_path / 'users.txt'}\npool_mode = transaction\n"
        "default_pool_size = 4\nmax_client_conn = 50\n"
        f"logfile = {tmp_path / 'pgbouncer.log'}\npidfile = {tmp_path / 'pgbouncer.pid'}\n"
    )
    for name in ("users.txt", "pgbouncer.ini"):
        (tmp_path / name).chmod(0o644)
    # PgBouncer refuses to run as root: as the database's own account where there is one.
    command = [pgbouncer, str(tmp_path / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    bouncer = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or bouncer.poll() is not None:
                pytest.fail(f"PgBouncer did not start: {bouncer.stderr.read().decode()[-500:]}")
            time.sleep(0.1)
        env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}@127.0.0.1:{port}/{db['NAME']}",
            "DJANGO_SETTINGS_MODULE": "memory_portal.settings",
            "DB_CONN_MAX_AGE": "0",
        }
        answer = subprocess.run(
            [sys.executable, "-c", THROUGH_POOLER, "run_behindthepooler000000000", "8"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert answer.returncode == 0, answer.stderr[-2000:]
        held, refused = map(int, answer.stdout.split())
        assert (held, refused) == (0, 0), answer.stderr[-2000:]
        settings.MEMORY_PORTAL = {**settings.MEMORY_PORTAL, "RUN_IN_FLIGHT_WAIT_MS": 200}
        assert _refused_of(8, "run_behindthepooler000000000") == 0
    finally:
        bouncer.terminate()
        bouncer.wait(10)
        shutil.rmtree(tmp_path, ignore_errors=True)


def _refused_of(count: int, run_id: str) -> int:
    """How many of `count` calls of the run at once (a thread and connection each) find no
    slot."""
    import threading

    from django.db import connection

    from memory_portal.memory.errors import MemoryPortalError
    from memory_portal.memory.run_slots import call_slot

    barrier = threading.Barrier(count, timeout=10)
    refused = []

    def call():
        try:
            with call_slot(run_id):
                barrier.wait()
        except MemoryPortalError:
            refused.append(1)
            barrier.abort()
        except threading.BrokenBarrierError:
            pass
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return len(refused)
