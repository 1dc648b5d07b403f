"""What a demo agent runs: the plan of each kind of workflow, the faults that can strike its steps, and one
run as the agent holds it in memory (``agent.py`` drives them)."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .shapes import ResumeState
from .systems import Fault

if TYPE_CHECKING:
    from .shapes import Fork, ModelAnswer, RunState, Ticket


@dataclass(frozen=True)
class StepSpec:
    name: str
    kind: str  # "tool" | "model" | "effect"
    key: str = ""  # effects: the idempotency key is "<external_id>:<key>"
    promise: str = ""


# Every kind ends the same way: a note on the ticket, then the customer is told.
RECORD_AND_TELL = (
    StepSpec("write_ticket_note", "effect", key="note"),
    StepSpec("notify_customer", "effect", key="message"),
)
PLANS: dict[str, tuple[StepSpec, ...]] = {
    # The worked example.
    "refund": (
        StepSpec("read_ticket", "tool"),
        StepSpec("decide_refund", "model", promise="refund within 5 days"),
        StepSpec("issue_refund", "effect", key="refund"),
        *RECORD_AND_TELL,
    ),
    "billing_dispute": (
        StepSpec("read_invoice", "tool"),
        StepSpec("assess_dispute", "model", promise="corrected invoice within 2 business days"),
        StepSpec("issue_credit", "effect", key="credit"),
        *RECORD_AND_TELL,
    ),
    "ticket_triage": (
        StepSpec("read_ticket", "tool"),
        StepSpec("classify_ticket", "model", promise="a specialist replies within 24 hours"),
        *RECORD_AND_TELL,
    ),
}
TICKET_PREFIX = {"refund": "T", "billing_dispute": "INV", "ticket_triage": "Q"}
MONEY_STEPS = {"issue_refund", "issue_credit"}

# Faults the fleet injects, by step kind. For an effect, "model_timeout" and "rate_limit" hit the
# model call that plans the step (before it is reported: the worked example's crash between 3 and 4);
# the timeouts hit the external system itself, so the outcome is unknown to the agent.
FAULTS_BY_KIND: dict[str, tuple[str, ...]] = {
    "tool": ("garbage", "garbage", "tool_error", "rate_limit"),
    "model": ("model_timeout", "model_timeout", "rate_limit"),
    "effect": ("model_timeout", "rate_limit", "timeout_after_commit", "timeout_before_commit", "service_error"),
}
PROCESS_KILLED = "process_killed"  # forced only: see ProcessKilled
SYSTEM_FAULTS = {
    "garbage": Fault.GARBAGE,
    "tool_error": Fault.ERROR,
    "rate_limit": Fault.RATE_LIMIT,
    "service_error": Fault.ERROR,
    "timeout_after_commit": Fault.TIMEOUT_AFTER_COMMIT,
    "timeout_before_commit": Fault.TIMEOUT_BEFORE_COMMIT,
}


class ProviderBehaviour:
    """The model provider's switchable faults, shared by a fleet's agents (on the ledgers page): it "changed
    behaviour" (answers amounts in cents), or it is out (every model call fails: the incident demo)."""

    def __init__(self, changed: bool = False, *, outage: bool = False, outage_agent: str = "") -> None:
        self.changed = changed
        self.outage = outage
        self.outage_agent = outage_agent  # the one agent whose calls fail (its own API key throttled); "": all

    def out_for(self, agent: str) -> bool:
        """Whether this agent's model calls fail now: the outage is on, for every agent or for this one."""
        return self.outage and self.outage_agent in ("", agent)


TICKET_FIELDS = ("ticket", "customer", "email", "subject", "amount", "currency")


class FaultPlan:
    """Where faults strike: at random with ``rate`` per workflow, or forced once per step name (tests)."""

    def __init__(
        self, rate: float = 0.0, *, forced: dict[str, str] | None = None, rng: random.Random | None = None
    ) -> None:
        self.rate = rate
        self.forced = dict(forced or {})
        self.killing: dict[str, bool] = {}
        self.rng = rng or random.Random()
        self.lock = threading.Lock()

    def forced_kill(self, step_name: str) -> bool:
        """The ``process_killed`` fault, forced on this step: the process dies once the effect executed."""
        with self.lock:
            return self.killing.pop(step_name, False)

    def pick(self, spec: StepSpec, steps: int, *, factor: float = 1.0) -> str | None:
        with self.lock:
            if self.forced.get(spec.name) == PROCESS_KILLED:
                del self.forced[spec.name]
                self.killing[spec.name] = True
                return None  # the effect itself succeeds; the process dies right after
            if spec.name in self.forced:
                return self.forced.pop(spec.name)
            # Spread the per-workflow rate over its steps so longer plans are not punished more.
            per_step = 1 - (1 - min(self.rate * factor, 0.99)) ** (1 / max(steps, 1))
            if self.rng.random() < per_step:
                return self.rng.choice(FAULTS_BY_KIND[spec.kind])
        return None


class ProcessKilled(BaseException):  # it is not an error the agent handles: nothing catches it
    """The forced fault ``process_killed``: the agent's process dies right after the external system executed
    an effect, before the agent could report the outcome (as a SIGKILL, an OOM kill or a lost host would).

    A BaseException, so no handler of the agent reports anything more or touches its journal: the console
    holds the effect as pending (its outcome unknown) and the run goes silent. Only ever forced (the failover
    drill, tests); the chaos run kills real processes instead."""


class Paused(Exception):
    """A fault the agent cannot get past on its own: it opens a checkpoint."""

    def __init__(self, reason: str, detail: str, at_seq: int | None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.at_seq = reason, detail, at_seq


@dataclass
class Run:
    """One workflow as the agent holds it in memory; ``state()`` is what a checkpoint carries."""

    kind: str
    external_id: str
    workflow_id: str
    ticket_id: str
    remaining: list[str]
    ticket: Ticket | None = None
    decision: ModelAnswer | None = None
    refs: dict[str, str] = field(default_factory=dict)
    committed: set[str] = field(default_factory=set)  # idempotency keys known to be done
    failed: dict[str, int] = field(default_factory=dict)  # idempotency key -> seq of a failed effect to retry
    in_flight: dict[str, int] = field(default_factory=dict)  # effect keys the console holds as pending -> seq
    next_seq: int = 1
    checkpoint_id: str = ""
    resume_state: ResumeState = field(default_factory=lambda: ResumeState())
    fork: Fork | None = None  # a fork: where it came from, and the (edited) input of the step it restarts at
    held: str = ""  # the console put the agent on hold: the ``held`` checkpoint it paused this run at

    def state(self) -> RunState:
        return {
            "kind": self.kind,
            "remaining": list(self.remaining),
            "ticket_id": self.ticket_id,
            "ticket": self.ticket,
            "decision": self.decision,
            "refs": dict(self.refs),
        }

    def at_stake(self) -> tuple[str | None, str | None]:
        """The amount and currency the money step moves: the model's decision, else the ticket's (None: unread)."""
        decision: ModelAnswer = self.decision or {}
        ticket = self.ticket
        return (
            decision.get("amount", ticket["amount"] if ticket else None),
            decision.get("currency", ticket["currency"] if ticket else None),
        )

    def take_seq(self) -> int:
        self.next_seq += 1
        return self.next_seq - 1

    def key(self, spec: StepSpec) -> str:
        return f"{self.external_id}:{spec.key}"
