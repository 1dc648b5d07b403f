"""How the demo agent carries out an operator's decision: rebuild the run from the checkpoint, wait until the
console has carried *this* decision out, take the console's record as the truth about what is done, settle
the unknown effects as the operator confirmed them, then go on (or stop, hand off, stand down).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, cast

from recovery_client import Unavailable

from .agent_base import STOOD_DOWN, log
from .plans import Paused, Run
from .steps import StepKinds

if TYPE_CHECKING:
    from .shapes import CheckpointAnswer, Decision, ModelAnswer, ResumeState, RunState, Ticket, WorkflowAnswer


class Decisions(StepKinds, ABC):
    """An operator's decision, delivered or polled for, carried out on the run it is about."""

    # The life of a run (agent.py's DemoAgent) is what a decision hands the run back to: declared here,
    # abstract, so a class that forgets one cannot be made at all.
    @abstractmethod
    def drive(self, run: Run, decision: Decision | None = None, *, waiting: bool = False) -> str: ...

    @abstractmethod
    def pause(self, run: Run, pause: Paused) -> str: ...

    @abstractmethod
    def proceed(self, run: Run, *, fault_factor: float = 1.0) -> str: ...

    def on_delivery(self, payload: Decision) -> str:
        """A decision arrived on the resume endpoint (already verified and deduped)."""
        run = self.run_from(payload)
        log.info("%s %s: decision %s delivered", self.name, run.external_id, payload.get("action"))
        return self.drive(run, decision=payload)

    def run_from(self, payload: Decision) -> Run:
        """Rebuild the run from the checkpoint's state; the journal fills in what the agent sent nothing for."""
        resume_state: ResumeState = payload.get("resume_state") or {}
        state: RunState = resume_state.get("state") or {}
        if not state.get("remaining"):
            saved = self.journal.run(str(payload["external_id"]))
            state = saved["state"] if saved else {}
        remaining = state.get("remaining")
        if remaining is None:  # nothing known (a checkpoint the console opened): the whole plan, minus commits
            remaining = list(self.plan)
        return Run(
            kind=self.kind,
            external_id=str(payload["external_id"]),
            workflow_id=str(payload["workflow_id"]),
            ticket_id=str(state.get("ticket_id") or payload["external_id"]),
            remaining=[name for name in remaining if name in self.plan],
            ticket=state.get("ticket"),
            decision=state.get("decision"),
            refs=dict(state.get("refs") or {}),
            checkpoint_id=str(payload.get("checkpoint_id") or ""),
            resume_state=resume_state,
            fork=state.get("fork"),
        )

    def carry_out(self, run: Run, decision: Decision) -> str:
        action = decision.get("action")
        if action == "stand_down":
            # Failed over to a standby: stop here (the console already refuses this agent's reports on it).
            return self.stand_down(run.external_id, f"told to; {decision.get('taken_over_by')} took the workflow over")
        if action in ("handoff", "abort"):
            status = "handed_off" if action == "handoff" else "aborted"
            self.journal.set_status(run.external_id, status)
            log.info(
                "%s %s: %s%s; the agent stops working on it",
                self.name,
                run.external_id,
                status.replace("_", " "),
                f" to {decision['new_owner']}" if decision.get("new_owner") else "",
            )
            return status
        if action not in ("resume", "retry_step", "failover"):
            log.error("%s %s: unknown action %r ignored", self.name, run.external_id, action)
            return "ignored"
        workflow = self.settle(run, decision)
        if isinstance(workflow, str):
            return workflow
        self.sync(run, workflow, decision.get("resume_state") or run.resume_state)
        self.journal.set_status(run.external_id, "running")
        try:
            self.settle_unknowns(
                run, decision.get("resume_state") or run.resume_state, decision.get("confirmations") or {}
            )
        except Paused as pause:
            return self.pause(run, pause)
        return self.proceed(run, fault_factor=self.resume_fault_factor)

    def settle(self, run: Run, decision: Decision) -> WorkflowAnswer | str:
        """Wait until the console has carried *this* decision out (the workflow runs again because of it).

        A decision can be overtaken: a delivery accepted just before a crash is carried out again when
        the process restarts, and by then the run may be paused at a later checkpoint, or an operator
        may have decided the checkpoint again after the console gave the delivery up. Acting on it would
        drive the run twice at once (each thread's reports look like resends of the other's), so only
        the decision that resolved the run's latest checkpoint counts. Returns the workflow, or why not.
        """
        waited = 0.0
        while True:
            workflow = cast("WorkflowAnswer", self.client.get_workflow(run.workflow_id))
            current = self.is_current(run, decision, workflow)
            if current is False:
                log.warning(
                    "%s %s: the decision on checkpoint %s was overtaken; not acting on it",
                    self.name,
                    run.external_id,
                    run.checkpoint_id,
                )
                if self.polls:
                    # Nothing is delivered to a polling agent: left waiting on the overtaken checkpoint, it
                    # would find that decision again at every look and never fetch the one on the later
                    # checkpoint. Lost, the fleet asks the console which checkpoint is current and polls that.
                    self.journal.set_status(run.external_id, "lost")
                return "superseded"
            if current and workflow.get("status") == "running":
                return workflow
            if self.stop.is_set():
                return "stopped"
            if (
                workflow.get("status") in ("completed", "failed", "handed_off", "aborted")
                or waited >= self.settle_timeout
            ):
                log.warning(
                    "%s %s: the workflow is %s, not running; not resuming",
                    self.name,
                    run.external_id,
                    workflow.get("status"),
                )
                self.journal.set_status(run.external_id, "stuck")
                return "stuck"
            self.stop.wait(min(self.poll_interval, 0.25))
            waited += min(self.poll_interval, 0.25)

    def is_current(self, run: Run, decision: Decision, workflow: WorkflowAnswer) -> bool | None:
        """True: ``decision`` resolved the run's latest checkpoint. False: it was overtaken. None: not yet."""
        checkpoints = workflow.get("checkpoints") or []
        if not checkpoints or str(checkpoints[-1]["id"]) != run.checkpoint_id:
            return False
        if checkpoints[-1]["status"] != "resolved":
            return None
        checkpoint = cast("CheckpointAnswer", self.client.get_checkpoint(run.checkpoint_id))
        resolved_by: Decision = checkpoint.get("decision") or {}
        return resolved_by.get("delivery_id") == decision.get("delivery_id")

    def sync(self, run: Run, workflow: WorkflowAnswer, resume_state: ResumeState) -> None:
        """Take the console's record as the truth about what is done (it outlives this process)."""
        steps = workflow.get("steps") or []
        run.next_seq = max([int(s["seq"]) for s in steps] + [0]) + 1
        done = [s for s in steps if s.get("kind") == "effect" and s.get("status") == "committed"]
        done += [s for s in resume_state.get("committed") or [] if s.get("status", "committed") == "committed"]
        for step in steps:
            # Reported and never settled: an earlier life of this run (a killed process, an overtaken
            # delivery) may have executed it. Its outcome is for an operator to confirm, not to guess.
            pending = step.get("kind") == "effect" and step.get("status") == "pending"
            if pending and (key := step.get("idempotency_key")):
                run.in_flight[key] = int(step["seq"])
        for step in done:
            if key := step.get("idempotency_key"):
                run.committed.add(key)
            if ref := step.get("external_ref"):
                run.refs.setdefault(step["name"], ref)
        # A run rebuilt without the agent's own state (a standby after a failover, a checkpoint the console
        # opened) carries the whole plan: a step the console records as committed is done, not to be redone.
        committed_names = {s["name"] for s in steps if s.get("status") == "committed"}
        run.remaining = [name for name in run.remaining if name not in committed_names]
        for step in steps:
            failed = step.get("kind") == "effect" and step.get("status") == "failed"
            if failed and (key := step.get("idempotency_key")):
                run.failed[key] = int(step["seq"])  # retried under the same seq and key
            if step.get("status") != "committed":
                continue
            # What this agent reported itself (a ticket read, a model's answer), read back from the console.
            output = step["output"]
            if step["kind"] == "tool" and step["verified"] and run.ticket is None and isinstance(output, dict):
                run.ticket = cast("Ticket", output)
            if step["kind"] == "model" and run.decision is None and isinstance(output, dict):
                run.decision = cast("ModelAnswer", output)

    def settle_unknowns(self, run: Run, resume_state: ResumeState, confirmations: dict[str, str]) -> None:
        """Every effect whose outcome was unknown, as the operator confirmed it."""
        for effect in resume_state.get("unknown_effects") or []:
            key, name, seq = effect["idempotency_key"] or "", effect["name"], int(effect["seq"])  # an effect has a key
            spec = self.plan.get(name)
            if key in run.committed or spec is None:
                continue
            verdict = confirmations.get(key)
            if verdict == "happened":
                ref = self.ledgers.lookup(key)
                self.client.report_step(
                    run.workflow_id,
                    seq,
                    name,
                    "effect",
                    "committed",
                    input=effect["input"],
                    output={"confirmed_by_operator": "happened", "ref": ref},
                    idempotency_key=key,
                    external_ref=ref,
                    promise=effect["promise"],
                )
                self.journal.acknowledge(run.workflow_id, seq, "committed")
                run.committed.add(key)
                if ref:
                    run.refs[name] = ref
                log.info(
                    "%s %s: %s confirmed as happened (%s); not repeating it",
                    self.name,
                    run.external_id,
                    key,
                    ref or "no reference found",
                )
            elif verdict == "did_not_happen":
                log.info("%s %s: %s confirmed as not done; executing it now", self.name, run.external_id, key)
                recorded = effect["input"]
                self.execute_effect(run, spec, seq, recorded if isinstance(recorded, dict) else {}, key, None)
            else:
                raise Paused("other", f"No operator confirmation for the unknown effect {key}.", seq)
            if name in run.remaining:
                run.remaining.remove(name)

    def await_decision(self, run: Run) -> Decision | None:
        """Polling agents: wait for the operator's decision on the open checkpoint."""
        while not self.stop.is_set():
            try:
                # One look per call; the pause between looks is ours, so a stopping fleet is not kept waiting.
                decision = cast(
                    "Decision",
                    self.client.wait_for_decision(run.checkpoint_id, interval=self.poll_interval, timeout=0),
                )
            except TimeoutError:
                self.stop.wait(self.poll_interval)
                continue
            except Unavailable as exc:
                log.warning("%s %s: console unreachable while polling (%s)", self.name, run.external_id, exc)
                self.stop.wait(self.poll_interval * 5)
                continue
            log.info("%s %s: decision %s found by polling", self.name, run.external_id, decision.get("action"))
            return {**decision, "resume_state": run.resume_state}
        return None

    def stand_down(self, external_id: str, why: str) -> str:
        """The workflow was failed over to a standby: stop for good, whichever way the agent heard it
        (the stand-down notice, or the console refusing its report with 409 ``stood_down``)."""
        self.journal.set_status(external_id, STOOD_DOWN)
        log.warning("%s %s: standing down: %s", self.name, external_id, why)
        return STOOD_DOWN
