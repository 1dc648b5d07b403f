"""The agent's resume endpoint of the delivery and rollout benches, in a process of its own, as an agent's is.

It ran as threads of the bench's own process until 2026-12-06, and py-spy on the workers then showed where the
rollout's deliveries waited: on this endpoint's answers (2.4 ms a POST against 2.2 ms for the bare task's),
because the endpoint's threads shared one interpreter lock with the rollout's sweep, which the bench runs in
its main thread while the deliveries go out. The bare tasks were measured while the main thread only waited.
In a process of its own the endpoint answers both alike.

``python -m scripts.bench.endpoint`` serves on a free loopback port, prints ``port <n>`` first, then one line
per POST it answered: the key (the delivery id the console sends, or the bare task's ``key``) and the time it
arrived (``time.time()``, the bench's clock). ``Receiver`` starts it and reads those lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .environment import ROOT

WRITING = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("X-Recovery-Delivery") or json.loads(raw)["key"]
        arrived = time.time()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        with WRITING:  # one whole line a POST, whichever thread answers it
            sys.stdout.write(f"{key}\t{arrived!r}\n")
            sys.stdout.flush()

    def log_message(self, *args: object) -> None:
        pass


def serve() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"port {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # the bench holds this pipe open: its end, however the bench ended, ends the endpoint


class Receiver:
    """The endpoint's process, and the arrivals it reports: ``wait(key)`` returns when ``key`` arrived."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.bench.endpoint"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        if first[:1] != ["port"]:
            raise RuntimeError(f"the bench's endpoint did not start: {first!r}")
        self.port = int(first[1])
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/resume"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            key, _, at = text.rstrip("\n").partition("\t")
            with self.cond:
                self.arrived[key] = float(at)
                self.cond.notify_all()

    def wait(self, key: str, timeout: float = 60) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.arrived, timeout):
                raise RuntimeError(f"{key} was never delivered")
            return self.arrived[key]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


if __name__ == "__main__":
    serve()
