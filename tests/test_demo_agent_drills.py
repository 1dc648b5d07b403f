"""The demo agents carry out drills for real (crash after step k; fail over to the standby; a rate-limit
storm they report themselves), journal their state at the fault, and the drill report scores what happened:
real agent runs over HTTP against live_server."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.test_demo_resume import deliver
from tests.test_fork_and_failover import able
from workflows import drill_report, tasks
from workflows.models import Agent, Checkpoint, Decider, Drill, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def drilled_run(fleet, owner, fault):
    agent = fleet.agent(owner=owner)
    able(agent.name, "drill", "drill_sandbox", "failover")
    drill = Drill.objects.create(
        agent=Agent.objects.get(name=agent.name),
        name=f"{fault} after the refund",
        kind="refund",
        fault=fault,
        at_seq=3,
        runs=1,
    )
    assert drill.start()
    run, outcome = agent.start()
    assert outcome == "crashed (drill)"
    workflow = Workflow.objects.get(agent__name=agent.name, external_id=run.external_id)
    assert workflow.drill == drill and workflow.status == Workflow.Status.RUNNING  # silent, as a killed process
    assert tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=1)) == 1
    return agent, drill, workflow, Checkpoint.objects.get(workflow=workflow)


def test_a_crash_after_the_refund_is_caught_resumed_once_and_scored_passed_with_its_state_intact(
    fleet, olivia, operator
):
    agent, drill, workflow, checkpoint = drilled_run(fleet, olivia, Drill.Fault.CRASH_AFTER_STEP)
    assert [s.seq for s in workflow.steps.order_by("seq")] == [1, 2, 3]  # it stopped after step k = 3
    workflow.refresh_from_db()
    assert workflow.drill_journal == {
        "committed": [f"{workflow.external_id}:refund"],
        "pending": None,
        "promises": ["refund within 5 days"],
    }
    assert checkpoint.opened_by_console

    assert checkpoint.claim(by=operator)
    deliver(fleet, Decider(checkpoint).decide(by=operator, action="resume", money_confirmed=True))

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}  # nothing repeated
    report = drill_report.score(drill)
    assert report.verdict == drill_report.PASSED, report.reasons
    assert report.runs[0].state_intact is True


def test_a_failover_drill_whose_standby_is_down_reads_failed_with_the_reason(fleet, olivia, operator, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    _agent, drill, workflow, checkpoint = drilled_run(fleet, olivia, Drill.Fault.FAILOVER)
    Agent.register("dead-standby", resume_url="http://127.0.0.1:9/agents/dead-standby/resume")
    able("dead-standby", "failover")

    assert checkpoint.claim(by=operator)
    decision = Decider(checkpoint).decide(
        by=operator, action="failover", money_confirmed=True, standby=Agent.objects.get(name="dead-standby")
    )
    assert tasks.deliver_decision(decision.pk) == "retry"

    report = drill_report.score(drill)
    assert report.verdict == drill_report.FAILED
    assert any(
        "failover to dead-standby" in reason and "never took the run over" in reason for reason in report.reasons
    ), report.reasons


def test_a_failover_drill_completes_on_a_live_standby_and_passes(fleet, olivia, operator):
    _agent, drill, workflow, checkpoint = drilled_run(fleet, olivia, Drill.Fault.FAILOVER)
    standby = fleet.agent("standby-bot", owner=olivia)
    able(standby.name, "failover")

    assert checkpoint.claim(by=operator)
    decision = Decider(checkpoint).decide(
        by=operator, action="failover", money_confirmed=True, standby=Agent.objects.get(name="standby-bot")
    )
    deliver(fleet, decision)

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED and workflow.agent.name == "standby-bot"
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    report = drill_report.score(drill)
    assert report.verdict == drill_report.PASSED, report.reasons


def test_a_rate_limit_storm_reaches_the_queue_at_step_k_without_the_silence_sweep_and_resumes_once(
    fleet, olivia, operator
):
    """The demo's seeded drill: the run meets the storm at step k and opens its own checkpoint at once (the
    newcomer sees it in the queue within seconds, not after the 5-minute silence limit); the resumed run
    carries on without a second storm and without repeating anything."""
    agent = fleet.agent(owner=olivia)
    able(agent.name, "drill", "drill_sandbox")
    drill = Drill.objects.create(
        agent=Agent.objects.get(name=agent.name),
        name="storm from the decision",
        kind="refund",
        fault=Drill.Fault.RATE_LIMIT_STORM,
        at_seq=2,
        runs=1,
    )
    assert drill.start()

    run, outcome = agent.start()

    assert outcome == "paused"
    workflow = Workflow.objects.get(agent__name=agent.name, external_id=run.external_id)
    assert workflow.drill == drill and workflow.status == Workflow.Status.PAUSED  # no sweep ran
    checkpoint = Checkpoint.objects.get(workflow=workflow)
    assert checkpoint.reason == "rate_limit" and not checkpoint.opened_by_console
    assert [(s.seq, s.name, s.status) for s in workflow.steps.order_by("seq")] == [
        (1, "read_ticket", "committed"),
        (2, "decide_refund", "failed"),
    ]

    assert checkpoint.claim(by=operator)
    deliver(fleet, Decider(checkpoint).decide(by=operator, action="resume", money_confirmed=True))

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED, [(c.reason, c.detail) for c in workflow.checkpoints.all()]
    assert workflow.checkpoints.count() == 1  # the storm was carried out once
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    report = drill_report.score(drill)
    assert report.verdict == drill_report.PASSED, report.reasons
