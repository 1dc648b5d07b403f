"""Async variants: ``AsyncRecoveryClient`` and ``async with client.workflow(...)``.

The standard library has no asynchronous HTTP client, so each call runs the
synchronous one in a worker thread (``asyncio.to_thread``): the event loop never
blocks, and the retry rules and the step bookkeeping are the very same code as
the synchronous API's. Only the waiting (``wait_for_decision``) is native asyncio.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any, Literal

from .client import Json, RecoveryClient
from .reasons import Reason
from .workflow import Decision, Paused, StepKind, StepScope, Workflow

__all__ = ["AsyncRecoveryClient", "AsyncStepScope", "AsyncWorkflow"]


class AsyncRecoveryClient:
    """``RecoveryClient`` with awaitable endpoints (same arguments, same errors)."""

    def __init__(self, base_url: str, token: str, **options: Any) -> None:
        self.sync = RecoveryClient(base_url, token, **options)

    async def create_workflow(
        self, external_id: str, kind: str, title: str, *, owner: str | None = None, context: Json | None = None
    ) -> Json:
        return await asyncio.to_thread(
            self.sync.create_workflow, external_id, kind, title, owner=owner, context=context
        )

    async def get_workflow(self, workflow_id: str) -> Json:
        return await asyncio.to_thread(self.sync.get_workflow, workflow_id)

    async def report_step(self, workflow_id: str, seq: int, name: str, kind: str, status: str, **fields: Any) -> Json:
        return await asyncio.to_thread(self.sync.report_step, workflow_id, seq, name, kind, status, **fields)

    async def open_checkpoint(
        self,
        workflow_id: str,
        reason: str,
        *,
        detail: str = "",
        at_seq: int | None = None,
        state: Json | None = None,
        plan: list[Json] | None = None,
    ) -> Json:
        return await asyncio.to_thread(
            self.sync.open_checkpoint, workflow_id, reason, detail=detail, at_seq=at_seq, state=state, plan=plan
        )

    async def get_checkpoint(self, checkpoint_id: str) -> Json:
        return await asyncio.to_thread(self.sync.get_checkpoint, checkpoint_id)

    async def finish(self, workflow_id: str, status: str, summary: str = "") -> Json:
        return await asyncio.to_thread(self.sync.finish, workflow_id, status, summary)

    async def wait_for_decision(self, checkpoint_id: str, *, interval: float = 2.0, timeout: float = 3600.0) -> Json:
        """Poll a checkpoint until it carries a decision, sleeping on the event loop between polls."""
        deadline = time.monotonic() + timeout
        while True:
            decision = (await self.get_checkpoint(checkpoint_id)).get("decision")
            if isinstance(decision, dict):
                return decision
            if time.monotonic() > deadline:
                raise TimeoutError(f"No decision on checkpoint {checkpoint_id} after {timeout:.0f}s")
            await asyncio.sleep(interval)

    async def advertise(
        self,
        capabilities: list[str],
        *,
        runtime_version: str | None = None,
        kinds: list[str] | None = None,
        fork_edits: list[str] | None = None,
    ) -> Json:
        return await asyncio.to_thread(
            self.sync.advertise, capabilities, runtime_version=runtime_version, kinds=kinds, fork_edits=fork_edits
        )

    async def get_replay(self, replay_id: str) -> Json:
        return await asyncio.to_thread(self.sync.get_replay, replay_id)

    async def post_replay_results(
        self,
        replay_id: str,
        results: list[Json] | None = None,
        *,
        runtime_version: str | None = None,
        error: str | None = None,
    ) -> Json:
        return await asyncio.to_thread(
            self.sync.post_replay_results, replay_id, results, runtime_version=runtime_version, error=error
        )

    def workflow(self, external_id: str, kind: str, title: str, **options: Any) -> AsyncWorkflow:
        """``async with client.workflow("T-1042", "refund", "Refund for T-1042") as wf:``."""
        return AsyncWorkflow(self, self.sync.workflow(external_id, kind, title, **options))


class AsyncWorkflow:
    """``Workflow`` for ``async with``; ``sync`` is the underlying workflow (its state, decision, records)."""

    def __init__(self, client: AsyncRecoveryClient, sync: Workflow) -> None:
        self.client, self.sync = client, sync

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def external_id(self) -> str:
        return self.sync.external_id

    @property
    def state(self) -> Json:
        return self.sync.state

    @property
    def decision(self) -> Decision | None:
        return self.sync.decision

    async def __aenter__(self) -> AsyncWorkflow:
        await asyncio.to_thread(self.sync.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.sync.__exit__, exc_type, exc, tb)

    def step(
        self, name: str, *, kind: StepKind = "tool", input: Any = None, promise: str | None = None
    ) -> AsyncStepScope:
        return AsyncStepScope(self.sync.step(name, kind=kind, input=input, promise=promise))

    def effect(
        self, name: str, *, input: Any = None, key: str | None = None, promise: str | None = None
    ) -> AsyncStepScope:
        return AsyncStepScope(self.sync.effect(name, input=input, key=key, promise=promise))

    async def pause(
        self, reason: Reason, detail: str = "", *, at_seq: int | None = None, state: Json | None = None
    ) -> Paused:
        return await asyncio.to_thread(self.sync.pause, reason, detail, at_seq=at_seq, state=state)

    async def finish(self, status: Literal["completed", "failed"] = "completed", summary: str = "") -> Json:
        return await asyncio.to_thread(self.sync.finish, status, summary)

    async def flush(self) -> None:
        """Send the buffered steps now (``Workflow.flush``: the client's batching)."""
        await asyncio.to_thread(self.sync.flush)

    async def wait_for_decision(
        self, checkpoint_id: str, *, interval: float = 2.0, timeout: float = 3600.0
    ) -> Decision:
        body = await self.client.wait_for_decision(checkpoint_id, interval=interval, timeout=timeout)
        checkpoint = await self.client.get_checkpoint(checkpoint_id)
        self.sync.decision = Decision.from_json(checkpoint_id, body, checkpoint.get("resume_state"))
        return self.sync.decision


class AsyncStepScope:
    """``StepScope`` for ``async with``; ``sync`` holds the step (``done``, ``output``, ``record()``...)."""

    def __init__(self, sync: StepScope) -> None:
        self.sync = sync

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sync, name)

    async def __aenter__(self) -> StepScope:
        return await asyncio.to_thread(self.sync.__enter__)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.sync.__exit__, exc_type, exc, tb)
