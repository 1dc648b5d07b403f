"""The chaos run's lossy proxy: what passes, what is lost, and that the agent acted either way.

The target is a tiny threaded HTTP/1.1 server that counts the requests it handled
("the agent acted"); the client is urllib3 with retries off, as the console
delivers (workflows/runtime.py).
"""

import json
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import urllib3

from demo.netfaults import Choice, Fault, LossyProxy


@dataclass
class Target:
    port: int
    handled: list[tuple[str, bytes, int]] = field(default_factory=list)  # (path, body, client port)
    acted: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def make_handler(target: Target) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with target.lock:
                target.handled.append((self.path, body, self.client_address[1]))
            target.acted.set()
            answer = (
                b""
                if self.path == "/empty"
                else json.dumps({"path": self.path, "received": len(body), "echo": body.decode()}).encode()
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def target() -> Iterator[Target]:
    state = Target(port=0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def seeded(seed: int) -> random.Random:
    print(f"seed={seed}")
    return random.Random(seed)


def pool(proxy: LossyProxy, *, read: float = 10.0) -> urllib3.HTTPConnectionPool:
    return urllib3.HTTPConnectionPool(
        "127.0.0.1", proxy.port, timeout=urllib3.Timeout(connect=5.0, read=read), retries=False, maxsize=1
    )


def post(client: urllib3.HTTPConnectionPool, path: str, body: bytes) -> tuple[int, bytes]:
    """As runtime.post does it: no preloading, read, release the connection for reuse."""
    response = client.urlopen(
        "POST",
        path,
        body=body,
        headers={"Content-Type": "text/plain"},
        redirect=False,
        retries=False,
        preload_content=False,
    )
    try:
        return response.status, response.read()
    finally:
        response.release_conn()


def test_a_clean_connection_carries_a_large_body_and_a_second_request_on_the_same_connection(target):
    rng = seeded(1401)
    body = "".join(rng.choice("abcdefghij") for _ in range(5000)).encode()
    with LossyProxy(target.port, rng=rng) as proxy:
        client = pool(proxy)
        first = post(client, "/resume/1", body)
        second = post(client, "/resume/2", b"again")

    assert first[0] == 200 and json.loads(first[1]) == {"path": "/resume/1", "received": 5000, "echo": body.decode()}
    assert second[0] == 200 and json.loads(second[1])["echo"] == "again"
    assert [(path, data) for path, data, _ in target.handled] == [("/resume/1", body), ("/resume/2", b"again")]
    assert len({client_port for _, _, client_port in target.handled}) == 1  # one upstream connection, kept alive
    assert proxy.counts.connections == 1 and proxy.counts.passed == 1
    assert proxy.choices == [Choice(Fault.NONE, 0.0)]


def run_connections(seed: int, target: Target, count: int) -> list[Choice]:
    settings: dict[str, Any] = {
        "latency": (0.001, 0.02),
        "drop_mid_response": 0.3,
        "black_hole": 0.3,
        "hold_seconds": 0.2,
    }
    with LossyProxy(target.port, rng=random.Random(seed), **settings) as proxy:
        for number in range(count):
            client = pool(proxy, read=5.0)
            try:
                post(client, f"/resume/{number}", b"x")
            except urllib3.exceptions.HTTPError:
                pass  # a lost answer: exactly what the chaos run wants
            finally:
                client.close()
        counts = proxy.counts
        choices = proxy.choices
    assert counts.connections == counts.delayed == count
    assert counts.passed + counts.dropped_mid_response + counts.black_holed == count
    return choices


def test_the_same_seed_chooses_the_same_faults_and_delays_in_the_same_order(target):
    seed = 1402
    print(f"seed={seed}")
    first = run_connections(seed, target, 12)
    again = run_connections(seed, target, 12)
    other = run_connections(seed + 1, target, 12)

    assert first == again
    assert first != other
    assert {choice.fault for choice in first} == set(Fault)  # this seed draws every kind of fault
    assert all(0.001 <= choice.delay <= 0.02 for choice in first)
    assert len(target.handled) == 36  # every request reached the agent, whatever happened to its answer


@pytest.mark.parametrize("path", ["/resume/with-body", "/empty"])
def test_a_response_dropped_mid_way_is_an_error_for_the_console_though_the_agent_acted_once(target, path):
    with LossyProxy(target.port, rng=seeded(1403), drop_mid_response=1.0) as proxy:
        client = pool(proxy)
        with pytest.raises(urllib3.exceptions.ProtocolError) as error:
            post(client, path, b'{"decision": "approve"}')
        print(repr(error.value))

    assert [(p, body) for p, body, _ in target.handled] == [(path, b'{"decision": "approve"}')]
    assert proxy.counts.dropped_mid_response == 1 and proxy.counts.passed == 0


def test_a_black_hole_leaves_the_console_timing_out_though_the_agent_acted_once(target):
    with LossyProxy(target.port, rng=seeded(1404), black_hole=1.0) as proxy:
        client = pool(proxy, read=0.5)
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            post(client, "/resume/held", b'{"decision": "approve"}')

    assert [(p, body) for p, body, _ in target.handled] == [("/resume/held", b'{"decision": "approve"}')]
    assert proxy.counts.black_holed == 1


def test_stop_hangs_up_on_a_held_connection_instead_of_leaving_the_console_waiting(target):
    proxy = LossyProxy(target.port, rng=seeded(1405), black_hole=1.0, hold_seconds=120.0).start()
    outcome: list[BaseException] = []

    def console() -> None:
        try:
            post(pool(proxy, read=60.0), "/resume/held", b"{}")
        except BaseException as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=console, daemon=True)
    waiting.start()
    assert target.acted.wait(10)  # the request is through; the proxy now holds the answer back
    proxy.stop()
    waiting.join(30)

    assert proxy.threads_alive() == 0
    assert not waiting.is_alive()
    # Hung up on, not timed out: the read timeout is a minute and stop() did not wait for it.
    assert len(outcome) == 1 and isinstance(outcome[0], urllib3.exceptions.ProtocolError), outcome


def test_stop_closes_the_listener_and_idle_keep_alive_connections(target):
    proxy = LossyProxy(target.port, rng=seeded(1406)).start()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as raw:
        raw.sendall(b"POST /resume/1 HTTP/1.1\r\nHost: agent\r\nContent-Length: 2\r\n\r\n{}")
        answer = b""
        while b'"received": 2' not in answer:
            answer += raw.recv(4096)
        proxy.stop()  # the connection is idle, kept alive by both ends

        try:
            rest = raw.recv(4096)
        except ConnectionResetError:
            rest = b""
        assert rest == b""  # closed by the proxy
    assert proxy.threads_alive() == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5).close()
