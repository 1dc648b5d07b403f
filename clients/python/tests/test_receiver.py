"""The resume receiver: signatures checked on the raw body, deliveries deduped, served from WSGI and ASGI."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from recovery_client import Delivery, ResumeReceiver, SQLiteDeliveryLog, sign

SECRET = "whsec_test"
PAYLOAD = {
    "workflow_id": "17",
    "external_id": "T-1042",
    "checkpoint_id": "9",
    "action": "resume",
    "instructions": "Carry on.",
    "confirmations": {"T-1042:issue_refund": "happened"},
    "resume_state": {"state": {"remaining": ["write_ticket_note"]}},
    "new_owner": None,
    "delivery_id": "d-1",
}
BODY = json.dumps(PAYLOAD).encode()


def headers(body: bytes = BODY, secret: str = SECRET, delivery: str = "d-1") -> dict[str, str]:
    return {
        "X-Recovery-Signature": sign(secret, body),
        "X-Recovery-Delivery": delivery,
        "Content-Type": "application/json",
    }


class Recorder:
    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.done = threading.Event()

    def __call__(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        self.done.set()


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[str, ResumeReceiver, Recorder]]:
    recorder = Recorder()
    receiver = ResumeReceiver(SECRET, recorder)
    server = make_server("127.0.0.1", 0, receiver.wsgi, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/resume", receiver, recorder
    server.shutdown()
    server.server_close()


def post(url: str, body: bytes, hdrs: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers=hdrs, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_signed_delivery_is_accepted_once_over_wsgi(served: tuple[str, ResumeReceiver, Recorder]) -> None:
    url, receiver, recorder = served
    assert post(url, BODY, headers()) == (202, {"status": "accepted", "delivery_id": "d-1"})
    assert recorder.done.wait(5) and receiver.join(5)
    assert post(url, BODY, headers()) == (200, {"status": "duplicate", "delivery_id": "d-1"})
    receiver.join(5)
    [delivery] = recorder.deliveries
    assert (delivery.action, delivery.instructions, delivery.external_id) == ("resume", "Carry on.", "T-1042")
    assert delivery.decision.confirmations == {"T-1042:issue_refund": "happened"}
    assert delivery.decision.resume_state == {"state": {"remaining": ["write_ticket_note"]}}


@pytest.mark.parametrize(
    ("body", "hdrs", "status"),
    [
        (BODY, headers(secret="someone-else"), 401),
        (BODY + b" ", headers(), 401),  # a byte changed after signing
        (BODY, {"X-Recovery-Delivery": "d-1"}, 401),  # no signature
        (b"not json", headers(b"not json"), 400),
        (json.dumps({"action": "resume"}).encode(), headers(json.dumps({"action": "resume"}).encode()), 400),
        (BODY, headers(delivery="d-2"), 400),  # header and body disagree
    ],
)
def test_a_bad_delivery_is_refused_and_not_acted_on(
    served: tuple[str, ResumeReceiver, Recorder], body: bytes, hdrs: dict[str, str], status: int
) -> None:
    url, receiver, recorder = served
    assert post(url, body, hdrs)[0] == status
    receiver.join(5)
    assert recorder.deliveries == []


def test_a_get_is_not_allowed(served: tuple[str, ResumeReceiver, Recorder]) -> None:
    url, _, _ = served
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url, timeout=5)
    assert raised.value.code == 405


def test_a_body_over_the_limit_is_refused() -> None:
    receiver = ResumeReceiver(SECRET, Recorder(), max_body=10)
    assert receiver.receive(BODY, headers())[0] == 413


def test_the_sqlite_log_dedupes_across_restarts(tmp_path: Path) -> None:
    first = ResumeReceiver(SECRET, Recorder(), deliveries=SQLiteDeliveryLog(tmp_path / "deliveries.sqlite3"))
    assert first.receive(BODY, headers())[0] == 202
    first.join(5)
    recorder = Recorder()
    restarted = ResumeReceiver(SECRET, recorder, deliveries=SQLiteDeliveryLog(tmp_path / "deliveries.sqlite3"))
    assert restarted.receive(BODY, headers())[0] == 200
    assert recorder.deliveries == []


async def call_asgi(
    receiver: ResumeReceiver, body: bytes, hdrs: dict[str, str], method: str = "POST"
) -> tuple[int, dict[str, Any]]:
    chunks = [body[:10], body[10:]]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "method": method,
        "path": "/resume",
        "headers": [(k.lower().encode(), v.encode()) for k, v in hdrs.items()],
    }
    await receiver.asgi(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_the_asgi_app_accepts_once_and_runs_a_coroutine_handler_as_a_task() -> None:
    handled: list[str] = []

    async def on_decision(delivery: Delivery) -> None:
        await asyncio.sleep(0)
        handled.append(delivery.delivery_id)

    async def scenario() -> None:
        receiver = ResumeReceiver(SECRET, on_decision)
        assert await call_asgi(receiver, BODY, headers()) == (202, {"status": "accepted", "delivery_id": "d-1"})
        assert (await call_asgi(receiver, BODY, headers()))[0] == 200
        assert (await call_asgi(receiver, BODY, headers(secret="x")))[0] == 401
        await asyncio.gather(*receiver.tasks)

    asyncio.run(scenario())
    assert handled == ["d-1"]


def test_the_asgi_app_runs_a_plain_handler_off_the_event_loop() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        receiver = ResumeReceiver(SECRET, recorder)
        assert (await call_asgi(receiver, BODY, headers()))[0] == 202
        await asyncio.gather(*receiver.tasks)

    asyncio.run(scenario())
    assert [d.delivery_id for d in recorder.deliveries] == ["d-1"]
