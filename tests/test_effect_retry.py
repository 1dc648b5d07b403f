"""A failed effect is retried under its idempotency key: failed -> pending as a new attempt, history kept."""

import threading

import pytest
from django.db import connections

from tests.apitools import api_agent, assert_error, issue_refund
from tests.helpers import make_checkpoint, make_step, make_workflow, run_together
from workflows.models import Decider, Event, IllegalTransition, Step


def fail_refund(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("pending"))
    bot.report(workflow_id, **issue_refund("failed", output={"error": "payments: 429"}), expect_status=200)


def test_a_failed_effect_reported_pending_again_is_a_new_attempt_under_the_same_key(bot, workflow_id):
    fail_refund(bot, workflow_id)

    again = bot.report(workflow_id, **issue_refund("pending"), expect_status=200)
    committed = bot.report(workflow_id, **issue_refund("committed", output={"refund": "R-88"}), expect_status=200)

    assert again["status"] == "pending" and again["output"] is None
    assert committed["status"] == "committed" and committed["external_ref"] == "R-88"
    step = Step.objects.get(workflow_id=workflow_id, seq=3)
    assert step.attempts == 2
    assert [(h["attempt"], h["status"], h["output"]) for h in step.history] == [
        (1, "failed", {"error": "payments: 429"})
    ]
    verbs = list(Event.objects.filter(workflow_id=workflow_id).values_list("verb", flat=True))
    assert verbs[-4:] == ["step_pending", "step_failed", "step_retried", "step_committed"]
    assert Step.objects.filter(workflow_id=workflow_id, idempotency_key="T-1042:refund").count() == 1


def test_a_retry_must_repeat_the_same_effect(bot, workflow_id):
    fail_refund(bot, workflow_id)

    response = bot.post(
        f"/workflows/{workflow_id}/steps", issue_refund("pending", input={"amount": "4200.00", "currency": "EUR"})
    )

    assert_error(response, 409, "step_conflict", "input")
    assert Step.objects.get(workflow_id=workflow_id, seq=3).status == "failed"


def test_committed_effects_and_failed_non_effects_are_never_retried(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("committed"))
    bot.report(workflow_id, 4, "read_ledger", "tool", "failed")

    assert_error(bot.post(f"/workflows/{workflow_id}/steps", issue_refund("pending")), 409, "step_conflict")
    assert_error(
        bot.post(
            f"/workflows/{workflow_id}/steps", {"seq": 4, "name": "read_ledger", "kind": "tool", "status": "pending"}
        ),
        409,
        "step_conflict",
    )
    with pytest.raises(IllegalTransition):
        Step.objects.get(workflow_id=workflow_id, seq=4).retry()


def test_a_repeated_retry_report_is_an_identical_resend(bot, workflow_id):
    fail_refund(bot, workflow_id)
    bot.report(workflow_id, **issue_refund("pending"), expect_status=200)
    bot.report(workflow_id, **issue_refund("pending"), expect_status=200)

    assert Step.objects.get(workflow_id=workflow_id, seq=3).attempts == 2
    assert Event.objects.filter(workflow_id=workflow_id, verb="step_retried").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_retries_make_one_attempt_and_the_effect_commits_once():
    bot = api_agent()
    workflow_id = bot.create_workflow("T-1042")["id"]
    fail_refund(bot, workflow_id)
    barrier, answers = threading.Barrier(8), []

    def retry():
        barrier.wait()
        try:
            answers.append(bot.post(f"/workflows/{workflow_id}/steps", issue_refund("pending")).status_code)
        finally:
            connections.close_all()

    run_together([retry] * 8)

    assert answers == [200] * 8
    step = Step.objects.get(workflow_id=workflow_id, seq=3)
    assert step.attempts == 2 and len(step.history) == 1
    assert Event.objects.filter(workflow_id=workflow_id, verb="step_retried").count() == 1


def test_a_retry_step_decision_names_the_failed_effect_and_its_next_attempt(alice):
    workflow = make_workflow(external_id="T-7")
    make_step(workflow, 1, "read_ticket")
    make_step(
        workflow,
        2,
        "issue_refund",
        "effect",
        status="failed",
        input={"amount": "5.00"},
        output={"error": "payments: 500"},
    )
    checkpoint = make_checkpoint(workflow, reason="tool_error", at_seq=2)

    decision = Decider(checkpoint).decide(by=alice, action="retry_step", money_confirmed=True)

    assert decision.payload()["retry"] == {
        "seq": 2,
        "name": "issue_refund",
        "idempotency_key": "T-7:issue_refund",
        "attempt": 2,
    }
    assert checkpoint.resume_state["pending"]["seq"] == 2  # what the agent stopped at


def test_the_workflow_page_shows_the_attempts_and_the_earlier_failure(client, alice, bot, workflow_id):
    fail_refund(bot, workflow_id)
    bot.report(workflow_id, **issue_refund("pending"), expect_status=200)
    client.force_login(alice)

    html = client.get(f"/workflows/{workflow_id}/").content.decode()

    assert "attempt 2" in html and 'data-testid="earlier-attempt"' in html and "payments: 429" in html
    assert "step 3 issue_refund retried under its key (attempt 2)" in html
