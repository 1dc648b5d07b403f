"""The article's test as a drill: "can it disappear for ten minutes, fail over, and come back with its state intact?"

Two demo agent runtimes of the refund kind, each a fleet of its own (its own journal, its own resume
endpoint, as two processes on two hosts), call the same simulated external systems (the ledgers):

1. ``support-bot`` starts the worked example; its process dies right after the ticket system wrote the
   note and before the agent reported it, so the note's outcome is unknown and its endpoint is gone;
2. the console's silence sweep (run with ``now`` ten minutes on, not by waiting) pauses the workflow at a
   checkpoint with its resume state: the refund committed, the promise made, the note unknown;
3. an operator confirms the note from the ledgers and fails the workflow over to ``support-bot-standby``,
   which completes it: no effect twice;
4. ``support-bot`` comes back: a restarted fleet on the same endpoint asks the console about the run it
   left (409 ``stood_down``), receives the stand-down notice the console retries, and the run a frozen
   process still held tries to carry on: its report is refused and it executes nothing.

It is a recovery drill definition (``workflows.models.Drill``, fault ``failover``) on the scratch console:
``start`` defines and starts it, so the run is a drilled workflow and ``report`` scores it with the drill
report (verdict, state intact). ``scripts/failover_drill.py`` (``make failover-drill``) runs it and prints each stage;
``tests/test_failover_after_ten_minutes_of_silence.py`` runs it over real HTTP and checks each stage.
The stages are methods, so a caller can stop between them (and an operator can decide in the browser).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from workflows import drill_report
from workflows.models import Agent, Checkpoint, Decider, Decision, Drill, Workflow

from .agent import DemoAgent
from .fleet import AgentConfig, Fleet
from .journal import Journal
from .plans import PROCESS_KILLED, FaultPlan, ProcessKilled, Run
from .server import ResumeServer
from .systems import Ledgers

if TYPE_CHECKING:
    from workflows.models.base import Operator

EFFECTS = ("refund", "note", "message")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class FailoverDrill:
    """``console_url``: a running console (the tests' live server, the script's own). ``workdir``: the
    ledgers and each runtime's journal. ``server_class``: the resume server (tests hold deliveries on SQLite)."""

    def __init__(
        self,
        console_url: str,
        workdir: Path,
        *,
        owner: Operator,
        original: str = "support-bot",
        standby: str = "support-bot-standby",
        silence_minutes: int = 5,
        server_class: Callable[..., ResumeServer] = ResumeServer,
    ) -> None:
        self.console_url, self.workdir, self.owner = console_url, workdir, owner
        self.names = {"original": original, "standby": standby}
        self.server_class = server_class
        self.ledgers = Ledgers(workdir / "ledgers.sqlite3")  # the payment, ticket and messaging systems
        self.ports = {role: free_port() for role in self.names}
        self.configs = {role: self.register(role) for role in self.names}
        # A money agent gets a shorter silence limit than the console's default (AGENT_SILENCE_SECONDS).
        Agent.objects.filter(name=original).update(silence_seconds=silence_minutes * 60)
        self.fleets = {role: self.fleet(role) for role in self.names}
        self.run: Run | None = None
        self.workflow: Workflow | None = None
        self.frozen: DemoAgent | None = None  # the original's agent as its dead process left it
        self.drill: Drill | None = None

    def register(self, role: str) -> AgentConfig:
        name = self.names[role]
        url = f"http://127.0.0.1:{self.ports[role]}/agents/{name}/resume"
        record, token = Agent.register(
            name, resume_url=url, owner=self.owner, description=f"The failover drill's {role} refund agent."
        )
        return AgentConfig(name=name, kind="refund", token=token, signing_secret=record.signing_secret, resume_url=url)

    def fleet(self, role: str) -> Fleet:
        """A runtime of its own: its journal, its endpoint; no launch loop (the drill starts the one run)."""
        return Fleet(
            self.console_url,
            [self.configs[role]],
            port=self.ports[role],
            fault_rate=0.0,
            step_delay=0,
            poll_interval=0.05,
            retries=2,
            ledgers=self.ledgers,
            total=0,
            journal=Journal(self.workdir / f"{role}-runtime.sqlite3"),
            server_class=self.server_class,
        )

    def agent(self, role: str) -> DemoAgent:
        return self.fleets[role].agents[self.names[role]]

    # --- 1. the original disappears mid-workflow ---------------------------------------------------
    def start(self) -> None:
        for fleet in self.fleets.values():
            fleet.server.start()
            fleet.advertise()  # replay, fork, failover, drill (a sandbox: the ledgers are simulated); refund
        # The drill definition this script is: the next refund of the original fails over (it dies mid-step
        # in ``disappear``, before the fault the instruction names could come: the death is the fault).
        self.drill = Drill.objects.create(
            agent=Agent.objects.get(name=self.names["original"]),
            kind="refund",
            fault=Drill.Fault.FAILOVER,
            at_seq=4,
            runs=1,
            name="Disappear for ten minutes, fail over, come back (make failover-drill)",
        )
        self.drill.start()

    def disappear(self) -> Workflow:
        """support-bot runs the refund and dies right after the note was written, before reporting it."""
        agent = self.agent("original")
        agent.faults = FaultPlan(0.0, forced={"write_ticket_note": PROCESS_KILLED})
        run = agent.create_run()
        if run is None:
            raise RuntimeError("the console refused a new workflow")
        try:
            outcome = agent.drive(run)
        except ProcessKilled:
            pass
        else:
            raise RuntimeError(f"support-bot was to die mid-workflow, but its run ended {outcome}")
        self.fleets["original"].server.stop()  # the process is gone, and its endpoint with it
        self.run, self.frozen = run, agent
        self.workflow = Workflow.objects.get(agent__name=agent.name, external_id=run.external_id)
        return self.workflow

    def key(self, effect: str) -> str:
        assert self.run is not None
        return f"{self.run.external_id}:{effect}"

    def executed(self) -> dict[str, int]:
        """How often each effect of the ticket really ran in the simulated systems."""
        return {effect: len(self.ledgers.executions_for(self.key(effect))) for effect in EFFECTS}

    # --- 2. silence ----------------------------------------------------------------------------------
    def sweep_after(self, minutes: float) -> int:
        """The console's silence sweep as it runs ``minutes`` after the agent's last sign of life."""
        from workflows import tasks  # tasks import the models

        assert self.workflow is not None
        self.workflow.refresh_from_db()
        return tasks.pause_silent_workflows(now=self.workflow.last_activity_at + timedelta(minutes=minutes))

    def checkpoint(self) -> Checkpoint:
        assert self.workflow is not None
        return self.workflow.checkpoints.order_by("-opened_at", "-pk").first()  # type: ignore[return-value]

    # --- 3. the operator fails it over (the script; the test posts the workbench's form) ---------------
    def fail_over(self, operator: Operator) -> Decision:
        """Claim, confirm the unknown note from the ledgers, fail over to the standby."""
        checkpoint = self.checkpoint()
        checkpoint.claim(by=operator)
        note = self.key("note")
        ref = self.ledgers.lookup(note)
        return Decider(checkpoint).decide(
            by=operator,
            action="failover",
            standby=Agent.objects.get(name=self.names["standby"]),
            confirmations={note: "happened" if ref else "did_not_happen"},
            confirmation_refs={note: ref} if ref else {},
            instructions=f"{self.names['original']} has been silent for ten minutes; the note is in the ticket "
            f"system ({ref}). Carry on from the customer message.",
            money_confirmed=True,
        )

    def deliver(self, decision: Decision) -> str:
        """What a Celery worker does with the decision; then the standby carries it out."""
        from workflows import tasks

        outcome = tasks.deliver_decision(decision.pk)
        server = self.fleets["standby"].server
        getattr(server, "release", lambda: None)()  # a holding test server lets the agent go now
        if not server.join(timeout=60):
            raise RuntimeError("the standby did not finish carrying the decision out")
        return outcome

    def stand_down(self, decision: Decision) -> str:
        """One attempt of the stand-down notice (Celery retries a failed one with backoff)."""
        from workflows import tasks

        outcome: str = tasks.send_stand_down(decision.pk)
        server = self.fleets["original"].server
        getattr(server, "release", lambda: None)()
        server.join(timeout=30)
        return outcome

    # --- 4. the original comes back ----------------------------------------------------------------------
    def come_back(self) -> Fleet:
        """support-bot's runtime restarts on its old endpoint with its old journal and looks for its runs,
        as ``Fleet.start`` does (without the loops, so each stage ends before the next)."""
        fleet = self.fleet("original")
        fleet.server.start()
        fleet.server.recover()
        fleet.reconcile(full=True)
        self.fleets["original"] = fleet
        return fleet

    def frozen_run_carries_on(self) -> str:
        """The run the dead process held in memory tries to go on where it stopped (as a process that was
        only frozen, or cut off the network, would): its next report is the note again."""
        assert self.frozen is not None and self.run is not None
        return self.frozen.drive(self.run)

    def journal_status(self) -> str | None:
        assert self.run is not None
        row = self.fleets["original"].journal.run(self.run.external_id)
        return row["status"] if row else None

    def report(self) -> drill_report.DrillReport:
        """The drill's score: the console's verdict on the comeback, with the dashboard's definitions."""
        assert self.drill is not None
        return drill_report.score(self.drill)

    def close(self) -> None:
        for fleet in self.fleets.values():
            fleet.stop_event.set()
            if fleet.server.thread is not None and fleet.server.thread.is_alive():
                fleet.server.stop(wait=10)
