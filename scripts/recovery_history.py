"""Four weeks of recovery history for the TPM pages' screenshots, made the way it happens.

Simulated agents report workflows over the real agent API (Django's test client, in process);
some are interrupted and open checkpoints, operators claim and decide them after realistic
delays, the agents fetch the decision and carry on. A clock moved with time-machine spreads
the work over the past 28 days (office hours busier than nights). Nothing writes a figure or a
status into a table. Seeded: the same seed draws the same history.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import time_machine
from django.utils import timezone

from tests.apitools import AgentApi
from tests.helpers import make_agent, make_runbook
from workflows import tasks
from workflows.models import Checkpoint, Decider

KINDS = {  # agent name -> (kind, the effect that moves money, its promise)
    "refunds-bot": ("refund", "issue_refund", "refund within 5 days"),
    "disputes-bot": ("billing_dispute", "issue_credit", "corrected invoice within 2 business days"),
    "triage-bot": ("ticket_triage", None, "a specialist replies within 24 hours"),
}
REASONS = ("model_timeout", "tool_error", "rate_limit", "untrusted_output", "provider_change")


def build(operators: list[Any], *, seed: int = 2026, days: int = 28, per_day: int = 14) -> int:
    """Make the history; returns how many workflows were launched."""
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the in-process agent API client
    rng = random.Random(seed)
    apis = {name: AgentApi(*make_agent(name, owner=operators[0])) for name in KINDS}
    make_runbook(
        slug="refund-timeouts",
        title="Refund: model or tool failed",
        workflow_kind="refund",
        sla_target_minutes=15,
        sla_warning_minutes=5,
    )
    make_runbook(
        slug="billing",
        title="Billing disputes",
        workflow_kind="billing_dispute",
        sla_target_minutes=60,
        sla_warning_minutes=15,
    )
    now = timezone.now()
    launched = 0
    for day in range(days, 0, -1):
        base = (now - timedelta(days=day)).replace(hour=0, minute=0, second=0, microsecond=0)
        busy = 0.5 if base.weekday() >= 5 else 1.0
        for _ in range(int(per_day * busy * rng.uniform(0.6, 1.4))):
            hour = rng.choices(range(24), weights=[1] * 7 + [6] * 11 + [2] * 6)[0]
            at = base + timedelta(hours=hour, minutes=rng.randrange(60))
            name = rng.choice(list(KINDS))
            launched += 1
            _one(rng, apis[name], name, f"{KINDS[name][0][:3].upper()}-{launched:05d}", at, operators)
    return launched


def _one(rng: random.Random, api: AgentApi, name: str, ext: str, at: datetime, operators: list[Any]) -> None:
    kind, money, promise = KINDS[name]
    with time_machine.travel(at, tick=False) as clock:

        def later(minutes: float) -> None:
            clock.shift(timedelta(minutes=minutes))

        wf = api.create_workflow(ext, kind=kind, title=f"{kind.replace('_', ' ').capitalize()} for {ext}")["id"]
        api.report(wf, 1, "read_ticket", "tool", output={"ticket": ext}, verified=rng.random() < 0.9)
        api.report(wf, 2, "decide", "model", output={"decision": "go"}, promise=promise)
        seq, fate = 3, rng.random()
        if money:
            unknown = fate < 0.08
            api.report(
                wf,
                seq,
                money,
                "effect",
                "pending" if unknown else "committed",
                input={"amount": "42.00"},
                idempotency_key=f"{ext}:{money}",
                external_ref=None if unknown else f"R-{ext}",
            )
            seq += 1
        if fate < 0.03:
            api.finish(wf, "failed", summary="gave up")  # a blank state
            return
        if fate < 0.45:
            later(rng.uniform(0.5, 5))
            silent = fate > 0.40
            if silent:  # the agent crashed; the console's sweep pauses it
                tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=1))
                later(60)
                checkpoint = Checkpoint.objects.get(workflow_id=wf, status="open")
            else:
                body = api.open_checkpoint(wf, reason=rng.choice(REASONS), at_seq=seq)
                checkpoint = Checkpoint.objects.get(pk=body["id"])
            operator = rng.choice(operators)
            later(rng.expovariate(1 / (4 if 8 <= at.hour < 18 else 25)))
            checkpoint.claim(by=operator)
            later(rng.expovariate(1 / 6))
            action = rng.choices(("resume", "handoff", "abort"), weights=(85, 10, 5))[0]
            confirmations = {e["idempotency_key"]: "happened" for e in checkpoint.unknown_effects}
            other = rng.choice([o for o in operators if o != operator] or operators)
            Decider(checkpoint).decide(
                by=operator,
                action=action,
                confirmations=confirmations,
                money_confirmed=True,
                confirmation_refs={key: f"R-{ext}" for key in confirmations},
                new_owner=other if action == "handoff" else None,
                instructions="carry on",
            )
            later(0.2)
            api.checkpoint(str(checkpoint.pk))  # the agent polls and receives the decision
            if action != "resume":
                return
            if confirmations:
                api.report(
                    wf,
                    3,
                    money,
                    "effect",
                    "committed",
                    input={"amount": "42.00"},
                    idempotency_key=f"{ext}:{money}",
                    external_ref=f"R-{ext}",
                    expect_status=200,
                )
            if rng.random() < 0.04 and money:  # a confused agent reports its refund again: refused, recorded
                api.report(wf, seq, money, "effect", "committed", idempotency_key=f"{ext}:{money}", expect_status=409)
        later(rng.uniform(0.2, 2))
        api.report(wf, seq, "write_ticket_note", "effect", idempotency_key=f"{ext}:note", external_ref=f"N-{ext}")
        if rng.random() < 0.97:
            api.report(
                wf,
                seq + 1,
                "notify_customer",
                "effect",
                idempotency_key=f"{ext}:message",
                external_ref=f"M-{ext}" if rng.random() < 0.9 else None,
                promise=f"customer told: {promise}",
            )
        api.finish(wf, "completed")
