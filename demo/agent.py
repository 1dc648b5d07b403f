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

import hashlib
import logging
import random
import re
import threading
import uuid
from typing import Any

from recovery_client import ApiError, RecoveryClient, Unavailable
from recovery_client.drills import DrillCrash, DrillFault

from .journal import CREATING, WAITING, Journal
from .plans import (
    MONEY_STEPS,
    PLANS,
    SYSTEM_FAULTS,
    TICKET_FIELDS,
    TICKET_PREFIX,
    FaultPlan,
    Paused,
    ProcessKilled,
    ProviderBehaviour,
    Run,
    StepSpec,
)
from .systems import Fault, Ledgers, RateLimited, ServiceError, SystemFailure

log = logging.getLogger("workflows.demo")

REFERENCE = re.compile(r"[RNM]-[0-9A-F]{8}")
STOOD_DOWN = "stood_down"  # the journal status, and the API's error code for a workflow failed over elsewhere
RUNTIME_VERSION = "demo-agent/1.1"
# Drill faults this agent carries out (docs/API.md "Recovery drills"): both stop the run after step k as a killed
# process does; the console's silence watchdog opens the checkpoint. For "failover" the operator then fails the
# run over to the standby (support-bot-standby), which resumes it from the console's resume state.
DRILL_CRASHES = frozenset({"crash_after_step", "failover"})
# ...and one the run meets and reports itself, so it reaches the queue within seconds, as any throttled run does:
# a rate-limit storm from step k on (the provider answers 429), once; the resumed run goes on.
DRILL_REPORTED = {"rate_limit_storm": "rate_limit"}


class DemoAgent:
    """One simulated agent runtime: one kind of workflow, its token, its fault plan."""

    def __init__(
        self,
        name: str,
        *,
        client: RecoveryClient,
        ledgers: Ledgers,
        journal: Journal,
        kind: str,
        faults: FaultPlan | None = None,
        signing_secret: str = "",
        polls: bool = False,
        poll_interval: float = 2.0,
        settle_timeout: float = 60.0,
        step_delay: float = 0.0,
        resume_fault_factor: float = 0.5,
        stop: threading.Event | None = None,
        provider: ProviderBehaviour | None = None,
    ) -> None:
        if kind not in PLANS:
            raise ValueError(f"Unknown workflow kind {kind!r}; known: {', '.join(PLANS)}")
        self.name, self.client, self.ledgers, self.journal, self.kind = name, client, ledgers, journal, kind
        self.faults = faults or FaultPlan()
        self.signing_secret = signing_secret
        self.polls = polls
        self.poll_interval = poll_interval
        self.settle_timeout = settle_timeout
        self.step_delay = step_delay
        self.resume_fault_factor = resume_fault_factor
        self.stop = stop or threading.Event()
        self.provider = provider or ProviderBehaviour()
        self.replay_misbehaviour = ""  # tests: "fabricate_effect", "extra_effect" (the console must catch both)
        self.plan = {spec.name: spec for spec in PLANS[kind]}
        self.active: set[str] = set()  # external ids of the runs this process is driving
        # A create whose answer never came (the console unreachable): the next launch asks again under the
        # same ticket number, since the console may have created it, instead of leaving it to the stale scan.
        self.unanswered_create = ""
        self.turns: dict[str, threading.Lock] = {}  # one thread drives a run at a time
        self.drills: dict[str, DrillFault] = {}  # workflow id -> the drill fault the console asked for
        # (workflow id, drill id) carried out: the console says the fault until the checkpoint opens, so the
        # answer to the failing step's own report says it once more; a resumed run must not meet it again.
        self.drills_done: set[tuple[str, str]] = set()
        self.promised: dict[str, list[str]] = {}  # workflow id -> promises reported (a drill's journal)
        self.lock = threading.Lock()

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

    def register(self, external_id: str) -> dict[str, Any]:
        """Create the workflow in the console; the same external id again answers the existing one."""
        title = f"{self.kind.replace('_', ' ').capitalize()} for {external_id}"
        return self.client.create_workflow(
            external_id, self.kind, title, context={"ticket": external_id, "agent": self.name}
        )

    def drive(self, run: Run, decision: dict[str, Any] | None = None, *, waiting: bool = False) -> str:
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

    def stand_down(self, external_id: str, why: str) -> str:
        """The workflow was failed over to a standby: stop for good, whichever way the agent heard it
        (the stand-down notice, or the console refusing its report with 409 ``stood_down``)."""
        self.journal.set_status(external_id, STOOD_DOWN)
        log.warning("%s %s: standing down: %s", self.name, external_id, why)
        return STOOD_DOWN

    def adopt(self, row: dict[str, Any]) -> str:
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
        checkpoint = self.client.get_checkpoint(run.held)
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
            checkpoint = self.client.open_checkpoint(
                run.workflow_id,
                pause.reason,
                detail=pause.detail,
                at_seq=pause.at_seq,
                state=run.state(),
                plan=self.plan_of(run),
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
            # The console paused it first (e.g. its silence sweep): that checkpoint is the one to decide.
            log.warning("%s %s: the console already holds a checkpoint (%s)", self.name, run.external_id, exc)
            self.journal.set_status(run.external_id, "lost")
            return "lost"
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
        unknown = [e["idempotency_key"] for e in run.resume_state.get("unknown_effects", [])]
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

    def plan_of(self, run: Run) -> list[dict[str, Any]]:
        """What a resume will do: the remaining steps, and for the money effect what is at stake.

        Before the model has decided, the ticket's amount is the most that can move; when even the
        ticket is unread, the amount is unknown but the step still says it moves money."""
        plan = []
        for name in run.remaining:
            spec = self.plan[name]
            step: dict[str, Any] = {"name": name, "kind": spec.kind}
            if name in MONEY_STEPS:
                ticket, decision = run.ticket or {}, run.decision or {}
                amount = decision.get("amount", ticket.get("amount"))
                currency = decision.get("currency", ticket.get("currency"))
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

    # --- decisions ------------------------------------------------------------------------
    def on_delivery(self, payload: dict[str, Any]) -> str:
        """A decision arrived on the resume endpoint (already verified and deduped)."""
        run = self.run_from(payload)
        log.info("%s %s: decision %s delivered", self.name, run.external_id, payload.get("action"))
        return self.drive(run, decision=payload)

    def run_from(self, payload: dict[str, Any]) -> Run:
        """Rebuild the run from the checkpoint's state; the journal fills in what the agent sent nothing for."""
        resume_state = payload.get("resume_state") or {}
        state = resume_state.get("state") or {}
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
            fork=state.get("fork") if isinstance(state.get("fork"), dict) else None,
        )

    def carry_out(self, run: Run, decision: dict[str, Any]) -> str:
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

    def settle(self, run: Run, decision: dict[str, Any]) -> dict[str, Any] | str:
        """Wait until the console has carried *this* decision out (the workflow runs again because of it).

        A decision can be overtaken: a delivery accepted just before a crash is carried out again when
        the process restarts, and by then the run may be paused at a later checkpoint, or an operator
        may have decided the checkpoint again after the console gave the delivery up. Acting on it would
        drive the run twice at once (each thread's reports look like resends of the other's), so only
        the decision that resolved the run's latest checkpoint counts. Returns the workflow, or why not.
        """
        waited = 0.0
        while True:
            workflow = self.client.get_workflow(run.workflow_id)
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

    def is_current(self, run: Run, decision: dict[str, Any], workflow: dict[str, Any]) -> bool | None:
        """True: ``decision`` resolved the run's latest checkpoint. False: it was overtaken. None: not yet."""
        checkpoints = workflow.get("checkpoints") or []
        if not checkpoints or str(checkpoints[-1]["id"]) != run.checkpoint_id:
            return False
        if checkpoints[-1].get("status") != "resolved":
            return None
        resolved_by = self.client.get_checkpoint(run.checkpoint_id).get("decision") or {}
        return resolved_by.get("delivery_id") == decision.get("delivery_id")

    def sync(self, run: Run, workflow: dict[str, Any], resume_state: dict[str, Any]) -> None:
        """Take the console's record as the truth about what is done (it outlives this process)."""
        steps = workflow.get("steps") or []
        run.next_seq = max([int(s["seq"]) for s in steps] + [0]) + 1
        done = [s for s in steps if s.get("kind") == "effect" and s.get("status") == "committed"]
        done += [s for s in resume_state.get("committed") or [] if s.get("status", "committed") == "committed"]
        for step in steps:
            # Reported and never settled: an earlier life of this run (a killed process, an overtaken
            # delivery) may have executed it. Its outcome is for an operator to confirm, not to guess.
            if step.get("kind") == "effect" and step.get("status") == "pending" and step.get("idempotency_key"):
                run.in_flight[step["idempotency_key"]] = int(step["seq"])
        for step in done:
            if step.get("idempotency_key"):
                run.committed.add(step["idempotency_key"])
            if step.get("external_ref"):
                run.refs.setdefault(step["name"], step["external_ref"])
        # A run rebuilt without the agent's own state (a standby after a failover, a checkpoint the console
        # opened) carries the whole plan: a step the console records as committed is done, not to be redone.
        committed_names = {s["name"] for s in steps if s.get("status") == "committed"}
        run.remaining = [name for name in run.remaining if name not in committed_names]
        for step in steps:
            if step.get("kind") == "effect" and step.get("status") == "failed" and step.get("idempotency_key"):
                run.failed[step["idempotency_key"]] = int(step["seq"])  # retried under the same seq and key
            if step.get("status") != "committed":
                continue
            if step.get("kind") == "tool" and step.get("verified") and run.ticket is None:
                run.ticket = step.get("output")
            if step.get("kind") == "model" and run.decision is None:
                run.decision = step.get("output")

    def settle_unknowns(self, run: Run, resume_state: dict[str, Any], confirmations: dict[str, Any]) -> None:
        """Every effect whose outcome was unknown, as the operator confirmed it."""
        for effect in resume_state.get("unknown_effects") or []:
            key, name, seq = effect["idempotency_key"], effect["name"], int(effect["seq"])
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
                    input=effect.get("input"),
                    output={"confirmed_by_operator": "happened", "ref": ref},
                    idempotency_key=key,
                    external_ref=ref,
                    promise=effect.get("promise"),
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
                self.execute_effect(run, spec, seq, effect.get("input") or {}, key, None)
            else:
                raise Paused("other", f"No operator confirmation for the unknown effect {key}.", seq)
            if name in run.remaining:
                run.remaining.remove(name)

    def await_decision(self, run: Run) -> dict[str, Any] | None:
        """Polling agents: wait for the operator's decision on the open checkpoint."""
        while not self.stop.is_set():
            try:
                # One look per call; the pause between looks is ours, so a stopping fleet is not kept waiting.
                decision = self.client.wait_for_decision(run.checkpoint_id, interval=self.poll_interval, timeout=0)
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

    # --- steps ---------------------------------------------------------------------------
    def report(self, run: Run, seq: int, spec: StepSpec, status: str, **fields: Any) -> None:
        answer = self.client.report_step(run.workflow_id, seq, spec.name, spec.kind, status, **fields)
        self.journal.acknowledge(run.workflow_id, seq, status)  # answered 2xx: the console must keep it
        instruction = answer.get("instruction") if isinstance(answer, dict) else None
        pause = instruction.get("pause") if isinstance(instruction, dict) else None
        if isinstance(pause, dict) and pause.get("checkpoint_id"):
            run.held = str(pause["checkpoint_id"])  # acted on once this step is done (``proceed``)
        if fields.get("promise") and status != "failed":
            self.promised.setdefault(run.workflow_id, []).append(fields["promise"])
        told = DrillFault.from_instruction(answer.get("instruction") if isinstance(answer, dict) else None)
        if told is not None and (run.workflow_id, told.drill_id) not in self.drills_done:
            self.drills[run.workflow_id] = told
        drill = self.drills.get(run.workflow_id)
        if drill and status == "committed" and drill.fault in DRILL_CRASHES and seq == drill.at_seq:
            self.drills.pop(run.workflow_id)  # carried out once: a resumed run goes on
            committed = sorted(
                run.committed | ({fields["idempotency_key"]} if fields.get("idempotency_key") else set())
            )
            try:  # what this runtime holds at the fault, for the report's "state intact"
                self.client.record_drill_journal(
                    run.workflow_id, committed=committed, pending=None, promises=self.promised.get(run.workflow_id, [])
                )
            except ApiError as exc:
                log.warning("%s %s: the drill journal was refused: %s", self.name, run.external_id, exc)
            raise DrillCrash(f"{drill.fault} after step {seq} ({spec.name})")

    def tool_step(self, run: Run, spec: StepSpec, fault: str | None) -> None:
        seq = run.take_seq()
        request = {"ticket": run.ticket_id}
        try:
            answer = self.ledgers.tickets.read(run.ticket_id, fault=SYSTEM_FAULTS.get(fault or ""))
        except SystemFailure as exc:
            self.report(run, seq, spec, "failed", input=request, output={"error": str(exc)})
            reason = "rate_limit" if isinstance(exc, RateLimited) else "tool_error"
            raise Paused(reason, f"{spec.name} failed: {exc}", seq) from exc
        if not (isinstance(answer, dict) and all(isinstance(answer.get(f), str) for f in TICKET_FIELDS)):
            # Never act on an answer that does not parse: record it (escaped by the console) and pause.
            # Kept as text for the operator; NUL is the one character JSON text stores cannot hold.
            raw = str(answer)[:500].replace("\x00", "\\x00")
            self.report(run, seq, spec, "failed", input=request, output={"raw": raw})
            raise Paused("untrusted_output", f"{spec.name} answered something that is not a ticket.", seq)
        self.report(run, seq, spec, "committed", input=request, output=answer, verified=True)
        run.ticket = answer

    def model_step(self, run: Run, spec: StepSpec, fault: str | None) -> None:
        seq = run.take_seq()
        ticket = run.ticket or {}
        prompt = {"model": "support-model-v3", "prompt": f"{ticket.get('subject', '?')} ({run.ticket_id}): what now?"}
        if self.provider.outage:
            # The provider is down (the ledgers page's switch): every model call fails the same way, with a
            # request id of its own, so the console's fingerprint groups them into one incident.
            request_id = uuid.UUID(hashlib.sha256(f"{run.workflow_id}:{seq}".encode()).hexdigest()[:32])
            error = f"model provider unavailable: 503 Service Unavailable (request {request_id})"
            self.report(run, seq, spec, "failed", input=prompt, output={"error": error})
            raise Paused("model_timeout", f"{spec.name}: {error}.", seq)
        if fault in ("model_timeout", "rate_limit"):
            error = "model call timed out after 30 s" if fault == "model_timeout" else "model provider answered 429"
            self.report(run, seq, spec, "failed", input=prompt, output={"error": error})
            raise Paused(fault, f"{spec.name}: {error}.", seq)
        output = self.model_answer(spec.name, ticket, run.ticket_id)
        self.report(run, seq, spec, "committed", input=prompt, output=output, promise=spec.promise)
        run.decision = output

    def model_answer(self, step_name: str, ticket: dict[str, Any], ticket_id: str) -> dict[str, Any]:
        """What the model answers for a ticket: deterministic, so a replay of a healthy run matches its recording.

        With ``provider.changed`` on, the provider "changed behaviour": it answers amounts in cents.
        """
        amount, currency = ticket.get("amount", "0.00"), ticket.get("currency", "EUR")
        if self.provider.changed:
            amount = f"{float(amount) * 100:.2f}"
        if step_name == "decide_refund":
            return {
                "decision": "refund",
                "amount": amount,
                "currency": currency,
                "rationale": "eligible under the 30-day refund policy",
            }
        if step_name == "assess_dispute":
            return {
                "decision": "credit",
                "amount": f"{float(amount) / 2:.2f}",
                "currency": currency,
                "rationale": "half of the invoice was billed in error",
            }
        return {"category": random.Random(ticket_id).choice(("delivery", "billing", "product")), "priority": "normal"}

    # --- replay (docs/API.md, "Replaying a step range") ------------------------------------
    def replay(self, request: dict[str, Any]) -> dict[str, Any]:
        """Re-execute the steps with their recorded inputs. Effects answer their recorded output and are never
        executed: this method holds no way to call payments, tickets' notes or messaging."""
        ticket_id = str(request.get("external_id") or "")
        ticket: dict[str, Any] | None = None
        results = []
        for step in request.get("steps") or []:
            name, kind, data = str(step.get("name")), step.get("kind"), step.get("input")
            if kind == "effect":
                output = step.get("recorded_output")
                if self.replay_misbehaviour == "fabricate_effect":
                    output = {"ref": "R-0BADBEEF"}  # as if it had executed the refund again
            elif kind == "tool" and name in ("read_ticket", "read_invoice"):
                wanted = data.get("ticket") if isinstance(data, dict) else None
                output = ticket = self.ledgers.tickets.read(str(wanted or ticket_id))  # a read commits nothing
            elif kind == "model":
                ticket = ticket if isinstance(ticket, dict) else self.ledgers.tickets.read(ticket_id)
                output = self.model_answer(name, ticket, ticket_id)
            else:
                output = {"error": f"{self.name} cannot replay a {kind} step named {name}"}
            result = {"seq": step.get("seq"), "output": output}
            if self.replay_misbehaviour == "extra_effect" and kind == "effect":
                result["effects"] = [{"name": name, "idempotency_key": step.get("idempotency_key")}]
            results.append(result)
        return {
            "results": results,
            "runtime_version": RUNTIME_VERSION + (" (provider changed)" if self.provider.changed else ""),
        }

    def effect_step(self, run: Run, spec: StepSpec, fault: str | None) -> None:
        if fault in ("model_timeout", "rate_limit"):
            # The model call that plans this step failed: nothing reported, nothing attempted.
            what = "timed out" if fault == "model_timeout" else "was rate limited (429)"
            raise Paused(fault, f"The model call planning {spec.name} {what}.", run.next_seq)
        key = run.key(spec)
        if key in run.committed:
            log.info("%s %s: %s already committed; skipping it", self.name, run.external_id, key)
            return
        if key in run.in_flight and key not in run.committed:
            # Reporting it again under a new seq would be a duplicate effect (the console refuses it).
            raise Paused(
                "other",
                f"{spec.name} was in flight when this run was interrupted; whether {key} happened is unknown.",
                run.in_flight[key],
            )
        # A failed attempt is retried as a new attempt of the same step (failed -> pending), same input and key.
        retry_seq = run.failed.pop(key, None)
        seq = retry_seq or run.take_seq()
        request = self.effect_input(run, spec) if retry_seq is None else self.recorded_input(run, seq)
        if (
            run.fork
            and run.fork.get("input_edited")
            and run.fork.get("step") == spec.name
            and isinstance(run.fork.get("input"), dict)
        ):
            request = {**request, **run.fork["input"]}  # the operator's edited input for the step forked from
        # Reported before acting: if the call never answers, the console knows the outcome is unknown.
        self.report(run, seq, spec, "pending", input=request, idempotency_key=key, promise=request.get("promise"))
        self.execute_effect(run, spec, seq, request, key, SYSTEM_FAULTS.get(fault or ""))

    def execute_effect(
        self, run: Run, spec: StepSpec, seq: int, request: dict[str, Any], key: str, fault: Fault | None
    ) -> None:
        try:
            answer = self.call_system(spec, request, key, fault)
            if self.faults.forced_kill(spec.name):
                raise ProcessKilled(f"{self.name} died after {key} was executed, before reporting it")
        except (RateLimited, ServiceError) as exc:
            # The system refused it: nothing happened, so the effect failed and can be retried under its key.
            self.report(
                run,
                seq,
                spec,
                "failed",
                input=request,
                output={"error": str(exc)},
                idempotency_key=key,
                promise=request.get("promise"),
            )
            reason = "rate_limit" if isinstance(exc, RateLimited) else "tool_error"
            raise Paused(reason, f"{spec.name} failed: {exc}; nothing happened, retry it under {key}.", seq) from exc
        except SystemFailure as exc:
            # Left pending on purpose: the agent cannot know whether it happened, an operator can.
            reason = "rate_limit" if isinstance(exc, RateLimited) else "tool_error"
            raise Paused(reason, f"{spec.name}: {exc}; whether {key} happened is unknown.", seq) from exc
        if not REFERENCE.fullmatch(answer):
            raise Paused(
                "untrusted_output",
                f"{spec.name} answered something that is not a reference; whether {key} happened is unknown.",
                seq,
            )
        self.report(
            run,
            seq,
            spec,
            "committed",
            input=request,
            output={"ref": answer},
            idempotency_key=key,
            external_ref=answer,
            promise=request.get("promise"),
        )
        run.committed.add(key)
        run.refs[spec.name] = answer

    def recorded_input(self, run: Run, seq: int) -> dict[str, Any]:
        """A retry repeats the failed attempt's input exactly (the console refuses another)."""
        workflow = self.client.get_workflow(run.workflow_id)
        step = next(s for s in workflow.get("steps") or [] if int(s["seq"]) == seq)
        return step.get("input") or {}

    def effect_input(self, run: Run, spec: StepSpec) -> dict[str, Any]:
        ticket, decision = run.ticket or {}, run.decision or {}
        amount, currency = (
            decision.get("amount", ticket.get("amount")),
            decision.get("currency", ticket.get("currency")),
        )
        if spec.name in MONEY_STEPS:
            return {"ticket": run.ticket_id, "amount": amount, "currency": currency, "to": ticket.get("customer")}
        if spec.name == "write_ticket_note":
            done = ", ".join(f"{name} {ref}" for name, ref in run.refs.items()) or "no effect yet"
            return {"ticket": run.ticket_id, "text": f"{self.name}: {self.kind.replace('_', ' ')} handled ({done})."}
        promise = next((s.promise for s in self.plan.values() if s.promise), "")
        text = (
            f"Dear {ticket.get('customer', 'customer')}, we have issued {amount} {currency}: {promise}."
            if amount and self.kind != "ticket_triage"
            else f"Dear customer, {promise}."
        )
        return {
            "ticket": run.ticket_id,
            "to": ticket.get("email"),
            "text": text,
            "promise": f"customer told: {promise}",
        }

    def call_system(self, spec: StepSpec, request: dict[str, Any], key: str, fault: Fault | None) -> str:
        if spec.name in MONEY_STEPS:
            return self.ledgers.payments.refund(
                key,
                ticket=request["ticket"],
                amount=str(request["amount"]),
                currency=str(request["currency"]),
                agent=self.name,
                fault=fault,
                operation="refund" if spec.name == "issue_refund" else "credit",
            )
        if spec.name == "write_ticket_note":
            return self.ledgers.tickets.add_note(
                key, ticket=request["ticket"], text=request["text"], agent=self.name, fault=fault
            )
        return self.ledgers.messaging.send(
            key, ticket=request["ticket"], to=str(request.get("to")), text=request["text"], agent=self.name, fault=fault
        )
