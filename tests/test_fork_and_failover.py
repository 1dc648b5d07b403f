"""Fork from step k (a new linked workflow; steps before k never run again) and fail over to a standby agent
(it finishes the workflow with no duplicate effect; the original stands down). Real demo agents over HTTP."""

import json

import pytest
from django.urls import reverse

from tests.helpers import make_runbook, make_user
from tests.test_demo_resume import deliver, paused_run
from workflows import tasks
from workflows.models import Agent, Decider, Decision, Event, fork_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def able(name, *capabilities, kinds=("refund",)):
    Agent.objects.filter(name=name).update(capabilities=list(capabilities), kinds=list(kinds))


def finished_run(fleet, owner):
    """The worked example, paused between the refund and the note, then resumed to completion."""
    agent, workflow, checkpoint = paused_run(fleet, owner, {"write_ticket_note": "model_timeout"})
    deliver(fleet, Decider(checkpoint).decide(by=make_user("bob"), action="resume", money_confirmed=True))
    workflow.refresh_from_db()
    assert workflow.status == "completed"
    return agent, workflow


def test_a_fork_from_step_4_copies_steps_1_to_3_and_never_runs_them_again(fleet, olivia, operator):
    agent, original = finished_run(fleet, olivia)
    able(agent.name, "fork")
    executed_before = fleet.executed(original.external_id)

    decision = fork_workflow(
        original, from_seq=4, by=operator, reason="The note went to the wrong ticket.", money_confirmed=True
    )
    fork = decision.checkpoint.workflow
    deliver(fleet, decision)

    fork.refresh_from_db()
    assert fork.forked_from == original and fork.forked_at_seq == 4 and fork.status == "completed"
    assert list(original.forks.all()) == [fork]
    steps = list(fork.steps.order_by("seq").values_list("seq", "name", "status"))
    assert [name for _s, name, _st in steps] == [
        "read_ticket",
        "decide_refund",
        "issue_refund",
        "write_ticket_note",
        "notify_customer",
    ]
    copied = {s.seq: s for s in fork.steps.filter(seq__lt=4)}
    assert copied[3].external_ref == original.steps.get(seq=3).external_ref  # the same refund, not a new one
    # The agent reported nothing for the copied steps: every step event of the fork is for step 4 or later.
    reported = Event.objects.filter(workflow=fork, verb__startswith="step_", actor_agent__isnull=False)
    assert reported.exists() and all(e.data["seq"] >= 4 for e in reported)
    assert fleet.executed(original.external_id) == executed_before == {"refund": 1, "note": 1, "message": 1}
    assert fleet.executed(fork.external_id) == {"refund": 0, "note": 1, "message": 1}
    assert fleet.ledgers.duplicates() == {}


def test_a_fork_goes_through_four_eyes_like_any_money_resume(fleet, olivia, operator):
    agent, original = finished_run(fleet, olivia)
    able(agent.name, "fork")
    make_runbook(workflow_kind="refund", requires_four_eyes=True)

    Agent.objects.filter(name=agent.name).update(fork_edits=["effect"])  # it applies an edited effect input

    with pytest.raises(ValueError, match="touches money"):
        fork_workflow(original, from_seq=3, by=operator, reason="redo")
    assert not original.forks.exists()  # refused: nothing half-created
    # The original refunded at step 3 already: running issue_refund again needs its own, named tick.
    refund = original.steps.get(seq=3)
    with pytest.raises(ValueError, match=f"issue_refund .* at step 3, ref {refund.external_ref}"):
        fork_workflow(
            original,
            from_seq=3,
            by=operator,
            reason="Refund the corrected amount.",
            edited_input={"amount": "20.00"},
            money_confirmed=True,
        )
    assert not original.forks.exists()
    decision = fork_workflow(
        original,
        from_seq=3,
        by=operator,
        reason="Refund the corrected amount.",
        edited_input={"amount": "20.00"},
        money_confirmed=True,
        repeats_confirmed=[refund.pk],
    )

    assert decision.status == Decision.Status.PROPOSED
    assert decision.approve(by=make_user("carol"))
    deliver(fleet, decision)
    fork = decision.checkpoint.workflow
    fork.refresh_from_db()
    assert fork.status == "completed"
    [refund] = fleet.ledgers.executions_for(f"{fork.external_id}:refund")
    assert refund.amount == "20.00"  # the operator's edited input for step 3
    assert fleet.executed(original.external_id)["refund"] == 1


def test_an_agent_that_cannot_fork_is_refused_with_the_reason(db):
    from tests.helpers import make_worked_example

    workflow = make_worked_example()
    with pytest.raises(ValueError, match="does not advertise “restart from a step as a new workflow”"):
        fork_workflow(workflow, from_seq=2, by=make_user("alice"), reason="x")


def test_a_failover_completes_on_the_standby_with_no_duplicate_effect_and_the_original_stands_down(
    fleet, olivia, operator
):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    standby = fleet.agent("standby-bot", owner=olivia)
    able(standby.name, "failover")
    stood_down = []
    original_delivery = agent.on_delivery
    agent.on_delivery = lambda payload: stood_down.append(payload) or original_delivery(payload)
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}

    decision = Decider(checkpoint).decide(
        by=operator,
        action="failover",
        standby=Agent.objects.get(name="standby-bot"),
        instructions="support-bot is down; carry on from the note.",
        money_confirmed=True,
    )
    workflow.refresh_from_db()
    assert workflow.agent.name == "standby-bot" and workflow.status == "resuming"
    deliver(fleet, decision)
    assert tasks.send_stand_down(decision.pk) == "sent"
    fleet.server.release()  # on SQLite the fleet holds a delivery until the task has returned
    assert fleet.server.join(timeout=30)

    workflow.refresh_from_db()
    assert workflow.status == "completed" and workflow.agent.name == "standby-bot"
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    assert fleet.ledgers.duplicates() == {}
    assert [p["action"] for p in stood_down] == ["stand_down"]
    assert stood_down[0]["taken_over_by"] == "standby-bot"
    assert fleet.journal.run(workflow.external_id)["status"] in ("stood_down", "completed")
    verbs = set(Event.objects.filter(workflow=workflow).values_list("verb", flat=True))
    assert {"failed_over", "stand_down_sent", "resumed"} <= verbs
    # The original can no longer report on it: the workflow answers it 409 stood_down, saying where it went.
    from recovery_client import ApiError

    with pytest.raises(ApiError) as refused:
        agent.client.get_workflow(str(workflow.pk))
    assert (refused.value.status, refused.value.code) == (409, "stood_down")
    assert "failed over to standby-bot" in refused.value.message


def test_a_standby_must_advertise_failover_and_run_the_kind(fleet, olivia, operator):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    fleet.agent("triage-bot", kind="ticket_triage", owner=olivia)
    triage = Agent.objects.get(name="triage-bot")
    with pytest.raises(ValueError, match="does not advertise"):
        Decider(checkpoint).decide(by=operator, action="failover", standby=triage, money_confirmed=True)
    able("triage-bot", "failover", kinds=("ticket_triage",))
    triage.refresh_from_db()
    with pytest.raises(ValueError, match="does not run refund workflows"):
        Decider(checkpoint).decide(by=operator, action="failover", standby=triage, money_confirmed=True)
    assert Decider(checkpoint).standbys() == []


def test_a_failover_the_standby_never_receives_goes_back_to_the_original_agent(fleet, olivia, operator, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    Agent.register("dead-standby", resume_url="http://127.0.0.1:9/agents/dead-standby/resume")
    able("dead-standby", "failover")
    decision = Decider(checkpoint).decide(
        by=operator, action="failover", standby=Agent.objects.get(name="dead-standby"), money_confirmed=True
    )

    assert tasks.deliver_decision(decision.pk) == "retry"

    workflow.refresh_from_db()
    decision.refresh_from_db()
    assert decision.status == "failed" and workflow.status == "paused" and workflow.agent.name == agent.name
    assert Event.objects.filter(workflow=workflow, verb="failover_undone").exists()


def test_the_workbench_offers_failover_only_with_a_standby_and_the_form_fails_over(fleet, olivia, operator, client):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    client.force_login(operator)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'data-testid="decide-failover"' not in html
    assert "Fail over is not offered: no other active agent advertises failover for refund workflows." in html
    fleet.agent("standby-bot", owner=olivia)
    able("standby-bot", "failover")

    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'data-testid="decide-failover"' in html and '<option value="standby-bot"' in html
    client.post(
        reverse("decide", args=[checkpoint.pk]),
        {"action": "failover", "standby": "standby-bot", "money_confirmed": "1"},
    )

    decision = checkpoint.decisions.get()
    assert decision.action == "failover" and decision.standby.name == "standby-bot"
    assert decision.replaced_agent.name == agent.name
    assert json.loads(json.dumps(decision.payload()))["failover"] == {"from_agent": agent.name}
