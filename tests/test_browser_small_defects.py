"""In Chromium: the smaller defects of issue 8 (defect 6) stay fixed."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.apitools import api_agent
from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows.models import Decider, Decision, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _claimed(page, user, checkpoint):
    login(page, user)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")


def test_a_handoff_target_too_long_says_why(page, alice):
    checkpoint = make_checkpoint()
    _claimed(page, alice, checkpoint)
    target = page.get_by_test_id("handoff-to")
    target.evaluate("el => el.removeAttribute('maxlength')")  # a pasted value, an old browser, a script
    target.fill("Finance desk " + "x" * 300)
    page.get_by_test_id("decide-handoff").click()

    expect(page.get_by_test_id("field-error")).to_contain_text("at most 200 characters")
    assert not Decision.objects.exists()


def test_an_empty_rejection_is_not_sent(new_page, alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    decision = Decider(checkpoint).decide(
        by=alice, action="resume", confirmations={key: "did_not_happen"}, money_confirmed=True
    )
    page = new_page()
    login(page, bob)
    page.goto(f"/checkpoints/{checkpoint.pk}/")

    page.get_by_test_id("reject").click()
    expect(page.get_by_test_id("reject-note")).to_have_js_property("validity.valueMissing", True)
    page.get_by_test_id("reject-note").evaluate("el => el.removeAttribute('required')")  # past the browser
    page.get_by_test_id("reject").click()

    expect(page.get_by_test_id("flash")).to_contain_text("Say why you reject it")
    assert Decision.objects.get(pk=decision.pk).status == Decision.Status.PROPOSED


def test_a_toast_never_covers_the_sla_clock(page, alice):
    checkpoint = make_checkpoint()
    _claimed(page, alice, checkpoint)
    toast = page.get_by_test_id("flash").locator(".toast").first
    expect(toast).to_be_visible()

    a, b = toast.bounding_box(), page.get_by_test_id("sla-clock").bounding_box()
    overlap = not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )
    assert not overlap, (a, b)


def test_c_on_a_row_someone_else_holds_says_who(page, alice, bob):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=bob)
    login(page, alice)
    page.goto("/")
    page.keyboard.press("j")
    page.keyboard.press("c")

    expect(page.get_by_test_id("flash")).to_contain_text("bob holds this checkpoint")


def test_an_agent_polling_its_paused_workflow_does_not_show_as_activity(page, alice):
    bot = api_agent()
    workflow_id = bot.create_workflow("T-1077")["id"]
    bot.report(workflow_id, 1, "read_ticket")
    checkpoint_id = bot.open_checkpoint(workflow_id)["id"]
    Workflow.objects.filter(pk=workflow_id).update(last_activity_at=timezone.now() - timedelta(minutes=10))
    for _ in range(3):  # what a paused agent does every few seconds while it waits for the decision
        bot.checkpoint(checkpoint_id)
        bot.workflow(workflow_id)
    login(page, alice)

    page.goto(f"/workflows/{workflow_id}/")

    # Paused ten minutes ago ("1" then a digit: the page may be read a minute later), never "0s ago".
    expect(page.get_by_text(re.compile("last activity"))).to_contain_text(re.compile(r"last activity\s+1\dm ago"))


def test_the_admin_checkpoint_page_leads_to_its_workbench(page, adam):
    checkpoint = make_checkpoint()
    login(page, adam)
    page.goto(f"/admin/workflows/checkpoint/{checkpoint.pk}/change/")

    page.get_by_role("link", name="View on site").click()

    expect(page).to_have_url(re.compile(rf"/checkpoints/{checkpoint.pk}/$"))
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint open")
