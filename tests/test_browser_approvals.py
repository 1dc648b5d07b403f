"""In Chromium: a four-eyes proposal shows up in the Awaiting approval tab of everyone who may approve
it, and is approved or rejected from its row (issue 8, defect 2)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows.models import Decider, Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _propose(alice):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    return Decider(checkpoint).decide(
        by=alice, action="resume", confirmations={key: "did_not_happen"}, money_confirmed=True
    )


def test_bob_approves_alices_proposal_from_the_awaiting_approval_tab(new_page, alice, bob):
    proposal = _propose(alice)
    bobs = new_page()
    login(bobs, bob)
    bobs.goto("/")
    expect(bobs.get_by_test_id("count-approval")).to_have_text("1")
    bobs.get_by_test_id("tab-approval").click()
    row = bobs.get_by_test_id("queue-row")
    expect(row).to_contain_text("proposed by alice")
    bobs.screenshot(path="/tmp/shots/approvals-tab.png")

    row.get_by_test_id("row-review-open").click()  # what is approved is read first (issue 28, item 1)
    row.get_by_test_id("row-approve-seen").check()
    row.get_by_test_id("row-approve").click()

    expect(bobs.get_by_test_id("flash")).to_contain_text("Approved: the decision is queued for delivery.")
    expect(bobs.get_by_test_id("queue-row")).to_have_count(0)
    expect(bobs.get_by_test_id("count-approval")).to_have_text("0")
    assert Decision.objects.get(pk=proposal.pk).status == Decision.Status.QUEUED


def test_a_rejection_from_the_row_keeps_its_note_through_polls_and_needs_one(new_page, alice, bob):
    proposal = _propose(alice)
    bobs = new_page()
    login(bobs, bob)
    bobs.goto("/?scope=approval")
    row = bobs.get_by_test_id("queue-row")
    row.get_by_test_id("row-reject").locator("summary").click()
    note = row.get_by_test_id("row-reject-note")
    note.fill("the ledger shows the refund went out")
    bobs.wait_for_timeout(3500)  # a poll is due: it must not wipe the note being typed
    expect(note).to_have_value("the ledger shows the refund went out")

    row.get_by_test_id("row-reject-submit").click()

    expect(bobs.get_by_test_id("flash")).to_contain_text("Rejected: the checkpoint is back with alice.")
    assert Decision.objects.get(pk=proposal.pk).status == Decision.Status.REJECTED


def test_the_proposer_finds_the_proposal_in_my_workflows_not_in_the_tab(page, alice):
    _propose(alice)
    login(page, alice)
    page.goto("/")
    expect(page.get_by_test_id("count-approval")).to_have_text("0")
    page.goto("/mine/")
    expect(page.get_by_test_id("my-proposal")).to_contain_text("waiting for another operator")
    expect(page.get_by_test_id("my-proposal").locator(".countdown")).to_contain_text("left")
