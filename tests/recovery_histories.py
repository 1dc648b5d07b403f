"""Recovery histories built the way they happen: an agent reporting over the real API,
operators claiming and deciding, the agent fetching the decision and carrying on.

Nothing here writes a figure or a status into a table: every row comes from an
API call, a domain transition (claim, decide) or the silence sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from tests.apitools import AgentApi, api_agent
from tests.helpers import make_runbook
from workflows import tasks
from workflows.models import Checkpoint, Decider, Workflow


def notify(seq: int, key: str) -> dict:
    return {
        "seq": seq,
        "name": "notify_customer",
        "kind": "effect",
        "status": "committed",
        "input": {"text": "refund issued"},
        "idempotency_key": key,
        "external_ref": f"M-{seq}",
        "promise": "customer told: refund within 5 days",
    }


def refund(ext: str, status: str = "committed") -> dict:
    return {
        "seq": 3,
        "name": "issue_refund",
        "kind": "effect",
        "status": status,
        "input": {"amount": "42.00", "currency": "EUR"},
        "idempotency_key": f"{ext}:refund",
        "external_ref": "R-88" if status == "committed" else None,
    }


@dataclass
class Fleet:
    """One polled agent (no resume endpoint) and the operators who work its checkpoints."""

    api: AgentApi
    operator: Any

    def start(
        self,
        ext: str,
        *,
        kind: str = "refund",
        owner: str | None = None,
        refund_status: str = "committed",
        promise: bool = True,
    ) -> str:
        wf = self.api.create_workflow(ext, kind=kind, owner=owner)["id"]
        self.api.report(wf, 1, "read_ticket", "tool", output={"ticket": ext}, verified=True)
        self.api.report(
            wf,
            2,
            "decide_refund",
            "model",
            output={"decision": "refund"},
            promise="refund within 5 days" if promise else None,
        )
        self.api.report(wf, 3, **{k: v for k, v in refund(ext, refund_status).items() if k != "seq"})
        return wf

    def pause(self, wf: str, reason: str = "model_timeout") -> Checkpoint:
        body = self.api.open_checkpoint(wf, reason=reason, at_seq=4)
        return Checkpoint.objects.get(pk=body["id"])

    def decide(self, checkpoint: Checkpoint, action: str = "resume", **kwargs: Any) -> None:
        """An operator claims and decides; the agent polls and so receives the decision."""
        assert checkpoint.claim(by=self.operator)
        Decider(checkpoint).decide(by=self.operator, action=action, money_confirmed=True, **kwargs)
        assert self.api.checkpoint(str(checkpoint.pk))["decision"]["state"] == "succeeded"

    def complete(self, wf: str, *, from_seq: int = 4, message: bool = True) -> None:
        ext = self.api.workflow(wf)["external_id"]
        self.api.report(
            wf, from_seq, "write_ticket_note", "effect", idempotency_key=f"{ext}:note", external_ref=f"N-{from_seq}"
        )
        if message:
            self.api.report(wf, **notify(from_seq + 1, f"{ext}:message"))
        self.api.finish(wf, "completed")


def build_history(operator: Any, other: Any, owner: Any) -> dict[str, str]:
    """Every case the figures must tell apart; answers {case: external_id}."""
    fleet = Fleet(api_agent("support-bot"), operator)
    cases = {}
    # What an admin configured: a runbook for refunds whose model timed out, with a 15-minute target.
    make_runbook(
        slug="refund-model-timeout",
        title="Refund: model timeout",
        workflow_kind="refund",
        reason="model_timeout",
        sla_target_minutes=15,
        sla_warning_minutes=5,
    )

    # Ran straight through: a launch, not a degradation.
    wf = fleet.start("straight")
    fleet.complete(wf)
    cases["straight"] = "straight"

    # The worked example: paused after the refund, resumed, completed with each effect once.
    wf = fleet.start("clean", owner=owner.username)
    fleet.decide(fleet.pause(wf))
    fleet.complete(wf)
    cases["clean"] = "clean"

    # Resumed, then the agent reports the refund again under its key: refused (409), recorded.
    wf = fleet.start("duplicate")
    fleet.decide(fleet.pause(wf, "tool_error"))
    again = {**refund("duplicate"), "seq": 4}
    fleet.api.report(wf, expect_status=409, **again)
    fleet.complete(wf, from_seq=5)
    cases["duplicate"] = "duplicate"

    # The refund's outcome was unknown; the operator confirmed it did not happen; the agent never
    # executed it and completed anyway: a lost effect.
    wf = fleet.start("lost-refund", refund_status="pending")
    fleet.decide(fleet.pause(wf), confirmations={"lost-refund:refund": "did_not_happen"})
    fleet.complete(wf)
    cases["lost_refund"] = "lost-refund"

    # Promised "refund within 5 days", resumed, completed without ever telling the customer.
    wf = fleet.start("lost-promise")
    fleet.decide(fleet.pause(wf))
    fleet.complete(wf, message=False)
    cases["lost_promise"] = "lost-promise"

    # Reported failed while running: no checkpoint, a blank state.
    wf = fleet.start("blank")
    fleet.api.finish(wf, "failed", summary="gave up")
    cases["blank"] = "blank"

    # Went silent: the console's sweep paused it; the operator aborted it.
    wf = fleet.start("silent")
    assert tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=2)) == 1
    fleet.decide(Workflow.objects.get(pk=wf).checkpoints.get(), "abort", instructions="customer withdrew")
    cases["silent"] = "silent"

    # Handed off from its owner to another operator, who finished it.
    wf = fleet.start("handoff", owner=owner.username)
    fleet.decide(fleet.pause(wf, "provider_change"), "handoff", new_owner=other, instructions="take it")
    assert Workflow.objects.get(pk=wf).finish(Workflow.Status.COMPLETED, "refunded by hand", actor=other)
    cases["handoff"] = "handoff"

    # Paused and still waiting for an operator: degraded, not settled.
    wf = fleet.start("waiting")
    fleet.pause(wf, "rate_limit")
    cases["waiting"] = "waiting"
    return cases
