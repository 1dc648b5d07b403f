"""The OpenAI Agents SDK adapter against a live console: a refund waits for approval, then the run crashes;
each stop is a checkpoint visible through the API; the operator's decisions carry the run to its end from
its saved state, the refund issued once."""

from __future__ import annotations

import asyncio

import pytest
from openai_agents_refund import run
from recovery_client import RecoveryClient
from refund_systems import Systems

from tests.adapter_live import AgentThread, open_checkpoint, workflow
from tests.helpers import make_agent
from workflows.models import Decider

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_an_approval_and_a_crash_mid_run_resume_from_the_console_without_repeating_effects(live_server, alice):
    _, token = make_agent("agents-bot")
    client = RecoveryClient(live_server.url, token, retries=3, backoff=0.05)
    systems = Systems(amount="420.00")
    agent = AgentThread(
        lambda: asyncio.run(
            run(client, "T-OA-1", systems, crash_after_refund=1, poll=0.05, timeout=60, say=lambda line: None)
        )
    )
    agent.start()

    approval = open_checkpoint("T-OA-1", agent=agent)
    seen = client.get_checkpoint(str(approval.pk))
    assert (seen["reason"], seen["detail"]) == (
        "manual",
        'Approve issue_refund({"ticket_id": "T-OA-1", "amount": "420.00"})?',
    )
    assert seen["resume_state"]["pending"]["name"] == "approve issue_refund"
    assert "run_state" in seen["resume_state"]["state"]  # the SDK's saved RunState rides with the checkpoint
    refund_ahead = seen["resume_state"]["plan"][0]
    assert (refund_ahead["name"], refund_ahead["moves_money"]) == ("issue_refund", True)  # money ahead
    assert systems.refunds == {}
    Decider(approval).decide(by=alice, action="resume", instructions="Approved.", money_confirmed=True)

    crash = open_checkpoint("T-OA-1", after=approval.pk, agent=agent)
    seen = client.get_checkpoint(str(crash.pk))
    assert seen["reason"] == "model_timeout"
    assert [s["name"] for s in seen["resume_state"]["committed"] if s["kind"] == "effect"] == ["issue_refund"]
    Decider(crash).decide(by=alice, action="resume", money_confirmed=True)

    assert agent.outcome() == "Refunded 420.00 EUR (R-88); the customer is told."
    assert systems.calls == {"read_ticket": 1, "refund": 1, "write_note": 1, "message": 1}
    finished = workflow("T-OA-1")
    assert finished.status == "completed"
    assert finished.steps.filter(name="issue_refund", status="committed").count() == 1
    assert finished.checkpoints.count() == 2
