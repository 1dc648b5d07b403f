"""Real processes for the guarantee tests: Celery workers, the outbox relay, a private Redis,
and a recording agent endpoint. Each is a subprocess in its own process group, so a
test can SIGKILL a whole worker (parent and children) the way an OOM killer would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(
    predicate: Callable[[], object], *, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"
) -> object:
    """Poll until ``predicate()`` is truthy; a deadline, never a timed assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def database_url() -> str:
    """The URL of the database the tests run on (pytest-django's test database)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def full_stack_required() -> bool:
    """CI runs the production stack (``REQUIRE_FULL_STACK=1``): there a test that cannot run fails, never skips."""
    return os.environ.get("REQUIRE_FULL_STACK") == "1"


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` on a tmpfs of its own (a disk to fill, or another filesystem than /tmp); unmounted after.

    Mounting needs root: without it the test is skipped, or fails where the full stack is required.
    """
    import pytest

    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        reason = f"this test needs a tmpfs mount (root): {mounted.stderr.strip()}"
        if full_stack_required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)  # a developer's machine without root; CI sets REQUIRE_FULL_STACK
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


class Proc:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"rc-{name}-", suffix=".log", delete=False)  # noqa: SIM115
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group: a killed worker takes its pool children with it."""
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            self.kill(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.popen.wait(5)
        self.kill(signal.SIGKILL)  # stragglers in the group


class Stack:
    """Processes that share the test database and one broker."""

    def __init__(self, broker_url: str, **overrides: str) -> None:
        self.broker_url = broker_url
        self.queue = f"test-{os.getpid()}-{time.monotonic_ns()}"
        self.overrides = overrides
        self.beat_schedule: Path | None = None  # where a test's beat keeps its schedule
        self.procs: list[Proc] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.update(
            {
                "DATABASE_URL": database_url(),
                "CELERY_BROKER_URL": self.broker_url,
                "CELERY_QUEUE": self.queue,
                "SECRET_KEY": settings.SECRET_KEY,
                "DEBUG": "false",
                "SECURE_COOKIES": "false",
                "CONN_MAX_AGE": "0",
                "MANIFEST_STATIC": "false",
                "PYTHONUNBUFFERED": "1",
                "LOG_LEVEL": "INFO",
                "DELIVERY_ALLOWED_NETWORKS": "127.0.0.1/32,::1/128",
                "DELIVERY_REQUIRE_HTTPS": "false",
                **self.overrides,
            }
        )
        return env

    def start(self, name: str, argv: list[str], ready: str | None = None, timeout: float = 60.0) -> Proc:
        proc = Proc(name, argv, self.env())
        self.procs.append(proc)
        if ready:
            wait_until(
                lambda: ready in proc.output() or not proc.alive(), timeout=timeout, what=f"{name} to print {ready!r}"
            )
            assert proc.alive(), f"{name} died:\n{proc.output()[-3000:]}"
        return proc

    def worker(self, name: str = "w", concurrency: int = 2) -> Proc:
        return self.start(
            name,
            [
                str(BIN / "celery"),
                "-A",
                "console",
                "worker",
                "-P",
                "prefork",
                "-c",
                str(concurrency),
                "-n",
                f"{name}-{self.queue}@%h",
                "-Q",
                self.queue,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
            ready="ready.",
        )

    def relay(self, interval: float = 0.3) -> Proc:
        return self.start(
            "relay", [str(BIN / "python"), "manage.py", "run_relay", "--interval", str(interval)], ready="outbox relay"
        )

    def beat(self, schedule: Path) -> Proc:
        """Celery beat sending the periodic sweep to this stack's queue; ``schedule`` is the test's own file
        (the default, under VAR_DIR, is shared by every process on the machine)."""
        return self.start(
            "beat",
            [str(BIN / "celery"), "-A", "console", "beat", "-s", str(schedule), "--loglevel=INFO"],
            ready="beat: Starting",
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        connection.close()


@contextmanager
def private_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


class RedisServer:
    """A Redis of the test's own, so a test can stop and restart it without touching anyone else's."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, timeout=20, what="redis to start")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Receiver:
    """A recording resume endpoint: every POST is kept; answers come from ``respond``."""

    def __init__(self) -> None:
        self.deliveries: list[dict] = []
        self.lock = threading.Lock()
        self.respond: Callable[[dict], int] = lambda body: 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                record = {
                    "body": json.loads(raw),
                    "raw": raw,
                    "delivery": self.headers.get("X-Recovery-Delivery"),
                    "signature": self.headers.get("X-Recovery-Signature"),
                    "host": self.headers.get("Host"),
                    "path": self.path,
                }
                with receiver.lock:
                    receiver.deliveries.append(record)
                status = receiver.respond(record)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # Polls shutdown() every 50 ms (default 500): each receiver's teardown waited up to half a second.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/resume"

    def delivery_ids(self) -> list[str]:
        with self.lock:
            return [d["delivery"] for d in self.deliveries]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
