"""`make faults`: the production setup (gunicorn, DEBUG off, PostgreSQL) on a cluster of the
suite's own, under concurrent writers while the database restarts, a worker is killed and a
project's lock is held; then what was answered is checked against what was stored.

Prints a table of what it did and saw, one line per check, and a closing line
`faults: N passed, M failed in S s`; exits non-zero when anything failed. The cluster, the
server and the temporary folder are removed on every exit (a failure, Ctrl-C, SIGTERM, the
time budget running out)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import psycopg

from . import checks as c
from .infra import (
    BIN,
    ROOT,
    TMP_PREFIX,
    Cluster,
    Server,
    SetupError,
    call,
    run_command,
    sweep_stale_folders,
    wait_until,
)
from .load import Writer, start_writers

PROJECTS = ("faults-a", "faults-b", "faults-c", "faults-d")  # the first one has its lock held
WRITERS_PER_PROJECT = 2
RUNS_PER_WRITER = 4  # 400 calls each, more than a writer makes at its pace
WRITER_INTERVAL = 0.2  # seconds between one writer's requests: 40 requests/s offered in all
REQUEST_TIMEOUT = 30.0
BASELINE_SECONDS = 8.0
BASELINE_LIMIT = 60.0  # a loaded machine answers late: the baseline waits for an answer per writer
GRACE_SECONDS = 3.0  # a fault's window lasts this long after the fault is over
GAP_SECONDS = 2.0  # quiet time between two faults' windows
HOLD_SECONDS = 8.0
OUTAGE_SECONDS = 3.0  # how long the database stays down in the stop / start fault
TAIL_SECONDS = 6.0
VECTOR_WAIT = 30.0  # how long the stored notes' vectors may take after the writers stop
BUDGET_SECONDS = 480  # the whole suite, setup and cleanup included
ADMIN = "faults-admin"


class Budget(Exception):
    pass


METRICS_TOKEN = secrets.token_urlsafe(24)


def log(started: float, message: str) -> None:
    print(f"[{time.monotonic() - started:6.1f} s] {message}", flush=True)


def production_env(database_url: str, tmp: Path) -> dict[str, str]:
    """The README's production environment, on loopback behind a (simulated) TLS proxy."""
    env = {
        k: v for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "SQLITE_PATH", "GUNICORN_CMD_ARGS", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(48),
        ALLOWED_HOSTS="127.0.0.1",
        CSRF_TRUSTED_ORIGINS="https://127.0.0.1",
        MEMORY_PORTAL_HTTPS="true",
        MEMORY_PORTAL_BEHIND_PROXY="true",
        DATABASE_URL=database_url,
        STATIC_ROOT=str(tmp / "static"),
        MEMORY_PORTAL_VAR_DIR=str(tmp / "var"),
        DJANGO_SETTINGS_MODULE="memory_portal.settings",
        PYTHONUNBUFFERED="1",
        # /metrics on, so its figures can be held against the database across the workers.
        MEMORY_PORTAL_METRICS_TOKEN=METRICS_TOKEN,
    )
    return env


class Suite:
    def __init__(self) -> None:
        self.started = time.monotonic()
        sweep_stale_folders()
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
        self.cluster = Cluster()
        self.server: Server | None = None
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.lock_conn: psycopg.Connection | None = None
        self.nonce = secrets.token_hex(4)
        self.results: list[c.Check] = []
        self.health_checks: list[c.Check] = []
        self.table: list[list[str]] = []

    def say(self, message: str) -> None:
        log(self.started, message)

    # --- setup ----------------------------------------------------------------------------

    def manage(self, env: dict[str, str], *args: str) -> str:
        return run_command([str(BIN / "python"), "manage.py", *args], env=env, timeout=300)

    def setup(self) -> dict[str, str]:
        self.cluster.create()
        self.cluster.start()
        self.cluster.create_database()
        self.say(f"cluster {self.cluster.name} on 127.0.0.1:{self.cluster.port}")
        env = production_env(self.cluster.url, self.tmp)
        self.manage(env, "migrate", "--noinput")
        self.manage(env, "createcachetable")
        self.manage(env, "collectstatic", "--noinput")
        self.manage(env, "check", "--deploy", "--fail-level", "ERROR")
        self.manage(
            env, "createsuperuser", "--noinput", "--username", ADMIN,
            "--email", "faults-admin@example.invalid",
        )
        admin_token = self.manage(env, "create_api_token", ADMIN).strip()
        self.say("migrated, cache table, collectstatic, check --deploy, superuser")
        self.server = Server(env=env, log_path=self.tmp / "gunicorn.log")
        self.server.start()
        self.say(
            f"gunicorn {self.server.describe()} on 127.0.0.1:{self.server.port}, "
            f"master {self.server.master_pid}, {len(self.server.workers())} workers"
        )
        return {"admin": admin_token}

    def admin(self, token: str, method: str, path: str, body: dict, expect: int) -> dict | None:
        answer = call(self.server.port, method, path, token=token, body=body)
        if answer.status != expect:
            raise SetupError(f"{method} {path} answered {answer.status}: {answer.body[:300]!r}")
        return answer.json()

    def seed(self, admin_token: str) -> tuple[list[Writer], str]:
        """Projects with memory on, one runtime agent each, runs for every writer; and one
        spare run for the health check afterwards."""
        writers: list[Writer] = []
        health_token = ""
        for slug in PROJECTS:
            base = f"/api/admin/projects/{slug}"
            self.admin(admin_token, "POST", "/api/admin/projects",
                       {"id": slug, "name": f"Fault suite {slug}"}, 201)
            self.admin(admin_token, "PUT", f"{base}/memory", {"enabled": True}, 204)
            agent = self.admin(admin_token, "POST", f"{base}/agents",
                               {"name": "Fault writer", "stage": "runtime"}, 201)["id"]

            def mint(task: str, agent: str = agent, base: str = base) -> str:
                run = self.admin(admin_token, "POST", f"{base}/runs",
                                 {"agentId": agent, "taskKey": task}, 201)
                return run["token"]

            for _ in range(WRITERS_PER_PROJECT):
                index = len(writers)
                tokens = [mint(f"FAULT-{index}-{n}") for n in range(RUNS_PER_WRITER)]
                writers.append(Writer(
                    index=index, project=slug, tokens=tokens, port=self.server.port,
                    nonce=self.nonce, interval=WRITER_INTERVAL, timeout=REQUEST_TIMEOUT,
                ))
        for writer in writers:
            writer.offset = writer.index * WRITER_INTERVAL / len(writers)
            if not health_token:
                health_token = mint("FAULT-HEALTH")
        self.say(f"seeded {len(PROJECTS)} projects, {len(writers)} writers")
        return writers, health_token

    # --- database reads (the suite's own connection) ---------------------------------------

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.cluster.dsn, autocommit=True, connect_timeout=10) as conn:
            return conn.execute(sql, params).fetchall()

    def revisions(self) -> dict[str, int]:
        return dict(self.query(
            "SELECT p.slug, s.revision FROM project_memory_setting s "
            "JOIN memory_project p ON p.id = s.project_id"
        ))

    # --- the faults -------------------------------------------------------------------------

    def restart_database(self) -> tuple[c.Window, c.Check]:
        before = self.query("SELECT pg_postmaster_start_time()")[0][0]
        start = time.monotonic()
        self.say(f"fault: pg_ctlcluster 15 {self.cluster.name} restart")
        ready = self.cluster.restart()
        after = self.query("SELECT pg_postmaster_start_time()")[0][0]
        self.say(f"  database back after {ready - start:.1f} s")
        return (
            c.Window("database restart", start, ready + GRACE_SECONDS),
            c.Check("fault took effect: the database restarted", after != before,
                    f"down and back in {ready - start:.1f} s"),
        )

    def stop_database(self) -> tuple[c.Window, c.Check]:
        before = self.query("SELECT pg_postmaster_start_time()")[0][0]
        start = time.monotonic()
        self.say(f"fault: pg_ctlcluster 15 {self.cluster.name} stop; {OUTAGE_SECONDS:.0f} s "
                 "down; start")
        self.cluster.stop()
        down = time.monotonic()
        # Meanwhile the probes: the process is healthy, not ready, and says which check fails.
        healthz, readyz = self.probe("/healthz"), self.probe("/readyz")
        self.stop.wait(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down)))
        ready = self.cluster.start()
        after = self.query("SELECT pg_postmaster_start_time()")[0][0]
        self.say(f"  database back after {ready - start:.1f} s")
        self.health_checks.append(c.Check(
            "probes while the database is down: /healthz 200, /readyz 503 naming the database",
            healthz[0] == 200 and readyz[0] == 503 and "database" in readyz[1]
            and readyz[2] is not None,
            f"/healthz {healthz[0]}, /readyz {readyz[0]} {readyz[1]} (Retry-After {readyz[2]})",
        ))
        return (
            c.Window("database down", start, ready + GRACE_SECONDS),
            c.Check("fault took effect: the database was down and came back",
                    after != before and ready - down >= OUTAGE_SECONDS,
                    f"refusing connections for {ready - down:.1f} s"),
        )

    def probe(self, path: str) -> tuple[int, str, str | None]:
        """(status, the failing checks, Retry-After) of a health route."""
        try:
            answer = call(self.server.port, "GET", path, timeout=10)
        except OSError as exc:
            return 0, f"no answer ({exc})", None
        checks = (answer.json() or {}).get("checks", {})
        failing = ",".join(name for name, said in checks.items() if not said.startswith("ok"))
        return answer.status, failing, answer.headers.get("retry-after")

    def kill_worker(self) -> tuple[c.Window, c.Check]:
        server = self.server
        workers = server.workers()
        if not workers:
            raise SetupError("gunicorn has no workers to kill")
        victim, serving = server.busy_worker(timeout=5)
        start = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        self.say(f"fault: kill -9 worker {victim} (of {len(workers)}), "
                 f"{'while' if serving else 'not seen'} serving a request")

        def replaced() -> bool:
            now = server.workers()
            return victim not in now and len(now) >= len(workers)

        back = wait_until("gunicorn to replace the killed worker", replaced, timeout=60)
        self.say(f"  replaced after {back - start:.1f} s")
        return (
            c.Window("worker kill -9", start, back + GRACE_SECONDS),
            c.Check(
                "fault took effect: a worker was killed and replaced by the same master",
                server.alive() and victim not in server.workers(),
                f"worker {victim} killed {'mid-request' if serving else 'while idle'}, "
                f"{len(server.workers())} workers again in {back - start:.1f} s",
            ),
        )

    def hold_lock(self, writers: list[Writer]) -> tuple[c.Window, c.Check]:
        project = PROJECTS[0]
        self.lock_conn = psycopg.connect(self.cluster.dsn, connect_timeout=10)
        row = self.lock_conn.execute(
            "SELECT s.id FROM project_memory_setting s JOIN memory_project p "
            "ON p.id = s.project_id WHERE p.slug = %s FOR UPDATE OF s",
            (project,),
        ).fetchone()
        start = time.monotonic()
        self.say(f"fault: holding {project}'s project_memory_setting row lock for "
                 f"{HOLD_SECONDS:.0f} s")
        self.stop.wait(HOLD_SECONDS)
        self.lock_conn.rollback()
        self.lock_conn.close()
        self.lock_conn = None
        end = time.monotonic()
        self.say("  lock released")
        window = c.Window("held lock", start, end + 0.5)
        waited = [
            r for w in writers if w.project == project for r in list(w.records)
            if r.started < end and r.ended > start
        ]
        return window, c.Check(
            f"fault took effect: {project}'s setting row was locked while its writers wrote",
            row is not None and bool(waited) and end - start >= HOLD_SECONDS,
            f"held {end - start:.1f} s; {len(waited)} writes to {project} in flight during it",
        )

    # --- the run ----------------------------------------------------------------------------

    def run(self) -> None:
        tokens = self.setup()
        writers, health_token = self.seed(tokens["admin"])
        revisions_before = self.revisions()
        audit_floor = self.query("SELECT coalesce(max(id), 0) FROM memory_auditevent")[0][0]
        master = self.server.master_pid

        metrics_before = self.scrape()
        self.threads = start_writers(writers, self.stop)
        self.say(f"{len(writers)} writers started, {1 / WRITER_INTERVAL:.0f} writes/s each at most")
        self.stop.wait(BASELINE_SECONDS)
        # The baseline ends only once every writer has been answered: on a busy machine the
        # first answers can take longer than BASELINE_SECONDS, and a fault must not come first.
        wait_until(
            "an answer to every writer before the first fault",
            lambda: all(any(r.ended for r in w.records) for w in writers),
            timeout=BASELINE_LIMIT,
        )
        windows: dict[str, c.Window] = {}
        fault_checks: list[c.Check] = []
        for inject in (self.restart_database, self.stop_database, self.kill_worker):
            window, check = inject()
            windows[window.name] = window
            fault_checks.append(check)
            self.stop.wait(max(0.0, window.end - time.monotonic()) + GAP_SECONDS)
        window, check = self.hold_lock(writers)
        windows[window.name] = window
        fault_checks.append(check)
        self.stop.wait(TAIL_SECONDS)
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=REQUEST_TIMEOUT + 10)
        if any(t.is_alive() for t in self.threads):
            raise SetupError("a writer did not stop")
        records = sorted((r for w in writers for r in w.records), key=lambda r: r.started)
        self.say(f"writers stopped: {len(records)} requests")
        if any(w.ran_out_of_runs for w in writers):
            raise SetupError("a writer used up its runs; raise RUNS_PER_WRITER")

        marker_rows = self.query(
            "SELECT e.id, e.content, p.slug FROM project_memory_entry e "
            "JOIN memory_project p ON p.id = e.project_id WHERE e.content LIKE %s",
            (f"Fault suite {self.nonce}:%",),
        )
        stored: dict[str, list[tuple[str, str]]] = {}
        for note_id, content, slug in marker_rows:
            stored.setdefault(content, []).append((note_id, slug))
        audit_refs = self.query(
            "SELECT p.slug, a.note_ref FROM memory_auditevent a "
            "JOIN memory_project p ON p.id = a.project_id WHERE a.id > %s AND a.note_ref <> ''",
            (audit_floor,),
        )
        outcome = c.Outcome(records, stored)
        vectors = self.vectors_stored()
        self.table = [
            [name, *c.summarize(outcome, group)]
            for name, group in c.phases(records, windows, PROJECTS[0])
        ]
        self.results = [
            *fault_checks,
            *self.health_checks,
            *c.product_checks(outcome, windows, PROJECTS[0], marker_rows),
            c.bookkeeping_check(marker_rows, revisions_before, self.revisions(), audit_refs),
            vectors,
            self.healthy_afterwards(master, health_token),
        ]
        self.results.append(self.metrics_add_up(metrics_before, records, marker_rows))

    def vectors_stored(self) -> c.Check:
        """Waits (up to VECTOR_WAIT seconds) for the vectors of the stored notes."""
        started = time.monotonic()

        def counts() -> tuple[int, int]:
            return self.query(
                "SELECT count(*), count(*) FILTER (WHERE embedding IS NULL) "
                "FROM project_memory_entry WHERE content LIKE %s",
                (f"Fault suite {self.nonce}:%",),
            )[0]

        stored, missing = counts()
        while missing and time.monotonic() - started < VECTOR_WAIT:
            time.sleep(0.5)
            stored, missing = counts()
        return c.vectors_check(stored, missing, time.monotonic() - started)

    def healthy_afterwards(self, master: int, token: str) -> c.Check:
        """Without a restart: the same master, a write, a read of it, the login page."""
        port = self.server.port
        problems = []
        if not self.server.alive() or self.server.master_pid != master:
            problems.append("the gunicorn master is gone")
        content = f"Fault suite {self.nonce} health: one more note after the faults."
        try:
            wrote = call(port, "POST", "/api/tools/memory_write", token=token,
                         body={"kind": "fact", "target": "long_term", "content": content})
            note_id = (wrote.json() or {}).get("id") if wrote.status == 200 else None
            if not note_id:
                problems.append(f"write answered {wrote.status}")
            else:
                read = call(port, "POST", "/api/tools/memory_read", token=token,
                            body={"id": note_id})
                entries = (read.json() or {}).get("entries") or [{}]
                if read.status != 200 or entries[0].get("content") != content:
                    problems.append(f"read answered {read.status}")
            for path in ("/login/", "/readyz"):
                answer = call(port, "GET", path)
                if answer.status != 200:
                    problems.append(f"{path} answered {answer.status}")
        except OSError as exc:
            problems.append(f"no answer ({type(exc).__name__})")
        return c.Check(
            "healthy afterwards without a restart: write, read, /login/, /readyz",
            not problems,
            "; ".join(problems) or f"same master {master}, write + read + /login/ + /readyz 200",
        )

    def scrape(self) -> dict[str, float]:
        """/metrics as {"name{labels}": value} (the tool calls, notes written, busy)."""
        from prometheus_client.parser import text_string_to_metric_families

        answer = call(self.server.port, "GET", "/metrics", token=METRICS_TOKEN)
        if answer.status != 200:
            raise SetupError(f"/metrics answered {answer.status}")
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(answer.body.decode()):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                values[f"{sample.name}{{{labels}}}"] = sample.value
        return values

    def metrics_add_up(self, before: dict[str, float], records, marker_rows) -> c.Check:
        """One scrape adds up every worker (the killed one's too): what the counters moved by
        against what the writers saw and the database holds. A request cut by the kill may
        have counted or not, so it widens each bound by one."""
        after = self.scrape()

        def moved(key: str) -> float:
            return after.get(key, 0.0) - before.get(key, 0.0)

        cut = sum(r.status is None for r in records)
        stored = len(marker_rows) + 1  # and healthy_afterwards' note
        acknowledged = sum(r.acknowledged for r in records) + 1
        busy_seen = sum((r.body or {}).get("error", {}).get("code") == "memory_busy"
                        for r in records if isinstance(r.body, dict))
        written = moved("memory_portal_notes_written_total{}")
        ok_calls = moved("memory_portal_tool_calls_total{outcome=ok,tool=write}")
        busy = moved("memory_portal_busy_total{}")
        busy_calls = moved("memory_portal_tool_calls_total{outcome=memory_busy,tool=write}")
        problems = []
        if not stored - cut <= written <= stored:
            problems.append(f"notes written {written:.0f}, stored {stored}")
        if not acknowledged <= ok_calls <= acknowledged + cut:
            problems.append(f"ok calls {ok_calls:.0f}, acknowledged {acknowledged}")
        if not busy_seen <= busy <= busy_seen + cut or busy_calls != busy:
            problems.append(f"busy {busy:.0f} (as calls {busy_calls:.0f}), answered {busy_seen}")
        return c.Check(
            "/metrics adds up every worker: notes written, ok calls and busy refusals match",
            not problems,
            "; ".join(problems) or f"{written:.0f} notes written = {stored} stored; "
            f"{ok_calls:.0f} ok calls for {acknowledged} acknowledged; {busy:.0f} busy "
            f"= {busy_seen} answered",
        )

    # --- cleanup ----------------------------------------------------------------------------

    def cleanup(self) -> list[str]:
        problems = []
        self.stop.set()
        if self.lock_conn is not None:
            with contextlib.suppress(psycopg.Error):
                self.lock_conn.close()
        steps = [
            ("stop gunicorn", self.server.stop if self.server else None),
            ("drop the cluster", self.cluster.drop),
            ("remove the temporary folder", lambda: shutil.rmtree(self.tmp)),
        ]
        for what, step in steps:
            if step is None:
                continue
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step runs; each problem is reported
                problems.append(f"{what}: {exc}")
        for thread in self.threads:
            thread.join(timeout=5)
        return problems


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _raise_budget(signum, frame):
    raise Budget(f"the suite ran past its {BUDGET_SECONDS} s budget")


def main() -> int:
    os.chdir(ROOT)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_exit)
    signal.signal(signal.SIGALRM, _raise_budget)
    signal.alarm(BUDGET_SECONDS)
    suite = Suite()
    print("== fault suite: production server, own PostgreSQL cluster, injected failures",
          flush=True)
    setup_failure = None
    excerpt: list[str] = []
    try:
        suite.run()
    except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - reported below
        setup_failure = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, SetupError | Budget | KeyboardInterrupt | SystemExit):
            traceback.print_exc()
    finally:
        signal.alarm(0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # cleanup is bounded; let it finish
        if suite.server is not None:
            excerpt = suite.server.log_excerpt()
        cleanup_problems = suite.cleanup()

    results = list(suite.results)
    if setup_failure:
        results.append(c.Check("the suite ran to the end", False, setup_failure))
    results.append(c.Check(
        "cleanup: server stopped, cluster dropped, temporary folder removed",
        not cleanup_problems, "; ".join(cleanup_problems) or "done",
    ))
    if suite.table:
        print()
        print(c.render_table(c.HEADER, suite.table))
    print()
    for check in results:
        print(f"{'PASS' if check.passed else 'FAIL'}  {check.name}")
        if check.detail:
            print(f"      {check.detail}")
    failed = sum(not check.passed for check in results)
    if failed and excerpt:
        print("\nserver log, error lines:")
        for line in excerpt:
            print(f"  {line[:200]}")
    wall = time.monotonic() - suite.started
    print(f"\nfaults: {len(results) - failed} passed, {failed} failed in {wall:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
