"""A few weeks of recorded history for the demo, made through the domain's own methods (issue 28 item 16).

A fresh ``make run`` had nothing for the TPM pages to show: no trend, no breach to review, no
readiness verdict worth reading, no arrival rate for staffing. ``seed`` replays three weeks of a
support desk's days under ``time_machine`` (the process clock the models read) and passes the same
instant to the methods that otherwise read the database's clock (``workflows.clock``): the demo agents
start workflows and report steps, some degrade into checkpoints, the SLA sweep records warnings,
breaches and escalations at their deadlines, operators claim and decide (a second operator approves
what the four-eyes runbook holds), the decision reaches the agent, the agent finishes, and a TPM
records why most breaches happened. Nothing is written beside the domain: every row and figure is
what those calls record. Seeded, so two fresh installs show the same history; run once (its workflows'
external ids start with ``HIST-``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import time_machine
from django.db import transaction
from django.utils import timezone

from workflows import rollups
from workflows.models import (
    Agent,
    BreachReason,
    Checkpoint,
    Decider,
    Decision,
    Notification,
    Reason,
    Workflow,
)
from workflows.tasks import sweep_clocks

if TYPE_CHECKING:
    from time_machine import Traveller

    from workflows.models.base import Operator
    from workflows.shapes import Json, JsonObject, PlanStep

PREFIX = "HIST-"
SEED = 28
DAYS = 21
KIND_STEPS = {  # what each demo agent's runs look like: (name, kind, moves money)
    "refund": (
        ("read_ticket", "tool", False),
        ("decide_refund", "model", False),
        ("issue_refund", "effect", True),
        ("write_ticket_note", "effect", False),
        ("notify_customer", "effect", False),
    ),
    "billing_dispute": (
        ("read_invoice", "tool", False),
        ("decide_credit", "model", False),
        ("issue_credit", "effect", True),
        ("write_ticket_note", "effect", False),
        ("notify_customer", "effect", False),
    ),
    "ticket_triage": (
        ("read_ticket", "tool", False),
        ("classify", "model", False),
        ("route_ticket", "effect", False),
        ("notify_customer", "effect", False),
    ),
}
REASONS = (
    Reason.MODEL_TIMEOUT,
    Reason.TOOL_ERROR,
    Reason.TOOL_ERROR,
    Reason.RATE_LIMIT,
    Reason.PROVIDER_CHANGE,
    Reason.UNTRUSTED_OUTPUT,
)


def already_seeded() -> bool:
    return Workflow.objects.filter(external_id__startswith=PREFIX).exists()


@dataclass
class Desk:
    """Who works the history: the demo's operator decides, the admin approves four-eyes proposals (and
    takes what escalates), the TPM records breach reasons."""

    operator: Operator
    second: Operator
    tpm: Operator
    agents: list[Agent]
    rng: random.Random
    clock: Traveller

    def at(self, when: datetime) -> datetime:
        self.clock.move_to(when)
        return when

    def report(self, workflow: Workflow, agent: Agent, steps: list[tuple[int, tuple[str, str, bool]]]) -> None:
        reports: list[Mapping[str, Json]] = []
        for seq, (name, kind, money) in steps:
            report: JsonObject = {
                "seq": seq,
                "name": name,
                "kind": kind,
                "status": "committed",
                "input": {"ticket": workflow.external_id},
                "output": {"ok": True},
                "verified": kind == "tool",
            }
            if kind == "effect":
                report["idempotency_key"] = f"{workflow.external_id}:{name}"
                report["external_ref"] = f"R-{workflow.pk}-{seq}"
                if money:
                    report["input"] = {"amount": f"{self.rng.randint(12, 240)}.00", "currency": "EUR"}
            if name == "decide_refund":
                report["promise"] = "refund within 5 days"
            reports.append(report)
        workflow.record_steps(reports, actor=agent)

    def run(self, agent: Agent, n: int, start: datetime) -> None:
        kind = agent.kinds[0] if agent.kinds else "refund"
        plan = KIND_STEPS.get(kind, KIND_STEPS["refund"])
        now = self.at(start)
        external_id = f"{PREFIX}{start:%Y%m%d}-{n}"
        workflow, _ = Workflow.objects.start(
            agent, external_id=external_id, kind=kind, title=f"{kind.replace('_', ' ').capitalize()} for {external_id}"
        )
        stop = self.rng.randint(2, len(plan) - 1)
        self.report(workflow, agent, list(enumerate(plan[:stop], start=1)))
        if self.rng.random() < 0.45:  # ran straight through
            self.at(now + timedelta(minutes=2))
            self.report(workflow, agent, list(enumerate(plan, start=1))[stop:])
            workflow.finish(Workflow.Status.COMPLETED, "done", actor=agent)
            return
        if self.rng.random() < 0.04:  # gave up without a checkpoint: the blank state readiness warns of
            workflow.finish(Workflow.Status.FAILED, "the model gave up", actor=agent)
            return
        self.degrade(workflow, agent, plan, stop, now + timedelta(minutes=1))

    def degrade(
        self, workflow: Workflow, agent: Agent, plan: tuple[tuple[str, str, bool], ...], stop: int, now: datetime
    ) -> None:
        self.at(now)
        reason = self.rng.choice(REASONS)
        remaining: list[PlanStep] = [
            {"name": name, "kind": kind, "amount": None, "currency": None, "moves_money": False}
            for name, kind, _ in plan[stop:]
        ]
        checkpoint = Checkpoint.open_for(
            workflow,
            reason=reason,
            detail=f"{reason.label} at step {stop + 1}",
            at_seq=stop + 1,
            state={"remaining": [r["name"] for r in remaining]},
            plan=remaining,
            now=now,
        )
        late = self.rng.random() < 0.2
        due = checkpoint.due_at or now + timedelta(minutes=30)
        decide_at = (
            due + timedelta(minutes=self.rng.randint(5, 50)) if late else now + (due - now) * self.rng.uniform(0.1, 0.8)
        )
        if late:  # the clock ran out first: the sweep records it at its deadline, escalations fire
            self.at(decide_at)
            sweep_clocks(decide_at)
        else:
            self.at(now + (decide_at - now) / 3)
        checkpoint.refresh_from_db()
        if checkpoint.status == Checkpoint.Status.OPEN:
            checkpoint.claim(by=self.operator)
        checkpoint.refresh_from_db()
        by = checkpoint.assignee or self.operator
        self.at(max(decide_at, timezone.now() + timedelta(minutes=1)))
        version = checkpoint.runbook_version
        allowed = [a for a in ("resume", "handoff", "abort") if version is None or version.allows(a)] or ["resume"]
        action = self.rng.choices(["resume", "handoff", "abort"], weights=[80, 11, 9])[0]
        action = action if action in allowed else allowed[0]
        extra = {"handoff_to": "Finance desk"} if action == "handoff" else {}
        decision = Decider(checkpoint).decide(
            by=by,
            action=action,
            money_confirmed=True,
            instructions="Carry on from the recorded state."
            if action != "abort"
            else "The customer withdrew the request.",
            **extra,
        )
        if decision.status == Decision.Status.PROPOSED:
            self.at(timezone.now() + timedelta(minutes=self.rng.randint(2, 9)))
            decision.approve(by=self.second if by != self.second else self.operator)
            decision.refresh_from_db()
        self.deliver(decision, agent)
        if action == "resume":
            self.at(timezone.now() + timedelta(minutes=2))
            self.report(workflow, agent, list(enumerate(plan, start=1))[stop:])
            workflow.refresh_from_db()
            workflow.finish(Workflow.Status.COMPLETED, "done after the resume", actor=agent)
        elif action == "handoff":
            workflow.refresh_from_db()
            workflow.finish(Workflow.Status.COMPLETED, "finished by the finance desk", actor=self.operator)
        checkpoint.refresh_from_db()
        if checkpoint.breached_at and self.rng.random() < 0.75:
            self.at(timezone.now() + timedelta(hours=self.rng.randint(2, 20)))
            reasons = list(BreachReason.objects.filter(is_active=True))
            if reasons:
                checkpoint.explain_breach(reason=self.rng.choice(reasons), note="", by=self.tpm)

    def deliver(self, decision: Decision, agent: Agent) -> None:
        """What the worker (a resume endpoint) or the polling agent's next fetch does, a few seconds later."""
        self.at(timezone.now() + timedelta(seconds=self.rng.randint(3, 40)))
        if decision.awaits_fetch:
            decision.mark_fetched()
        elif decision.status == Decision.Status.QUEUED:
            decision.start_attempt()
            decision.mark_succeeded(now=timezone.now())


def seed(
    *, operator: Operator, second: Operator, tpm: Operator, agents: list[Agent], days: int = DAYS, seed: int = SEED
) -> int:
    """Record ``days`` days of history before today, once; answers how many workflows were recorded."""
    if days <= 0 or already_seeded() or not agents:
        return 0
    rng = random.Random(seed)
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    count = 0
    with time_machine.travel(today - timedelta(days=days), tick=False) as clock, transaction.atomic():
        desk = Desk(operator, second, tpm, agents, rng, clock)
        for back in range(days, 0, -1):
            day = today - timedelta(days=back)
            weekday = day.weekday() < 5
            starts = sorted(
                day + timedelta(hours=rng.uniform(8, 18))
                for _ in range(rng.randint(2, 5) if weekday else rng.randint(0, 1))
            )
            for n, start in enumerate(starts, start=1):
                desk.run(rng.choice(agents), n, start)
                count += 1
        # What people read back then is read: the history does not fill today's bell.
        for note in Notification.objects.filter(read_at__isnull=True, at__lt=today):
            note.mark_read()
    rollups.rebuild()  # the dashboard and readiness read rolled days; beat then keeps today's rolled
    return count
