"""The worked example of DESIGN.md, end to end through the Agent API.

A support agent refunds ticket T-1042: (1) read ticket, (2) model decides,
(3) issue refund (effect, money), (4) write ticket note (effect), (5) notify
customer (effect, user-visible promise). The model dies between 3 and 4.
"""

import pytest

from tests.apitools import DECIDE_REFUND, READ_TICKET, api_agent, assert_error, issue_refund
from tests.helpers import make_user
from workflows.models import Checkpoint, Decider, Step, Workflow

REMAINING = {"remaining": ["write_ticket_note", "notify_customer"]}
# The agent's own account of what a resume will do: the note and the message, no more money.
PLAN = [{"name": "write_ticket_note", "kind": "effect"}, {"name": "notify_customer", "kind": "effect"}]
NOTE = {
    "seq": 4,
    "name": "write_ticket_note",
    "kind": "effect",
    "status": "committed",
    "input": {"note": "Refunded 42.00 EUR (R-88)."},
    "idempotency_key": "T-1042:note",
    "external_ref": "N-7",
}
NOTIFY = {
    "seq": 5,
    "name": "notify_customer",
    "kind": "effect",
    "status": "committed",
    "input": {"message": "Your refund will arrive within 5 days."},
    "idempotency_key": "T-1042:notify",
    "external_ref": "M-3",
}


@pytest.fixture
def olivia(db):
    return make_user("olivia")


@pytest.fixture
def bot(olivia):
    return api_agent("support-bot", owner=olivia)


def crash_between_refund_and_note(bot, *, refund: str = "committed", **plan: list | None) -> tuple[str, dict]:
    workflow_id = bot.create_workflow("T-1042")["id"]
    for step in (READ_TICKET, DECIDE_REFUND, issue_refund(refund)):
        bot.report(workflow_id, **step)
    checkpoint = bot.open_checkpoint(
        workflow_id,
        reason="model_timeout",
        detail="model timed out after step 3",
        at_seq=4,
        state=REMAINING,
        **(plan or {"plan": PLAN}),
    )
    return workflow_id, checkpoint


def test_the_checkpoint_says_refund_committed_note_and_message_not_done_promise_made(bot):
    workflow_id, checkpoint = crash_between_refund_and_note(bot)
    state = checkpoint["resume_state"]
    # The refund is committed, with its external reference.
    assert [(s["name"], s["status"], s["external_ref"]) for s in state["committed"]] == [
        ("issue_refund", "committed", "R-88")
    ]
    # Neither the ticket note nor the customer message happened; nothing is pending or unknown.
    names = {s["name"] for s in state["committed"] + state["unknown_effects"]}
    assert not names & {"write_ticket_note", "notify_customer"}
    assert state["pending"] is None
    assert state["unknown_effects"] == []
    assert state["state"] == REMAINING
    # The promise made to the customer travels with the checkpoint.
    assert state["promises"] == ["refund within 5 days"]
    assert state["last_verified_output"] == READ_TICKET["output"]
    # The owner is the agent's owner.
    assert bot.workflow(workflow_id)["owner"] == "olivia"
    assert bot.workflow(workflow_id)["status"] == "paused"


def test_after_the_resume_the_refund_is_not_issued_twice_and_the_same_owner_has_the_workflow(bot, alice):
    workflow_id, checkpoint = crash_between_refund_and_note(bot)
    Decider(Checkpoint.objects.get(pk=checkpoint["id"])).decide(
        by=alice, action="resume", instructions="Write the note, then notify."
    )
    decision = bot.checkpoint(checkpoint["id"])["decision"]
    assert (decision["action"], decision["state"]) == ("resume", "succeeded")
    assert bot.workflow(workflow_id)["status"] == "running"

    # A resumed agent that replays its log resends the refund: recorded once, not issued again.
    bot.report(workflow_id, **issue_refund(), expect_status=200)
    # Issuing the refund again under a new seq is refused by its idempotency key.
    assert_error(
        bot.post(f"/workflows/{workflow_id}/steps", issue_refund(seq=6, status="pending", external_ref=None)),
        409,
        "idempotency_key_taken",
        "idempotency_key",
    )
    # The note and the message are written once each; a retried report changes nothing.
    for step in (NOTE, NOTIFY):
        bot.report(workflow_id, **step)
        bot.report(workflow_id, **step, expect_status=200)
    body = bot.finish(workflow_id, "completed", summary="Refunded, noted and notified.")

    assert body["status"] == "completed"
    assert body["owner"] == "olivia"
    effects = Step.objects.filter(workflow_id=workflow_id, kind="effect")
    assert sorted(effects.values_list("idempotency_key", flat=True)) == [
        "T-1042:note",
        "T-1042:notify",
        "T-1042:refund",
    ]
    assert Workflow.objects.get(pk=workflow_id).owner.username == "olivia"


def test_a_refund_still_pending_at_the_crash_is_an_unknown_effect(bot):
    workflow_id, checkpoint = crash_between_refund_and_note(bot, refund="pending")
    state = checkpoint["resume_state"]
    assert [(s["name"], s["idempotency_key"], s["status"]) for s in state["unknown_effects"]] == [
        ("issue_refund", "T-1042:refund", "pending")
    ]
    assert state["committed"] == []
    assert state["pending"] is None  # an unknown effect is not a step to simply run next
    assert state["promises"] == ["refund within 5 days"]


def test_an_unknown_refund_must_be_confirmed_before_the_resume_reaches_the_agent(bot, alice):
    workflow_id, checkpoint = crash_between_refund_and_note(bot, refund="pending")
    stored = Checkpoint.objects.get(pk=checkpoint["id"])
    with pytest.raises(ValueError, match="T-1042:refund"):
        Decider(stored).decide(by=alice, action="resume", money_confirmed=True)
    assert bot.checkpoint(checkpoint["id"])["decision"] is None

    Decider(stored).decide(
        by=alice,
        action="resume",
        money_confirmed=True,
        confirmations={"T-1042:refund": "happened"},
        confirmation_refs={"T-1042:refund": "R-88"},
    )
    decision = bot.checkpoint(checkpoint["id"])["decision"]
    assert decision["confirmations"] == {"T-1042:refund": "happened"}
    # Told it happened, the agent records the refund as committed rather than issuing it again.
    bot.report(workflow_id, **issue_refund("committed", input=None), expect_status=200)
    assert Step.objects.get(workflow_id=workflow_id, seq=3).status == "committed"


def test_a_pending_non_effect_step_is_the_pending_action(bot):
    workflow_id = bot.create_workflow("T-1042")["id"]
    bot.report(workflow_id, **READ_TICKET)
    bot.report(workflow_id, **{**DECIDE_REFUND, "status": "pending", "promise": None})
    state = bot.open_checkpoint(workflow_id, at_seq=2)["resume_state"]
    assert state["pending"]["name"] == "decide_refund"
    assert state["unknown_effects"] == []
