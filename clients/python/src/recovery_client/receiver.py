"""The resume endpoint: receive the operator's decisions, signed and deduplicated, from any WSGI or ASGI app.

The console POSTs each decision with ``X-Recovery-Signature: sha256=<hex HMAC-SHA256
of the raw body>`` and ``X-Recovery-Delivery: <id>``; the id is stable across the
retries of one decision, so the receiver acts on it once. A delivery is answered
``202`` at once and carried out after the answer (in a thread, or an asyncio task
for a coroutine handler): the console counts a 2xx as delivered and must not wait
for the whole rest of the run. A resend answers ``200`` ``duplicate``.

Mount ``receiver.wsgi`` (Flask/Django/any WSGI server) or ``receiver.asgi``
(Starlette/FastAPI/uvicorn) at the agent's resume URL, or call
``receiver.receive(body, headers)`` from a view of your own.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol

from .client import Json
from .signing import verify_signature
from .workflow import Decision

__all__ = ["Delivery", "DeliveryLog", "MemoryDeliveryLog", "ResumeReceiver", "SQLiteDeliveryLog"]

log = logging.getLogger("recovery_client")

REQUIRED = ("workflow_id", "external_id", "checkpoint_id", "action", "delivery_id")
MAX_BODY = 1024 * 1024
Handler = Callable[["Delivery"], object]
StartResponse = Callable[[str, list[tuple[str, str]]], object]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Delivery:
    """One decision as the console delivered it."""

    delivery_id: str
    workflow_id: str
    external_id: str
    checkpoint_id: str
    action: str
    instructions: str = ""
    confirmations: dict[str, str] = field(default_factory=dict)
    new_owner: str | None = None
    resume_state: Json = field(default_factory=dict)

    @property
    def decision(self) -> Decision:
        return Decision(
            checkpoint_id=self.checkpoint_id,
            action=self.action,
            instructions=self.instructions,
            confirmations=dict(self.confirmations),
            new_owner=self.new_owner,
            delivery_id=self.delivery_id,
            resume_state=self.resume_state,
        )

    @classmethod
    def from_json(cls, payload: Json) -> Delivery:
        return cls(
            delivery_id=payload["delivery_id"],
            workflow_id=payload["workflow_id"],
            external_id=payload["external_id"],
            checkpoint_id=payload["checkpoint_id"],
            action=payload["action"],
            instructions=str(payload.get("instructions") or ""),
            confirmations={str(k): str(v) for k, v in (payload.get("confirmations") or {}).items()},
            new_owner=payload.get("new_owner"),
            resume_state=payload.get("resume_state") or {},
        )


class DeliveryLog(Protocol):
    """Where the receiver remembers the deliveries it accepted."""

    def accept(self, delivery_id: str) -> bool:
        """True the first time ``delivery_id`` is seen, False ever after."""

    def forget(self, delivery_id: str) -> None:
        """Let a delivery whose handling failed be accepted again when the console resends it."""


class MemoryDeliveryLog:
    """Deliveries seen by this process (enough when a restart may repeat a decision harmlessly)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def accept(self, delivery_id: str) -> bool:
        with self._lock:
            if delivery_id in self._seen:
                return False
            self._seen.add(delivery_id)
            return True

    def forget(self, delivery_id: str) -> None:
        with self._lock:
            self._seen.discard(delivery_id)


class SQLiteDeliveryLog:
    """Deliveries seen, kept in a SQLite file so that they survive a restart (one row per delivery)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, "
                "at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, isolation_level=None)

    def accept(self, delivery_id: str) -> bool:
        with self._connect() as db:  # the primary key makes two racing processes accept it once
            return db.execute("INSERT OR IGNORE INTO deliveries (id) VALUES (?)", (delivery_id,)).rowcount == 1

    def forget(self, delivery_id: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM deliveries WHERE id = ?", (delivery_id,))


class ResumeReceiver:
    """Verify, dedupe and dispatch decision deliveries to ``on_decision(delivery)``."""

    def __init__(
        self, secret: str, on_decision: Handler, *, deliveries: DeliveryLog | None = None, max_body: int = MAX_BODY
    ) -> None:
        if not secret:
            raise ValueError("a resume receiver needs the agent's signing secret")
        self.secret, self.on_decision, self.max_body = secret, on_decision, max_body
        self.deliveries: DeliveryLog = deliveries or MemoryDeliveryLog()
        self.threads: set[threading.Thread] = set()
        self.tasks: set[asyncio.Task[object]] = set()

    # --- the framework-free core ------------------------------------------------------------
    def accept(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, Json, Delivery | None]:
        """Check one request; returns (status, answer body, the delivery to carry out or None)."""
        lower = {k.lower(): v for k, v in headers.items()}
        if len(body) > self.max_body:
            return 413, {"error": "body too large"}, None
        if not verify_signature(self.secret, body, lower.get("x-recovery-signature")):
            log.warning("resume receiver: delivery refused: bad signature")
            return 401, {"error": "bad signature"}, None
        try:
            payload = json.loads(body)
        except ValueError:
            return 400, {"error": "the body is not JSON"}, None
        if not isinstance(payload, dict) or not all(isinstance(payload.get(f), str) for f in REQUIRED):
            return 400, {"error": f"the body needs the string fields {', '.join(REQUIRED)}"}, None
        header = lower.get("x-recovery-delivery")
        if header is not None and header != payload["delivery_id"]:
            return 400, {"error": "X-Recovery-Delivery does not match the body's delivery_id"}, None
        delivery = Delivery.from_json(payload)
        if not self.deliveries.accept(delivery.delivery_id):
            return 200, {"status": "duplicate", "delivery_id": delivery.delivery_id}, None
        return 202, {"status": "accepted", "delivery_id": delivery.delivery_id}, delivery

    def receive(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, Json]:
        """Check a request and carry an accepted delivery out in a thread; returns (status, answer body)."""
        status, answer, delivery = self.accept(body, headers)
        if delivery is not None:
            thread = threading.Thread(
                target=self._run, args=(delivery,), daemon=True, name=f"recovery-delivery-{delivery.delivery_id}"
            )
            self.threads.add(thread)
            thread.start()
        return status, answer

    def _run(self, delivery: Delivery) -> None:
        try:
            result = self.on_decision(delivery)
            if inspect.isawaitable(result):
                asyncio.run(_awaited(result))
        except Exception:
            log.exception("resume receiver: carrying out delivery %s failed", delivery.delivery_id)
        finally:
            self.threads.discard(threading.current_thread())

    def join(self, timeout: float = 30.0) -> bool:
        """Wait for the deliveries being carried out in threads; True when none is left."""
        for thread in list(self.threads):
            thread.join(timeout)
        return not any(t.is_alive() for t in list(self.threads))

    # --- WSGI -------------------------------------------------------------------------------
    def wsgi(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """A WSGI application answering the console's POSTs."""
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, 405, {"error": "POST a decision here"})
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > self.max_body:
            return _answer(start_response, 413, {"error": "body too large"})
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {k[5:].replace("_", "-"): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        return _answer(start_response, *self.receive(body, headers))

    # --- ASGI -------------------------------------------------------------------------------
    async def asgi(self, scope: Mapping[str, Any], receive: Receive, send: Send) -> None:
        """An ASGI application answering the console's POSTs; a coroutine handler runs as a task."""
        if scope.get("type") != "http":
            return
        if scope.get("method") != "POST":
            return await _send(send, 405, {"error": "POST a decision here"})
        chunks, size = [], 0
        while True:
            message = await receive()
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self.max_body:
                return await _send(send, 413, {"error": "body too large"})
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        status, answer, delivery = self.accept(b"".join(chunks), headers)
        await _send(send, status, answer)
        if delivery is not None:
            task: asyncio.Task[object] = asyncio.get_running_loop().create_task(self._arun(delivery))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _arun(self, delivery: Delivery) -> object:
        try:
            if inspect.iscoroutinefunction(self.on_decision):
                return await self.on_decision(delivery)
            return await asyncio.to_thread(self.on_decision, delivery)
        except Exception:
            log.exception("resume receiver: carrying out delivery %s failed", delivery.delivery_id)
            return None


async def _awaited(result: Awaitable[object]) -> object:
    return await result


def _answer(start_response: StartResponse, status: int, body: Json) -> list[bytes]:
    raw = json.dumps(body).encode()
    start_response(
        f"{status} {HTTPStatus(status).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(raw)))],
    )
    return [raw]


async def _send(send: Send, status: int, body: Json) -> None:
    raw = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": raw})
