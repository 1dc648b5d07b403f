"""The suite's environment: its own database, Redis numbers and processes, and their CPU and memory."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_url(url: str, offset: int = 10) -> str:
    parsed = urlparse(url)
    db = int(parsed.path.strip("/") or 0)
    return urlunparse(parsed._replace(path=f"/{(db + offset) % 16}"))


def recreate_database(server_url: str) -> str:
    import psycopg

    parsed = urlparse(server_url)
    name = f"{parsed.path.strip('/')}_bench"
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parsed._replace(path=f"/{name}"))


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def libpq(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


class Procs:
    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.procs = env, list[subprocess.Popen[bytes]]()
        self.logs: dict[int, str] = {}

    def start(
        self, argv: list[str], ready: Callable[[], bool], what: str, timeout: float = 90, cwd: Path = ROOT
    ) -> subprocess.Popen:
        log = tempfile.NamedTemporaryFile(prefix="rc-bench-", suffix=".log", delete=False)  # noqa: SIM115
        proc = subprocess.Popen(
            argv, cwd=cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start:\n{Path(log.name).read_text()[-3000:]}")
            time.sleep(0.2)
        self.logs[proc.pid] = log.name
        return proc

    def stop(self, since: int = 0) -> None:
        """Stop the processes started from the ``since``-th on (all by default), newest first."""
        for proc in reversed(self.procs[since:]):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


def answers(port: int, path: str = "/healthz") -> Callable[[], bool]:
    def check() -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            return conn.getresponse().status < 500
        except OSError:
            return False

    return check


def cpu_of(pid: int) -> float:
    """CPU seconds used so far by a process and its children (gunicorn's workers)."""
    import psutil

    total = 0.0
    proc = psutil.Process(pid)
    for p in [proc, *proc.children(recursive=True)]:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def rss_of(pid: int, *, children: bool = True) -> int:
    import psutil

    proc = psutil.Process(pid)
    procs = [proc, *proc.children(recursive=True)] if children else [proc]
    return sum(p.memory_info().rss for p in procs)


def install_trivial_view() -> None:
    from django.contrib.auth.decorators import login_required
    from django.http import HttpResponse
    from django.urls import clear_url_caches, path

    import console.urls

    @login_required
    def trivial(request):
        return HttpResponse(f"hello {request.user.get_username()}")

    console.urls.urlpatterns.insert(0, path("bench/trivial", trivial))
    clear_url_caches()
