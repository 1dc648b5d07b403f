"""Client batching (issue 25 item 3): model and tool steps buffered and sent a batch at a time.

A ``Workflow`` with ``Batching`` keeps the reports of its ``model`` and ``tool`` steps in a buffer
and sends them with the batch endpoint (``POST /workflows/{id}/steps/batch``, docs/API.md 3b) when
the buffer holds ``size`` reports (counted when a step finishes: a flush then carries finished steps only,
so a hold's pause can come with its answer), when the oldest has waited ``seconds`` (a timer flushes it even if
the run reports nothing more), when it nears ``max_bytes`` (under the console's 1 MiB body limit), and
always **before** anything else reaches the console: an effect's or a message's report goes out in the
same request as the buffer (the buffer first, in order), and so does every checkpoint, finish and drill
fault. A step reported ``pending`` and then ``committed`` or ``failed`` while still buffered is sent
once, finished (the API records a new step straight as committed).

What a crash can lose: only reports still in the buffer, which are all model and tool steps (never an
effect, never a message to a user, never a checkpoint). An effect's ``pending`` report is in the
console before the effect runs, with every step before it, so an effect is never executed unrecorded.
When the agent re-runs after a crash, the lost steps are not in the console's record, so the client
runs them again and reports them under the same seqs: they are re-reported on resume, as the first
run's were meant to be. At most ``size`` steps, and at most ``seconds`` of the run, are lost that way.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]  # as client.Json (which imports this module)

__all__ = ["BUFFERED_KINDS", "Batching", "StepBuffer"]

BUFFERED_KINDS = frozenset({"model", "tool"})
MAX_BATCH = 500  # the batch endpoint's limit
MAX_SIZE = MAX_BATCH - 1  # a full buffer of finished steps, and the pending report of the step in progress


@dataclass(frozen=True)
class Batching:
    """How a workflow buffers its model and tool steps: flushed at ``size`` reports, after ``seconds``, or
    near ``max_bytes`` of JSON, and before every effect, message, checkpoint and finish."""

    size: int = 50
    seconds: float = 1.0
    max_bytes: int = 512 * 1024

    def __post_init__(self) -> None:
        if not 1 <= self.size <= MAX_SIZE:
            raise ValueError(f"Batching.size is 1 to {MAX_SIZE} steps (the batch endpoint takes {MAX_BATCH})")
        if self.seconds <= 0:
            raise ValueError("Batching.seconds must be positive")


class StepBuffer:
    """The reports waiting to be sent, in order, one per seq (a later report of a seq replaces it)."""

    def __init__(self, batching: Batching, on_timer: Callable[[], None]) -> None:
        self.batching, self.on_timer = batching, on_timer
        self.reports: dict[int, Json] = {}
        self.sizes: dict[int, int] = {}
        self.since: float | None = None
        self.timer: threading.Timer | None = None

    def __len__(self) -> int:
        return len(self.reports)

    def add(self, report: Json) -> None:
        seq = int(report["seq"])
        earlier = self.reports.get(seq)
        if earlier is not None:  # pending, then finished while buffered: one report, with what the first said
            report = {**earlier, **{k: v for k, v in report.items() if v is not None}}
        self.reports[seq] = report
        self.sizes[seq] = len(json.dumps(report, default=repr))
        if self.since is None:
            self.since = time.monotonic()
            self.timer = threading.Timer(self.batching.seconds, self.on_timer)
            self.timer.daemon = True
            self.timer.start()

    @property
    def due(self) -> bool:
        return bool(self.reports) and (
            len(self.reports) >= self.batching.size
            or sum(self.sizes.values()) >= self.batching.max_bytes
            or (self.since is not None and time.monotonic() - self.since >= self.batching.seconds)
        )

    def take(self) -> list[Json]:
        """Everything waiting, oldest first; the buffer is empty after (``restore`` puts it back)."""
        taken = list(self.reports.values())
        self.reports, self.sizes, self.since = {}, {}, None
        self.stop()
        return taken

    def restore(self, reports: list[Json]) -> None:
        """A send that failed: the reports wait again, before anything buffered since."""
        later = self.take()
        for report in [*reports, *later]:
            self.add(report)

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
