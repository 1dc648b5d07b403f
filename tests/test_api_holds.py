"""Hold intake through the Agent API: a held agent's running workflows pause at their next finished step
(the answer carries ``instruction.pause``, the console opens a ``held`` checkpoint with the full resume
state), new workflows are refused (409 agent_on_hold) or paused at their first report, and lifting the
hold is audited. Every answer an agent that ignores holds relies on stays as it was."""

import pytest

from tests.apitools import DECIDE_REFUND, READ_TICKET, assert_error, expect, issue_refund
from tests.helpers import make_checkpoint, make_worked_example
from workflows.models import Checkpoint, Event, Hold, Workflow

pytestmark = pytest.mark.django_db


def test_without_a_hold_a_step_answer_carries_no_instruction(bot, workflow_id):
    body = expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    assert "instruction" not in body  # the answer is exactly what it always was
    assert {
        "seq",
        "name",
        "kind",
        "status",
        "input",
        "output",
        "verified",
        "promise",
        "idempotency_key",
        "external_ref",
    } <= set(body)


def test_a_held_agent_is_told_to_pause_at_its_next_step_and_a_held_checkpoint_opens(bot, workflow_id, alice):
    expect(bot.post(f"/workflows/{workflow_id}/steps/batch", {"steps": [READ_TICKET, DECIDE_REFUND]}), 201)
    hold = Hold.place(bot.agent, by=alice, note="provider outage")
    body = expect(bot.post(f"/workflows/{workflow_id}/steps", issue_refund()), 201)  # same status code as ever
    assert body["seq"] == 3 and body["status"] == "committed" and body["external_ref"] == "R-88"
    pause = body["instruction"]["pause"]
    checkpoint = Checkpoint.objects.get(pk=pause["checkpoint_id"])
    assert pause["reason"] == "held" and pause["hold_id"] == str(hold.pk)
    assert checkpoint.reason == "held" and checkpoint.opened_by_console and checkpoint.at_seq == 4
    assert "provider outage" in checkpoint.detail
    state = checkpoint.resume_state
    assert [s["seq"] for s in state["committed"]] == [3] and state["unknown_effects"] == []
    assert state["promises"] == ["refund within 5 days"]
    assert state["last_verified_output"] == READ_TICKET["output"]
    assert Workflow.objects.get(pk=workflow_id).status == Workflow.Status.PAUSED
    # The agent polls the checkpoint like any other.
    assert bot.checkpoint(pause["checkpoint_id"])["status"] == "open"


def test_a_resent_report_gets_the_same_instruction_and_no_second_checkpoint(bot, workflow_id, alice):
    Hold.place(bot.agent, by=alice)
    first = expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)["instruction"]
    again = expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 200)["instruction"]
    assert first == again
    assert Checkpoint.objects.filter(workflow_id=workflow_id).count() == 1


def test_a_pending_effect_is_not_paused_mid_flight_only_once_it_finishes(bot, workflow_id, alice):
    expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    Hold.place(bot.agent, by=alice)
    pending = expect(bot.post(f"/workflows/{workflow_id}/steps", issue_refund("pending")), 201)
    assert "instruction" not in pending and not Checkpoint.objects.exists()
    done = expect(bot.post(f"/workflows/{workflow_id}/steps", issue_refund("committed")), 200)
    checkpoint = Checkpoint.objects.get(pk=done["instruction"]["pause"]["checkpoint_id"])
    assert checkpoint.unknown_effects == []  # the refund finished before the pause: nothing unknown


def test_a_hold_on_one_kind_leaves_other_kinds_running(bot, alice):
    Hold.place(bot.agent, by=alice, kind="billing")
    refund = bot.create_workflow("T-1")["id"]
    assert "instruction" not in expect(bot.post(f"/workflows/{refund}/steps", READ_TICKET), 201)
    billing = bot.create_workflow("B-1", kind="billing", status=409)
    assert billing["error"]["code"] == "agent_on_hold"


def test_new_workflows_are_refused_with_409_but_a_resend_of_an_existing_one_answers_200(bot, alice):
    existing = bot.create_workflow("T-1")
    Hold.place(bot.agent, by=alice)
    error = assert_error(
        bot.post("/workflows", {"external_id": "T-2", "kind": "refund", "title": "x"}), 409, "agent_on_hold", "kind"
    )
    assert bot.agent.name in error["message"]
    assert bot.create_workflow("T-1", status=200)["id"] == existing["id"]
    assert Event.objects.filter(verb=Event.Verb.WORKFLOW_REFUSED_ON_HOLD, subject=f"agent:{bot.agent.pk}").count() == 1


def test_a_pausing_hold_accepts_new_workflows_and_pauses_them_at_their_first_report(bot, alice):
    Hold.place(bot.agent, by=alice, new_workflows="pause")
    workflow_id = bot.create_workflow("T-3")["id"]
    body = expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    assert body["instruction"]["pause"]["reason"] == "held"


def test_lifting_the_hold_is_audited_and_reports_run_again(bot, workflow_id, alice):
    hold = Hold.place(bot.agent, by=alice)
    assert hold.lift(by=alice) and not hold.lift(by=alice)
    assert "instruction" not in expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    lifted = Event.objects.get(verb=Event.Verb.HOLD_LIFTED)
    assert lifted.actor_user == alice and lifted.data["hold"] == hold.pk
    assert bot.create_workflow("T-9")["id"]


def test_a_second_hold_on_the_same_scope_is_refused(bot, alice):
    Hold.place(bot.agent, by=alice)
    with pytest.raises(Exception, match="already on hold"):
        Hold.place(bot.agent, by=alice)


def test_agents_cannot_open_a_held_checkpoint_themselves(bot, workflow_id):
    assert_error(
        bot.post(f"/workflows/{workflow_id}/checkpoints", {"reason": "held", "detail": "", "state": {}}),
        422,
        "invalid_choice",
        "reason",
    )


def test_a_batch_report_carries_the_instruction_too(bot, workflow_id, alice):
    Hold.place(bot.agent, by=alice)
    body = expect(bot.post(f"/workflows/{workflow_id}/steps/batch", {"steps": [READ_TICKET, DECIDE_REFUND]}), 201)
    assert body["instruction"]["pause"]["reason"] == "held"
    assert Checkpoint.objects.get().at_seq == 3


def test_held_checkpoints_join_the_incident_whose_hold_paused_them_and_form_none_of_their_own(bot, alice):
    from workflows.models import Incident

    bot.agent.incident_threshold = 2
    bot.agent.save()
    incident = Incident.open_from([make_checkpoint(make_worked_example(agent=bot.agent))], by=alice)
    incident.hold(by=alice, new_workflows="pause")
    for i in range(4):
        workflow_id = bot.create_workflow(f"T-{i}")["id"]
        expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    assert Incident.objects.count() == 1
    assert incident.members.filter(reason="held").count() == 4


def test_held_checkpoints_are_no_failure_and_never_group_by_themselves(bot, alice):
    from workflows.models import Incident

    bot.agent.incident_threshold = 2
    bot.agent.save()
    Hold.place(bot.agent, by=alice, new_workflows="pause")
    for i in range(3):
        workflow_id = bot.create_workflow(f"T-{i}")["id"]
        expect(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    assert Checkpoint.objects.filter(reason="held").count() == 3 and not Incident.objects.exists()
