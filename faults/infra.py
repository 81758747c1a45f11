"""What the fault suite runs on, each piece owned and removed by the suite: a PostgreSQL cluster
of its own (never the shared `main` cluster), the production server (gunicorn) and the plain
HTTP calls made to it. Waiting for a port or a server to come up is the only place it retries."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PG_VERSION = "15"
# Clusters and temporary folders are named after the process that made them, so a later run can
# tell the leftovers of a run killed outright (its process is gone) from those in use.
CLUSTER_PREFIX = "faults_"
TMP_PREFIX = "memory-portal-faults-"
DATABASE = "memory_portal_faults"


class SetupError(RuntimeError):
    """The suite could not build what it tests on; nothing about the product is known yet."""


def free_port() -> int:
    """A free loopback port below the kernel's range for outgoing connections, so no client
    socket takes it while PostgreSQL restarts and has to bind it again."""
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    top = max(low, 20_100)
    for _ in range(200):
        port = random.randint(20_000, top - 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SetupError("no free loopback port found")


def wait_until(what: str, ready, *, timeout: float, interval: float = 0.2) -> float:
    """Poll `ready()` until it is true; return the time it became true."""
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise SetupError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def run_command(cmd: list[str], *, env: dict | None = None, timeout: float = 300) -> str:
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"{' '.join(cmd)} took longer than {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise SetupError(
            f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return done.stdout


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- PostgreSQL ---------------------------------------------------------------------------------


class Cluster:
    """`pg_createcluster 15 faults_<pid>` on a free port, trust authentication on loopback and
    the local socket, started by hand (start.conf manual), dropped at the end."""

    def __init__(self) -> None:
        self.name = f"{CLUSTER_PREFIX}{os.getpid()}"
        self.port = 0
        self.created = False

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={DATABASE}"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def create(self) -> None:
        for tool in ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster", "pg_isready"):
            if shutil.which(tool) is None:
                raise SetupError(f"{tool} not found: the fault suite needs Debian's PostgreSQL 15")
        if self.name.removeprefix(CLUSTER_PREFIX) == "main":  # paranoia: never the shared one
            raise SetupError("refusing to manage a cluster called main")
        sweep_stale_clusters()
        self.port = free_port()
        run_command(
            [
                "pg_createcluster", PG_VERSION, self.name, "--port", str(self.port),
                "--start-conf", "manual", "--", "--auth-local=trust", "--auth-host=trust",
            ],
            timeout=120,
        )
        self.created = True

    def _ctl(self, action: str) -> None:
        run_command(
            ["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, self.name, action],
            timeout=120,
        )

    def ready(self) -> bool:
        done = subprocess.run(
            ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "2"], check=False
        )
        return done.returncode == 0

    def start(self) -> float:
        """Start it; return when it accepts connections."""
        self._ctl("start")
        return wait_until("PostgreSQL to accept connections", self.ready, timeout=60, interval=0.05)

    def stop(self) -> None:
        """Fast shutdown: open connections are cut, new ones refused."""
        self._ctl("stop")

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")

    def restart(self) -> float:
        """Restart (fast shutdown: open connections are cut); return when it accepts again."""
        self._ctl("restart")
        return wait_until("PostgreSQL to come back", self.ready, timeout=60, interval=0.05)

    def drop(self) -> None:
        if self.created:
            run_command(["pg_dropcluster", "--stop", PG_VERSION, self.name], timeout=120)
            self.created = False


def sweep_stale_clusters() -> None:
    """Drop clusters left by fault-suite runs whose process no longer exists (a run killed with
    SIGKILL cannot clean up after itself). Only `faults_<pid>` names are ever touched."""
    listing = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=False)
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) < 2 or fields[0] != PG_VERSION:
            continue
        match = re.fullmatch(rf"{CLUSTER_PREFIX}(\d+)", fields[1])
        if match and int(match.group(1)) != os.getpid() and not _pid_alive(int(match.group(1))):
            print(f"  dropping cluster {fields[1]} left by an earlier run")
            subprocess.run(["pg_dropcluster", "--stop", PG_VERSION, fields[1]], check=False)


def sweep_stale_folders() -> None:
    """Remove the temporary folders of fault-suite runs whose process is gone, ending the
    gunicorn each one recorded (its pid file, checked against its command line) first."""
    for folder in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        match = re.match(rf"{TMP_PREFIX}(\d+)-", folder.name)
        if not match or _pid_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError, ValueError):
            pid = int((folder / "gunicorn.pid").read_text().strip())
            if b"memory_portal.wsgi" in Path(f"/proc/{pid}/cmdline").read_bytes():
                print(f"  ending gunicorn {pid} left by an earlier run")
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


# --- HTTP ---------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def call(
    port: int,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    timeout: float = 30.0,
) -> Answer:
    """One request on a fresh connection. Raises OSError (and http.client errors) when the
    connection fails: that is a client-side failure, not an answer from the server."""
    # The server runs as in production, behind a TLS-terminating proxy it trusts for the scheme.
    headers = {"X-Forwarded-Proto": "https", "Connection": "close"}
    payload = None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn = HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        conn.close()


# --- gunicorn -----------------------------------------------------------------------------------


def _established_inodes(port: int) -> set[str]:
    """Socket inodes of established TCP connections whose local port is `port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "01" and int(fields[1].split(":")[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


class Server:
    """The production server as the README runs it: `gunicorn memory_portal.wsgi -c
    gunicorn.conf.py`, bound to a free loopback port (the command line's --bind wins over the
    file's). Without gunicorn.conf.py: 3 sync workers."""

    def __init__(self, *, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.control_socket = log_path.parent / "gunicorn.ctl"
        self.pid_file = log_path.parent / "gunicorn.pid"
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.config = "gunicorn.conf.py" if (ROOT / "gunicorn.conf.py").exists() else None

    def describe(self) -> str:
        return f"-c {self.config}" if self.config else "--workers 3 (no gunicorn.conf.py)"

    def start(self) -> None:
        self.port = free_port()
        cmd = [str(BIN / "gunicorn"), "memory_portal.wsgi"]
        cmd += ["-c", self.config] if self.config else ["--workers", "3"]
        cmd += ["--bind", f"127.0.0.1:{self.port}", "--pid", str(self.pid_file)]
        if "--control-socket" in run_command([str(BIN / "gunicorn"), "--help"], timeout=60):
            # Its own control socket, not the one in the home folder another gunicorn may use.
            cmd += ["--control-socket", str(self.control_socket)]
        with open(self.log_path, "ab") as log:
            # Its own session, so the whole tree can be ended by its process group at the end.
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def answers() -> bool:
            if self.proc.poll() is not None:
                raise SetupError(f"gunicorn exited {self.proc.returncode}; see its log below")
            try:
                return call(self.port, "GET", "/readyz", timeout=5).status == 200
            except OSError:
                return False

        wait_until("gunicorn to be ready (/readyz)", answers, timeout=90, interval=0.3)

    @property
    def master_pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def workers(self) -> list[int]:
        """The master's children, read from /proc."""
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # The command name is in parentheses and may contain spaces: split after it.
            fields = stat.rsplit(")", 1)[-1].split()
            if len(fields) > 1 and int(fields[1]) == self.master_pid:
                children.append(int(entry.name))
        return sorted(children)

    def busy_worker(self, timeout: float) -> tuple[int, bool]:
        """A worker with a client connection open on the server's port (so killing it cuts a
        request in flight), polled for up to `timeout`; else the first worker."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            serving = _established_inodes(self.port)
            for pid in self.workers():
                if _socket_inodes(pid) & serving:
                    return pid, True
            time.sleep(0.002)
        return self.workers()[0], False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of its group is left
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        self.proc = None

    def log_excerpt(self, limit: int = 30) -> list[str]:
        """The server's error lines (tracebacks' last lines, ERROR records), for a failed run."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        picked = [
            line for line in lines
            if any(mark in line for mark in ("ERROR", "Error:", "Exception", "CRITICAL"))
            or ("File " in line and f"{ROOT.name}/memory_portal/" in line)  # the project's frames
        ]
        unique = list(dict.fromkeys(picked))
        return unique[-limit:]
