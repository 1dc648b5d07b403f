"""Slow clients never reach gunicorn: the compose stack's Caddy reads each request whole first.

Issue 22, finding 5: 14 slow connections straight to gunicorn took ``/healthz`` from 6 s to 71 s
(gthread gives a connection a thread while its request is read). Here the real gunicorn, with the
one config and few threads, sits behind the real Caddy with the compose file's ``deploy/Caddyfile``;
slow clients (headers and bodies trickled a byte at a time) hold connections to Caddy while
``/healthz`` through it still answers at once. The same clients sent straight to gunicorn stall it,
which is why it is only ever published through the proxy (docker-compose.yml).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
import yaml

from tests.stack import BIN, ROOT, free_port, wait_until

THREADS = 2  # gunicorn: one worker with two threads, so a handful of slow clients is plenty
SLOW_CLIENTS = 14  # of each kind, as in the review


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _healthz(port: int, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """(Caddy's port, gunicorn's port): the compose Caddyfile in front of gunicorn with the one config."""
    web, proxy = free_port(), free_port()
    env = {
        **os.environ,
        "SECRET_KEY": "proxy-test",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path),
        "MANIFEST_STATIC": "false",
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": str(THREADS),
        "GUNICORN_BIND": f"127.0.0.1:{web}",
        "GUNICORN_ACCESS_LOG": "",
        "CONSOLE_HOST": f"http://127.0.0.1:{proxy}",
        "CONSOLE_UPSTREAM": f"127.0.0.1:{web}",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path),
    }
    gunicorn = _start(
        [str(BIN / "gunicorn"), "-c", "python:console.gunicorn", "console.wsgi"], env, tmp_path / "gunicorn.log"
    )
    caddy = _start(
        [str(BIN / "caddy"), "run", "--config", str(ROOT / "deploy" / "Caddyfile"), "--adapter", "caddyfile"],
        env,
        tmp_path / "caddy.log",
    )
    try:
        wait_until(lambda: _healthz(web, 2) and _healthz(proxy, 2), timeout=60, what="gunicorn and Caddy")
        yield proxy, web
    finally:
        _stop(caddy)
        _stop(gunicorn)


class SlowClients:
    """Connections that send a request a byte at a time: headers that never end, and bodies."""

    def __init__(self, port: int) -> None:
        self.sockets: list[tuple[socket.socket, bytes]] = []
        for i in range(SLOW_CLIENTS):
            head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 4000
            # A form post: the CSRF check reads the body before anything answers.
            body = (
                b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n"
            )
            for request in (head, body):
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                # The request line (and a body's headers), then a trickle.
                sock.sendall(request if request.startswith(b"POST") else request[: request.index(b"\r\n") + 2 + i])
                self.sockets.append((sock, request))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        sent = 0
        while not self.stop.wait(0.2):
            sent += 1
            for sock, _request in self.sockets:
                with suppress(OSError):
                    sock.send(b"a" if sent % 2 else b" ")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for sock, _ in self.sockets:
            sock.close()


def test_the_proxy_is_the_only_published_port_and_reads_the_compose_caddyfile():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"} and services["web"]["expose"] == ["8000"]
    proxy = services["proxy"]
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    assert proxy["command"][:4] == ["caddy", "run", "--config", "/etc/caddy/Caddyfile"]
    caddyfile = (ROOT / "deploy" / "Caddyfile").read_text()
    for setting in (
        "read_header 10s",
        "read_body 30s",
        "request_buffers 4MB",
        "max_size 4MB",
        "reverse_proxy {$CONSOLE_UPSTREAM:web:8000}",
    ):
        assert setting in caddyfile, setting


def test_slow_clients_at_the_proxy_do_not_stall_gunicorn_but_straight_at_it_they_do(stack):
    proxy, web = stack
    at_proxy = SlowClients(proxy)
    try:
        started = time.monotonic()
        assert all(_healthz(proxy, timeout=5) for _ in range(5)), "gunicorn stalled behind the proxy"
        assert time.monotonic() - started < 5
    finally:
        at_proxy.close()

    straight = SlowClients(web)  # the control: what the review saw with gunicorn reachable directly
    try:
        assert not _healthz(web, timeout=3)
    finally:
        straight.close()
