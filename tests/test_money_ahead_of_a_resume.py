"""A resume with money still ahead is guarded like one with money pending (issue 8, defect 1).

The agent reports its remaining plan with the checkpoint; a planned effect that moves money asks for
the explicit money tick and, under a four-eyes runbook, a second operator. A checkpoint without a plan
is assumed to move money when its kind of workflow ever has. The regression test replays the path
that let a 120.60 EUR refund out unguarded: the model timed out at ``decide_refund``, before the refund.
"""

from __future__ import annotations

import pytest

from tests.apitools import DECIDE_REFUND, READ_TICKET, api_agent, assert_error
from tests.helpers import make_checkpoint, make_runbook, make_step, make_worked_example, make_workflow
from tests.test_demo_resume import deliver
from workflows.models import Checkpoint, Decider, Decision, Workflow

REFUND_AHEAD = [
    {"name": "issue_refund", "kind": "effect", "amount": "120.60", "currency": "EUR", "moves_money": True},
    {"name": "notify_customer", "kind": "effect", "amount": None, "currency": None, "moves_money": False},
]


def interrupted_before_the_refund(**kwargs):
    """The worked example stopped at step 2: the model timed out deciding, the refund still ahead."""
    workflow = make_workflow(**kwargs)
    make_step(workflow, 1, "read_ticket", "tool", output={"amount": "120.60"}, verified=True)
    make_step(workflow, 2, "decide_refund", "model", status="failed", output={"error": "timed out"})
    return workflow


@pytest.mark.django_db
def test_a_planned_refund_asks_for_the_money_tick(alice):
    checkpoint = make_checkpoint(interrupted_before_the_refund(), at_seq=2, plan=REFUND_AHEAD)

    assert checkpoint.money_reasons() == ["issue_refund is planned: 120.60 EUR"]
    with pytest.raises(ValueError, match="tick the explicit confirmation"):
        Decider(checkpoint).decide(by=alice, action="resume")
    assert Decider(checkpoint).decide(by=alice, action="resume", money_confirmed=True).status == Decision.Status.QUEUED


@pytest.mark.django_db
def test_a_planned_refund_under_four_eyes_waits_for_a_second_operator(alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(interrupted_before_the_refund(), at_seq=2, plan=REFUND_AHEAD)

    decision = Decider(checkpoint).decide(by=alice, action="resume", money_confirmed=True)

    assert decision.status == Decision.Status.PROPOSED
    assert checkpoint.workflow.status == Workflow.Status.PAUSED  # nothing goes out before bob approves
    assert decision.approve(by=bob)
    assert Decision.objects.get(pk=decision.pk).status == Decision.Status.QUEUED


@pytest.mark.django_db
def test_no_plan_is_money_when_the_kind_has_moved_money_before(alice):
    make_worked_example()  # another refund workflow committed a refund of 42.00 EUR
    checkpoint = make_checkpoint(interrupted_before_the_refund(), at_seq=2, plan=None)

    assert checkpoint.plan is None
    assert checkpoint.money_reasons() == [
        "the agent did not report its plan, and refund workflows have moved money before"
    ]
    with pytest.raises(ValueError, match="tick the explicit confirmation"):
        Decider(checkpoint).decide(by=alice, action="resume")


@pytest.mark.django_db
def test_no_plan_is_not_money_for_a_kind_that_never_moved_money(alice):
    workflow = make_workflow(kind="ticket_triage", title="Triage Q-7")
    make_step(workflow, 1, "read_ticket", "tool")
    checkpoint = make_checkpoint(workflow, at_seq=2, plan=None)

    assert not checkpoint.touches_money()
    assert Decider(checkpoint).decide(by=alice, action="resume").status == Decision.Status.QUEUED


@pytest.mark.django_db
def test_a_plan_without_money_needs_no_tick_even_after_a_refund(alice):
    checkpoint = make_checkpoint()  # refund committed; the plan: the note and the message

    assert not checkpoint.touches_money()
    assert Decider(checkpoint).decide(by=alice, action="resume").status == Decision.Status.QUEUED


@pytest.mark.django_db
def test_a_runbook_can_ask_four_eyes_on_every_resume(alice, bob):
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    checkpoint = make_checkpoint()  # no money ahead at all

    decision = Decider(checkpoint).decide(by=alice, action="resume")

    assert decision.status == Decision.Status.PROPOSED
    assert not decision.approve(by=alice)  # never the proposer
    assert decision.refusal(by=alice) == "The second approval must come from another operator."
    assert decision.approve(by=bob)


@pytest.mark.django_db
def test_four_eyes_on_every_resume_leaves_handoffs_alone(alice, bob):
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    checkpoint = make_checkpoint()

    decision = Decider(checkpoint).decide(by=alice, action="handoff", new_owner=bob, instructions="Yours.")

    assert decision.status == Decision.Status.QUEUED


# --- the API: the plan is optional, validated, stored and answered -----------------------------------


@pytest.fixture
def bot(db):
    return api_agent()


def _paused(bot, **fields):
    workflow_id = bot.create_workflow("T-1048")["id"]
    for step in (READ_TICKET, DECIDE_REFUND):
        bot.report(workflow_id, **step)
    return workflow_id, bot.open_checkpoint(workflow_id, at_seq=3, **fields)


def test_the_plan_comes_back_in_the_resume_state_normalised(bot):
    _, checkpoint = _paused(
        bot,
        plan=[
            {"name": "issue_refund", "kind": "effect", "amount": 120.6, "currency": "EUR"},
            {"name": "notify_customer", "kind": "message"},
        ],
    )

    assert checkpoint["resume_state"]["plan"] == [
        {"name": "issue_refund", "kind": "effect", "amount": "120.6", "currency": "EUR", "moves_money": True},
        {"name": "notify_customer", "kind": "message", "amount": None, "currency": None, "moves_money": False},
    ]
    stored = Checkpoint.objects.get(pk=checkpoint["id"])
    assert stored.touches_money()


def test_a_checkpoint_without_a_plan_still_opens_and_says_null(bot):
    _, checkpoint = _paused(bot)

    assert checkpoint["resume_state"]["plan"] is None


def test_an_identical_resend_with_a_plan_answers_the_same_checkpoint(bot):
    plan = [{"name": "issue_refund", "kind": "effect", "amount": "120.60", "currency": "EUR"}]
    workflow_id, first = _paused(bot, plan=plan)

    again = bot.open_checkpoint(workflow_id, at_seq=3, plan=plan, status=200)

    assert again["id"] == first["id"]


@pytest.mark.parametrize(
    ("step", "code", "field"),
    [
        ({"name": "issue_refund", "kind": "effect", "amount": "120.60"}, "currency_required", "plan.0"),
        (
            {"name": "issue_refund", "kind": "effect", "amount": "lots", "currency": "EUR"},
            "invalid_amount",
            "plan.0.amount",
        ),
        (
            {"name": "issue_refund", "kind": "effect", "amount": "-5", "currency": "EUR"},
            "invalid_amount",
            "plan.0.amount",
        ),
        (
            {"name": "issue_refund", "kind": "effect", "amount": "5", "currency": "euro"},
            "string_pattern_mismatch",
            "plan.0.currency",
        ),
        ({"name": "decide_refund", "kind": "model", "amount": "5", "currency": "EUR"}, "money_on_non_effect", "plan.0"),
        ({"name": "issue_refund", "kind": "payment"}, "invalid_choice", "plan.0.kind"),
        ({"kind": "effect"}, "missing_field", "plan.0.name"),
    ],
    ids=["no-currency", "not-a-number", "negative", "bad-currency", "money-on-a-model-step", "bad-kind", "no-name"],
)
def test_a_bad_plan_step_is_a_422_naming_the_field(bot, step, code, field):
    workflow_id = bot.create_workflow("T-1049")["id"]

    response = bot.post(f"/workflows/{workflow_id}/checkpoints", {"reason": "model_timeout", "plan": [step]})

    assert_error(response, 422, code, field)


# --- the regression: T-1048 through the demo fleet ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_t1048_resumed_before_its_refund_asks_money_and_four_eyes_and_refunds_once(fleet, olivia, operator, bob):
    make_runbook(slug="refunds", workflow_kind="refund", requires_four_eyes=True)
    with fleet.journal.transaction() as conn:  # the next refund ticket is T-1048
        conn.execute("INSERT INTO counters (name, value) VALUES ('refund', 1047)")
    agent = fleet.agent(owner=olivia, forced={"decide_refund": "model_timeout"})
    run, outcome = agent.start()
    assert (run.external_id, outcome) == ("T-1048", "paused")
    workflow = Workflow.objects.get(external_id="T-1048")
    checkpoint = workflow.checkpoints.get()
    ticket = checkpoint.state["ticket"]

    # The agent said what a resume will do, with the refund's amount at stake.
    assert [(s["name"], s["moves_money"]) for s in checkpoint.plan] == [
        ("decide_refund", False),
        ("issue_refund", True),
        ("write_ticket_note", False),
        ("notify_customer", False),
    ]
    assert (checkpoint.plan[1]["amount"], checkpoint.plan[1]["currency"]) == (ticket["amount"], ticket["currency"])
    assert checkpoint.unknown_effects == [] and checkpoint.resume_state["pending"]["name"] == "decide_refund"

    with pytest.raises(ValueError, match="tick the explicit confirmation"):
        Decider(checkpoint).decide(by=operator, action="resume", instructions="Carry on.")
    proposal = Decider(checkpoint).decide(by=operator, action="resume", instructions="Carry on.", money_confirmed=True)
    assert proposal.status == Decision.Status.PROPOSED
    assert fleet.executed("T-1048")["refund"] == 0  # no money moved on one operator's say-so

    assert proposal.approve(by=bob)
    deliver(fleet, Decision.objects.get(pk=proposal.pk))

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert fleet.executed("T-1048") == {"refund": 1, "note": 1, "message": 1}
    [refund] = fleet.ledgers.executions_for("T-1048:refund")
    assert (refund.amount, refund.currency) == (ticket["amount"], ticket["currency"])
