"""On PostgreSQL a new step, its workflow's sign of life and its audit Event are one statement: one round
trip and one commit after the workflow is read. Anything else (a resend, a taken key) takes the usual path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.apitools import issue_refund
from workflows.models import Event, Step, Workflow

pytestmark = pytest.mark.postgres


def test_a_new_step_costs_the_workflow_read_and_one_statement(bot, workflow_id):
    bot.report(workflow_id, 1, "read_ticket")  # the token is cached from here on
    before = Workflow.objects.get(pk=workflow_id).last_activity_at

    with CaptureQueriesContext(connection) as queries:
        body = bot.report(workflow_id, **issue_refund())

    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 2, statements  # the caller's workflow, then the step with its touch and Event
    assert statements[1].startswith("WITH touched AS (UPDATE")
    step = Step.objects.get(workflow_id=workflow_id, seq=3)
    assert step.as_dict() == body and step.carries_money
    assert Workflow.objects.get(pk=workflow_id).last_activity_at > before


def test_the_one_statement_writes_the_event_the_usual_path_writes(bot, workflow_id):
    bot.report(workflow_id, **issue_refund())
    fast = Event.objects.get(workflow_id=workflow_id, verb="step_committed")
    # The usual path (a batch of one) on a second workflow of the same agent.
    other = bot.create_workflow("T-1043")["id"]
    bot.post(f"/workflows/{other}/steps/batch", {"steps": [{**issue_refund(), "idempotency_key": "T-1043:refund"}]})
    usual = Event.objects.get(workflow_id=other, verb="step_committed")

    def shape(event: Event) -> dict:
        return {
            "actor_type": event.actor_type,
            "actor_agent": event.actor_agent_id,
            "actor_name": event.actor_name,
            "actor_user": event.actor_user_id,
            "checkpoint": event.checkpoint_id,
            "decision": event.decision_id,
            "subject": event.subject.split(":")[0],
            "data": event.data,
            "actor": event.actor,
        }

    assert shape(fast) == shape(usual)
    assert fast.subject == f"step:{Step.objects.get(workflow_id=workflow_id, seq=3).pk}"
    assert fast.actor_agent == bot.agent


def test_a_resend_and_a_taken_key_still_take_the_usual_path(bot, workflow_id):
    first = bot.report(workflow_id, **issue_refund())
    assert bot.report(workflow_id, **issue_refund(), expect_status=200) == first
    taken = bot.client.post(
        f"/api/v1/workflows/{workflow_id}/steps", {**issue_refund(), "seq": 4}, content_type="application/json"
    )
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "idempotency_key_taken"
    assert Event.objects.filter(workflow_id=workflow_id, verb__startswith="step_").count() == 1
    assert Step.objects.filter(workflow_id=workflow_id).count() == 1


def test_a_finished_workflow_takes_no_step_and_is_not_touched(bot, workflow_id):
    bot.finish(workflow_id)
    before = Workflow.objects.get(pk=workflow_id).last_activity_at

    response = bot.client.post(
        f"/api/v1/workflows/{workflow_id}/steps", issue_refund(), content_type="application/json"
    )

    assert response.status_code == 409 and response.json()["error"]["code"] == "workflow_finished"
    assert not Step.objects.filter(workflow_id=workflow_id).exists()
    assert Workflow.objects.get(pk=workflow_id).last_activity_at == before
