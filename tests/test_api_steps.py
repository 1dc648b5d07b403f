"""POST /api/v1/workflows/{id}/steps: idempotent, append-only except pending -> committed | failed."""

import pytest

from tests.apitools import assert_error, issue_refund
from workflows.models import Event, Step, Workflow


def post(bot, workflow_id, body):
    return bot.post(f"/workflows/{workflow_id}/steps", body)


def test_a_new_step_answers_201_and_is_recorded_with_an_event_by_the_agent(bot, workflow_id):
    body = bot.report(workflow_id, **issue_refund())
    assert body == {
        "seq": 3,
        "name": "issue_refund",
        "kind": "effect",
        "status": "committed",
        "input": {"amount": "42.00", "currency": "EUR"},
        "output": None,
        "verified": False,
        "promise": None,
        "idempotency_key": "T-1042:refund",
        "external_ref": "R-88",
    }
    step = Step.objects.get(workflow_id=workflow_id, seq=3)
    assert step.as_dict() == body
    event = Event.objects.get(workflow_id=workflow_id, verb="step_committed")
    assert event.actor_agent == bot.agent
    assert event.data["seq"] == 3


def test_an_identical_resend_answers_200_and_changes_nothing(bot, workflow_id):
    first = bot.report(workflow_id, **issue_refund())
    again = bot.report(workflow_id, **issue_refund(), expect_status=200)
    assert again == first
    assert Step.objects.filter(workflow_id=workflow_id).count() == 1
    assert Event.objects.filter(workflow_id=workflow_id, verb__startswith="step_").count() == 1


@pytest.mark.parametrize("outcome", ["committed", "failed"])
def test_a_pending_step_may_move_to_committed_or_failed(bot, workflow_id, outcome):
    bot.report(workflow_id, **issue_refund("pending"))
    body = bot.report(
        workflow_id, **issue_refund(outcome, output={"refund": "R-88"}, external_ref="R-88"), expect_status=200
    )
    assert body["status"] == outcome
    assert body["output"] == {"refund": "R-88"} and body["external_ref"] == "R-88"
    step = Step.objects.get(workflow_id=workflow_id, seq=3)
    assert step.status == outcome
    event = Event.objects.get(workflow_id=workflow_id, verb=f"step_{outcome}")
    assert event.actor_agent == bot.agent


def test_the_transition_report_need_not_repeat_the_input(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("pending"))
    body = bot.report(workflow_id, **issue_refund("committed", input=None), expect_status=200)
    assert body["input"] == {"amount": "42.00", "currency": "EUR"}


def test_resending_the_transition_is_an_identical_resend(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("pending"))
    bot.report(workflow_id, **issue_refund("committed", input=None), expect_status=200)
    bot.report(workflow_id, **issue_refund("committed", input=None), expect_status=200)
    assert Event.objects.filter(workflow_id=workflow_id, verb="step_committed").count() == 1


@pytest.mark.parametrize(
    "change",
    [
        {"status": "failed"},
        {"status": "pending"},
        {"output": {"refund": "R-99"}},
        {"external_ref": "R-99"},
        {"name": "issue_refund_again"},
        {"input": {"amount": "99.00"}},
        {"verified": True},
        {"promise": "refund today"},
        {"idempotency_key": "T-1042:refund-2"},
    ],
)
def test_any_change_to_a_committed_step_is_409(bot, workflow_id, change):
    recorded = bot.report(workflow_id, **issue_refund())
    assert_error(post(bot, workflow_id, issue_refund(**change)), 409, "step_conflict")
    assert Step.objects.get(workflow_id=workflow_id, seq=3).as_dict() == recorded


def test_a_failed_step_cannot_be_committed_later(bot, workflow_id):
    bot.report(workflow_id, 1, "call_ledger", "tool", "failed")
    assert_error(
        post(bot, workflow_id, {"seq": 1, "name": "call_ledger", "kind": "tool", "status": "committed"}),
        409,
        "step_conflict",
    )
    assert Step.objects.get(workflow_id=workflow_id, seq=1).status == "failed"


def test_a_pending_step_reported_as_another_step_is_409_naming_the_field(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("pending"))
    assert_error(
        post(bot, workflow_id, issue_refund("committed", name="write_ticket_note")), 409, "step_conflict", "name"
    )
    assert Step.objects.get(workflow_id=workflow_id, seq=3).status == "pending"


def test_a_pending_step_stays_as_recorded_until_it_commits_or_fails(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("pending"))
    assert_error(
        post(bot, workflow_id, issue_refund("pending", output={"partial": True})), 409, "step_conflict", "status"
    )


def test_an_idempotency_key_used_by_another_step_is_409(bot, workflow_id):
    bot.report(workflow_id, **issue_refund())
    again = issue_refund(seq=4, status="pending", external_ref=None)
    assert_error(post(bot, workflow_id, again), 409, "idempotency_key_taken", "idempotency_key")
    assert not Step.objects.filter(workflow_id=workflow_id, seq=4).exists()


def test_the_same_idempotency_key_in_another_workflow_is_fine(bot, workflow_id):
    other_id = bot.create_workflow("T-2000")["id"]
    first = bot.report(workflow_id, **issue_refund(), expect_status=201)
    second = bot.report(other_id, **issue_refund(), expect_status=201)
    assert first["idempotency_key"] == second["idempotency_key"] == "T-1042:refund"
    assert Step.objects.filter(idempotency_key="T-1042:refund").count() == 2


def test_an_effect_without_an_idempotency_key_is_422(bot, workflow_id):
    assert_error(
        post(bot, workflow_id, issue_refund(idempotency_key=None)), 422, "idempotency_key_required", "idempotency_key"
    )
    assert not Step.objects.exists()


def test_other_kinds_need_no_idempotency_key(bot, workflow_id):
    for seq, kind in enumerate(["model", "tool", "message"], start=1):
        assert bot.report(workflow_id, seq, f"step-{seq}", kind, expect_status=201)["idempotency_key"] is None
    assert list(Step.objects.order_by("seq").values_list("kind", flat=True)) == ["model", "tool", "message"]


@pytest.mark.parametrize("status", ["completed", "failed", "aborted", "handed_off"])
def test_a_finished_workflow_takes_no_more_steps(bot, workflow_id, status):
    Workflow.objects.filter(pk=workflow_id).update(status=status)
    assert_error(
        post(bot, workflow_id, {"seq": 1, "name": "late", "kind": "tool", "status": "committed"}),
        409,
        "workflow_finished",
    )
    assert not Step.objects.exists()


@pytest.mark.parametrize("status", ["resuming", "paused"])
def test_a_paused_or_resuming_workflow_still_records_what_the_agent_did(bot, workflow_id, status):
    # A polling agent reports on as soon as it has its decision; a late report while paused is history
    # an operator must see rather than lose.
    Workflow.objects.filter(pk=workflow_id).update(status=status)
    bot.report(workflow_id, 4, "write_ticket_note", "effect", idempotency_key="T-1042:note")
    assert Workflow.objects.get(pk=workflow_id).status == status


def test_promises_and_verification_are_recorded(bot, workflow_id):
    body = bot.report(
        workflow_id,
        2,
        "decide_refund",
        "model",
        output={"decision": "refund"},
        verified=True,
        promise="refund within 5 days",
    )
    assert body["verified"] is True and body["promise"] == "refund within 5 days"
