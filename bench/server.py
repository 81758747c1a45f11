"""The production server for benchmarks: gunicorn on a free loopback port, on the current
database, answering once `/readyz` does (memory_bench_locks, memory_bench_scale)."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection


class ServerDidNotStart(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url() -> str:
    """The current connection's database as a DATABASE_URL."""
    s = connection.settings_dict
    auth = s["USER"] or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    host = s["HOST"] or "127.0.0.1"
    return f"postgres://{auth}@{host}:{s['PORT'] or 5432}/{s['NAME']}"


@dataclass
class Running:
    port: int
    pid: int  # gunicorn's master

    def cpu_seconds(self) -> float:
        """User + system CPU time of the workers so far (Linux /proc): what the server spent,
        whatever else the machine is doing."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        try:
            children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
        except OSError:
            return float("nan")
        for child in children:
            try:
                fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / tick


@contextmanager
def gunicorn(
    args: list[str],
    env: dict[str, str] | None = None,
    *,
    start_timeout: float = 120,
    app: str = "memory_portal.wsgi",
):
    """Yield the running gunicorn (its port and pid) serving `app` (the product by default)
    with `args` (e.g. `-c gunicorn.conf.py`), DEBUG off, plain static names (no collectstatic
    needed), once its `/readyz` answers 200."""
    port = free_port()
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-" + "x" * 60,
        "MEMORY_PORTAL_HTTPS": "false",
        "MEMORY_PORTAL_PLAIN_STATIC": "true",
        **(env or {}),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            app,
            *args,
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=settings.BASE_DIR,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/readyz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ServerDidNotStart(f"gunicorn did not start within {start_timeout:g} s.")
            time.sleep(0.2)
        yield Running(port, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
