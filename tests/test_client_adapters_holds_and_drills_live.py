"""Both adapters against a live console: a hold pauses the run cleanly at its next step report (and the
run resumes to its end, the refund once), and every drill fault happens in the agent's process (issues 23
and 26): a rate-limit storm, garbage at step k, a provider change, silence for N minutes (on a test clock),
a failover (the process dies in step k before reporting it; a standby running the same adapter carries the
run on). The examples' refund runs are the agents; the drills fault before the refund, as drills never move
real money (the standby's refund goes through its declared sandbox)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import langgraph_refund
import openai_agents_refund
import pytest
from recovery_client import DrillFailover, RecoveryClient
from refund_systems import Systems

from tests.adapter_live import PATIENCE, AgentThread, open_checkpoint, workflow
from tests.helpers import make_agent, make_user
from tests.stack import wait_until
from workflows.models import Agent, Decider, Drill, Hold, Step, Workflow
from workflows.tasks import pause_silent_workflows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def lg_run(client, external_id, systems):
    return langgraph_refund.run(client, external_id, systems, poll=0.05, timeout=60, say=lambda line: None)


def oa_run(client, external_id, systems):
    return asyncio.run(
        openai_agents_refund.run(client, external_id, systems, poll=0.05, timeout=60, say=lambda line: None)
    )


ADAPTERS = {"langgraph": lg_run, "openai-agents": oa_run}
# Where each run's steps fall: LangGraph 1 read_ticket (tool), 2 decide_refund (model), 3 issue_refund (money);
# the SDK 1 model, 2 read_ticket (tool), 3 model, 4 issue_refund (money).
MODEL_STEP = {"langgraph": 2, "openai-agents": 1}


def drilled(live_server, name, fault, at_seq, **client_options):
    agent, token = make_agent(name, owner=make_user("olivia"))
    client = RecoveryClient(live_server.url, token, retries=3, backoff=0.05, **client_options)
    client.advertise(["drill"])
    agent.refresh_from_db()
    drill = Drill(agent=agent, name=f"{fault} at {at_seq}", fault=fault, at_seq=at_seq, runs=1)
    drill.full_clean()
    drill.save()
    assert drill.start()
    return agent, client


def abort(checkpoint, thread):
    """The operator ends the drilled run (its refund would be refused anyway): the agent returns."""
    Decider(checkpoint).decide(by=make_user("alice"), action="abort", instructions="Drill over.")
    assert thread.outcome() is None


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_hold_pauses_the_run_at_its_next_step_report_and_it_resumes_to_the_end(live_server, adapter):
    agent, token = make_agent(f"{adapter}-bot", owner=make_user("olivia"))
    client = RecoveryClient(live_server.url, token, retries=3, backoff=0.05)
    hold = Hold.place(agent, by=make_user("alice"), new_workflows=Hold.NewWorkflows.PAUSE)
    systems = Systems()
    thread = AgentThread(lambda: ADAPTERS[adapter](client, "T-H", systems))
    thread.start()
    held = open_checkpoint("T-H", agent=thread)
    assert held.reason == "held" and held.at_seq == 2
    assert list(Step.objects.filter(workflow=held.workflow).values_list("seq", "status")) == [(1, "committed")]
    assert systems.refunds == {}, "nothing ran past the held step"
    assert hold.lift(by=make_user("alice"))
    Decider(held).decide(by=make_user("alice"), action="resume", money_confirmed=True)
    assert thread.outcome() is not None
    finished = workflow("T-H")
    assert finished.status == Workflow.Status.COMPLETED
    assert len(systems.refunds) == 1 and finished.steps.filter(name="issue_refund", status="committed").count() == 1


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Drill.Fault.RATE_LIMIT_STORM, "rate_limit"),
        (Drill.Fault.GARBAGE_AT_STEP, "untrusted_output"),
        (Drill.Fault.PROVIDER_CHANGE, "provider_change"),
    ],
)
def test_a_drill_fault_in_the_model_step_pauses_with_its_reason(live_server, adapter, fault, reason):
    at = MODEL_STEP[adapter]
    _agent, client = drilled(live_server, f"{adapter}-bot", fault, at)
    systems = Systems()
    thread = AgentThread(lambda: ADAPTERS[adapter](client, "T-D", systems))
    thread.start()
    checkpoint = open_checkpoint("T-D", agent=thread)
    assert (checkpoint.reason, checkpoint.at_seq) == (reason, at)
    step = Step.objects.get(workflow=checkpoint.workflow, seq=at)
    assert step.kind == "model" and step.status == Step.Status.FAILED
    assert not Step.objects.filter(workflow=checkpoint.workflow, seq__gt=at).exists()
    assert systems.refunds == {}
    abort(checkpoint, thread)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_go_silent_says_nothing_for_n_minutes_then_waits_at_the_watchdogs_checkpoint(live_server, adapter):
    slept = []

    def sleep(seconds):  # the console's view of the silence: a clock, not a wait
        run = Workflow.objects.get(external_id="T-S")
        Workflow.objects.filter(pk=run.pk).update(last_activity_at=run.last_activity_at - timedelta(seconds=seconds))
        slept.append((seconds, pause_silent_workflows()))

    agent, client = drilled(live_server, f"{adapter}-bot", Drill.Fault.GO_SILENT, 1, drill_sleep=sleep)
    Agent.objects.filter(pk=agent.pk).update(silence_seconds=300)
    systems = Systems()
    thread = AgentThread(lambda: ADAPTERS[adapter](client, "T-S", systems))
    thread.start()
    checkpoint = open_checkpoint("T-S", agent=thread)
    # The watchdog commits the checkpoint before the agent thread records what it returned: wait for the record.
    wait_until(lambda: slept, timeout=PATIENCE, what="the drill's sleep to record the watchdog's pause")
    assert slept == [(600.0, 1)]
    assert checkpoint.at_seq == 1 and "silent after step 1" in checkpoint.detail
    assert list(Step.objects.filter(workflow=checkpoint.workflow).values_list("seq", "status")) == [(1, "committed")]
    abort(checkpoint, thread)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_failover_drill_dies_in_step_k_before_reporting_it_and_the_standby_carries_the_run_on(live_server, adapter):
    agent, client = drilled(live_server, f"{adapter}-bot", Drill.Fault.FAILOVER, 2)
    systems = Systems()
    thread = AgentThread(lambda: ADAPTERS[adapter](client, "T-F", systems))
    thread.start()
    with pytest.raises(DrillFailover):
        thread.outcome()
    run = workflow("T-F")
    assert list(run.steps.values_list("seq", "status")) == [(1, "committed"), (2, "pending")]
    assert run.status == Workflow.Status.RUNNING and not run.checkpoints.exists()
    Workflow.objects.filter(pk=run.pk).update(last_activity_at=run.last_activity_at - timedelta(hours=1))
    assert pause_silent_workflows() == 1  # the watchdog catches it: a standby can be chosen from here
    assert systems.refunds == {}

    # The operator fails it over to a standby running the same adapter; the standby carries the run on from
    # the console's resume state, and the refund happens once. The run is still a drill: its refund goes
    # through only because the standby declares a sandbox (these Systems are one), as drills never move money.
    standby, standby_token = make_agent(f"{adapter}-standby", owner=agent.owner)
    standby_client = RecoveryClient(live_server.url, standby_token, retries=3, backoff=0.05)
    standby_client.advertise(["failover", "drill_sandbox"])
    checkpoint = run.checkpoints.get()
    Decider(checkpoint).decide(
        by=make_user("alice"),
        action="failover",
        standby=Agent.objects.get(pk=standby.pk),
        money_confirmed=True,
        instructions=f"{agent.name} is down.",
    )
    taking_over = AgentThread(lambda: ADAPTERS[adapter](standby_client, "T-F", systems))
    taking_over.start()
    assert taking_over.outcome() is not None
    run.refresh_from_db()
    assert run.status == Workflow.Status.COMPLETED and run.agent_id == standby.pk
    assert len(systems.refunds) == 1 and run.steps.filter(name="issue_refund", status="committed").count() == 1
