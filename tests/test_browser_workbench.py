"""The workbench in a real browser: confirm the unknown refund, resume, hand off, abort, see a failure."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_worked_example
from workflows.models import Checkpoint, Decision, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open_claimed(page, user, checkpoint) -> None:
    login(page, user)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("claim-panel").get_by_test_id("assignee")).to_contain_text("you")


def test_confirming_the_unknown_refund_unlocks_resume_and_the_decision_is_queued(page, alice):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    _open_claimed(page, alice, checkpoint)
    expect(page.get_by_test_id("resume-summary")).to_contain_text("Refund of 42.00 EUR: outcome unknown")
    resume = page.get_by_test_id("decide-resume")
    expect(resume).to_be_disabled()

    refund = page.get_by_test_id("unknown-effect").filter(has_text="issue_refund")
    refund.get_by_test_id("confirm-happened").check()
    expect(resume).to_be_disabled()  # happened needs its reference
    refund.get_by_test_id("confirm-ref").fill("R-88")
    expect(resume).to_be_enabled()
    page.get_by_test_id("instructions").fill("Write the ticket note, then notify the customer.")
    page.get_by_test_id("money-confirmed").check()
    resume.click()

    status = page.get_by_test_id("decision-status")
    expect(status).to_have_attribute("data-status", "queued")
    expect(page.get_by_test_id("decision-state")).to_have_text("queued")
    decision = Decision.objects.get(checkpoint=checkpoint)
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    assert decision.confirmations == {key: "happened"} and decision.confirmation_refs == {key: "R-88"}

    decision.start_attempt()  # what a worker does; the page follows by itself
    expect(status).to_have_attribute("data-status", "running")
    decision.mark_succeeded()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "succeeded")
    expect(page.get_by_test_id("workbench-actions")).to_contain_text("Resumed")


def test_forgetting_the_money_confirmation_keeps_what_was_typed(page, alice):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    _open_claimed(page, alice, checkpoint)
    page.get_by_test_id("confirm-did-not-happen").check()
    page.get_by_test_id("instructions").fill("Issue the refund once.")
    page.get_by_test_id("decide-resume").click()

    expect(page.get_by_test_id("form-error")).to_contain_text("tick the explicit confirmation")
    expect(page.get_by_test_id("instructions")).to_have_value("Issue the refund once.")
    expect(page.get_by_test_id("confirm-did-not-happen")).to_be_checked()
    expect(page.get_by_test_id("decide-resume")).to_be_enabled()


def test_a_handoff_to_bob_lands_in_his_workflows(new_page, alice, bob):
    checkpoint = make_checkpoint()
    alices = new_page()
    _open_claimed(alices, alice, checkpoint)
    alices.get_by_test_id("new-owner").select_option("bob")
    alices.get_by_test_id("instructions").fill("Refund R-88 went out; call the customer.")
    alices.get_by_test_id("decide-handoff").click()
    expect(alices.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")

    decision = Decision.objects.get(checkpoint=checkpoint)
    decision.start_attempt()
    decision.mark_succeeded()

    bobs = new_page()
    login(bobs, bob)
    bobs.goto("/mine/")
    packet = bobs.get_by_test_id("handoff-packet")
    expect(packet).to_contain_text(checkpoint.workflow.title)
    expect(packet.get_by_test_id("handed-off-by")).to_have_text("alice")
    expect(packet.get_by_test_id("handoff-note")).to_have_text("Refund R-88 went out; call the customer.")
    packet.get_by_test_id("complete-handoff").click()
    expect(bobs.get_by_test_id("handed-off")).to_contain_text("Nothing handed off to you.")
    assert Workflow.objects.get(pk=checkpoint.workflow_id).status == Workflow.Status.COMPLETED


def test_abort_with_a_reason(page, alice):
    checkpoint = make_checkpoint()
    _open_claimed(page, alice, checkpoint)
    # The operator confirms the spelled-out consequence each time (issue 8); the reason is still required.
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("decide-abort").click()
    expect(page.locator(".field-error")).to_contain_text("Say why the workflow is aborted.")

    page.get_by_test_id("instructions").fill("The customer withdrew the request.")
    page.get_by_test_id("decide-abort").click()

    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")
    expect(page.get_by_test_id("decision-status")).to_contain_text("The customer withdrew the request.")


def test_a_failed_delivery_shows_the_failure_and_the_checkpoint_is_back_on_the_queue(page, alice, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    checkpoint = make_checkpoint()
    _open_claimed(page, alice, checkpoint)
    page.get_by_test_id("instructions").fill("Carry on.")
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")

    decision = Decision.objects.get(checkpoint=checkpoint)
    decision.start_attempt()
    decision.mark_attempt_failed("resume endpoint answered 502")

    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "failed")
    expect(page.get_by_test_id("decision-error")).to_contain_text("resume endpoint answered 502")
    expect(page.get_by_test_id("decision-form")).to_be_visible()  # the panel refreshed: decide again
    assert Checkpoint.objects.get(pk=checkpoint.pk).status == Checkpoint.Status.OPEN

    page.goto("/")
    expect(page.locator(f"#checkpoint-{checkpoint.pk}")).to_be_visible()
    expect(page.locator(f"#checkpoint-{checkpoint.pk}").get_by_test_id("claim")).to_be_visible()
