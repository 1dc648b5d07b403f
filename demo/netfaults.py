"""A seeded, slow and lossy loopback TCP proxy for the chaos run.

The console's Celery workers POST signed decisions to an agent's resume endpoint
over plain HTTP/1.1. The chaos run (``scripts/chaos/``) puts a ``LossyProxy``
between them and the demo fleet's resume server so the network itself misbehaves
the way a real one does, and the guarantees must hold anyway:

- **latency**: every connection waits ``uniform(*latency)`` seconds before its
  request goes on;
- **dropped mid-response**: the request reaches the agent (the agent acts), the
  agent's answer is read, and the console gets only part of it before the
  connection is cut; it sees a broken response, never a whole one;
- **black hole**: the request reaches the agent (the agent acts), and the console
  never hears a byte back; the connection is held open until the console gives up,
  ``hold_seconds`` pass or the proxy stops;
- otherwise bytes pass through both ways untouched (keep-alive included).

One fault per connection is drawn from the caller's ``random.Random`` under a lock
at accept time, so a seed replays the same sequence of choices (``choices``) even
though the connections are then served concurrently. The two faulty modes treat
their connection as one request and one response and close it after.

Requests are framed by ``Content-Length`` (or a chunked body ending in the empty
chunk); responses by ``Content-Length``. A response without a body length is cut
inside its status line, so the client cannot mistake the fragment for an answer.
"""

from __future__ import annotations

import contextlib
import enum
import random
import select
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType

__all__ = ["Choice", "Counts", "Fault", "LossyProxy"]

_CHUNK = 65536
_HEADER_LIMIT = 64 * 1024
_POLL = 0.1  # how often a held or delayed connection looks at stop()


class Fault(enum.StrEnum):
    NONE = "none"  # bytes pass through both ways
    DROP_MID_RESPONSE = "drop_mid_response"
    BLACK_HOLE = "black_hole"


@dataclass(frozen=True)
class Choice:
    """What the rng chose for one connection, in accept order."""

    fault: Fault
    delay: float


@dataclass(frozen=True)
class Counts:
    connections: int = 0
    passed: int = 0
    delayed: int = 0
    dropped_mid_response: int = 0
    black_holed: int = 0


class _Closed(Exception):
    """The peer closed, timed out or the proxy is stopping: give up on this connection."""


class LossyProxy:
    """Listen on ``host:listen_port`` (0: a free port, see ``.port``) and forward to ``host:target_port``."""

    def __init__(
        self,
        target_port: int,
        *,
        rng: random.Random,
        latency: tuple[float, float] = (0.0, 0.0),
        drop_mid_response: float = 0.0,
        black_hole: float = 0.0,
        hold_seconds: float = 120.0,
        listen_port: int = 0,
        host: str = "127.0.0.1",
        io_timeout: float = 30.0,
    ) -> None:
        low, high = latency
        if not 0.0 <= low <= high:
            raise ValueError(f"latency must be (low, high) with 0 <= low <= high, not {latency!r}")
        if not (0.0 <= drop_mid_response <= 1.0 and 0.0 <= black_hole <= 1.0 and drop_mid_response + black_hole <= 1.0):
            raise ValueError("drop_mid_response and black_hole are probabilities that add up to at most 1")
        self.target_port = target_port
        self.host = host
        self.latency = latency
        self.drop_mid_response = drop_mid_response
        self.black_hole = black_hole
        self.hold_seconds = hold_seconds
        # Every blocking read and write gives up after this long, so a peer that stops
        # half-way (a partial request, a stalled response, an idle keep-alive) frees its thread.
        self.io_timeout = io_timeout
        self._rng = rng
        self._listen_port = listen_port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._choices: list[Choice] = []
        self._counts = Counts()
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> LossyProxy:
        if self._listener is not None:
            raise RuntimeError("the proxy is already started")
        listener = socket.create_server((self.host, self._listen_port))
        # accept() is not woken by close() from another thread on every platform: poll instead.
        listener.settimeout(_POLL)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"lossy-proxy-{self.port}-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self, timeout: float = 1.5) -> None:
        """Close the listener and every open connection; wait up to ``timeout`` s for the threads."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)  # wakes a thread blocked in recv or send on it
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        if self._acceptor is not None:
            threads.append(self._acceptor)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> LossyProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # -- what happened -------------------------------------------------------------------

    @property
    def counts(self) -> Counts:
        with self._lock:
            return self._counts

    @property
    def choices(self) -> list[Choice]:
        with self._lock:
            return list(self._choices)

    def threads_alive(self) -> int:
        """Connection and accept threads still running (0 after a clean stop)."""
        with self._lock:
            threads = list(self._threads)
        if self._acceptor is not None:
            threads.append(self._acceptor)
        return sum(thread.is_alive() for thread in threads)

    # -- serving -------------------------------------------------------------------------

    def _choose(self) -> Choice:
        """Draw one connection's fault. Called under the lock, in accept order: the same seed, the same faults."""
        delay = self._rng.uniform(*self.latency)  # always drawn, so the sequence never depends on the settings
        roll = self._rng.random()
        if roll < self.drop_mid_response:
            fault = Fault.DROP_MID_RESPONSE
        elif roll < self.drop_mid_response + self.black_hole:
            fault = Fault.BLACK_HOLE
        else:
            fault = Fault.NONE
        counts = self._counts
        self._counts = Counts(
            connections=counts.connections + 1,
            passed=counts.passed + (fault is Fault.NONE),
            delayed=counts.delayed + (delay > 0),
            dropped_mid_response=counts.dropped_mid_response + (fault is Fault.DROP_MID_RESPONSE),
            black_holed=counts.black_holed + (fault is Fault.BLACK_HOLE),
        )
        choice = Choice(fault, delay)
        self._choices.append(choice)
        return choice

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed by stop()
            client.settimeout(self.io_timeout)
            with self._lock:
                if self._stopping.is_set():
                    client.close()
                    return
                choice = self._choose()
                self._sockets.add(client)
                thread = threading.Thread(
                    target=self._serve,
                    args=(client, choice),
                    daemon=True,
                    name=f"lossy-proxy-{self.port}-{len(self._choices)}",
                )
                self._threads.add(thread)
            thread.start()

    def _serve(self, client: socket.socket, choice: Choice) -> None:
        target: socket.socket | None = None
        try:
            if choice.delay > 0 and self._stopping.wait(choice.delay):
                return
            try:
                target = socket.create_connection((self.host, self.target_port), timeout=self.io_timeout)
            except OSError:
                return  # the agent is down: the client sees its connection closed
            self._track(target)
            if choice.fault is Fault.NONE:
                self._pass_through(client, target)
            else:
                self._one_faulty_exchange(client, target, choice.fault)
        except (_Closed, OSError):
            pass
        finally:
            for sock in (client, target):
                if sock is not None:
                    self._untrack(sock)
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _pass_through(self, client: socket.socket, target: socket.socket) -> None:
        upstream = threading.Thread(
            target=_pump, args=(client, target), daemon=True, name=f"{threading.current_thread().name}-up"
        )
        with self._lock:
            self._threads.add(upstream)
        upstream.start()
        try:
            _pump(target, client)
            upstream.join(self.io_timeout)
        finally:
            with self._lock:
                self._threads.discard(upstream)

    def _one_faulty_exchange(self, client: socket.socket, target: socket.socket, fault: Fault) -> None:
        target.sendall(_read_request(client))
        head, body = _read_response(target)
        if fault is Fault.DROP_MID_RESPONSE:
            client.sendall(_partial(head, body))
            _shut(client)  # then the finally closes it: the client reads the fragment, then the end
        else:
            self._hold(client)

    def _hold(self, client: socket.socket) -> None:
        """Say nothing until the client hangs up, hold_seconds pass or stop() is called."""
        deadline = time.monotonic() + self.hold_seconds
        while not self._stopping.is_set() and (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([client], [], [], min(_POLL, left))
            if readable and not client.recv(_CHUNK):
                return  # the client gave up
            # anything else the client sends goes nowhere

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
        if self._stopping.is_set():
            _shut(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        sock.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until source closes (then half-close sink) or anything fails (then close both)."""
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        _shut(source)
        _shut(sink)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """Read up to the end of an HTTP header block: (head including the blank line, what came after)."""
    buffer = b""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > _HEADER_LIMIT:
            raise _Closed("header block too long")
        buffer += _recv(sock)
    return buffer[: end + 4], buffer[end + 4 :]


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _content_length(head: bytes) -> int | None:
    value = _header(head, b"content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _read_request(client: socket.socket) -> bytes:
    """One whole request from the client: head and body (Content-Length or chunked)."""
    head, rest = _read_head(client)
    if (_header(head, b"transfer-encoding") or b"").lower().endswith(b"chunked"):
        while not rest.endswith(b"0\r\n\r\n"):
            rest += _recv(client)
        return head + rest
    length = _content_length(head) or 0
    while len(rest) < length:
        rest += _recv(client)
    return head + rest[:length]


def _read_response(target: socket.socket) -> tuple[bytes, bytes]:
    """The agent's answer: its head, and its body when it declares a length (else what came with the head)."""
    head, body = _read_head(target)
    length = _content_length(head)
    if length is not None:
        while len(body) < length:
            body += _recv(target)
        body = body[:length]
    return head, body


def _partial(head: bytes, body: bytes) -> bytes:
    """Less than the whole answer, and never something a client could take for a whole one.

    With a body of known length: the head and half the body (the client's read comes up
    short). Otherwise a fragment of the status line (the client cannot parse a status)."""
    if _content_length(head) and body:
        return head + body[: len(body) // 2]
    return head[: head.find(b" ")] if b" " in head else b""


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(_CHUNK)
    if not data:
        raise _Closed("peer closed")
    return data


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed or never connected
        sock.shutdown(socket.SHUT_RDWR)
