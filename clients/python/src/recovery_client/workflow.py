"""``workflow(...)``, ``step(...)`` and ``effect(...)``: report a run as it happens, pause it when it degrades.

A run is plain Python code inside ``with client.workflow(...) as wf``. Each
``wf.step(...)``/``wf.effect(...)`` block is reported ``pending`` on entry and
``committed`` (with its output, verified or not) on a clean exit. When the code
raises, the step is marked ``failed`` (an effect stays ``pending``: its outcome
is unknown, so the console asks an operator to confirm it), a checkpoint opens
with the reason the exception stands for (``reasons.reason_for``) and the
agent's ``wf.state``, and ``Paused`` is raised in place of the exception. When an operator puts
the agent on hold during an incident, the console answers a step report with a pause instruction
and ``Paused`` (reason ``held``) is raised after that step: the run stops there, as at any checkpoint.

Running the same code again after the operator's decision resumes it: the
workflow is found by its ``external_id``, steps committed earlier are matched
by name and occurrence and come back ``done`` with their recorded output, an
effect is matched by its idempotency key (``<external_id>:<name>``, with
``:<n>`` from the second occurrence of a name on) and is never executed twice;
an effect whose outcome was unknown follows the operator's confirmation.

With ``batching`` (``recovery_client.batching``), model and tool steps are buffered and sent in
batches, always before the next effect, message, checkpoint or finish; the answers' instructions
(a hold's pause, a drill's fault) are honoured at the flush that brought them. Recovery drills'
faults are carried out here too (``recovery_client.drills``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from .batching import BUFFERED_KINDS, Batching, StepBuffer
from .client import ApiError, Json
from .drills import DrillCrash, DrillFailover, DrillFault, DrillRateLimitError, GarbageAnswer, ProviderChanged
from .reasons import InvalidOutput, Reason, ReasonMap, reason_for

if TYPE_CHECKING:
    from .client import RecoveryClient

__all__ = ["Decision", "Paused", "StepScope", "Stopped", "Workflow", "jsonable"]

StepKind = Literal["model", "tool", "effect", "message"]
TERMINAL = frozenset({"completed", "failed", "handed_off", "aborted"})
UNRESOLVED = frozenset({"open", "claimed", "decided"})
# A failover is delivered to the standby, which carries the workflow on like a resume.
RESUMING_ACTIONS = frozenset({"resume", "retry_step", "failover"})
MAX_DETAIL = 2000


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: objects the encoder does not know become their ``repr``."""
    return json.loads(json.dumps(value, default=repr))


def _as_recorded(report: Json) -> Json:
    """A buffered report as the console will record it (the fields a report leaves out are null)."""
    fields = ("input", "output", "promise", "idempotency_key", "external_ref")
    return {**{f: None for f in fields}, "verified": False, **report}


@dataclass(frozen=True)
class Decision:
    """What an operator decided on a checkpoint (API.md: ``GET /checkpoints/{id}`` or a delivery)."""

    checkpoint_id: str
    action: str
    instructions: str = ""
    confirmations: dict[str, str] = field(default_factory=dict)
    new_owner: str | None = None
    delivery_id: str | None = None
    resume_state: Json = field(default_factory=dict)

    @property
    def resumes(self) -> bool:
        """True when the agent should carry on (``resume``, ``retry_step``, or ``failover`` to it as the standby)."""
        return self.action in RESUMING_ACTIONS

    @property
    def stands_down(self) -> bool:
        """The stand-down notice after a failover: stop working on this workflow, for good."""
        return self.action == "stand_down"

    @classmethod
    def from_json(cls, checkpoint_id: str, body: Json, resume_state: Json | None = None) -> Decision:
        return cls(
            checkpoint_id=checkpoint_id,
            action=str(body.get("action")),
            instructions=str(body.get("instructions") or ""),
            confirmations={str(k): str(v) for k, v in (body.get("confirmations") or {}).items()},
            new_owner=body.get("new_owner"),
            delivery_id=body.get("delivery_id"),
            resume_state=resume_state or body.get("resume_state") or {},
        )


class Paused(Exception):
    """The workflow waits at a checkpoint for an operator's decision."""

    def __init__(self, workflow: Workflow, checkpoint: Json, reason: str) -> None:
        super().__init__(f"workflow {workflow.external_id} paused at checkpoint {checkpoint.get('id')} ({reason})")
        self.workflow, self.checkpoint, self.reason = workflow, checkpoint, reason

    @property
    def checkpoint_id(self) -> str:
        return str(self.checkpoint["id"])

    def wait_for_decision(self, *, interval: float = 2.0, timeout: float = 3600.0) -> Decision:
        """Poll the console until an operator decides (for agents without a resume endpoint)."""
        return self.workflow.wait_for_decision(self.checkpoint_id, interval=interval, timeout=timeout)


class Stopped(Exception):
    """The console says this run is over for the agent: finished, handed off or aborted."""

    def __init__(self, external_id: str, status: str) -> None:
        super().__init__(f"workflow {external_id} is {status}; the agent does not run it any more")
        self.external_id, self.status = external_id, status


class Workflow:
    """One run of an agent on one job, as a context manager (``client.workflow(...)`` makes one)."""

    def __init__(
        self,
        client: RecoveryClient,
        external_id: str,
        kind: str,
        title: str,
        *,
        owner: str | None = None,
        context: Json | None = None,
        reasons: ReasonMap | None = None,
        state: Json | None = None,
        finish: bool = True,
        summary: str = "",
        settle_timeout: float = 60.0,
        poll_interval: float = 0.5,
        decision: Decision | None = None,
        batching: Batching | None = None,
    ) -> None:
        self.client, self.external_id, self.kind, self.title = client, external_id, kind, title
        self.owner, self.context, self.reasons = owner, context or {}, reasons
        self.state: Json = dict(state or {})  # the agent's own state, sent with every checkpoint
        # What a resume will do, sent with every checkpoint when set: [{"name", "kind", "amount", "currency"}].
        self.plan: list[Json] | None = None
        self.summary = summary
        self.finish_on_exit = finish
        self.settle_timeout, self.poll_interval = settle_timeout, poll_interval
        self.id = ""
        self.status = ""
        self.decision = decision  # the decision this run resumes from (a delivery's, or read at start)
        self.recorded: list[Json] = []
        self._seq = 0
        self._occurrences: Counter[str] = Counter()
        self.drill: DrillFault | None = None  # a recovery drill's fault, as a step report's answer told it
        # Reports go out one at a time until a finished step's answer (the first that can carry a hold's
        # pause) told of any hold or drill in place when the run started.
        self._lock = threading.RLock()  # the agent's thread and the buffer's timer both send
        self._buffer = StepBuffer(batching, self._timer_flush) if batching else None
        self._answered = False
        self._held: Json | None = None  # a pause a timer's flush brought: raised on the agent's thread

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> Workflow:
        """Create the workflow (idempotent on ``external_id``) and load what the console recorded.

        Raises ``Paused`` while a checkpoint waits for an operator and ``Stopped`` once the
        workflow is finished, handed off or aborted. A decision still being delivered is waited
        for (``settle_timeout``), so a resume receiver may start the run at once.
        """
        body = self.client.create_workflow(
            self.external_id, self.kind, self.title, owner=self.owner, context=self.context
        )
        self.id = str(body["id"])
        deadline = time.monotonic() + self.settle_timeout
        while True:
            self._load(body)
            latest = (body.get("checkpoints") or [None])[-1]
            if self.status in TERMINAL:
                raise Stopped(self.external_id, self.status)
            if latest is None or latest.get("status") not in UNRESOLVED:
                break
            # Decided: fetching the checkpoint delivers a polled decision; a pushed one is on its way.
            checkpoint = self.client.get_checkpoint(str(latest["id"]))
            if latest.get("status") != "decided" or time.monotonic() > deadline:
                raise Paused(self, checkpoint, str(latest.get("reason")))
            body = self.client.get_workflow(self.id)
            if (body.get("checkpoints") or [None])[-1] == latest:
                time.sleep(self.poll_interval)
        if latest is not None and self.decision is None:
            checkpoint = self.client.get_checkpoint(str(latest["id"]))
            if isinstance(checkpoint.get("decision"), dict):
                self.decision = Decision.from_json(
                    str(latest["id"]), checkpoint["decision"], checkpoint.get("resume_state")
                )
        return self

    def _load(self, body: Json) -> None:
        self.status = str(body.get("status"))
        self.recorded = sorted(body.get("steps") or [], key=lambda s: int(s["seq"]))
        self._seq = max([int(s["seq"]) for s in self.recorded] + [self._seq])

    def __enter__(self) -> Workflow:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            if self.finish_on_exit and self.status not in TERMINAL:
                self.finish("completed", self.summary)
            else:
                self.flush()
            return
        if isinstance(exc, Exception) and not isinstance(exc, Paused | Stopped):
            self.pause_for(exc)
        self._stop_buffer()  # a crash (a BaseException) loses what is buffered, as a dead process would

    def finish(self, status: Literal["completed", "failed"] = "completed", summary: str = "") -> Json:
        self.flush()
        body = self.client.finish(self.id, status, summary)
        self.status = str(body.get("status", status))
        return body

    # --- steps ----------------------------------------------------------------------------
    def step(self, name: str, *, kind: StepKind = "tool", input: Any = None, promise: str | None = None) -> StepScope:
        """A model call, tool call or message: ``pending`` now, ``committed``/``failed`` when the block ends."""
        if kind == "effect":
            return self.effect(name, input=input, promise=promise)
        occurrence = self._next_occurrence(name)
        done = [s for s in self.recorded if s["name"] == name and s["kind"] != "effect" and s["status"] != "failed"]
        recorded = done[occurrence - 1] if len(done) >= occurrence else None
        return StepScope(self, name, kind, input, promise, key=None, recorded=recorded)

    def effect(self, name: str, *, input: Any = None, key: str | None = None, promise: str | None = None) -> StepScope:
        """A side effect on an external system, under a stable idempotency key (``scope.idempotency_key``).

        ``scope.done`` is True when an earlier run committed it (or an operator confirmed it
        happened): do not execute it again; ``scope.recorded`` holds its record.
        """
        occurrence = self._next_occurrence(name)
        key = key or self.idempotency_key(name, occurrence)
        recorded = next((s for s in self.recorded if s.get("idempotency_key") == key), None)
        return StepScope(self, name, "effect", input, promise, key=key, recorded=recorded)

    def idempotency_key(self, name: str, occurrence: int = 1) -> str:
        return f"{self.external_id}:{name}" + (f":{occurrence}" if occurrence > 1 else "")

    def _next_occurrence(self, name: str) -> int:
        self._occurrences[name] += 1
        return self._occurrences[name]

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def report(self, seq: int, name: str, kind: StepKind, status: str, **fields: Any) -> Json:
        """Report a step and keep the local record in step with it: at once (``RecoveryClient.report_step``,
        or with the buffer in one batch), or into the buffer for a model or tool step under ``batching``
        (the answer is then the step as it will be recorded)."""
        if "input" in fields:
            fields["input"] = jsonable(fields["input"])
        if "output" in fields:
            fields["output"] = jsonable(fields["output"])
        report: Json = {"seq": seq, "name": name, "kind": kind, "status": status, **fields}
        with self._lock:
            self._raise_held()
            if self._buffer is not None and self._answered and kind in BUFFERED_KINDS:
                self._buffer.add(report)
                body = _as_recorded(self._buffer.reports[seq])
                self._remember([body])
                if self._buffer.due and status != "pending":  # a flush of finished steps: a hold may answer it
                    self.flush()
                return body
            waiting = self._buffer.take() if self._buffer is not None else []
            try:
                if waiting:
                    answer = self.client.report_steps(self.id, [*waiting, report])
                    steps: list[Json] = list(answer.get("steps") or [])
                    instruction = answer.get("instruction")
                    body = next(s for s in reversed(steps) if int(s["seq"]) == seq)
                else:
                    body = self.client.report_step(self.id, seq, name, kind, status, **fields)
                    instruction = body.pop("instruction", None)
                    steps = [body]
            except BaseException:
                if self._buffer is not None and waiting:
                    self._buffer.restore(waiting)  # nothing of a refused batch was recorded: it waits again
                raise
            self._answered = self._answered or status != "pending"  # a finished step's answer can carry a pause
            self._remember(steps)
            self._follow(instruction)
            return body

    def flush(self) -> None:
        """Send the buffered steps now, in one batch (a no-op without batching or with nothing buffered)."""
        with self._lock:
            self._raise_held()
            self._send_buffer()

    def _send_buffer(self, *, defer: bool = False) -> None:
        waiting = self._buffer.take() if self._buffer is not None else []
        if not waiting:
            return
        try:
            answer = self.client.report_steps(self.id, waiting)
        except BaseException:
            if self._buffer is not None:
                self._buffer.restore(waiting)
            raise
        self._remember(list(answer.get("steps") or []))
        self._follow(answer.get("instruction"), defer=defer)

    def _timer_flush(self) -> None:
        """The buffer's time bound, on the timer's thread: a hold's pause waits for the agent's thread."""
        # A failure leaves the buffer restored: the agent's next send retries it and raises.
        with self._lock, contextlib.suppress(Exception):
            self._send_buffer(defer=True)

    def _stop_buffer(self) -> None:
        if self._buffer is not None:
            self._buffer.stop()

    def _remember(self, steps: list[Json]) -> None:
        """Keep ``recorded`` by seq: a step replaces its seq's record, or goes in its place (searched from the
        end, where a run's reports land: this is per step, so it must not sort the whole trail)."""
        for step in steps:
            seq, at = int(step["seq"]), len(self.recorded)
            while at and int(self.recorded[at - 1]["seq"]) > seq:
                at -= 1
            if at and int(self.recorded[at - 1]["seq"]) == seq:
                self.recorded[at - 1] = step
            else:
                self.recorded.insert(at, step)

    def _follow(self, instruction: Any, *, defer: bool = False) -> None:
        """Act on an answer's instruction. A drill's fault is kept in ``wf.drill``. A hold: an operator put
        this agent on hold (an incident) and the console paused the workflow at a ``held`` checkpoint after
        the steps just reported; stop here, as at any checkpoint: raise ``Paused`` (on the agent's thread)."""
        self.drill = DrillFault.from_instruction(instruction) or self.drill
        pause = instruction.get("pause") if isinstance(instruction, dict) else None
        if isinstance(pause, dict) and pause.get("checkpoint_id"):
            self._held = pause
            if not defer:
                self._raise_held()

    def _raise_held(self) -> None:
        pause, self._held = self._held, None
        if pause is not None:
            self.status = "paused"
            raise Paused(
                self, self.client.get_checkpoint(str(pause["checkpoint_id"])), str(pause.get("reason", "held"))
            )

    # --- recovery drills (drills.py): the fault happens here, in the agent's process ----------------
    def drill_call(self, seq: int, kind: str, name: str) -> None:
        """Before the model or tool call of step ``seq``: a rate-limit storm refuses it (``DrillRateLimitError``)."""
        if self.drill and self.drill.throttles(seq, kind):
            raise DrillRateLimitError(
                f"429 Too Many Requests: rate limit reached for {name} (drill "
                f"{self.drill.drill_id}: rate-limit storm from step {self.drill.at_seq})"
            )

    def drill_answer(self, seq: int, kind: str, output: Any) -> tuple[Any, type[Exception] | None]:
        """Step ``seq``'s answer as the drill makes it (garbage, a changed provider's), and the error that stops
        a step which checks nothing (None: the answer is untouched)."""
        return self.drill.answer(seq, kind, output) if self.drill else (output, None)

    def die_if_failing_over(self, seq: int) -> None:
        """A failover drill at step ``seq``, which ran and is not reported yet: the process dies here
        (``DrillFailover``), leaving the step pending, for a standby to take the workflow over."""
        if self.drill and self.drill.fails_over_at(seq):
            with self._lock:
                self._send_buffer()
                self._stop_buffer()
            raise DrillFailover(
                f"drill {self.drill.drill_id}: the process dies in step {seq}, before reporting it; "
                "the standby takes over"
            )

    def crash_if_drilled(self, seq: int) -> None:
        """After step ``seq`` was committed: a drill's crash (``DrillCrash``, which nothing turns into a
        checkpoint) or its silence. The adapters call it after each step they commit, as ``StepScope`` does."""
        if self.drill and self.drill.crashes_after(seq):
            with self._lock:
                self._send_buffer()
                self._stop_buffer()
            raise DrillCrash(f"drill {self.drill.drill_id}: crash after step {seq}")
        if self.drill and self.drill.silences_after(seq):
            self.go_silent()

    def go_silent(self) -> None:
        """Say nothing for the drill's ``silent_minutes`` (``client.drill_sleep``), then come back: ``Paused``
        when the console paused the workflow meanwhile (its silence watchdog), else carry on."""
        assert self.drill is not None
        with self._lock:
            self._send_buffer()
        self.client.drill_sleep(self.drill.silence_seconds)
        body = self.client.get_workflow(self.id)
        latest = (body.get("checkpoints") or [None])[-1]
        if latest is not None and latest.get("status") in UNRESOLVED:
            self.status = "paused"
            raise Paused(self, self.client.get_checkpoint(str(latest["id"])), str(latest.get("reason")))

    # --- checkpoints and decisions ----------------------------------------------------------
    def checkpoint(
        self, reason: Reason, detail: str = "", *, at_seq: int | None = None, state: Json | None = None
    ) -> Json:
        """Open a checkpoint with ``wf.state`` (or ``state``); the one already open if there is one."""
        self.flush()  # the steps before it are in the console first
        try:
            body = self.client.open_checkpoint(
                self.id,
                reason,
                detail=detail[:MAX_DETAIL],
                at_seq=at_seq,
                state=jsonable(self.state if state is None else state),
                plan=jsonable(self.plan) if self.plan is not None else None,
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
            latest = (self.client.get_workflow(self.id).get("checkpoints") or [None])[-1]
            if latest is None or latest.get("status") not in UNRESOLVED:
                raise
            body = self.client.get_checkpoint(str(latest["id"]))
        self.status = "paused"
        return body

    def pause(
        self, reason: Reason, detail: str = "", *, at_seq: int | None = None, state: Json | None = None
    ) -> Paused:
        """Open a checkpoint and return the ``Paused`` to raise: ``raise wf.pause("manual", "needs a look")``."""
        checkpoint = self.checkpoint(reason, detail, at_seq=at_seq, state=state)
        return Paused(self, checkpoint, reason)

    def pause_for(
        self, exc: Exception, *, at_seq: int | None = None, step: str | None = None, state: Json | None = None
    ) -> None:
        """Open the checkpoint ``exc`` stands for and raise ``Paused`` from it."""
        reason = reason_for(exc, self.reasons)
        where = f" in step {step} (seq {at_seq})" if step else ""
        error = {"type": type(exc).__name__, "message": str(exc)[:MAX_DETAIL], "step": step}
        raise self.pause(
            reason,
            f"{type(exc).__name__}{where}: {exc}",
            at_seq=at_seq,
            state={**(self.state if state is None else state), "error": error},
        ) from exc

    def wait_for_decision(self, checkpoint_id: str, *, interval: float = 2.0, timeout: float = 3600.0) -> Decision:
        body = self.client.wait_for_decision(checkpoint_id, interval=interval, timeout=timeout)
        resume_state = self.client.get_checkpoint(checkpoint_id).get("resume_state")  # the agent state rides here
        self.decision = Decision.from_json(checkpoint_id, body, resume_state)
        return self.decision

    def confirmation(self, key: str | None) -> str | None:
        """The operator's word on an effect whose outcome was unknown: ``happened``, ``did_not_happen`` or None."""
        return self.decision.confirmations.get(key) if self.decision and key else None


class StepScope:
    """One step as a context manager; ``record()`` its output, ``verify()`` it, read ``done``."""

    def __init__(
        self,
        workflow: Workflow,
        name: str,
        kind: StepKind,
        input: Any,
        promise: str | None,
        *,
        key: str | None,
        recorded: Json | None,
    ) -> None:
        self.workflow, self.name, self.kind, self.input, self.promise = workflow, name, kind, input, promise
        self.idempotency_key = key
        self.recorded = recorded
        self.seq = int(recorded["seq"]) if recorded else 0
        self.done = bool(recorded and recorded["status"] == "committed")
        self.output: Any = recorded.get("output") if self.done and recorded else None
        self.external_ref: str | None = recorded.get("external_ref") if self.done and recorded else None
        self.verified = False
        self.drilled = False  # the answer was a drill's (garbage, a changed provider's) and met the step's check

    def record(
        self,
        output: Any = None,
        *,
        verified: bool | None = None,
        external_ref: str | None = None,
        promise: str | None = None,
    ) -> None:
        """What the step produced, committed with it when the block ends."""
        self.output = output
        if verified is not None:
            self.verified = verified
        if external_ref is not None:
            self.external_ref = external_ref
        if promise is not None:
            self.promise = promise

    def verify(self, output: Any, check: Callable[[Any], object]) -> Any:
        """Record ``output`` as verified when ``check(output)`` is truthy; else raise ``InvalidOutput``.

        A check that raises (a pydantic model, a JSON schema validator) counts as a refusal too;
        either way the checkpoint reason is ``tool_error``.
        """
        output, stops = self.workflow.drill_answer(self.seq, self.kind, output)  # a drill's answer meets the check
        self.drilled = stops is not None
        refusal = ProviderChanged if stops is ProviderChanged else InvalidOutput
        try:
            accepted = check(output)
        except Exception as exc:
            raise refusal(f"{self.name}: the output failed its check: {exc}") from exc
        if not accepted:
            raise refusal(f"{self.name}: the output failed its check")
        self.record(output, verified=True)
        return output

    def _fields(self) -> dict[str, Any]:
        return {"input": self.input, "promise": self.promise, "idempotency_key": self.idempotency_key}

    def __enter__(self) -> StepScope:
        wf = self.workflow
        if self.done:
            return self
        if self.recorded is not None:  # pending since a run that died in it: the same seq carries on
            if wf.confirmation(self.idempotency_key) == "happened":
                self.record({"confirmed_by_operator": "happened"})
                wf.report(self.seq, self.name, self.kind, "committed", **self._fields(), output=self.output)
                self.done = True
            return self
        self.seq = wf.next_seq()
        wf.report(self.seq, self.name, self.kind, "pending", **self._fields())
        try:
            wf.drill_call(self.seq, self.kind, self.name)  # a rate-limit storm refuses the call
        except DrillRateLimitError as exc:
            self.__exit__(type(exc), exc, None)  # the step fails and the workflow pauses: raises Paused
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        wf = self.workflow
        if exc is None and not self.done and not self.drilled:
            self.output, stops = wf.drill_answer(self.seq, self.kind, self.output)
            if stops is not None:
                what = (
                    "garbage answer"
                    if stops is GarbageAnswer
                    else "provider change (the model answered differently from the recorded one)"
                )
                exc = stops(f"{self.name}: a drill's {what} at step {self.seq}, and the step does not check its output")
        if exc is None:
            if not self.done:
                wf.die_if_failing_over(self.seq)  # a failover drill: the process dies before reporting the step
                wf.report(
                    self.seq,
                    self.name,
                    self.kind,
                    "committed",
                    **self._fields(),
                    output=self.output,
                    verified=self.verified,
                    external_ref=self.external_ref,
                )
                self.done = True
                wf.crash_if_drilled(self.seq)
            return
        if not isinstance(exc, Exception) or isinstance(exc, Paused | Stopped):
            return
        if self.kind != "effect" and not self.done:
            # An effect stays pending: whether it happened is unknown, and the console asks a human.
            wf.report(
                self.seq,
                self.name,
                self.kind,
                "failed",
                **self._fields(),
                output={"error": type(exc).__name__, "message": str(exc)[:MAX_DETAIL]},
            )
        wf.pause_for(exc, at_seq=self.seq or None, step=self.name)
