"""In Chromium: the Awaiting-approval row shows what the approver approves (the amount and its currency, the
one-line resume state, the proposer's note) before its Approve button works (issue 28, item 1).

The amount here is spelt ``amount_cents`` on purpose: the row shows it as 420.00 EUR, by the money rule.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_step, make_workflow
from workflows.models import Decider, Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _propose(alice):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    workflow = make_workflow()
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-77"}, verified=True)
    make_step(
        workflow,
        2,
        "issue_refund",
        "effect",
        status="pending",
        input={"order": "O-9", "amount_cents": 42000, "currency": "EUR"},
        promise="refund within 5 days",
    )
    checkpoint = make_checkpoint(workflow, at_seq=2, plan=[])
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    return Decider(checkpoint).decide(
        by=alice,
        action="resume",
        confirmations={key: "did_not_happen"},
        money_confirmed=True,
        instructions="The ledger has no refund for O-9: issue it once.",
    )


def test_the_approval_row_shows_amount_state_and_note_before_approve_works(new_page, alice, bob):
    proposal = _propose(alice)
    bobs = new_page()
    login(bobs, bob)
    bobs.goto("/?scope=approval")
    row = bobs.get_by_test_id("queue-row")
    expect(row.get_by_test_id("badge-money")).to_have_text("420.00 EUR")
    expect(row.get_by_test_id("row-approve")).to_be_hidden()  # no one-click approval of unseen money

    row.get_by_test_id("row-review-open").click()

    expect(row.get_by_test_id("review-money")).to_have_text("420.00 EUR")
    expect(row.get_by_test_id("review-state")).to_contain_text("Refund of 420.00 EUR: outcome unknown")
    expect(row.get_by_test_id("review-state")).to_contain_text("promised: refund within 5 days")
    expect(row.get_by_test_id("review-confirmation")).to_contain_text("did not happen")
    expect(row.get_by_test_id("review-note")).to_have_text("The ledger has no refund for O-9: issue it once.")
    expect(row.get_by_test_id("row-approve-seen").locator("xpath=..")).to_contain_text("resume moving 420.00 EUR")
    bobs.screenshot(path="/tmp/shots/approval-row-review.png")

    form = row.locator("form.review-approve")
    assert form.evaluate("f => !f.checkValidity()")  # not ticked: the browser will not send it
    row.get_by_test_id("row-approve").click()
    expect(row.get_by_test_id("row-approve-seen")).to_be_visible()
    assert Decision.objects.get(pk=proposal.pk).status == Decision.Status.PROPOSED

    row.get_by_test_id("row-approve-seen").check()
    row.get_by_test_id("row-approve").click()

    expect(bobs.get_by_test_id("flash")).to_contain_text("Approved: the decision is queued for delivery.")
    assert Decision.objects.get(pk=proposal.pk).status == Decision.Status.QUEUED
