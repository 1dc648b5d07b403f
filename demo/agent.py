"""A simulated support agent runtime doing the worked example of DESIGN.md, and two variants.

The agent reports every step to the console through ``RecoveryClient`` (the real
HTTP API): an effect is reported ``pending`` *before* it is attempted and
``committed`` with its external reference after, so when the call times out the
console holds a pending effect, i.e. an **unknown effect** an operator must
confirm. On a fault the agent opens a checkpoint with its own state (the steps
still to do, the ticket, the model's decision) and waits for the decision: on its
resume endpoint (``server.py``) or, without one, by polling.

On resume it never repeats a committed effect: it skips every effect whose
idempotency key is committed in the resume state or in the console's record, and
settles unknown effects as the operator confirmed them.
"""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, cast

from recovery_client import ApiError, Unavailable
from recovery_client.drills import DrillCrash

from .agent_base import DRILL_REPORTED, STOOD_DOWN, log
from .decisions import Decisions
from .journal import CREATING, WAITING
from .plans import MONEY_STEPS, PLANS, TICKET_PREFIX, Paused, Run

if TYPE_CHECKING:
    from workflows.shapes import JsonObject

    from .shapes import CheckpointAnswer, Decision, JournalRun, WorkflowAnswer


class DemoAgent(Decisions):
    """One simulated agent runtime: it starts workflows and drives each run until it completes or pauses;
    what each step does is ``StepKinds``' (steps.py), what a decision does is ``Decisions``' (decisions.py)."""

    # --- the life of a workflow -----------------------------------------------------
    def start(self) -> tuple[Run | None, str]:
        """Start a new workflow and drive it until it completes, pauses (and, polling, beyond)."""
        run = self.create_run()
        if run is None:
            return None, "skipped"
        return run, self.drive(run)

    def create_run(self) -> Run | None:
        # The counter lives in the agent's journal; if that was wiped while the console kept its
        # workflows, the idempotent create answers an old workflow: skip to the next number then.
        for _ in range(20):
            ticket_id = self.unanswered_create or f"{TICKET_PREFIX[self.kind]}-{self.journal.next_number(self.kind)}"
            run = Run(
                kind=self.kind,
                external_id=ticket_id,
                workflow_id="",
                ticket_id=ticket_id,
                remaining=[spec.name for spec in PLANS[self.kind]],
            )
            # Journaled before the console is asked: if this process dies before the answer, the fleet
            # finds the row when it starts again and asks again (the create is idempotent).
            self.journal.save_run(run.external_id, agent=self.name, kind=self.kind, status=CREATING, state=run.state())
            self.unanswered_create = ticket_id
            try:
                workflow = self.register(run.external_id)
            except ApiError as exc:
                if exc.status < 500 and exc.status != 429:  # refused for good: nothing was created
                    self.journal.set_status(run.external_id, "refused")
                    self.unanswered_create = ""
                raise
            self.unanswered_create = ""
            if workflow.get("status") == "running" and not workflow.get("steps"):
                break
            if workflow.get("status") == "paused" and not workflow.get("steps"):
                # Ours, created by an attempt whose answer was lost (the console restarting), and paused by
                # its silence sweep before the retry was answered: not a number taken before. Lost, the
                # fleet picks it up like any run it lost track of; this launch goes on with a new number.
                self.journal.set_status(run.external_id, "lost", workflow_id=str(workflow["id"]))
                continue
            self.journal.set_status(run.external_id, "skipped")
        else:
            log.warning("%s: every new ticket number is taken in the console; not starting", self.name)
            return None
        run.workflow_id = str(workflow["id"])
        self.journal.save_run(
            run.external_id,
            agent=self.name,
            kind=self.kind,
            status="running",
            workflow_id=run.workflow_id,
            state=run.state(),
        )
        log.info("%s %s: started %s", self.name, run.external_id, self.kind)
        return run

    def register(self, external_id: str) -> WorkflowAnswer:
        """Create the workflow in the console; the same external id again answers the existing one."""
        title = f"{self.kind.replace('_', ' ').capitalize()} for {external_id}"
        context = {"ticket": external_id, "agent": self.name}
        return cast("WorkflowAnswer", self.client.create_workflow(external_id, self.kind, title, context=context))

    def drive(self, run: Run, decision: Decision | None = None, *, waiting: bool = False) -> str:
        """Work on ``run`` (after ``decision``, if given); a polling agent also waits here for decisions.

        ``waiting``: the run is paused already (picked up again after a restart) and waits first.
        """
        with self.lock:
            self.active.add(run.external_id)
            turn = self.turns.setdefault(run.external_id, threading.Lock())
        try:
            # A second driver (a decision delivered while a stalled thread still works on the run) waits
            # its turn, then works from the console's record of what the first one did.
            with turn:
                while True:
                    if waiting:
                        decision = self.await_decision(run)
                        if decision is None:
                            return "stopped"
                    outcome = self.carry_out(run, decision) if decision else self.proceed(run)
                    if outcome != "paused" or not self.polls:
                        return outcome
                    waiting = True
        except DrillCrash as crash:
            # A drill's fault: the run stops without a word, as a killed process would. Its silence sweep
            # pauses it, and the decision comes back to this agent (or, failed over, to the standby).
            log.warning("%s %s: drill: %s", self.name, run.external_id, crash)
            self.journal.set_status(run.external_id, "abandoned")
            return "crashed (drill)"
        except Unavailable as exc:
            # The workflow stays running in the console; its silence sweep pauses it: never a blank state.
            log.warning("%s %s: console unreachable, leaving the run (%s)", self.name, run.external_id, exc)
            self.journal.set_status(run.external_id, "abandoned")
            return "abandoned"
        except ApiError as exc:
            if exc.code == STOOD_DOWN:
                return self.stand_down(run.external_id, exc.message)
            log.error("%s %s: the console refused a report: %s", self.name, run.external_id, exc)
            self.journal.set_status(run.external_id, "failed")
            return "failed"
        finally:
            with self.lock:
                self.active.discard(run.external_id)

    def adopt(self, row: JournalRun) -> str:
        """A paused run from the journal (the process restarted): wait for its decision again."""
        run = self.run_from(
            {
                "external_id": row["external_id"],
                "workflow_id": row["workflow_id"],
                "checkpoint_id": row["checkpoint_id"],
                "resume_state": row["resume_state"],
            }
        )
        return self.drive(run, waiting=True)

    def proceed(self, run: Run, *, fault_factor: float = 1.0) -> str:
        try:
            for name in list(run.remaining):
                if self.step_delay:
                    self.stop.wait(random.uniform(0.5, 1.5) * self.step_delay)
                if self.stop.is_set():
                    # The fleet is stopping: leave the run between two reports, as a killed process would.
                    # It stays "running" in the journal; the next start of the fleet picks it up as an orphan.
                    log.info(
                        "%s %s: the fleet is stopping; leaving the run before step %s", self.name, run.external_id, name
                    )
                    return "stopped"
                spec = self.plan[name]
                fault = self.drilled_fault(run) or self.faults.pick(spec, len(self.plan), factor=fault_factor)
                {"tool": self.tool_step, "model": self.model_step, "effect": self.effect_step}[spec.kind](
                    run, spec, fault
                )
                run.remaining.remove(name)
                if run.held:
                    return self.stop_held(run)
        except Paused as pause:
            # On hold, the console already paused the run at its own checkpoint: that one is decided.
            return self.stop_held(run) if run.held else self.pause(run, pause)
        return self.complete(run)

    def drilled_fault(self, run: Run) -> str | None:
        """The fault a drill asks of the step about to run (``DRILL_REPORTED``), once; None if none."""
        drill = self.drills.get(run.workflow_id)
        if drill is None or drill.fault not in DRILL_REPORTED or run.next_seq < drill.at_seq:
            return None
        self.drills.pop(run.workflow_id)  # carried out once: the run the operator resumes goes on
        self.drills_done.add((run.workflow_id, drill.drill_id))
        log.warning("%s %s: drill: %s from step %s", self.name, run.external_id, drill.fault, run.next_seq)
        return DRILL_REPORTED[drill.fault]

    def stop_held(self, run: Run) -> str:
        """The console answered a step report with a pause instruction (the agent is on hold during an
        incident, docs/API.md "Holds"): stop at the ``held`` checkpoint it opened, as at our own, and wait
        for its decision there. Nothing more is attempted, so nothing more can go wrong meanwhile."""
        checkpoint = cast("CheckpointAnswer", self.client.get_checkpoint(run.held))
        run.checkpoint_id, run.resume_state, run.held = str(checkpoint["id"]), checkpoint.get("resume_state") or {}, ""
        self.journal.save_run(
            run.external_id,
            agent=self.name,
            kind=self.kind,
            status=WAITING,
            workflow_id=run.workflow_id,
            checkpoint_id=run.checkpoint_id,
            state=run.state(),
            resume_state=run.resume_state,
        )
        log.info(
            "%s %s: on hold: the console paused the run at checkpoint %s; waiting for its decision",
            self.name,
            run.external_id,
            run.checkpoint_id,
        )
        return "paused"

    def pause(self, run: Run, pause: Paused) -> str:
        try:
            opened = self.client.open_checkpoint(
                run.workflow_id,
                pause.reason,
                detail=pause.detail,
                at_seq=pause.at_seq,
                state=dict(run.state()),
                plan=self.plan_of(run),
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
            # The console paused it first (e.g. its silence sweep): that checkpoint is the one to decide.
            log.warning("%s %s: the console already holds a checkpoint (%s)", self.name, run.external_id, exc)
            self.journal.set_status(run.external_id, "lost")
            return "lost"
        checkpoint = cast("CheckpointAnswer", opened)
        run.checkpoint_id, run.resume_state = str(checkpoint["id"]), checkpoint.get("resume_state") or {}
        self.journal.save_run(
            run.external_id,
            agent=self.name,
            kind=self.kind,
            status=WAITING,
            workflow_id=run.workflow_id,
            checkpoint_id=run.checkpoint_id,
            state=run.state(),
            resume_state=run.resume_state,
        )
        unknown = [e["idempotency_key"] or "?" for e in run.resume_state.get("unknown_effects", [])]
        log.info(
            "%s %s: paused at step %s, %s: %s%s",
            self.name,
            run.external_id,
            pause.at_seq,
            pause.reason,
            pause.detail,
            f" (unknown: {', '.join(unknown)})" if unknown else "",
        )
        return "paused"

    def plan_of(self, run: Run) -> list[JsonObject]:
        """What a resume will do: the remaining steps, and for the money effect what is at stake.

        Before the model has decided, the ticket's amount is the most that can move; when even the
        ticket is unread, the amount is unknown but the step still says it moves money."""
        plan = []
        for name in run.remaining:
            spec = self.plan[name]
            step: JsonObject = {"name": name, "kind": spec.kind}
            if name in MONEY_STEPS:
                amount, currency = run.at_stake()
                step["moves_money"] = True
                if amount is not None and currency:
                    step.update(amount=str(amount), currency=str(currency))
            plan.append(step)
        return plan

    def complete(self, run: Run) -> str:
        summary = "; ".join(f"{name} {ref}" for name, ref in run.refs.items()) or "done"
        deadline_tries = max(1, int(self.settle_timeout / max(self.poll_interval, 0.05)))
        for attempt in range(deadline_tries):
            try:
                self.client.finish(run.workflow_id, "completed", summary)
                break
            except ApiError as exc:
                # 409: the console has not resolved the checkpoint yet (the delivery is finishing).
                if exc.status != 409 or attempt == deadline_tries - 1:
                    raise
                self.stop.wait(self.poll_interval)
        self.journal.save_run(
            run.external_id,
            agent=self.name,
            kind=self.kind,
            status="completed",
            workflow_id=run.workflow_id,
            checkpoint_id=run.checkpoint_id,
            state=run.state(),
        )
        log.info("%s %s: completed (%s)", self.name, run.external_id, summary)
        return "completed"
