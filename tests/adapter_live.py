"""Driving a client adapter's example against the live console: the agent in a thread, the operator here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from workflows.models import Checkpoint, Workflow

PATIENCE = 60.0  # seconds an agent thread may take on this shared 2-core machine; a bound, not an assertion


class AgentThread(threading.Thread):
    """Runs ``target()`` (an example's run) and keeps its result or error."""

    def __init__(self, target: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.target, self.result = target, None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.target()
        except BaseException as exc:  # handed to the test, which re-raises it
            self.error = exc

    def outcome(self) -> Any:
        self.join(PATIENCE)
        assert not self.is_alive(), "the agent did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def open_checkpoint(external_id: str, after: int = 0, agent: AgentThread | None = None) -> Checkpoint:
    """Wait until the workflow has an open checkpoint newer than ``after`` (a checkpoint id)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        checkpoint = (
            Checkpoint.objects.filter(workflow__external_id=external_id, pk__gt=after, status=Checkpoint.Status.OPEN)
            .order_by("pk")
            .first()
        )
        if checkpoint is not None:
            return checkpoint
        if agent is not None and not agent.is_alive():
            agent.outcome()  # re-raises what stopped it
            raise AssertionError("the agent finished without pausing")
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint opened for {external_id}")


def workflow(external_id: str) -> Workflow:
    return Workflow.objects.get(external_id=external_id)
