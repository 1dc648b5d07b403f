"""The OpenAI Agents SDK adapter carries out a drill's crash after step k in the agent's process (issue 26)."""

from __future__ import annotations

import asyncio

import pytest
from openai_agents_refund import run
from recovery_client import DrillCrash, RecoveryClient
from refund_systems import Systems

from tests.adapter_live import AgentThread
from tests.helpers import make_agent
from workflows.models import Drill, Workflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_drilled_agents_run_crashes_after_step_k_without_a_word_to_the_console(live_server):
    agent, token = make_agent("agents-bot")
    client = RecoveryClient(live_server.url, token, retries=3, backoff=0.05)
    client.advertise(["drill"])
    agent.refresh_from_db()
    drill = Drill(
        agent=agent, name="crash after the first model call", fault=Drill.Fault.CRASH_AFTER_STEP, at_seq=1, runs=1
    )
    drill.full_clean()
    drill.save()
    assert drill.start()
    systems = Systems(amount="42.00")
    thread = AgentThread(
        lambda: asyncio.run(run(client, "T-OA-D", systems, poll=0.05, timeout=60, say=lambda line: None))
    )
    thread.start()
    with pytest.raises(DrillCrash):
        thread.outcome()
    workflow = Workflow.objects.get(external_id="T-OA-D")
    assert workflow.drill == drill
    assert list(workflow.steps.values_list("seq", "status")) == [(1, "committed")]
    assert workflow.status == Workflow.Status.RUNNING and not workflow.checkpoints.exists()
    assert systems.refunds == {}
