"""In Chromium: an operator's day (issue 8, items 7, 9 and 10): badges that say what matters, bulk claim
with x, undo of a claim, an abort that spells out its consequence, and deciding on a 390 px phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_worked_example
from workflows.models import Checkpoint, Decision, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_rows_carry_badges_for_money_unknown_outcomes_and_returns(page, alice):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    login(page, alice)
    page.goto("/")
    row = page.get_by_test_id("queue-row")

    expect(row.get_by_test_id("badge-money")).to_have_text("42.00 EUR")
    expect(row.get_by_test_id("badge-unknown")).to_have_text("outcome unknown")
    expect(row.get_by_test_id("badge-returned")).to_have_count(0)
    assert checkpoint.money_at_stake == ["42.00 EUR"]


def test_x_selects_rows_and_one_click_claims_them_all_telling_who_had_the_rest(page, alice, bob):
    first, second, third = (make_checkpoint() for _ in range(3))
    third.claim(by=bob)
    login(page, alice)
    page.goto("/")
    page.keyboard.press("j")
    page.keyboard.press("x")
    page.keyboard.press("j")
    page.keyboard.press("x")
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(page.get_by_test_id("bulk-count")).to_have_text("3")
    page.wait_for_timeout(3500)  # a poll: the selection stays
    expect(page.get_by_test_id("bulk-count")).to_have_text("3")

    page.get_by_test_id("bulk-claim").click()

    expect(page.get_by_test_id("flash")).to_contain_text("Claimed 2; 1 not: bob has already claimed")
    assert {c.assignee.username for c in Checkpoint.objects.filter(pk__in=[first.pk, second.pk])} == {"alice"}
    expect(page.get_by_test_id("bulk-count")).to_have_text("0")


def test_bulk_assign_gives_the_selected_rows_to_another_operator(page, alice, bob):
    checkpoints = [make_checkpoint() for _ in range(2)]
    login(page, alice)
    page.goto("/")
    for box in page.get_by_test_id("select-row").all():
        box.check()
    page.get_by_test_id("bulk-assign-to").select_option("bob")
    page.get_by_test_id("bulk-assign").click()

    expect(page.get_by_test_id("flash")).to_contain_text("Assigned 2 to bob.")
    assert {Checkpoint.objects.get(pk=c.pk).assignee.username for c in checkpoints} == {"bob"}


def test_a_claim_can_be_undone_from_the_row(page, alice):
    checkpoint = make_checkpoint()
    login(page, alice)
    page.goto("/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Undo claim")

    page.get_by_test_id("undo-claim").click()

    expect(page.get_by_test_id("claim")).to_be_visible()
    assert Checkpoint.objects.get(pk=checkpoint.pk).status == Checkpoint.Status.OPEN


def test_abort_spells_out_what_is_lost_and_nothing_happens_unless_confirmed(page, alice):
    checkpoint = make_checkpoint()
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("instructions").fill("Customer withdrew the request.")
    messages = []

    page.once("dialog", lambda dialog: (messages.append(dialog.message), dialog.dismiss()))
    page.get_by_test_id("decide-abort").click()
    page.wait_for_timeout(500)
    assert not Decision.objects.exists()
    assert "for good" in messages[0] and "ticket note not written" in messages[0]
    assert "refund within 5 days" in messages[0] and "cannot be undone" in messages[0]

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("decide-abort").click()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")
    assert Decision.objects.get().action == "abort"


def test_on_a_390_px_phone_an_operator_reads_confirms_and_decides(browser, live_server, alice):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    try:
        login(page, alice)
        page.goto(f"/checkpoints/{checkpoint.pk}/")  # from a notification's link
        expect(page.get_by_test_id("resume-summary")).to_contain_text("Refund of 42.00 EUR: outcome unknown")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        page.get_by_test_id("claim").tap()
        expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")
        page.get_by_test_id("confirm-did-not-happen").tap()
        page.get_by_test_id("money-confirmed").tap()
        page.screenshot(path="/tmp/shots/phone-workbench.png", full_page=True)
        page.get_by_test_id("decide-resume").tap()

        expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")
        assert Workflow.objects.get(pk=checkpoint.workflow_id).status == Workflow.Status.RESUMING
        page.goto("/")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        page.screenshot(path="/tmp/shots/phone-queue.png")
    finally:
        context.close()
