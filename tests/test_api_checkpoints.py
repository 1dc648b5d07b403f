"""POST /api/v1/workflows/{id}/checkpoints and GET /api/v1/checkpoints/{id}, decisions included."""

from datetime import datetime, timedelta

import pytest
from django.test import override_settings

from tests.apitools import DECIDE_REFUND, READ_TICKET, api_agent, assert_error, issue_refund
from tests.helpers import make_runbook, make_user
from workflows.models import Checkpoint, Decider, Decision, Event, Workflow
from workflows.models.clocks import SlaClock

CHECKPOINT_KEYS = {"id", "status", "reason", "due_at", "warn_at", "runbook", "resume_state"}
GET_KEYS = {"id", "status", "assignee", "due_at", "breached", "decision"}
DECISION_KEYS = {"action", "instructions", "confirmations", "new_owner", "decided_by", "decided_at", "state"}


@pytest.fixture
def pusher(db):
    """An agent with a resume endpoint: decisions are delivered by the worker, not by polling."""
    return api_agent(resume_url="https://agent.example/resume")


def paused(agent_api, *, refund: str = "committed") -> tuple[str, str]:
    workflow_id = agent_api.create_workflow("T-1042")["id"]
    for step in (READ_TICKET, DECIDE_REFUND, issue_refund(refund)):
        agent_api.report(workflow_id, **step)
    checkpoint = agent_api.open_checkpoint(
        workflow_id,
        at_seq=4,
        state={"remaining": ["write_ticket_note"]},
        plan=[{"name": "write_ticket_note", "kind": "effect"}],
    )
    return workflow_id, checkpoint["id"]


def to_ms(moment: datetime) -> datetime:
    """The API writes ISO 8601 timestamps to the millisecond."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def checkpoint_of(checkpoint_id: str) -> Checkpoint:
    return Checkpoint.objects.get(pk=checkpoint_id)


def test_opening_a_checkpoint_answers_201_and_pauses_the_workflow(bot):
    workflow_id = bot.create_workflow()["id"]
    body = bot.open_checkpoint(workflow_id, reason="tool_error", detail="ledger 502", at_seq=1, state={"cursor": 7})
    assert CHECKPOINT_KEYS <= set(body)
    assert body["status"] == "open" and body["reason"] == "tool_error"
    assert body["runbook"] is None
    assert body["resume_state"]["state"] == {"cursor": 7}
    assert Workflow.objects.get(pk=workflow_id).status == "paused"
    checkpoint = checkpoint_of(body["id"])
    assert (checkpoint.detail, checkpoint.at_seq) == ("ledger 502", 1)
    assert Event.objects.get(checkpoint=checkpoint, verb="opened").actor_agent == bot.agent


def test_the_sla_clock_and_runbook_come_from_the_matching_runbook(bot):
    make_runbook(
        slug="refund-timeouts",
        title="Refund timeouts",
        url="https://runbooks.example/refunds",
        workflow_kind="refund",
        reason="model_timeout",
        sla_target_minutes=45,
        sla_warning_minutes=15,
    )
    body = bot.open_checkpoint(bot.create_workflow()["id"])
    assert body["runbook"] == {
        "slug": "refund-timeouts",
        "title": "Refund timeouts",
        "url": "https://runbooks.example/refunds",
    }
    due, warn = datetime.fromisoformat(body["due_at"]), datetime.fromisoformat(body["warn_at"])
    assert due - warn == timedelta(minutes=15)
    checkpoint = checkpoint_of(body["id"])
    assert (due, warn) == (to_ms(checkpoint.due_at), to_ms(checkpoint.warn_at))
    assert checkpoint.due_at - checkpoint.opened_at == timedelta(minutes=45)


def test_a_second_checkpoint_while_one_is_open_is_409(bot):
    workflow_id = bot.create_workflow()["id"]
    bot.open_checkpoint(workflow_id)
    assert_error(
        bot.post(
            f"/workflows/{workflow_id}/checkpoints", {"reason": "manual", "detail": "", "at_seq": None, "state": {}}
        ),
        409,
        "checkpoint_open",
    )
    assert Checkpoint.objects.filter(workflow_id=workflow_id).count() == 1


def test_an_identical_resend_answers_200_with_the_open_checkpoint(bot):
    # The agent's first request went through but its answer was lost: resending must not fail it.
    workflow_id = bot.create_workflow()["id"]
    first = bot.open_checkpoint(workflow_id, at_seq=3, state={"cursor": 7})
    again = bot.open_checkpoint(workflow_id, at_seq=3, state={"cursor": 7}, status=200)
    assert again["id"] == first["id"] and again["resume_state"] == first["resume_state"]
    assert Checkpoint.objects.filter(workflow_id=workflow_id).count() == 1
    assert Event.objects.filter(workflow_id=workflow_id, verb="opened").count() == 1


@pytest.mark.parametrize(
    "change", [{"reason": "tool_error"}, {"detail": "another"}, {"at_seq": 4}, {"state": {"cursor": 8}}]
)
def test_a_different_checkpoint_while_one_is_open_is_409(bot, change):
    workflow_id = bot.create_workflow()["id"]
    bot.open_checkpoint(workflow_id, at_seq=3, state={"cursor": 7})
    body = {"reason": "model_timeout", "detail": "the model timed out", "at_seq": 3, "state": {"cursor": 7}, **change}
    assert_error(bot.post(f"/workflows/{workflow_id}/checkpoints", body), 409, "checkpoint_open")


def test_a_checkpoint_the_console_opened_is_not_the_agents_resend(bot):
    workflow_id = bot.create_workflow()["id"]
    Checkpoint.open_for(
        Workflow.objects.get(pk=workflow_id),
        reason="model_timeout",
        detail="the model timed out",
        state={},
        by_console=True,
    )
    assert_error(
        bot.post(
            f"/workflows/{workflow_id}/checkpoints",
            {"reason": "model_timeout", "detail": "the model timed out", "at_seq": None, "state": {}},
        ),
        409,
        "checkpoint_open",
    )


@pytest.mark.parametrize("status", ["completed", "failed", "aborted", "handed_off"])
def test_a_finished_workflow_cannot_pause(bot, status):
    workflow_id = bot.create_workflow()["id"]
    Workflow.objects.filter(pk=workflow_id).update(status=status)
    assert_error(
        bot.post(
            f"/workflows/{workflow_id}/checkpoints", {"reason": "manual", "detail": "", "at_seq": None, "state": {}}
        ),
        409,
        "workflow_finished",
    )
    assert not Checkpoint.objects.exists()


def test_a_resolved_checkpoint_does_not_block_the_next_one(bot, alice):
    workflow_id, checkpoint_id = paused(bot)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="resume")
    bot.checkpoint(checkpoint_id)  # the polling agent fetches its decision
    second = bot.open_checkpoint(workflow_id, reason="rate_limit")
    assert second["id"] != checkpoint_id


def test_an_open_checkpoint_shows_no_decision(bot):
    _, checkpoint_id = paused(bot)
    body = bot.checkpoint(checkpoint_id)
    assert GET_KEYS <= set(body)
    assert body["status"] == "open"
    assert body["assignee"] is None and body["breached"] is False and body["decision"] is None


def test_a_claimed_checkpoint_names_its_assignee(bot, alice):
    _, checkpoint_id = paused(bot)
    checkpoint_of(checkpoint_id).claim(by=alice)
    body = bot.checkpoint(checkpoint_id)
    assert body["status"] == "claimed" and body["assignee"] == "alice"


def test_a_breach_is_visible_to_the_agent(bot):
    _, checkpoint_id = paused(bot)
    checkpoint = checkpoint_of(checkpoint_id)
    SlaClock(checkpoint).record_breach(checkpoint.due_at)
    assert bot.checkpoint(checkpoint_id)["breached"] is True


def test_fetching_a_queued_decision_is_its_delivery_to_a_polling_agent(bot, alice):
    workflow_id, checkpoint_id = paused(bot)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="resume", instructions="Write the note, then notify.")
    assert Workflow.objects.get(pk=workflow_id).status == "resuming"
    body = bot.checkpoint(checkpoint_id)
    decision = body["decision"]
    assert DECISION_KEYS <= set(decision)
    assert decision["state"] == "succeeded"
    assert decision["action"] == "resume"
    assert decision["instructions"] == "Write the note, then notify."
    assert decision["decided_by"] == "alice"
    assert datetime.fromisoformat(decision["decided_at"]) == to_ms(Decision.objects.get().decided_at)
    assert decision["new_owner"] is None and decision["confirmations"] == {}
    assert body["status"] == "resolved"
    assert Workflow.objects.get(pk=workflow_id).status == "running"
    assert Decision.objects.get().status == "succeeded"


def test_fetching_again_does_not_deliver_twice(bot, alice):
    _, checkpoint_id = paused(bot)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="resume")
    first = bot.checkpoint(checkpoint_id)["decision"]
    again = bot.checkpoint(checkpoint_id)["decision"]
    assert again == first
    assert Event.objects.filter(verb="fetched_by_agent").count() == 1
    assert Event.objects.filter(verb="resolved").count() == 1


def test_an_agent_with_a_resume_endpoint_sees_the_delivery_state_without_changing_it(pusher, alice):
    workflow_id, checkpoint_id = paused(pusher)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="resume")
    body = pusher.checkpoint(checkpoint_id)
    assert body["decision"]["state"] == "queued"
    assert body["status"] == "decided"
    assert Decision.objects.get().status == "queued"
    assert Workflow.objects.get(pk=workflow_id).status == "resuming"


def test_a_running_delivery_shows_as_running(pusher, alice):
    _, checkpoint_id = paused(pusher)
    decision = Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="resume")
    assert decision.start_attempt()
    assert pusher.checkpoint(checkpoint_id)["decision"]["state"] == "running"


@override_settings(DELIVERY_MAX_ATTEMPTS=1)
def test_a_failed_delivery_is_no_decision_the_checkpoint_is_back_on_the_queue(pusher, alice):
    _, checkpoint_id = paused(pusher)
    decision = Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="resume")
    decision.start_attempt()
    assert decision.mark_attempt_failed("connection refused")
    body = pusher.checkpoint(checkpoint_id)
    assert body["status"] == "open" and body["decision"] is None


def test_a_handoff_names_the_new_owner(bot, alice):
    bob = make_user("bob")
    workflow_id, checkpoint_id = paused(bot)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="handoff", new_owner=bob, instructions="Call them.")
    decision = bot.checkpoint(checkpoint_id)["decision"]
    assert (decision["action"], decision["new_owner"], decision["state"]) == ("handoff", "bob", "succeeded")
    assert Workflow.objects.get(pk=workflow_id).status == "handed_off"


def test_a_handoff_to_a_human_process_names_the_process(bot, alice):
    _, checkpoint_id = paused(bot)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="handoff", handoff_to="Payments desk")
    assert bot.checkpoint(checkpoint_id)["decision"]["new_owner"] == "Payments desk"


def test_an_abort_reaches_the_agent_and_ends_the_workflow(bot, alice):
    workflow_id, checkpoint_id = paused(bot)
    Decider(checkpoint_of(checkpoint_id)).decide(by=alice, action="abort", instructions="Customer withdrew.")
    assert bot.checkpoint(checkpoint_id)["decision"]["action"] == "abort"
    assert Workflow.objects.get(pk=workflow_id).status == "aborted"


def test_confirmations_of_unknown_effects_reach_the_agent(bot, alice):
    _, checkpoint_id = paused(bot, refund="pending")
    Decider(checkpoint_of(checkpoint_id)).decide(
        by=alice,
        action="resume",
        confirmations={"T-1042:refund": "happened"},
        confirmation_refs={"T-1042:refund": "R-88"},
        money_confirmed=True,
    )
    decision = bot.checkpoint(checkpoint_id)["decision"]
    assert decision["confirmations"] == {"T-1042:refund": "happened"}


def test_a_decision_awaiting_a_second_approval_is_not_shown_until_approved(bot, alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    workflow_id, checkpoint_id = paused(bot, refund="pending")
    decision = Decider(checkpoint_of(checkpoint_id)).decide(
        by=alice, action="resume", money_confirmed=True, confirmations={"T-1042:refund": "did_not_happen"}
    )
    assert decision.status == "proposed"
    body = bot.checkpoint(checkpoint_id)
    assert body["decision"] is None and body["status"] == "decided"
    assert Decision.objects.get().status == "proposed"
    assert decision.approve(by=bob)
    assert bot.checkpoint(checkpoint_id)["decision"]["state"] == "succeeded"


def test_the_resume_state_answered_is_the_one_recorded(bot):
    workflow_id = bot.create_workflow()["id"]
    bot.report(workflow_id, **READ_TICKET)
    body = bot.open_checkpoint(workflow_id, at_seq=2)
    checkpoint = checkpoint_of(body["id"])
    assert body["resume_state"] == checkpoint.resume_state
    assert bot.checkpoint(body["id"])["resume_state"] == checkpoint.resume_state
    assert checkpoint.resume_state["last_verified_output"] == READ_TICKET["output"]
