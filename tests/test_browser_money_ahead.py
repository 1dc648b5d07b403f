"""In Chromium: the workbench shows what a resume will do and guards the money still ahead (defect 1)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_step, make_workflow
from workflows.models import Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REFUND_AHEAD = [
    {"name": "decide_refund", "kind": "model", "amount": None, "currency": None, "moves_money": False},
    {"name": "issue_refund", "kind": "effect", "amount": "120.60", "currency": "EUR", "moves_money": True},
]


def test_resuming_before_the_refund_asks_the_money_tick_and_a_second_operator(new_page, alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    workflow = make_workflow(external_id="T-1048", title="Refund for T-1048")
    make_step(workflow, 1, "read_ticket", "tool", output={"amount": "120.60"}, verified=True)
    checkpoint = make_checkpoint(workflow, at_seq=2, plan=REFUND_AHEAD)
    page = new_page()
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    # The claim re-renders the workbench: act once it landed, or its late swap hides the next action's answer.
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")

    expect(page.get_by_test_id("plan")).to_contain_text("issue_refund")
    expect(page.get_by_test_id("plan-money")).to_have_text("moves money: 120.60 EUR")
    expect(page.get_by_test_id("resume-summary")).to_contain_text("Refund of 120.60 EUR not issued")
    expect(page.get_by_test_id("money-reasons")).to_contain_text("issue_refund is planned: 120.60 EUR")
    page.screenshot(path="/tmp/shots/money-ahead.png", full_page=True)
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("form-error")).to_contain_text("tick the explicit confirmation")

    page.get_by_test_id("money-confirmed").check()
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "proposed")
    assert Decision.objects.get(checkpoint=checkpoint).status == Decision.Status.PROPOSED


def test_a_checkpoint_without_a_plan_says_so_and_is_treated_as_money(page, alice):
    make_checkpoint()  # a refund workflow committed 42.00 EUR before: the kind moves money
    workflow = make_workflow(external_id="T-1050")
    make_step(workflow, 1, "read_ticket", "tool")
    checkpoint = make_checkpoint(workflow, at_seq=2, plan=None)
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")

    expect(page.get_by_test_id("plan-unknown")).to_contain_text("did not report its plan")
    expect(page.get_by_test_id("money-reasons")).to_contain_text("refund workflows have moved money before")
