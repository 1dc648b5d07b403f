"""An in-memory stand-in for the console's Agent API v1, so the client's tests run without Django.

It keeps the parts of the contract (docs/API.md) the client relies on: idempotent
creates, steps keyed by ``seq`` with ``pending -> committed | failed`` and 409 on
any other change, ``idempotency_key`` unique per workflow and required for effects,
at most one open checkpoint, the computed ``resume_state``, finish refused while a
checkpoint is unresolved. Faults are queued with ``fail_next`` / ``cut_next``.
The live-console tests in the console's own suite check the same client against the
real thing.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "rc_test_token"
REASONS = {"model_timeout", "tool_error", "rate_limit", "provider_change", "untrusted_output", "manual", "other"}


class Refusal(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


@dataclass
class Fault:
    status: int = 503
    body: bytes = b'{"error": {"code": "unavailable", "message": "Try again.", "field": null}}'
    headers: dict[str, str] = field(default_factory=dict)
    cut: bool = False  # answer the real response but cut it short (after applying it)


class FakeConsole:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.workflows: dict[str, dict[str, Any]] = {}
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, Any]] = []
        self.instructions: dict[str, dict[str, Any]] = {}  # workflow id -> what step answers tell its runtime
        self.drill: dict[str, Any] | None = None  # a drill's instruction for every workflow until its checkpoint
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.console = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FakeConsole:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- test controls --------------------------------------------------------------------
    def fail_next(self, count: int = 1, **fault: Any) -> None:
        self.faults.extend(Fault(**fault) for _ in range(count))

    def cut_next(self) -> None:
        self.faults.append(Fault(cut=True))

    def decide(
        self,
        checkpoint_id: str,
        action: str = "resume",
        *,
        instructions: str = "",
        confirmations: dict[str, str] | None = None,
        new_owner: str | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            checkpoint = self.checkpoints[checkpoint_id]
            checkpoint["status"] = "resolved"
            checkpoint["decision"] = {
                "action": action,
                "instructions": instructions,
                "confirmations": confirmations or {},
                "new_owner": new_owner,
                "decided_by": "alice",
                "decided_at": "2026-01-01T00:00:00Z",
                "state": "succeeded",
            }
            workflow = self.workflows[checkpoint["workflow_id"]]
            workflow["status"] = {
                "resume": "running",
                "retry_step": "running",
                "abort": "aborted",
                "handoff": "handed_off",
            }[action]
            return checkpoint

    def steps(self, workflow_id: str) -> list[dict[str, Any]]:
        return sorted(self.workflows[workflow_id]["steps"].values(), key=lambda s: s["seq"])

    def workflow_by_external_id(self, external_id: str) -> dict[str, Any]:
        return next(w for w in self.workflows.values() if w["external_id"] == external_id)

    # --- the API --------------------------------------------------------------------------
    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((method, path, body))
            for pattern, handler in self.routes(method):
                match = re.fullmatch(pattern, path)
                if match:
                    return handler(body, *match.groups())
        raise Refusal(404, "not_found", "No such endpoint.")

    def routes(self, method: str) -> list[tuple[str, Any]]:
        if method == "GET":
            return [
                (r"/api/v1/workflows/(\w+)", self.get_workflow),
                (r"/api/v1/checkpoints/(\w+)", self.get_checkpoint),
            ]
        return [
            (r"/api/v1/workflows", self.create_workflow),
            (r"/api/v1/workflows/(\w+)/steps", self.report_step),
            (r"/api/v1/workflows/(\w+)/steps/batch", self.report_steps),
            (r"/api/v1/workflows/(\w+)/checkpoints", self.open_checkpoint),
            (r"/api/v1/workflows/(\w+)/finish", self.finish),
        ]

    def own(self, workflow_id: str) -> dict[str, Any]:
        if workflow_id not in self.workflows:
            raise Refusal(404, "not_found", "No such workflow.")
        return self.workflows[workflow_id]

    def shaped(self, workflow: dict[str, Any]) -> dict[str, Any]:
        checkpoints = [self.checkpoints[c] for c in workflow["checkpoint_ids"]]
        return {
            **{k: v for k, v in workflow.items() if k not in ("steps", "checkpoint_ids")},
            "steps": self.steps(workflow["id"]),
            "checkpoints": checkpoints,
        }

    def create_workflow(self, body: Any) -> tuple[int, Any]:
        for workflow in self.workflows.values():
            if workflow["external_id"] == body["external_id"]:
                return 200, self.shaped(workflow)
        workflow_id = str(next(self.ids))
        self.workflows[workflow_id] = {
            "id": workflow_id,
            "external_id": body["external_id"],
            "kind": body["kind"],
            "title": body["title"],
            "owner": body.get("owner") or "olivia",
            "context": body.get("context") or {},
            "status": "running",
            "steps": {},
            "checkpoint_ids": [],
        }
        return 201, self.shaped(self.workflows[workflow_id])

    def get_workflow(self, body: Any, workflow_id: str) -> tuple[int, Any]:
        return 200, self.shaped(self.own(workflow_id))

    def report_steps(self, body: Any, workflow_id: str) -> tuple[int, Any]:
        """3b: every report judged as endpoint 3 judges it, in order; all of them or none."""
        workflow = self.own(workflow_id)
        if not 1 <= len(body["steps"]) <= 500:
            raise Refusal(422, "too_long", "1 to 500 steps.", "steps")
        before = copy.deepcopy(workflow["steps"])
        results = []
        try:
            for index, report in enumerate(body["steps"]):
                try:
                    results.append(self.record(workflow, report))
                except Refusal as refusal:
                    refusal.field = f"steps.{index}" + (f".{refusal.field}" if refusal.field else "")
                    raise
        except Refusal:
            workflow["steps"] = before
            raise
        created = [step["seq"] for status, step in results if status == 201]
        answer = {"created": created, "steps": [copy.deepcopy(step) for _status, step in results]}
        return (201 if created else 200), {**answer, **self.instruction(workflow_id, answer["steps"])}

    def instruction(self, workflow_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
        """As the console: a hold's pause comes only with an answer that finished its steps (none pending)."""
        told = dict(self.instructions.get(workflow_id) or {})
        if self.drill and not self.workflows[workflow_id]["checkpoint_ids"]:
            told["drill"] = self.drill
        if any(step["status"] == "pending" for step in steps):
            told.pop("pause", None)
        return {"instruction": told} if told else {}

    def report_step(self, body: Any, workflow_id: str) -> tuple[int, Any]:
        status, step = self.record(self.own(workflow_id), body)
        return status, {**step, **self.instruction(workflow_id, [step])}

    def record(self, workflow: dict[str, Any], body: Any) -> tuple[int, Any]:
        if workflow["status"] in ("completed", "failed", "aborted", "handed_off"):
            raise Refusal(409, "workflow_finished", "The workflow takes no more steps.")
        step = {
            "seq": body["seq"],
            "name": body["name"],
            "kind": body["kind"],
            "status": body["status"],
            "input": body.get("input"),
            "output": body.get("output"),
            "verified": body.get("verified", False),
            "promise": body.get("promise"),
            "idempotency_key": body.get("idempotency_key"),
            "external_ref": body.get("external_ref"),
        }
        if step["kind"] == "effect" and not step["idempotency_key"]:
            raise Refusal(422, "idempotency_key_required", "An effect needs an idempotency_key.", "idempotency_key")
        holder = next(
            (
                s
                for s in workflow["steps"].values()
                if step["idempotency_key"] and s["idempotency_key"] == step["idempotency_key"]
            ),
            None,
        )
        if holder is not None and holder["seq"] != step["seq"]:
            raise Refusal(409, "idempotency_key_taken", "Another step holds that key.", "idempotency_key")
        existing = workflow["steps"].get(step["seq"])
        if existing is None:
            workflow["steps"][step["seq"]] = step
            return 201, step
        if existing == step:
            return 200, existing
        if (
            existing["status"] != "pending"
            or step["status"] == "pending"
            or any(existing[k] != step[k] for k in ("name", "kind", "input", "idempotency_key"))
        ):
            raise Refusal(409, "step_conflict", f"Step {step['seq']} is already {existing['status']}.")
        existing.update(step)
        return 200, existing

    def open_checkpoint(self, body: Any, workflow_id: str) -> tuple[int, Any]:
        workflow = self.own(workflow_id)
        if body.get("reason") not in REASONS:
            raise Refusal(422, "invalid", "Unknown reason.", "reason")
        if any(self.checkpoints[c]["status"] != "resolved" for c in workflow["checkpoint_ids"]):
            raise Refusal(409, "checkpoint_open", "This workflow already has an open checkpoint.")
        steps = self.steps(workflow_id)
        verified = [s["output"] for s in steps if s["verified"]]
        checkpoint_id = str(next(self.ids))
        checkpoint = {
            "id": checkpoint_id,
            "workflow_id": workflow_id,
            "status": "open",
            "reason": body["reason"],
            "detail": body.get("detail", ""),
            "at_seq": body.get("at_seq"),
            "assignee": None,
            "due_at": "2026-01-01T01:00:00Z",
            "warn_at": "2026-01-01T00:45:00Z",
            "breached": False,
            "runbook": None,
            "decision": None,
            "resume_state": {
                "committed": [s for s in steps if s["kind"] == "effect" and s["status"] == "committed"],
                "pending": next(
                    (s for s in steps if s["seq"] == body.get("at_seq") and s["status"] != "committed"),
                    next((s for s in reversed(steps) if s["status"] == "pending" and s["kind"] != "effect"), None),
                ),
                "last_verified_output": verified[-1] if verified else None,
                "promises": [s["promise"] for s in steps if s["promise"]],
                "unknown_effects": [s for s in steps if s["kind"] == "effect" and s["status"] == "pending"],
                "state": body.get("state") or {},
                "plan": body.get("plan"),
            },
        }
        self.checkpoints[checkpoint_id] = checkpoint
        workflow["checkpoint_ids"].append(checkpoint_id)
        workflow["status"] = "paused"
        return 201, checkpoint

    def get_checkpoint(self, body: Any, checkpoint_id: str) -> tuple[int, Any]:
        if checkpoint_id not in self.checkpoints:
            raise Refusal(404, "not_found", "No such checkpoint.")
        return 200, self.checkpoints[checkpoint_id]

    def finish(self, body: Any, workflow_id: str) -> tuple[int, Any]:
        workflow = self.own(workflow_id)
        if any(self.checkpoints[c]["status"] != "resolved" for c in workflow["checkpoint_ids"]):
            raise Refusal(409, "checkpoint_open", "Resolve the open checkpoint first.")
        if workflow["status"] in ("completed", "failed") and workflow["status"] != body["status"]:
            raise Refusal(409, "workflow_finished", "The workflow is finished.")
        workflow["status"], workflow["summary"] = body["status"], body.get("summary", "")
        return 200, self.shaped(workflow)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet tests
        pass

    def do_GET(self) -> None:
        self.serve("GET")

    def do_POST(self) -> None:
        self.serve("POST")

    def serve(self, method: str) -> None:
        console: FakeConsole = self.server.console  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = console.faults.pop(0) if console.faults else None
        if fault is not None and not fault.cut:
            return self.answer(fault.status, fault.body, fault.headers)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.refuse(Refusal(401, "unauthorized", "Missing or bad token."))
        try:
            status, answer = console.handle(method, self.path, json.loads(raw) if raw else None)
        except Refusal as refusal:
            return self.refuse(refusal)
        body = json.dumps(answer).encode()
        self.answer(status, body[:7] if fault is not None else body, {})

    def refuse(self, refusal: Refusal) -> None:
        error = {"code": refusal.code, "message": refusal.message, "field": refusal.field}
        self.answer(refusal.status, json.dumps({"error": error}).encode(), {})

    def answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def running() -> Iterator[FakeConsole]:
    console = FakeConsole().start()
    try:
        yield console
    finally:
        console.stop()
