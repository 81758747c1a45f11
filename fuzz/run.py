"""`make fuzz`: a longer fuzz run than the test suite's, against a live production-like server
(gunicorn, DEBUG off, collected static files) on a database of its own — a new SQLite file, or,
when DATABASE_URL names a PostgreSQL server, a new database there that is dropped at the end.

1. schemathesis on the API: positive and negative cases (examples, coverage and fuzzing
   phases), first with an agent run's token on /api/tools and /api/v1, then with a superuser's
   token on /api/admin and /api/v1; checks: no 5xx, documented status codes, content types and
   response schemas, and that invalid input is refused.
2. hypothesis on the dashboard's pages and forms and on the login form (fuzz/forms.py): no
   5xx, no answer the client cannot read, no response header over 4 KB.
3. the server's log, searched for tracebacks.

Bounded in time: FUZZ_SECONDS (default 240) is shared between the three fuzzers; FUZZ_EXAMPLES
(default 400) bounds schemathesis' cases per operation; FUZZ_SEED (default 20261130) seeds both
fuzzers, the same cases on every run of one seed. Prints what it found and exits non-zero
if anything failed; the server, the database and the temporary folder go on every exit
(FUZZ_KEEP=1 keeps the folder, with schemathesis' reports and the server log)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

from .forms import fuzz_forms

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SEED = 20261130  # FUZZ_SEED picks another: a longer run's new cases
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
]


def say(message: str) -> None:
    print(f"fuzz: {message}", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def database(tmp: Path):
    """The environment of a database of the run's own."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        yield {"SQLITE_PATH": str(tmp / "fuzz.sqlite3")}
        return
    import psycopg

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'postgres'}_fuzz_{os.getpid()}"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {"DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}"))}
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return result.stdout


@contextlib.contextmanager
def server(env: dict, log_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server_env = {**env, "MEMORY_PORTAL_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "2"}
    server_env["MEMORY_PORTAL_THREADS"] = "8"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            # Without gunicorn's bound on a request line (4,094 bytes: a 414 of its own, before
            # the application), a long generated query string reaches the application.
            [
                str(BIN / "gunicorn"),
                "memory_portal.wsgi",
                "-c",
                "gunicorn.conf.py",
                "--limit-request-line",
                "0",
            ],
            cwd=ROOT,
            env=server_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(150):
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{base}/login/", timeout=2).status_code == 200:
                    break
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        else:
            raise RuntimeError("gunicorn did not answer in 30 s")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def schemathesis(
    base: str,
    *,
    token: str,
    paths: str,
    seconds: int,
    examples: int,
    rng_seed: int,
    report: Path,
    config: Path,
) -> tuple[int, str]:
    """One schemathesis run; returns its exit code and its summary of failures."""
    args = [
        str(BIN / "schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"{base}/api/openapi.json",
        "--include-path-regex",
        paths,
        "-H",
        f"Authorization: Bearer {token}",
        "--mode",
        "all",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(examples),
        "--max-time",
        str(seconds),
        "--seed",
        str(rng_seed),
        "--workers",
        "4",
        "--checks",
        ",".join(CHECKS),
        "--continue-on-failure",
        "--suppress-health-check",
        "all",
        "--request-timeout",
        "30",
        "--report",
        "junit",
        "--report-dir",
        str(report),
        "--output-truncate",
        "true",
    ]
    result = subprocess.run(args, cwd=report.parent, capture_output=True, text=True)
    output = result.stdout + result.stderr
    # Its failures (each with a curl command that reproduces it) and its summary.
    for heading in ("FAILURES", "WARNINGS", "SUMMARY"):
        if heading in output:
            return result.returncode, output[output.index(heading) - 40 :][-16000:].strip()
    return result.returncode, output[-4000:].strip()


def config_file(tmp: Path, seeded: dict) -> Path:
    """Most generated ids miss; these dictionaries make a share of them hit the seeded data so
    the fuzzing reaches past the 404s (and project / application ids stay out of the deletes'
    typed confirmation, so the data outlives the run)."""

    def dictionary(name: str, values: list[str]) -> str:
        return f"[dictionaries.{name}]\nvalues = {json.dumps(values)}\n"

    notes = seeded["notes"]
    bindings = {
        "path.project_id": "projects",
        "path.application_id": "applications",
        "path.repository_id": "repositories",
        "path.run_id": "runs",
        "path.note_id": "notes",
        "path.memory_id": "notes",
        "path.recovery_id": "recoveries",
        "body.agentId": "agents",
        "body.id": "notes",
        "body.recoveryId": "recoveries",
        "body.itemId": "items",
        "body.supersedes": "notes",
        "body.applicationId": "applications",
        "body.parentRunId": "runs",
        "query.agentId": "agents",
    }
    text = "".join(
        [
            dictionary("projects", [seeded["project"]]),
            dictionary("applications", [seeded["application"]]),
            dictionary("repositories", [seeded["repository"]]),
            dictionary("runs", [seeded["run"]]),
            dictionary("notes", notes),
            dictionary("recoveries", [seeded["recovery"]]),
            dictionary("agents", [seeded["agent"]]),
            dictionary("items", [seeded["item"]]),
            "[parameters]\n",
            *(
                f'"{key}" = {{ dictionary = "{name}", probability = 0.6 }}\n'
                for key, name in bindings.items()
            ),
        ]
    )  # fmt: skip
    path = tmp / "schemathesis.toml"
    path.write_text(text)
    return path


def server_failures(log_path: Path) -> list[str]:
    """The distinct exceptions the server logged (each traceback's exception line)."""
    found: dict[str, int] = {}
    in_traceback = False
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and line and not line[0].isspace():
            in_traceback = False  # the exception itself, after the indented frames
            if line.startswith("The above exception") or line.startswith("During handling"):
                continue
            # One entry per kind of failure: quoted values (ids, inputs) elided.
            key = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", line.strip())[:240]
            found[key] = found.get(key, 0) + 1
    return [f"{n}× {line}" for line, n in found.items()]


def main() -> int:
    started = time.monotonic()
    seconds = int(os.environ.get("FUZZ_SECONDS", "240"))
    examples = int(os.environ.get("FUZZ_EXAMPLES", "400"))
    rng_seed = int(os.environ.get("FUZZ_SEED", str(SEED)))
    tmp = Path(tempfile.mkdtemp(prefix="memory-portal-fuzz-"))
    failed = False
    try:
        with database(tmp) as db_env:
            env = {
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("DJANGO_", "DEBUG", "MEMORY_", "STATIC_", "SQLITE_"))
            }
            env.pop("DATABASE_URL", None)
            env |= db_env | {
                "DEBUG": "false",
                "SECRET_KEY": secrets.token_urlsafe(64),
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
                "STATIC_ROOT": str(tmp / "static"),
                "MEMORY_PORTAL_VAR_DIR": str(tmp),
                "LOG_LEVEL": "WARNING",
                # Budgets and caps stay out of the fuzzers' way, so they reach the code behind.
                "MEMORY_RUN_CALL_BUDGET": "1000000000",
                "MEMORY_RUN_NOTE_QUOTA": "1000000000",
                "MEMORY_PROJECT_NOTE_CAP": "1000000000",
            }
            db = "PostgreSQL" if "DATABASE_URL" in db_env else "SQLite"
            say(f"database: {db}; {tmp}; seed {rng_seed} (FUZZ_SEED)")
            manage(env, "migrate", "--noinput", "-v0")
            manage(env, "collectstatic", "--noinput", "-v0")
            password = secrets.token_urlsafe(16)
            seeded = json.loads(
                subprocess.run(
                    [sys.executable, "-m", "fuzz.seed", password, str(tmp / "repo")],
                    cwd=ROOT,
                    env={**env, "DJANGO_SETTINGS_MODULE": "memory_portal.settings"},
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            config = config_file(tmp, seeded)
            log_path = tmp / "server.log"
            with server(env, log_path) as base:
                say(f"serving {base} with gunicorn (DEBUG off)")
                api_seconds = max(20, int(seconds * 0.35))
                for who, token, paths in (
                    ("agent", seeded["agent_token"], r"^/api/((tools|v1)/|runs)"),
                    ("superuser", seeded["admin_token"], r"^/api/(admin|v1)/"),
                ):
                    say(f"schemathesis as {who} on {paths} ({api_seconds} s) …")
                    report = tmp / f"schemathesis-{who}"
                    report.mkdir()
                    code, summary = schemathesis(
                        base,
                        token=token,
                        paths=paths,
                        seconds=api_seconds,
                        examples=examples,
                        rng_seed=rng_seed,
                        report=report,
                        config=config,
                    )
                    print(summary, flush=True)
                    failed |= code != 0
                form_seconds = max(20, seconds - 2 * api_seconds)
                say(f"hypothesis on the dashboard's pages and forms ({form_seconds} s) …")
                found = fuzz_forms(
                    base,
                    seeded,
                    password,
                    seconds=form_seconds,
                    examples=examples // 4,
                    rng_seed=rng_seed,
                )
                say(f"dashboard: {found.requests} requests, {len(found.failures)} failing")
                for where, what in found.failures.items():
                    print(f"  {where}: {what}", flush=True)
                failed |= bool(found.failures)
            crashes = server_failures(log_path)
            say(f"server log: {len(crashes)} distinct exceptions")
            for line in crashes:
                print(f"  {line}", flush=True)
            failed |= bool(crashes)
    finally:
        if os.environ.get("FUZZ_KEEP"):
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say(f"{'FAILED' if failed else 'passed'} in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
