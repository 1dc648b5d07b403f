"""POST /api/v1/workflows, GET /api/v1/workflows/{id} and POST …/finish."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.apitools import api_agent, assert_error, expect
from tests.helpers import make_checkpoint, make_user
from workflows.models import Checkpoint, Decider, Event, Workflow


def test_creating_a_workflow_answers_201_with_the_workflow(db):
    bot = api_agent()
    body = bot.create_workflow("T-1042", context={"ticket": "T-1042", "amount": "42.00"})
    workflow = Workflow.objects.get(pk=int(body["id"]))
    assert workflow.agent == bot.agent
    assert body["id"] == str(workflow.pk)
    assert body["external_id"] == "T-1042"
    assert body["kind"] == "refund"
    assert body["title"] == "Refund for ticket T-1042"
    assert body["status"] == "running"
    assert body["context"] == {"ticket": "T-1042", "amount": "42.00"}
    assert body["steps"] == [] and body["checkpoints"] == []


def test_the_same_external_id_again_answers_200_with_the_existing_workflow(db):
    bot = api_agent()
    first = bot.create_workflow("T-1042")
    again = bot.create_workflow("T-1042", status=200, title="A retry with another title")
    assert again["id"] == first["id"]
    assert again["title"] == first["title"]
    assert Workflow.objects.filter(external_id="T-1042").count() == 1


def test_the_id_is_an_opaque_string(db):
    body = api_agent().create_workflow()
    assert isinstance(body["id"], str)


def test_without_an_owner_the_workflow_belongs_to_the_agents_owner(db):
    olivia = make_user("olivia")
    bot = api_agent(owner=olivia)
    assert bot.create_workflow(owner=None)["owner"] == "olivia"


def test_a_named_owner_is_a_console_user(alice):
    bot = api_agent()
    body = bot.create_workflow(owner="alice")
    assert body["owner"] == "alice"
    assert Workflow.objects.get(pk=body["id"]).owner == alice


def test_an_unknown_owner_is_a_422_on_the_owner_field(db):
    bot = api_agent()
    assert_error(
        bot.post(
            "/workflows", {"external_id": "T-1", "kind": "refund", "title": "t", "owner": "nobody", "context": {}}
        ),
        422,
        "unknown_owner",
        "owner",
    )
    assert not Workflow.objects.exists()


def test_a_resend_answers_the_existing_workflow_even_if_its_owner_left_since(alice):
    bot = api_agent()
    first = bot.create_workflow(owner="alice")
    alice.is_active = False
    alice.save()
    assert bot.create_workflow(owner="alice", status=200)["id"] == first["id"]
    assert_error(
        bot.post("/workflows", {"external_id": "T-2", "kind": "refund", "title": "t", "owner": "alice"}),
        422,
        "unknown_owner",
        "owner",
    )


def test_a_missing_context_is_an_empty_object(db):
    bot = api_agent()
    body = expect(bot.post("/workflows", {"external_id": "T-1", "kind": "refund", "title": "t"}), 201)
    assert body["context"] == {}


def test_creating_records_an_event_by_the_agent(db):
    bot = api_agent()
    body = bot.create_workflow()
    bot.create_workflow(status=200)
    event = Event.objects.get(workflow_id=body["id"])
    assert event.verb == "created"
    assert event.actor_agent == bot.agent


def test_get_shows_status_owner_steps_ordered_by_seq_and_checkpoints(alice):
    bot = api_agent()
    workflow_id = bot.create_workflow(owner="alice")["id"]
    for seq in (3, 1, 2):
        bot.report(workflow_id, seq, f"step-{seq}")
    checkpoint = bot.open_checkpoint(workflow_id, at_seq=4)
    body = bot.workflow(workflow_id)
    assert body["status"] == "paused"
    assert body["owner"] == "alice"
    assert [s["seq"] for s in body["steps"]] == [1, 2, 3]
    assert [c["id"] for c in body["checkpoints"]] == [checkpoint["id"]]
    assert body["checkpoints"][0]["status"] == "open"
    assert body["checkpoints"][0]["reason"] == "model_timeout"


def test_finishing_completes_the_workflow_with_its_summary(db):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    body = bot.finish(workflow_id, "completed", summary="Refunded and notified.")
    assert body["status"] == "completed"
    assert body["summary"] == "Refunded and notified."
    assert body["finished_at"] is not None
    event = Event.objects.get(workflow_id=workflow_id, verb="finished_completed")
    assert event.actor_agent == bot.agent


def test_finishing_as_failed_fails_the_workflow(db):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    assert bot.finish(workflow_id, "failed", summary="The ledger is down.")["status"] == "failed"


def test_finishing_with_an_open_checkpoint_is_409(db):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    bot.open_checkpoint(workflow_id)
    assert_error(
        bot.post(f"/workflows/{workflow_id}/finish", {"status": "completed", "summary": ""}), 409, "checkpoint_open"
    )
    assert Workflow.objects.get(pk=workflow_id).status == "paused"


def test_finishing_with_a_decided_but_undelivered_checkpoint_is_409(alice):
    bot = api_agent(resume_url="https://agent.example/resume")
    workflow = Workflow.objects.get(pk=bot.create_workflow()["id"])
    checkpoint = make_checkpoint(workflow)
    Decider(checkpoint).decide(by=alice, action="resume")
    assert_error(
        bot.post(f"/workflows/{workflow.pk}/finish", {"status": "completed", "summary": ""}), 409, "checkpoint_open"
    )


def test_the_same_finish_again_is_a_harmless_retry(db):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    first = bot.finish(workflow_id, "completed")
    again = bot.finish(workflow_id, "completed")
    assert again["status"] == "completed" and again["finished_at"] == first["finished_at"]
    assert Event.objects.filter(workflow_id=workflow_id, verb="finished_completed").count() == 1


def test_finishing_a_finished_workflow_another_way_is_409(db):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    bot.finish(workflow_id, "completed")
    assert_error(
        bot.post(f"/workflows/{workflow_id}/finish", {"status": "failed", "summary": ""}), 409, "workflow_finished"
    )
    assert Workflow.objects.get(pk=workflow_id).status == "completed"


def test_a_handed_off_workflow_is_finished_by_its_new_owner_not_by_the_agent(db):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    Workflow.objects.filter(pk=workflow_id).update(status=Workflow.Status.HANDED_OFF)
    assert_error(
        bot.post(f"/workflows/{workflow_id}/finish", {"status": "completed", "summary": ""}), 409, "workflow_finished"
    )


def test_a_workflow_resumed_by_a_polling_agent_can_finish(alice):
    bot = api_agent()
    workflow_id = bot.create_workflow()["id"]
    checkpoint_id = bot.open_checkpoint(workflow_id)["id"]
    Decider(Checkpoint.objects.get(pk=checkpoint_id)).decide(by=alice, action="resume")
    assert bot.checkpoint(checkpoint_id)["decision"]["state"] == "succeeded"
    assert bot.finish(workflow_id, "completed")["status"] == "completed"


def _an_hour_ago(workflow_id: str) -> None:
    Workflow.objects.filter(pk=workflow_id).update(last_activity_at=timezone.now() - timedelta(hours=1))


@pytest.mark.parametrize(
    "call", ["get", "create_again", "report_step", "open_checkpoint", "get_checkpoint", "finish", "rejected_step"]
)
def test_every_call_on_a_running_workflow_counts_as_activity_and_polling_a_paused_one_does_not(db, call):
    # Issue 8: an agent polling its paused workflow showed "last activity 0 s ago" for ten minutes.
    bot = api_agent()
    workflow_id = bot.create_workflow("T-7")["id"]
    checkpoint_id = None
    if call == "get_checkpoint":
        checkpoint_id = bot.open_checkpoint(workflow_id)["id"]
    if call == "rejected_step":
        bot.report(workflow_id, 1, "read_ticket")
    _an_hour_ago(workflow_id)
    before = Workflow.objects.get(pk=workflow_id).last_activity_at
    {
        "get": lambda: bot.workflow(workflow_id),
        "create_again": lambda: bot.create_workflow("T-7", status=200),
        "report_step": lambda: bot.report(workflow_id, 1, "read_ticket"),
        "open_checkpoint": lambda: bot.open_checkpoint(workflow_id),
        "get_checkpoint": lambda: bot.checkpoint(checkpoint_id),
        "finish": lambda: bot.finish(workflow_id),
        # Even a refused report is a sign of life: the agent is there.
        "rejected_step": lambda: bot.report(workflow_id, 1, "other", expect_status=409),
    }[call]()
    if call == "get_checkpoint":  # polling a paused workflow for its decision is not activity
        assert Workflow.objects.get(pk=workflow_id).last_activity_at == before
    else:  # a read of a running workflow is still a sign of life for the silence sweep
        assert Workflow.objects.get(pk=workflow_id).last_activity_at > before
