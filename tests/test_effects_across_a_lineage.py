"""Effects are one across a lineage (issue 22, finding 16): a fork runs its steps under new keys, so no key check
sees that the refund it issues is the one its original issued. Forking T-1010 from `decide_refund` paid the
customer twice while the fork form said "the fork may move money", the workbench showed no plan and no amount,
and the ledger's duplicate check and the dashboard's duplicate-effect figure both stayed at zero."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_user
from tests.test_demo_resume import deliver
from tests.test_fork_and_failover import able, finished_run
from tests.test_no_path_weaker_than_its_checkpoint import MONEY_PLAN, refund_run
from workflows import metrics, readiness
from workflows.models import Agent, Checkpoint, Decider, Decision, fork_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_fork_that_refunds_again_is_named_before_and_counted_after_in_the_ledger_the_figures_and_readiness(
    fleet, olivia, operator
):
    agent, original = finished_run(fleet, olivia)
    able(agent.name, "fork")
    refund = original.steps.get(name="issue_refund")
    money = f"{refund.input['amount']} {refund.input['currency']}"
    assert metrics.workflows_behind(metrics.Filters.last(), "duplicate_attempt").count() == 0

    with pytest.raises(ValueError) as refused:
        fork_workflow(original, from_seq=2, by=operator, reason="Decide the refund again.", money_confirmed=True)
    assert f"the original committed issue_refund ({money}) at step 3, ref {refund.external_ref}" in str(refused.value)
    decision = fork_workflow(
        original,
        from_seq=2,
        by=operator,
        reason="Decide the refund again.",
        money_confirmed=True,
        repeats_confirmed=[refund.pk],
    )
    assert decision.repeats_confirmed == [
        {
            "step_id": refund.pk,
            "workflow_id": original.pk,
            "seq": 3,
            "name": "issue_refund",
            "external_ref": refund.external_ref,
            "amount": refund.input["amount"],
            "currency": refund.input["currency"],
        }
    ]
    fork = decision.checkpoint.workflow
    assert [s["amount"] for s in decision.checkpoint.plan if s["moves_money"]] == [refund.input["amount"]]
    deliver(fleet, decision)

    fork.refresh_from_db()
    assert fork.status == "completed" and fleet.executed(fork.external_id)["refund"] == 1
    # What the operator confirmed happened, and every place that counts duplicates now says so.
    assert fleet.ledgers.duplicates() == {f"{original.external_id}:refund (across forks)": 2}
    assert set(
        metrics.workflows_behind(metrics.Filters.last(), "duplicate_attempt").values_list("external_id", flat=True)
    ) == {fork.external_id}
    findings = [f.text for f in readiness.review_kind(metrics.Filters.last(), "refund").findings]
    assert any("repeated one its lineage had committed" in text for text in findings), findings


def test_a_fork_that_runs_no_earlier_effect_again_counts_no_duplicate(fleet, olivia, operator):
    agent, original = finished_run(fleet, olivia)
    able(agent.name, "fork")
    Agent.objects.filter(name=agent.name).update(fork_edits=["effect"])
    # Forked from the customer message: the refund and the note are carried as copies, under their keys.
    decision = fork_workflow(
        original,
        from_seq=5,
        by=operator,
        reason="Tell the customer again, politely.",
        edited_input={"text": "Sorry for the wait."},
    )
    assert not decision.checkpoint.touches_money() and decision.status == Decision.Status.QUEUED  # no tick asked
    deliver(fleet, decision)

    assert not [k for k in fleet.ledgers.duplicates() if "refund" in k]
    # The message was sent again (what the operator forked for): the figure counts it, the ledger's money check not.
    behind = set(
        metrics.workflows_behind(metrics.Filters.last(), "duplicate_attempt").values_list("external_id", flat=True)
    )
    assert behind == {decision.checkpoint.workflow.external_id}


@pytest.fixture
def reopened_fork(settings, alice):
    """A fork of a completed refund run from step 2 whose delivery failed: back on the queue, refund ahead."""
    settings.DELIVERY_MAX_ATTEMPTS = 1
    agent, _token = Agent.register("forker")
    Agent.objects.filter(pk=agent.pk).update(capabilities=["fork"])
    agent.refresh_from_db()
    original = refund_run(agent)
    make_checkpoint(original, at_seq=4, plan=MONEY_PLAN)
    refund = original.steps.get(name="issue_refund")
    decision = fork_workflow(
        original, from_seq=2, by=alice, reason="decide again", money_confirmed=True, repeats_confirmed=[refund.pk]
    )
    assert decision.start_attempt() and decision.mark_attempt_failed("unreachable")
    return Checkpoint.objects.get(pk=decision.checkpoint_id), refund


def test_the_forks_workbench_lists_the_earlier_refund_and_a_resume_needs_its_tick_again(reopened_fork, bob):
    checkpoint, refund = reopened_fork
    client = Client()
    client.force_login(bob)
    page = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert "committed <code>issue_refund</code>\n      at step 3, <strong>247.92 EUR</strong>" in page
    assert "this fork will run <code>issue_refund</code> again" in page
    assert f'name="repeat" value="{refund.pk}"' in page
    assert "moves money: 247.92 EUR" in page  # the plan, with its amount

    refused = client.post(reverse("decide", args=[checkpoint.pk]), {"action": "resume", "money_confirmed": "1"})
    assert refused.status_code == 422
    assert "the original committed issue_refund (247.92 EUR) at step 3, ref R-0A1B2C3D" in refused.content.decode()
    assert not checkpoint.decisions.active().exists()

    client.post(
        reverse("decide", args=[checkpoint.pk]),
        {"action": "resume", "money_confirmed": "1", "repeat": [str(refund.pk)]},
    )
    decision = checkpoint.decisions.active().get()
    assert decision.status == Decision.Status.QUEUED and decision.repeats_confirmed[0]["step_id"] == refund.pk


def test_a_repeated_refund_under_four_eyes_waits_for_a_second_operator_who_sees_it(reopened_fork, bob):
    checkpoint, refund = reopened_fork
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        runbook_version=make_runbook(slug="strict", workflow_kind="other-kind", requires_four_eyes=True).current_version
    )
    checkpoint.refresh_from_db()
    decision = Decider(checkpoint).decide(by=bob, action="resume", money_confirmed=True, repeats_confirmed=[refund.pk])
    assert decision.status == Decision.Status.PROPOSED
    client = Client()
    client.force_login(make_user("carol"))
    page = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'data-testid="approve"' in page and "this fork will run <code>issue_refund</code> again" in page
