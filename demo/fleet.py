"""The demo fleet: a few simulated agents that keep the console busy, and their resume server.

Each agent starts a workflow every few seconds in its own thread. New work is held
back while more than ``max_open`` checkpoints wait for a decision, so a fleet left
running overnight leaves a realistic queue, not thousands of rows. When the
console is not up yet (``make run`` starts it at the same time) the agents wait
and retry politely. Everything goes through the real HTTP API.

The fleet can be killed at any moment (the chaos run does it). Its journal lets a
new process pick the runs back up: paused runs wait for their decision again,
deliveries accepted but not carried out are carried out, and runs whose process
died mid-step (orphans) are looked up in the console once. An agent with a resume
endpoint then leaves them to the console's silence sweep (the decision on that
checkpoint is delivered as any other); a polling agent, to which nothing is ever
delivered, reports the run it lost track of as a checkpoint and polls it.
``total`` caps the launches across restarts, counted in the journal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, cast

from recovery_client import ApiError, RecoveryClient, Unavailable

from .agent import DemoAgent
from .agent_base import RUNTIME_VERSION, STOOD_DOWN
from .journal import CREATING, ORPHANED, WAITING, Journal
from .plans import PLANS, FaultPlan, ProviderBehaviour
from .server import ResumeServer
from .store import demo_dir, now_iso
from .systems import Ledgers

if TYPE_CHECKING:
    from .shapes import CheckpointAnswer, JournalRun, WorkflowAnswer

log = logging.getLogger("workflows.demo")

# Journal statuses of runs nobody drives any more; "running" and "creating" count too once stale.
# ORPHANED is not one: those were looked up once and are left to the console's silence sweep.
ORPHAN_STATUSES = {"abandoned", "lost", "failed", "stuck"}
STALE_SECONDS = 60.0  # far longer than a run spends between its journal row and its driving thread
TERMINAL = {"completed", "failed", "handed_off", "aborted"}
OUTAGE_EXTRA_OPEN = 30  # more paused runs a provider outage may pile up before the launches wait


@dataclass(frozen=True)
class AgentConfig:
    name: str
    kind: str
    token: str
    signing_secret: str
    resume_url: str = ""
    owner: str | None = None

    @property
    def polls(self) -> bool:
        return not self.resume_url


def agents_file() -> Path:
    return demo_dir() / "agents.json"


def load_agents(path: Path | None = None) -> list[AgentConfig]:
    """The demo agents seed_demo registered, in the order it wrote them."""
    data = json.loads((path or agents_file()).read_text())
    fields = AgentConfig.__dataclass_fields__
    return [AgentConfig(**{k: v for k, v in entry.items() if k in fields}) for entry in data["agents"]]


class Fleet:
    def __init__(
        self,
        console_url: str,
        configs: list[AgentConfig],
        *,
        port: int = 8765,
        interval: float = 4.0,
        max_open: int = 12,
        seed: int | None = None,
        fault_rate: float = 0.35,
        step_delay: float = 0.6,
        poll_interval: float = 2.0,
        retries: int = 3,
        ledgers: Ledgers | None = None,
        journal: Journal | None = None,
        total: int | None = None,
        reconcile_interval: float = 30.0,
        provider_changed: bool = False,
        server_class: Callable[..., ResumeServer] = ResumeServer,
    ) -> None:
        self.console_url = console_url
        self.provider = ProviderBehaviour(provider_changed)  # one switch for every agent and the ledgers page
        self.interval = interval
        self.max_open = max_open
        self.total = total
        self.reconcile_interval = reconcile_interval
        self.started_at = now_iso()  # journal rows older than this belong to a process that is gone
        self.launching = threading.Lock()  # one launch at a time, so the total is never overshot
        self.stop_event = threading.Event()
        self.rng = random.Random(seed)
        self.ledgers = ledgers or Ledgers()
        self.journal = journal or Journal()
        self.agents: dict[str, DemoAgent] = {}
        for config in configs:
            if config.kind not in PLANS:
                log.warning("%s: unknown workflow kind %r; not running it", config.name, config.kind)
                continue
            client = RecoveryClient(console_url, config.token, timeout=10.0, retries=retries, backoff=0.5)
            self.agents[config.name] = DemoAgent(
                config.name,
                client=client,
                ledgers=self.ledgers,
                journal=self.journal,
                kind=config.kind,
                faults=FaultPlan(fault_rate, rng=random.Random(self.rng.random())),
                signing_secret=config.signing_secret,
                polls=config.polls,
                poll_interval=poll_interval,
                step_delay=step_delay,
                stop=self.stop_event,
                provider=self.provider,
            )
        self.server = server_class(
            {n: a for n, a in self.agents.items() if not a.polls},
            journal=self.journal,
            ledgers=self.ledgers,
            port=port,
            provider=self.provider,
        )
        self.threads: list[threading.Thread] = []
        self.runs: set[threading.Thread] = set()
        self.lock = threading.Lock()

    # --- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        self.server.start()
        log.info(
            "demo fleet: %d agent(s) (%s), resume server and ledgers at %s, console %s",
            len(self.agents),
            ", ".join(f"{n}: {a.kind}{' (polls)' if a.polls else ''}" for n, a in self.agents.items()),
            self.server.url("/ledgers"),
            self.console_url,
        )
        self.server.recover()
        self.advertise()
        self.thread(self.housekeeping, "fleet-housekeeping")
        for agent in self.agents.values():
            self.thread(self.launch_loop, f"launch-{agent.name}", agent)

    def advertise(self) -> None:
        """Agents with an endpoint tell the console they can replay (the replay URL itself is admin-set)."""
        for agent in self.agents.values():
            if agent.polls:
                continue
            try:
                # A fork's edited input is applied to the effect it restarts at (DemoAgent.effect_step), and
                # to no other kind of step: said here, so the console refuses the edits it would ignore.
                # Drills: crash-after-k and failover (DemoAgent.report). Every system the demo calls is a
                # simulated ledger (demo/systems.py): a sandbox, so its drilled money effects may run.
                agent.client.advertise(
                    ["replay", "fork", "failover", "drill", "drill_sandbox"],
                    runtime_version=RUNTIME_VERSION,
                    kinds=[agent.kind],
                    fork_edits=["effect"],
                )
            except (ApiError, Unavailable) as exc:
                log.warning("%s: could not advertise its capabilities: %s", agent.name, exc)

    def wait(self) -> None:
        """Block until ``stop`` (a signal handler calls it)."""
        while not self.stop_event.wait(0.5):
            pass

    def stop(self) -> None:
        self.stop_event.set()

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Stop starting work, let each run in flight finish the report it is making, close the server.

        True when nothing of the fleet still talks to the console (see ``busy``)."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:  # the launch loops first: no run is spawned after this
            thread.join(max(deadline - time.monotonic(), 0.01))
        with self.lock:
            runs = list(self.runs)
        for thread in runs:
            thread.join(max(deadline - time.monotonic(), 0.01))
        self.server.stop(wait=max(deadline - time.monotonic(), 0.01))
        left = self.busy()
        if left:
            log.warning("demo fleet stopped with %d thread(s) still working: %s", len(left), ", ".join(left))
        else:
            log.info("demo fleet stopped")
        return not left

    def busy(self) -> list[str]:
        """The names of the fleet's threads still alive: loops, runs and deliveries being carried out."""
        with self.lock:
            runs = list(self.runs)
        with self.server.lock:
            workers = list(self.server.workers)
        return [t.name for t in [*self.threads, *runs, *workers] if t.is_alive()]

    def thread(self, target: Callable[..., object], name: str, *args: object) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def spawn(self, target: Callable[..., object], name: str, *args: object) -> None:
        """A thread per run in flight: a polling agent's run waits in it for its decision."""

        def work() -> None:
            try:
                target(*args)
            except Exception:
                log.exception("%s: run crashed", name)
            finally:
                with self.lock:
                    self.runs.discard(threading.current_thread())

        thread = threading.Thread(target=work, name=name, daemon=True)
        with self.lock:
            self.runs.add(thread)
        thread.start()

    # --- work -----------------------------------------------------------------------------
    def launch_loop(self, agent: DemoAgent) -> None:
        outage = 0.0  # seconds to wait after a failed attempt; 0 while the console answers
        holding = on_hold = False
        self.stop_event.wait(self.rng.uniform(0, self.interval))  # stagger the agents
        while not self.stop_event.is_set():
            if self.total is not None and self.journal.launched() >= self.total:
                log.info("%s: %d workflows launched in all; launching no more", agent.name, self.total)
                return
            waiting = self.journal.waiting_count()
            # An outage is the point where agents keep starting work into a broken provider: more of it waits.
            if waiting > self.max_open + (OUTAGE_EXTRA_OPEN if self.provider.outage else 0):
                if not holding:
                    log.info(
                        "%s: %d checkpoints wait for a decision (max %d); holding new work",
                        agent.name,
                        waiting,
                        self.max_open,
                    )
                holding = True
                self.stop_event.wait(self.interval)
                continue
            holding = False
            try:
                with self.launching:
                    if self.total is not None and self.journal.launched() >= self.total:
                        continue
                    run = agent.create_run()
            except Unavailable as exc:
                outage = min(max(outage * 2, 2.0), 30.0)
                log.info(
                    "%s: console not reachable at %s yet (%s); retrying in %.0fs",
                    agent.name,
                    self.console_url,
                    exc,
                    outage,
                )
                self.stop_event.wait(outage)
                continue
            except ApiError as exc:
                if exc.code == "agent_on_hold":  # an operator holds it during an incident: ask again later
                    if not on_hold:
                        log.info("%s: on hold in the console: no new workflow until the hold is lifted", agent.name)
                    on_hold = True
                    self.stop_event.wait(self.interval * 2)
                    continue
                outage = 30.0
                hint = " (run `manage.py seed_demo` to refresh the demo tokens)" if exc.status == 401 else ""
                log.error("%s: the console refused a new workflow: %s%s", agent.name, exc, hint)
                self.stop_event.wait(outage)
                continue
            if on_hold:
                log.info("%s: the hold is lifted; starting new workflows again", agent.name)
                on_hold = False
            if outage:
                log.info("%s: console is reachable", agent.name)
                outage = 0.0
            if run is not None:
                self.spawn(agent.drive, f"run-{run.external_id}", run)
            self.stop_event.wait(self.interval * self.rng.uniform(0.5, 1.5))

    def housekeeping(self) -> None:
        """Pick paused and orphaned runs up again after a restart, and forget runs the console no longer knows."""
        next_full = 0.0
        while not self.stop_event.is_set():
            full = time.monotonic() >= next_full
            with contextlib.suppress(Unavailable):  # the console is not up yet; the launch loops say so
                self.reconcile(full=full)
                if full:
                    next_full = time.monotonic() + 30.0
            self.stop_event.wait(self.reconcile_interval)

    def reconcile(self, *, full: bool = True) -> None:
        """``full`` also asks the console about every paused run of an agent with a resume endpoint."""
        for row in self.journal.runs():
            agent = self.agents.get(row["agent"])
            if agent is None or row["external_id"] in agent.active or self.stop_event.is_set():
                continue
            if row["status"] == WAITING and (agent.polls or full):
                self.wait_again(agent, row)
            elif self.is_orphan(row):
                self.recover_orphan(agent, row)

    def is_orphan(self, row: JournalRun) -> bool:
        if row["status"] in ORPHAN_STATUSES:
            return True
        if row["status"] not in ("running", CREATING):
            return False
        stale = datetime.fromisoformat(row["updated_at"]) < datetime.now(UTC) - timedelta(seconds=STALE_SECONDS)
        return row["updated_at"] < self.started_at or stale

    def adopt(self, agent: DemoAgent, row: JournalRun) -> None:
        """Drive a paused run of a polling agent again in a thread of its own."""
        with agent.lock:  # marked before the thread starts, so the next reconcile leaves it alone
            agent.active.add(row["external_id"])
        self.spawn(agent.adopt, f"poll-{row['external_id']}", row)

    def recover_orphan(self, agent: DemoAgent, row: JournalRun) -> None:
        """A run whose driving thread is gone: the console says what became of it."""
        external_id = row["external_id"]
        try:
            if row["workflow_id"]:
                workflow = cast("WorkflowAnswer", agent.client.get_workflow(row["workflow_id"]))
            else:  # journaled, then the process died before the console answered: ask again (idempotent)
                workflow = agent.register(external_id)
        except ApiError as exc:
            self.refused(agent, external_id, exc)
            return
        workflow_id = str(workflow["id"])
        if workflow.get("status") in TERMINAL:
            # "failed" in the journal means "the console refused a report": keep the two apart.
            status = "finished_failed" if workflow["status"] == "failed" else workflow["status"]
            self.journal.set_status(external_id, status, workflow_id=workflow_id)
            return
        unresolved = [c for c in workflow.get("checkpoints") or [] if c["status"] != "resolved"]
        checkpoint: CheckpointAnswer | None
        if unresolved:
            checkpoint = cast("CheckpointAnswer", agent.client.get_checkpoint(unresolved[-1]["id"]))
        elif not agent.polls:
            # Left to the console: its silence sweep pauses the run and the decision comes to the resume
            # endpoint. Asking again meanwhile would count as a sign of life and hold the sweep off.
            log.info(
                "%s %s: orphaned by a restart; the console pauses it when it has been silent long enough",
                agent.name,
                external_id,
            )
            self.journal.set_status(external_id, ORPHANED, workflow_id=workflow_id)
            return
        else:
            # Nothing is ever delivered to a polling agent: it reports the run it lost track of, then polls.
            checkpoint = self.report_lost_track(agent, row, workflow)
            if checkpoint is None:
                return
        log.info(
            "%s %s: orphaned run paused at checkpoint %s; waiting for its decision",
            agent.name,
            external_id,
            checkpoint["id"],
        )
        self.journal.wait_again(
            external_id,
            workflow_id=workflow_id,
            checkpoint_id=str(checkpoint["id"]),
            resume_state=checkpoint.get("resume_state") or {},
        )
        if agent.polls and (again := self.journal.run(external_id)) is not None:
            self.adopt(agent, again)

    def refused(self, agent: DemoAgent, external_id: str, exc: ApiError) -> None:
        """The console would not say what became of a run: failed over elsewhere, or gone with a reset."""
        if exc.code == STOOD_DOWN:  # back after an outage, and a standby has the workflow now
            agent.stand_down(external_id, exc.message)
        elif exc.status in (401, 404):  # the console was reset: this run is gone with it
            self.journal.set_status(external_id, "gone")

    def report_lost_track(self, agent: DemoAgent, row: JournalRun, workflow: WorkflowAnswer) -> CheckpointAnswer | None:
        last = max((int(s["seq"]) for s in workflow.get("steps") or []), default=None)
        try:
            opened = agent.client.open_checkpoint(
                str(workflow["id"]),
                "other",
                at_seq=last,
                state=dict(row["state"]),
                detail=f"{agent.name} restarted and lost track of this run after step {last or 0}.",
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
            return None  # paused meanwhile (or finished): the next look finds out which
        return cast("CheckpointAnswer", opened)

    def wait_again(self, agent: DemoAgent, row: JournalRun) -> None:
        if agent.polls:
            # Not a status check first: for a polling agent, fetching the decision *is* its delivery.
            log.info("%s %s: waiting again for the decision on its checkpoint", agent.name, row["external_id"])
            self.adopt(agent, row)
            return
        try:
            checkpoint = cast("CheckpointAnswer", agent.client.get_checkpoint(row["checkpoint_id"]))
        except ApiError as exc:
            self.refused(agent, row["external_id"], exc)
            return
        if checkpoint.get("status") == "resolved":
            self.journal.set_status(row["external_id"], "resolved_elsewhere")
